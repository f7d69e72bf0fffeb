// The `fair` scenario (only when named; bench/fair_scenario.cc): the fair
// lock (redlock/fair_mutex.h) beside the mutex.
//
//   - one caller, one key: the mutex's TryAcquire + Release and the fair
//     lock's (its try: the lock when free and nobody waits);
//   - one hot resource: --fair_processes worker processes (this binary again,
//     --fair_worker) of --fair_threads threads each, every thread looping
//     Acquire(wait) + --hot_hold + Release, the mutex and then the fair lock:
//     throughput, the hand-off across processes (one holder's Release
//     returning to the next grant, on CLOCK_MONOTONIC), attempts per grant
//     (each call's Outcome, from an observer in every worker), the servers'
//     CPU per grant, and the spread of the calls' waiting times (p50, p90,
//     p99, max) and of the grants per process.

#ifndef REDLOCK_BENCH_FAIR_SCENARIO_H_
#define REDLOCK_BENCH_FAIR_SCENARIO_H_

#include <string>

#include "absl/time/time.h"

namespace redlock::bench {

struct FairWorkerArgs {
  std::string nodes;     // host:port,...
  std::string resource;  // the hot resource
  bool fair = true;      // the fair lock, or the mutex
  int threads = 8;
  absl::Duration warmup;
  absl::Duration duration;
  absl::Duration ttl;
  absl::Duration node_timeout;
  absl::Duration hold;
  absl::Duration wait;
};

// The worker's main (redlock-bench --fair_worker ...): "ready", the start
// signal (EOF on fd 3), the run, one JSON line. 0 when it ran, 1 when it
// could not (the message on stderr and a JSON line with "error").
int RunFairWorker(const FairWorkerArgs& args);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_FAIR_SCENARIO_H_
