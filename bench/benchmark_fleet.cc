#include "bench/benchmark_fleet.h"

#include <memory>
#include <mutex>

#include "absl/status/statusor.h"

namespace redlock::bench {
namespace {

struct Holder {
  std::mutex mu;
  bool tried = false;
  std::unique_ptr<testkit::Fleet> fleet;
  std::string why;
};

Holder& Get() {
  // Destroyed at exit, after main() has returned and every benchmark thread
  // is joined: the fleet's destructor stops the servers and removes its
  // temp dir.
  static Holder holder;
  return holder;
}

}  // namespace

void StartBenchmarkFleet(const benchmark::State&) {
  Holder& h = Get();
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.tried) return;
  h.tried = true;
  testkit::FleetOptions options;
  options.nodes = kBenchmarkFleetNodes;
  options.enable_debug = false;
  absl::StatusOr<std::unique_ptr<testkit::Fleet>> fleet = testkit::Fleet::Start(options);
  if (fleet.ok()) {
    h.fleet = *std::move(fleet);
  } else {
    h.why = fleet.status().ToString();
  }
}

testkit::Fleet* BenchmarkFleet(std::string* why) {
  Holder& h = Get();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.tried) {
    *why = "the fleet was not started (register the benchmark with ->Setup(StartBenchmarkFleet))";
    return nullptr;
  }
  if (h.fleet == nullptr) *why = h.why;
  return h.fleet.get();
}

}  // namespace redlock::bench
