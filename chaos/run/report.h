// chaos/run/report.h: the verdict table of a set of runs, its JSON form, the
// index page of a run with pictures, and the catalog listing.
//
// Thread-safety: pure functions.

#ifndef REDLOCK_CHAOS_RUN_REPORT_H_
#define REDLOCK_CHAOS_RUN_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "chaos/run/scenario.h"

namespace redlock::chaos {

// One row per result: scenario, configuration, operations, S1..S5 and L1
// counts, availability, the expectation and the verdict. `properties`: how
// many property columns (5 leaves L1 out, for histories without it).
std::string FormatTable(const std::vector<ScenarioResult>& results,
                        int properties = kNumHarnessProperties);
std::string FormatJson(const std::vector<ScenarioResult>& results, uint64_t seed,
                       absl::Duration total);

// The index page of a run with pictures: plain HTML (no script), one section
// per scenario with its verdict, expectation, counts and its picture
// (referenced by file name: the page sits next to the pictures).
std::string FormatIndexHtml(const std::vector<ScenarioResult>& results, uint64_t seed,
                            absl::Duration total);

// --list: every scenario with its configuration, expectation, summary and
// schedule.
std::string FormatList(const std::vector<Scenario>& scenarios);

// --compare: one row per scenario, one column per client under test
// (`clients[i]` ran `results[i]`, each a list in scenario order), each cell
// the violations found ("S1 3, S3 2", or "clean") and, where the run could
// not run, why. Markdown, for the README.
std::string FormatComparison(const std::vector<std::string>& clients,
                             const std::vector<std::vector<ScenarioResult>>& results);

// --kinds: every fault kind of the registry (chaos/faults/fault_kind.h):
// name, family, lasting or instant, targets, parameters (default, explore
// range), the explorer's weight and duration range, summary.
std::string FormatKinds();

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_RUN_REPORT_H_
