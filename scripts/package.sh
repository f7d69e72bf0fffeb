#!/usr/bin/env bash
# Builds the Debian packages of redlock (CPack, cmake/RedlockPackage.cmake):
#
#   libredlock-dev_<version>-1_<arch>.deb   static libraries, headers, CMake
#                                           package, redlock.pc
#   redlock_<version>-1_<arch>.deb          the `redlock` tool and redlock(1)
#
#   scripts/package.sh [--build-dir DIR] [--out DIR] [--maintainer "Name <mail>"]
#   scripts/package.sh --from-build DIR [--out DIR]
#
#   --build-dir DIR   configure and build only the library and the tool in DIR
#                     (default: build-package), installed under /usr with
#                     Debian's multiarch library directory
#   --from-build DIR  package an existing build tree as it is (no configure,
#                     no build): what the package test does with its own
#   --out DIR         where the .deb files go (default: DIR/packages)
#   --maintainer M    the packages' Maintainer field
#
# Prints the path of each package, one per line, on stdout. CPACK names the
# cpack binary (default: the one on PATH). Installs the
# Debian packages the build needs when run as root; as any other user it
# prints the apt-get line to run and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build-package
from_build=""
out=""
maintainer=""
while (($#)); do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --from-build) from_build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --maintainer) maintainer="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "package.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -z "$from_build" ]]; then
  scripts/install-packages.sh build-essential cmake pkg-config dpkg-dev \
    libhiredis-dev libabsl-dev libssl-dev
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr
        -DREDLOCK_BUILD_TESTS=OFF -DREDLOCK_BUILD_BENCH=OFF -DREDLOCK_BUILD_CHAOS=OFF
        -DREDLOCK_BUILD_EXAMPLES=OFF -DREDLOCK_BUILD_FUZZERS=OFF -DREDLOCK_BUILD_TOOLS=ON
        -DREDLOCK_INSTALL=ON -DREDLOCK_SANITIZE=)
  [[ -n "$maintainer" ]] && args+=("-DREDLOCK_PACKAGE_MAINTAINER=$maintainer")
  cmake -S . -B "$build_dir" "${args[@]}" >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" >&2
  tree=$build_dir
else
  tree=$from_build
  [[ -f "$tree/CPackConfig.cmake" ]] ||
    { echo "package.sh: $tree has no CPackConfig.cmake (configured with REDLOCK_INSTALL=ON?)" >&2; exit 1; }
  [[ -z "$maintainer" ]] ||
    { echo "package.sh: --maintainer needs a build of its own (not --from-build)" >&2; exit 2; }
  # What the packages hold, built if it is not (CPack builds nothing:
  # cmake/RedlockPackage.cmake).
  cmake --build "$tree" -j"$(nproc)" --target redlock redlock_multilock redlock-cli redlock_man >&2
fi
command -v dpkg-shlibdeps >/dev/null ||
  { echo "package.sh: dpkg-shlibdeps is missing (apt-get install dpkg-dev)" >&2; exit 1; }

tree=$(cd "$tree" && pwd)
out=${out:-$tree/packages}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/libredlock-dev_*.deb "$out"/redlock_*.deb
log="$out/cpack.log"
if ! (cd "$tree" && "${CPACK:-cpack}" -G DEB -B "$out" >"$log" 2>&1); then
  cat "$log" >&2
  echo "package.sh: cpack failed" >&2
  exit 1
fi
rm -rf "$out/_CPack_Packages"
debs=("$out"/libredlock-dev_*.deb "$out"/redlock_*.deb)
for deb in "${debs[@]}"; do
  [[ -f "$deb" ]] || { cat "$log" >&2; echo "package.sh: cpack made no $deb" >&2; exit 1; }
done
printf '%s\n' "${debs[@]}"
