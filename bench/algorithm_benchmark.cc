// The I/O-free arithmetic and decisions of one attempt: drift allowance,
// validity, and the quorum tally of a fan-out round.

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "redlock/internal/algorithm.h"
#include "redlock/options.h"

namespace {

using redlock::internal::Round;

void BM_DriftAllowance(benchmark::State& state) {
  absl::Duration ttl = absl::Seconds(10);
  const redlock::Options options;  // factor 0.01, floor 2 ms
  for (auto _ : state) {
    benchmark::DoNotOptimize(ttl);
    absl::Duration d = redlock::DriftAllowance(ttl, options);
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_DriftAllowance);

void BM_Validity(benchmark::State& state) {
  absl::Duration ttl = absl::Seconds(10);
  absl::Duration elapsed = absl::Microseconds(57);
  absl::Duration drift = absl::Milliseconds(102);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ttl);
    benchmark::DoNotOptimize(elapsed);
    absl::Duration v = redlock::internal::Validity(ttl, elapsed, drift);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_Validity);

// Every node says yes: the round decides at the quorum-th vote.
void BM_RoundQuorumYes(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(absl::StrCat("127.0.0.1:", 7000 + i));
  for (auto _ : state) {
    Round round(n, n / 2 + 1);
    Round::Outcome outcome = Round::Outcome::kPending;
    for (int i = 0; i < n && outcome == Round::Outcome::kPending; ++i) {
      outcome = round.Record(names[static_cast<size_t>(i)], Round::Vote::kYes);
    }
    benchmark::DoNotOptimize(outcome);
  }
}
BENCHMARK(BM_RoundQuorumYes)->Arg(1)->Arg(3)->Arg(5)->Arg(7);

// Nodes time out: the round fails, and the failure status names the nodes.
void BM_RoundFailureStatus(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(absl::StrCat("127.0.0.1:", 7000 + i));
  for (auto _ : state) {
    Round round(n, n / 2 + 1);
    for (int i = 0; i < n && round.outcome() == Round::Outcome::kPending; ++i) {
      round.Record(names[static_cast<size_t>(i)], Round::Vote::kUnavailable,
                   "no reply within 50ms");
    }
    absl::Status st = round.Failure("acquire \"orders/42\"", "granted", "held by another client",
                                    absl::StatusCode::kAborted);
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_RoundFailureStatus)->Arg(1)->Arg(3)->Arg(5)->Arg(7);

}  // namespace
