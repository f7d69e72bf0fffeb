// bench/rows.h: how one row of a group is measured (bench/scenarios.cc), for
// the scenarios defined in files of their own (bench/backends_scenario.cc).
//
// A row builds one cycle per caller, switches its fault on, warms up,
// measures, and switches the fault off (docs/design.md 9.1: rows never
// inherit each other's state).

#ifndef REDLOCK_BENCH_ROWS_H_
#define REDLOCK_BENCH_ROWS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/locker.h"
#include "bench/results.h"
#include "bench/scenarios.h"
#include "bench/workload.h"
#include "redlock/options.h"

namespace redlock::bench {

// A fault switched on before a row's warm-up and off after its measurement.
struct Fault {
  std::string description;
  std::function<absl::Status()> on;
  std::function<absl::Status()> off;
};

struct RowSpec {
  std::string impl;
  std::string family;
  std::string variant;
  int callers = 1;
  absl::Duration duration = absl::ZeroDuration();  // zero: settings.duration
  absl::Duration warmup = absl::ZeroDuration();    // zero: settings.warmup
  const Fault* fault = nullptr;
  bool track_memory = false;
  // Builds one cycle per caller, before anything is timed.
  std::function<absl::StatusOr<std::vector<CycleFn>>()> make;
  // Or one asynchronous chain per caller (RunChains instead of RunWorkload).
  std::function<absl::StatusOr<std::vector<ChainFn>>()> make_chains;
  std::function<void()> at_start;
  std::function<void()> at_mid;
  std::function<void()> at_stop;
  // After the measurement, while the fault is still on.
  std::function<void(RowResult*)> after;
};

// Measures one row; a setup or fault error becomes the row's harness error
// (and one of the run's).
RowResult RunRow(Context& ctx, RowSpec spec);

// The floor (one node, one caller, plain hiredis) on eps[0].
RowResult FloorRow(Context& ctx, const std::vector<Endpoint>& eps);

// A row of hand-offs on `hot` (settings' hot_waiters callers for
// hot_duration): each waiter's cycle, the counters zeroed at the start and
// the waiters let go at the stop. REQUIRES: `hot` outlives the row.
RowSpec HotRow(const BenchSettings& s, HotResource* hot, std::string impl, std::string family,
               std::string variant);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_ROWS_H_
