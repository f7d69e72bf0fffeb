// Lock token generation: 20 bytes from getrandom(2), hex-encoded.

#include <benchmark/benchmark.h>

#include <string>

#include "redlock/internal/token.h"

namespace {

void BM_NewToken(benchmark::State& state) {
  for (auto _ : state) {
    std::string token = redlock::internal::NewToken();
    benchmark::DoNotOptimize(token);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NewToken);

}  // namespace
