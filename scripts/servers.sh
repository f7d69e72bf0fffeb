#!/usr/bin/env bash
# Installs or builds the servers the tests, the bench and the chaos harness
# can start by name (REDLOCK_SERVER=NAME, --server NAME), from Debian's
# archive only.
#
#   scripts/servers.sh NAME...          install or build these servers
#   scripts/servers.sh --all            all of them
#   scripts/servers.sh --print-path NAME
#                                       the server binary of NAME; exit 1
#                                       (and the command to install it on
#                                       stderr) when it is not installed
#   scripts/servers.sh --list           the names, one a line
#
# Names and where each comes from:
#   redis-7.0   Debian 12's redis-server and redis-sentinel (the default)
#   valkey-8.0  valkey-server and valkey-sentinel from bookworm-backports
#   valkey-9.1  built from the source package `valkey` of Debian unstable:
#               make BUILD_TLS=yes MALLOC=libc BUILD_LUA=module OPTIMIZATION=-O2
#               valkey-server (Lua is a module, lib/libvalkeylua.so, that the test kit
#               loads with --loadmodule; a node started without it has no
#               scripting engine)
#   redis-8.0   built from the source package `redis` of Debian unstable:
#               make BUILD_TLS=yes MALLOC=libc OPTIMIZATION=-O2 redis-server (Lua built in;
#               the Redis 8 modules, BUILD_WITH_MODULES, are left out)
# OPTIMIZATION=-O2 leaves out upstream's -O3 -flto: the link-time
# optimisation alone took minutes on a loaded 2-core machine, and test
# servers need no last percent of speed.
# A built server's sentinel is a symlink to its server binary named
# *-sentinel (the binary runs as a Sentinel under that name).
#
# Built servers go to $REDLOCK_SERVERS_DIR (default
# ~/.cache/redlock-servers, never the git tree): NAME/bin/ and NAME/lib/,
# and the downloaded source packages to src/. The script writes
# /etc/apt/sources.list.d/redlock-servers.sources (bookworm-backports, and a
# deb-src line for unstable) and /etc/apt/preferences.d/redlock-servers
# (unstable pinned at -10: no binary package is ever installed from it).
# Build dependencies come from bookworm (build-essential libssl-dev
# pkg-config). Idempotent: a server already there at its version is left
# alone, and nothing is downloaded.
#
# If unstable has moved to another minor version than the name says, the
# build stops and says so rather than give a server a false name.
#
# Measured on this project's 2-core machine (2026-11-28, while other
# sessions' builds shared the cores: load average 10 to 16, so a quiet
# machine is faster), each `scripts/servers.sh NAME` from nothing:
#   valkey-8.0  apt-get install from backports: 26 s for valkey-server;
#               67 s with the apt-get update and valkey-sentinel
#   valkey-9.1  apt-get source + build (make -j2, -O2)     666 s
#   redis-8.0   apt-get source + build (make -j2, -O2)     517 s
#   a second run with every server present                 2 s
set -euo pipefail

servers_dir="${REDLOCK_SERVERS_DIR:-$HOME/.cache/redlock-servers}"
all_names=(redis-7.0 valkey-8.0 valkey-9.1 redis-8.0)
sources_file=/etc/apt/sources.list.d/redlock-servers.sources
prefs_file=/etc/apt/preferences.d/redlock-servers
jobs="${REDLOCK_SERVERS_JOBS:-2}"

say() { echo "servers.sh: $*" >&2; }
die() { say "$*"; exit 1; }

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }

known() {
  local n
  for n in "${all_names[@]}"; do [[ "$n" == "$1" ]] && return 0; done
  return 1
}

# The server binary of a name (whether or not it is there).
server_path() {
  case "$1" in
    redis-7.0) command -v redis-server || echo /usr/bin/redis-server ;;
    valkey-8.0) command -v valkey-server || echo /usr/bin/valkey-server ;;
    valkey-9.1) echo "$servers_dir/valkey-9.1/bin/valkey-server" ;;
    redis-8.0) echo "$servers_dir/redis-8.0/bin/redis-server" ;;
  esac
}

# "7.0", "8.0", ... from `<binary> --version` ("Redis server v=7.0.15 ...").
version_of() {
  "$1" --version 2>/dev/null | sed -n 's/.* v=\([0-9]*\.[0-9]*\)\..*/\1/p' | head -1
}

# True when NAME is installed at the version its name says.
installed() {
  local bin
  bin=$(server_path "$1")
  [[ -x "$bin" ]] || return 1
  [[ "$(version_of "$bin")" == "${1#*-}" ]] || return 1
  if [[ "$1" == valkey-9.1 ]]; then
    [[ -f "$servers_dir/valkey-9.1/lib/libvalkeylua.so" ]] || return 1
  fi
  return 0
}

need_root() {
  [[ $(id -u) -eq 0 ]] || die "installing $1 needs root (apt-get): run as root, or sudo"
}

apt_updated=0
apt_update() {
  ((apt_updated)) && return 0
  apt-get update -qq
  apt_updated=1
}

write_apt_sources() {
  local want
  want="# Written by redlock's scripts/servers.sh: Valkey 8.0 from bookworm-backports,
# and the source packages of unstable (Valkey 9.x, Redis 8.x) to build from.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian
Suites: unstable
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
  if [[ ! -f "$sources_file" ]] || [[ "$(cat "$sources_file")" != "$want" ]]; then
    printf '%s\n' "$want" >"$sources_file"
    apt_updated=0
  fi
  local pin="# Written by redlock's scripts/servers.sh: source packages only from unstable.
Package: *
Pin: release a=unstable
Pin-Priority: -10"
  if [[ ! -f "$prefs_file" ]] || [[ "$(cat "$prefs_file")" != "$pin" ]]; then
    printf '%s\n' "$pin" >"$prefs_file"
  fi
}

apt_install() {  # [-t suite] packages...
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

missing_packages() {
  local p out=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out+=("$p")
  done
  echo "${out[@]:-}"
}

install_redis_7_0() {
  local missing
  missing=$(missing_packages redis-server redis-sentinel)
  [[ -z "$missing" ]] && return 0
  need_root redis-7.0
  apt_update
  # shellcheck disable=SC2086
  apt_install $missing
}

install_valkey_8_0() {
  need_root valkey-8.0
  write_apt_sources
  apt_update
  # The package's service is not started here (Debian's policy-rc.d, or no
  # init in a container); the test kit starts its own servers.
  apt_install -t bookworm-backports valkey-server valkey-sentinel
}

build_deps() {
  local missing
  missing=$(missing_packages build-essential libssl-dev pkg-config dpkg-dev)
  [[ -z "$missing" ]] && return 0
  need_root "the build dependencies"
  apt_update
  # shellcheck disable=SC2086
  apt_install $missing
}

# Downloads and unpacks the unstable source package $1 into $servers_dir/src
# and prints the unpacked folder. Stops when its version is not $2 (major.minor).
fetch_source() {
  local pkg=$1 want=$2 dsc version dir
  need_root "$pkg from unstable's source packages"
  write_apt_sources
  apt_update
  mkdir -p "$servers_dir/src"
  (cd "$servers_dir/src" && rm -f "${pkg}"_*.dsc && apt-get source --download-only -qq "$pkg" >&2) ||
    die "apt-get source $pkg failed"
  dsc=$(ls "$servers_dir/src/${pkg}"_*.dsc | head -1)
  version=$(sed -n 's/^Version: \(.*\)$/\1/p' "$dsc" | head -1)
  version=${version#*:}    # epoch (redis has 5:)
  version=${version%%-*}   # Debian revision
  version=${version%%+*}   # +dfsg
  if [[ "${version%.*}" != "$want" ]]; then
    die "Debian unstable now has $pkg $version, not $want: update the name in scripts/servers.sh and testkit/servers.cc rather than build it under a false one"
  fi
  dir="$servers_dir/src/$pkg-$version"
  rm -rf "$dir"
  (cd "$servers_dir/src" && dpkg-source --no-check -x "$(basename "$dsc")" "$dir" >/dev/null) ||
    die "dpkg-source -x $dsc failed"
  echo "$dir"
}

build_valkey_9_1() {
  local src out=$servers_dir/valkey-9.1
  build_deps
  src=$(fetch_source valkey 9.1)
  say "building valkey-server in $src (make -j$jobs BUILD_TLS=yes MALLOC=libc BUILD_LUA=module OPTIMIZATION=-O2)"
  make -C "$src" -j"$jobs" BUILD_TLS=yes MALLOC=libc BUILD_LUA=module OPTIMIZATION=-O2 valkey-server \
    >"$servers_dir/valkey-9.1.build.log" 2>&1 ||
    die "the build failed; see $servers_dir/valkey-9.1.build.log"
  rm -rf "$out"
  mkdir -p "$out/bin" "$out/lib"
  cp "$src/src/valkey-server" "$out/bin/"
  cp "$src/src/modules/lua/libvalkeylua.so" "$out/lib/"
  ln -s valkey-server "$out/bin/valkey-sentinel"
  rm -rf "$src"
}

build_redis_8_0() {
  local src out=$servers_dir/redis-8.0
  build_deps
  src=$(fetch_source redis 8.0)
  say "building redis-server in $src (make -j$jobs BUILD_TLS=yes MALLOC=libc OPTIMIZATION=-O2)"
  make -C "$src/src" -j"$jobs" BUILD_TLS=yes MALLOC=libc OPTIMIZATION=-O2 redis-server \
    >"$servers_dir/redis-8.0.build.log" 2>&1 ||
    die "the build failed; see $servers_dir/redis-8.0.build.log"
  rm -rf "$out"
  mkdir -p "$out/bin"
  cp "$src/src/redis-server" "$out/bin/"
  ln -s redis-server "$out/bin/redis-sentinel"
  rm -rf "$src"
}

ensure() {
  local name=$1 start
  if installed "$name" && { [[ "$name" != redis-7.0 ]] || [[ -z "$(missing_packages redis-sentinel)" ]]; } &&
    { [[ "$name" != valkey-8.0 ]] || [[ -z "$(missing_packages valkey-sentinel)" ]]; }; then
    say "$name: present ($(server_path "$name"))"
    return 0
  fi
  start=$(date +%s)
  case "$name" in
    redis-7.0) install_redis_7_0 ;;
    valkey-8.0) install_valkey_8_0 ;;
    valkey-9.1) build_valkey_9_1 ;;
    redis-8.0) build_redis_8_0 ;;
  esac
  installed "$name" || die "$name: $(server_path "$name") is still missing or not version ${name#*-}"
  say "$name: ready in $(($(date +%s) - start)) s ($(server_path "$name"))"
}

(($#)) || { usage >&2; exit 2; }
names=()
while (($#)); do
  case "$1" in
    --all) names+=("${all_names[@]}"); shift ;;
    --list) printf '%s\n' "${all_names[@]}"; exit 0 ;;
    --print-path)
      [[ $# -ge 2 ]] || die "--print-path needs a name (--list)"
      known "$2" || die "unknown server '$2' (known: ${all_names[*]})"
      if installed "$2"; then
        server_path "$2"
        exit 0
      fi
      say "$2 is not installed: run scripts/servers.sh $2"
      exit 1
      ;;
    -h|--help) usage; exit 0 ;;
    -*) say "unknown option '$1'"; usage >&2; exit 2 ;;
    *)
      known "$1" || { say "unknown server '$1' (known: ${all_names[*]})"; exit 2; }
      names+=("$1"); shift ;;
  esac
done
for n in "${names[@]}"; do ensure "$n"; done
