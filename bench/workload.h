// The workload runner of redlock-bench: C caller threads repeating a cycle
// (acquire, then release), or C asynchronous chains each starting its next
// cycle from the callback that ends the previous one; a warm-up, then a
// timed measurement, bounded both by a number of cycles and by wall time.
//
//   std::vector<CycleFn> callers;           // one per thread, built beforehand
//   for (int i = 0; i < 64; ++i) callers.push_back(MakeCycle(i));
//   RunLimits limits{.warmup = absl::Milliseconds(200), .duration = absl::Seconds(2),
//                    .iterations = 1'000'000};
//   RunOutput out = RunWorkload(std::move(callers), limits, {});
//
// A cycle that starts during the warm-up is not recorded; a cycle that starts
// during the measurement is recorded even if it ends after the measurement
// stops, and the measured time runs to the end of the last recorded cycle, so
// throughput = successful recorded cycles / measured time.
//
// RunChains() does the same with asynchronous cycles: each chain starts one
// cycle, and the cycle's completion starts the next, on whatever thread
// completed it (the client's I/O thread), so C cycles are in flight with no
// thread per caller.
//
// Every loop is bounded: each thread stops after `warmup_iterations +
// iterations` cycles or at `warmup + duration + grace` at the latest, and the
// main thread never waits longer than that either. The measurement lasts
// `duration`, or longer (at most `grace` more) until `min_iterations` cycles
// are recorded.

#ifndef REDLOCK_BENCH_WORKLOAD_H_
#define REDLOCK_BENCH_WORKLOAD_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/stats.h"

namespace redlock::bench {

// Steady-clock nanoseconds.
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What one cycle measured. A negative duration means "not measured".
struct CycleSample {
  int64_t acquire_ns = -1;  // the acquire call
  int64_t cycle_ns = -1;    // acquire + release (only when the acquire succeeded)
  int64_t handoff_ns = -1;  // contended resource: previous Release returned -> Acquire returned
  int64_t handoff_call_ns = -1;  // contended resource: previous Release called -> Acquire returned
  absl::Status acquire_status;
  absl::Status release_status;  // OK when the release was not attempted
  bool ok() const { return acquire_status.ok() && release_status.ok(); }
};

// One caller's cycle. Called repeatedly from one thread.
using CycleFn = absl::AnyInvocable<CycleSample()>;

// One chain's asynchronous cycle: starts it and returns; `done` is called
// exactly once when the cycle is over, on any thread (possibly inside the
// call itself). A chain's cycles never overlap.
using CycleDone = absl::AnyInvocable<void(CycleSample)>;
using ChainFn = absl::AnyInvocable<void(CycleDone done)>;

struct RunLimits {
  absl::Duration warmup = absl::Milliseconds(100);
  int64_t warmup_iterations = 1'000'000;  // total over all threads
  absl::Duration duration = absl::Seconds(1);
  int64_t iterations = 10'000'000;  // recorded cycles, total over all threads
  // The measurement goes on past `duration` (up to `grace`) until this many
  // cycles are recorded, so rows whose cycles are slower than the window
  // (a baseline waiting for a stopped node) still report figures.
  int64_t min_iterations = 3;
  // Extra time a thread may spend finishing its last cycle before giving up
  // on further cycles (cycles themselves are bounded by the lock's timeouts).
  absl::Duration grace = absl::Seconds(10);
};

// Called on the runner's (main) thread.
struct RunHooks {
  absl::AnyInvocable<void()> before_warmup;     // threads exist but wait
  absl::AnyInvocable<void()> at_measure_start;  // warm-up over
  absl::AnyInvocable<void()> at_measure_mid;    // half of the duration
  absl::AnyInvocable<void()> at_measure_stop;   // no new recorded cycle starts
};

struct RunOutput {
  LatencyHistogram acquire;
  LatencyHistogram cycle;
  LatencyHistogram handoff;
  LatencyHistogram handoff_call;
  int64_t attempts = 0;   // recorded cycles
  int64_t successes = 0;  // acquire and release both OK
  // When the first and the last failed cycle ended, from the start of the
  // measurement (-1 without failures): a burst or a steady rate.
  int64_t first_failure_ns = -1;
  int64_t last_failure_ns = -1;
  ErrorCounts acquire_errors;
  ErrorCounts release_errors;
  absl::Duration measured = absl::ZeroDuration();
  int64_t warmup_cycles = 0;
  int64_t rss_start_kb = -1;  // VmRSS when the measurement started
  int64_t rss_mid_kb = -1;    // half-way
  int64_t rss_end_kb = -1;    // when it stopped
  int64_t peak_rss_kb = -1;   // VmHWM over warm-up and measurement
  bool peak_is_per_run = false;
  bool hit_iteration_cap = false;
  // getrusage(RUSAGE_SELF) from the start of the measurement to its stop,
  // and the cycles that completed in that window (the cycles of the warm-up
  // still running at the start make up for those still running at the stop).
  ProcessUsage usage;
  int64_t usage_cycles = 0;
  // RunChains: chains still in a cycle when the runner gave up waiting
  // (their callbacks may still come; they record nothing).
  int64_t chains_left_running = 0;
};

RunOutput RunWorkload(std::vector<CycleFn> callers, const RunLimits& limits, RunHooks hooks);

// The asynchronous counterpart: the calling thread starts every chain, then
// runs the phases like RunWorkload. The callbacks may outlive the call (a
// chain whose cycle never completes); whatever they reach is kept alive by
// them, so the caller may destroy the client behind the chains at any time
// after this returns.
RunOutput RunChains(std::vector<ChainFn> chains, const RunLimits& limits, RunHooks hooks);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_WORKLOAD_H_
