// chaos/faults/fault_draw.h: the pieces of a random fault schedule that the
// explorer (chaos/explore/explore.cc) and the simulator (sim/sim_faults.cc)
// draw alike: a kind picked by its explore weight, its template with the
// explorer's ranges, a node failed over once per run, a lasting fault that
// ends before the budget. Each caller keeps its own random source and the
// order of its draws; nothing here draws.

#ifndef REDLOCK_CHAOS_FAULTS_FAULT_DRAW_H_
#define REDLOCK_CHAOS_FAULTS_FAULT_DRAW_H_

#include <cstdint>
#include <set>
#include <vector>

#include "chaos/faults/fault_kind.h"

namespace redlock::chaos {

// The sum of the kinds' explore weights.
int TotalExploreWeight(const std::vector<const FaultKind*>& kinds);

// The kind in whose share of the weights `pick` (in [0,
// TotalExploreWeight(kinds))) falls; the last kind past the end.
const FaultKind* PickByWeight(const std::vector<const FaultKind*>& kinds, int pick);

// A template of `info`'s kind with the explorer's range for every parameter
// that has one and, for a lasting kind, its explore duration (200ms..1s
// when the kind names none; 500ms where a bound does not parse).
FaultTemplate ExploreTemplate(const KindInfo& info);

// True when `f` is a failover of a node in `failed_over` (a node fails over
// at most once per run); else a failover's nodes are added to it.
bool FailsOverAgain(const FaultInstance& f, std::set<int>* failed_over);

// A lasting fault starting at `start_ms` shortened to end 300 ms before
// `budget_ms` (it lasts 50 ms at least); returns the time it ends.
int64_t EndBeforeBudget(int64_t start_ms, int64_t budget_ms, FaultInstance* f);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_FAULTS_FAULT_DRAW_H_
