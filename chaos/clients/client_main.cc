// redlock-chaos-client: one client process of a chaos run (chaos/clients/workload.h).
//
//   redlock-chaos-client --name=c1 --variant=library [--client=library]
//       [--client-timeout-ms=N] --nodes=h:p,h:p,h:p
//       --data=h:p --history=/run/c1.jsonl [--marker-fd=3] [--resources=r0,r1]
//       [--ttl-ms=1000] [--use-ms=20] [--uses-per-lease=1] [--guard-ms=100]
//       [--think-ms=5] [--retry-ms=20] [--node-timeout-ms=50]
//       [--drift-factor=0.01] [--drift-floor-ms=2] [--fencing] [--durability-replicas=K]
//       [--durability-timeout-ms=20] [--release=false] [--inspect-nodes]
//       [--seed=N] [--duration-ms=60000] [--max-ops=N]
//
// --variant: library (redlock::Client) only. The deliberately broken
// implementations (no-elapsed, plain-del, wall-clock, no-partial-release) are
// test code, in redlock-chaos-broken-client (tests/chaos/). --client: the
// Redlock client under test, "library" (the default), "node-redlock",
// "redis-py" or the command line of an adapter (chaos/clients/external_client.h,
// chaos/README.md "Any client under test"); --client-timeout-ms bounds each
// adapter request (default ttl + 5 s). SIGTERM ends the loop after the
// current iteration (a held lease is released first).

#include "chaos/clients/workload.h"

int main(int argc, char** argv) {
  return redlock::chaos::ClientMain(argc, argv, redlock::chaos::MakeLibraryBackend);
}
