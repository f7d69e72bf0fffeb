#!/usr/bin/env bash
# The comparison of this library with etcd, ZooKeeper and PostgreSQL on this
# machine (backends/README.md), from a fresh Debian 12 machine: installs the
# packages (scripts/setup.sh --backends), builds, then
#
#   1. redlock-bench --scenario backends      latency, throughput, hand-off,
#                                             one member stopped (~2 min)
#   2. redlock-chaos-backends --all           the chaos workload under a client
#                                             pause, a member restart, a
#                                             partition and a clock jump (~10 min)
#   3. ctest -L backends                      the backends' tests (with --tests)
#
#   scripts/backends.sh [--bench-only] [--tests] [--out DIR] [setup.sh options...]
#
# Results go to DIR (default build/backends): bench.txt, bench.json, chaos.txt,
# chaos.json and the pictures. Everything listens on loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
bench_only=0
tests=0
out=build/backends
setup_args=()
while (($#)); do
  case "$1" in
    --bench-only) bench_only=1; shift ;;
    --tests) tests=1; shift ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) setup_args+=("$1"); shift ;;
  esac
done
scripts/setup.sh --backends "${setup_args[@]}"
build_dir=build
for ((i = 0; i < ${#setup_args[@]}; ++i)); do
  [[ ${setup_args[i]} == --build-dir ]] && build_dir=${setup_args[i+1]}
done
mkdir -p "$out"
"$build_dir"/bench/redlock-bench --scenario backends --quick \
  --json "$out/bench.json" --plot "$out" | tee "$out/bench.txt"
if ((!bench_only)); then
  "$build_dir"/chaos/redlock-chaos-backends --all --plot "$out" --json "$out/chaos.json" \
    | tee "$out/chaos.txt"
fi
if ((tests)); then
  ctest --test-dir "$build_dir" --output-on-failure --timeout 900 -L backends
fi
