// The replication family: what makes a node that is a master with
// asynchronous replicas lose a lock (chaos/faults/replication.h does the
// work): replication held back, the master killed and its replica promoted,
// a split brain, a Sentinel left with a stale view.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "chaos/kinds/kind_base.h"
#include "chaos/run/run.h"

namespace redlock::chaos {
namespace {

using faults::Add;
using faults::ForEach;

std::vector<int> AllClients(Run& run) {
  std::vector<int> all;
  for (int k = 0; k < run.num_clients(); ++k) all.push_back(k);
  return all;
}

// A failover loses whatever the replica had not received: a lock (and a
// fencing counter) the master granted, unless the durability vote made every
// counted grant wait for the replica.
PropertySet LosesWrites(const RunShape& s, const FaultInstance&) {
  return s.durability ? 0 : faults::ForgetsLock(s);
}

std::string NeedsSentinelOrLinks(const RunShape& s) {
  std::string why = faults::NeedsReplicas(s);
  if (!why.empty()) return why;
  if (s.topology != Topology::kPerClientProxies && s.topology != Topology::kSentinelDiscovery) {
    return "needs per-client-proxies or sentinel-discovery (clients must follow the failover)";
  }
  return "";
}

// The masters of `nodes` die together, then their replicas are promoted:
// killed one after the other, each waiting for the Sentinels (2-4 s), the
// last master would die long after the first, and a lease granted before
// the first kill could run out before a majority forgot it.
absl::Status FailOver(Run& run, const std::vector<int>& nodes, bool by_sentinel) {
  ReplicatedNodes& rep = *run.replication();
  std::vector<int> todo;
  for (int n : nodes) {
    if (rep.failed_over(n)) {
      run.Note(absl::StrCat("failover of n", n, " skipped: it failed over already"));
      continue;
    }
    // Whatever the replication link held is lost with the master.
    rep.CutLink(n);
    absl::Status s = run.nodes().Kill(n);
    if (!s.ok()) return s;
    todo.push_back(n);
  }
  for (int n : todo) {
    absl::StatusOr<std::string> now =
        by_sentinel ? rep.AwaitSentinelFailover(n, absl::Seconds(20)) : rep.Promote(n);
    if (!now.ok()) return now.status();
  }
  absl::Status s = ForEach(todo, [&](int n) { return run.FollowMaster(n, AllClients(run)); });
  if (!s.ok()) return s;
  return ForEach(todo, [&](int n) { return rep.RejoinAsReplica(n); });
}

KindInfo ReplicationKind(KindInfo info, int acts = faults::kOnNodes) {
  return faults::InFamily("replication", acts, std::move(info));
}

}  // namespace

void RegisterReplicationFaults(FaultKindList& out) {
  Add(out, {.info = ReplicationKind(
                {.name = "replication_stall",
                 .summary = "the master's writes held on the replication link (the replica lags; "
                            "with the durability vote the node cannot confirm grants), delivered "
                            "when healed",
                 .lasting = true,
                 .explore_weight = 3,
                 .explore_duration = "300ms..3s",
                 .color = "#9467bd"}),
            .unsupported = faults::NeedsReplicas,
            .tolerated =
                [](const RunShape& s, const FaultInstance& f) {
                  // Without the vote a lagging replica costs nothing; with it, the
                  // node votes no: a minority of such nodes must be ridden out.
                  return !s.durability || faults::Minority(s, f);
                },
            .inject =
                [](Run& run, FaultInstance& f) {
                  return ForEach(f.nodes, [&](int n) { return run.replication()->Stall(n); });
                },
            .heal =
                [](Run& run, FaultInstance& f) {
                  for (int n : f.nodes) run.replication()->Resume(n);
                  return absl::OkStatus();
                }});

  Add(out, {.info = ReplicationKind(
                {.name = "failover",
                 .summary = "the master killed with its replication link cut, its replica promoted "
                            "(by the Sentinels when the run has them, else by the harness), the "
                            "clients follow, the old master rejoins empty as the new replica",
                 .params = {faults::ChoiceParam(
                     "by", "auto", "", {"auto", "sentinel", "harness"},
                     "who promotes the replica (auto: the Sentinels if any)")},
                 .explore_weight = 2,
                 .color = "#e377c2"}),
            .unsupported = NeedsSentinelOrLinks,
            .may_violate = LosesWrites,
            .inject = [](Run& run, FaultInstance& f) {
              const std::string& by = f.choice("by");
              bool sentinel = by == "sentinel" || (by == "auto" && run.shape().sentinels > 0);
              if (sentinel && run.shape().sentinels == 0) {
                return absl::FailedPreconditionError("failover by: sentinel, but no Sentinel runs");
              }
              return FailOver(run, f.nodes, sentinel);
            }});

  Add(out, {.info = ReplicationKind(
                {.name = "split_brain",
                 .summary = "the master cut from its replica, the Sentinels and every client but "
                            "the target clients, which it still serves; the Sentinels promote the "
                            "replica and the other clients follow: two masters for one node",
                 .lasting = true,
                 .explore_weight = 1,
                 .explore_duration = "3s..6s",
                 .color = "#bcbd22"},
                faults::kOnNodes | faults::kOnClients),
            .unsupported = [](const RunShape& s) -> std::string {
              if (s.sentinels == 0) return "needs Sentinels (sentinels: 1 or more)";
              return s.topology == Topology::kPerClientProxies
                         ? ""
                         : "needs per-client-proxies (the cut clients' links go down)";
            },
            .may_violate = LosesWrites,
            .inject =
                [](Run& run, FaultInstance& f) {
                  ReplicatedNodes& rep = *run.replication();
                  for (int n : f.nodes) {
                    if (rep.failed_over(n)) continue;
                    std::vector<int> cut;
                    std::vector<std::string> names;
                    for (int k = 0; k < run.num_clients(); ++k) {
                      if (std::find(f.clients.begin(), f.clients.end(), k) != f.clients.end())
                        continue;
                      cut.push_back(k);
                      names.push_back(Run::ClientName(k));
                    }
                    rep.Isolate(n, names);
                    for (int k : cut) run.link(k, n)->Down();
                    absl::StatusOr<std::string> now =
                        rep.AwaitSentinelFailover(n, absl::Seconds(20));
                    if (!now.ok()) return now.status();
                    absl::Status s = run.FollowMaster(n, cut);
                    if (!s.ok()) return s;
                  }
                  return absl::OkStatus();
                },
            .heal =
                [](Run& run, FaultInstance& f) {
                  return ForEach(f.nodes, [&](int n) { return run.replication()->Rejoin(n); });
                }});

  Add(out,
      {.info = ReplicationKind(
           {.name = "replica_clock_offset",
            .summary = "the replica's wall clock set `by` away from its master's: Redis "
                       "replicates expiries as absolute times, so after a failover the "
                       "promoted replica expires every key by its own clock, `by` early "
                       "(ahead) or late (behind)",
            .lasting = true,
            .params = {faults::SpanParam("by", "1ttl", "[-1ttl, 0.5drift, 1ttl]", "",
                                         "the replica's offset from its master (positive: ahead)")},
            .explore_weight = 1,
            .explore_duration = "2s..6s",
            .color = "#17becf"}),
       .unsupported = [](const RunShape& s) -> std::string {
         std::string why = faults::NeedsReplicas(s);
         if (why.empty() && !s.node_clock_shim) {
           why = "needs the nodes (and so the replicas) under the clock shim (node_clock_shim)";
         }
         return why;
       },
       .may_violate = [](const RunShape& s, const FaultInstance& f) -> PropertySet {
         // The documented assumption: a node's replicas keep its clock within
         // the drift allowance. A replica ahead by more may, once promoted,
         // let a key go early: a second holder (and harm unless fenced).
         if (f.span("by") <= s.scale.drift()) return 0;
         return Prop(kS1) | (s.fencing ? 0 : Prop(kS3));
       },
       .inject =
           [](Run& run, FaultInstance& f) {
             for (int n : f.nodes) {
               ClockControl* c = run.replication()->replica_clock(n);
               if (c == nullptr) return absl::FailedPreconditionError("no replica clock shim");
               absl::Status s = c->SetOffset(f.span("by"));
               if (!s.ok()) return s;
             }
             f.keys.push_back(absl::StrCat(f.SiteName(), ":replica-clock"));
             run.nemesis().Start("replica_clock_offset", {.nodes = f.nodes},
                                 absl::StrCat("replica clock ", absl::FormatDuration(f.span("by")),
                                              " from its master's"),
                                 f.keys.back());
             return absl::OkStatus();
           },
       .heal =
           [](Run& run, FaultInstance& f) {
             for (int n : f.nodes) {
               ClockControl* c = run.replication()->replica_clock(n);
               if (c == nullptr) continue;
               absl::Status s = c->SetOffset(absl::ZeroDuration());
               if (!s.ok()) return s;
             }
             run.nemesis().Stop("replica_clock_offset", f.keys.back(), "clock back");
             return absl::OkStatus();
           }});

  Add(out,
      {.info = ReplicationKind(
           {.name = "stale_sentinel",
            .summary = "one Sentinel cut off from the nodes and the other Sentinels (nft rules "
                       "on its own uid) but still answering clients: after a failover it "
                       "keeps naming the old master",
            .lasting = true,
            .params = {faults::IntParam("which", "0", "0..2", "0",
                                        "the Sentinel (0: the first in the clients' list)")},
            .explore_weight = 2,
            .explore_duration = "4s..8s",
            .color = "#c49c94"},
           0),
       .unsupported = [](const RunShape& s) -> std::string {
         if (s.sentinels < 2) return "needs 2 or more Sentinels";
         return s.topology == Topology::kSentinelDiscovery && s.netns
                    ? ""
                    : "needs sentinel-discovery inside a namespace (netns: true, root)";
       },
       .tolerated = [](const RunShape&, const FaultInstance&) { return true; },
       .inject =
           [](Run& run, FaultInstance& f) {
             const int s = static_cast<int>(f.integer("which")) % run.shape().sentinels;
             f.params["which"].integer = s;
             return run.replication()->CutSentinel(s);
           },
       .heal =
           [](Run& run, FaultInstance& f) {
             return run.replication()->RestoreSentinel(static_cast<int>(f.integer("which")));
           }});
}

}  // namespace redlock::chaos
