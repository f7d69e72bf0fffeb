// The baselines redlock-bench measures side by side with the library, on the
// same nodes and in the same run, written with plain hiredis 0.14 (nothing
// from the library):
//
//   floor          one node, one blocking connection: SET key token NX PX ttl,
//                  then the compare-and-delete script by EVALSHA. The cost of
//                  a lock with no quorum at all.
//   sequential     Redlock as most implementations do it: one blocking
//                  connection per node, SET NX PX on each node in turn (each
//                  with its own timeout), decide, then the release on each
//                  node in turn.
//   wait-for-all   Redlock in parallel but without an early decision:
//                  non-blocking sockets to all N nodes, send to all, poll(2)
//                  until every node has answered or reached its timeout, then
//                  decide; the release likewise.
//
// All three compute validity like the library (ttl - elapsed - drift, with
// the library's redlock::DriftAllowance at the options' factor and floor,
// the one piece of library code they use) and use the usual compare-and-delete script (no
// release notification). A connection that times out is closed and
// re-established on next use, as hiredis contexts cannot be reused after a
// timeout; reconnects count against the node's timeout.
//
// Each Locker belongs to one caller thread (its own connections).

#ifndef REDLOCK_BENCH_BASELINES_H_
#define REDLOCK_BENCH_BASELINES_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/locker.h"
#include "redlock/options.h"

namespace redlock::bench {

struct BaselineOptions {
  std::vector<Endpoint> nodes;
  int quorum = 0;  // 0: N/2+1
  absl::Duration node_timeout = absl::Milliseconds(50);
  absl::Duration connect_timeout = absl::Seconds(1);  // first connection only
  double clock_drift_factor = 0.01;
  absl::Duration clock_drift_floor = absl::Milliseconds(2);
};

// The compare-and-delete script every baseline releases with.
extern const char kCompareAndDeleteScript[];

// Each factory connects (options.connect_timeout) and loads the script with
// SCRIPT LOAD on every node it uses; EVAL is the fallback on NOSCRIPT.
// The floor: the first node of `options.nodes` only.
absl::StatusOr<std::unique_ptr<Locker>> NewFloorLocker(const BaselineOptions& options,
                                                       std::string resource);
absl::StatusOr<std::unique_ptr<Locker>> NewSequentialLocker(const BaselineOptions& options,
                                                            std::string resource);
absl::StatusOr<std::unique_ptr<Locker>> NewWaitForAllLocker(const BaselineOptions& options,
                                                            std::string resource);

// ---- What the Redlock baselines and the pipelined limit share ----------------

// 20 bytes from getrandom(2), in hex, like the library's tokens.
std::string NewBaselineToken();

// options.quorum, or N/2+1.
int EffectiveQuorumOf(const BaselineOptions& options);

// The answers of one round.
struct Tally {
  int yes = 0;
  int refused = 0;  // SET NX found the key held
  int failed = 0;   // errors and timeouts
  std::string first_error;
  void Fail(const std::string& why) {
    ++failed;
    if (first_error.empty()) first_error = why;
  }
};

// The Redlock decision of an attempt that started at `start`: a quorum and
// validity left after the elapsed time and the drift allowance
// (redlock::DriftAllowance with clock_drift_factor and clock_drift_floor). Codes as the library's:
// OK, kDeadlineExceeded (no validity left), kAborted (held elsewhere), kUnavailable. `what` starts
// the message ("sequential").
absl::Status AcquireDecision(const char* what, const Tally& t, int n, int quorum,
                             std::chrono::steady_clock::time_point start, absl::Duration ttl,
                             const BaselineOptions& options);
// A release is confirmed by a quorum; kUnavailable when nodes failed,
// kInternal when they answered something else.
absl::Status ReleaseDecision(const char* what, const Tally& t, int n, int quorum);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_BASELINES_H_
