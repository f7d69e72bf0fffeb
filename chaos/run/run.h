// chaos/run/run.h: a live chaos run, as the fault kinds and the schedule see
// it: the nodes, proxies, partitions, replication and client processes of
// one scenario, its clock and budget, its markers and its nemesis log.
//
// The runner (chaos/run/runner.cc) builds it and owns its life cycle; fault
// kinds (chaos/faults/) act through it; every fault is recorded in the
// run's history through nemesis().
//
// Thread-safety: the scenario thread only (but the marker hub, which the
// clients' reader threads feed).

#ifndef REDLOCK_CHAOS_RUN_RUN_H_
#define REDLOCK_CHAOS_RUN_RUN_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chaos/check/checker.h"
#include "chaos/clients/workload.h"
#include "chaos/faults/partition.h"
#include "chaos/faults/replication.h"
#include "chaos/faults/supervisor.h"
#include "chaos/history/nemesis.h"
#include "chaos/run/scenario.h"
#include "testkit/clock_control.h"
#include "testkit/fault_proxy.h"
#include "testkit/redis.h"

namespace redlock::chaos {

class Run {
 public:
  const Scenario& scenario() const { return *scenario_; }
  const ScenarioSetup& setup() const { return scenario_->setup; }
  const RunShape& shape() const { return shape_; }
  SpanScale scale() const { return shape_.scale; }
  std::mt19937_64& rng() { return rng_; }
  uint64_t Uniform(uint64_t lo, uint64_t hi);  // in [lo, hi]

  // True while the budget lasts and no interrupt arrived.
  bool Active() const;
  absl::Duration Remaining() const;
  // Since the body began.
  absl::Duration Elapsed() const;
  // Sleeps min(d, Remaining()); false when the run is over.
  bool Sleep(absl::Duration d);

  NodeSupervisor& nodes() { return *supervisor_; }
  int num_nodes() const;
  int num_clients() const { return static_cast<int>(clients_.size()); }
  ClientProcess& client(int k) { return *clients_[static_cast<size_t>(k)]; }
  static std::string ClientName(int k);  // "c1", "c2", ...
  int64_t ttl_ms() const { return shape_.scale.ttl_ms; }
  const std::string& dir() const { return dir_; }

  // ---- Equipment the fault kinds act through (null when the run has none) ----
  FaultProxy* proxy(int node);             // kSharedProxies
  FaultProxy* link(int client, int node);  // kPerClientProxies
  Partitioner* partitioner() { return partitioner_.get(); }
  NetNamespace* netns() { return netns_.get(); }
  ReplicatedNodes* replication() { return replication_.get(); }
  ClockControl* client_clock(int k);

  // Proxy faults, recorded as nemesis faults named `name` and keyed
  // "n2:to-server" per proxy and direction: one fault per proxy and
  // direction at a time, a new one replaces the old one.
  [[nodiscard]] absl::Status ProxyFault(int node, Direction d, const FaultSpec& spec,
                                        absl::string_view name);
  // Clears one direction, or both.
  void ProxyClear(int node, std::optional<Direction> d = std::nullopt);

  // Re-points clients' links to `node` at its current master (after a
  // failover), as a Sentinel-aware client follows the master; a "follow"
  // event. Links that were down come up. Nothing to do under Sentinel
  // discovery (the clients follow themselves).
  [[nodiscard]] absl::Status FollowMaster(int node, const std::vector<int>& clients);

  [[nodiscard]] absl::Status PauseClient(int k);
  [[nodiscard]] absl::Status ResumeClient(int k);
  // SIGKILL of client k, which is not started again (a "client_crash"
  // instant in the history, naming it).
  [[nodiscard]] absl::Status CrashClient(int k);

  // One command on node i (its current master when replicated).
  absl::StatusOr<testkit::RedisValue> NodeCommand(int i, const std::vector<std::string>& args,
                                                  absl::Duration timeout = absl::Seconds(2));

  NemesisLog& nemesis() { return nemesis_log_; }
  void Note(std::string note) { notes_.push_back(std::move(note)); }

  // ---- Markers ------------------------------------------------------------------
  int64_t MarkerSeq() const { return hub_.last_seq(); }
  // The first marker after `after` for which `match` returns true, waiting at
  // most min(timeout, Remaining()).
  std::optional<Marker> WaitMarkerIf(int64_t after, absl::Duration timeout,
                                     const std::function<bool(const Marker&)>& match);
  // Every marker after `after`, waiting at most min(timeout, Remaining())
  // for the first.
  std::vector<Marker> MarkersSince(int64_t after, absl::Duration timeout);
  // True when client k is inside its critical section as far as its
  // markers tell (granted or reading, not yet done with the use).
  bool ClientInUse(int k) const;

  // ---- The history so far -----------------------------------------------------
  // Each line of the run's history files is parsed once, however often
  // these are called (HistoryTail): what was appended since the last call
  // is read; `to_end` once the writers are done.
  absl::StatusOr<std::vector<Event>> HistorySoFar(bool to_end = false);
  CheckResult CheckSoFar();
  bool FoundAll(PropertySet properties);
  bool FoundAny(PropertySet properties);

  // ---- Faults -------------------------------------------------------------------
  // Resolves `t` (random targets and values drawn from the run's generator),
  // injects it, and keeps it until healed; `marker_client`/`resource`: the
  // marker that triggered it (-1, "": none). The instance stays owned by the
  // run.
  absl::StatusOr<FaultInstance*> Inject(const FaultTemplate& t, int marker_client = -1,
                                        const std::string& marker_resource = "");
  // Heals one instance (once; later calls do nothing).
  absl::Status Heal(FaultInstance* f);
  // Heals every active instance of `kind`.
  absl::Status HealKind(absl::string_view kind);
  // Heals every active instance; `keep_tolerated`: but those the
  // configuration must tolerate (FaultKind::Tolerated), as long as the nodes
  // they keep out of service stay a minority.
  absl::Status HealFaults(bool keep_tolerated);

 private:
  friend class Runner;
  Run() = default;
  absl::Status SetLogged(FaultProxy* p, const FaultSite& site, Direction d, const FaultSpec& spec,
                         absl::string_view name);
  void ClearLogged(FaultProxy* p, const FaultSite& site, std::optional<Direction> d);

  const Scenario* scenario_ = nullptr;
  RunShape shape_;
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point begin_;
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
  std::unique_ptr<HistoryTail> history_;  // over history_files_, made on first use
  std::vector<std::string> notes_;
  std::map<std::string, std::string> active_proxy_faults_;  // "n2:to-client" -> fault name
  // Every fault injected, healed or not, in order.
  struct Injected {
    std::unique_ptr<FaultInstance> fault;
    absl::Duration at;
    int64_t at_raw = 0;
    bool healed = false;
    // When it stopped acting (raw clock): an instant once injected (a
    // failover once the promotion is done), a lasting fault once healed.
    int64_t ended_raw = 0;
  };
  // The faults the configuration need not tolerate, as raw-clock intervals
  // [begin, end] (an instant: its injection, a failover until its promotion
  // is done; a fault not healed yet ends now), for the recovery check.
  std::vector<std::pair<int64_t, int64_t>> IntolerableSpans() const;
  std::vector<Injected> faults_;
  PropertySet may_violate_ = 0;

 public:
  // What the schedule injected, for the result.
  PropertySet may_violate() const { return may_violate_; }
  const std::vector<Injected>& injected() const { return faults_; }
};

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_RUN_RUN_H_
