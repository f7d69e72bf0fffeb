// The shared pieces of a random fault schedule (fault_draw.h).

#include "chaos/faults/fault_draw.h"

#include <algorithm>

namespace redlock::chaos {

int TotalExploreWeight(const std::vector<const FaultKind*>& kinds) {
  int total = 0;
  for (const FaultKind* k : kinds) total += k->info().explore_weight;
  return total;
}

const FaultKind* PickByWeight(const std::vector<const FaultKind*>& kinds, int pick) {
  for (const FaultKind* k : kinds) {
    if (pick < k->info().explore_weight) return k;
    pick -= k->info().explore_weight;
  }
  return kinds.back();
}

FaultTemplate ExploreTemplate(const KindInfo& info) {
  FaultTemplate tmpl;
  tmpl.kind = info.name;
  for (const ParamSpec& p : info.params) {
    if (!p.explore.empty()) tmpl.params[p.name] = ParamText::Parse(p.explore);
  }
  if (info.lasting) {
    ParamText range =
        ParamText::Parse(info.explore_duration.empty() ? "200ms..1s" : info.explore_duration);
    absl::StatusOr<Span> lo = Span::Parse(range.value.empty() ? range.lo : range.value);
    absl::StatusOr<Span> hi = Span::Parse(range.value.empty() ? range.hi : range.value);
    tmpl.duration_lo = lo.ok() ? *lo : Span::Ms(500);
    tmpl.duration_hi = hi.ok() ? *hi : Span::Ms(500);
  }
  return tmpl;
}

bool FailsOverAgain(const FaultInstance& f, std::set<int>* failed_over) {
  if (f.kind == nullptr || f.kind->name() != "failover") return false;
  for (int node : f.nodes) {
    if (failed_over->count(node) > 0) return true;
  }
  failed_over->insert(f.nodes.begin(), f.nodes.end());
  return false;
}

int64_t EndBeforeBudget(int64_t start_ms, int64_t budget_ms, FaultInstance* f) {
  const int64_t max_ms = std::max<int64_t>(50, budget_ms - 300 - start_ms);
  if (absl::ToInt64Milliseconds(f->duration) > max_ms) f->duration = absl::Milliseconds(max_ms);
  return start_ms + absl::ToInt64Milliseconds(f->duration);
}

}  // namespace redlock::chaos
