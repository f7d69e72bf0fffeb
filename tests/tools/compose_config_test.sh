#!/bin/sh
# Validates docker-compose.yml offline: `docker-compose -f FILE config -q`
# parses and checks the file without a Docker engine. Skips (exit 77) when
# docker-compose is not installed, except under CI=true where that fails.
set -eu
file=${1:?usage: compose_config_test.sh path/to/docker-compose.yml}
if ! command -v docker-compose >/dev/null 2>&1; then
  if [ "${CI:-}" = "true" ]; then
    echo "FAIL: docker-compose is not installed, and CI=true makes that a failure" >&2
    exit 1
  fi
  echo "SKIP: docker-compose is not installed (scripts/setup.sh installs it)"
  exit 77
fi
# No engine is contacted for `config`; keep any DOCKER_HOST out of it anyway.
unset DOCKER_HOST
docker-compose -f "$file" config -q
# The contract of the file: five masters on 7001-7005 (and five TLS ones on
# 7011-7015), AOF fsync always, no replication.
out=$(docker-compose -f "$file" config)
for port in 7001 7002 7003 7004 7005; do
  echo "$out" | grep -q "published: $port\|$port:$port\|- $port" || {
    echo "FAIL: port $port is not published" >&2; exit 1; }
done
count=$(echo "$out" | grep -c 'appendfsync' || true)
[ "$count" -ge 10 ] || { echo "FAIL: every node needs --appendfsync always ($count found)" >&2; exit 1; }
# The "tls" profile: five more masters on TLS ports only (7011-7015).
for port in 7011 7012 7013 7014 7015; do
  echo "$out" | grep -q "published: $port\|$port:$port\|- $port" || {
    echo "FAIL: TLS port $port is not published" >&2; exit 1; }
done
count=$(echo "$out" | grep -c -- '--tls-port' || true)
[ "$count" -ge 5 ] || { echo "FAIL: five TLS nodes expected ($count found)" >&2; exit 1; }
if echo "$out" | grep -qi 'replicaof\|slaveof\|sentinel'; then
  echo "FAIL: the nodes must be independent masters (no replication, no Sentinel)" >&2
  exit 1
fi
echo "OK: $file"
