#!/bin/sh
# Installs a redlock build tree into a temporary prefix and builds two
# consumers against it, offline (ctest redlock_consumer_test):
#   1. tests/consumer/CMakeLists.txt with find_package(redlock) (C++17);
#   2. pkgconfig_main.cc with `pkg-config --cflags --libs redlock` (C++17);
# and, when the build has the fake fleet (redlock::testing), builds and runs
# examples/fake_fleet's test against the package (tests/consumer/testing/).
# Both run against a loopback port nobody listens on (no server needed).
#
#   run.sh BUILD_DIR CONSUMER_SRC_DIR [CMAKE] [CXX] [CONFIG]
set -eu
build=${1:?usage: run.sh BUILD_DIR CONSUMER_SRC_DIR [CMAKE] [CXX] [CONFIG]}
src=${2:?usage: run.sh BUILD_DIR CONSUMER_SRC_DIR [CMAKE] [CXX] [CONFIG]}
cmake=${3:-cmake}
cxx=${4:-c++}
config=${5:-}

tmp=$(mktemp -d /tmp/redlock-consumer-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix="$tmp/prefix"

step() { echo "=== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
run_logged() {  # run_logged LOG CMD...: quiet unless it fails
  log=$1; shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$*"
  fi
}

step "cmake --install $build --prefix $prefix"
if [ -n "$config" ]; then
  run_logged "$tmp/install.log" "$cmake" --install "$build" --prefix "$prefix" --config "$config"
else
  run_logged "$tmp/install.log" "$cmake" --install "$build" --prefix "$prefix"
fi

step "installed files"
for f in include/redlock/client.h include/redlock/lease.h include/redlock/options.h \
         include/redlock/mutex.h include/redlock/fencing.h include/multilock/multi_lock.h \
         bin/redlock; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
[ ! -e "$prefix/include/redlock/internal" ] || fail "private headers (redlock/internal) were installed"
config_file=$(find "$prefix" -name redlockConfig.cmake | head -n 1)
[ -n "$config_file" ] || fail "redlockConfig.cmake was not installed"
pc_file=$(find "$prefix" -name redlock.pc | head -n 1)
[ -n "$pc_file" ] || fail "redlock.pc was not installed"
# No public header may include a private one, hiredis or OpenSSL (docs/design.md 1.3).
if grep -rEn '#include "(redlock/internal|hiredis|openssl)|#include <(hiredis|openssl)' "$prefix/include"; then
  fail "a public header includes a private, hiredis or OpenSSL header"
fi
"$prefix/bin/redlock" --version >/dev/null || fail "the installed redlock tool does not run"

# With BUILD_SHARED_LIBS=ON the consumers load libredlock.so from the prefix.
lib_dir=$(dirname "$(find "$prefix" -name 'libredlock.*' | head -n 1)")
LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

# A loopback port nobody listens on.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 1)

step "find_package consumer (C++17)"
run_logged "$tmp/configure.log" "$cmake" -S "$src" -B "$tmp/build" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx"
run_logged "$tmp/build.log" "$cmake" --build "$tmp/build"
"$tmp/build/consumer" "$port" || fail "the find_package consumer failed"

# The fake fleet (redlock/testing.h), where the build had it: the
# examples/fake_fleet test built against the package and run (no server).
if [ -n "$(find "$prefix" -name redlockTestingTargets.cmake | head -n 1)" ]; then
  step "find_package(redlock COMPONENTS testing): examples/fake_fleet against the package (C++17)"
  run_logged "$tmp/testing-configure.log" "$cmake" -S "$src/testing" -B "$tmp/testing" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
    -DREDLOCK_EXAMPLE_DIR="$(cd "$src/../../examples/fake_fleet" && pwd)"
  run_logged "$tmp/testing-build.log" "$cmake" --build "$tmp/testing"
  run_logged "$tmp/testing-run.log" "$tmp/testing/charge_once_test"
fi

step "pkg-config consumer (C++17)"
if ! command -v pkg-config >/dev/null 2>&1; then
  [ "${CI:-}" != "true" ] || fail "pkg-config is not installed, and CI=true makes that a failure"
  echo "SKIP: pkg-config is not installed"
  exit 0
fi
PKG_CONFIG_PATH=$(dirname "$pc_file")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
pkg-config --validate redlock 2>/dev/null || pkg-config --exists --print-errors redlock || fail "redlock.pc is invalid"
flags=$(pkg-config --cflags --libs redlock) || fail "pkg-config --cflags --libs redlock"
echo "pkg-config --cflags --libs redlock: $flags"
case "$flags" in *"$prefix"*) ;; *) fail "redlock.pc does not point into the install prefix" ;; esac
# shellcheck disable=SC2086  # $flags is a list of words
run_logged "$tmp/pc.log" "$cxx" -std=c++17 -Wall -Wextra -Werror -pedantic \
  "$src/pkgconfig_main.cc" -o "$tmp/pc_consumer" $flags
"$tmp/pc_consumer" "$port" || fail "the pkg-config consumer failed"

step "redlock/coro.h: C++20 only"
# shellcheck disable=SC2086
run_logged "$tmp/coro20.log" "$cxx" -std=c++20 -Wall -Wextra -Werror -fsyntax-only \
  "$src/coro_main.cc" $flags
# shellcheck disable=SC2086
if "$cxx" -std=c++17 -fsyntax-only "$src/coro_main.cc" $flags >"$tmp/coro17.log" 2>&1; then
  fail "redlock/coro.h compiled as C++17"
fi
grep -q "needs C++20 coroutines" "$tmp/coro17.log" || { cat "$tmp/coro17.log" >&2; fail "redlock/coro.h under C++17: not the expected message"; }
echo "OK"
