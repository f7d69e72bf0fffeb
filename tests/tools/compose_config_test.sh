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
# The contract of the file. Without a profile: five independent masters on
# 7001-7005, AOF fsync always, no replication, no Sentinel. The "tls"
# profile: five more on TLS ports only (7011-7015). The "replicated"
# profile: five masters on 7201-7205, each with a replica, and Sentinels; all
# bound to 127.0.0.1. (`config` lists every service, with its profiles.)
docker-compose -f "$file" config | python3 -c '
import sys, yaml
services = yaml.safe_load(sys.stdin)["services"]
def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)
def cmd(s):
    c = s.get("command") or []
    return " ".join(c) if isinstance(c, list) else str(c)
def published(s):
    return {int(p["published"]) if isinstance(p, dict) else int(str(p).split(":")[-2])
            for p in s.get("ports") or []}
plain = {n: s for n, s in services.items() if not s.get("profiles")}
if len(plain) != 5:
    fail("the default deployment must be five masters, found %s" % sorted(plain))
ports = set()
for name, s in plain.items():
    text = cmd(s) + " " + " ".join(str(e) for e in (s.get("entrypoint") or []))
    if "appendfsync always" not in text:
        fail(name + " needs --appendfsync always")
    for word in ("replicaof", "slaveof", "sentinel"):
        if word in text.lower():
            fail(name + ": the default nodes must be independent masters (no replication, no Sentinel)")
    ports |= published(s)
if ports != {7001, 7002, 7003, 7004, 7005}:
    fail("ports 7001-7005 must be published, found %s" % sorted(ports))
tls = {n: s for n, s in services.items() if "tls" in (s.get("profiles") or [])}
tls_ports = set()
for name, s in tls.items():
    if "--tls-port" not in cmd(s) or "--port 0" not in cmd(s):
        fail(name + ": a TLS node listens on its TLS port only")
    if "appendfsync always" not in cmd(s):
        fail(name + " needs --appendfsync always")
    tls_ports |= published(s)
if tls_ports != {7011, 7012, 7013, 7014, 7015}:
    fail("the tls profile must publish 7011-7015, found %s" % sorted(tls_ports))
replicated = {n: s for n, s in services.items() if "replicated" in (s.get("profiles") or [])}
if len(replicated) != len(services) - 5 - len(tls):
    fail("every other service belongs to the tls or the replicated profile")
replicas = [n for n, s in replicated.items() if "--replicaof" in cmd(s)]
sentinels = [n for n, s in replicated.items() if "--sentinel" in " ".join(s.get("entrypoint") or [])]
masters = [n for n in replicated if n not in replicas and n not in sentinels]
if len(masters) != 5 or len(replicas) != 5 or len(sentinels) < 3:
    fail("replicated profile: want 5 masters, 5 replicas, 3 Sentinels; got %d, %d, %d"
         % (len(masters), len(replicas), len(sentinels)))
for n in masters + replicas:
    if "--bind 127.0.0.1" not in cmd(replicated[n]):
        fail(n + " must bind 127.0.0.1 only")
for n in sentinels:
    if "bind 127.0.0.1" not in " ".join(replicated[n].get("entrypoint") or []):
        fail(n + " must bind 127.0.0.1 only")
'
echo "OK: $file"
