// bench/rows.h: how one row of a group is measured, for every scenario file
// (bench/*_scenario*.cc).
//
// A row builds one cycle per caller (or one asynchronous chain per caller),
// switches its fault on, warms up, measures, and switches the fault off
// (rows never inherit each other's state). The helpers below build the rows
// every scenario shares: the floor and the hiredis baselines, the library
// (blocking callers, async chains, MultiLock), the pipelined limit, and the
// hand-off rows of a hot resource.

#ifndef REDLOCK_BENCH_ROWS_H_
#define REDLOCK_BENCH_ROWS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/baselines.h"
#include "bench/context.h"
#include "bench/faults.h"
#include "bench/locker.h"
#include "bench/results.h"
#include "bench/workload.h"
#include "redlock/options.h"

namespace redlock::bench {

// What a row is and how long it is measured, under what fault: what every
// row's spec says, whoever builds its cycles (RowSpec, LibrarySpec).
struct RowBasics {
  std::string impl;
  std::string family;
  std::string variant;
  int callers = 1;
  absl::Duration duration = absl::ZeroDuration();  // zero: settings.duration
  absl::Duration warmup = absl::ZeroDuration();    // zero: settings.warmup
  // The measurement goes on (bounded) until this many cycles are recorded
  // (RunLimits::min_iterations; 0: its default).
  int64_t min_iterations = 0;
  const Fault* fault = nullptr;
  bool track_memory = false;
};

struct RowSpec : RowBasics {
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

// `row` marked with a harness error (`what`: `status`), also added to the
// run's harness errors.
RowResult HarnessErrorRow(Context& ctx, RowResult row, const std::string& what,
                          const absl::Status& status);

// The same row measured again (`again`) merged into `first`, with a note
// giving both p50s: a reference row measured at the start and at the end
// of its group compares with the whole group's time span, on a machine
// whose speed drifts. Nothing is merged when `again` did not run.
void MergeRepeat(RowResult* first, const RowResult& again);

// "x64".
std::string CallersLabel(int callers);

// The row `identity` (impl, family, variant and callers) of the cycles
// `make` builds, one per caller, as RunRow measures every row.
RowResult MeasureRow(Context& ctx, RowResult identity,
                     std::function<absl::StatusOr<std::vector<CycleFn>>()> make);

// ---- Baselines (bench/baselines.h) ------------------------------------------------

// The baselines' options on `eps` with the run's node_timeout.
BaselineOptions BaselinesFor(const Context& ctx, std::vector<Endpoint> eps);

// The row of floor, sequential or wait-for-all (`family`) with `callers`
// callers, each with its own connections, on `options`' nodes; impl and
// family are `family` (a caller may rename them).
RowSpec BaselineSpec(Context& ctx, const std::string& family, int callers,
                     const BaselineOptions& options);
// That row measured on `eps` (BaselinesFor), under `fault` if given.
RowResult BaselineRow(Context& ctx, const std::string& family, const std::vector<Endpoint>& eps,
                      int callers, const Fault* fault = nullptr);

// The floor (one node, one caller, plain hiredis) on eps[0].
RowResult FloorRow(Context& ctx, const std::vector<Endpoint>& eps);

// ---- The library ------------------------------------------------------------------

// The client's options on `eps` with the run's node_timeout.
Options ClientOptions(const Context& ctx, const std::vector<Endpoint>& eps);

// kSingleExtend: a single lock's cycle with one Extend between the acquire
// and the release (the acquire's time includes it).
enum class LibraryKind { kSingle, kSingleExtend, kMultiQuorum, kMultiAllNodes };

struct LibrarySpec : RowBasics {
  LibrarySpec() { impl = family = kLibrary; }
  LibraryKind kind = LibraryKind::kSingle;
  bool async = false;  // C chains on TryAcquireAsync/ReleaseAsync (kSingle only)
  bool coro = false;   // with async: the chains written with co_await (redlock/coro.h)
  // Blocking kSingle rows: every caller its own Client (ClientOptions, then
  // tweak), made before the measurement, instead of sharing one.
  bool client_per_caller = false;
  std::function<void(Options*)> tweak;
  int watch_node = -1;      // report this node's health as the client saw it
  std::string watch_label;  // how to name it ("the stopped node", ...)
};

// One Client on `eps` (ClientOptions, then ls.tweak) shared by ls.callers
// blocking callers (or one per caller: ls.client_per_caller), or driving
// ls.callers async chains.
RowResult LibraryRow(Context& ctx, const std::vector<Endpoint>& eps, const LibrarySpec& ls);

// The library's async row with `callers` chains ("library async").
LibrarySpec AsyncSpec(int callers);
// The same chains written with co_await ("library co_await").
LibrarySpec CoroSpec(int callers);

// The pipelined limit (pipelined_limit.h) with `callers` chains, on `eps`
// with BaselinesFor's options, or on `options` when given.
RowResult LimitRow(Context& ctx, const std::vector<Endpoint>& eps, int callers,
                   const Fault* fault = nullptr, absl::Duration duration = absl::ZeroDuration(),
                   const BaselineOptions* options = nullptr);

// A row of hand-offs on `hot` (settings' hot_waiters callers for
// hot_duration): each waiter's cycle, the counters zeroed at the start and
// the waiters let go at the stop. REQUIRES: `hot` outlives the row.
RowSpec HotRow(const BenchSettings& s, HotResource* hot, std::string impl, std::string family,
               std::string variant);

// ---- A group's settings and notes ---------------------------------------------------

void AddSetting(GroupResult* g, std::string key, std::string value);
std::string Dur(absl::Duration d);
// ttl, node_timeout and the quorum of a group at g->n.
void CommonSettings(const Context& ctx, GroupResult* g);

// A note comparing the library row of `on_variant` with that of
// `off_variant` (same callers): acquire+release p50, throughput and client
// CPU per cycle; `with` names what the on row has ("with the vote").
void OnOffNote(GroupResult* g, const std::string& off_variant, const std::string& on_variant,
               int callers, absl::string_view with);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_ROWS_H_
