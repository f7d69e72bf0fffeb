#!/usr/bin/env bash
# The compatibility run: the suites on every server (ctest label compat,
# tests/CMakeLists.txt), and the matrix of server against feature it makes,
# each cell from a test's pass or failure, written to docs/compat.md.
#
#   scripts/compat.sh [--servers a,b,...] [--core] [--build-dir DIR]
#                     [--no-build] [--no-run] [--out FILE]
#
#   --servers  which servers (default: redis-7.0,valkey-8.0,valkey-9.1,redis-8.0);
#              each must be installed (scripts/servers.sh NAME)
#   --core     only the CI subset (label compat_core); the matrix then has
#              fewer rows
#   --out      where the matrix goes (default docs/compat.md; "-" for stdout)
#   --no-run   write the matrix from the last run's log (DIR/Testing/Temporary/
#              LastTest.log) without running anything
#
# It configures DIR (default build) so that ctest registers the installed
# servers, builds the suites it runs, runs them (-j2), and writes the matrix.
# Exit 0 when every test passed, 1 otherwise (the matrix is written either
# way, with the failures in it).
set -euo pipefail
cd "$(dirname "$0")/.."

servers="redis-7.0,valkey-8.0,valkey-9.1,redis-8.0"
build_dir=build
build=1
run=1
core=0
out=docs/compat.md
while (($#)); do
  case "$1" in
    --servers) servers="$2"; shift 2 ;;
    --core) core=1; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --no-run) run=0; build=0; shift ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compat.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
IFS=, read -r -a names <<<"$servers"
for n in "${names[@]}"; do
  scripts/servers.sh --print-path "$n" >/dev/null ||
    { echo "compat.sh: $n is not installed: run scripts/servers.sh $n" >&2; exit 1; }
done

targets=(redlock_client_test redlock_scriptless_test redlock_server_commands_test
  redlock_lifecycle_test redlock_multilock_test redlock_fencing_test redlock_family_test
  redlock_cluster_test redlock_tls_test redlock_replication_test redlock_sentinel_tls_test
  redlock_lualess_test chaos_clock_shim_test redlock_steady_alloc_test)
if ((core)); then
  targets=(redlock_client_test redlock_server_commands_test redlock_tls_test redlock_lualess_test
    redlock_steady_alloc_test)
fi
if ((build)); then
  cmake -S . -B "$build_dir" >/dev/null
  cmake --build "$build_dir" -j2 --target "${targets[@]}"
fi

label=compat
((core)) && label=compat_core
regex="^(compat_($(IFS='|'; echo "${names[*]}" | sed 's/\./\\./g'))_"
# The Lua-less suite runs on valkey-9.1 whatever the server.
[[ ",$servers," == *",valkey-9.1,"* ]] && regex+="|redlock_lualess_test"
regex+=")"
# ctest keeps every test's whole output there.
log="$build_dir/Testing/Temporary/LastTest.log"
status=0
took_file="$build_dir/compat-ctest.seconds"
if ((run)); then
  start=$(date +%s)
  ctest --test-dir "$build_dir" -L "$label" -R "$regex" -j2 --timeout 900 --output-on-failure \
    >"$build_dir/compat-ctest.out" 2>&1 || status=1
  echo $(($(date +%s) - start)) >"$took_file"
  tail -n 12 "$build_dir/compat-ctest.out" >&2
else
  grep -q "Test Failed" "$log" && status=1
fi
took=$(cat "$took_file" 2>/dev/null || echo "?")

versions=()
for n in "${names[@]}"; do
  versions+=("$n=$("$(scripts/servers.sh --print-path "$n")" --version | head -1)")
done

command="scripts/compat.sh"
[[ "$servers" != "redis-7.0,valkey-8.0,valkey-9.1,redis-8.0" ]] && command+=" --servers $servers"
((core)) && command+=" --core"

python3 - "$log" "$out" "$command" "$took" "$servers" "${versions[@]}" <<'PY'
import re, sys, datetime
log_path, out_path, command, took, servers = sys.argv[1:6]
names = servers.split(",")
versions = dict(v.split("=", 1) for v in sys.argv[6:])
text = open(log_path, errors="replace").read()

# ctest's LastTest.log: one block per test, "N/M Test: NAME", its whole
# output, then "Test Passed." or "Test Failed.".
results, outputs = {}, {}
for m in re.finditer(r"^\d+/\d+ Test: (\S+)\n(.*?)^Test (Passed|Failed)\.", text, re.S | re.M):
    name, body, verdict = m.group(1), m.group(2), m.group(3)
    outputs[name] = body
    skipped = re.search(r"^\[  SKIPPED \] (\d+) test", body, re.M)
    ran = re.search(r"^\[==========\] (\d+) tests? from", body, re.M)
    if verdict == "Passed" and skipped and ran and int(skipped.group(1)) == int(ran.group(1)):
        results[name] = "skipped"
    elif verdict == "Passed":
        passed = re.search(r"^\[  PASSED  \] (\d+) test", body, re.M)
        n = passed.group(1) if passed else "?"
        sk = f", {skipped.group(1)} skipped" if skipped else ""
        results[name] = f"pass ({n}{sk})"
    else:
        failed = re.search(r"^\[  FAILED  \] (\d+) tests?", body, re.M)
        failing = re.findall(r"^\[  FAILED  \] (\S+?)(?:,| \(|$)", body, re.M)
        failing = sorted(set(f.split("/")[-2] if f.count("/") >= 2 else f for f in failing))
        detail = f" ({failed.group(1)} failed: {', '.join(failing)})" if failed else ""
        results[name] = f"**FAIL**{detail}"
for m in re.finditer(r"^\d+/\d+ Test: (\S+)\n", text, re.M):
    results.setdefault(m.group(1), "**FAIL** (no result)")

rows = [
    ("script path (Lua scripts)", "client"),
    ("script-free path (every node denies scripting)", "client_scriptfree"),
    ("script-free transactions (their own suite)", "scriptless"),
    ("lifecycle", "lifecycle"),
    ("MultiLock", "multilock"),
    ("fencing", "fencing"),
    ("lock family (rw lock, semaphore, election)", "family"),
    ("cluster node", "cluster"),
    ("Sentinel", "sentinel"),
    ("Sentinel over TLS", "sentinel_tls"),
    ("TLS", "tls"),
    ("durability vote (replicas, failover)", "durability"),
    ("clock shim (LD_PRELOAD clock jumps move the server's expiry)", "clock_shim"),
    ("script-free commands detected (DELIFEQ, SET IFEQ, DELEX IFEQ)", "server_commands"),
    ("the steady path's allocations (bounded, per cycle and per node)", "steady_alloc"),
]

def cell(server, feature):
    return results.get(f"compat_{server}_{feature}", "not run")

def commands(server):
    body = outputs.get(f"compat_{server}_server_commands", "")
    m = re.search(r"^\[compat\] \S+ commands: (.*)$", body, re.M)
    return m.group(1) if m else "not run"

lines = []
lines.append("# Server compatibility")
lines.append("")
lines.append("Generated by `" + command + "` (on "
             + datetime.date.today().isoformat() + ", " + took + " s of tests on a 2-core "
             "machine); do not edit by hand. Each cell is one ctest entry of the label "
             "`compat` (`compat_<server>_<feature>`, tests/CMakeLists.txt): the suite "
             "run with `REDLOCK_SERVER=<server>`, its count of tests passed (and "
             "skipped, where a test needs something the server lacks). How the servers "
             "are installed: `scripts/servers.sh` (docs/guide/servers.md).")
lines.append("")
lines.append("| feature | " + " | ".join(names) + " |")
lines.append("| --- |" + " --- |" * len(names))
lines.append("| server (`--version`) | " + " | ".join(
    re.sub(r" sha=.*", "", versions.get(n, "?")) for n in names) + " |")
for title, feature in rows:
    if all(cell(n, feature) == "not run" for n in names):
        continue
    lines.append(f"| {title} | " + " | ".join(cell(n, feature) for n in names) + " |")
if any(commands(n) != "not run" for n in names):
    lines.append("| script-free commands the server has | " +
                 " | ".join(commands(n) for n in names) + " |")
lua = results.get("redlock_lualess_test")
if lua:
    lines.append("| Lua-less node (valkey-9.1 started without its Lua module) | " +
                 " | ".join(lua if n == "valkey-9.1" else "n/a" for n in names) + " |")
lines.append("")
lines.append("The commands row is what each server answered to `COMMAND INFO DELIFEQ "
             "DELEX` and `COMMAND DOCS SET` at the client's handshake "
             "(`redlock/internal/server_commands.h`), checked in the same test by "
             "sending each command to the server and seeing it run or be refused.")
text = "\n".join(lines) + "\n"
if out_path == "-":
    sys.stdout.write(text)
else:
    open(out_path, "w").write(text)
    print(f"compat.sh: wrote {out_path}", file=sys.stderr)
PY
exit $status
