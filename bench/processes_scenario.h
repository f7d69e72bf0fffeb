// The `processes` scenario: the capacity of one fleet. P client processes
// (P in --processes, default 1,2,4,8), each with its own Client and
// --callers async chains, lock against the same N nodes at the same time;
// the row gives their aggregate cycles/s, their CPU per cycle, and the
// servers' CPU per cycle (user+sys of the redis-server processes this run
// started, from /proc/<pid>/stat; with --nodes, from INFO cpu).
//
// Every lock touches every node (N SETs and N compare-and-deletes), so a
// fleet serves at most what one node can: adding clients stops adding
// cycles once the nodes are busy. The workers are this binary again
// (--process_worker): each connects, says "ready", waits for the start
// signal (the end of a pipe shared by all workers, closed by the parent),
// runs warm-up and measurement like any row, and prints its result as one
// JSON line.

#ifndef REDLOCK_BENCH_PROCESSES_SCENARIO_H_
#define REDLOCK_BENCH_PROCESSES_SCENARIO_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/time/time.h"
#include "bench/stats.h"

namespace redlock::bench {

struct ProcessWorkerArgs {
  std::string nodes;  // host:port,...
  std::string key;    // resource prefix of this worker
  int chains = 64;
  absl::Duration warmup;
  absl::Duration duration;
  absl::Duration ttl;
  absl::Duration node_timeout;
  int64_t iterations = 1'000'000;
};

// A latency histogram as a worker process reports it on its JSON line, and
// back (the processes and fair scenarios' workers).
nlohmann::json HistogramJson(const LatencyHistogram& h);
LatencyHistogram HistogramFromJson(const nlohmann::json& j);

// The worker's main (redlock-bench --process_worker ...): 0 when it ran, 1
// when it could not (the message on stderr, and a JSON line with "error").
int RunProcessWorker(const ProcessWorkerArgs& args);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_PROCESSES_SCENARIO_H_
