#!/usr/bin/env bash
# Installs what the chaos harness's external clients need (chaos/README.md,
# section "Any client under test"), on Debian 12:
#
#   node-redlock  nodejs and npm from Debian, only when `node` / `npm` are
#                 missing; then `npm ci` in chaos/clients/node-redlock
#                 (redlock and ioredis at the versions package-lock.json pins)
#   redis-py      python3 and python3-redis from Debian
#
#   scripts/lab-clients.sh
#
# The Debian packages need root; as any other user it prints the apt-get line
# to run and stops. Idempotent and quiet: a second run installs nothing and
# skips npm ci while node_modules matches package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/.."
adapter_dir=chaos/clients/node-redlock

fail() {
  echo "lab-clients.sh: $*" >&2
  exit 1
}

missing=()
for p in python3 python3-redis; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Any node and npm will do (the adapter needs node >= 18); Debian's only
# when there are none.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "lab-clients.sh: missing Debian packages; install them as root with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    echo "(scripts/setup.sh --no-lab-clients sets up without the external clients)" >&2
    exit 1
  fi
  echo "lab-clients.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || echo "lab-clients.sh: apt-get update failed; trying the install anyway" >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    fail "apt-get install ${missing[*]} failed"
fi
/usr/bin/python3 -c 'import redis.lock' 2>/dev/null ||
  fail "/usr/bin/python3 cannot import redis.lock although python3-redis is installed"

# node_modules is never committed: npm ci installs exactly package-lock.json.
stamp="$adapter_dir/node_modules/.lab-clients-stamp"
want="$(sha256sum "$adapter_dir/package-lock.json" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]] ||
  ! node "$adapter_dir/adapter.js" --check >/dev/null 2>&1; then
  echo "lab-clients.sh: npm ci in $adapter_dir"
  log="$(mktemp)"
  if ! (cd "$adapter_dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    fail "npm ci in $adapter_dir failed (see above)"
  fi
  rm -f "$log"
  echo "$want" >"$stamp"
fi
node "$adapter_dir/adapter.js" --check >/dev/null ||
  fail "the node-redlock adapter cannot run after npm ci"
