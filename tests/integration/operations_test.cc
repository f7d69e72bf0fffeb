// Living with the lock in production, against five real redis-servers:
// cancellation from another thread, the at-risk and lost signals, the
// observer's events and the metrics collector's Prometheus text.

#include <string.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "redlock/metrics.h"
#include "redlock/mutex.h"
#include "redlock/observer.h"
#include "redlock/outcome.h"
#include "testkit/fleet_suite.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using SteadyClock = std::chrono::steady_clock;

// Checks `text` against the Prometheus text exposition format (0.0.4):
// HELP/TYPE lines before a metric's samples, metric and label names, label
// values quoted and escaped, numeric values, histograms with cumulative
// buckets ending in le="+Inf" equal to _count. Returns the problems found,
// and fills `samples` with "name{labels}" -> value.
std::vector<std::string> CheckExposition(const std::string& text,
                                         std::map<std::string, double>* samples) {
  std::vector<std::string> problems;
  const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
  const std::regex type(
      R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*")*\})? ([^ ]+))");
  std::map<std::string, std::string> types;
  std::map<std::string, double> last_bucket;  // histogram series -> last cumulative count
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::string l(line);
    std::smatch m;
    if (std::regex_match(l, m, help)) continue;
    if (std::regex_match(l, m, type)) {
      if (types.count(m[1])) problems.push_back("TYPE twice: " + l);
      types[m[1]] = m[2];
      continue;
    }
    if (!std::regex_match(l, m, sample)) {
      problems.push_back("not a sample line: " + l);
      continue;
    }
    std::string name = m[1];
    double value = 0;
    std::string v = m[7];
    if (v == "+Inf") {
      value = 1e308;
    } else if (!absl::SimpleAtod(v, &value)) {
      problems.push_back("bad value: " + l);
    }
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (absl::EndsWith(name, suffix) &&
          types.count(name.substr(0, name.size() - strlen(suffix))) &&
          types[name.substr(0, name.size() - strlen(suffix))] == "histogram") {
        family = name.substr(0, name.size() - strlen(suffix));
      }
    }
    if (!types.count(family)) problems.push_back("sample before its TYPE: " + l);
    std::string labels = m[2];
    (*samples)[name + labels] = value;
    if (absl::EndsWith(name, "_bucket")) {
      std::string series = name + std::regex_replace(labels, std::regex(R"(,?le="[^"]*")"), "");
      if (value < last_bucket[series]) problems.push_back("buckets not cumulative: " + l);
      last_bucket[series] = value;
      if (labels.find("le=\"+Inf\"") != std::string::npos) {
        std::string count =
            family + "_count" + std::regex_replace(labels, std::regex(R"(,?le="\+Inf")"), "");
        if (count.substr(count.size() - 2) == "{}") count = count.substr(0, count.size() - 2);
        last_bucket[series] = -1;  // a new series may start
        (*samples)["+Inf:" + count] = value;
      }
    }
  }
  for (const auto& [key, v] : *samples) {
    if (key.rfind("+Inf:", 0) != 0) continue;
    auto it = samples->find(key.substr(5));
    if (it == samples->end() || it->second != v)
      problems.push_back("+Inf bucket != _count: " + key);
  }
  return problems;
}

class OperationsTest : public testkit::FleetSuite {
 protected:
  // Options whose waiting acquisitions pause 5 s and more between attempts.
  Options LongPauses() {
    Options o = MakeOptions();
    o.retry_delay = absl::Seconds(40);
    o.wait_poll_max = absl::Seconds(20);
    return o;
  }
  // A bounded wait until an attempt failed: its cleanup reached node 0,
  // whose scripts numbered `releases` before.
  bool AttemptFailed(long long releases) {
    return testkit::Eventually([&] { return CommandCalls(0, "evalsha") > releases; }, true,
                               absl::Seconds(5));
  }

  int KeysOf(const std::string& resource) {
    int n = 0;
    for (int i = 0; i < 5; ++i) {
      absl::StatusOr<testkit::RedisValue> v = fleet_->Command(i, {"EXISTS", prefix_ + resource});
      n += v.ok() && v->integer == 1;
    }
    return n;
  }
};

TEST_F(OperationsTest, CancellingALongWaitFromAnotherThreadReturnsPromptlyAndLeavesNothing) {
  auto holder = MakeClient();
  auto waiter = MakeClient(LongPauses());
  absl::StatusOr<Lease> held = holder->TryAcquire("busy", absl::Seconds(30));
  REDLOCK_ASSERT_OK(held.status());
  const long long releases_before = CommandCalls(0, "evalsha");
  StopSource stop;
  std::promise<std::pair<absl::Status, SteadyClock::time_point>> got;
  std::thread t([&] {
    absl::StatusOr<Lease> l =
        waiter->Acquire("busy", absl::Seconds(10), absl::InfiniteDuration(), stop.token());
    got.set_value({l.status(), SteadyClock::now()});
  });
  ASSERT_TRUE(AttemptFailed(releases_before)) << "the first attempt never failed";
  SteadyClock::time_point asked = SteadyClock::now();
  stop.RequestStop();
  auto future = got.get_future();
  // Not after the polling pause it was in (at least 5 s), nor the wait.
  ASSERT_EQ(future.wait_for(std::chrono::seconds(4)), std::future_status::ready);
  auto [status, at] = future.get();
  t.join();
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
  EXPECT_EQ(GetOutcome(status)->kind, Outcome::Kind::kCancelled);
  std::printf("cancellation latency: %s\n",
              absl::FormatDuration(absl::FromChrono(at - asked)).c_str());
  REDLOCK_ASSERT_OK(holder->Release(*held));
  EXPECT_EQ(testkit::Eventually([&] { return KeysOf("busy"); }, 0), 0);
}

// The waiter is the client's only caller, so it polls the nodes itself
// between its attempts; without release notifications nothing else wakes
// it. A stop must end that poll, not the node_timeout it sleeps for.
TEST_F(OperationsTest, CancellingACallerThatPollsItselfReturnsWithoutWaitingForItsPoll) {
  Options o = LongPauses();
  o.release_notifications = false;
  o.node_timeout = absl::Seconds(8);  // the longest the poller sleeps
  auto waiter = MakeClient(o);
  ASSERT_NO_FATAL_FAILURE(HoldElsewhere("polled"));
  const long long releases_before = CommandCalls(0, "evalsha");
  StopSource stop;
  std::promise<absl::Status> got;
  std::thread t([&] {
    got.set_value(
        waiter->Acquire("polled", absl::Seconds(10), absl::InfiniteDuration(), stop.token())
            .status());
  });
  // The waiter now sleeps in its poll for seconds.
  ASSERT_TRUE(AttemptFailed(releases_before)) << "the first attempt never failed";
  stop.RequestStop();
  auto future = got.get_future();
  EXPECT_EQ(future.wait_for(std::chrono::seconds(4)), std::future_status::ready)
      << "the cancelled caller slept on in its poll";
  absl::Status status = future.get();
  t.join();
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
}

// Observer events come from the client's threads (observer.h), never from a
// thread that merely requested a stop.
TEST_F(OperationsTest, ACancelledAcquisitionIsObservedOnTheClientsThreadsNotTheStoppingOne) {
  struct ThreadLog : Observer {
    void OnAcquire(const AcquireEvent& e) override {
      std::lock_guard<std::mutex> lock(mu);
      threads.push_back(std::this_thread::get_id());
      statuses.push_back(e.status);
    }
    std::mutex mu;
    std::vector<std::thread::id> threads;
    std::vector<absl::Status> statuses;
  };
  auto log = std::make_shared<ThreadLog>();
  Options o = LongPauses();
  o.observer = log;
  auto waiter = MakeClient(o);
  ASSERT_NO_FATAL_FAILURE(HoldElsewhere("observed"));
  const long long releases_before = CommandCalls(0, "evalsha");
  StopSource stop;
  std::promise<absl::Status> got;
  waiter->AcquireAsync("observed", absl::Seconds(10), absl::InfiniteDuration(), stop.token(),
                       [&](absl::StatusOr<Lease> l) { got.set_value(l.status()); });
  ASSERT_TRUE(AttemptFailed(releases_before)) << "the first attempt never failed";
  std::thread stopper([&] { stop.RequestStop(); });
  const std::thread::id stopper_id = stopper.get_id();
  stopper.join();
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(4)), std::future_status::ready);
  EXPECT_TRUE(absl::IsCancelled(future.get()));
  std::lock_guard<std::mutex> lock(log->mu);
  ASSERT_EQ(log->threads.size(), 1u);
  EXPECT_TRUE(absl::IsCancelled(log->statuses[0])) << log->statuses[0];
  EXPECT_NE(log->threads[0], stopper_id) << "observed on the thread that requested the stop";
  EXPECT_NE(log->threads[0], std::this_thread::get_id());
}

TEST_F(OperationsTest, CancellingAnAttemptInFlightOnStoppedNodesLeavesNothing) {
  Options o = MakeOptions();
  o.node_timeout = absl::Seconds(30);  // the attempt would wait this long
  auto client = MakeClient(o);
  for (int i : {2, 3, 4}) REDLOCK_ASSERT_OK(fleet_->Stop(i));
  const long long sets_before[2] = {CommandCalls(0, "set"), CommandCalls(1, "set")};
  StopSource stop;
  std::promise<absl::Status> got;
  std::thread t([&] {
    got.set_value(
        client->Acquire("inflight", absl::Seconds(10), absl::Seconds(30), stop.token()).status());
  });
  // SETs sent (the running nodes executed theirs), no quorum yet.
  ASSERT_TRUE(testkit::Eventually(
      [&] {
        return CommandCalls(0, "set") > sets_before[0] && CommandCalls(1, "set") > sets_before[1];
      },
      true, absl::Seconds(5)));
  stop.RequestStop();
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(4)), std::future_status::ready)
      << "cancelled without waiting for the stopped nodes' deadline";
  EXPECT_TRUE(absl::IsCancelled(future.get()));
  t.join();
  for (int i : {2, 3, 4}) REDLOCK_ASSERT_OK(fleet_->Continue(i));
  // The stopped nodes execute the SET when they resume; the release queued
  // behind it on the same connection removes it.
  EXPECT_EQ(testkit::Eventually([&] { return KeysOf("inflight"); }, 0, absl::Seconds(5)), 0);
}

TEST_F(OperationsTest, AStopRequestedBeforeTheCallSendsNothing) {
  auto client = MakeClient();
  StopSource stop;
  stop.RequestStop();
  absl::StatusOr<Lease> l =
      client->Acquire("never", absl::Seconds(10), absl::Seconds(5), stop.token());
  EXPECT_TRUE(absl::IsCancelled(l.status())) << l.status();
  EXPECT_EQ(KeysOf("never"), 0);
}

TEST_F(OperationsTest, AtRiskThenLostFireInOrderWhenExtensionsAreBlocked) {
  auto client = MakeClient();
  absl::StatusOr<Lease> l = client->TryAcquire("risky", absl::Milliseconds(900));
  REDLOCK_ASSERT_OK(l.status());
  std::mutex mu;
  std::vector<std::string> order;
  RenewOptions ro;
  ro.on_at_risk = [&](const Lease& lease, const absl::Status& why) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(absl::StrCat("at_risk ", lease.resource()));
  };
  std::promise<absl::Status> lost;
  auto renewal = client->AutoRenew(*l, ro, [&](absl::Status why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back("lost");
    }
    lost.set_value(why);
  });
  REDLOCK_ASSERT_OK(renewal.status());
  StopToken lost_token = (*renewal)->lost();
  EXPECT_FALSE(lost_token.stop_requested());
  // Extensions cannot reach a quorum while three nodes are stopped.
  for (int i : {0, 1, 2}) REDLOCK_ASSERT_OK(fleet_->Stop(i));
  auto future = lost.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  absl::Status why = future.get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(why)) << why;
  EXPECT_TRUE(lost_token.stop_requested());
  EXPECT_FALSE((*renewal)->active());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order, (std::vector<std::string>{"at_risk risky", "lost"}));
}

// A Mutex without auto-renew only watches its lease: at risk once less than
// `at_risk` of validity is left (here after about 0.9 s), not when an
// extension would have been due (3.3 s).
TEST_F(OperationsTest, AWatchedMutexIsAtRiskWhenItsValidityRunsLow) {
  auto client = MakeClient();
  std::promise<SteadyClock::time_point> risk;
  MutexOptions mo;
  mo.ttl = absl::Seconds(10);
  mo.auto_renew = false;
  mo.renew.at_risk = absl::Seconds(9);
  std::atomic<int> calls{0};
  mo.renew.on_at_risk = [&](const Lease&, const absl::Status&) {
    if (calls++ == 0) risk.set_value(SteadyClock::now());
  };
  Mutex m(client.get(), "watched", mo);
  ASSERT_TRUE(m.try_lock()) << m.status();
  const Lease lease = m.lease();
  auto future = risk.get_future();
  ASSERT_EQ(future.wait_until(lease.acquired_at() + std::chrono::milliseconds(2500)),
            std::future_status::ready)
      << "at-risk waited for the extension time";
  SteadyClock::time_point at = future.get();
  EXPECT_GE(at, lease.valid_until() - std::chrono::seconds(9));
  EXPECT_TRUE(m.held_ok()) << "at risk, not lost";
  m.unlock();
  EXPECT_EQ(calls.load(), 1);
}

// Extensions at half the ttl: the default at-risk point (one period of
// validity left) comes just before each is due. Healthy renewals never
// raise it, so the CLI's --at-risk-signal never stops healthy work.
TEST_F(OperationsTest, HealthyRenewalsAtHalfTheTtlAreNeverAtRisk) {
  auto client = MakeClient();
  absl::StatusOr<Lease> l = client->TryAcquire("healthy", absl::Milliseconds(400));
  REDLOCK_ASSERT_OK(l.status());
  std::atomic<int> at_risk{0};
  RenewOptions ro;
  ro.interval_fraction = 0.5;
  ro.on_at_risk = [&](const Lease&, const absl::Status&) { ++at_risk; };
  auto renewal = client->AutoRenew(*l, ro, [](absl::Status) {});
  REDLOCK_ASSERT_OK(renewal.status());
  ASSERT_TRUE(
      testkit::Eventually([&] { return (*renewal)->renewals() >= 4; }, true, absl::Seconds(10)));
  EXPECT_EQ(at_risk.load(), 0) << "at risk on healthy renewals";
  EXPECT_TRUE((*renewal)->active());
  REDLOCK_EXPECT_OK(client->Release(*l));
}

// One node lost the key and two are unreachable: the token may still be on
// a quorum (the two silent nodes and two that confirmed). The renewal keeps
// trying, and succeeds once the silent nodes answer again.
TEST_F(OperationsTest, ARefusalWithUnreachableNodesIsNotALoss) {
  struct Extensions : Observer {
    void OnExtend(const ExtendEvent& e) override { e.status.ok() ? ++ok : ++failed; }
    std::atomic<int> ok{0}, failed{0};
  };
  auto extensions = std::make_shared<Extensions>();
  Options o = MakeOptions();
  o.observer = extensions;
  auto client = MakeClient(o);
  absl::StatusOr<Lease> l = client->TryAcquire("partial", absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  REDLOCK_ASSERT_OK(fleet_->Command(0, {"DEL", prefix_ + "partial"}).status());
  for (int i : {3, 4}) REDLOCK_ASSERT_OK(fleet_->Stop(i));
  std::atomic<bool> lost{false};
  RenewOptions ro;
  ro.interval_fraction = 0.05;  // every 250 ms
  auto renewal = client->AutoRenew(*l, ro, [&](absl::Status) { lost = true; });
  REDLOCK_ASSERT_OK(renewal.status());
  ASSERT_TRUE(
      testkit::Eventually([&] { return extensions->failed.load() >= 2; }, true, absl::Seconds(4)));
  EXPECT_FALSE(lost.load()) << (*renewal)->status();
  EXPECT_TRUE((*renewal)->active());
  for (int i : {3, 4}) REDLOCK_ASSERT_OK(fleet_->Continue(i));
  EXPECT_TRUE(
      testkit::Eventually([&] { return (*renewal)->renewals() >= 1; }, true, absl::Seconds(3)));
  EXPECT_FALSE(lost.load()) << (*renewal)->status();
  REDLOCK_EXPECT_OK(client->Release(*l));
}

TEST_F(OperationsTest, ADeletedKeyIsLostAtOnceAndBoundedRenewalStops) {
  auto client = MakeClient();
  absl::StatusOr<Lease> l = client->TryAcquire("gone", absl::Milliseconds(600));
  REDLOCK_ASSERT_OK(l.status());
  std::promise<absl::Status> lost;
  auto renewal =
      client->AutoRenew(*l, RenewOptions(), [&](absl::Status why) { lost.set_value(why); });
  REDLOCK_ASSERT_OK(renewal.status());
  for (int i : {0, 1, 2}) REDLOCK_ASSERT_OK(fleet_->Command(i, {"DEL", prefix_ + "gone"}).status());
  auto future = lost.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(3)), std::future_status::ready);
  EXPECT_TRUE(absl::IsFailedPrecondition(future.get()));
  EXPECT_TRUE((*renewal)->lost().stop_requested());

  // max_hold: no extension past it; the lease runs out and is reported lost.
  absl::StatusOr<Lease> b = client->TryAcquire("bounded", absl::Milliseconds(300));
  REDLOCK_ASSERT_OK(b.status());
  RenewOptions bounded;
  bounded.max_hold = absl::Milliseconds(500);
  std::promise<absl::Status> ran_out;
  auto r2 = client->AutoRenew(*b, bounded, [&](absl::Status why) { ran_out.set_value(why); });
  REDLOCK_ASSERT_OK(r2.status());
  auto f2 = ran_out.get_future();
  ASSERT_EQ(f2.wait_for(std::chrono::seconds(3)), std::future_status::ready);
  absl::Status w2 = f2.get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(w2)) << w2;
  EXPECT_THAT(std::string(w2.message()), HasSubstr("maximum hold"));
  EXPECT_LE((*r2)->lease().valid_until() - b->acquired_at(),
            absl::ToChronoNanoseconds(absl::Milliseconds(500)));
}

TEST_F(OperationsTest, TheCollectorCountsWhatTheTestDidAndRendersValidExposition) {
  auto metrics = std::make_shared<MetricsCollector>();
  Options o = MakeOptions();
  o.observer = metrics;
  auto client = MakeClient(o);
  auto other = MakeClient();
  for (int i = 0; i < 7; ++i) {
    absl::StatusOr<Lease> l = client->TryAcquire(absl::StrCat("m", i), absl::Seconds(10));
    REDLOCK_ASSERT_OK(l.status());
    REDLOCK_ASSERT_OK(client->Extend(*l, absl::Seconds(10)).status());
    REDLOCK_ASSERT_OK(client->Release(*l));
  }
  absl::StatusOr<Lease> held = other->TryAcquire("taken", absl::Seconds(10));
  REDLOCK_ASSERT_OK(held.status());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::IsAborted(client->TryAcquire("taken", absl::Seconds(10)).status()));
  }
  EXPECT_FALSE(client->Extend(Lease::ForToken("taken", "not-mine"), absl::Seconds(1)).ok());
  // The events of a call are delivered before the call returns.
  EXPECT_EQ(metrics->acquisitions(Outcome::Kind::kSucceeded), 7);
  EXPECT_EQ(metrics->acquisitions(Outcome::Kind::kHeldElsewhere), 3);
  EXPECT_EQ(metrics->extensions(Outcome::Kind::kSucceeded), 7);
  EXPECT_EQ(metrics->extensions(Outcome::Kind::kLeaseLost), 1);
  EXPECT_EQ(metrics->releases(Outcome::Kind::kSucceeded), 7);

  std::string text = metrics->PrometheusText();
  std::map<std::string, double> samples;
  std::vector<std::string> problems = CheckExposition(text, &samples);
  EXPECT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n") << "\n" << text;
  EXPECT_EQ(samples["redlock_acquisitions_total{outcome=\"succeeded\"}"], 7);
  EXPECT_EQ(samples["redlock_acquisitions_total{outcome=\"held_elsewhere\"}"], 3);
  EXPECT_EQ(samples["redlock_acquisition_duration_seconds_count{outcome=\"succeeded\"}"], 7);
  EXPECT_EQ(samples["redlock_releases_total{outcome=\"succeeded\"}"], 7);
  EXPECT_EQ(samples[absl::StrCat("redlock_node_up{node=\"", fleet_->endpoint(0).ToString(), "\"}")],
            1);
  // Every node answered every round that waited for it, or was not waited for.
  double answers = 0;
  for (const auto& [k, v] : samples) {
    if (k.rfind("redlock_node_answers_total", 0) == 0) answers += v;
  }
  EXPECT_EQ(answers, 5 * (7 * 3 + 3 + 1));
  REDLOCK_EXPECT_OK(other->Release(*held));
}

TEST(ExpositionCheckerTest, RejectsMalformedText) {
  std::map<std::string, double> samples;
  EXPECT_FALSE(CheckExposition("no_type_first 1\n", &samples).empty());
  EXPECT_FALSE(CheckExposition("# TYPE x counter\nx{bad label=\"v\"} 1\n", &samples).empty());
  EXPECT_FALSE(CheckExposition("# TYPE x counter\nx one\n", &samples).empty());
  EXPECT_FALSE(CheckExposition("# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} "
                               "2\nh_sum 1\nh_count 2\n",
                               &samples)
                   .empty());
  samples.clear();
  EXPECT_TRUE(CheckExposition("# HELP x a counter\n# TYPE x counter\nx{a=\"b\\\"c\"} 1\n", &samples)
                  .empty());
}

}  // namespace
}  // namespace redlock
