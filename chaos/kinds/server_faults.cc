// The server family: things done to a node through its own commands, as an
// operator (or a failover) would: its script cache flushed, its client
// connections killed.

#include "absl/strings/str_cat.h"
#include "chaos/kinds/kind_base.h"
#include "chaos/run/run.h"

namespace redlock::chaos {
namespace {

absl::Status OnEachNode(Run& run, const FaultInstance& f, const std::vector<std::string>& args,
                        absl::string_view name, absl::string_view label) {
  std::vector<int> done;
  for (int n : f.nodes) {
    // A node another fault killed or stopped has nothing to flush or kill
    // (and a stopped one would only make the command wait).
    // (On replicated nodes the command goes to the current master.)
    if (run.replication() == nullptr && (!run.nodes().running(n) || run.nodes().paused(n))) {
      run.Note(absl::StrCat(name, " of n", n, " skipped: the node is down or stopped"));
      continue;
    }
    absl::StatusOr<testkit::RedisValue> r = run.NodeCommand(n, args);
    if (!r.ok() || r->is_error()) {
      // Unreachable (a fault on its way) or refused: noted, not a harness
      // error; the fault simply did not happen there.
      run.Note(
          absl::StrCat(args[0], " on n", n, " failed: ", r.ok() ? r->str : r.status().ToString()));
      continue;
    }
    done.push_back(n);
  }
  if (!done.empty()) run.nemesis().Instant(name, {.nodes = done}, label);
  return absl::OkStatus();
}

}  // namespace

void RegisterServerFaults(FaultKindList& out) {
  using faults::Add;
  Add(out, {.info = {.name = "script_flush",
                     .family = "server",
                     .summary = "SCRIPT FLUSH on the node: its script cache is empty, as after a "
                                "restart or a failover to a replica that never loaded the scripts "
                                "(the next EVALSHA gets NOSCRIPT)",
                     .takes_nodes = true,
                     .nodes_default = "random 1..2",
                     .explore_weight = 2,
                     .color = "#ff9896"},
            .inject = [](Run& run, FaultInstance& f) {
              return OnEachNode(run, f, {"SCRIPT", "FLUSH"}, "script_flush",
                                "SCRIPT FLUSH: the node's scripts are gone");
            }});

  Add(out,
      {.info = {.name = "client_kill",
                .family = "server",
                .summary = "CLIENT KILL TYPE normal on the node: the server closes every client "
                           "connection (requests in flight may or may not have run)",
                .takes_nodes = true,
                .nodes_default = "random 1..2",
                .explore_weight = 2,
                .color = "#e7ba52"},
       .inject = [](Run& run, FaultInstance& f) {
         return OnEachNode(run, f, {"CLIENT", "KILL", "TYPE", "normal"}, "client_kill",
                           "CLIENT KILL TYPE normal: the server closed every client connection");
       }});

  // SIM ONLY: the lab runs no Redis Cluster, so only the deterministic
  // simulator (sim/) injects it; described here so that both share one list.
  Add(out,
      {.info = {.name = "slot_migration",
                .family = "server",
                .summary = "(sim only) the slot of the lock keys migrates between two masters of "
                           "a Redis Cluster node (CLUSTER SETSLOT MIGRATING/IMPORTING, MIGRATE "
                           "`keys` keys every `step`, then SETSLOT NODE when healed): ASK, "
                           "TRYAGAIN for multi-key commands split across the two, then MOVED",
                .lasting = true,
                .takes_nodes = true,
                .nodes_default = "any",
                .params = {{.name = "keys",
                            .type = ParamType::kInt,
                            .default_value = "1",
                            .explore = "1..3",
                            .min = "1",
                            .help = "keys migrated per step"},
                           {.name = "step",
                            .type = ParamType::kSpan,
                            .default_value = "20ms",
                            .explore = "10ms..60ms",
                            .min = "1ms",
                            .help = "pause between two MIGRATE"}},
                .explore_weight = 2,
                .explore_duration = "300ms..2s",
                .color = "#9edae5"},
       .unsupported = [](const RunShape&) -> std::string {
         return "sim only: the lab runs no Redis Cluster (redlock-sim injects it)";
       },
       // During the migration a multi-key call of the slot may be refused
       // (TRYAGAIN) on that node: a minority of such nodes must be ridden
       // out, as any node that votes no.
       .tolerated =
           [](const RunShape& s, const FaultInstance& f) {
             return !s.partial_views && static_cast<int>(f.nodes.size()) <= (s.nodes - 1) / 2;
           },
       .inject =
           [](Run&, FaultInstance&) {
             return absl::FailedPreconditionError("slot_migration is injected by redlock-sim only");
           }});
}

}  // namespace redlock::chaos
