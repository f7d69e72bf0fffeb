#include "bench/scenarios.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/rows.h"

namespace redlock::bench {

const std::vector<Scenario>& AllScenarios() {
  // The catalog, in the order of a default run. The fields are named, so an
  // entry reads on its own: smoke, quick and full N values, the least N,
  // whether it needs the bench's own fleet, whether it runs only when named.
  static const std::vector<Scenario>* const kScenarios = new std::vector<Scenario>{
      {.name = "healthy",
       .description =
           "every node healthy: library, sequential and wait-for-all, 1 and many callers",
       .run = RunHealthy,
       .smoke_ns = {1, 3},
       .quick_ns = {1, 3, 5},
       .full_ns = {1, 3, 5, 7}},
      {.name = "sweep",
       .description =
           "callers sweep (--sweep_callers): library blocking vs async vs the pipelined limit",
       .run = RunSweep,
       .smoke_ns = {3},
       .quick_ns = {1, 5},
       .full_ns = {1, 5}},
      {.name = "stopped",
       .description = "the last node SIGSTOPped (Fleet::Stop) during each row, continued after",
       .run = RunStopped,
       .smoke_ns = {3},
       .quick_ns = {3, 5},
       .full_ns = {3, 5, 7},
       .min_n = 3,
       .needs_fleet = true},
      {.name = "slow1",
       .description = "one node behind the fault proxy with --slow_latency added to its replies",
       .run = RunSlow1,
       .smoke_ns = {3},
       .quick_ns = {3, 5},
       .full_ns = {3, 5, 7},
       .min_n = 2,
       .needs_fleet = true},
      {.name = "slow2",
       .description = "two nodes behind the fault proxy with --slow_latency added to their replies",
       .run = RunSlow2,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {3, 5, 7},
       .min_n = 3,
       .needs_fleet = true},
      {.name = "slow-near-timeout",
       .description = "one node whose added latency straddles node_timeout (--slow_near_latency "
                      "+ --slow_near_jitter)",
       .run = RunSlowNear,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {3, 5, 7},
       .min_n = 2,
       .needs_fleet = true},
      {.name = "hot",
       .description =
           "one contended resource: hand-off latency, release notifications on vs off (polling)",
       .run = RunHot,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {3, 5}},
      {.name = "fencing",
       .description =
           "Options::fencing off, on, and on with one lost counter tolerated; 1 and many callers",
       .run = RunFencing,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {1, 3, 5, 7}},
      {.name = "scriptless",
       .description = "nodes that forbid scripting (an ACL user without @scripting): Lua vs "
                      "WATCH/MULTI/EXEC on every node, and on every other node; 1 and many callers",
       .run = RunScriptless,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {1, 3, 5}},
      {.name = "cluster",
       .description = "node 0 a Redis Cluster of 3 masters (redis+cluster://, started for the "
                      "group) vs a plain node: 1 and many callers",
       .run = RunCluster,
       .smoke_ns = {1},
       .quick_ns = {1, 3},
       .full_ns = {1, 3, 5}},
      {.name = "multilock",
       .description = "MultiLock over 3 resources, quorum and all-nodes modes",
       .run = RunMultiLock,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {3, 5, 7}},
      {.name = "tls",
       .description = "TLS nodes (rediss://) vs plain ones: 1 and many callers, and connecting",
       .run = RunTls,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {5},
       .needs_fleet = true},
      {.name = "observer",
       .description =
           "Options::observer off vs a MetricsCollector attached: 1 and many callers, async chains",
       .run = RunObserver,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {1, 5}},
      {.name = "family",
       .description =
           "the lock family beside the mutex: 64 readers on one resource, the semaphore at K = 1, "
           "4, 16 against the hot mutex, reader-writer hand-offs, election takeover after SIGKILL "
           "and SIGSTOP of a `redlock elect` leader (only when named)",
       .run = RunFamily,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {5},
       .explicit_only = true},
      {.name = "fair",
       .description =
           "the fair lock beside the mutex: one caller's acquire+release; one hot resource "
           "with --fair_processes processes x --fair_threads waiting threads (8x8): "
           "throughput, hand-off, attempts per call, the servers' CPU per grant, the spread "
           "of waiting times (only when named)",
       .run = RunFair,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {5},
       .explicit_only = true},
      {.name = "semaphore-availability",
       .description =
           "semaphore designs: the nodes down each survives (permits with a majority each vs "
           "counting holders on more than N*K/(K+1) nodes), K = 1, 4, 16 (only when named)",
       .run = RunSemaphoreAvailability,
       .smoke_ns = {3},
       .quick_ns = {3, 5, 7},
       .full_ns = {3, 5, 7},
       .min_n = 3,
       .needs_fleet = true,
       .explicit_only = true},
      {.name = "commands",
       .description = "release and extend by the server's DELIFEQ / DELEX IFEQ / SET IFEQ vs by "
                      "scripts (Options::server_commands), on the same servers (--server "
                      "valkey-9.1 or redis-8.0 has them; only when named)",
       .run = RunCommands,
       .smoke_ns = {1},
       .quick_ns = {1, 5},
       .full_ns = {1, 5},
       .explicit_only = true},
      {.name = "durability",
       .description = "every node a master with one replica (started for the group): "
                      "Options::durability off vs on, and on with one replica stopped",
       .run = RunDurability,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {3, 5, 7},
       .min_n = 3,
       .needs_fleet = true},
      {.name = "spread",
       .description = "nodes at different distances (a delaying proxy per node; built-in "
                      "profiles or --latency-profile): library, sequential, wait-for-all, the "
                      "nearest node alone, and the model (the q-th nearest round trip, by PING); "
                      "only when named",
       .run = RunSpread,
       .smoke_ns = {5},
       .quick_ns = {5},
       .full_ns = {5},
       .needs_fleet = true,
       .explicit_only = true,
       .ns = SpreadNs,
       .variants = SpreadVariants},
      {.name = "processes",
       .description = "P client processes (--processes), each with its own Client, against one "
                      "fleet: aggregate cycles/s and the servers' CPU per cycle; only when named "
                      "(or with --processes)",
       .run = RunProcesses,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {5},
       .explicit_only = true},
      {.name = "backends",
       .description = "Redis (this library, 1 and N nodes) vs etcd vs ZooKeeper vs PostgreSQL: "
                      "latency, throughput, hand-off, one member stopped (servers started here; "
                      "only when named)",
       .run = RunBackends,
       .smoke_ns = {3},
       .quick_ns = {5},
       .full_ns = {5},
       .needs_fleet = true,
       .explicit_only = true},
  };
  return *kScenarios;
}

const Scenario* FindScenario(const std::string& name) {
  for (const Scenario& s : AllScenarios()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::vector<int> NsFor(const Scenario& scenario, const BenchSettings& settings) {
  if (scenario.ns != nullptr) return scenario.ns(settings);
  if (!settings.ns.empty()) return settings.ns;
  switch (settings.mode) {
    case Mode::kSmoke:
      return scenario.smoke_ns;
    case Mode::kQuick:
      return scenario.quick_ns;
    case Mode::kFull:
      return scenario.full_ns;
  }
  return scenario.quick_ns;
}

std::vector<std::string> VariantsFor(const Scenario& scenario, const BenchSettings& settings) {
  if (scenario.variants == nullptr) return {""};
  return scenario.variants(settings);
}

GroupResult RunGroup(const Scenario& scenario, int n, const std::string& variant, Context& ctx) {
  GroupResult g;
  g.scenario = scenario.name;
  g.n = n;
  g.variant = variant;
  if (n < scenario.min_n) {
    g.skipped = true;
    g.skip_reason = absl::StrCat("needs N >= ", scenario.min_n);
  } else if (n > ctx.nodes.size()) {
    g.skipped = true;
    g.skip_reason = absl::StrCat("needs ", n, " nodes, ", ctx.nodes.size(), " available");
  } else if (scenario.needs_fleet && ctx.nodes.fleet() == nullptr) {
    g.skipped = true;
    g.skip_reason =
        "needs nodes started by redlock-bench (it stops nodes or puts a proxy in front of "
        "them), and --nodes was given";
  }
  if (g.skipped) {
    g.title = scenario.description;
    return g;
  }
  scenario.run(ctx, n, &g);
  // The floor again at the end of the group, merged with the first: the
  // ratios then compare with the floor over the whole group's time span,
  // not only its first second, on a machine whose speed drifts.
  if (!g.skipped && !g.rows.empty() && g.rows[0].family == kFloor && g.rows[0].ran()) {
    MergeRepeat(&g.rows[0], FloorRow(ctx, ctx.nodes.First(1)));
  }
  return g;
}

}  // namespace redlock::bench
