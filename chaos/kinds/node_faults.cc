// The node family: kill -9 and restart (at once, after a while, with the AOF
// tail lost), SIGSTOP. The node supervisor (chaos/faults/supervisor.h) does
// the work and records each fault.

#include "absl/strings/str_cat.h"
#include "chaos/kinds/kind_base.h"
#include "chaos/run/run.h"

namespace redlock::chaos {
namespace {

using faults::Add;
using faults::ForEach;
using faults::Minority;

// Node faults act on independent masters; on replicated nodes the
// replication family (failover, split_brain) is the way a node loses its
// master.
std::string IndependentMasters(const RunShape& s) {
  return s.replicas > 0 ? "acts on independent masters (use failover on replicated nodes)" : "";
}

// Runs `fn` on every target node that is up: faults overlap, and a node
// already killed by another one has nothing left to kill, pause or restart
// (that fault's heal starts it again).
template <typename Fn>
absl::Status EachNode(Run& run, const FaultInstance& f, Fn fn) {
  return ForEach(f.nodes, [&](int n) {
    if (run.nodes().running(n)) return fn(n);
    run.Note(absl::StrCat(f.kind->name(), " of n", n, " skipped: it is down"));
    return absl::OkStatus();
  });
}

KindInfo NodeKind(KindInfo info) {
  return faults::InFamily("node", faults::kOnNodes, std::move(info));
}

}  // namespace

void RegisterNodeFaults(FaultKindList& out) {
  Add(out, {.info = NodeKind(
                {.name = "restart",
                 .summary = "kill -9 and start again at once: without persistence the node forgets "
                            "every key (and fencing counter); with AOF always it keeps them",
                 .explore_weight = 3,
                 .color = "#8c564b"}),
            .unsupported = IndependentMasters,
            .may_violate = [](const RunShape& s, const FaultInstance&) -> PropertySet {
              return s.aof ? 0 : faults::ForgetsLock(s);
            },
            .inject =
                [](Run& run, FaultInstance& f) {
                  return EachNode(run, f, [&](int n) { return run.nodes().RestartNow(n); });
                }});

  Add(out, {.info = NodeKind(
                {.name = "kill",
                 .summary = "kill -9, started again when healed: a node down for a while (empty "
                            "after the restart without persistence)",
                 .lasting = true,
                 .explore_weight = 3,
                 .explore_duration = "200ms..2ttl",
                 .color = "#8c564b",
                 .heal_on_time = true}),
            .unsupported = IndependentMasters,
            .may_violate = [](const RunShape& s, const FaultInstance& f) -> PropertySet {
              if (s.aof) return 0;
              // antirez's delayed restart: down longer than a lease (plus the
              // drift allowance), the node cannot help a second holder while the
              // first lease lasts. Its fencing counters are gone all the same (a
              // leader's term is one, whatever the client's fencing says).
              if (f.duration >= absl::Milliseconds(s.scale.ttl_ms) + s.scale.drift()) {
                return (s.fencing ? Prop(kS4) | Prop(kS9) : 0) | (s.leaders ? Prop(kS7) : 0);
              }
              return faults::ForgetsLock(s);
            },
            .tolerated = Minority,
            .inject =
                [](Run& run, FaultInstance& f) {
                  return EachNode(run, f, [&](int n) { return run.nodes().Kill(n); });
                },
            .heal =
                [](Run& run, FaultInstance& f) {
                  return ForEach(f.nodes, [&](int n) {
                    return run.nodes().running(n) ? absl::OkStatus() : run.nodes().StartNode(n);
                  });
                }});

  Add(out,
      {.info = NodeKind(
           {.name = "amnesia",
            .summary = "power loss: kill -9, the tail of the AOF cut (from the last write of "
                       "the triggering marker's resource, or the last `units` commands), start",
            .params = {faults::IntParam(
                "units", "3", "1..20", "1",
                "commands dropped from the end when no marker names a key")},
            .explore_weight = 1,
            .color = "#a0522d"}),
       .unsupported = [](const RunShape& s) -> std::string {
         std::string why = IndependentMasters(s);
         if (why.empty() && !s.aof) why = "needs AOF (aof: true): without it every restart forgets";
         return why;
       },
       .may_violate = [](const RunShape& s,
                         const FaultInstance&) { return faults::ForgetsLock(s); },
       .inject =
           [](Run& run, FaultInstance& f) {
             return EachNode(run, f, [&](int n) {
               AmnesiaSpec spec;
               if (!f.marker_resource.empty()) {
                 spec.mode = AmnesiaSpec::Mode::kSinceLastWriteOfKey;
                 spec.key = f.marker_resource;
               } else {
                 spec.mode = AmnesiaSpec::Mode::kLastUnits;
                 spec.drop_units = static_cast<int>(f.integer("units"));
               }
               absl::Status s = run.nodes().RestartAmnesia(n, spec);
               if (absl::IsNotFound(s)) {  // nothing to forget: it restarted anyway
                 run.Note(absl::StrCat("amnesia of n", n, ": ", s.message()));
                 return absl::OkStatus();
               }
               return s;
             });
           }});

  Add(out, {.info = NodeKind(
                {.name = "pause",
                 .summary = "SIGSTOP of the node process, SIGCONT when healed: requests wait in "
                            "its sockets and run late; its keys expire meanwhile",
                 .lasting = true,
                 .nodes_default = "random 1..2",
                 .explore_weight = 3,
                 .explore_duration = "100ms..1.6ttl",
                 .color = "#7f7f7f"}),
            .may_violate = [](const RunShape& s, const FaultInstance& f) -> PropertySet {
              // A master stopped longer than its Sentinels' down-after is failed
              // over: what its replica had not received is lost, as in `failover`
              // (and the old master serves again for a moment when it resumes,
              // until it is demoted). The durability vote covers both.
              if (s.replicas > 0 && s.sentinels > 0 && !s.durability) return faults::ForgetsLock(s);
              return 0;
            },
            .tolerated = Minority,
            .inject =
                [](Run& run, FaultInstance& f) {
                  return EachNode(run, f, [&](int n) {
                    return run.nodes().paused(n) ? absl::OkStatus() : run.nodes().Pause(n);
                  });
                },
            .heal =
                [](Run& run, FaultInstance& f) {
                  return ForEach(f.nodes, [&](int n) {
                    return run.nodes().paused(n) ? run.nodes().Resume(n) : absl::OkStatus();
                  });
                }});
}

}  // namespace redlock::chaos
