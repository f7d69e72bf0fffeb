// The scenarios of redlock-bench: the catalog (`redlock-bench --list` prints
// it) and how one scenario runs at one N.
//
// A scenario at one N is a group of rows measured one after the other on the
// same nodes (bench/rows.h): usually the floor first, then the library and
// the baselines, each with 1 caller and with `callers_many` callers where
// that makes sense. A scenario may run as several groups at one N, one per
// variant (the latency profiles of `spread`).
//
// Where the scenarios live, one file per job:
//   healthy_scenarios.cc  healthy, sweep
//   fault_scenarios.cc    stopped, slow1, slow2, slow-near-timeout
//   hot_scenario.cc       hot
//   feature_scenarios.cc  fencing, multilock, observer, durability
//   family_scenario.cc    family, semaphore-availability (only when named)
//   tls_scenario.cc       tls
//   spread_scenario.cc    spread
//   processes_scenario.cc processes
//   backends_scenario.cc  backends
// and the catalog itself, the table of names, descriptions and N values, in
// scenarios.cc.

#ifndef REDLOCK_BENCH_SCENARIOS_H_
#define REDLOCK_BENCH_SCENARIOS_H_

#include <string>
#include <vector>

#include "bench/context.h"
#include "bench/results.h"

namespace redlock::bench {

// Runs one group: fills g->title, settings, rows and notes (g->scenario,
// g->n and g->variant are set), or marks it skipped with the reason.
using ScenarioRun = void (*)(Context& ctx, int n, GroupResult* g);

struct Scenario {
  std::string name;
  std::string description;
  ScenarioRun run = nullptr;
  // The N values of each mode (--n overrides them, unless `ns` is set).
  std::vector<int> smoke_ns;
  std::vector<int> quick_ns;
  std::vector<int> full_ns;
  int min_n = 1;
  // Stops nodes or puts proxies in front of them: needs the bench's own
  // fleet (skipped with --nodes).
  bool needs_fleet = false;
  // Runs only when named with --scenario (it starts servers of its own, or
  // takes long).
  bool explicit_only = false;
  // When set: the N values from the settings, instead of the mode's or --n.
  std::vector<int> (*ns)(const BenchSettings& settings) = nullptr;
  // When set: one group per variant at each N (g->variant), in this order.
  std::vector<std::string> (*variants)(const BenchSettings& settings) = nullptr;
};

const std::vector<Scenario>& AllScenarios();
const Scenario* FindScenario(const std::string& name);

// The N values `scenario` runs at under `settings` (mode default or --n),
// before checking the number of nodes available.
std::vector<int> NsFor(const Scenario& scenario, const BenchSettings& settings);
// The variants of `scenario` under `settings`: {""} for a scenario without.
std::vector<std::string> VariantsFor(const Scenario& scenario, const BenchSettings& settings);

// Runs `scenario` at `n` (and `variant`), or returns the group marked
// skipped with the reason (not enough nodes, no fleet control).
GroupResult RunGroup(const Scenario& scenario, int n, const std::string& variant, Context& ctx);

// ---- The runners (one file per job, listed above) -----------------------------------

void RunHealthy(Context& ctx, int n, GroupResult* g);
void RunSweep(Context& ctx, int n, GroupResult* g);
void RunStopped(Context& ctx, int n, GroupResult* g);
void RunSlow1(Context& ctx, int n, GroupResult* g);
void RunSlow2(Context& ctx, int n, GroupResult* g);
void RunSlowNear(Context& ctx, int n, GroupResult* g);
void RunHot(Context& ctx, int n, GroupResult* g);
void RunFencing(Context& ctx, int n, GroupResult* g);
void RunMultiLock(Context& ctx, int n, GroupResult* g);
void RunScriptless(Context& ctx, int n, GroupResult* g);
void RunCommands(Context& ctx, int n, GroupResult* g);
void RunCluster(Context& ctx, int n, GroupResult* g);
void RunObserver(Context& ctx, int n, GroupResult* g);
void RunDurability(Context& ctx, int n, GroupResult* g);
void RunTls(Context& ctx, int n, GroupResult* g);
void RunSpread(Context& ctx, int n, GroupResult* g);
void RunProcesses(Context& ctx, int n, GroupResult* g);
void RunBackends(Context& ctx, int n, GroupResult* g);
void RunFamily(Context& ctx, int n, GroupResult* g);
void RunSemaphoreAvailability(Context& ctx, int n, GroupResult* g);

// spread's N (the profile's length) and variants (its profiles' names).
std::vector<int> SpreadNs(const BenchSettings& settings);
std::vector<std::string> SpreadVariants(const BenchSettings& settings);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_SCENARIOS_H_
