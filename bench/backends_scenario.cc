#include "bench/backends_scenario.h"

#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/lock_service.h"
#include "backends/servers.h"
#include "bench/locker.h"
#include "bench/report.h"
#include "bench/rows.h"
#include "common/svg.h"
#include "redlock/internal/status_macros.h"

namespace redlock::bench {
namespace {

using backends::Grant;
using backends::Kind;
using backends::LockService;
using backends::LockSession;
using backends::ServerCluster;
using backends::ServerKind;

constexpr char kScenario[] = "backends";

// bench::Locker over one session and one resource.
class SessionLocker final : public Locker {
 public:
  SessionLocker(std::unique_ptr<LockSession> session, std::string resource)
      : session_(std::move(session)), resource_(std::move(resource)) {}
  absl::Status Acquire(absl::Duration ttl) override {
    REDLOCK_ASSIGN_OR_RETURN(grant_, session_->TryAcquire(resource_, ttl));
    return absl::OkStatus();
  }
  absl::Status Release() override { return session_->Release(grant_); }

 private:
  std::unique_ptr<LockSession> session_;
  const std::string resource_;
  Grant grant_;
};

// HotResource's waiter over one session.
using SessionWaiter = WaiterOf<std::unique_ptr<LockSession>, Grant>;

// A session that failed to open: every call returns why.
class BrokenWaiter final : public HotResource::Waiter {
 public:
  explicit BrokenWaiter(absl::Status s) : status_(std::move(s)) {}
  absl::Status Acquire(const std::string&, absl::Duration, absl::Duration) override {
    return status_;
  }
  absl::Status Release() override { return status_; }

 private:
  absl::Status status_;
};

std::string Family(Kind kind) { return std::string(backends::KindName(kind)); }

RowResult SkippedRow(Kind kind, const std::string& variant, int callers, const std::string& why) {
  RowResult row =
      RowIdentity(absl::StrCat(Family(kind), " ", variant), Family(kind), variant, callers);
  row.skipped = true;
  row.skip_reason = why;
  return row;
}

struct Target {
  Kind kind;
  std::string label;  // the row family: the kind's name, or e.g. "redlock-aof"
  backends::ServiceOptions options;
  ServerCluster* cluster = nullptr;  // null: Redis nodes of the bench's own fleet
  testkit::Fleet* fleet = nullptr;   // Redis: the fleet to stop a node of
  int fleet_node = -1;
};

// The member a "stopped" row stops, and how to say it.
absl::StatusOr<std::pair<int, std::string>> StopTarget(const Target& t) {
  if (t.cluster == nullptr) {
    return std::make_pair(t.fleet_node, absl::StrCat("Redis node ", t.fleet_node));
  }
  if (t.cluster->kind() == ServerKind::kPostgres)
    return std::make_pair(0, std::string("the database"));
  absl::StatusOr<int> leader = t.cluster->Leader();
  if (!leader.ok()) return leader.status();
  return std::make_pair(*leader, absl::StrCat("the leader (member ", *leader, ")"));
}

void RunTarget(Context& ctx, const Target& t, GroupResult* g) {
  const BenchSettings& s = ctx.settings;
  absl::StatusOr<std::unique_ptr<LockService>> created = LockService::Create(t.options);
  const std::string family = t.label.empty() ? Family(t.kind) : t.label;
  if (!created.ok()) {
    const std::string why = absl::StrCat("lock service: ", created.status().ToString());
    ctx.harness_errors.push_back(absl::StrCat(family, ": ", why));
    RowResult row = SkippedRow(t.kind, "x1", 1, why);
    row.family = family;
    row.skipped = false;
    row.harness_error = why;
    g->rows.push_back(std::move(row));
    return;
  }
  LockService* service = created->get();
  g->notes.push_back(absl::StrCat(family, ": ", service->Describe()));
  auto cycles = [&, service](int callers, const std::string& key) {
    return [&, service, callers, key]() -> absl::StatusOr<std::vector<CycleFn>> {
      std::vector<CycleFn> out;
      for (int i = 0; i < callers; ++i) {
        absl::StatusOr<std::unique_ptr<LockSession>> session = service->NewSession();
        if (!session.ok()) return session.status();
        out.push_back(LockCycle(
            std::make_unique<SessionLocker>(*std::move(session), absl::StrCat(key, ":t", i)),
            s.ttl));
      }
      return out;
    };
  };
  for (int callers : {1, s.callers_many}) {
    RowSpec spec;
    spec.impl = family;
    spec.family = family;
    spec.variant = callers == 1 ? "x1" : "many";
    spec.callers = callers;
    spec.make = cycles(callers, absl::StrCat(ctx.RowKey()));
    g->rows.push_back(RunRow(ctx, std::move(spec)));
  }
  {
    HotResource::Config hc;
    hc.resource = ctx.RowKey() + ":hot";
    hc.ttl = s.ttl;
    hc.wait = s.hot_wait;
    hc.hold = s.hot_hold;
    HotResource hot(
        [service](int) -> std::unique_ptr<HotResource::Waiter> {
          absl::StatusOr<std::unique_ptr<LockSession>> session = service->NewSession();
          if (!session.ok()) return std::make_unique<BrokenWaiter>(session.status());
          return std::make_unique<SessionWaiter>(*std::move(session));
        },
        hc);
    RowSpec spec = HotRow(s, &hot, absl::StrCat(family, " hot"), family, "hot");
    spec.after = [&](RowResult* row) {
      row->notes.push_back(absl::StrCat(row->handoff.count(), " hand-offs between ", s.hot_waiters,
                                        " callers; ", hot.not_waiting(),
                                        " acquisitions by callers not yet waiting (not counted)"));
    };
    g->rows.push_back(RunRow(ctx, std::move(spec)));
  }
  {
    absl::StatusOr<std::pair<int, std::string>> target = StopTarget(t);
    if (!target.ok()) {
      g->rows.push_back(SkippedRow(
          t.kind, "stopped", 1, absl::StrCat("no member to stop: ", target.status().ToString())));
      return;
    }
    const int member = target->first;
    const std::string description = absl::StrCat(target->second, " SIGSTOPped");
    std::function<absl::Status()> stop, resume;
    if (t.cluster != nullptr) {
      ServerCluster* c = t.cluster;
      stop = [c, member] { return c->Stop(member); };
      resume = [c, member]() -> absl::Status {
        if (absl::Status st = c->Continue(member); !st.ok()) return st;
        return c->WaitHealthy(absl::Seconds(60));
      };
    } else {
      testkit::Fleet* f = t.fleet;
      stop = [f, member] { return f->Stop(member); };
      resume = [f, member] { return f->Continue(member); };
    }
    // The member stops when the measurement starts (not before the warm-up,
    // as RowSpec::fault would): the election or failover it causes is then
    // inside the measured cycles; it continues after the measurement.
    absl::Status stop_status;
    RowSpec spec;
    spec.impl = absl::StrCat(family, " stopped");
    spec.family = family;
    spec.variant = "stopped";
    spec.callers = 1;
    spec.duration = s.stopped_duration;
    spec.make = cycles(1, ctx.RowKey());
    spec.at_start = [&] { stop_status = stop(); };
    spec.after = [&](RowResult* row) {
      row->notes.push_back(absl::StrCat(description, " for the whole measurement"));
      absl::Status back = resume();
      if (!stop_status.ok() || !back.ok()) {
        row->harness_error =
            absl::StrCat("stopping/continuing: ", stop_status.ToString(), "; ", back.ToString());
        ctx.harness_errors.push_back(absl::StrCat(family, " stopped: ", row->harness_error));
      }
    };
    g->rows.push_back(RunRow(ctx, std::move(spec)));
  }
}

// Every row family of the group, in table order.
std::vector<std::string> Labels() {
  std::vector<std::string> out = {"redis", "redlock", "redis-aof", "redlock-aof"};
  for (Kind kind : backends::AllKinds()) {
    if (kind != Kind::kRedis && kind != Kind::kRedlock) out.push_back(Family(kind));
  }
  return out;
}

std::string Cell(const RowResult* r, const char* what) {
  if (r == nullptr) return "-";
  if (r->skipped) return "skipped";
  if (!r->ran()) return "error";
  const std::string w = what;
  if (w == "p50") return r->cycle.empty() ? "-" : FormatLatency(r->cycle.Quantile(0.5));
  if (w == "p99") return r->cycle.empty() ? "-" : FormatLatency(r->cycle.Quantile(0.99));
  if (w == "rate") return FormatRate(r->throughput());
  if (w == "handoff") return r->handoff.empty() ? "-" : FormatLatency(r->handoff.Quantile(0.5));
  if (w == "stopped") {
    return absl::StrFormat("%.0f%% ok, p50 %s, max %s", 100 * r->success_rate(),
                           r->cycle.empty() ? "-" : FormatLatency(r->cycle.Quantile(0.5)),
                           r->acquire.empty() ? "-" : FormatLatency(r->acquire.max()));
  }
  return "?";
}

const RowResult* FindRow(const GroupResult& g, const std::string& family,
                         const std::string& variant) {
  for (const RowResult& r : g.rows) {
    if (r.family == family && r.variant == variant) return &r;
  }
  return nullptr;
}

}  // namespace

void RunBackends(Context& ctx, int n, GroupResult* g) {
  const BenchSettings& s = ctx.settings;
  g->title = "the same lock workload on Redis (this library), etcd, ZooKeeper and PostgreSQL";
  g->settings.emplace_back("ttl", absl::FormatDuration(s.ttl));
  g->settings.emplace_back("callers", absl::StrCat("1 and ", s.callers_many));
  g->settings.emplace_back("hot", absl::StrCat(s.hot_waiters, " waiters"));
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->rows.push_back(FloorRow(ctx, eps));
  const std::string prefix = absl::StrCat("rb:", ctx.settings.run_id, ":b:");

  auto base = [&](Kind kind) {
    backends::ServiceOptions o;
    o.kind = kind;
    o.key_prefix = prefix;
    o.redis_node_timeout = s.node_timeout;
    o.request_timeout = absl::Seconds(1);
    o.session_timeout = s.ttl;
    return o;
  };
  // This library on the bench's own fleet: one node, then N.
  for (Kind kind : {Kind::kRedis, Kind::kRedlock}) {
    Target t{.kind = kind, .options = base(kind), .fleet = ctx.nodes.fleet()};
    const int nodes = kind == Kind::kRedis ? 1 : n;
    for (const Endpoint& ep : ctx.nodes.First(nodes)) t.options.endpoints.push_back(ep.ToString());
    t.fleet_node = nodes - 1;
    if (t.fleet == nullptr) {
      g->rows.push_back(SkippedRow(kind, "x1", 1, "needs the bench's own fleet (--nodes given)"));
      continue;
    }
    RunTarget(ctx, t, g);
  }
  // The same with appendfsync always (etcd, ZooKeeper and PostgreSQL fsync
  // every write by default; the bench's fleet has no persistence).
  if (ctx.nodes.fleet() != nullptr) {
    ctx.progress.Row("starting redis-server with appendfsync always");
    absl::StatusOr<std::unique_ptr<ServerCluster>> aof =
        ServerCluster::Start({.kind = ServerKind::kRedis, .members = n, .redis_aof = true});
    if (!aof.ok()) {
      ctx.harness_errors.push_back(
          absl::StrCat("starting the AOF fleet: ", aof.status().ToString()));
    } else {
      for (Kind kind : {Kind::kRedis, Kind::kRedlock}) {
        Target t{.kind = kind,
                 .label = absl::StrCat(Family(kind), "-aof"),
                 .options = base(kind),
                 .fleet = (*aof)->fleet()};
        const int nodes = kind == Kind::kRedis ? 1 : n;
        for (int i = 0; i < nodes; ++i) t.options.endpoints.push_back((*aof)->endpoint(i));
        t.fleet_node = nodes - 1;
        RunTarget(ctx, t, g);
      }
    }
  }
  struct ServerFamily {
    ServerKind server;
    std::vector<Kind> kinds;
    int members;
  };
  const ServerFamily families[] = {
      {ServerKind::kEtcd, {Kind::kEtcd}, 3},
      {ServerKind::kZooKeeper, {Kind::kZooKeeper}, 3},
      {ServerKind::kPostgres, {Kind::kPgAdvisory, Kind::kPgUnique, Kind::kPgForUpdate}, 1},
  };
  for (const ServerFamily& f : families) {
    const std::string server(backends::ServerName(f.server));
    absl::Status available = backends::ServerAvailable(f.server);
    for (Kind kind : f.kinds) {
      if (absl::Status c = backends::ClientAvailable(kind); available.ok() && !c.ok()) {
        available = c;
      }
    }
    if (!available.ok()) {
      for (Kind kind : f.kinds) {
        g->rows.push_back(SkippedRow(kind, "x1", 1, std::string(available.message())));
      }
      g->notes.push_back(absl::StrCat(server, ": skipped: ", available.message()));
      continue;
    }
    ctx.progress.Row(absl::StrCat("starting ", server));
    const int64_t t0 = NowNs();
    absl::StatusOr<std::unique_ptr<ServerCluster>> cluster =
        ServerCluster::Start({.kind = f.server, .members = f.members});
    if (!cluster.ok()) {
      const std::string why = absl::StrCat("starting ", server, ": ", cluster.status().ToString());
      ctx.harness_errors.push_back(why);
      g->notes.push_back(why);
      continue;
    }
    g->notes.push_back(absl::StrFormat("%s: %s, %d member(s) on %s, started in %.1fs", server,
                                       (*cluster)->Version(), (*cluster)->size(),
                                       absl::StrJoin((*cluster)->endpoints(), ","),
                                       static_cast<double>(NowNs() - t0) / 1e9));
    for (Kind kind : f.kinds) {
      Target t{.kind = kind, .options = base(kind), .cluster = cluster->get()};
      t.options.endpoints = (*cluster)->endpoints();
      const size_t before = ctx.harness_errors.size();
      RunTarget(ctx, t, g);
      if (ctx.harness_errors.size() != before) (*cluster)->KeepLogs();
    }
  }
  // The comparison in one block at the end of the group.
  g->notes.push_back(absl::StrFormat("%-14s %-9s %-9s %-10s %-9s %s", "backend", "x1 p50", "x1 p99",
                                     "many", "hand-off", "one member stopped"));
  for (const std::string& fam : Labels()) {
    g->notes.push_back(absl::StrFormat(
        "%-14s %-9s %-9s %-10s %-9s %s", fam, Cell(FindRow(*g, fam, "x1"), "p50"),
        Cell(FindRow(*g, fam, "x1"), "p99"), Cell(FindRow(*g, fam, "many"), "rate"),
        Cell(FindRow(*g, fam, "hot"), "handoff"), Cell(FindRow(*g, fam, "stopped"), "stopped")));
  }
}

std::string BackendsMarkdown(const BenchResults& results) {
  for (const GroupResult& g : results.groups) {
    if (g.scenario != kScenario || g.skipped) continue;
    std::string out = absl::StrCat("| backend | acquire+release p50 (1 caller) | p99 | cycles/s (",
                                   results.info.callers_many,
                                   " callers) | hand-off p50 | one member SIGSTOPped |\n| --- | "
                                   "--- | --- | --- | --- | --- |\n");
    for (const std::string& fam : Labels()) {
      absl::StrAppend(&out, "| ", fam, " | ", Cell(FindRow(g, fam, "x1"), "p50"), " | ",
                      Cell(FindRow(g, fam, "x1"), "p99"), " | ",
                      Cell(FindRow(g, fam, "many"), "rate"), " | ",
                      Cell(FindRow(g, fam, "hot"), "handoff"), " | ",
                      Cell(FindRow(g, fam, "stopped"), "stopped"), " |\n");
    }
    return out;
  }
  return "";
}

std::vector<std::pair<std::string, std::string>> RenderBackendPlots(const BenchResults& results) {
  std::vector<std::pair<std::string, std::string>> out;
  const GroupResult* group = nullptr;
  for (const GroupResult& g : results.groups) {
    if (g.scenario == kScenario && !g.skipped) group = &g;
  }
  if (group == nullptr) return out;
  static const char* const kColors[] = {"#1f77b4", "#aec7e8", "#17becf", "#9edae5", "#2ca02c",
                                        "#ff7f0e", "#d62728", "#9467bd", "#8c564b"};
  for (const char* variant : {"x1", "hot"}) {
    const bool hot = std::string(variant) == "hot";
    svg::LineChart chart;
    chart.title = hot ? "hand-off latency on one hot resource, by lock service"
                      : "acquire+release latency, one caller, by lock service";
    chart.subtitle =
        absl::StrCat(results.info.machine.cpu_model, ", ", results.info.machine.cores_online,
                     " cores; ", results.info.mode, " run, seed ", results.info.seed);
    chart.x.label = hot ? "holder's Release -> next waiter's Acquire returned (log scale)"
                        : "acquire+release (log scale)";
    chart.x.log = true;
    chart.x.format = svg::FormatMicros;
    chart.y.label = hot ? "fraction of hand-offs" : "fraction of cycles";
    chart.y.min = 0;
    chart.y.max = 1;
    size_t color = 0;
    for (const std::string& fam : Labels()) {
      const RowResult* r = FindRow(*group, fam, variant);
      const char* c = kColors[color++ % 9];
      if (r == nullptr || !r->ran()) continue;
      const Distribution& d = hot ? r->handoff : r->cycle;
      if (d.empty()) continue;
      svg::Series series;
      series.name = fam;
      series.color = c;
      series.markers = false;
      for (const auto& [ns, frac] : d.Cdf(100)) {
        series.points.emplace_back(std::max(1.0, static_cast<double>(ns) / 1e3), frac);
      }
      chart.series.push_back(std::move(series));
    }
    if (!chart.series.empty()) {
      out.emplace_back(hot ? "backends_handoff_cdf.svg" : "backends_latency_cdf.svg",
                       svg::RenderLineChart(chart));
    }
  }
  return out;
}

}  // namespace redlock::bench
