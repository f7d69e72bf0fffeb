// chaos/run/scenario.h: what a chaos scenario is, and running one.
//
// A scenario is a setup (nodes, persistence, clock shims, how clients reach
// the nodes, replication, the client processes), a fault schedule
// (chaos/run/schedule.h) and an expectation per property. Scenarios are
// files (chaos/scenarios/*.yaml, format in chaos/README.md, read by
// chaos/scenarios/scenario_file.h); the explorer (chaos/explore/) builds them
// in memory.
//
// The runner starts everything, plays the schedule until the time budget,
// heals every fault (but those the configuration must tolerate, for the
// recovery check), stops the clients, checks for leftover keys, records the
// final counters, merges the histories and runs the checker
// (chaos/check/checker.h), then compares the violation counts with the
// expectation:
//
//   S1..S4  chaos/check/checker.h
//   S5      leftover keys: once the clients have exited and every fault is
//           healed, (a) no node holds a lock key whose token belongs to no
//           grant (a failed attempt's partial grant that was never released),
//           and (b) no lock key at all survives a ttl (plus a margin) after
//           the end.
//   L1      recovery: within 2 ttl + 2 s of the end of every fault the
//           configuration need not tolerate (healed, or done for an instant
//           such as a failover), unless another such fault acts in that
//           window, and while those it must tolerate (one stale Sentinel, a
//           minority of nodes down) still act, some client is granted the
//           lock.
//
// Verdict: OK when every property the expectation lists as clean shows no
// violation and the violations it expects are found; a safe configuration
// with a violation, or an unsafe one without, is FAIL. A run that made fewer
// than Expectation::min_grants grants is FAIL too (nothing was tested).
//
// Thread-safety: RunScenario may be called from any thread, one at a time
// (it runs the scenario on a thread of its own: nodes and clients die with
// the thread that forked them, and namespace runs move that thread into a
// network namespace).

#ifndef REDLOCK_CHAOS_RUN_SCENARIO_H_
#define REDLOCK_CHAOS_RUN_SCENARIO_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "chaos/check/checker.h"
#include "chaos/clients/workload.h"
#include "chaos/faults/fault_kind.h"
#include "chaos/run/schedule.h"

namespace redlock::chaos {

struct Expectation {
  PropertySet clean = 0;         // must show no violation
  PropertySet violated_all = 0;  // each must show at least one
  PropertySet violated_any = 0;  // at least one of them must show one
  int64_t min_grants = 3;
  // "clean", "S1 found", "S1|S3 found; S4 clean", ...
  std::string Describe() const;
};

// S1..S5 clean (L1 is judged only where an expectation names it).
Expectation ExpectClean();

using Violations = std::array<int64_t, kNumHarnessProperties>;

// The harness's index (kS1 ...) of a checker property: S1-S4 keep theirs,
// S6 and S7 come after S5 and L1.
inline int HarnessIndex(Property p) {
  switch (p) {
    case Property::kAtMostK:
      return kS6;
    case Property::kLeaderTerms:
      return kS7;
    case Property::kStaleWriteSeen:
      return kS9;
    default:
      return static_cast<int>(p);
  }
}

// OK/FAIL for these counts, and why when FAIL.
bool JudgeExpectation(const Expectation& e, const Violations& v, int64_t grants, std::string* why);

// ---- S5 ------------------------------------------------------------------------------

struct KeyState {
  int node = 0;
  std::string key;
  std::string value;
  int64_t pttl_ms = -2;  // PTTL: -1 no expiry, -2 missing
};

struct LeftoverKey {
  KeyState state;
  std::string why;
};

// S5(a): keys whose value is not the token of any grant. Pure.
std::vector<LeftoverKey> FailedAttemptLeftovers(const std::vector<KeyState>& keys,
                                                const std::vector<std::string>& grant_tokens);

// ---- Scenarios -------------------------------------------------------------------

struct ScenarioSetup {
  int nodes = 5;
  bool aof = false;              // appendonly yes, appendfsync always
  bool node_clock_shim = false;  // nodes under the clock shim
  bool client_clock_shim = false;
  Topology topology = Topology::kDirect;
  // Run inside a private network namespace (root), also for topologies that
  // need no partition rules (a stale Sentinel is cut off by nft rules).
  bool netns = false;
  // kPerClientProxies: client k reaches views[k] (links outside are down for
  // the whole run). Empty: every link up.
  std::vector<std::vector<int>> views;
  // The clients (name, nodes, data, history, seed are filled in by the runner).
  std::vector<ClientConfig> clients;
  // How long the schedule may run.
  absl::Duration budget = absl::Seconds(8);
  // The nodes speak TLS only (rediss://, a throw-away CA).
  bool tls = false;
  // Fault-free tail after the body, before the clients are stopped and the
  // S5 scan. Negative: the largest client ttl + 500 ms (at most 3 s).
  absl::Duration quiet = absl::Seconds(-1);
  // Replicated nodes (chaos/faults/replication.h): every node a master with
  // this many asynchronous replicas; 0: independent masters. Needs
  // kPerClientProxies (the harness re-points clients after a failover) or
  // kSentinelDiscovery (clients ask the Sentinels).
  int replicas = 0;
  // With replicas: this many redis-sentinel processes watch every master
  // (quorum: a majority of them). 0: none.
  int sentinels = 0;
  // With replicas: replication is held on nodes n0 .. n<stalled-1> from
  // before the clients start (a replica_stall fault lasting the run).
  int stalled = 0;
};

struct Scenario {
  std::string name;
  std::string config;   // one short line for the table
  std::string summary;  // what happens, the expected verdict and why
  bool quick = false;   // part of --quick (the CI subset)
  Expectation expect;
  ScenarioSetup setup;
  Schedule schedule;
  std::string file;  // where it was read from ("" when built in code)

  bool needs_root() const { return setup.topology == Topology::kNamespace || setup.netns; }
};

// What the fault kinds see of a scenario's setup.
RunShape ShapeOf(const ScenarioSetup& setup);

// Checks a scenario as a whole (names, clients, the topology's needs, the
// schedule against the shape). The message names what is wrong.
absl::Status ValidateScenario(const Scenario& scenario);

// ---- Running -------------------------------------------------------------------

struct RunOptions {
  uint64_t seed = 1;
  // redlock-chaos-client; "" = next to this executable, then the build tree.
  std::string client_binary;
  // redlock-chaos-broken-client (the deliberately broken variants, test code
  // built with REDLOCK_BUILD_TESTS); "" = looked up like client_binary.
  std::string broken_client_binary;
  // Keep the histories (and the checker's report) in keep_dir/<scenario>/.
  std::string keep_dir;
  // Write the timeline picture (chaos/plot/plot.h) to plot_dir/<scenario>.svg.
  std::string plot_dir;
  bool verbose = false;
};

struct ScenarioResult {
  std::string name;
  std::string config;
  Expectation expect;
  bool skipped = false;
  std::string skip_reason;
  std::string error;  // a harness error (the verdict is FAIL)
  CheckCounts counts;
  Violations violations{};
  double availability = 0;  // grants / invokes
  std::vector<LeftoverKey> leftovers;
  std::vector<std::string> examples;  // a few violation descriptions
  std::vector<std::string> notes;
  bool ok = false;
  std::string why;  // why FAIL
  absl::Duration elapsed;
  std::string kept_dir;
  std::string plot_path;  // the picture written, if any
  // The faults the schedule injected: how many of each kind, and every one
  // as resolved (concrete values, when it was injected, what it may break).
  struct InjectedFault {
    absl::Duration at;
    FaultTemplate fault;
    // What it may break (a client fault: if its client held the lock when it
    // began), and what it may break if its client did not (the marker the
    // harness saw can lag the client by a few ms under load: the judge
    // decides from the history which applies).
    PropertySet may_violate = 0;
    PropertySet may_violate_idle = 0;
    // Client faults (a pause, a clock jump of a client) explain only the
    // violations their clients take part in; empty: the whole run.
    std::vector<std::string> scope;
    // When it acted (raw clock): injected, and healed (or the run's end).
    int64_t begin_raw = 0;
    int64_t end_raw = 0;
  };
  std::map<std::string, int> injected;
  std::vector<InjectedFault> injected_faults;
  // Every violation the checker kept (S1..S4), with the processes of its
  // grants; S5 and L1 have none.
  struct ViolationRef {
    int property = 0;
    std::vector<std::string> processes;
    std::string description;
    int64_t t = 0, t_end = 0;  // raw clock: when it happened
  };
  // Every grant's hold (raw clock), by client.
  struct Hold {
    std::string process;
    int64_t from = 0, to = 0;
  };
  std::vector<Hold> holds;
  // The largest client ttl (how long a fault can matter after it ended: a
  // forgotten key hurts while the lease it belonged to lasts).
  int64_t max_ttl_ms = 0;
  std::vector<ViolationRef> violation_refs;
};

// The paths of redlock-chaos-client and redlock-chaos-broken-client to use.
std::string DefaultClientBinary();
std::string DefaultBrokenClientBinary();

ScenarioResult RunScenario(const Scenario& scenario, const RunOptions& options);

// One run's line for progress output: "OK (3.2s, 120 ops, S1-L1 0/0/0/0/0/0)",
// and ": why" when there is one.
std::string ProgressLine(const ScenarioResult& r);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_RUN_SCENARIO_H_
