#include "bench/workload.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "bench/alloc_count.h"

namespace redlock::bench {
namespace {

enum Phase : int { kWaiting = 0, kWarmup = 1, kMeasure = 2, kStop = 3 };

struct PerThread {
  LatencyHistogram acquire;
  LatencyHistogram cycle;
  LatencyHistogram handoff;
  LatencyHistogram handoff_call;
  int64_t attempts = 0;
  int64_t successes = 0;
  ErrorCounts acquire_errors;
  ErrorCounts release_errors;
  int64_t first_failure_end_ns = -1;  // steady clock
  int64_t last_failure_end_ns = -1;
};

struct Shared {
  std::atomic<int> phase{kWaiting};
  std::atomic<int64_t> warmup_done{0};
  std::atomic<int64_t> measured_done{0};
  std::atomic<int64_t> last_end_ns{0};
  int64_t hard_deadline_ns = 0;
  int64_t warmup_cap = 0;
  int64_t measure_cap = 0;
  int64_t min_cycles = 0;
  int64_t measure_start_ns = 0;
  std::mutex mu;
  std::condition_variable cv;  // the main thread waits on it for caps
  // Callers that finished the warm-up's cycles before the measurement began
  // wait for it (a thread on `cv`, a chain here, kicked when it begins):
  // otherwise a slow main thread lets them spend every cycle they may make
  // on the warm-up. Guarded by mu.
  std::vector<std::function<void()>> parked;
  // RunChains: chains not finished yet, and their one record (their
  // callbacks mostly run on one thread, the client's).
  std::atomic<int64_t> chains_running{0};
  std::mutex chain_mu;
  bool chains_collected = false;  // late callbacks record nothing
  PerThread chain_record;
};

// Wakes the main thread. Taking the mutex first means the wake-up cannot
// fall between its predicate check and its wait.
void Wake(Shared* s) {
  { std::lock_guard<std::mutex> lock(s->mu); }
  s->cv.notify_all();
}

// Records one cycle that started in `phase`.
void Record(Shared* s, int phase, const CycleSample& sample, PerThread* out) {
  if (phase == kWarmup) {
    if (s->warmup_done.fetch_add(1, std::memory_order_relaxed) + 1 == s->warmup_cap) Wake(s);
    return;
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
  if (sample.ok()) {
    ++out->successes;
  } else {
    if (out->first_failure_end_ns < 0) out->first_failure_end_ns = end;
    out->last_failure_end_ns = end;
  }
  out->acquire_errors.Add(sample.acquire_status);
  out->release_errors.Add(sample.release_status);
  const int64_t done = s->measured_done.fetch_add(1, std::memory_order_relaxed) + 1;
  if (done == s->measure_cap || done == s->min_cycles) Wake(s);
}

// The phase a new cycle would start in, or kStop when it must not start.
int PhaseForNextCycle(const Shared* s, int64_t started, int64_t max_cycles) {
  const int phase = s->phase.load(std::memory_order_acquire);
  if (phase == kStop || started >= max_cycles || NowNs() > s->hard_deadline_ns) return kStop;
  return phase;
}

int64_t MaxCyclesPerCaller(const Shared* s) { return s->warmup_cap + s->measure_cap + 1; }

// True once the warm-up has made its cycles (the caller should wait for
// the measurement).
bool WarmupDone(const Shared* s, int phase) {
  return phase == kWarmup && s->warmup_done.load(std::memory_order_relaxed) >= s->warmup_cap;
}

void Worker(Shared* s, CycleFn* fn, PerThread* out) {
  auto wait_while = [s](int phase) {
    while (s->phase.load(std::memory_order_acquire) == phase && NowNs() < s->hard_deadline_ns) {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait_for(lock, std::chrono::milliseconds(5));
    }
  };
  wait_while(kWaiting);
  const int64_t max_cycles = MaxCyclesPerCaller(s);
  for (int64_t i = 0; i < max_cycles; ++i) {
    int phase = PhaseForNextCycle(s, i, max_cycles);
    if (WarmupDone(s, phase)) {
      wait_while(kWarmup);
      phase = PhaseForNextCycle(s, i, max_cycles);
    }
    if (phase == kStop) break;
    CycleSample sample = (*fn)();
    Record(s, phase, sample, out);
  }
}

// Runs the phases on the calling thread: warm-up (`start_callers` is called
// once it has begun), measurement, stop. The callers keep running.
void RunPhases(Shared& s, const RunLimits& limits, RunHooks& hooks,
               const std::function<void()>& start_callers, RunOutput* result) {
  if (hooks.before_warmup) hooks.before_warmup();

  result->peak_is_per_run = ResetPeakRss();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.phase.store(kWarmup, std::memory_order_release);
  }
  s.cv.notify_all();
  start_callers();

  // Warm-up: until its time has passed or its cycles are done.
  const auto warm_until =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(limits.warmup);
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait_until(lock, warm_until,
                    [&] { return s.warmup_done.load(std::memory_order_relaxed) >= s.warmup_cap; });
  }
  result->warmup_cycles = s.warmup_done.load();

  result->rss_start_kb = CurrentRssKb();
  // The allocation count is open only over the measurement (every thread).
  OpenAllocationCount();
  const ProcessUsage usage_start = CurrentProcessUsage();
  s.measure_start_ns = NowNs();
  s.last_end_ns.store(s.measure_start_ns);
  std::vector<std::function<void()>> parked;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.phase.store(kMeasure, std::memory_order_release);
    parked.swap(s.parked);
  }
  s.cv.notify_all();
  for (auto& resume : parked) resume();
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
  result->rss_mid_kb = CurrentRssKb();
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
  result->hit_iteration_cap = cap_reached();
  s.phase.store(kStop, std::memory_order_release);
  result->usage = UsageDelta(CurrentProcessUsage(), usage_start);
  CloseAllocationCount();
  result->usage_cycles = s.measured_done.load();
  result->rss_end_kb = CurrentRssKb();
  if (hooks.at_measure_stop) hooks.at_measure_stop();
}

void Init(Shared& s, const RunLimits& limits) {
  s.warmup_cap = std::max<int64_t>(1, limits.warmup_iterations);
  s.measure_cap = std::max<int64_t>(1, limits.iterations);
  s.min_cycles = std::min(limits.min_iterations, s.measure_cap);
  s.hard_deadline_ns =
      NowNs() + absl::ToInt64Nanoseconds(limits.warmup + limits.duration + limits.grace);
}

void Collect(const Shared& s, const PerThread& p, RunOutput* result) {
  result->acquire.Merge(p.acquire);
  result->cycle.Merge(p.cycle);
  result->handoff.Merge(p.handoff);
  result->handoff_call.Merge(p.handoff_call);
  result->attempts += p.attempts;
  result->successes += p.successes;
  result->acquire_errors.Merge(p.acquire_errors);
  result->release_errors.Merge(p.release_errors);
  if (p.first_failure_end_ns >= 0) {
    const int64_t first = p.first_failure_end_ns - s.measure_start_ns;
    const int64_t last = p.last_failure_end_ns - s.measure_start_ns;
    if (result->first_failure_ns < 0 || first < result->first_failure_ns) {
      result->first_failure_ns = first;
    }
    result->last_failure_ns = std::max(result->last_failure_ns, last);
  }
  result->measured =
      absl::Nanoseconds(std::max<int64_t>(s.last_end_ns.load() - s.measure_start_ns, 1));
}

// ---- Chains -------------------------------------------------------------------------

struct Chain {
  std::shared_ptr<Shared> shared;
  ChainFn fn;
  // Kick() calls not yet served; whoever raises it from 0 runs the cycles,
  // so a cycle completed inside its own start does not recurse.
  std::atomic<int> kicks{0};
  int64_t started = 0;  // only the thread serving the kicks touches these
  int phase = kWaiting;
};

void Kick(const std::shared_ptr<Chain>& c);

void StartCycle(const std::shared_ptr<Chain>& c) {
  Shared* s = c->shared.get();
  int phase = PhaseForNextCycle(s, c->started, MaxCyclesPerCaller(s));
  if (WarmupDone(s, phase)) {
    {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->phase.load(std::memory_order_acquire) == kWarmup) {
        s->parked.push_back([c] { Kick(c); });
        return;
      }
    }
    phase = PhaseForNextCycle(s, c->started, MaxCyclesPerCaller(s));  // it has just begun
  }
  if (phase == kStop) {
    if (s->chains_running.fetch_sub(1) == 1) Wake(s);
    return;
  }
  ++c->started;
  c->phase = phase;
  c->fn([c](CycleSample sample) {
    Shared* s = c->shared.get();
    {
      std::lock_guard<std::mutex> lock(s->chain_mu);
      if (!s->chains_collected) Record(s, c->phase, sample, &s->chain_record);
    }
    Kick(c);
  });
}

void Kick(const std::shared_ptr<Chain>& c) {
  if (c->kicks.fetch_add(1) != 0) return;
  do {
    StartCycle(c);
  } while (c->kicks.fetch_sub(1) != 1);
}

}  // namespace

RunOutput RunWorkload(std::vector<CycleFn> callers, const RunLimits& limits, RunHooks hooks) {
  RunOutput result;
  Shared s;
  Init(s, limits);
  std::vector<PerThread> per(callers.size());
  std::vector<std::thread> threads;
  threads.reserve(callers.size());
  for (size_t i = 0; i < callers.size(); ++i) {
    threads.emplace_back(Worker, &s, &callers[i], &per[i]);
  }
  RunPhases(
      s, limits, hooks, [] {}, &result);
  for (std::thread& t : threads) t.join();
  result.peak_rss_kb = PeakRssKb();
  for (const PerThread& p : per) Collect(s, p, &result);
  return result;
}

RunOutput RunChains(std::vector<ChainFn> chains, const RunLimits& limits, RunHooks hooks) {
  RunOutput result;
  auto s = std::make_shared<Shared>();
  Init(*s, limits);
  std::vector<std::shared_ptr<Chain>> all;
  for (ChainFn& fn : chains) {
    auto c = std::make_shared<Chain>();
    c->shared = s;
    c->fn = std::move(fn);
    all.push_back(std::move(c));
  }
  s->chains_running.store(static_cast<int64_t>(all.size()));
  RunPhases(
      *s, limits, hooks,
      [&] {
        for (const auto& c : all) Kick(c);
      },
      &result);
  {
    // Every cycle is bounded by the lock's own timeouts; the deadline only
    // guards against a client that never calls back.
    std::unique_lock<std::mutex> lock(s->mu);
    s->cv.wait_until(
        lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(s->hard_deadline_ns)),
        [&] { return s->chains_running.load() <= 0; });
  }
  result.chains_left_running = std::max<int64_t>(0, s->chains_running.load());
  result.peak_rss_kb = PeakRssKb();
  std::lock_guard<std::mutex> lock(s->chain_mu);
  s->chains_collected = true;
  Collect(*s, s->chain_record, &result);
  return result;
}

}  // namespace redlock::bench
