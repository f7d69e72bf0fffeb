// The scenarios of redlock-bench and how one of them runs at one N.
//
// A scenario at one N is a group of rows measured one after the other on the
// same nodes: the floor first, then the library and the baselines, each with
// 1 caller and with `callers_many` callers where that makes sense. Faults (a
// stopped node, a slow node) are switched on for each row after its
// connections are made and before its warm-up, and off after its
// measurement, so every row starts from healthy, connected nodes and the
// nodes are healthy again between rows.
//
// Scenarios:
//   healthy            library, the pipelined limit, sequential, wait-for-all;
//                      1 and many callers; library async with many
//   sweep              library blocking vs async vs the pipelined limit at
//                      each count of --sweep_callers
//   stopped            the last of the N nodes SIGSTOPped (N >= 3)
//   slow1              one node behind the fault proxy with added latency
//   slow2              two nodes behind the proxy with added latency (N >= 3)
//   slow-near-timeout  one node whose latency straddles node_timeout
//   hot                one contended resource: hand-off latency with release
//                      notifications on and off
//   fencing            Options::fencing on, side by side with off
//   multilock          MultiLock over 3 resources, quorum and all-nodes modes
//   backends           Redis vs etcd vs ZooKeeper vs PostgreSQL (only with
//                      --scenario backends; bench/backends_scenario.h)
//   tls                the library on TLS nodes vs plain ones, and the cost of
//                      connecting (tls_scenario.cc)
//   family             the lock family beside the mutex: 64 readers, the
//                      semaphore at K = 1, 4, 16, reader-writer hand-offs,
//                      election takeover after SIGKILL/SIGSTOP (only with
//                      --scenario family; family_scenario.cc)
//   semaphore-availability  how many nodes may be down for the semaphore's
//                      permits vs counting holders on more than N*K/(K+1)
//                      nodes, K = 1, 4, 16 (only when named)
//   durability         every node given one replica for the group;
//                      Options::durability off vs on (WAIT 1), and on with
//                      one replica stopped

#ifndef REDLOCK_BENCH_SCENARIOS_H_
#define REDLOCK_BENCH_SCENARIOS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/results.h"
#include "bench/workload.h"
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

struct Scenario {
  std::string name;
  std::string description;
  bool needs_fleet = false;  // stops nodes or puts proxies in front of them
  int min_n = 1;
  std::vector<int> smoke_ns;
  std::vector<int> quick_ns;
  std::vector<int> full_ns;
  void (*run)(Context& ctx, int n, GroupResult* group) = nullptr;
  // Runs only when named with --scenario (it starts servers of its own).
  bool explicit_only = false;
};

// For scenarios in files of their own. The group's first row: the floor on
// the first of `nodes`.
RowResult MeasureFloor(Context& ctx, const std::vector<Endpoint>& nodes);
// One row (impl, family, variant and callers from `identity`) of the cycles
// `make` builds, one per caller, before anything is timed: warm-up,
// measurement and progress as for every row.
RowResult MeasureRow(Context& ctx, RowResult identity,
                     std::function<absl::StatusOr<std::vector<CycleFn>>()> make);

// The run functions of those scenarios.
void RunTls(Context& ctx, int n, GroupResult* group);     // tls_scenario.cc
void RunFamily(Context& ctx, int n, GroupResult* group);  // family_scenario.cc
void RunSemaphoreAvailability(Context& ctx, int n, GroupResult* group);  // family_scenario.cc

const std::vector<Scenario>& AllScenarios();
const Scenario* FindScenario(const std::string& name);

// The N values `scenario` runs at under `settings` (mode default or --n),
// before checking the number of nodes available.
std::vector<int> NsFor(const Scenario& scenario, const BenchSettings& settings);

// Runs `scenario` at `n`, or returns the group marked skipped with the
// reason (not enough nodes, no fleet control).
GroupResult RunGroup(const Scenario& scenario, int n, Context& ctx);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_SCENARIOS_H_
