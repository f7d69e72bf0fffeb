// The scenarios that compare the library with one of its features on and
// off: `fencing`, `scriptless` (nodes that forbid scripting), `cluster` (a
// Redis Cluster as a node), `multilock` (MultiLock in both modes), `observer`
// (a MetricsCollector attached) and `durability` (the WAIT vote on replicated
// nodes).

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/faults.h"
#include "bench/report.h"
#include "bench/rows.h"
#include "bench/scenarios.h"
#include "redlock/client.h"
#include "redlock/internal/algorithm.h"
#include "redlock/metrics.h"
#include "testkit/cluster.h"
#include "testkit/redis.h"
#include "testkit/replication.h"

namespace redlock::bench {

namespace {

void DeleteKeys(Context& ctx, const std::vector<Endpoint>& eps,
                const std::vector<std::string>& keys) {
  for (const Endpoint& ep : eps) {
    for (size_t i = 0; i < keys.size(); i += 64) {
      std::vector<std::string> cmd = {"DEL"};
      for (size_t j = i; j < std::min(keys.size(), i + 64); ++j) cmd.push_back(keys[j]);
      absl::StatusOr<testkit::RedisValue> r = testkit::RunCommand(ep, cmd);
      if (!r.ok()) {
        ctx.harness_errors.push_back(
            absl::StrCat("cleanup on ", ep.ToString(), ": ", r.status().ToString()));
        break;
      }
    }
  }
}

// The plain library on `eps` with `callers` callers: the row a feature's
// rows are compared with.
void AddPlainRow(Context& ctx, const std::vector<Endpoint>& eps, int callers, GroupResult* g) {
  LibrarySpec plain;
  plain.callers = callers;
  g->rows.push_back(LibraryRow(ctx, eps, plain));
}

// The library on `on` (its rows named `impl`, `variant`) after the plain
// library on the group's own nodes, with `callers` callers, and the note of
// their ratios (`what`: "with ...").
void AddOnRow(Context& ctx, const std::vector<Endpoint>& on, const std::string& impl,
              const std::string& variant, int callers, const std::string& what, GroupResult* g) {
  LibrarySpec spec;
  spec.impl = impl;
  spec.variant = variant;
  spec.callers = callers;
  g->rows.push_back(LibraryRow(ctx, on, spec));
  OnOffNote(g, "", variant, callers, what);
}

}  // namespace

// Fencing off, on, and on tolerating one lost counter
// (Options::fencing_lost_counters = 1: F = ceil((N+2)/2) grants and commits
// instead of a quorum; N >= 2).
void RunFencing(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "all nodes healthy; Options::fencing off vs on vs on with fencing_lost_counters = 1";
  CommonSettings(ctx, g);
  g->rows.push_back(FloorRow(ctx, eps));
  for (int callers : {1, ctx.settings.callers_many}) {
    AddPlainRow(ctx, eps, callers, g);
    auto fenced_row = [&](const std::string& impl, const std::string& variant, int lost) {
      LibrarySpec fenced;
      fenced.impl = impl;
      fenced.variant = variant;
      fenced.callers = callers;
      fenced.tweak = [lost](Options* o) {
        o->fencing = true;
        o->fencing_lost_counters = lost;
      };
      const int before = ctx.next_row;
      g->rows.push_back(LibraryRow(ctx, eps, fenced));
      // The counters have no ttl: remove the ones this row created.
      std::vector<std::string> keys;
      for (int row = before + 1; row <= ctx.next_row; ++row) {
        for (int i = 0; i < callers; ++i) {
          keys.push_back(
              absl::StrCat("rb:", ctx.settings.run_id, ":", row, ":t", i, internal::kFenceSuffix));
        }
      }
      DeleteKeys(ctx, eps, keys);
    };
    fenced_row("library fencing", "fencing", 0);
    OnOffNote(g, "", "fencing", callers, "with fencing");
    if (n < 2) continue;  // one node cannot survive losing its counter
    fenced_row("library fencing lost=1", "fencing, 1 lost counter", 1);
    OnOffNote(g, "fencing", "fencing, 1 lost counter", callers,
              absl::StrCat("tolerating one lost counter (F = ",
                           internal::FencedQuorum(n, n / 2 + 1, 1), " of ", n, ")"));
    const RowResult* a = g->Find(kLibrary, "fencing", callers);
    const RowResult* b = g->Find(kLibrary, "fencing, 1 lost counter", callers);
    if (a != nullptr && b != nullptr && a->ran() && b->ran() && a->acquire.Quantile(0.5) > 0) {
      g->notes.push_back(
          absl::StrFormat("%s: acquire p50 %s tolerating one lost counter, %s without: %.2fx",
                          CallersLabel(callers), FormatLatency(b->acquire.Quantile(0.5)),
                          FormatLatency(a->acquire.Quantile(0.5)),
                          static_cast<double>(b->acquire.Quantile(0.5)) /
                              static_cast<double>(a->acquire.Quantile(0.5))));
    }
  }
}

// Release and extend by the server's own commands (DELIFEQ or DELEX IFEQ,
// SET IFEQ PX: Options::server_commands) vs by the scripts, on the same
// servers: cycles of acquire, extend and release, so both rows share the
// acquisition and differ by the release and the extension. Client and
// server CPU per cycle in the notes. On a server without the commands
// (Redis 7.0) both rows take the scripts, and the group says so: run it with
// --server valkey-9.1 or redis-8.0.
void RunCommands(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "release and extend by the server's commands vs by scripts (acquire+extend+release)";
  CommonSettings(ctx, g);
  // What the nodes' handshakes found, from a client of the group's own.
  std::string path = "unknown";
  {
    absl::StatusOr<std::unique_ptr<Client>> probe = Client::Create(ClientOptions(ctx, eps));
    if (!probe.ok()) {
      ctx.harness_errors.push_back(
          absl::StrCat("commands: Client::Create: ", probe.status().ToString()));
      return;
    }
    const std::vector<NodeHealth> health = (*probe)->Health();
    if (!health.empty()) path = health[0].path;
  }
  g->notes.push_back(absl::StrCat("node 0's path with Options::server_commands on: ", path));
  const bool has_commands =
      absl::StrContains(path, "release by") || absl::StrContains(path, "extend by");
  if (!has_commands) {
    g->notes.push_back(
        "these servers have none of DELIFEQ, DELEX IFEQ, SET IFEQ: both rows use the scripts "
        "(run with --server valkey-9.1 or --server redis-8.0)");
  }
  for (int callers : {1, ctx.settings.callers_many}) {
    LibrarySpec scripts;
    scripts.callers = callers;
    scripts.kind = LibraryKind::kSingleExtend;
    scripts.impl = "library scripts";
    scripts.variant = "scripts";
    scripts.tweak = [](Options* o) { o->server_commands = false; };
    g->rows.push_back(LibraryRow(ctx, eps, scripts));
    LibrarySpec commands;
    commands.callers = callers;
    commands.kind = LibraryKind::kSingleExtend;
    commands.impl = "library commands";
    commands.variant = "commands";
    g->rows.push_back(LibraryRow(ctx, eps, commands));
    OnOffNote(g, "scripts", "commands", callers, "releasing and extending by commands");
    const RowResult* a = g->Find(kLibrary, "scripts", callers);
    const RowResult* b = g->Find(kLibrary, "commands", callers);
    if (a != nullptr && b != nullptr && a->ran() && b->ran()) {
      const double sa = a->server_cpu_us_per_cycle();
      const double sb = b->server_cpu_us_per_cycle();
      if (sa > 0 && sb > 0) {
        g->notes.push_back(absl::StrFormat(
            "%s: server CPU per cycle %.1f us by commands, %.1f us by scripts: %.2fx",
            CallersLabel(callers), sb, sa, sb / sa));
      }
    }
  }
}

// Nodes that forbid scripting: the same nodes reached as an ACL user denied
// @scripting (made for the group, removed after it), so every compare-and-set
// runs as WATCH ... MULTI ... EXEC (redlock/internal/scriptless.h): Lua vs
// transactions on every node, and a mixed fleet (every other node).
void RunScriptless(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "all nodes healthy; Lua scripts vs WATCH/MULTI/EXEC on nodes that forbid scripting";
  CommonSettings(ctx, g);
  const std::string user = absl::StrCat("redlock-bench-tx-", ctx.settings.run_id);
  std::vector<Endpoint> tx = eps;
  std::vector<Endpoint> mixed = eps;
  for (size_t i = 0; i < eps.size(); ++i) {
    absl::StatusOr<testkit::RedisValue> r = testkit::RunCommand(
        eps[i], {"ACL", "SETUSER", user, "on", ">bench", "~*", "&*", "+@all", "-@scripting"});
    if (!r.ok()) {
      ctx.harness_errors.push_back(
          absl::StrCat("ACL SETUSER on ", eps[i].ToString(), ": ", r.status().ToString()));
      return;
    }
    tx[i].username = user;
    tx[i].password = "bench";
    if (i % 2 == 0) mixed[i] = tx[i];
  }
  g->rows.push_back(FloorRow(ctx, eps));
  for (int callers : {1, ctx.settings.callers_many}) {
    AddPlainRow(ctx, eps, callers, g);
    AddOnRow(ctx, tx, "library scriptless", "scriptless", callers,
             "with every node forbidding scripting", g);
    if (n < 2) continue;
    AddOnRow(ctx, mixed, "library mixed", "mixed", callers,
             "with every other node forbidding scripting", g);
  }
  for (const Endpoint& ep : eps) (void)testkit::RunCommand(ep, {"ACL", "DELUSER", user});
}

// A Redis Cluster as node 0 (redis+cluster://, a local cluster of three
// masters started for the group) against the plain node that is node 0
// otherwise: what routing by slot to a master among several costs.
void RunCluster(Context& ctx, int n, GroupResult* g) {
  absl::StatusOr<std::unique_ptr<testkit::Cluster>> cluster =
      testkit::Cluster::Start({.masters = 3, .replicas_per_master = 0});
  if (!cluster.ok()) {
    ctx.harness_errors.push_back(
        absl::StrCat(g->scenario, " N=", n, ": starting a cluster: ", cluster.status().ToString()));
    g->skipped = true;
    g->skip_reason = absl::StrCat("no cluster: ", cluster.status().ToString());
    return;
  }
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  std::vector<Endpoint> with_cluster = eps;
  with_cluster[0] = (*cluster)->endpoint();
  g->title = "node 0 a Redis Cluster of 3 masters (redis+cluster://) vs a plain node";
  CommonSettings(ctx, g);
  AddSetting(g, "cluster", "3 masters, no replica, started for the group");
  g->rows.push_back(FloorRow(ctx, eps));
  for (int callers : {1, ctx.settings.callers_many}) {
    AddPlainRow(ctx, eps, callers, g);
    AddOnRow(ctx, with_cluster, "library cluster node", "cluster", callers, "with node 0 a cluster",
             g);
  }
}

void RunMultiLock(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "all nodes healthy; MultiLock over 3 resources";
  CommonSettings(ctx, g);
  g->rows.push_back(FloorRow(ctx, eps));
  for (int callers : {1, ctx.settings.callers_many}) {
    AddPlainRow(ctx, eps, callers, g);
    LibrarySpec quorum;
    quorum.impl = "multilock quorum x3";
    quorum.family = kMultiLock;
    quorum.variant = "quorum";
    quorum.callers = callers;
    quorum.kind = LibraryKind::kMultiQuorum;
    g->rows.push_back(LibraryRow(ctx, eps, quorum));
    LibrarySpec all = quorum;
    all.impl = "multilock all-nodes x3";
    all.variant = "all-nodes";
    all.kind = LibraryKind::kMultiAllNodes;
    g->rows.push_back(LibraryRow(ctx, eps, all));
  }
}

// The library with and without a MetricsCollector as its Options::observer:
// blocking callers (1 and many) and async chains (many).
void RunObserver(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "all nodes healthy; Options::observer off vs a MetricsCollector";
  CommonSettings(ctx, g);
  g->rows.push_back(FloorRow(ctx, eps));
  struct Pair {
    LibrarySpec off;
    std::string on_variant;
  };
  std::vector<Pair> pairs;
  for (int callers : {1, ctx.settings.callers_many}) {
    LibrarySpec plain;
    plain.callers = callers;
    pairs.push_back({plain, "metrics"});
  }
  pairs.push_back({AsyncSpec(ctx.settings.callers_many), "async metrics"});
  for (const Pair& p : pairs) {
    g->rows.push_back(LibraryRow(ctx, eps, p.off));
    auto collector = std::make_shared<MetricsCollector>();
    LibrarySpec on = p.off;
    on.impl = absl::StrCat(p.off.impl, " + metrics");
    on.variant = p.on_variant;
    on.tweak = [collector](Options* o) { o->observer = collector; };
    g->rows.push_back(LibraryRow(ctx, eps, on));
    RowResult& row = g->rows.back();
    // The collector saw the row's work (warm-up included).
    const int64_t counted = collector->acquisitions(Outcome::Kind::kSucceeded);
    row.notes.push_back(absl::StrCat("the collector counted ", counted,
                                     " successful acquisitions (warm-up included)"));
    if (row.ran() && row.successes > 0 && counted == 0) {
      row.harness_error = "the collector attached to this row received no acquisition";
    }
    OnOffNote(g, p.off.variant, p.on_variant, p.off.callers, "with the collector");
  }
}

// Every node gets one asynchronous replica for the group (the bench's nodes
// are the masters); the library with Options::durability off and on, and on
// with one node's replica stopped (that node cannot confirm).
void RunDurability(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  testkit::ReplicaOptions ro;
  for (const Endpoint& ep : eps) ro.upstreams.push_back(ep.ToString());
  absl::StatusOr<std::unique_ptr<testkit::Replicas>> replicas = testkit::Replicas::Start(ro);
  if (!replicas.ok()) {
    ctx.harness_errors.push_back(
        absl::StrCat(g->scenario, " N=", n, ": starting replicas: ", replicas.status().ToString()));
    g->skipped = true;
    g->skip_reason = absl::StrCat("no replicas: ", replicas.status().ToString());
    return;
  }
  const absl::Duration wait = std::min(ctx.settings.node_timeout / 2, absl::Milliseconds(20));
  auto durable = [wait](Options* o) {
    o->durability.replicas = 1;
    o->durability.timeout = wait;
  };
  g->title = "every node a master with one replica; Options::durability off vs on (WAIT 1)";
  CommonSettings(ctx, g);
  AddSetting(g, "replicas", "1 per node");
  AddSetting(g, "durability.timeout", Dur(wait));
  g->rows.push_back(FloorRow(ctx, eps));
  for (int callers : {1, ctx.settings.callers_many}) {
    AddPlainRow(ctx, eps, callers, g);
    LibrarySpec on;
    on.impl = "library durability";
    on.variant = "durability";
    on.callers = callers;
    on.tweak = durable;
    g->rows.push_back(LibraryRow(ctx, eps, on));
    OnOffNote(g, "", "durability", callers, "with the vote");
  }
  const Fault stopped = StopFault(&(*replicas)->fleet(), (*replicas)->index(n - 1, 0));
  LibrarySpec lame;
  lame.impl = "library durability, one replica stopped";
  lame.variant = "durability, replica stopped";
  lame.tweak = durable;
  lame.fault = &stopped;
  g->rows.push_back(LibraryRow(ctx, eps, lame));
  g->notes.push_back(absl::StrCat(
      "the stopped replica's master answers every WAIT after ", Dur(wait),
      " and votes no; the quorum is decided by the other nodes (the stopped replica is ",
      eps[static_cast<size_t>(n - 1)].ToString(), "'s)"));
}

}  // namespace redlock::bench
