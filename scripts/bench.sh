#!/usr/bin/env bash
# The project's main job: sets everything up (scripts/setup.sh) and runs the
# benchmark against a fleet of local redis-server processes it starts itself.
#
#   scripts/bench.sh                 the quick run (about a minute)
#   scripts/bench.sh --full          every configuration, longer
#   scripts/bench.sh --json out.json --plot plots/
# Arguments go to build/bench/redlock-bench (see its --help); --quick is the
# default when none are given.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if (($# == 0)); then set -- --quick; fi
exec build/bench/redlock-bench "$@"
