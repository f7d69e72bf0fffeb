// The bench's asynchronous runner (RunChains) and error causes, without a
// server: chains completed by a thread of the test, some of them inside the
// call that started them. No timing assertions: only counts and bounds.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/spread_profiles.h"
#include "bench/stats.h"
#include "bench/workload.h"
#include "gtest/gtest.h"

namespace redlock::bench {
namespace {

// Runs posted completions on its own thread, like a client's I/O thread.
class Completer {
 public:
  Completer() : thread_([this] { Run(); }) {}
  ~Completer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Post(CycleDone done, CycleSample sample) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.emplace_back(std::move(done), std::move(sample));
    }
    cv_.notify_all();
  }
  bool OnThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      auto [done, sample] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      done(std::move(sample));
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<CycleDone, CycleSample>> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest exists
};

CycleSample Sample(absl::Status acquire) {
  CycleSample s;
  s.acquire_ns = 1000;
  s.acquire_status = std::move(acquire);
  if (s.acquire_status.ok()) s.cycle_ns = 2000;
  return s;
}

RunLimits SmallLimits() {
  RunLimits limits;
  limits.warmup = absl::Milliseconds(5);
  limits.warmup_iterations = 50;
  limits.duration = absl::Seconds(30);  // the cycle cap ends the measurement
  limits.iterations = 2000;
  limits.grace = absl::Seconds(30);
  return limits;
}

TEST(RunChainsTest, CountsCyclesCompletedOnAnotherThreadAndInline) {
  Completer completer;
  std::vector<ChainFn> chains;
  for (int i = 0; i < 8; ++i) {
    // Every other cycle completes inside the call that started it, once the
    // chain runs on the completer's thread: no recursion, no lost cycle.
    chains.push_back([&completer, n = 0](CycleDone done) mutable {
      if (completer.OnThread() && ++n % 2 == 0) {
        done(Sample(absl::OkStatus()));
      } else {
        completer.Post(std::move(done), Sample(absl::OkStatus()));
      }
    });
  }
  RunOutput out = RunChains(std::move(chains), SmallLimits(), {});
  EXPECT_TRUE(out.hit_iteration_cap);
  EXPECT_GE(out.attempts, 2000);
  EXPECT_LE(out.attempts, 8 * (50 + 2000 + 1));  // the per-chain bound
  EXPECT_EQ(out.successes, out.attempts);
  EXPECT_EQ(out.cycle.count(), out.attempts);
  EXPECT_EQ(out.chains_left_running, 0);
  EXPECT_GT(out.usage_cycles, 0);
  EXPECT_LT(out.first_failure_ns, 0);
}

TEST(RunChainsTest, RecordsFailuresByCode) {
  Completer completer;
  std::vector<ChainFn> chains;
  for (int i = 0; i < 4; ++i) {
    chains.push_back([&completer, n = 0](CycleDone done) mutable {
      absl::Status st = ++n % 4 == 0
                            ? absl::UnavailableError("acquire \"r7\": 0 of 1 nodes granted")
                            : absl::OkStatus();
      completer.Post(std::move(done), Sample(std::move(st)));
    });
  }
  RunOutput out = RunChains(std::move(chains), SmallLimits(), {});
  ASSERT_GT(out.attempts, out.successes);
  EXPECT_EQ(out.acquire_errors.total(), out.attempts - out.successes);
  ASSERT_EQ(out.acquire_errors.causes().count("UNAVAILABLE"), 1u);
  const auto& causes = out.acquire_errors.causes().at("UNAVAILABLE");
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes.begin()->first, "acquire \"...\": # of # nodes granted");
  EXPECT_GE(out.first_failure_ns, 0);
  EXPECT_GE(out.last_failure_ns, out.first_failure_ns);
}

TEST(ErrorCountsTest, CausesBlankNamesAndNumbersAndAreBounded) {
  EXPECT_EQ(ErrorCounts::CauseOf("127.0.0.1:7003: no reply within 50ms"),
            "#.#.#.#:#: no reply within #ms");
  ErrorCounts e;
  for (int i = 0; i < 40; ++i) {
    e.Add(absl::UnavailableError(absl::StrCat("reason ", std::string(1, 'a' + i % 26))));
  }
  EXPECT_EQ(e.total(), 40);
  const auto& causes = e.causes().at("UNAVAILABLE");
  EXPECT_LE(causes.size(), ErrorCounts::kMaxCauses + 1);  // + "(other)"
  int64_t sum = 0;
  for (const auto& [cause, n] : causes) sum += n;
  EXPECT_EQ(sum, 40);
  ErrorCounts merged;
  merged.Merge(e);
  merged.Merge(e);
  EXPECT_EQ(merged.total(), 80);
}

// The processes scenario sends each worker's histograms as plain numbers.
TEST(LatencyHistogramTest, PartsRoundTrip) {
  LatencyHistogram h;
  for (int64_t v : {0, 7, 300, 4'000, 55'555, 1'000'000, 123'456'789}) h.Record(v);
  const LatencyHistogram back = LatencyHistogram::FromParts(h.ToParts());
  EXPECT_EQ(back.count(), h.count());
  EXPECT_EQ(back.min(), h.min());
  EXPECT_EQ(back.max(), h.max());
  EXPECT_EQ(back.sum(), h.sum());
  EXPECT_EQ(back.buckets(), h.buckets());
  LatencyHistogram::Parts bad;
  bad.buckets = {{-1, 3}, {LatencyHistogram::kBuckets, 2}};
  EXPECT_EQ(LatencyHistogram::FromParts(bad).count(), 0);
}

TEST(SpreadProfilesTest, ParsesDelaysInMillisecondsOrWithUnits) {
  absl::StatusOr<std::vector<absl::Duration>> ms = ParseLatencyProfile("0.1, 0.1,1,40,40");
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ(*ms, (std::vector<absl::Duration>{absl::Microseconds(100), absl::Microseconds(100),
                                              absl::Milliseconds(1), absl::Milliseconds(40),
                                              absl::Milliseconds(40)}));
  absl::StatusOr<std::vector<absl::Duration>> units = ParseLatencyProfile("250us,2ms,0");
  ASSERT_TRUE(units.ok()) << units.status();
  EXPECT_EQ(*units, (std::vector<absl::Duration>{absl::Microseconds(250), absl::Milliseconds(2),
                                                 absl::ZeroDuration()}));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseLatencyProfile("1,x").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseLatencyProfile("-1").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseLatencyProfile("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseLatencyProfile("11s").status()));
  // The built-in profiles: five nodes each.
  for (const SpreadProfile& p : BuiltInSpreadProfiles()) EXPECT_EQ(p.delays.size(), 5u) << p.name;
}

}  // namespace
}  // namespace redlock::bench
