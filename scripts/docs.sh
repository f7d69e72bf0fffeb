#!/usr/bin/env bash
# Builds the API reference: Doxygen over the public headers (redlock/*.h,
# multilock/multi_lock.h; docs/reference/Doxyfile), into build/docs/html.
# Fails on any Doxygen warning, and so on any public class, function,
# member or enumeration without a comment.
#
#   scripts/docs.sh [--out DIR] [--check]
#
#   --out DIR   write the reference to DIR/html (default: build/docs)
#   --check     also prove the check itself: the same run over a copy of the
#               headers with one undocumented function added must fail and
#               name it (the ctest redlock_api_reference_check runs this)
#
# Needs doxygen (scripts/setup.sh installs it) and perl. Without doxygen it
# prints the install line and exits 77 (a skip for ctest), or 1 under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD

out=build/docs
check=0
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --check) check=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "docs.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

for tool in doxygen perl; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "docs.sh: $tool is not installed (as root: apt-get install -y --no-install-recommends $tool," \
         "or scripts/setup.sh --no-build)" >&2
    [[ "${CI:-}" == "true" ]] && exit 1
    exit 77
  fi
done

# run_doxygen SOURCE_DIR OUT_DIR LOG: 0 when the reference built without a warning.
run_doxygen() {
  mkdir -p "$2"
  REDLOCK_SOURCE_DIR="$1" REDLOCK_DOCS_OUT="$2" doxygen "$1/docs/reference/Doxyfile" >"$3" 2>&1
}

mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/doxygen.log"
if ! run_doxygen "$src" "$out" "$log"; then
  echo "docs.sh: the API reference has warnings (docs/reference/Doxyfile fails on any):" >&2
  cat "$log" >&2
  echo "docs.sh: every public class, function, member and enumeration needs a comment" \
       "(the // comment right above it, or a trailing // on its line)" >&2
  exit 1
fi
echo "docs.sh: API reference in $out/html/index.html"

((check)) || exit 0

# The check must be able to fail: a copy of the headers with one public
# function that has no comment.
tmp=$(mktemp -d /tmp/redlock-docs-check-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/docs" "$tmp/src/multilock"
cp -r "$src/redlock" "$tmp/src/redlock"
cp -r "$src/docs/reference" "$tmp/src/docs/reference"
cp "$src/multilock/multi_lock.h" "$tmp/src/multilock/"
perl -0pi -e 's|\n\}  // namespace redlock\n|\n\nint RedlockDocsCheckUndocumented();\n\n}  // namespace redlock\n|' \
  "$tmp/src/redlock/lease.h"
grep -q RedlockDocsCheckUndocumented "$tmp/src/redlock/lease.h" ||
  { echo "docs.sh: --check could not add the undocumented function to redlock/lease.h" >&2; exit 1; }
if run_doxygen "$tmp/src" "$tmp/out" "$tmp/doxygen.log"; then
  echo "docs.sh: --check: an undocumented public function did not fail the reference build" >&2
  exit 1
fi
if ! grep -q 'RedlockDocsCheckUndocumented.*not documented' "$tmp/doxygen.log"; then
  echo "docs.sh: --check: the reference build failed, but not naming the undocumented function:" >&2
  cat "$tmp/doxygen.log" >&2
  exit 1
fi
echo "docs.sh: --check: an undocumented public function fails the build, as it must"
