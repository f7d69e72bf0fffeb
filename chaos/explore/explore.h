// chaos/explore/explore.h: random fault schedules over every fault kind a
// topology supports, run against real servers, checked, and each violation
// of a property the configuration is documented to keep shrunk into a
// scenario file that replays it.
//
//   ExploreOptions o;
//   o.seed = 1;
//   o.runs = 20;
//   absl::StatusOr<ExploreReport> r = Explore(o);
//   std::cout << FormatExploreReport(*r);
//
// What a run is: a topology preset (TopologyPreset: the nodes, how clients
// reach them, replication, the clients and their options), and a schedule
// drawn by GenerateSchedule from the run's seed: faults in waves (one to
// three faults starting close together, overlapping, each healed after a
// duration drawn from its kind's range; a pause; the next wave), one in three
// waiting for a client's next marker (so faults land inside operations),
// every kind
// the topology supports drawn with its kind's weight, targets and parameters
// drawn from their ranges. The same seed gives the same schedule (the
// generator draws only from its own std::mt19937_64, seeded with the run's
// seed); the run itself has real timing and may differ.
//
// Which properties a run must keep: all but those the injected faults may
// break in that configuration (FaultKind::MayViolate: what the README's
// safety section says), S5 and L1 included. A violation of any other
// property is a finding: printed with the run's seed and schedule, then
// shrunk (Shrink: drop one fault at a time, then halve durations, keeping
// each change while the same property is still violated, at most
// ExploreOptions::shrink_runs reruns) and written as a scenario file
// (<out_dir>/<name>.yaml) that `redlock-chaos --file` replays.
//
// Thread-safety: Explore runs one scenario at a time (RunScenario's rules);
// the pure functions are thread-safe.

#ifndef REDLOCK_CHAOS_EXPLORE_EXPLORE_H_
#define REDLOCK_CHAOS_EXPLORE_EXPLORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chaos/run/scenario.h"

namespace redlock::chaos {

// ---- Topology presets -------------------------------------------------------------

// "direct", "proxied", "overlap", "namespace", "replicated", "sentinel"
// (chaos/README.md describes each); every preset names its setup and
// clients, and which fault kinds it supports follows from its shape.
std::vector<std::string> TopologyPresets();
// `client`: "" for the library, else a client name (ClientConfig::variant
// or ::client). `budget`: how long the schedule runs.
absl::StatusOr<Scenario> TopologyPreset(const std::string& name, absl::Duration budget,
                                        const std::string& client = "");

// ---- Schedules ------------------------------------------------------------------

// The kinds the generator may draw for `shape` (supported, weight > 0).
std::vector<const FaultKind*> ExplorableKinds(const RunShape& shape);

// A random schedule over `budget`: entries at a time, or (one in three) at
// the first marker of some kind after that time (a client's grant, read,
// end of use, attempt, extension or release; a client's fault then acts on
// that client), each with one concrete fault (every value drawn). Deterministic in `rng`'s state.
// `kinds`: restrict to these names (empty: every explorable kind).
Schedule GenerateSchedule(const RunShape& shape, absl::Duration budget, std::mt19937_64& rng,
                          const std::vector<std::string>& kinds = {});

// The properties a run with these injected faults must keep: every
// property but those MayViolate names for one of them.
PropertySet DocumentedSafe(PropertySet may_violate);

// The properties `r` violated that none of its faults explains (the
// findings): a fault explains a violation of a property it may break while
// it acted or within a lease (plus a second) after it ended, and a client's
// fault only the violations that client takes part in; a violation without
// processes (a final counter short, S5, L1) is explained by any fault that
// may break its property.
PropertySet Unexplained(const ScenarioResult& r);

// ---- Shrinking ------------------------------------------------------------------

struct ShrinkStep {
  std::string change;  // "dropped entry 3 (clock_jump ...)", "halved ..."
  bool kept = false;   // the violation still reproduced
};

// Reduces `schedule` while `still_fails` says the violation reproduces:
// first every entry dropped in turn (from the last), then every lasting
// fault's duration halved in turn; each change is kept only when
// still_fails(candidate) is true. At most `max_runs` calls of still_fails.
Schedule Shrink(const Schedule& schedule, const std::function<bool(const Schedule&)>& still_fails,
                int max_runs, std::vector<ShrinkStep>* log = nullptr);

// ---- Exploring ---------------------------------------------------------------------

struct ExploreOptions {
  uint64_t seed = 1;
  int runs = 20;
  absl::Duration duration = absl::Seconds(10);  // each run's schedule
  // Presets to draw from (one per run, in turn); empty: every preset that
  // can run on this machine (the root-only ones need root).
  std::vector<std::string> topologies;
  std::string client;              // "" = the library
  std::vector<std::string> kinds;  // restrict the generator (empty: all)
  int shrink_runs = 12;            // reruns spent shrinking each finding
  std::string out_dir = "chaos-findings";
  RunOptions run;  // binaries, keep/plot dirs (seed is per run)
  // Progress lines (run by run); null: none.
  std::function<void(const std::string&)> progress;
};

struct ExploreRun {
  int index = 0;
  uint64_t seed = 0;  // the run's own: --explore --seed S gives run i seed S+i
  std::string topology;
  Scenario scenario;  // with the generated schedule
  ScenarioResult result;
  PropertySet must_keep = 0;  // documented safe for the faults injected
  PropertySet violated = 0;   // of those, the ones violated (findings)
  std::string finding_file;   // the shrunk scenario, when written
  Schedule shrunk;
  std::vector<ShrinkStep> shrink_log;
};

struct ExploreReport {
  std::vector<ExploreRun> runs;
  absl::Duration elapsed;
};

absl::StatusOr<ExploreReport> Explore(const ExploreOptions& options);

// The table: runs, faults injected per kind, violations per property
// (expected ones and findings apart), and every finding with its seed, its
// schedule and its shrunk file.
std::string FormatExploreReport(const ExploreReport& report);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_EXPLORE_EXPLORE_H_
