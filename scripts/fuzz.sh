#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang, in a build directory of
# their own, and runs each for a while over its kept inputs (fuzz/README.md).
#
#   scripts/fuzz.sh [--seconds N] [--build-dir DIR] [--build-only] [TARGET...]
#
# 1. Installs the project's Debian packages plus clang and its libFuzzer
#    runtime (scripts/setup.sh --fuzz --no-build --no-lab-clients).
# 2. Configures DIR (default build-fuzz) with CC=clang CXX=clang++,
#    REDLOCK_BUILD_FUZZERS=ON and ASan+UBSan, and builds only the fuzz_*
#    binaries.
# 3. Runs each TARGET (default: every one) for N seconds (default 60), over
#    fuzz/<target>/corpus and fuzz/<target>/regressions (read only; new
#    inputs go to DIR/fuzz-corpus/<target>). A crash stops the run with exit
#    status 1 and the input in DIR/fuzz-artifacts/<target>/: fix it, then keep
#    the input in fuzz/<target>/regressions (a unit test of every build).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
build_dir=build-fuzz
build_only=0
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((${#targets[@]} == 0)); then
  for dir in fuzz/*/corpus; do
    t=${dir#fuzz/}
    targets+=("${t%/corpus}")
  done
fi

scripts/setup.sh --fuzz --no-build --no-lab-clients

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
start=$(date +%s)
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DREDLOCK_BUILD_FUZZERS=ON -DREDLOCK_SANITIZE=address \
  -DREDLOCK_BUILD_TESTS=OFF -DREDLOCK_BUILD_BENCH=OFF -DREDLOCK_BUILD_CHAOS=ON \
  -DREDLOCK_BUILD_TOOLS=OFF -DREDLOCK_BUILD_EXAMPLES=OFF -DREDLOCK_INSTALL=OFF \
  "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
echo "fuzz.sh: built ${targets[*]} in $(( $(date +%s) - start ))s"
((build_only)) && exit 0

status=0
passed=0
failed=0
for t in "${targets[@]}"; do
  work="$build_dir/fuzz-corpus/$t"
  artifacts="$build_dir/fuzz-artifacts/$t"
  mkdir -p "$work" "$artifacts"
  echo "=== fuzz_$t for ${seconds}s"
  # Memory and time per input are bounded: a reply of the node may not make
  # the client take more than a limit, and nothing here may hang.
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "$build_dir/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=8192 -print_final_stats=1 -artifact_prefix="$artifacts/" \
      "$work" "fuzz/$t/corpus" "fuzz/$t/regressions" 2>"$build_dir/fuzz-$t.log"; then
    tail -n 60 "$build_dir/fuzz-$t.log" >&2
    echo "fuzz.sh: fuzz_$t found a crash; the input is in $artifacts/" >&2
    status=1
    failed=$((failed + 1))
    continue
  fi
  passed=$((passed + 1))
  grep -E '^stat::(number_of_executed_units|peak_rss_mb|new_units_added)' "$build_dir/fuzz-$t.log" |
    sed "s/^/fuzz_$t /"
done
echo "fuzz: $passed passed, $failed failed"
exit "$status"
