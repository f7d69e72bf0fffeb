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

KindInfo ServerKind(KindInfo info) {
  return faults::InFamily("server", faults::kOnNodes, std::move(info));
}

// A kind that sends `args` to each target node once, recorded with `label`.
faults::KindSpec CommandKind(KindInfo info, std::vector<std::string> args, std::string label) {
  const std::string name = info.name;
  return {
      .info = ServerKind(std::move(info)),
      .inject = [args = std::move(args), name, label = std::move(label)](
                    Run& run, FaultInstance& f) { return OnEachNode(run, f, args, name, label); }};
}

}  // namespace

void RegisterServerFaults(FaultKindList& out) {
  using faults::Add;
  Add(out,
      CommandKind({.name = "script_flush",
                   .summary = "SCRIPT FLUSH on the node: its script cache is empty, as after a "
                              "restart or a failover to a replica that never loaded the "
                              "scripts (the next EVALSHA gets NOSCRIPT)",
                   .nodes_default = "random 1..2",
                   .explore_weight = 2,
                   .color = "#ff9896"},
                  {"SCRIPT", "FLUSH"}, "SCRIPT FLUSH: the node's scripts are gone"));

  Add(out, CommandKind({.name = "client_kill",
                        .summary = "CLIENT KILL TYPE normal on the node: the server closes every "
                                   "client connection (requests in flight may or may not have run)",
                        .nodes_default = "random 1..2",
                        .explore_weight = 2,
                        .color = "#e7ba52"},
                       {"CLIENT", "KILL", "TYPE", "normal"},
                       "CLIENT KILL TYPE normal: the server closed every client connection"));

  // SIM ONLY: the lab runs no Redis Cluster, so only the deterministic
  // simulator (sim/) injects it; described here so that both share one list.
  Add(out,
      {.info = ServerKind(
           {.name = "slot_migration",
            .summary = "(sim only) the slot of the lock keys migrates between two masters of "
                       "a Redis Cluster node (CLUSTER SETSLOT MIGRATING/IMPORTING, MIGRATE "
                       "`keys` keys every `step`, then SETSLOT NODE when healed): ASK, "
                       "TRYAGAIN for multi-key commands split across the two, then MOVED",
            .lasting = true,
            .params = {faults::IntParam("keys", "1", "1..3", "1", "keys migrated per step"),
                       faults::SpanParam("step", "20ms", "10ms..60ms", "1ms",
                                         "pause between two MIGRATE")},
            .explore_weight = 2,
            .explore_duration = "300ms..2s",
            .color = "#9edae5"}),
       .unsupported = [](const RunShape&) -> std::string {
         return "sim only: the lab runs no Redis Cluster (redlock-sim injects it)";
       },
       // During the migration a multi-key call of the slot may be refused
       // (TRYAGAIN) on that node: a minority of such nodes must be ridden
       // out, as any node that votes no.
       .tolerated = faults::Minority,
       .inject =
           [](Run&, FaultInstance&) {
             return absl::FailedPreconditionError("slot_migration is injected by redlock-sim only");
           }});
}

}  // namespace redlock::chaos
