// What every scenario of redlock-bench runs with: the run's settings, the
// nodes (a fleet it started, or --nodes), the progress line, and the state
// rows share (the harness errors, the key of the next row).

#ifndef REDLOCK_BENCH_CONTEXT_H_
#define REDLOCK_BENCH_CONTEXT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "redlock/options.h"
#include "testkit/fleet.h"

namespace redlock::bench {

enum class Mode { kSmoke, kQuick, kFull };
const char* ModeName(Mode mode);

struct BenchSettings {
  Mode mode = Mode::kQuick;
  absl::Duration warmup = absl::Milliseconds(150);
  absl::Duration duration = absl::Milliseconds(400);
  int64_t iterations = 1'000'000;  // recorded cycles per row, all callers together
  absl::Duration memory_duration = absl::Milliseconds(1500);  // library rows with a stopped node
  absl::Duration memory_warmup = absl::Seconds(1);            // their warm-up under the fault
  absl::Duration hot_duration = absl::Seconds(1);
  absl::Duration stopped_duration = absl::Seconds(5);  // backends: a member stopped
  int callers_many = 64;
  std::vector<int> sweep_callers = {1, 8, 64, 256};         // the sweep scenario's rows
  absl::Duration sweep_duration = absl::Milliseconds(250);  // and their measurement
  absl::Duration ttl = absl::Seconds(10);
  absl::Duration node_timeout = absl::Milliseconds(50);
  absl::Duration slow_latency = absl::Milliseconds(2);
  absl::Duration slow_near_latency = absl::Milliseconds(45);
  absl::Duration slow_near_jitter = absl::Milliseconds(10);
  int hot_waiters = 8;
  absl::Duration hot_hold = absl::Microseconds(200);
  absl::Duration hot_wait = absl::Seconds(2);
  // spread: the user's own profile (--latency-profile), one delay each way
  // per node; empty: the built-in profiles.
  std::vector<absl::Duration> latency_profile;
  absl::Duration spread_duration = absl::Seconds(1);  // the spread rows' measurement
  // processes: the process counts (--processes), and the binary to start.
  std::vector<int> processes = {1, 2, 4, 8};
  absl::Duration processes_duration = absl::Seconds(1);
  // fair: the hot rows' worker processes and waiting threads per process,
  // their measurement, and their Acquire's wait.
  int fair_processes = 8;
  int fair_threads = 8;
  absl::Duration fair_duration = absl::Seconds(3);
  absl::Duration fair_wait = absl::Seconds(30);
  std::string self_exe;
  uint64_t seed = 0;
  std::string run_id;   // part of every key, so runs never collide
  std::vector<int> ns;  // --n: overrides the mode's N values
};

// The nodes a run uses: a fleet it started (faults possible) or --nodes.
class NodeSet {
 public:
  explicit NodeSet(std::unique_ptr<testkit::Fleet> fleet);
  explicit NodeSet(std::vector<Endpoint> nodes);
  ~NodeSet();

  int size() const { return static_cast<int>(nodes_.size()); }
  std::vector<Endpoint> First(int n) const;
  const std::vector<Endpoint>& all() const { return nodes_; }
  // Null with --nodes: no node can be stopped or put behind a proxy.
  testkit::Fleet* fleet() const { return fleet_.get(); }
  // The CPU time (user+sys, us) the first `n` servers have used so far,
  // summed: from /proc/<pid>/stat for the bench's own fleet (10 ms ticks),
  // from INFO cpu with --nodes; -1 when one cannot be read.
  int64_t ServersCpuUs(int n) const;

 private:
  std::unique_ptr<testkit::Fleet> fleet_;
  std::vector<Endpoint> nodes_;
};

// A progress line on stderr: rewritten in place on a terminal, one line per
// step otherwise.
class Progress {
 public:
  explicit Progress(int total_groups);
  ~Progress();
  void Group(int index, const std::string& label);
  void Row(const std::string& label);
  void Done();

 private:
  void Print(const std::string& text);
  const int total_;
  int index_ = 0;
  std::string group_;
  const bool tty_;
  const int64_t start_ns_;
  bool dirty_ = false;
};

struct Context {
  const BenchSettings& settings;
  const NodeSet& nodes;
  Progress& progress;
  std::vector<std::string>& harness_errors;
  int next_row = 0;
  // A key prefix unique to one row of this run.
  std::string RowKey();
};

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_CONTEXT_H_
