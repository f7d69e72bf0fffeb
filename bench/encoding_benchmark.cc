// Command encoding: the RESP the client writes per node per attempt, next to
// hiredis' own formatter for comparison.

#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/token.h"
#include "redlock/internal/transport.h"

namespace {

const std::string& Token() {
  static const std::string* token = new std::string(redlock::internal::NewToken());
  return *token;
}

void BM_EncodeSetCommand(benchmark::State& state) {
  const std::string& token = Token();
  for (auto _ : state) {
    std::string cmd =
        redlock::internal::EncodeCommand({"SET", "orders/42", token, "NX", "PX", "10000"});
    benchmark::DoNotOptimize(cmd);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EncodeSetCommand);

// Several commands appended to one reused buffer (what a pipelined flush
// looks like).
void BM_AppendSetCommandReusedBuffer(benchmark::State& state) {
  const std::string& token = Token();
  std::string buffer;
  for (auto _ : state) {
    buffer.clear();
    for (int i = 0; i < 16; ++i) {
      redlock::internal::AppendCommand(&buffer, {"SET", "orders/42", token, "NX", "PX", "10000"});
    }
    benchmark::DoNotOptimize(buffer);
  }
  state.SetItemsProcessed(state.iterations() * 16);
}
BENCHMARK(BM_AppendSetCommandReusedBuffer);

void BM_ScriptCommandRelease(benchmark::State& state) {
  const std::string& token = Token();
  const std::vector<std::string> keys = {"orders/42"};
  const std::vector<std::string> args = {token, "redlock:release:"};
  for (auto _ : state) {
    redlock::internal::Command c =
        redlock::internal::ScriptCommand(redlock::internal::ReleaseScript(), keys, args);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ScriptCommandRelease);

void BM_ScriptCommandMultiAcquire(benchmark::State& state) {
  const std::string& token = Token();
  std::vector<std::string> keys;
  for (int i = 0; i < state.range(0); ++i) keys.push_back("account/" + std::to_string(i));
  const std::vector<std::string> args = {token, "10000"};
  for (auto _ : state) {
    redlock::internal::Command c =
        redlock::internal::ScriptCommand(redlock::internal::AcquireSetScript(), keys, args);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ScriptCommandMultiAcquire)->Arg(1)->Arg(3)->Arg(16);

// For comparison: hiredis' formatter (allocates with malloc and sds).
void BM_HiredisFormatSetCommand(benchmark::State& state) {
  const std::string& token = Token();
  const char* argv[] = {"SET", "orders/42", token.c_str(), "NX", "PX", "10000"};
  const size_t lens[] = {3, 9, token.size(), 2, 2, 5};
  for (auto _ : state) {
    char* out = nullptr;
    int len = redisFormatCommandArgv(&out, 6, argv, lens);
    benchmark::DoNotOptimize(len);
    redisFreeCommand(out);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HiredisFormatSetCommand);

}  // namespace
