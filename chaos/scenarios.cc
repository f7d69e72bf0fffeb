// The scenario runner: setup, teardown, S5, verdict and reports. The catalog
// itself is in chaos/scenario_catalog.cc.

#include "chaos/scenarios.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chaos/cleanup.h"
#include "chaos/history.h"
#include "chaos/plot.h"
#include "common/svg.h"
#include "testkit/files.h"
#include "testkit/process.h"

namespace redlock::chaos {
namespace {

// The last `max_lines` lines of a file ("" when unreadable): a crashed
// client's sanitizer report lands in the run's output, not only in --keep.
std::string LogTail(const std::string& path, size_t max_lines) {
  std::string out;
  for (const auto& l : testkit::LastLines(path, max_lines)) absl::StrAppend(&out, "    ", l, "\n");
  return out;
}

using SteadyClock = std::chrono::steady_clock;

uint64_t Fnv(absl::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string Props(const std::vector<int>& ps, absl::string_view sep) {
  std::vector<std::string> names;
  for (int p : ps) names.push_back(HarnessPropertyName(p));
  return absl::StrJoin(names, sep);
}

std::string FaultName(const FaultSpec& spec, Direction d) {
  switch (spec.kind) {
    case FaultKind::kLatency:
      return "latency";
    case FaultKind::kBlackHole:
      return d == Direction::kToClient ? "ack_loss" : "blackhole";
    case FaultKind::kHold:
      return "hold";
    case FaultKind::kReset:
      return "reset";
    case FaultKind::kSlice:
      return "slice";
    case FaultKind::kTruncate:
      return "truncate";
    case FaultKind::kNone:
      break;
  }
  return "none";
}

// The per-client views of kPerClientProxies, recorded as a partition that
// lasts the whole run.
constexpr absl::string_view kViewsKey = "views";

// The verdict of a finished run.
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

std::string Shorten(std::string s, size_t n) {
  if (s.size() <= n) return s;
  s.resize(n - 3);
  return s + "...";
}

}  // namespace

std::string ProgressLine(const ScenarioResult& r, int properties) {
  std::string counts;
  for (int p = 0; p < properties; ++p) absl::StrAppend(&counts, p > 0 ? "/" : "", r.violations[p]);
  return absl::StrFormat("%s (%.1fs, %d ops, S1-S%d %s)%s%s",
                         r.skipped ? "SKIP"
                         : r.ok    ? "OK"
                                   : "FAIL",
                         absl::ToDoubleSeconds(r.elapsed), r.counts.invokes, properties, counts,
                         r.why.empty() ? "" : ": ", r.why);
}

std::string HarnessPropertyName(int p) { return absl::StrCat("S", p + 1); }

std::string Expectation::Describe() const {
  std::vector<std::string> parts;
  if (!violated_all.empty()) parts.push_back(absl::StrCat(Props(violated_all, "+"), " found"));
  if (!violated_any.empty()) parts.push_back(absl::StrCat(Props(violated_any, "|"), " found"));
  bool all_clean = static_cast<int>(clean.size()) == kNumHarnessProperties;
  if (all_clean) {
    parts.push_back("clean");
  } else if (!clean.empty()) {
    parts.push_back(absl::StrCat(Props(clean, ","), " clean"));
  }
  return absl::StrJoin(parts, "; ");
}

Expectation ExpectClean() {
  Expectation e;
  for (int p = 0; p < kNumHarnessProperties; ++p) e.clean.push_back(p);
  return e;
}

bool JudgeExpectation(const Expectation& e, const std::array<int64_t, kNumHarnessProperties>& v,
                      int64_t grants, std::string* why) {
  std::vector<std::string> problems;
  for (int p : e.clean) {
    if (v[static_cast<size_t>(p)] > 0) {
      problems.push_back(
          absl::StrCat(HarnessPropertyName(p), " violated in a configuration documented as safe"));
    }
  }
  for (int p : e.violated_all) {
    if (v[static_cast<size_t>(p)] == 0) {
      problems.push_back(absl::StrCat(
          HarnessPropertyName(p), " expected but not found (checker too weak or fault missed)"));
    }
  }
  if (!e.violated_any.empty()) {
    bool any = false;
    for (int p : e.violated_any) any = any || v[static_cast<size_t>(p)] > 0;
    if (!any) {
      problems.push_back(absl::StrCat("none of ", Props(e.violated_any, ","),
                                      " found (checker too weak or fault missed)"));
    }
  }
  if (grants < e.min_grants) {
    problems.push_back(absl::StrCat("only ", grants, " grants (at least ", e.min_grants,
                                    " needed to test anything)"));
  }
  if (why != nullptr) *why = absl::StrJoin(problems, "; ");
  return problems.empty();
}

std::vector<LeftoverKey> FailedAttemptLeftovers(const std::vector<KeyState>& keys,
                                                const std::vector<std::string>& grant_tokens) {
  std::set<std::string> tokens(grant_tokens.begin(), grant_tokens.end());
  std::vector<LeftoverKey> out;
  for (const KeyState& k : keys) {
    if (k.pttl_ms == -2) continue;  // missing
    if (tokens.count(k.value)) continue;
    out.push_back(
        {k, absl::StrCat("n", k.node, " still holds \"", k.key, "\" = ", Shorten(k.value, 16),
                         " (no grant has this token: a failed attempt's key left behind; pttl ",
                         k.pttl_ms, " ms)")});
  }
  return out;
}

// ---- Run ------------------------------------------------------------------------

uint64_t Run::Uniform(uint64_t lo, uint64_t hi) {
  if (hi <= lo) return lo;
  return lo + rng_() % (hi - lo + 1);
}

absl::Duration Run::UniformMs(int64_t lo_ms, int64_t hi_ms) {
  return absl::Milliseconds(
      static_cast<int64_t>(Uniform(static_cast<uint64_t>(lo_ms), static_cast<uint64_t>(hi_ms))));
}

bool Run::Active() const { return !Interrupted() && SteadyClock::now() < deadline_; }

absl::Duration Run::Remaining() const {
  auto left = deadline_ - SteadyClock::now();
  if (left <= SteadyClock::duration::zero()) return absl::ZeroDuration();
  return absl::FromChrono(left);
}

bool Run::Sleep(absl::Duration d) {
  absl::Duration left = Remaining();
  if (left <= absl::ZeroDuration()) return false;
  if (!InterruptibleSleep(std::min(d, left))) return false;
  return d <= left;
}

int Run::num_nodes() const { return supervisor_->size(); }
std::string Run::ClientName(int k) { return absl::StrCat("c", k + 1); }
int64_t Run::ttl_ms() const {
  return scenario_->setup.clients.empty() ? 1000 : scenario_->setup.clients[0].ttl_ms;
}

FaultProxy* Run::proxy(int node) {
  if (static_cast<size_t>(node) >= proxies_.size()) return nullptr;
  return proxies_[static_cast<size_t>(node)].get();
}

FaultProxy* Run::link(int client, int node) {
  if (static_cast<size_t>(client) >= links_.size()) return nullptr;
  if (static_cast<size_t>(node) >= links_[static_cast<size_t>(client)].size()) return nullptr;
  return links_[static_cast<size_t>(client)][static_cast<size_t>(node)].get();
}

absl::Status Run::SetLogged(FaultProxy* p, const FaultSite& site, Direction d,
                            const FaultSpec& spec) {
  if (p == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no proxy for ", site.Name()));
  }
  absl::Status s = p->SetFault(d, spec);
  if (!s.ok()) return s;
  std::string key = absl::StrCat(site.Name(), ":", DirectionName(d));
  auto it = active_faults_.find(key);
  if (it != active_faults_.end()) {
    nemesis_log_.Stop(it->second, key, "replaced");
    active_faults_.erase(it);
  }
  if (spec.kind == FaultKind::kNone) return absl::OkStatus();
  std::string name = FaultName(spec, d);
  nemesis_log_.Start(name, site, absl::StrCat(spec.ToString(), " ", DirectionName(d)), key);
  active_faults_[key] = name;
  return absl::OkStatus();
}

void Run::ClearLogged(FaultProxy* p, const FaultSite& site) {
  if (p == nullptr) return;
  p->ClearFaults();
  for (Direction d : {Direction::kToServer, Direction::kToClient}) {
    std::string key = absl::StrCat(site.Name(), ":", DirectionName(d));
    auto it = active_faults_.find(key);
    if (it == active_faults_.end()) continue;
    nemesis_log_.Stop(it->second, key, "cleared");
    active_faults_.erase(it);
  }
}

absl::Status Run::ProxyFault(int node, Direction d, const FaultSpec& spec) {
  return SetLogged(proxy(node), {.nodes = {node}}, d, spec);
}

absl::Status Run::ProxyFaultBoth(int node, const FaultSpec& spec) {
  absl::Status s = ProxyFault(node, Direction::kToServer, spec);
  if (!s.ok()) return s;
  return ProxyFault(node, Direction::kToClient, spec);
}

void Run::ProxyClear(int node) { ClearLogged(proxy(node), {.nodes = {node}}); }

void Run::ProxyReset(int node) {
  FaultProxy* p = proxy(node);
  if (p == nullptr) return;
  p->ResetAll();
  nemesis_log_.Instant("reset", {.nodes = {node}}, "RST on every open connection");
}

absl::Status Run::LinkFault(int client, int node, Direction d, const FaultSpec& spec) {
  return SetLogged(link(client, node), {.nodes = {node}, .clients = {ClientName(client)}}, d, spec);
}

absl::Status Run::FollowMaster(int node, const std::vector<int>& clients) {
  if (replication_ == nullptr) return absl::FailedPreconditionError("no replicated nodes");
  // The clients ask the Sentinel themselves: nothing to re-point.
  if (setup().topology == Topology::kSentinelDiscovery) return absl::OkStatus();
  absl::StatusOr<Endpoint> ep = testkit::EndpointOf(replication_->MasterAddress(node));
  if (!ep.ok()) return ep.status();
  std::vector<std::string> names;
  for (int k : clients) {
    FaultProxy* p = link(k, node);
    absl::Status s = p->Retarget(ep->host, static_cast<uint16_t>(ep->port));
    if (s.ok()) s = p->Up();
    if (!s.ok()) return s;
    names.push_back(ClientName(k));
  }
  nemesis_log_.Instant(
      "follow", {.nodes = {node}, .clients = names},
      absl::StrCat(absl::StrJoin(names, ","), " now reach n", node, " at ",
                   replication_->MasterAddress(node), " (as a Sentinel-aware client would)"));
  return absl::OkStatus();
}

void Run::LinkClear(int client, int node) {
  ClearLogged(link(client, node), {.nodes = {node}, .clients = {ClientName(client)}});
}

absl::Status Run::PauseClient(int k) {
  absl::Status s = client(k).Pause();
  if (s.ok()) nemesis_log_.Start("client_pause", {.clients = {ClientName(k)}}, "SIGSTOP");
  return s;
}

absl::Status Run::ResumeClient(int k) {
  if (!client(k).paused()) return absl::OkStatus();
  absl::Status s = client(k).Resume();
  nemesis_log_.Stop("client_pause", ClientName(k), "SIGCONT");
  return s;
}

absl::Status Run::ClientClockJump(int k, absl::Duration wall, absl::Duration mono) {
  if (static_cast<size_t>(k) >= client_clocks_.size()) {
    return absl::FailedPreconditionError("clients were not started under the clock shim");
  }
  ClockControl* c = client_clocks_[static_cast<size_t>(k)].get();
  absl::Status s = c->JumpBy(wall, mono);
  if (!s.ok()) return s;
  nemesis_log_.Instant(
      "client_clock_jump", {.clients = {ClientName(k)}},
      absl::StrCat("wall ", absl::FormatDuration(wall),
                   mono != absl::ZeroDuration()
                       ? absl::StrCat(", monotonic ", absl::FormatDuration(mono))
                       : "",
                   " (offset now ", absl::FormatDuration(c->state().realtime), ")"));
  return absl::OkStatus();
}

std::optional<Marker> Run::WaitMarker(absl::string_view kind, int client, absl::Duration timeout,
                                      int64_t after) {
  std::string k(kind);
  return hub_.Wait(after, std::min(timeout, Remaining()), [&](const Marker& m) {
    return m.kind == k && (client < 0 || m.client == client);
  });
}

std::optional<Marker> Run::WaitMarkerIf(int64_t after, absl::Duration timeout,
                                        const std::function<bool(const Marker&)>& match) {
  return hub_.Wait(after, std::min(timeout, Remaining()), match);
}

CheckResult Run::CheckSoFar() {
  std::vector<std::string> malformed;
  absl::StatusOr<std::vector<Event>> h = ReadHistory(history_files_, &malformed);
  if (!h.ok()) return CheckResult();
  return Check(*h);
}

bool Run::Found(int property) { return FoundAny({property}); }

bool Run::FoundAny(const std::vector<int>& properties) {
  CheckResult r = CheckSoFar();
  for (int p : properties) {
    if (p < kNumProperties && r.violation_counts[static_cast<size_t>(p)] > 0) return true;
  }
  return false;
}

// ---- The runner ------------------------------------------------------------------

class Runner {
 public:
  static void Execute(const Scenario& sc, const RunOptions& opt, ScenarioResult* res);

 private:
  static absl::Status Setup(Run& run, const RunOptions& opt);
  static void Heal(Run& run);
  static std::vector<KeyState> ScanKeys(Run& run, const std::vector<std::string>& resources);
  static void Teardown(Run& run);
};

absl::Status Runner::Setup(Run& run, const RunOptions& opt) {
  const Scenario& sc = *run.scenario_;
  const ScenarioSetup& setup = sc.setup;
  absl::StatusOr<std::unique_ptr<HistoryWriter>> nem =
      HistoryWriter::Open(run.dir_ + "/nemesis.jsonl");
  if (!nem.ok()) return nem.status();
  run.nemesis_ = *std::move(nem);
  run.nemesis_log_ = NemesisLog(run.nemesis_.get());
  run.history_files_.push_back(run.dir_ + "/nemesis.jsonl");

  if (setup.topology == Topology::kNamespace) {
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
  testkit::Fleet& fleet = run.supervisor_->fleet();
  if (setup.replicas > 0) {
    if (setup.topology != Topology::kPerClientProxies &&
        setup.topology != Topology::kSentinelDiscovery) {
      return absl::InvalidArgumentError(
          "replicated nodes need per-client proxies or Sentinel discovery");
    }
    if (setup.topology == Topology::kSentinelDiscovery && !setup.sentinel) {
      return absl::InvalidArgumentError("Sentinel discovery needs the Sentinel");
    }
    ReplicationOptions ro;
    ro.replicas = setup.replicas;
    ro.sentinel = setup.sentinel;
    ro.dir = run.dir_;
    absl::StatusOr<std::unique_ptr<ReplicatedNodes>> rep =
        ReplicatedNodes::Start(run.supervisor_.get(), ro, &run.nemesis_log_);
    if (!rep.ok()) return rep.status();
    run.replication_ = *std::move(rep);
    for (int i = 0; i < setup.stalled && i < fleet.size(); ++i) {
      absl::Status s = run.replication_->Stall(i);
      if (!s.ok()) return s;
    }
  }

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
          c.nodes.push_back(absl::StrCat("redis+sentinel://", run.replication_->SentinelAddress(),
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
  // budget is spent on the workload, not on start-up.
  for (int k = 0; k < nc; ++k) {
    std::optional<Marker> m = run.hub_.Wait(
        0, absl::Seconds(10), [k](const Marker& m) { return m.client == k && m.kind == "invoke"; });
    if (!m.has_value()) {
      return absl::DeadlineExceededError(absl::StrCat(
          Run::ClientName(k), " made no attempt within 10s (see ", Run::ClientName(k), ".log)"));
    }
  }
  return absl::OkStatus();
}

void Runner::Heal(Run& run) {
  for (size_t i = 0; i < run.proxies_.size(); ++i) {
    run.ProxyClear(static_cast<int>(i));
    absl::Status s = run.proxies_[i]->Up();
    (void)s;
  }
  const auto& views = run.setup().views;
  for (size_t k = 0; k < run.links_.size(); ++k) {
    for (size_t i = 0; i < run.links_[k].size(); ++i) {
      run.LinkClear(static_cast<int>(k), static_cast<int>(i));
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
  if (run.replication_ != nullptr) {
    run.replication_->HealAll();
  }
  if (run.replication_ != nullptr && run.setup().topology == Topology::kPerClientProxies) {
    // Every client follows every failover by the end (a client left on a
    // partitioned old master learns of the new one once the partition heals).
    std::vector<int> all(static_cast<size_t>(run.num_clients()));
    for (int k = 0; k < run.num_clients(); ++k) all[static_cast<size_t>(k)] = k;
    for (int i = 0; i < run.replication_->size(); ++i) {
      if (!run.replication_->failed_over(i)) continue;
      std::vector<int> behind;
      for (int k : all) {
        if (run.link(k, i)->upstream() != run.replication_->MasterAddress(i)) behind.push_back(k);
      }
      if (behind.empty()) continue;
      absl::Status s = run.FollowMaster(i, behind);
      if (!s.ok()) run.Note(absl::StrCat("heal: ", s.ToString()));
    }
  }
}

std::vector<KeyState> Runner::ScanKeys(Run& run, const std::vector<std::string>& resources) {
  std::vector<KeyState> out;
  testkit::Fleet& fleet = run.supervisor_->fleet();
  for (int i = 0; i < fleet.size(); ++i) {
    for (const std::string& r : resources) {
      // On a replicated node, its current master.
      auto command = [&](const std::vector<std::string>& args) {
        return run.replication_ != nullptr ? run.replication_->Command(i, args, absl::Seconds(2))
                                           : fleet.Command(i, args, absl::Seconds(2));
      };
      absl::StatusOr<testkit::RedisValue> v = command({"GET", r});
      absl::StatusOr<testkit::RedisValue> t = command({"PTTL", r});
      if (!v.ok() || !t.ok()) {
        run.Note(absl::StrCat("S5 scan of n", i,
                              " failed: ", (!v.ok() ? v.status() : t.status()).ToString()));
        continue;
      }
      if (v->type != testkit::RedisValue::Type::kString) continue;
      out.push_back({i, r, v->str, t->integer});
    }
  }
  return out;
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
  run.active_faults_.clear();
}

void Runner::Execute(const Scenario& sc, const RunOptions& opt, ScenarioResult* res) {
  Run run;
  run.scenario_ = &sc;
  run.start_raw_ = RawMonotonicNanos();
  run.rng_.seed(opt.seed ^ Fnv(sc.name));
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!opt.keep_dir.empty()) {
    run.dir_ = absl::StrCat(opt.keep_dir, "/", sc.name);
    fs::remove_all(run.dir_, ec);
    fs::create_directories(run.dir_, ec);
    if (ec) {
      res->error = absl::StrCat("cannot create ", run.dir_, ": ", ec.message());
      return;
    }
    chmod(opt.keep_dir.c_str(), 0755);
  } else {
    std::string tmpl = absl::StrCat("/tmp/redlock-chaos-", getpid(), "-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      res->error = absl::StrCat("mkdtemp: ", strerror(errno));
      return;
    }
    run.dir_ = tmpl;
  }
  // Client processes of partition scenarios run as other uids.
  chmod(run.dir_.c_str(), 0755);

  absl::Status st = Setup(run, opt);
  if (st.ok()) {
    run.deadline_ = SteadyClock::now() + absl::ToChronoNanoseconds(sc.setup.budget);
    st = sc.body(run);
    if (!st.ok()) res->error = absl::StrCat("nemesis: ", st.ToString());
  } else {
    res->error = absl::StrCat("setup: ", st.ToString());
  }

  if (run.supervisor_ != nullptr) {
    Heal(run);
    // A quiet tail without faults, as long as a lease: whatever a fault left
    // behind (a late SET, a key restored from the AOF after its release was
    // lost) expires or is released before the S5 scan.
    int64_t max_ttl = 0;
    std::set<std::string> resources;
    for (const ClientConfig& c : sc.setup.clients) {
      max_ttl = std::max(max_ttl, c.ttl_ms);
      resources.insert(c.resources.begin(), c.resources.end());
    }
    if (!run.clients_.empty() && res->error.empty()) {
      InterruptibleSleep(sc.setup.quiet >= absl::ZeroDuration()
                             ? sc.setup.quiet
                             : std::min(absl::Milliseconds(max_ttl + 500), absl::Seconds(3)));
    }
    for (auto& c : run.clients_) {
      if (!c->exited()) {
        absl::Status s = c->Resume();
        (void)s;
        kill(c->pid(), SIGTERM);
      }
    }
    for (auto& c : run.clients_) {
      std::string how = c->Stop(absl::Milliseconds(2 * max_ttl + 5000));
      if (how != "exit 0" && res->error.empty()) {
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
      std::vector<KeyState> keys = ScanKeys(run, res_list);
      std::vector<std::string> tokens;
      {
        std::vector<std::string> malformed;
        absl::StatusOr<std::vector<Event>> h = ReadHistory(run.history_files_, &malformed);
        if (h.ok()) {
          for (const Event& e : *h) {
            if (e.type == EventType::kGrant) tokens.push_back(e.token);
          }
        }
      }
      res->leftovers = FailedAttemptLeftovers(keys, tokens);
      if (!keys.empty()) {
        // (b): nothing may outlive a ttl after the end.
        int64_t wait_ns = end_raw + (max_ttl + 500) * 1000000 - RawMonotonicNanos();
        if (wait_ns > 0) InterruptibleSleep(absl::Nanoseconds(wait_ns));
        for (const KeyState& k : ScanKeys(run, res_list)) {
          res->leftovers.push_back({k, absl::StrCat("n", k.node, " still holds \"", k.key, "\" ",
                                                    max_ttl + 500, " ms after the end (pttl ",
                                                    k.pttl_ms, " ms): it outlived its ttl")});
        }
      }
    }
    // Final counters, read by the harness.
    if (run.data_ != nullptr) {
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
        absl::Status s =
            run.nemesis_->WriteFinal({.resource = r, .counter = counter, .initial = 0});
        (void)s;
      }
    }
    if (!sc.setup.views.empty() && sc.setup.topology == Topology::kPerClientProxies) {
      run.nemesis_log_.Stop("partition", kViewsKey, "run over");
    }
  }

  std::vector<std::string> malformed;
  absl::StatusOr<std::vector<Event>> history = ReadHistory(run.history_files_, &malformed);
  std::optional<CheckResult> check;
  if (!history.ok()) {
    if (res->error.empty()) res->error = absl::StrCat("history: ", history.status().ToString());
  } else {
    check = Check(*history);
    const CheckResult& cr = *check;
    res->counts = cr.counts;
    for (int p = 0; p < kNumProperties; ++p)
      res->violations[static_cast<size_t>(p)] = cr.violation_counts[static_cast<size_t>(p)];
    res->violations[kS5] = static_cast<int64_t>(res->leftovers.size());
    res->availability =
        cr.counts.invokes > 0 ? static_cast<double>(cr.counts.grants) / cr.counts.invokes : 0;
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
    if (!malformed.empty()) run.Note(absl::StrCat(malformed.size(), " malformed history lines"));
    if (cr.warning_count > 0)
      run.Note(absl::StrCat(cr.warning_count, " checker warnings (e.g. ",
                            cr.warnings.empty() ? "" : cr.warnings[0], ")"));
    if (!opt.keep_dir.empty()) {
      std::ofstream(run.dir_ + "/report.txt") << FormatReport(cr);
      std::ofstream s5(run.dir_ + "/s5.txt");
      for (const LeftoverKey& k : res->leftovers) s5 << k.why << "\n";
    }
  }
  // Judged here (and again by RunScenario, for the runs that end earlier)
  // so that the history and the picture carry the verdict.
  Judge(sc, res);
  if (run.nemesis_ != nullptr) {
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
  res->notes = run.notes_;
  Teardown(run);
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
    std::string dir = std::filesystem::path(buf).parent_path().string();
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

}  // namespace

std::string DefaultClientBinary() { return FindHarnessBinary("redlock-chaos-client"); }
std::string DefaultBrokenClientBinary() { return FindHarnessBinary("redlock-chaos-broken-client"); }

ScenarioResult RunScenario(const Scenario& scenario, const RunOptions& options) {
  ScenarioResult res;
  res.name = scenario.name;
  res.config = scenario.config;
  res.expect = scenario.expect;
  auto t0 = SteadyClock::now();
  if (scenario.needs_root) {
    absl::Status s = PartitionSupport();
    if (!s.ok()) {
      // A missing tool skips the scenario, except under CI (NotFound).
      res.skipped = absl::IsFailedPrecondition(s);
      res.skip_reason = std::string(s.message());
      res.why = std::string(s.message());
      res.ok = res.skipped;
      return res;
    }
  }
  if (scenario.setup.sentinel) {
    absl::Status s = testkit::CheckRedisSentinelAvailable();
    if (!s.ok()) {
      res.skipped = absl::IsFailedPrecondition(s);
      res.skip_reason = std::string(s.message());
      res.why = res.skip_reason;
      res.ok = res.skipped;
      return res;
    }
  }
  if (UsesBrokenClient(scenario)) {
    const std::string broken = options.broken_client_binary.empty() ? DefaultBrokenClientBinary()
                                                                    : options.broken_client_binary;
    if (testkit::FindExecutable(broken).empty()) {
      // Skipped where tests are not built; under CI a failure, never a skip.
      res.skipped = !testkit::UnderCi();
      res.skip_reason = absl::StrCat(
          "no ", broken, " (the broken clients are test code: build with REDLOCK_BUILD_TESTS=ON)",
          res.skipped ? "" : "; CI=true makes that a failure");
      res.why = res.skip_reason;
      res.ok = res.skipped;
      return res;
    }
  }
  // Own thread: nodes and clients die with the thread that forked them, and
  // a namespace scenario moves this thread into its namespace.
  std::thread t([&] { Runner::Execute(scenario, options, &res); });
  t.join();
  res.elapsed = absl::FromChrono(SteadyClock::now() - t0);
  Judge(scenario, &res);
  return res;
}

// ---- Reports -----------------------------------------------------------------------

std::string FormatTable(const std::vector<ScenarioResult>& results) {
  // The scenario column fits the longest name (28 at least).
  int w = 28;
  for (const ScenarioResult& r : results) w = std::max(w, static_cast<int>(r.name.size()));
  std::string out = absl::StrFormat("%-*s %-46s %6s %4s %4s %4s %4s %4s %6s  %-26s %s\n", w,
                                    "scenario", "configuration", "ops", "S1", "S2", "S3", "S4",
                                    "S5", "avail", "expected", "verdict");
  out += std::string(static_cast<size_t>(122 + w), '-') + "\n";
  for (const ScenarioResult& r : results) {
    std::string verdict = r.skipped ? "SKIP" : r.ok ? "OK" : "FAIL";
    if (r.skipped) {
      absl::StrAppend(
          &out, absl::StrFormat("%-*s %-46s %6s %4s %4s %4s %4s %4s %6s  %-26s %s (%s)\n", w,
                                r.name, Shorten(r.config, 46), "-", "-", "-", "-", "-", "-", "-",
                                Shorten(r.expect.Describe(), 26), verdict, r.skip_reason));
      continue;
    }
    const auto& v = r.violations;
    absl::StrAppend(
        &out, absl::StrFormat("%-*s %-46s %6d %4d %4d %4d %4d %4d %5.1f%%  %-26s %s\n", w, r.name,
                              Shorten(r.config, 46), r.counts.invokes, v[0], v[1], v[2], v[3], v[4],
                              100.0 * r.availability, Shorten(r.expect.Describe(), 26), verdict));
  }
  return out;
}

std::string FormatJson(const std::vector<ScenarioResult>& results, uint64_t seed,
                       absl::Duration total) {
  nlohmann::json doc;
  doc["seed"] = seed;
  doc["seconds"] = absl::ToDoubleSeconds(total);
  nlohmann::json arr = nlohmann::json::array();
  bool all_ok = true;
  for (const ScenarioResult& r : results) {
    nlohmann::json j;
    j["scenario"] = r.name;
    j["configuration"] = r.config;
    j["expected"] = r.expect.Describe();
    j["verdict"] = r.skipped ? "SKIP" : r.ok ? "OK" : "FAIL";
    if (r.skipped) j["skip_reason"] = r.skip_reason;
    if (!r.why.empty()) j["why"] = r.why;
    if (!r.error.empty()) j["error"] = r.error;
    j["operations"] = r.counts.invokes;
    j["grants"] = r.counts.grants;
    j["fails"] = r.counts.fails;
    j["uses"] = r.counts.uses;
    j["rejected_writes"] = r.counts.rejected_writes;
    j["nemesis_events"] = r.counts.nemesis;
    j["availability"] = r.availability;
    nlohmann::json viol;
    for (int p = 0; p < kNumHarnessProperties; ++p)
      viol[HarnessPropertyName(p)] = r.violations[static_cast<size_t>(p)];
    j["violations"] = viol;
    j["examples"] = r.examples;
    j["notes"] = r.notes;
    j["seconds"] = absl::ToDoubleSeconds(r.elapsed);
    if (!r.kept_dir.empty()) j["history_dir"] = r.kept_dir;
    all_ok = all_ok && r.ok;
    arr.push_back(std::move(j));
  }
  doc["scenarios"] = std::move(arr);
  doc["ok"] = all_ok;
  return doc.dump(2) + "\n";
}

std::string FormatIndexHtml(const std::vector<ScenarioResult>& results, uint64_t seed,
                            absl::Duration total) {
  auto esc = [](absl::string_view text) { return svg::XmlEscape(text); };
  bool all_ok = true;
  for (const ScenarioResult& r : results) all_ok = all_ok && r.ok;
  std::string out =
      absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
                   "<title>redlock-chaos, seed ", seed, "</title>\n</head>\n<body>\n",
                   "<h1>redlock-chaos: ", results.size(), " scenarios, seed ", seed, "</h1>\n<p>",
                   all_ok ? "Every verdict as expected" : "<b>Some verdicts not as expected</b>",
                   absl::StrFormat(", in %.1f s. ", absl::ToDoubleSeconds(total)),
                   "Each picture: a lane per client (holds, failed attempts), a lane per node (the "
                   "faults), the violations marked across the lanes; hover for details.</p>\n");
  absl::StrAppend(&out,
                  "<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\">\n<tr><th>scenario"
                  "</th><th>configuration</th><th>expected</th><th>verdict</th>");
  for (int p = 0; p < kNumHarnessProperties; ++p) {
    absl::StrAppend(&out, "<th>", HarnessPropertyName(p), "</th>");
  }
  out += "</tr>\n";
  auto verdict = [](const ScenarioResult& r) -> std::string {
    if (r.skipped) return "SKIP";
    return r.ok ? "<b style=\"color:#2ca02c\">OK</b>" : "<b style=\"color:#d62728\">FAIL</b>";
  };
  for (const ScenarioResult& r : results) {
    absl::StrAppend(&out, "<tr><td><a href=\"#", esc(r.name), "\">", esc(r.name), "</a></td><td>",
                    esc(r.config), "</td><td>", esc(r.expect.Describe()), "</td><td>", verdict(r),
                    "</td>");
    for (int p = 0; p < kNumHarnessProperties; ++p) {
      absl::StrAppend(&out, "<td>", r.skipped ? "-" : absl::StrCat(r.violations[p]), "</td>");
    }
    out += "</tr>\n";
  }
  out += "</table>\n";
  for (const ScenarioResult& r : results) {
    absl::StrAppend(&out, "<h2 id=\"", esc(r.name), "\">", esc(r.name), ": ", verdict(r),
                    "</h2>\n<p>", esc(r.config), "; expected: ", esc(r.expect.Describe()));
    if (!r.why.empty()) absl::StrAppend(&out, "<br>why: ", esc(r.why));
    if (r.skipped) absl::StrAppend(&out, "<br>skipped: ", esc(r.skip_reason));
    out += "</p>\n";
    if (!r.plot_path.empty()) {
      const std::string file = std::filesystem::path(r.plot_path).filename().string();
      absl::StrAppend(&out, "<p><a href=\"", esc(file), "\"><img src=\"", esc(file),
                      "\" alt=\"timeline of ", esc(r.name), "\" width=\"100%\"></a></p>\n");
    } else if (!r.skipped) {
      out += "<p>no picture (the run left no history)</p>\n";
    }
  }
  out += "</body>\n</html>\n";
  return out;
}

std::string FormatList() {
  std::string out;
  for (const Scenario& s : Catalog()) {
    absl::StrAppend(&out, s.name, s.quick ? "  [quick]" : "", s.needs_root ? "  [root]" : "",
                    "\n  config:   ", s.config, "\n  expected: ", s.expect.Describe(), "\n  ",
                    s.summary, "\n\n");
  }
  return out;
}

const Scenario* FindScenario(absl::string_view name) {
  for (const Scenario& s : Catalog()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace redlock::chaos
