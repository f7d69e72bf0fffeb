// Per-request overhead of the engine and the client against a real fleet
// (benchmark_fleet.h): a whole TryAcquire+Release at N=1 and N=5, one engine
// Send of a PING (alone and 64 pipelined), and hiredis' blocking PING round
// trip as the floor they are compared with. Real time is what matters here
// (the caller waits on another thread), so every benchmark uses it.

#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/benchmark_fleet.h"
#include "redlock/client.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/resp.h"

namespace {

using redlock::bench::BenchmarkFleet;
using redlock::bench::StartBenchmarkFleet;

redlock::testkit::Fleet* FleetOrSkip(benchmark::State& state) {
  std::string why;
  redlock::testkit::Fleet* fleet = BenchmarkFleet(&why);
  if (fleet == nullptr) state.SkipWithError(why.c_str());
  return fleet;
}

std::vector<redlock::Endpoint> FirstNodes(redlock::testkit::Fleet* fleet, int n) {
  std::vector<redlock::Endpoint> eps = fleet->endpoints();
  eps.resize(static_cast<size_t>(n));
  return eps;
}

void BM_ClientTryAcquireRelease(benchmark::State& state) {
  redlock::testkit::Fleet* fleet = FleetOrSkip(state);
  if (fleet == nullptr) return;
  redlock::Options options;
  options.nodes = FirstNodes(fleet, static_cast<int>(state.range(0)));
  auto client = redlock::Client::Create(options);
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  const std::string resource = absl::StrCat("bm:acquire-release:", state.range(0));
  int64_t failures = 0;
  for (auto _ : state) {
    absl::StatusOr<redlock::Lease> lease = (*client)->TryAcquire(resource, absl::Seconds(10));
    if (!lease.ok()) {
      ++failures;
      continue;
    }
    if (!(*client)->Release(*lease).ok()) ++failures;
  }
  state.counters["failures"] = static_cast<double>(failures);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ClientTryAcquireRelease)
    ->Arg(1)
    ->Arg(5)
    ->Setup(StartBenchmarkFleet)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

std::unique_ptr<redlock::internal::Engine> StartEngine(benchmark::State& state,
                                                       redlock::testkit::Fleet* fleet) {
  redlock::internal::Engine::Config config;
  config.nodes = FirstNodes(fleet, 1);
  auto engine = redlock::internal::Engine::Start(config);
  if (!engine.ok()) {
    state.SkipWithError(engine.status().ToString().c_str());
    return nullptr;
  }
  (*engine)->WaitForFirstConnections(absl::Seconds(2));
  return *std::move(engine);
}

redlock::internal::Command Ping() {
  redlock::internal::Command c;
  c.payload = redlock::internal::EncodeCommand({"PING"});
  c.op = "ping";
  return c;
}

// One Send of a PING and the wait for its callback: the engine's cost per
// request on top of the network round trip (compare with BM_HiredisPing).
void BM_EngineSendPing(benchmark::State& state) {
  redlock::testkit::Fleet* fleet = FleetOrSkip(state);
  if (fleet == nullptr) return;
  // Declared before the engine: its thread may still be returning from a
  // callback that touched them when the loop ends.
  std::atomic<uint32_t> done{0};
  std::atomic<bool> ok{false};
  std::unique_ptr<redlock::internal::Engine> engine = StartEngine(state, fleet);
  if (engine == nullptr) return;
  const redlock::internal::Command ping = Ping();
  int64_t failures = 0;
  for (auto _ : state) {
    done.store(0, std::memory_order_relaxed);
    engine->Send(0, ping, [&](absl::StatusOr<redlock::internal::Reply> r) {
      ok.store(r.ok() && !r->is_error(), std::memory_order_relaxed);
      done.store(1, std::memory_order_release);
      done.notify_one();
    });
    while (done.load(std::memory_order_acquire) == 0) done.wait(0, std::memory_order_acquire);
    if (!ok.load(std::memory_order_relaxed)) ++failures;
  }
  state.counters["failures"] = static_cast<double>(failures);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineSendPing)
    ->Setup(StartBenchmarkFleet)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// `range(0)` PINGs sent back to back, then the wait for all of them: the
// amortised cost per request when commands are pipelined.
void BM_EngineSendPingBatch(benchmark::State& state) {
  redlock::testkit::Fleet* fleet = FleetOrSkip(state);
  if (fleet == nullptr) return;
  std::atomic<uint32_t> left{0};
  std::atomic<int64_t> failed{0};
  std::unique_ptr<redlock::internal::Engine> engine = StartEngine(state, fleet);
  if (engine == nullptr) return;
  const int batch = static_cast<int>(state.range(0));
  const redlock::internal::Command ping = Ping();
  for (auto _ : state) {
    left.store(static_cast<uint32_t>(batch), std::memory_order_relaxed);
    for (int i = 0; i < batch; ++i) {
      engine->Send(0, ping, [&](absl::StatusOr<redlock::internal::Reply> r) {
        if (!r.ok() || r->is_error()) failed.fetch_add(1);
        if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) left.notify_one();
      });
    }
    for (uint32_t v = left.load(std::memory_order_acquire); v != 0;
         v = left.load(std::memory_order_acquire)) {
      left.wait(v, std::memory_order_acquire);
    }
  }
  state.counters["failures"] = static_cast<double>(failed.load());
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_EngineSendPingBatch)
    ->Arg(64)
    ->Setup(StartBenchmarkFleet)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The floor: one blocking hiredis PING round trip on the same node. Raw
// hiredis on purpose, not the test kit's connection: the kit converts every
// reply into a RedisValue, a cost the floor must not carry.
void BM_HiredisPing(benchmark::State& state) {
  redlock::testkit::Fleet* fleet = FleetOrSkip(state);
  if (fleet == nullptr) return;
  redisContext* c = redisConnectWithTimeout(fleet->host(0).c_str(), fleet->port(0),
                                            absl::ToTimeval(absl::Seconds(1)));
  if (c == nullptr || c->err != 0) {
    state.SkipWithError(c == nullptr ? "out of memory" : c->errstr);
    if (c != nullptr) redisFree(c);
    return;
  }
  int64_t failures = 0;
  for (auto _ : state) {
    void* reply = redisCommand(c, "PING");
    if (reply == nullptr) {
      ++failures;
      break;
    }
    freeReplyObject(reply);
  }
  redisFree(c);
  state.counters["failures"] = static_cast<double>(failures);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HiredisPing)->Setup(StartBenchmarkFleet)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
