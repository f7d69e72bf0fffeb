// The charts of --plot DIR, drawn from a run's results:
//
//   latency_vs_n.svg     acquire+release p50 (solid) and p99 (dashed) vs N,
//                        1 caller, healthy nodes: library, sequential,
//                        wait-for-all and the floor.
//   throughput_vs_n.svg  cycles/s vs N with many callers, healthy nodes
//                        (library blocking and async, the pipelined limit,
//                        sequential, wait-for-all).
//   callers_sweep.svg    the sweep scenario: cycles/s vs callers, library
//                        blocking vs async vs the pipelined limit, per N.
//   callers_sweep_cpu.svg  the same rows' client CPU per cycle.
//   latency_cdf_n5.svg   CDF of the library's acquire+release latency at N=5
//                        (or the largest N measured), 1 caller: healthy vs
//                        one node stopped vs slow node(s).
//   handoff_cdf.svg      CDF of the hand-off latency on a contended resource,
//                        release notifications on vs off.
//
// A chart whose data the run does not have (e.g. --scenario healthy) is not
// written.

#ifndef REDLOCK_BENCH_PLOTS_H_
#define REDLOCK_BENCH_PLOTS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "bench/results.h"

namespace redlock::bench {

// (file name, SVG document) for every chart the results support.
std::vector<std::pair<std::string, std::string>> RenderPlots(const BenchResults& results);

// Writes RenderPlots() into `dir` (created if missing); appends the paths
// written to `written`.
absl::Status WritePlots(const BenchResults& results, const std::string& dir,
                        std::vector<std::string>* written);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_PLOTS_H_
