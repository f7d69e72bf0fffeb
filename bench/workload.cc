#include "bench/workload.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace redlock::bench {
namespace {

enum Phase : int { kWaiting = 0, kWarmup = 1, kMeasure = 2, kStop = 3 };

struct Shared {
  std::atomic<int> phase{kWaiting};
  std::atomic<int64_t> warmup_done{0};
  std::atomic<int64_t> measured_done{0};
  std::atomic<int64_t> last_end_ns{0};
  int64_t hard_deadline_ns = 0;
  int64_t warmup_cap = 0;
  int64_t measure_cap = 0;
  int64_t min_cycles = 0;
  std::mutex mu;
  std::condition_variable cv;  // the main thread waits on it for caps
};

// Wakes the main thread. Taking the mutex first means the wake-up cannot
// fall between its predicate check and its wait.
void Wake(Shared* s) {
  { std::lock_guard<std::mutex> lock(s->mu); }
  s->cv.notify_all();
}

struct PerThread {
  LatencyHistogram acquire;
  LatencyHistogram cycle;
  LatencyHistogram handoff;
  LatencyHistogram handoff_call;
  int64_t attempts = 0;
  int64_t successes = 0;
  ErrorCounts acquire_errors;
  ErrorCounts release_errors;
};

void Worker(Shared* s, CycleFn* fn, PerThread* out) {
  while (s->phase.load(std::memory_order_acquire) == kWaiting && NowNs() < s->hard_deadline_ns) {
    std::unique_lock<std::mutex> lock(s->mu);
    s->cv.wait_for(lock, std::chrono::milliseconds(5));
  }
  const int64_t max_cycles = s->warmup_cap + s->measure_cap + 1;
  for (int64_t i = 0; i < max_cycles; ++i) {
    const int phase = s->phase.load(std::memory_order_acquire);
    if (phase == kStop || NowNs() > s->hard_deadline_ns) break;
    CycleSample sample = (*fn)();
    if (phase == kWarmup) {
      if (s->warmup_done.fetch_add(1, std::memory_order_relaxed) + 1 == s->warmup_cap) Wake(s);
      continue;
    }
    // Recorded: it started during the measurement.
    const int64_t end = NowNs();
    int64_t prev = s->last_end_ns.load(std::memory_order_relaxed);
    while (prev < end && !s->last_end_ns.compare_exchange_weak(prev, end)) {
    }
    ++out->attempts;
    if (sample.acquire_ns >= 0) out->acquire.Record(sample.acquire_ns);
    if (sample.cycle_ns >= 0 && sample.acquire_status.ok()) out->cycle.Record(sample.cycle_ns);
    if (sample.handoff_ns >= 0) out->handoff.Record(sample.handoff_ns);
    if (sample.handoff_call_ns >= 0) out->handoff_call.Record(sample.handoff_call_ns);
    if (sample.ok()) ++out->successes;
    out->acquire_errors.Add(sample.acquire_status);
    out->release_errors.Add(sample.release_status);
    const int64_t done = s->measured_done.fetch_add(1, std::memory_order_relaxed) + 1;
    if (done == s->measure_cap || done == s->min_cycles) Wake(s);
  }
}

}  // namespace

RunOutput RunWorkload(std::vector<CycleFn> callers, const RunLimits& limits, RunHooks hooks) {
  RunOutput result;
  Shared s;
  s.warmup_cap = std::max<int64_t>(1, limits.warmup_iterations);
  s.measure_cap = std::max<int64_t>(1, limits.iterations);
  s.min_cycles = std::min(limits.min_iterations, s.measure_cap);
  const int64_t start_ns = NowNs();
  s.hard_deadline_ns =
      start_ns + absl::ToInt64Nanoseconds(limits.warmup + limits.duration + limits.grace);

  std::vector<PerThread> per(callers.size());
  std::vector<std::thread> threads;
  threads.reserve(callers.size());
  for (size_t i = 0; i < callers.size(); ++i) {
    threads.emplace_back(Worker, &s, &callers[i], &per[i]);
  }
  if (hooks.before_warmup) hooks.before_warmup();

  result.peak_is_per_run = ResetPeakRss();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.phase.store(kWarmup, std::memory_order_release);
  }
  s.cv.notify_all();

  // Warm-up: until its time has passed or its cycles are done.
  const auto warm_until =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(limits.warmup);
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait_until(lock, warm_until,
                    [&] { return s.warmup_done.load(std::memory_order_relaxed) >= s.warmup_cap; });
  }
  result.warmup_cycles = s.warmup_done.load();

  result.rss_start_kb = CurrentRssKb();
  const int64_t t0 = NowNs();
  s.last_end_ns.store(t0);
  s.phase.store(kMeasure, std::memory_order_release);
  if (hooks.at_measure_start) hooks.at_measure_start();

  auto cap_reached = [&] {
    return s.measured_done.load(std::memory_order_relaxed) >= s.measure_cap;
  };
  const auto measure_start = std::chrono::steady_clock::now();
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait_until(lock, measure_start + absl::ToChronoNanoseconds(limits.duration / 2),
                    cap_reached);
  }
  result.rss_mid_kb = CurrentRssKb();
  if (hooks.at_measure_mid) hooks.at_measure_mid();
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait_until(lock, measure_start + absl::ToChronoNanoseconds(limits.duration), cap_reached);
  }
  const int64_t min_cycles = s.min_cycles;
  if (s.measured_done.load() < min_cycles) {
    // Slow cycles: wait (bounded) for a few to complete.
    auto enough = [&] { return s.measured_done.load(std::memory_order_relaxed) >= min_cycles; };
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait_until(lock,
                    measure_start + absl::ToChronoNanoseconds(limits.duration + limits.grace / 2),
                    enough);
  }
  result.hit_iteration_cap = cap_reached();
  s.phase.store(kStop, std::memory_order_release);
  result.rss_end_kb = CurrentRssKb();
  if (hooks.at_measure_stop) hooks.at_measure_stop();

  for (std::thread& t : threads) t.join();
  result.peak_rss_kb = PeakRssKb();
  result.measured = absl::Nanoseconds(std::max<int64_t>(s.last_end_ns.load() - t0, 1));

  for (const PerThread& p : per) {
    result.acquire.Merge(p.acquire);
    result.cycle.Merge(p.cycle);
    result.handoff.Merge(p.handoff);
    result.handoff_call.Merge(p.handoff_call);
    result.attempts += p.attempts;
    result.successes += p.successes;
    result.acquire_errors.Merge(p.acquire_errors);
    result.release_errors.Merge(p.release_errors);
  }
  return result;
}

}  // namespace redlock::bench
