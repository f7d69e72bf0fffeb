// sim/case_file.h: a run as a small JSON file (its seed, its configuration,
// its fault schedule and the property it is about) that `redlock-sim
// --replay` runs again, exactly; the shrinker (sim/shrink.h); and the same
// run as a chaos lab scenario file, when the lab can have it.
//
//   {"seed": 17, "property": "S9", "summary": "...",
//    "config": {"nodes": "plain/plain/plain", "primitive": "rwlock", ...},
//    "faults": [{"at_ms": 1200, "marker": "use_read", "kind": "client_pause",
//                "clients": "marker", "duration": "2ttl"}, ...]}

#ifndef REDLOCK_SIM_CASE_FILE_H_
#define REDLOCK_SIM_CASE_FILE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chaos/run/scenario.h"
#include "sim/world.h"

namespace redlock::sim {

struct SimCase {
  RunInput input;
  std::string property;  // the property the case shows violated ("" : none)
  std::string summary;
};

std::string WriteCase(const SimCase& c);
absl::StatusOr<SimCase> ParseCase(const std::string& text);
absl::StatusOr<SimCase> ReadCaseFile(const std::string& path);

// The run as a chaos lab scenario (chaos/run/scenario.h) that `redlock-chaos
// --file` runs, expecting `property` clean: kFailedPrecondition naming what
// the lab cannot have (a node kind, an option, a fault).
absl::StatusOr<chaos::Scenario> ToScenario(const SimCase& c);

// Shrinking: fewer faults, clients, resources and nodes, a shorter run and
// shorter faults, each change kept while `still_fails` says the property is
// still a finding; at most `max_runs` reruns. Returns the smallest case.
struct ShrinkLog {
  std::vector<std::string> steps;  // "kept: dropped fault 3 (pause ...)", "undone: ..."
  int runs = 0;
};
SimCase Shrink(const SimCase& c, const std::function<bool(const RunInput&)>& still_fails,
               int max_runs, ShrinkLog* log);

}  // namespace redlock::sim

#endif  // REDLOCK_SIM_CASE_FILE_H_
