// The scenario runner: setup, the schedule, healing, the recovery check
// (L1), the leftover-key scan (S5), the checker and the verdict.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chaos/base/cleanup.h"
#include "chaos/clients/external_client.h"
#include "chaos/history/history.h"
#include "chaos/plot/plot.h"
#include "chaos/run/leftovers.h"
#include "chaos/run/run.h"
#include "testkit/files.h"
#include "testkit/process.h"

namespace redlock::chaos {
namespace {

using SteadyClock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// The last `max_lines` lines of a file ("" when unreadable): a crashed
// client's sanitizer report lands in the run's output, not only in --keep.
std::string LogTail(const std::string& path, size_t max_lines) {
  std::string out;
  for (const auto& l : testkit::LastLines(path, max_lines)) absl::StrAppend(&out, "    ", l, "\n");
  return out;
}

uint64_t Fnv(absl::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string Shorten(std::string s, size_t n) {
  if (s.size() <= n) return s;
  s.resize(n - 3);
  return s + "...";
}

// The per-client views of kPerClientProxies, recorded as a partition that
// lasts the whole run.
constexpr absl::string_view kViewsKey = "views";

// Sentinels of a namespace run run as these uids, so that nft rules can cut
// one of them off (stale_sentinel).
constexpr int kSentinelUidBase = 61101;

void Judge(const Scenario& sc, ScenarioResult* res) {
  if (!res->error.empty()) {
    res->ok = false;
    res->why = res->error;
  } else {
    res->ok = JudgeExpectation(sc.expect, res->violations, res->counts.grants, &res->why);
  }
  if (Interrupted() && res->ok) {
    res->ok = false;
    res->why = "interrupted";
  }
}

}  // namespace

class Runner {
 public:
  static void Execute(const Scenario& sc, const RunOptions& opt, ScenarioResult* res);

 private:
  static absl::Status MakeDir(Run& run, const RunOptions& opt);
  static absl::Status Setup(Run& run, const RunOptions& opt);
  static absl::Status StartNodes(Run& run);
  static absl::Status StartPaths(Run& run);
  static absl::Status StartClients(Run& run, const RunOptions& opt);
  // Every client link re-pointed at its node's current master.
  static void FollowAll(Run& run);
  static void HealEquipment(Run& run);
  static int64_t Recovery(Run& run, int64_t max_ttl);
  static void Finish(Run& run, ScenarioResult* res);
  static void Check(Run& run, const RunOptions& opt, ScenarioResult* res);
  static void Teardown(Run& run);
};

absl::Status Runner::MakeDir(Run& run, const RunOptions& opt) {
  std::error_code ec;
  if (!opt.keep_dir.empty()) {
    run.dir_ = absl::StrCat(opt.keep_dir, "/", run.scenario().name);
    fs::remove_all(run.dir_, ec);
    fs::create_directories(run.dir_, ec);
    if (ec)
      return absl::InternalError(absl::StrCat("cannot create ", run.dir_, ": ", ec.message()));
    chmod(opt.keep_dir.c_str(), 0755);
  } else {
    std::string tmpl = absl::StrCat("/tmp/redlock-chaos-", getpid(), "-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("mkdtemp: ", strerror(errno)));
    }
    run.dir_ = tmpl;
  }
  // Clients and Sentinels of namespace runs run as other uids.
  chmod(run.dir_.c_str(), 0755);
  return absl::OkStatus();
}

absl::Status Runner::StartNodes(Run& run) {
  const ScenarioSetup& setup = run.setup();
  if (run.scenario().needs_root()) {
    absl::StatusOr<std::unique_ptr<NetNamespace>> ns =
        NetNamespace::Create(UniqueName("redlock-chaos"));
    if (!ns.ok()) return ns.status();
    run.netns_ = *std::move(ns);
    absl::Status s = run.netns_->Enter();
    if (!s.ok()) return s;
  }
  testkit::FleetOptions data_options;
  data_options.nodes = 1;
  data_options.enable_debug = false;
  absl::StatusOr<std::unique_ptr<testkit::Fleet>> data = testkit::Fleet::Start(data_options);
  if (!data.ok()) return data.status();
  run.data_ = *std::move(data);

  SupervisorOptions so;
  so.nodes = setup.nodes;
  so.aof = setup.aof;
  so.clock_shim = setup.node_clock_shim;
  so.clock_dir = run.dir_;
  so.history = run.nemesis_.get();
  so.tls = setup.tls;
  if (setup.topology == Topology::kNamespace) {
    for (int i = 0; i < setup.nodes; ++i) so.hosts.push_back(absl::StrCat("127.0.0.", 11 + i));
  }
  absl::StatusOr<std::unique_ptr<NodeSupervisor>> sup = NodeSupervisor::Start(so);
  if (!sup.ok()) return sup.status();
  run.supervisor_ = *std::move(sup);
  if (setup.replicas == 0) return absl::OkStatus();

  ReplicationOptions ro;
  ro.replicas = setup.replicas;
  ro.sentinels = setup.sentinels;
  // The node clock shim reaches the replicas too (replica_clock_offset).
  ro.clock_shim = setup.node_clock_shim;
  ro.dir = run.dir_;
  if (run.netns_ != nullptr) {
    ro.sentinel_uid_base = kSentinelUidBase;
    ro.netns = run.netns_.get();
  }
  absl::StatusOr<std::unique_ptr<ReplicatedNodes>> rep =
      ReplicatedNodes::Start(run.supervisor_.get(), ro, &run.nemesis_log_);
  if (!rep.ok()) return rep.status();
  run.replication_ = *std::move(rep);
  // Replication held from before the first attempt: a fault lasting the run.
  if (setup.stalled > 0) {
    FaultTemplate t;
    t.kind = "replication_stall";
    for (int i = 0; i < setup.stalled; ++i) t.nodes.list.push_back(i);
    t.nodes.mode = TargetSel::Mode::kList;
    t.until_end = true;
    absl::StatusOr<FaultInstance*> f = run.Inject(t);
    if (!f.ok()) return f.status();
  }
  return absl::OkStatus();
}

absl::Status Runner::StartPaths(Run& run) {
  const ScenarioSetup& setup = run.setup();
  testkit::Fleet& fleet = run.supervisor_->fleet();
  const int nc = static_cast<int>(setup.clients.size());
  auto start_proxy = [&](int node) -> absl::StatusOr<std::unique_ptr<FaultProxy>> {
    ProxyOptions po;
    po.listen_host = "127.0.0.1";
    po.upstream_host = fleet.host(node);
    po.upstream_port = static_cast<uint16_t>(fleet.port(node));
    po.seed = run.rng_() | 1;
    return FaultProxy::Start(po);
  };
  if (setup.topology == Topology::kSharedProxies) {
    for (int i = 0; i < fleet.size(); ++i) {
      absl::StatusOr<std::unique_ptr<FaultProxy>> p = start_proxy(i);
      if (!p.ok()) return p.status();
      run.proxies_.push_back(*std::move(p));
    }
  }
  if (setup.topology == Topology::kPerClientProxies) {
    run.links_.resize(static_cast<size_t>(nc));
    for (int k = 0; k < nc; ++k) {
      for (int i = 0; i < fleet.size(); ++i) {
        absl::StatusOr<std::unique_ptr<FaultProxy>> p = start_proxy(i);
        if (!p.ok()) return p.status();
        if (static_cast<size_t>(k) < setup.views.size()) {
          const auto& v = setup.views[static_cast<size_t>(k)];
          if (std::find(v.begin(), v.end(), i) == v.end()) (*p)->Down();
        }
        run.links_[static_cast<size_t>(k)].push_back(*std::move(p));
      }
    }
    if (!setup.views.empty()) {
      const PartitionSpec views = FromViews(setup.views, fleet.size());
      run.nemesis_log_.Start("partition", views.Site(), views.name, kViewsKey);
    }
  }
  if (setup.topology == Topology::kNamespace) {
    RuleContext ctx;
    ctx.table = absl::StrCat("redlock_chaos_", getpid(), "_", Fnv(run.netns_->name()) % 100000);
    for (int k = 0; k < nc; ++k) ctx.client_uids.push_back(kClientUidBase + k);
    for (int i = 0; i < fleet.size(); ++i) ctx.nodes.push_back({fleet.host(i), fleet.port(i)});
    absl::StatusOr<std::unique_ptr<Partitioner>> part =
        Partitioner::Create(run.netns_.get(), std::move(ctx), run.nemesis_.get());
    if (!part.ok()) return part.status();
    run.partitioner_ = *std::move(part);
  }
  return absl::OkStatus();
}

absl::Status Runner::StartClients(Run& run, const RunOptions& opt) {
  const ScenarioSetup& setup = run.setup();
  testkit::Fleet& fleet = run.supervisor_->fleet();
  const int nc = static_cast<int>(setup.clients.size());
  std::string tls_ca;
  if (setup.tls) {
    // Clients may run as other users (kNamespace): a copy of the CA they
    // can read, next to their histories.
    tls_ca = run.dir_ + "/tls-ca.crt";
    std::ifstream in(fleet.certificates()->ca_cert, std::ios::binary);
    std::ofstream out(tls_ca, std::ios::binary);
    out << in.rdbuf();
    if (!in || !out) return absl::InternalError(absl::StrCat("cannot copy the CA to ", tls_ca));
    out.close();
    chmod(tls_ca.c_str(), 0644);
  }
  const std::string binary = opt.client_binary.empty() ? DefaultClientBinary() : opt.client_binary;
  const std::string broken_binary =
      opt.broken_client_binary.empty() ? DefaultBrokenClientBinary() : opt.broken_client_binary;
  for (int k = 0; k < nc; ++k) {
    ClientLaunch launch;
    launch.config = setup.clients[static_cast<size_t>(k)];
    ClientConfig& c = launch.config;
    c.name = Run::ClientName(k);
    c.nodes.clear();
    for (int i = 0; i < fleet.size(); ++i) {
      switch (setup.topology) {
        case Topology::kSharedProxies:
          c.nodes.push_back(run.proxies_[static_cast<size_t>(i)]->listen_address());
          break;
        case Topology::kPerClientProxies:
          c.nodes.push_back(
              run.links_[static_cast<size_t>(k)][static_cast<size_t>(i)]->listen_address());
          break;
        case Topology::kSentinelDiscovery:
          c.nodes.push_back(absl::StrCat("redis+sentinel://", run.replication_->SentinelAddresses(),
                                         "/", NodeSupervisor::NodeName(i)));
          break;
        default:
          c.nodes.push_back(fleet.address(i));
      }
      if (setup.tls) c.nodes.back() = "rediss://" + c.nodes.back();
    }
    if (setup.tls) {
      c.tls_ca = tls_ca;
      // The nodes' certificate names localhost and 127.0.0.1; nodes in a
      // namespace listen on other loopback addresses, proxies on 127.0.0.1.
      c.tls_server_name = "localhost";
    }
    c.data = run.data_->address(0);
    c.history = absl::StrCat(run.dir_, "/", c.name, ".jsonl");
    c.seed = run.rng_();
    c.duration_ms = absl::ToInt64Milliseconds(setup.budget) + 60000;
    launch.binary = c.variant == ClientVariant::kLibrary ? binary : broken_binary;
    launch.index = k;
    launch.log_path = absl::StrCat(run.dir_, "/", c.name, ".log");
    if (setup.topology == Topology::kNamespace) launch.uid = kClientUidBase + k;
    if (setup.client_clock_shim) {
      absl::StatusOr<std::unique_ptr<ClockControl>> clock =
          ClockControl::Create(absl::StrCat(run.dir_, "/", c.name, ".clock"));
      if (!clock.ok()) return clock.status();
      launch.env = (*clock)->ProcessEnv();
      run.client_clocks_.push_back(*std::move(clock));
    }
    run.history_files_.push_back(c.history);
    absl::StatusOr<std::unique_ptr<ClientProcess>> p =
        ClientProcess::Spawn(std::move(launch), &run.hub_);
    if (!p.ok()) return p.status();
    run.clients_.push_back(*std::move(p));
  }
  // Wait (bounded) until every client has made its first attempt, so the
  // budget is spent on the workload, not on start-up. Generous: in CI the
  // catalog shares two cores with other suites' servers, and a client once
  // took longer than 10 s to start there.
  return AwaitFirstAttempts(run.hub_, run.clients_, absl::Seconds(30));
}

absl::Status Runner::Setup(Run& run, const RunOptions& opt) {
  absl::StatusOr<std::unique_ptr<HistoryWriter>> nem =
      HistoryWriter::Open(run.dir_ + "/nemesis.jsonl");
  if (!nem.ok()) return nem.status();
  run.nemesis_ = *std::move(nem);
  run.nemesis_log_ = NemesisLog(run.nemesis_.get());
  run.history_files_.push_back(run.dir_ + "/nemesis.jsonl");
  absl::Status s = StartNodes(run);
  if (s.ok()) s = StartPaths(run);
  if (s.ok()) s = StartClients(run, opt);
  return s;
}

void Runner::FollowAll(Run& run) {
  if (run.replication_ == nullptr || run.setup().topology != Topology::kPerClientProxies) return;
  // Every client follows every failover (a client left on a partitioned old
  // master learns of the new one once the partition heals).
  for (int i = 0; i < run.replication_->size(); ++i) {
    if (!run.replication_->failed_over(i)) continue;
    std::vector<int> behind;
    for (int k = 0; k < run.num_clients(); ++k) {
      if (run.link(k, i)->upstream() != run.replication_->MasterAddress(i)) behind.push_back(k);
    }
    if (behind.empty()) continue;
    absl::Status s = run.FollowMaster(i, behind);
    if (!s.ok()) run.Note(absl::StrCat("follow n", i, ": ", s.ToString()));
  }
}

void Runner::HealEquipment(Run& run) {
  for (size_t i = 0; i < run.proxies_.size(); ++i) {
    run.ProxyClear(static_cast<int>(i));
    absl::Status s = run.proxies_[i]->Up();
    (void)s;
  }
  const auto& views = run.setup().views;
  for (size_t k = 0; k < run.links_.size(); ++k) {
    for (size_t i = 0; i < run.links_[k].size(); ++i) {
      bool in_view = k >= views.size() || std::find(views[k].begin(), views[k].end(),
                                                    static_cast<int>(i)) != views[k].end();
      if (in_view) {
        absl::Status s = run.links_[k][i]->Up();
        (void)s;
      }
    }
  }
  for (int k = 0; k < run.num_clients(); ++k) {
    absl::Status s = run.ResumeClient(k);
    (void)s;
  }
  if (run.supervisor_ != nullptr) {
    absl::Status s = run.supervisor_->HealAll();
    if (!s.ok()) run.Note(absl::StrCat("heal: ", s.ToString()));
  }
  if (run.partitioner_ != nullptr) {
    absl::Status s = run.partitioner_->Heal();
    if (!s.ok()) run.Note(absl::StrCat("heal partition: ", s.ToString()));
  }
  if (run.replication_ != nullptr) run.replication_->HealAll();
  FollowAll(run);
}

// L1: the faults the configuration need not tolerate are healed; within
// 2 ttl + 2 s some client must be granted the lock. Returns 0 or 1.
int64_t Runner::Recovery(Run& run, int64_t max_ttl) {
  absl::Status s = run.HealFaults(/*keep_tolerated=*/true);
  if (!s.ok()) run.Note(absl::StrCat("heal: ", s.ToString()));
  FollowAll(run);
  // Every window [e, e + bound] that starts where a fault the configuration
  // need not tolerate ended, and in which no other such fault acts for more
  // than an instant, must hold a grant: a client stuck since a heal (or since
  // a failover, with one stale Sentinel in place) has not recovered. The last
  // window (from the last such end, or from now without one) may reach past
  // now: it is waited for.
  const int64_t bound = (2 * max_ttl + 2000) * 1000000;
  const std::vector<std::pair<int64_t, int64_t>> spans = run.IntolerableSpans();
  std::vector<int64_t> starts;
  for (const auto& [b, e] : spans) starts.push_back(e);
  const int64_t now = RawMonotonicNanos();
  if (starts.empty()) starts.push_back(now);
  int64_t misses = 0;
  for (int64_t from : starts) {
    const int64_t to = from + bound;
    bool disturbed = false;
    for (const auto& [b, e] : spans) {
      disturbed = disturbed || (e - b >= 50000000 && b < to && e > from);
    }
    if (disturbed) continue;
    const absl::Duration left =
        std::max(absl::ZeroDuration(), absl::Nanoseconds(to - RawMonotonicNanos()));
    std::optional<Marker> grant = run.hub_.Wait(0, left, [from, to](const Marker& m) {
      return m.kind == "grant" && m.t >= from && m.t <= to;
    });
    if (Interrupted()) return 0;
    if (grant.has_value()) continue;
    if (misses++ == 0) {
      run.Note(absl::StrCat("L1: no grant within ", absl::FormatDuration(absl::Nanoseconds(bound)),
                            " of a fault's end at +",
                            absl::FormatDuration(absl::Nanoseconds(from - run.start_raw_)),
                            " (the faults the configuration must tolerate kept in place)"));
    }
  }
  return misses;
}

// After the schedule: L1, the heal, the quiet tail, the clients' exit, S5
// and the final counters.
void Runner::Finish(Run& run, ScenarioResult* res) {
  const Scenario& sc = run.scenario();
  int64_t max_ttl = 0;
  std::set<std::string> resources;
  for (const ClientConfig& c : sc.setup.clients) {
    max_ttl = std::max(max_ttl, c.ttl_ms);
    resources.insert(c.resources.begin(), c.resources.end());
  }
  // L1 costs up to 2 ttl + 2 s where nothing is granted: measured where the
  // expectation judges it.
  const Expectation& e = sc.expect;
  if (res->error.empty() && ((e.clean | e.violated_all | e.violated_any) & Prop(kL1))) {
    res->violations[kL1] = Recovery(run, max_ttl);
  }
  absl::Status s = run.HealFaults(/*keep_tolerated=*/false);
  if (!s.ok()) run.Note(absl::StrCat("heal: ", s.ToString()));
  HealEquipment(run);
  // A quiet tail without faults, as long as a lease: whatever a fault left
  // behind (a late SET, a key restored from the AOF after its release was
  // lost) expires or is released before the S5 scan.
  if (!run.clients_.empty() && res->error.empty()) {
    InterruptibleSleep(sc.setup.quiet >= absl::ZeroDuration()
                           ? sc.setup.quiet
                           : std::min(absl::Milliseconds(max_ttl + 500), absl::Seconds(3)));
  }
  for (auto& c : run.clients_) {
    if (!c->exited()) {
      absl::Status st = c->Resume();
      (void)st;
      kill(c->pid(), SIGTERM);
    }
  }
  for (auto& c : run.clients_) {
    std::string how = c->Stop(absl::Milliseconds(2 * max_ttl + 5000));
    // A client the schedule crashed (client_crash) ended as it was meant to.
    if (how != "exit 0" && !c->crashed() && res->error.empty()) {
      // A client that crashed (a sanitizer report, an abort) or hung is a
      // failure of the run, whatever the history says.
      res->error = absl::StrCat(c->name(), " ended with ", how, "; the end of its log:\n",
                                LogTail(absl::StrCat(run.dir_, "/", c->name(), ".log"), 60));
    }
  }
  const int64_t end_raw = RawMonotonicNanos();
  std::vector<std::string> res_list(resources.begin(), resources.end());
  if (res->error.empty()) {
    InterruptibleSleep(absl::Milliseconds(500));
    const std::vector<ScanTarget> targets = LeftoverScanTargets(sc);
    std::vector<KeyState> keys = ScanLeftovers(run, targets);
    std::vector<std::string> tokens;
    absl::StatusOr<std::vector<Event>> h = run.HistorySoFar();
    if (h.ok()) {
      for (const Event& e : *h) {
        if (e.type == EventType::kGrant) tokens.push_back(e.token);
      }
    }
    res->leftovers = FailedAttemptLeftovers(keys, tokens);
    if (!keys.empty()) {
      // (b): nothing may outlive a ttl after the end.
      int64_t wait_ns = end_raw + (max_ttl + 500) * 1000000 - RawMonotonicNanos();
      if (wait_ns > 0) InterruptibleSleep(absl::Nanoseconds(wait_ns));
      for (const KeyState& k : ScanLeftovers(run, targets)) {
        res->leftovers.push_back(
            {k, absl::StrCat("n", k.node, " still holds \"", k.key, "\" ", max_ttl + 500,
                             " ms after the end (pttl ", k.pttl_ms, " ms): it outlived its ttl")});
      }
    }
  }
  // Final counters, read by the harness.
  for (const std::string& r : res_list) {
    absl::StatusOr<testkit::RedisValue> v = run.data_->Command(0, {"GET", DataKey(r)});
    if (!v.ok()) {
      run.Note(absl::StrCat("final counter of ", r, ": ", v.status().ToString()));
      continue;
    }
    int64_t counter = 0;
    if (v->type == testkit::RedisValue::Type::kString && !absl::SimpleAtoi(v->str, &counter)) {
      run.Note(absl::StrCat("final counter of ", r, " is not a number: ", v->str));
    }
    absl::Status st = run.nemesis_->WriteFinal({.resource = r, .counter = counter, .initial = 0});
    (void)st;
  }
  if (!sc.setup.views.empty() && sc.setup.topology == Topology::kPerClientProxies) {
    run.nemesis_log_.Stop("partition", kViewsKey, "run over");
  }
  // A failover nobody asked for explains a run that tested something else.
  if (run.replication_ != nullptr) {
    for (const std::string& f : run.replication_->UnexpectedFailovers()) run.Note(f);
  }
}

void Runner::Check(Run& run, const RunOptions& opt, ScenarioResult* res) {
  const Scenario& sc = run.scenario();
  absl::StatusOr<std::vector<Event>> history = run.HistorySoFar(/*to_end=*/true);
  const size_t malformed = run.history_ == nullptr ? 0 : run.history_->malformed().size();
  std::optional<CheckResult> check;
  if (!history.ok()) {
    if (res->error.empty()) res->error = absl::StrCat("history: ", history.status().ToString());
  } else {
    check = chaos::Check(*history);
    const CheckResult& cr = *check;
    res->counts = cr.counts;
    for (int p = 0; p < kNumProperties; ++p) {
      res->violations[static_cast<size_t>(HarnessIndex(static_cast<Property>(p)))] =
          cr.violation_counts[static_cast<size_t>(p)];
    }
    res->violations[kS5] = static_cast<int64_t>(res->leftovers.size());
    res->availability =
        cr.counts.invokes > 0 ? static_cast<double>(cr.counts.grants) / cr.counts.invokes : 0;
    for (const GrantInfo& g : cr.grants) {
      res->holds.push_back({.process = g.process, .from = g.granted, .to = g.hold_end});
    }
    for (const Violation& v : cr.violations) {
      ScenarioResult::ViolationRef ref{.property = HarnessIndex(v.property),
                                       .description = Shorten(v.description, 240),
                                       .t = v.t,
                                       .t_end = v.t_end};
      for (const GrantInfo& g : v.grants) ref.processes.push_back(g.process);
      res->violation_refs.push_back(std::move(ref));
    }
    std::array<int, kNumProperties> shown{};
    for (const Violation& v : cr.violations) {
      int p = static_cast<int>(v.property);
      if (shown[static_cast<size_t>(p)]++ >= 2) continue;
      std::vector<std::string> faults;
      for (const FaultInfo& f : v.faults) faults.push_back(absl::StrCat(f.fault, "@", f.target));
      res->examples.push_back(absl::StrCat(
          PropertyName(v.property), " ", v.resource, ": ", Shorten(v.description, 240),
          faults.empty() ? "" : absl::StrCat(" [faults: ", absl::StrJoin(faults, ", "), "]")));
    }
    for (size_t i = 0; i < res->leftovers.size() && i < 3; ++i) {
      res->examples.push_back(absl::StrCat("S5 ", res->leftovers[i].why));
    }
    if (malformed > 0) run.Note(absl::StrCat(malformed, " malformed history lines"));
    if (cr.warning_count > 0) {
      run.Note(absl::StrCat(cr.warning_count, " checker warnings (e.g. ",
                            cr.warnings.empty() ? "" : cr.warnings[0], ")"));
    }
    if (!opt.keep_dir.empty()) {
      std::ofstream(run.dir_ + "/report.txt") << FormatReport(cr);
      std::ofstream s5(run.dir_ + "/s5.txt");
      for (const LeftoverKey& k : res->leftovers) s5 << k.why << "\n";
    }
  }
  // Judged here (and again by RunScenario, for the runs that end earlier)
  // so that the history and the picture carry the verdict.
  Judge(sc, res);
  if (run.nemesis_ == nullptr) return;
  RunRecord record{.scenario = sc.name,
                   .seed = opt.seed,
                   .config = sc.config,
                   .expected = sc.expect.Describe(),
                   .verdict = res->ok ? "OK" : "FAIL",
                   .why = res->why,
                   .start = run.start_raw_,
                   .violations = {res->violations.begin(), res->violations.end()}};
  for (int i = 0; i < sc.setup.nodes; ++i) record.nodes.push_back(i);
  for (int k = 0; k < static_cast<int>(sc.setup.clients.size()); ++k) {
    record.clients.push_back(Run::ClientName(k));
  }
  record.t = RawMonotonicNanos();
  absl::Status s = run.nemesis_->WriteRun(record);
  if (!s.ok()) run.Note(absl::StrCat("run record: ", s.ToString()));
  if (!opt.plot_dir.empty() && check.has_value()) {
    history->push_back(ToEvent(record));
    const std::string path = absl::StrCat(opt.plot_dir, "/", sc.name, ".svg");
    s = WriteTextFile(path, RenderTimeline(*history, *check));
    if (s.ok()) {
      res->plot_path = path;
    } else {
      run.Note(absl::StrCat("plot: ", s.ToString()));
    }
  }
}

void Runner::Teardown(Run& run) {
  run.clients_.clear();
  run.partitioner_.reset();
  run.links_.clear();
  run.proxies_.clear();
  run.replication_.reset();
  run.supervisor_.reset();
  run.data_.reset();
  if (run.netns_ != nullptr) {
    absl::Status s = run.netns_->Leave();
    if (!s.ok()) fprintf(stderr, "redlock-chaos: %s\n", s.ToString().c_str());
    run.netns_.reset();
  }
  run.active_proxy_faults_.clear();
}

void Runner::Execute(const Scenario& sc, const RunOptions& opt, ScenarioResult* res) {
  Run run;
  // Every nemesis event carries its kind's colour (chaos/faults/).
  SetFaultColorLookup(&FaultKindColor);
  run.scenario_ = &sc;
  run.shape_ = ShapeOf(sc.setup);
  run.start_raw_ = RawMonotonicNanos();
  run.rng_.seed(opt.seed ^ Fnv(sc.name));
  run.begin_ = SteadyClock::now();
  absl::Status st = MakeDir(run, opt);
  if (!st.ok()) {
    res->error = st.ToString();
    return;
  }
  st = Setup(run, opt);
  if (st.ok()) {
    run.begin_ = SteadyClock::now();
    run.deadline_ = run.begin_ + absl::ToChronoNanoseconds(sc.setup.budget);
    st = PlaySchedule(run, sc.schedule);
    if (!st.ok()) res->error = absl::StrCat("nemesis: ", st.ToString());
  } else {
    res->error = absl::StrCat("setup: ", st.ToString());
  }
  if (run.supervisor_ != nullptr) Finish(run, res);
  for (const auto& i : run.injected()) {
    const FaultInstance& f = *i.fault;
    ++res->injected[f.kind->name()];
    FaultInstance holding = f, idle = f;
    holding.in_use = true;
    idle.in_use = false;
    ScenarioResult::InjectedFault out{
        .at = i.at,
        .fault = ConcreteTemplate(f),
        .may_violate = f.kind->MayViolate(run.shape(), holding),
        .may_violate_idle = f.kind->MayViolate(run.shape(), idle),
        .begin_raw = i.at_raw,
        .end_raw = i.ended_raw > 0 ? i.ended_raw : RawMonotonicNanos()};
    if (f.kind->info().takes_clients && !f.kind->info().takes_nodes) {
      for (int k : f.clients) out.scope.push_back(Run::ClientName(k));
    }
    res->injected_faults.push_back(std::move(out));
  }
  for (const ClientConfig& c : sc.setup.clients) {
    res->max_ttl_ms = std::max(res->max_ttl_ms, c.ttl_ms);
  }
  Check(run, opt, res);
  res->notes = run.notes_;
  Teardown(run);
  std::error_code ec;
  if (opt.keep_dir.empty()) {
    fs::remove_all(run.dir_, ec);
  } else {
    res->kept_dir = run.dir_;
  }
}

namespace {

// `name` next to this executable, or in the build tree's chaos directory.
std::string FindHarnessBinary(const std::string& name) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    buf[n] = 0;
    std::string dir = fs::path(buf).parent_path().string();
    for (const std::string& cand : {dir + "/" + name, dir + "/../chaos/" + name}) {
      if (access(cand.c_str(), X_OK) == 0) return cand;
    }
  }
#ifdef REDLOCK_CHAOS_BINARY_DIR
  return absl::StrCat(REDLOCK_CHAOS_BINARY_DIR, "/", name);
#else
  return name;
#endif
}

bool UsesBrokenClient(const Scenario& scenario) {
  for (const ClientConfig& c : scenario.setup.clients) {
    if (c.variant != ClientVariant::kLibrary) return true;
  }
  return false;
}

// Why the scenario cannot run here ("" when it can): a missing tool is a
// skip, except under CI, where it is a failure (*skip false).
std::string CannotRun(const Scenario& scenario, const RunOptions& options, bool* skip) {
  *skip = true;
  if (scenario.needs_root()) {
    absl::Status s = PartitionSupport();
    if (!s.ok()) {
      *skip = absl::IsFailedPrecondition(s);
      return std::string(s.message());
    }
  }
  if (scenario.setup.sentinels > 0) {
    absl::Status s = testkit::CheckRedisSentinelAvailable();
    if (!s.ok()) {
      *skip = absl::IsFailedPrecondition(s);
      return std::string(s.message());
    }
  }
  for (const ClientConfig& c : scenario.setup.clients) {
    if (c.client == "library") continue;
    absl::Status s = CheckExternalClientAvailable(c.client);
    if (!s.ok()) {
      *skip = absl::IsFailedPrecondition(s);
      return std::string(s.message());
    }
  }
  if (UsesBrokenClient(scenario)) {
    const std::string broken = options.broken_client_binary.empty() ? DefaultBrokenClientBinary()
                                                                    : options.broken_client_binary;
    if (testkit::FindExecutable(broken).empty()) {
      *skip = !testkit::UnderCi();
      return absl::StrCat("no ", broken,
                          " (the broken clients are test code: build with REDLOCK_BUILD_TESTS=ON)",
                          *skip ? "" : "; CI=true makes that a failure");
    }
  }
  return "";
}

}  // namespace

std::string DefaultClientBinary() { return FindHarnessBinary("redlock-chaos-client"); }
std::string DefaultBrokenClientBinary() { return FindHarnessBinary("redlock-chaos-broken-client"); }

ScenarioResult RunScenario(const Scenario& scenario, const RunOptions& options) {
  ScenarioResult res;
  res.name = scenario.name;
  res.config = scenario.config;
  res.expect = scenario.expect;
  auto t0 = SteadyClock::now();
  absl::Status valid = ValidateScenario(scenario);
  if (!valid.ok()) {
    res.error = std::string(valid.message());
    Judge(scenario, &res);
    return res;
  }
  bool skip = true;
  const std::string why = CannotRun(scenario, options, &skip);
  if (!why.empty()) {
    res.skipped = skip;
    res.skip_reason = why;
    res.why = why;
    res.ok = skip;
    return res;
  }
  // Own thread: nodes and clients die with the thread that forked them, and
  // a namespace scenario moves this thread into its namespace.
  std::thread t([&] { Runner::Execute(scenario, options, &res); });
  t.join();
  res.elapsed = absl::FromChrono(SteadyClock::now() - t0);
  Judge(scenario, &res);
  return res;
}

}  // namespace redlock::chaos
