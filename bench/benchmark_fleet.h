// The fleet of real redis-server processes shared by the Google Benchmark
// suites that need one (engine_benchmark.cc), started once, on first use,
// from the main thread: register benchmarks with ->Setup(StartBenchmarkFleet)
// (Google Benchmark runs Setup on the main thread before any worker thread),
// because the fleet's servers die with the thread that started them.

#ifndef REDLOCK_BENCH_BENCHMARK_FLEET_H_
#define REDLOCK_BENCH_BENCHMARK_FLEET_H_

#include <benchmark/benchmark.h>

#include <string>

#include "testkit/fleet.h"

namespace redlock::bench {

inline constexpr int kBenchmarkFleetNodes = 5;

// Starts the fleet if it is not running yet. For ->Setup().
void StartBenchmarkFleet(const benchmark::State& state);

// The fleet, or null with the reason in *why (redis-server missing, ...).
testkit::Fleet* BenchmarkFleet(std::string* why);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_BENCHMARK_FLEET_H_
