// The clock family: a node's wall clock jumping or strobing, through the
// clock shim every node runs under (node_clock_shim: true). Redis expires
// keys by the wall clock, so a forward jump beyond the drift allowance
// expires a held key early (Kleppmann's counter-example), a backward jump
// keeps keys longer.

#include "absl/strings/str_cat.h"
#include "chaos/kinds/kind_base.h"
#include "chaos/run/run.h"

namespace redlock::chaos {
namespace {

using faults::Add;
using faults::ForEach;
using faults::InFamily;
using faults::kOnNodes;
using faults::SpanParam;

std::string NeedsShim(const RunShape& s) {
  return s.node_clock_shim ? "" : "needs the nodes under the clock shim (node_clock_shim: true)";
}

// A node clock moving forward by more than the drift allowance can expire a
// held key early: a second holder (mutual exclusion), and harm unless the
// store is fenced. Fencing counters have no ttl: they survive any jump.
PropertySet Forward(const RunShape& s, absl::Duration by) {
  if (by <= s.scale.drift()) return 0;
  return Prop(kS1) | (s.permits ? Prop(kS6) : 0) | (s.fencing ? 0 : Prop(kS3));
}

}  // namespace

void RegisterClockFaults(FaultKindList& out) {
  Add(out, {.info = InFamily(
                "clock", kOnNodes,
                {.name = "clock_jump",
                 .summary = "the node's wall clock jumps by `by` (and stays there): "
                            "forward beyond the drift allowance expires held keys "
                            "early; backward keeps them longer",
                 .params = {SpanParam("by", "3ttl", "[-1ttl, -200ms, 0.5drift, 0.9drift, 2drift]",
                                      "", "how far (negative: backward)")},
                 .explore_weight = 3,
                 .color = "#17becf"}),
            .unsupported = NeedsShim,
            .may_violate = [](const RunShape& s, const FaultInstance& f) -> PropertySet {
              absl::Duration by = f.span("by");
              // Backward: keys live longer than their ttl (S5's "nothing outlives
              // a ttl" can fail); never two holders.
              return by < absl::ZeroDuration() ? Prop(kS5) : Forward(s, by);
            },
            .inject =
                [](Run& run, FaultInstance& f) {
                  return ForEach(f.nodes,
                                 [&](int n) { return run.nodes().ClockJump(n, f.span("by")); });
                }});

  Add(out,
      {.info = InFamily(
           "clock", kOnNodes,
           {.name = "clock_strobe",
            .summary = "the node's wall clock flips between its offset and offset + "
                       "`amplitude` every `period` until healed",
            .lasting = true,
            .params = {SpanParam("amplitude", "0.5drift", "[0.3drift, 0.8drift, 2drift]", "",
                                 "how far the clock flips (forward)"),
                       SpanParam("period", "7ms", "3ms..20ms", "1ms", "how long each side lasts")},
            .explore_weight = 1,
            .explore_duration = "300ms..1.5ttl",
            .color = "#17becf"}),
       .unsupported = NeedsShim,
       .may_violate = [](const RunShape& s,
                         const FaultInstance& f) { return Forward(s, f.span("amplitude")); },
       .inject =
           [](Run& run, FaultInstance& f) {
             return ForEach(f.nodes, [&](int n) {
               absl::Duration cur = run.nodes().clock(n)->state().realtime;
               return run.nodes().ClockStrobe(n, cur, cur + f.span("amplitude"), f.span("period"));
             });
           },
       .heal =
           [](Run& run, FaultInstance& f) {
             return ForEach(f.nodes, [&](int n) { return run.nodes().ClockSteady(n); });
           }});
}

}  // namespace redlock::chaos
