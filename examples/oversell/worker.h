// One worker process of the oversell example: sells units of a stock kept in
// a Redis data server, one read-pause-write at a time, with or without a
// lock, with or without fencing (README.md next to this file).

#ifndef REDLOCK_EXAMPLES_OVERSELL_WORKER_H_
#define REDLOCK_EXAMPLES_OVERSELL_WORKER_H_

#include <string>

#include "absl/time/time.h"

namespace oversell {

// Keys on the data server.
inline constexpr char kStockKey[] = "oversell:stock";
inline constexpr char kFenceKey[] = "oversell:stock:fence";  // highest fencing token seen
inline constexpr char kOrdersKey[] = "oversell:orders";      // one element per order
inline constexpr char kStaleKey[] = "oversell:stale";        // fenced operations refused
inline constexpr char kReadyKey[] = "oversell:ready";        // workers set up
inline constexpr char kGoKey[] = "oversell:go";              // start barrier
// The lock (a key on the lock nodes).
inline constexpr char kResource[] = "oversell/inventory";

enum class LockMode {
  kNone,    // no lock at all
  kLock,    // redlock around each read-pause-write
  kFenced,  // redlock, and the data server checks the lease's fencing token
};

struct WorkerConfig {
  int id = 0;
  LockMode mode = LockMode::kNone;
  std::string data;   // host:port of the data server
  std::string nodes;  // the lock nodes, host:port,...
  absl::Duration ttl = absl::Seconds(10);
  absl::Duration pause = absl::Milliseconds(25);
  // Gives up after this long (a bound, never reached in a healthy run).
  absl::Duration deadline = absl::Seconds(40);
};

// Runs one worker until it reads a stock of zero. Returns the process exit
// code (0, or 1 with a message on stderr).
int RunWorker(const WorkerConfig& config);

}  // namespace oversell

#endif  // REDLOCK_EXAMPLES_OVERSELL_WORKER_H_
