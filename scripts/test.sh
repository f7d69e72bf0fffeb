#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the test suites:
# unit (no server), integration (real redis-server fleets) and chaos
# (short fault-injection scenarios).
#
#   scripts/test.sh [setup.sh options...]      e.g. --sanitize address --build-dir build-asan
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
build_dir=build
while (($#)); do
  case "$1" in --build-dir) build_dir="$2"; shift 2 ;; *) shift ;; esac
done
# -j2: the chaos and bench suites mostly wait on timers; they overlap well.
# -LE browser: the Chromium rendering test needs an extra install (README).
# -LE backends: etcd, ZooKeeper and PostgreSQL are extra installs and slow to
# start (scripts/backends.sh runs them).
ctest --test-dir "$build_dir" --output-on-failure --timeout 900 -j2 -LE 'browser|backends|compat'
