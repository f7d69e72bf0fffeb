// redlock-chaos-client: one client process of a chaos run (chaos/workload.h).
//
//   redlock-chaos-client --name=c1 --variant=library --nodes=h:p,h:p,h:p
//       --data=h:p --history=/run/c1.jsonl [--marker-fd=3] [--resources=r0,r1]
//       [--ttl-ms=1000] [--use-ms=20] [--uses-per-lease=1] [--guard-ms=100]
//       [--think-ms=5] [--retry-ms=20] [--node-timeout-ms=50]
//       [--drift-factor=0.01] [--fencing] [--release=false] [--inspect-nodes]
//       [--seed=N] [--duration-ms=60000] [--max-ops=N]
//
// --variant: library (redlock::Client) or one of the deliberately broken
// implementations of tests/chaos/broken_client.h (no-elapsed, plain-del,
// wall-clock, no-partial-release). SIGTERM ends the loop after the current
// iteration (a held lease is released first).

#include <signal.h>
#include <string.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "chaos/workload.h"
#include "tests/chaos/broken_client.h"

namespace {

// Set by the handler, read by the loop. A process-directed signal may be
// delivered to any thread (the library's I/O thread too), so this must be an
// atomic, not a volatile bool; lock-free, it is async-signal-safe.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnTerm(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      fprintf(stderr,
              "usage: %s --name=c1 --nodes=h:p,... --data=h:p --history=FILE [options]\n"
              "see chaos/workload.h and chaos/README.md\n",
              argv[0]);
      return 0;
    }
  }
  absl::StatusOr<redlock::chaos::ClientConfig> config = redlock::chaos::ParseClientArgs(args);
  if (!config.ok()) {
    fprintf(stderr, "redlock-chaos-client: %s\n", config.status().ToString().c_str());
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnTerm;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<redlock::chaos::LockBackend>> backend =
      config->variant == redlock::chaos::ClientVariant::kLibrary
          ? redlock::chaos::MakeLibraryBackend(*config)
          : redlock::chaos::MakeBrokenBackend(*config);
  if (!backend.ok()) {
    fprintf(stderr, "%s: %s\n", config->name.c_str(), backend.status().ToString().c_str());
    return 2;
  }
  return redlock::chaos::RunClientLoop(*config, **backend, &g_stop);
}
