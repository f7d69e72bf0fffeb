#!/usr/bin/env bash
# The simulator's mutation score (issue 35; sim/README.md "Mutants").
#
# Each file sim/mutants/NN-name.patch is a realistic bug, kept as a patch of
# the library (never a branch in its code). This script copies the tree
# (the files git tracks, as they are in the working tree) to a directory of
# its own, builds redlock-sim there once unmutated and once per mutant
# (applying the patch, building, taking it back), and runs
#
#   redlock-sim --runs RUNS --seed SEED [--where W] --stop-at-finding
#
# on each: a mutant is found when a run has a finding within the budget.
# The budget per mutant is fixed: RUNS runs of 20 simulated seconds from
# SEED, or the number a patch's `# runs:` line sets (a bug that only a rare
# schedule reaches). A patch's `# where:` line, where it has one, makes
# those runs the drawn configurations in which the mutated code runs at all
# (redlock-sim --where: seeds whose configuration has another primitive,
# say, are passed over); every dimension and the faults are still drawn as
# in any run. Before the mutants, the unmutated tree runs each budget: a
# finding there makes the score meaningless and the script fails.
#
#   scripts/mutants.sh                   every mutant, 300 runs each
#   scripts/mutants.sh --runs 100 --only 05-plain-del,11-semaphore-majority
#   scripts/mutants.sh --dir /tmp/m      where the copy and its build go
#
# Prints a table and the score (found / mutants); exits 0 when every mutant
# is found and the unmutated tree is clean, 1 otherwise, 2 for bad
# arguments. Needs what scripts/setup.sh installs (cmake, the compiler,
# liblua5.1-0-dev, Abseil, hiredis, nlohmann-json). Takes about a minute or
# two per mutant on two cores (an incremental build and its runs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

runs=300
seed=1
only=""
work="${TMPDIR:-/tmp}/redlock-mutants"
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while (($#)); do
  case "$1" in
    --runs) runs=${2:?--runs needs a number}; shift 2 ;;
    --seed) seed=${2:?--seed needs a number}; shift 2 ;;
    --only) only=${2:?--only needs names}; shift 2 ;;
    --dir) work=${2:?--dir needs a directory}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "mutants.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "mutants.sh: bad --runs $runs" >&2; exit 2; }
[[ "$seed" =~ ^[0-9]+$ ]] || { echo "mutants.sh: bad --seed $seed" >&2; exit 2; }

patches=()
for p in sim/mutants/*.patch; do
  name=$(basename "$p" .patch)
  if [[ -n "$only" && ",$only," != *",$name,"* ]]; then continue; fi
  patches+=("$p")
done
((${#patches[@]})) || { echo "mutants.sh: no mutant matches --only $only" >&2; exit 2; }

# The copy: the tracked files as they are now, written over the last run's
# copy (tar keeps their times, so that its build directory, src/build, which
# survives between runs, rebuilds only what changed), in a repository of its
# own (so that `git apply` and `git checkout` act on it alone).
src="$work/src"
bld="$src/build"
mkdir -p "$src"
rm -rf "$src/.git"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$src"
# tar gave the files their times here: a file a patch changes may be older
# than its object, built mutated by an earlier run that stopped halfway.
for p in sim/mutants/*.patch; do
  git apply --numstat "$p" | awk '{print $3}' | while read -r f; do touch "$src/$f"; done
done
git -C "$src" init -q
git -C "$src" add -A
git -C "$src" -c user.name=mutants -c user.email=mutants@localhost commit -qm copy

launcher=()
if command -v ccache >/dev/null; then
  # Paths relative to the copy, so that a build of another copy at the same
  # place finds its objects in the cache.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$work}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDLOCK_SANITIZE= \
  -DREDLOCK_BUILD_SIM=ON -DREDLOCK_BUILD_CHAOS=ON -DREDLOCK_BUILD_TESTS=OFF \
  -DREDLOCK_BUILD_BENCH=OFF -DREDLOCK_BUILD_TOOLS=OFF -DREDLOCK_BUILD_EXAMPLES=OFF \
  -DREDLOCK_INSTALL=OFF -DREDLOCK_BUILD_FUZZERS=OFF "${launcher[@]}" >"$work/configure.log"
sim="$bld/sim/redlock-sim"
build() { cmake --build "$bld" -j"$(nproc)" --target redlock-sim >"$1" 2>&1; }

where_of() { sed -n "s/^# where: *//p" "$1" | head -1; }
runs_of() { local r; r=$(sed -n "s/^# runs: *//p" "$1" | head -1); echo "${r:-$runs}"; }
what_of() { sed -n '1s/^# *//p' "$1"; }

# One budget: prints "found PROPERTY SEED RUNS" or "clean - - RUNS".
budget() {
  local config=$1 n=$2 log=$3 out=$4
  local args=(--runs "$n" --seed "$seed" --stop-at-finding --max-findings 1 --shrink-runs 20
    --out "$out")
  [[ -n "$config" ]] && args+=(--where "$config")
  local rc=0
  "$sim" "${args[@]}" >"$log" 2>&1 || rc=$?
  local done_runs
  done_runs=$(sed -n 's/^runs: \([0-9]*\) .*/\1/p' "$log" | head -1)
  if ((rc == 1)); then
    local line
    line=$(grep -m1 '^FINDING' "$log" || true)
    # "FINDING S1, seed 17: ..."
    local prop seed_found
    prop=$(sed -n 's/^FINDING \([A-Z0-9]*\),.*/\1/p' <<<"$line")
    seed_found=$(sed -n 's/^FINDING [A-Z0-9]*, seed \([0-9]*\):.*/\1/p' <<<"$line")
    echo "found ${prop:-?} ${seed_found:-?} ${done_runs:-?}"
  elif ((rc == 0)); then
    echo "clean - - ${done_runs:-?}"
  else
    echo "error - - -"
  fi
}

echo "== building the unmutated copy in $bld"
build "$work/build-base.log" || { tail -20 "$work/build-base.log"; exit 1; }

# The unmutated tree under every distinct budget.
declare -A base_checked=()
base_ok=1
for p in "${patches[@]}"; do
  config=$(where_of "$p")
  n=$(runs_of "$p")
  [[ -n "${base_checked[x$config/$n]:-}" ]] && continue
  base_checked[x$config/$n]=1
  read -r status prop fseed used < <(budget "$config" "$n" "$work/base-${#base_checked[@]}.log" \
    "$work/findings/base")
  printf '   unmutated  %-48s %s %s\n' "${config:-(drawn)}, $n runs" "$status" \
    "$([[ $status == found ]] && echo "$prop seed $fseed" || echo "$used runs")"
  [[ "$status" == clean ]] || base_ok=0
done

found=0
total=0
rows=()
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  config=$(where_of "$p")
  total=$((total + 1))
  echo "== $name: $(what_of "$p")"
  if ! git -C "$src" apply "$root/$p"; then
    rows+=("$(printf '%-30s %-8s %s' "$name" "ERROR" "the patch does not apply")")
    continue
  fi
  if build "$work/build-$name.log"; then
    read -r status prop fseed used < <(budget "$config" "$(runs_of "$p")" "$work/$name.log" \
      "$work/findings/$name")
  else
    status=error prop=- fseed=- used=-
    echo "   the mutant does not build: $work/build-$name.log"
  fi
  git -C "$src" checkout -q -- .
  case "$status" in
    found)
      found=$((found + 1))
      rows+=("$(printf '%-30s %-8s %-4s seed %-6s after %4s runs  %s' "$name" found "$prop" \
        "$fseed" "$used" "${config:-(drawn)}")")
      ;;
    clean)
      rows+=("$(printf '%-30s %-8s %-4s %-11s %4s runs       %s' "$name" MISSED - - "$used" \
        "${config:-(drawn)}")")
      ;;
    *) rows+=("$(printf '%-30s %-8s see %s' "$name" ERROR "$work/$name.log")") ;;
  esac
  echo "   ${rows[-1]}"
done
# Leave the copy's build unmutated for the next run.
build "$work/build-base.log" || true

echo
echo "== mutants (budget: $runs runs from seed $seed each; case files under $work/findings)"
printf '%s\n' "${rows[@]}"
echo
if ((base_ok)); then
  echo "unmutated tree: clean under every budget"
else
  echo "unmutated tree: NOT clean under some budget (above): the score does not count"
fi
echo "mutation score: $found / $total found"
((base_ok && found == total))
