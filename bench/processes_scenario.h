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
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/context.h"
#include "bench/results.h"
#include "bench/stats.h"
#include "testkit/process.h"

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

// Worker processes of this binary (redlock-bench --process_worker,
// --fair_worker) that run side by side, the parent's side: each is started
// with its arguments and the read end of a start pipe (fd 3), says "ready",
// begins when the parent closes the pipe (Go), and prints one JSON line.
class WorkerProcesses {
 public:
  WorkerProcesses() = default;
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;
  ~WorkerProcesses();  // closes the pipe: workers still waiting go, and end

  // Starts one worker of `self_exe` per entry of `argvs` and waits until
  // each says "ready" (20 s each); the error says which did not.
  absl::Status Start(const std::string& self_exe, std::vector<std::vector<std::string>> argvs);
  // Closes the start pipe: every worker's read of it returns at once.
  void Go();
  // Worker i's JSON line (waited for `wait`), or kInternal with its "error"
  // (or "no result"); then the worker is reaped.
  absl::StatusOr<nlohmann::json> Result(size_t i, absl::Duration wait);
  size_t size() const { return workers_.size(); }

 private:
  int go_[2] = {-1, -1};
  std::vector<std::unique_ptr<testkit::Process>> workers_;
};

// The parent's window while worker processes run: it sleeps through
// `warmup`, then reads the servers' CPU time (NodeSet::ServersCpuUs of the
// first `nodes`) before and after sleeping `duration`.
struct ServersCpuWindow {
  int64_t cpu_start = -1;
  int64_t cpu_stop = -1;
  double seconds = 0;  // the window's length as measured
};
ServersCpuWindow WatchServersCpu(const NodeSet& nodes, int n, absl::Duration warmup,
                                 absl::Duration duration);
// Sets row.server_cpu_us, when both readings were had: the servers' CPU rate
// over the window times the workers' measured time (row.measured_s).
void SetServersCpu(const ServersCpuWindow& w, RowResult& row);

// The worker's side: "ready" on stdout, then the wait for the start signal
// (the parent closes the pipe's other end: EOF on fd 3).
void WorkerReadyThenWaitForGo();

// The worker's failure: `why` on stderr (after `who`) and as {"error": why}
// on its JSON line; returns 1, the worker's exit code.
int WorkerFail(const char* who, const std::string& why);

// The worker's main (redlock-bench --process_worker ...): 0 when it ran, 1
// when it could not (the message on stderr, and a JSON line with "error").
int RunProcessWorker(const ProcessWorkerArgs& args);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_PROCESSES_SCENARIO_H_
