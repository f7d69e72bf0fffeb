#!/usr/bin/env bash
# The first benchmark, in minutes: installs only what the bench needs,
# builds only redlock-bench (the library, the test kit and the bench; the
# `redlock` tool too when the family scenario is asked for) into
# build-bench/, with precompiled headers, and runs it against a fleet of
# local redis-server processes it starts itself. The tests, the chaos
# harness, the examples and the other Redlock clients are scripts/test.sh's
# (scripts/setup.sh builds everything into build/, without precompiled
# headers, which ccache cannot cache).
#
#   scripts/bench.sh                 the quick run (bench/README.md: the
#                                    measured time to the first table)
#   scripts/bench.sh --full          every configuration, longer
#   scripts/bench.sh --json out.json --plot plots/
# Arguments go to build-bench/bench/redlock-bench (see its --help); --quick
# is the default when none are given. REDLOCK_BUILD_DIR: another build
# directory.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${REDLOCK_BUILD_DIR:-build-bench}

scripts/install-packages.sh \
  build-essential cmake pkg-config \
  libhiredis-dev libabsl-dev libssl-dev nlohmann-json3-dev \
  redis-server openssl
# openssl: the throw-away certificates of the tls group's TLS fleet.

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDLOCK_SANITIZE= \
  -DREDLOCK_BUILD_BENCH=ON -DREDLOCK_BUILD_TOOLS=ON -DREDLOCK_BUILD_MICROBENCHMARKS=OFF \
  -DREDLOCK_BUILD_TESTS=OFF -DREDLOCK_BUILD_CHAOS=OFF -DREDLOCK_BUILD_EXAMPLES=OFF \
  -DREDLOCK_BUILD_FUZZERS=OFF -DREDLOCK_PRECOMPILED_HEADERS=ON >/dev/null
# The redlock tool only for the family scenario's election rows (they are
# skipped, saying why, without it): --scenario family is not in the quick run.
targets=(redlock-bench)
case " $* " in *family*) targets+=(redlock-cli) ;; esac
cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]}"
if (($# == 0)); then set -- --quick; fi
exec "$build_dir/bench/redlock-bench" "$@"
