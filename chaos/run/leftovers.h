// S5's scan (chaos/run/runner.cc calls it after the quiet tail): which keys
// a scenario's clients may leave behind, and what each node still holds.

#ifndef REDLOCK_CHAOS_RUN_LEFTOVERS_H_
#define REDLOCK_CHAOS_RUN_LEFTOVERS_H_

#include <string>
#include <vector>

#include "chaos/run/run.h"
#include "chaos/run/scenario.h"

namespace redlock::chaos {

// A key S5 scans: a lock key (GET), or the live members of a sorted set (a
// reader-writer lock's readers, the broken semaphore's holders).
struct ScanTarget {
  std::string key;
  bool set = false;
};

std::vector<ScanTarget> LeftoverScanTargets(const Scenario& sc);

// Every target on every node (a node that cannot be read is noted in the
// run and skipped).
std::vector<KeyState> ScanLeftovers(Run& run, const std::vector<ScanTarget>& targets);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_RUN_LEFTOVERS_H_
