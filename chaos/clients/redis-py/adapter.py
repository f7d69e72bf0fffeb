#!/usr/bin/python3
"""chaos/clients/redis-py/adapter.py: the single-instance lock of redis-py.

The chaos harness's adapter for redis.lock.Lock of Debian's python3-redis
(redis-py 4.3.x). It speaks the protocol of chaos/README.md, section "Any
client under test": one JSON request per line on stdin, one JSON reply per
line on stdout; everything else goes to stderr. `adapter.py --check` exits 0
when it can run. Run it with Debian's /usr/bin/python3, the interpreter
python3-redis is installed for.

Single instance: of the N nodes it is given, it locks on ONE, the middle one,
index N // 2 (n2 of five, n0 of one, n1 of three).

Validity: redis-py's Lock keeps no local validity; its contract is the key's
timeout. The adapter reports the most generous faithful reading of it: the
timeout measured from time.monotonic() just before the acquire (or extend)
call, i.e. validity_ms = ttl - (monotonic() - t0) at the moment of
answering, and the same for `remaining`.

Configuration: Lock(redis, resource, timeout=ttl, blocking=False) acquired
once per request (the harness retries); the connection's socket_timeout and
socket_connect_timeout are the harness's node timeout. Release and extend are
Lock.release() and Lock.extend(ttl, replace_ttl=True). No fencing tokens.
"""

import json
import sys
import time

INSTALL = ("python3-redis is not installed for " + sys.executable +
           " (run scripts/lab-clients.sh as root: it installs Debian's python3-redis)")

try:
    import redis
    import redis.exceptions
    import redis.lock
    MISSING = None
except ImportError as e:  # reported by --check and by hello
    redis = None
    MISSING = e


class Adapter:
    def __init__(self):
        self.conn = None
        self.node = -1
        self.locks = {}  # token -> (Lock, t0 on time.monotonic(), ttl in s)

    def hello(self, req):
        if MISSING is not None:
            raise RuntimeError("%s: %s" % (INSTALL, MISSING))
        if req.get("protocol") != 1:
            raise RuntimeError("protocol %r (this adapter speaks 1)" % req.get("protocol"))
        nodes = req.get("nodes") or []
        if not nodes:
            raise RuntimeError("no nodes")
        self.node = len(nodes) // 2
        spec = nodes[self.node]
        if spec.startswith("redis+sentinel://"):
            raise RuntimeError("Sentinel-named nodes (%s) are not supported by this adapter" % spec)
        tls = spec.startswith("rediss://")
        rest = spec.split("://", 1)[1] if "://" in spec else spec
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit():
            raise RuntimeError("bad node %r (host:port expected)" % spec)
        timeout = (req.get("node_timeout_ms") or 50) / 1000.0
        kwargs = dict(host=host, port=int(port), socket_timeout=timeout,
                      socket_connect_timeout=timeout)
        if tls:
            if not req.get("tls_ca"):
                raise RuntimeError("TLS node %s but no tls_ca" % spec)
            kwargs.update(ssl=True, ssl_ca_certs=req["tls_ca"], ssl_cert_reqs="required")
            # redis-py 4.3 cannot check another name than the host it
            # connects to: with a server name given, the chain is verified
            # and the name is not.
            if req.get("tls_server_name") and req["tls_server_name"] != host:
                kwargs.update(ssl_check_hostname=False)
        self.conn = redis.Redis(**kwargs)
        return {
            "protocol": 1,
            "name": "redis-py",
            "version": redis.__version__,
            "single_instance": True,
            "fencing": False,
            "validity": ("ttl - (time.monotonic() - t0), t0 just before Lock.acquire: redis-py "
                         "keeps no validity of its own; one node, n%d of %d" % (self.node, len(nodes))),
        }

    def acquire(self, req):
        ttl = req["ttl_ms"] / 1000.0
        lock = redis.lock.Lock(self.conn, req["resource"], timeout=ttl, blocking=False)
        t0 = time.monotonic()
        try:
            got = lock.acquire(blocking=False)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            return {"granted": False, "class": "unavailable", "error": "%s: %s" % (type(e).__name__, e)}
        except redis.exceptions.RedisError as e:
            return {"granted": False, "class": "other", "error": "%s: %s" % (type(e).__name__, e)}
        if not got:
            return {"granted": False, "class": "held", "error": "the key is set (SET NX refused)"}
        token = lock.local.token
        token = token.decode() if isinstance(token, bytes) else str(token)
        self.locks[token] = (lock, t0, ttl)
        return {"granted": True, "token": token, "nodes": [self.node],
                "validity_ms": (ttl - (time.monotonic() - t0)) * 1000.0}

    def remaining(self, req):
        held = self.locks.get(req.get("token"))
        if held is None:
            return {"validity_ms": 0}
        _, t0, ttl = held
        return {"validity_ms": (ttl - (time.monotonic() - t0)) * 1000.0}

    def extend(self, req):
        held = self.locks.get(req.get("token"))
        if held is None:
            return {"extended": False, "class": "lost", "error": "no such lock here"}
        lock = held[0]
        ttl = req["ttl_ms"] / 1000.0
        t0 = time.monotonic()
        try:
            lock.extend(ttl, replace_ttl=True)
        except redis.exceptions.LockNotOwnedError as e:
            return {"extended": False, "class": "lost", "error": str(e)}
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            return {"extended": False, "class": "unavailable", "error": "%s: %s" % (type(e).__name__, e)}
        except redis.exceptions.RedisError as e:  # LockError included
            return {"extended": False, "class": "other", "error": "%s: %s" % (type(e).__name__, e)}
        self.locks[req["token"]] = (lock, t0, ttl)
        return {"extended": True, "token": req["token"],
                "validity_ms": (ttl - (time.monotonic() - t0)) * 1000.0}

    def release(self, req):
        held = self.locks.pop(req.get("token"), None)
        if held is None:
            return {"released": False, "class": "lost", "error": "no such lock here"}
        try:
            held[0].release()
        except redis.exceptions.LockNotOwnedError as e:
            return {"released": False, "class": "lost", "error": str(e)}
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            return {"released": False, "class": "unavailable", "error": "%s: %s" % (type(e).__name__, e)}
        except redis.exceptions.RedisError as e:
            return {"released": False, "class": "other", "error": "%s: %s" % (type(e).__name__, e)}
        return {"released": True}


def main():
    if "--check" in sys.argv[1:]:
        if MISSING is not None:
            sys.stderr.write("%s: %s\n" % (INSTALL, MISSING))
            return 1
        print("redis-py %s (%s)" % (redis.__version__, sys.executable))
        return 0
    adapter = Adapter()
    ops = {"hello": adapter.hello, "acquire": adapter.acquire, "remaining": adapter.remaining,
           "extend": adapter.extend, "release": adapter.release}
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        try:
            req = json.loads(line)
        except ValueError:
            out = {"id": None, "ok": False, "error": "not JSON: %s" % line[:200]}
        else:
            op = ops.get(req.get("op"))
            if op is None:
                out = {"id": req.get("id"), "ok": False, "error": "unknown op %r" % req.get("op")}
            elif req.get("op") != "hello" and adapter.conn is None:
                out = {"id": req.get("id"), "ok": False, "error": "hello first"}
            else:
                try:
                    out = {"id": req.get("id"), "ok": True}
                    out.update(op(req))
                except Exception as e:  # an adapter bug: the harness stops the client
                    out = {"id": req.get("id"), "ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
