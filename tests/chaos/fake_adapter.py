#!/usr/bin/env python3
"""A fake client under test for tests/chaos/external_client_test.cc.

It speaks the adapter protocol of chaos/README.md ("Any client under test")
over an in-memory lock table (no server), and misbehaves on request, so the
test can check the framing and the mapping of ExternalBackend:

  fake_adapter.py [--log=FILE] [--fencing] [--hello=error|garbage|old|noise]

The resource of an acquire picks its behaviour:
  refuse-<class>  not granted, with that class ("refuse-nope": an unknown one)
  die             exits with status 7 without answering
  garbage         answers a line that is not JSON
  wrong-id        answers with another id
  hang            never answers (sleeps until killed)
  huge            answers a line longer than the 64 KiB limit
  no-token        grants without a token
  stale           grants with validity ttl - 10 ms, but `remaining` says -50
                  (as if the client had been paused while the grant waited)
  anything else   granted when free, validity = ttl - 10 ms, token "tok-<n>"
Every request line is appended to --log, when given.
"""

import json
import sys
import time


def main():
    args = sys.argv[1:]
    log = None
    fencing = "--fencing" in args
    hello_mode = ""
    for a in args:
        if a.startswith("--log="):
            log = open(a[len("--log="):], "a")
        if a.startswith("--hello="):
            hello_mode = a[len("--hello="):]
    held = {}  # resource -> (token, expiry on time.monotonic())
    n = 0
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        if log:
            log.write(line)
            log.flush()
        req = json.loads(line)
        rid = req["id"]
        op = req["op"]
        out = {"id": rid, "ok": True}
        if op == "hello":
            if hello_mode == "error":
                out = {"id": rid, "ok": False, "error": "fake is not installed: run fake-install"}
            elif hello_mode == "garbage":
                sys.stdout.write("hello there\n")
                sys.stdout.flush()
                continue
            elif hello_mode == "noise":
                sys.stdout.write("a library that prints on stdout\n")
            out.update(protocol=0 if hello_mode == "old" else 1, name="fake", version="0.1",
                       single_instance=True, fencing=fencing, validity="ttl - 10 ms")
        elif op == "acquire":
            r = req["resource"]
            if r.startswith("refuse-"):
                out.update(granted=False, **{"class": r[len("refuse-"):]}, error="refused " + r)
            elif r == "die":
                return 7
            elif r == "garbage":
                sys.stdout.write("{this is not json\n")
                sys.stdout.flush()
                continue
            elif r == "wrong-id":
                out["id"] = rid + 100
                out.update(granted=False, **{"class": "held"})
            elif r == "hang":
                time.sleep(600)
                return 0
            elif r == "huge":
                out.update(granted=False, **{"class": "held"}, error="x" * 70000)
            elif r == "no-token":
                out.update(granted=True, validity_ms=100)
            elif r == "stale":
                held[r] = ("stale-token", time.monotonic() - 0.05)
                out.update(granted=True, token="stale-token", validity_ms=req["ttl_ms"] - 10)
            elif r in held and held[r][1] > time.monotonic():
                out.update(granted=False, **{"class": "held"}, error="held by " + held[r][0])
            else:
                n += 1
                token = "tok-%d" % n
                held[r] = (token, time.monotonic() + req["ttl_ms"] / 1000.0)
                out.update(granted=True, token=token, validity_ms=req["ttl_ms"] - 10,
                           nodes=[0], drift_ms=3)
                if fencing:
                    out["fencing_token"] = 100 + n
        elif op in ("remaining", "extend", "release"):
            r = req["resource"]
            mine = r in held and held[r][0] == req["token"]
            if op == "remaining":
                left = (held[r][1] - time.monotonic()) * 1000.0 if mine else 0
                out.update(validity_ms=left)
            elif op == "extend":
                if mine and held[r][1] > time.monotonic():
                    held[r] = (req["token"], time.monotonic() + req["ttl_ms"] / 1000.0)
                    out.update(extended=True, token=req["token"], validity_ms=req["ttl_ms"] - 1)
                else:
                    out.update(extended=False, **{"class": "lost"}, error="not ours")
            else:
                if mine:
                    del held[r]
                    out.update(released=True)
                else:
                    out.update(released=False, **{"class": "lost"}, error="not ours")
        else:
            out = {"id": rid, "ok": False, "error": "unknown op " + op}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
