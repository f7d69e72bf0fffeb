// How redlock-bench prints what it measured: a table for people (one block
// per group, printed as soon as the group is done) and JSON for machines.

#ifndef REDLOCK_BENCH_REPORT_H_
#define REDLOCK_BENCH_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "bench/results.h"

namespace redlock::bench {

// "57.3us", "573us", "1.23ms", "12.3ms", "123ms", "1.23s".
std::string FormatLatency(int64_t ns);
// "x1.04", "x10.4", "x104".
std::string FormatRatio(double ratio);
// "950/s", "12.3k/s".
std::string FormatRate(double per_second);
// CPU microseconds per cycle, as FormatLatency: "8.4us", "235us", "1.34ms";
// "-" for NaN.
std::string FormatCpu(double us);
// Context switches per cycle: "0.52", "-" for NaN.
std::string FormatCsw(double per_cycle);
// "812KiB", "12.3MiB".
std::string FormatKb(int64_t kb);

// The run's header: machine, versions, build type, seed, settings.
std::string RenderHeader(const RunInfo& info);
// One group: its rows with every latency and its ratio to the floor.
std::string RenderGroup(const GroupResult& group);
// The targets of docs/design.md 9.3, the harness errors and the wall time.
std::string RenderSummary(const BenchResults& results);

// The whole run as JSON (pretty-printed).
std::string RenderJson(const BenchResults& results);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_REPORT_H_
