// chaos/scenarios.h: the named, seeded, time-bounded scenarios of
// redlock-chaos and the runner that executes one and judges it.
//
// A scenario is a setup (nodes, persistence, clock shim, how clients reach
// the nodes, the client processes), a nemesis program (the body: faults
// timed by the clock and by markers from the clients) and an expectation per
// property. The runner starts everything, runs the body until its time
// budget, heals every fault, stops the clients, checks for leftover keys,
// records the final counters, merges the histories and runs the checker
// (chaos/checker.h, used as is), then compares the violation counts with the
// expectation:
//
//   S1..S4  chaos/checker.h
//   S5      leftover keys (a harness-level property defined here): once the
//           clients have exited and every fault is healed, (a) no node holds
//           a lock key whose token belongs to no grant (a failed attempt's
//           partial grant that was never released), and (b) no lock key at
//           all survives a ttl (plus a margin) after the end.
//
// With RunOptions::plot_dir, the runner also draws the run (chaos/plot.h).
// The history's nemesis.jsonl ends with a `run` event (scenario, seed,
// configuration, expectation, verdict), so a kept history redrawn by
// `redlock-check --plot` has the same title.
//
// Verdict: OK when every property the expectation lists as clean shows no
// violation and the violations it expects are found; a safe configuration
// with a violation, or an unsafe one without, is FAIL. A run that made fewer
// than Expectation::min_grants grants is FAIL too (nothing was tested).
//
// Thread-safety: RunScenario may be called from any thread, one at a time
// (it runs the scenario on a thread of its own: nodes and clients die with
// the thread that forked them, and partition scenarios move that thread into
// a network namespace).

#ifndef REDLOCK_CHAOS_SCENARIOS_H_
#define REDLOCK_CHAOS_SCENARIOS_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chaos/checker.h"
#include "chaos/clock_control.h"
#include "chaos/fault_proxy.h"
#include "chaos/nemesis.h"
#include "chaos/partition.h"
#include "chaos/replication.h"
#include "chaos/supervisor.h"
#include "chaos/workload.h"

namespace redlock::chaos {

// S1..S4 of the checker plus S5 (leftover keys).
inline constexpr int kS1 = 0, kS2 = 1, kS3 = 2, kS4 = 3, kS5 = 4;
inline constexpr int kNumHarnessProperties = 5;
std::string HarnessPropertyName(int p);  // "S1".."S5"

struct ScenarioResult;
// One run's line for progress output: "OK (3.2s, 120 ops, S1-S5 0/0/0/0/0)",
// with the first `properties` counts, and ": why" when there is one.
std::string ProgressLine(const ScenarioResult& r, int properties);

struct Expectation {
  std::vector<int> clean;         // must show no violation
  std::vector<int> violated_all;  // each must show at least one
  std::vector<int> violated_any;  // at least one of them must show one
  int64_t min_grants = 3;
  // "clean", "S1 found", "S1|S3 found; S4 clean", ...
  std::string Describe() const;
};

Expectation ExpectClean();

// OK/FAIL for these counts (indexes kS1..kS5), and why when FAIL.
bool JudgeExpectation(const Expectation& e, const std::array<int64_t, kNumHarnessProperties>& v,
                      int64_t grants, std::string* why);

// ---- S5 -------------------------------------------------------------------------

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

// ---- Scenarios --------------------------------------------------------------------

enum class Topology {
  kDirect,            // clients connect to the nodes
  kSharedProxies,     // one fault proxy per node, shared by every client
  kPerClientProxies,  // one proxy per client-node link (per-client faults)
  kNamespace,         // private network namespace, nft partitions (root)
  // Replicated nodes only: clients name each node by the Sentinel and its
  // master name (redis+sentinel://) and follow a failover themselves, through
  // the library's Sentinel discovery; the harness re-points nothing.
  kSentinelDiscovery,
};

struct ScenarioSetup {
  int nodes = 5;
  bool aof = false;              // appendonly yes, appendfsync always
  bool node_clock_shim = false;  // nodes under the clock shim
  bool client_clock_shim = false;
  Topology topology = Topology::kDirect;
  // kPerClientProxies: client k reaches views[k] (links outside are down for
  // the whole run). Empty: every link up.
  std::vector<std::vector<int>> views;
  // The clients (name, nodes, data, history, seed are filled in by the runner).
  std::vector<ClientConfig> clients;
  // How long the nemesis program may run.
  absl::Duration budget = absl::Seconds(8);
  // The nodes speak TLS only (rediss://, a throw-away CA): the proxies and
  // the partitions then act on the TCP connections under TLS.
  bool tls = false;
  // Fault-free tail after the body, before the clients are stopped and the
  // S5 scan. Negative: the largest client ttl + 500 ms (at most 3 s).
  absl::Duration quiet = absl::Seconds(-1);
  // Replicated nodes (chaos/replication.h): every node a master with this
  // many asynchronous replicas; 0: independent masters. Needs
  // kPerClientProxies (clients follow a failover through their proxies) or
  // kSentinelDiscovery (and `sentinel`: clients ask the Sentinel).
  int replicas = 0;
  // With replicas: Debian's redis-sentinel watches every master (a scenario
  // without redis-sentinel installed is skipped, a failure under CI).
  bool sentinel = false;
  // With replicas: replication is held (ReplicatedNodes::Stall) on nodes
  // n0 .. n<stalled-1> from before the clients start, so that every grant
  // of the run finds those replicas lagging.
  int stalled = 0;
};

class Run;

struct Scenario {
  std::string name;
  std::string config;   // one short line for the table
  std::string summary;  // what happens, the expected verdict and why
  bool quick = false;   // part of --quick (the CI subset)
  bool needs_root = false;
  Expectation expect;
  ScenarioSetup setup;
  std::function<absl::Status(Run&)> body;
};

// Every scenario, in catalog order.
const std::vector<Scenario>& Catalog();
const Scenario* FindScenario(absl::string_view name);

// ---- The live run (what a body sees) -------------------------------------------

class Run {
 public:
  const Scenario& scenario() const { return *scenario_; }
  const ScenarioSetup& setup() const { return scenario_->setup; }
  std::mt19937_64& rng() { return rng_; }
  uint64_t Uniform(uint64_t lo, uint64_t hi);  // in [lo, hi]
  absl::Duration UniformMs(int64_t lo_ms, int64_t hi_ms);

  // True while the budget lasts and no interrupt arrived.
  bool Active() const;
  absl::Duration Remaining() const;
  // Sleeps min(d, Remaining()); false when the run is over.
  bool Sleep(absl::Duration d);

  NodeSupervisor& nodes() { return *supervisor_; }
  int num_nodes() const;
  int num_clients() const { return static_cast<int>(clients_.size()); }
  ClientProcess& client(int k) { return *clients_[static_cast<size_t>(k)]; }
  static std::string ClientName(int k);  // "c1", "c2", ...
  int64_t ttl_ms() const;                // of client 0

  // Faults through the proxies (logged as nemesis events).
  FaultProxy* proxy(int node);             // kSharedProxies
  FaultProxy* link(int client, int node);  // kPerClientProxies
  [[nodiscard]] absl::Status ProxyFault(int node, Direction d, const FaultSpec& spec);
  [[nodiscard]] absl::Status ProxyFaultBoth(int node, const FaultSpec& spec);
  void ProxyClear(int node);
  void ProxyReset(int node);
  [[nodiscard]] absl::Status LinkFault(int client, int node, Direction d, const FaultSpec& spec);
  void LinkClear(int client, int node);

  Partitioner* partitioner() { return partitioner_.get(); }
  // Replicated nodes (setup.replicas > 0), else null.
  ReplicatedNodes* replication() { return replication_.get(); }
  // Re-points clients' links to `node` at its current master (after a
  // failover), as a Sentinel-aware client follows the master; a "follow"
  // event. Links that were down come up.
  [[nodiscard]] absl::Status FollowMaster(int node, const std::vector<int>& clients);

  [[nodiscard]] absl::Status PauseClient(int k);
  [[nodiscard]] absl::Status ResumeClient(int k);
  // Client clock shim (setup.client_clock_shim): wall (and monotonic) jump.
  [[nodiscard]] absl::Status ClientClockJump(int k, absl::Duration wall,
                                             absl::Duration mono = absl::ZeroDuration());

  // Where every fault of the run is recorded (chaos/nemesis.h). The faults
  // above and those of nodes() and partitioner() record themselves; a body
  // records any other fault it causes here, with the nodes and clients it
  // acts on, and the timeline draws it.
  NemesisLog& nemesis() { return nemesis_log_; }
  void Note(std::string note) { notes_.push_back(std::move(note)); }

  // Markers: the current sequence number, and the first marker after `after`
  // of `kind` from client `client` (-1: any), waiting at most
  // min(timeout, Remaining()).
  int64_t MarkerSeq() const { return hub_.last_seq(); }
  std::optional<Marker> WaitMarker(absl::string_view kind, int client, absl::Duration timeout,
                                   int64_t after);
  // The first marker after `after` for which `match` (called on every marker
  // in order, so it may keep state) returns true.
  std::optional<Marker> WaitMarkerIf(int64_t after, absl::Duration timeout,
                                     const std::function<bool(const Marker&)>& match);

  // Runs the checker on the history written so far.
  CheckResult CheckSoFar();
  bool Found(int property);
  bool FoundAny(const std::vector<int>& properties);

 private:
  friend class Runner;
  Run() = default;
  absl::Status SetLogged(FaultProxy* p, const FaultSite& site, Direction d, const FaultSpec& spec);
  void ClearLogged(FaultProxy* p, const FaultSite& site);

  const Scenario* scenario_ = nullptr;
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point deadline_;
  std::string dir_;
  int64_t start_raw_ = 0;                   // when the run began (raw clock)
  std::unique_ptr<HistoryWriter> nemesis_;  // nemesis.jsonl
  NemesisLog nemesis_log_{nullptr};
  std::unique_ptr<NetNamespace> netns_;
  std::unique_ptr<testkit::Fleet> data_;
  std::unique_ptr<NodeSupervisor> supervisor_;
  std::vector<std::unique_ptr<FaultProxy>> proxies_;
  std::vector<std::vector<std::unique_ptr<FaultProxy>>> links_;
  std::unique_ptr<Partitioner> partitioner_;
  std::unique_ptr<ReplicatedNodes> replication_;
  std::vector<std::unique_ptr<ClockControl>> client_clocks_;
  MarkerHub hub_;
  std::vector<std::unique_ptr<ClientProcess>> clients_;
  std::vector<std::string> history_files_;
  std::vector<std::string> notes_;
  std::map<std::string, std::string> active_faults_;  // "n2:to-client" -> fault
};

// ---- Running and reporting ------------------------------------------------------

struct RunOptions {
  uint64_t seed = 1;
  // redlock-chaos-client; "" = next to this executable, then the build tree.
  std::string client_binary;
  // redlock-chaos-broken-client (the deliberately broken variants, test code
  // built with REDLOCK_BUILD_TESTS), for the clients of the broken-*
  // scenarios; "" = looked up like client_binary. Missing: those scenarios
  // are skipped.
  std::string broken_client_binary;
  // Keep the histories (and the checker's report) in keep_dir/<scenario>/.
  std::string keep_dir;
  // Write the timeline picture (chaos/plot.h) to plot_dir/<scenario>.svg.
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
  std::array<int64_t, kNumHarnessProperties> violations{};
  double availability = 0;  // grants / invokes
  std::vector<LeftoverKey> leftovers;
  std::vector<std::string> examples;  // a few violation descriptions
  std::vector<std::string> notes;
  bool ok = false;
  std::string why;  // why FAIL
  absl::Duration elapsed;
  std::string kept_dir;
  std::string plot_path;  // the picture written, if any
};

// The paths of redlock-chaos-client and redlock-chaos-broken-client to use
// (see RunOptions::client_binary).
std::string DefaultClientBinary();
std::string DefaultBrokenClientBinary();

ScenarioResult RunScenario(const Scenario& scenario, const RunOptions& options);

// The verdict table (one row per result) and its JSON form.
std::string FormatTable(const std::vector<ScenarioResult>& results);
std::string FormatJson(const std::vector<ScenarioResult>& results, uint64_t seed,
                       absl::Duration total);
std::string FormatList();

// The index page of a run with pictures: plain HTML (no script), one section
// per scenario with its verdict, expectation, counts and its picture
// (referenced by file name: the page sits next to the pictures).
std::string FormatIndexHtml(const std::vector<ScenarioResult>& results, uint64_t seed,
                            absl::Duration total);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_SCENARIOS_H_
