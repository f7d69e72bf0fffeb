// What one redlock-bench run measured, independent of how it is printed
// (report.h: table and JSON; plots.h: SVG charts).
//
// A run is a list of groups. A group is one scenario at one N (number of
// nodes), measured side by side: its first row is the floor (one node, one
// caller, plain hiredis) and every latency of the group is also given as a
// ratio to the floor's.

#ifndef REDLOCK_BENCH_RESULTS_H_
#define REDLOCK_BENCH_RESULTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/stats.h"
#include "bench/system_info.h"

namespace redlock::bench {

// Implementation families, as plotted.
inline constexpr char kFloor[] = "floor";
inline constexpr char kLibrary[] = "library";
inline constexpr char kSequential[] = "sequential";
inline constexpr char kWaitForAll[] = "wait-for-all";
inline constexpr char kMultiLock[] = "multilock";
inline constexpr char kPipelinedLimit[] = "pipelined-limit";
// spread: the q-th nearest node's round trip by PING (no lock at all), and
// the floor's lock on the nearest node alone.
inline constexpr char kModel[] = "model";
inline constexpr char kNearest[] = "nearest";

// The sequential baseline with many callers, as the healthy group names
// it: what a C++ user writes without a library (each thread its own
// blocking hiredis connections, Redlock node after node).
inline constexpr char kNaiveImpl[] = "naive: hiredis/thread";

// Variant of the library's blocking rows where every caller has a Client
// of its own: the naive row's layout (connections per thread), beside the
// shared client's row.
inline constexpr char kClientPerThread[] = "client per thread";

// Variant of the library rows driven through the *Async calls (C chains).
inline constexpr char kAsync[] = "async";
// The same chains written with co_await (redlock/coro.h).
inline constexpr char kCoro[] = "co_await";

struct RowResult {
  std::string impl;    // display name, e.g. "library", "library fencing", "sequential"
  std::string family;  // one of the constants above
  // "", "async", "fencing", "notify=on", "notify=off", "quorum", "all-nodes", "no fault"
  std::string variant;
  int callers = 1;

  bool skipped = false;
  std::string skip_reason;
  std::string harness_error;  // the row could not be run (a bug or a broken setup)

  Distribution acquire;
  Distribution cycle;         // acquire + release
  Distribution handoff;       // contended resource: Release returned -> Acquire returned
  Distribution handoff_call;  // contended resource: Release called -> Acquire returned
  int64_t attempts = 0;
  int64_t successes = 0;
  double measured_s = 0;
  int64_t warmup_cycles = 0;
  bool hit_iteration_cap = false;
  ErrorCounts acquire_errors;
  ErrorCounts release_errors;

  int64_t peak_rss_kb = -1;
  bool peak_is_per_run = false;
  // Set for rows run with a fault where memory must stay flat: VmRSS when the
  // measurement started (after the warm-up), half-way, and when it stopped.
  bool memory_tracked = false;
  int64_t rss_start_kb = -1;
  int64_t rss_mid_kb = -1;
  int64_t rss_end_kb = -1;

  // The client's cost over the measurement: getrusage(RUSAGE_SELF) deltas
  // (every thread of this process: callers, the library's I/O thread, the
  // fault proxy of the slow scenarios), the allocations counted over the
  // same window, and the cycles completed meanwhile.
  ProcessUsage usage;
  int64_t usage_cycles = 0;

  // processes: the client processes of the row (0: this process alone). The
  // servers' CPU over the measurement (user+sys of every node of the run;
  // -1 when not measured: --nodes).
  int processes = 0;
  int64_t server_cpu_us = -1;

  std::vector<std::string> notes;

  bool ran() const { return !skipped && harness_error.empty(); }
  // user+sys microseconds per cycle; NaN without cycles.
  double cpu_us_per_cycle() const;
  // Context switches (voluntary + involuntary) per cycle; NaN without cycles.
  double csw_per_cycle() const;
  // operator new calls per cycle (bench/alloc_count.h); NaN without cycles
  // or when not counted.
  double allocs_per_cycle() const;
  // The servers' CPU per successful cycle; NaN when not measured.
  double server_cpu_us_per_cycle() const;
  double throughput() const {
    return measured_s > 0 ? static_cast<double>(successes) / measured_s : 0;
  }
  double success_rate() const {
    return attempts > 0 ? static_cast<double>(successes) / static_cast<double>(attempts) : 0;
  }
  int64_t rss_growth_kb() const { return rss_end_kb - rss_start_kb; }
  int64_t rss_second_half_growth_kb() const { return rss_end_kb - rss_mid_kb; }
  // A queue without bound grows all the time; one-off effects (a thread's
  // stack reaching a new page, an allocator arena) do not. Flat: at most
  // max(512 KiB, 1 %) in the second half and max(2 MiB, 5 %) in all.
  bool memory_flat() const;
};

// A row's name, family, variant and callers, before it runs.
RowResult RowIdentity(std::string impl, std::string family, std::string variant, int callers);
// The same for a row of the library (family kLibrary).
RowResult LibraryRowIdentity(std::string impl, std::string variant, int callers);

struct GroupResult {
  std::string scenario;
  int n = 0;
  std::string variant;  // one of the scenario's variants (a spread profile), or ""
  std::string title;    // what was done to the nodes
  std::vector<std::pair<std::string, std::string>> settings;
  bool skipped = false;
  std::string skip_reason;
  std::vector<RowResult> rows;
  std::vector<std::string> notes;
  // Named figures the group derived from its rows, for the targets and the
  // JSON (spread: the models of sequential and wait-for-all, in us).
  std::map<std::string, double> figures;

  // The floor row, if it ran.
  const RowResult* Floor() const;
  // The row every latency of the group is given as a ratio to: the row of
  // family `reference` (the floor unless set), if it ran.
  std::string reference = kFloor;
  const RowResult* Reference() const;
  const RowResult* Find(const std::string& family, const std::string& variant, int callers) const;
  // The pipelined limit a row with `callers` callers is compared with: the
  // limit row with as many chains, else the one with the most.
  const RowResult* Limit(int callers) const;
};

// row's cycles/s over its limit's, NaN when either is missing.
double RatioToLimit(const RowResult& row, const GroupResult& group);

struct RunInfo {
  std::string mode;  // smoke, quick, full
  uint64_t seed = 0;
  std::string started_at;  // UTC, ISO 8601
  MachineInfo machine;
  VersionInfo versions;
  std::vector<std::string> build_warnings;
  bool own_fleet = true;
  std::string nodes;  // host:port list
  int callers_many = 64;
  std::vector<std::pair<std::string, std::string>> settings;
};

struct BenchResults {
  RunInfo info;
  std::vector<GroupResult> groups;
  std::vector<std::string> harness_errors;
  double wall_seconds = 0;
};

// One target of docs/design.md 9.3, checked against this run.
struct TargetCheck {
  std::string figure;
  std::string target;
  std::string measured;  // "n/a" when the run has no such figure
  std::string status;    // "met", "missed", "n/a"
};
std::vector<TargetCheck> CheckTargets(const BenchResults& results);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_RESULTS_H_
