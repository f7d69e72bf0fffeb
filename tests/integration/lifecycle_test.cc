// Mutex, RecursiveMutex, blocking acquisition woken by releases, and
// auto-renewal, against five real redis-server processes.

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "redlock/mutex.h"
#include "redlock/outcome.h"
#include "redlock/scoped_lease.h"
#include "testkit/fleet_suite.h"
#include "testkit/redis.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::RedisValue;
using SteadyClock = std::chrono::steady_clock;

class LifecycleTest : public testkit::FleetSuite {
 protected:
  bool KeyOn(int node, const std::string& resource) {
    absl::StatusOr<RedisValue> v = fleet_->Command(node, {"EXISTS", prefix_ + resource});
    return v.ok() && v->integer == 1;
  }
  int KeyCount(const std::string& resource) {
    int n = 0;
    for (int i = 0; i < 5; ++i) n += KeyOn(i, resource);
    return n;
  }
  // After a release (which returns at a quorum, the rest following).
  int KeyCountSettled(const std::string& resource) {
    return testkit::Eventually([&] { return KeyCount(resource); }, 0);
  }
  // Bounded wait until `waiters` waiting acquisitions of `resource` failed
  // their first attempt (its cleanup reached node 0: `releases` counted
  // node 0's scripts before) and release announcements reach this client.
  // Releases node 0 ran (a failed attempt's cleanup included): scripts, or
  // on a node that forbids them the transactions' ends (EXEC or UNWATCH).
  // A failed attempt's cleanup on node 0: a script, a transaction (or its
  // UNWATCH) on a node that forbids scripting, or DELIFEQ where the server
  // has it (Valkey 9.1).
  long long ReleasesRun() { return CommandCalls(0, "evalsha|exec|unwatch|delifeq"); }
  bool WaitingForARelease(const std::string& resource, long long releases, int waiters) {
    return testkit::Eventually(
        [&] { return ReleasesRun() >= releases + waiters && ReleasesHeardOnEveryNode(resource); },
        true, absl::Seconds(5));
  }
  // `waiter`'s Acquire of `resource` (ttl 10 s, waiting up to 20 s) on a
  // thread of its own: the result and when it came.
  static std::future<std::pair<absl::StatusOr<Lease>, SteadyClock::time_point>> AcquireOnAThread(
      Client& waiter, const std::string& resource) {
    return std::async(std::launch::async, [&waiter, resource] {
      absl::StatusOr<Lease> l = waiter.Acquire(resource, absl::Seconds(10), absl::Seconds(20));
      return std::make_pair(std::move(l), SteadyClock::now());
    });
  }
};

// Over plain TCP and over TLS: the release announcements come over the
// subscriber connection, TLS like the command connection.
class LifecycleCoreTest : public testkit::OverTransports<LifecycleTest> {};
REDLOCK_INSTANTIATE_OVER_TRANSPORTS(LifecycleCoreTest);

TEST_F(LifecycleTest, StandardLockTypesWork) {
  auto c = MakeClient();
  Mutex a(c.get(), "a");
  Mutex b(c.get(), "b");
  {
    std::lock_guard<Mutex> guard(a);
    EXPECT_TRUE(a.held_ok());
    EXPECT_GE(KeyCount("a"), 3);
    EXPECT_EQ(a.lease().resource(), "a");
  }
  EXPECT_EQ(KeyCountSettled("a"), 0);
  {
    std::unique_lock<Mutex> lock(a, std::chrono::milliseconds(500));
    ASSERT_TRUE(lock.owns_lock()) << a.status();
    // Held: another client's try_lock fails with the reason in status().
    auto other = MakeClient();
    Mutex contender(other.get(), "a");
    EXPECT_FALSE(contender.try_lock());
    EXPECT_EQ(contender.status().code(), absl::StatusCode::kAborted);
    EXPECT_FALSE(contender.try_lock_for(std::chrono::milliseconds(100)));
    EXPECT_EQ(contender.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_FALSE(
        contender.try_lock_until(std::chrono::system_clock::now() + std::chrono::milliseconds(50)));
  }
  {
    std::scoped_lock both(a, b);
    EXPECT_TRUE(a.held_ok());
    EXPECT_TRUE(b.held_ok());
  }
  EXPECT_EQ(KeyCountSettled("a") + KeyCountSettled("b"), 0);
  // A stray unlock is an error in status(), not undefined behaviour.
  a.unlock();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(LifecycleTest, RecursionDepthThreeThenUnlockLeavesTheResourceFree) {
  auto c = MakeClient();
  RecursiveMutex m(c.get(), "r");
  m.lock();
  ASSERT_TRUE(m.try_lock());
  ASSERT_TRUE(m.try_lock_for(std::chrono::milliseconds(10)));
  EXPECT_EQ(m.depth(), 3);
  std::string token = m.lease().token();
  // One lease on the nodes however deep.
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<RedisValue> v = fleet_->Command(i, {"GET", prefix_ + "r"});
    if (v.ok() && v->type == RedisValue::Type::kString) {
      EXPECT_EQ(v->str, token);
    }
  }
  // Another thread cannot unlock it.
  std::thread([&] { m.unlock(); }).join();
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.depth(), 3);
  m.unlock();
  m.unlock();
  EXPECT_GE(KeyCount("r"), 3) << "still held at depth 1";
  m.unlock();
  EXPECT_EQ(m.depth(), 0);
  EXPECT_EQ(KeyCountSettled("r"), 0);
  auto other = MakeClient();
  absl::StatusOr<Lease> l = other->TryAcquire("r", absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  REDLOCK_EXPECT_OK(other->Release(*l));
}

TEST_P(LifecycleCoreTest, WaiterIsWokenByTheReleaseNotByPolling) {
  Options o = MakeOptions();
  o.retry_delay = absl::Seconds(20);  // first polling pause: 5 s
  o.wait_poll_max = absl::Seconds(5);
  auto holder = MakeClient(o);
  auto waiter = MakeClient(o);
  absl::StatusOr<Lease> held = holder->TryAcquire("hot", absl::Seconds(30));
  REDLOCK_ASSERT_OK(held.status());
  const long long releases = ReleasesRun();
  auto got = AcquireOnAThread(*waiter, "hot");
  ASSERT_TRUE(WaitingForARelease("hot", releases, 1)) << "the waiter never failed once";
  SteadyClock::time_point released = SteadyClock::now();
  REDLOCK_ASSERT_OK(holder->Release(*held));
  auto [lease, at] = got.get();
  REDLOCK_ASSERT_OK(lease.status());
  absl::Duration handoff = absl::FromChrono(at - released);
  EXPECT_LT(handoff, absl::Seconds(1)) << "the waiter polled instead of being woken";
  REDLOCK_EXPECT_OK(waiter->Release(*lease));
}

// A release that reaches the nodes 200 ms apart (by hand here; the library's
// own Release staggers like this under CPU load): the waiter must still be
// woken by the announcements, not fall back to its multi-second polling.
TEST_F(LifecycleTest, AStaggeredReleaseStillWakesTheWaiter) {
  Options o = MakeOptions();
  o.retry_delay = absl::Seconds(40);  // first polling pause: 5-15 s
  o.wait_poll_max = absl::Seconds(20);
  auto waiter = MakeClient(o);
  const std::string key = prefix_ + "staggered";
  for (int i = 0; i < 5; ++i) {
    REDLOCK_ASSERT_OK(fleet_->Command(i, {"SET", key, "tok", "NX", "PX", "60000"}).status());
  }
  const long long releases = ReleasesRun();
  auto got = AcquireOnAThread(*waiter, "staggered");
  ASSERT_TRUE(WaitingForARelease("staggered", releases, 1)) << "the waiter never failed once";
  auto release = [&](int node) {
    REDLOCK_ASSERT_OK(fleet_
                          ->Command(node, {"EVAL",
                                           "if redis.call('get', KEYS[1]) == ARGV[1] then "
                                           "redis.call('del', KEYS[1]); "
                                           "redis.call('publish', ARGV[2], '') end",
                                           "1", key, "tok", "redlock:release:" + key})
                          .status());
  };
  release(0);
  // The stagger itself (the scenario, not a wait for a condition).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  SteadyClock::time_point last = SteadyClock::now();
  for (int i = 1; i < 5; ++i) release(i);
  auto [lease, at] = got.get();
  REDLOCK_ASSERT_OK(lease.status());
  // Polling would take 5 s at least; being woken takes a round trip.
  EXPECT_LT(absl::FromChrono(at - last), absl::Seconds(3)) << "woken by polling, not announcements";
  REDLOCK_EXPECT_OK(waiter->Release(*lease));
}

// The announcement says only that the key was released. Its token would let
// any subscriber extend or release a lease that still holds on the nodes a
// partial release did not reach.
TEST_F(LifecycleTest, AReleaseAnnouncementCarriesNoToken) {
  auto c = MakeClient();
  const std::string channel = "redlock:release:" + prefix_ + "announced";
  testkit::RedisConnection subscriber(fleet_->endpoint(0));
  REDLOCK_ASSERT_OK(subscriber.Connect(absl::Seconds(2), absl::Seconds(5)));
  REDLOCK_ASSERT_OK(subscriber.Command({"SUBSCRIBE", channel}).status());
  absl::StatusOr<Lease> l = c->TryAcquire("announced", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  REDLOCK_ASSERT_OK(c->Release(*l));
  ASSERT_FALSE(testkit::Eventually([&] { return KeyOn(0, "announced"); }, false));
  // The message was pushed when node 0 ran the release, before this PING's
  // answer: the reply read now is the message.
  absl::StatusOr<RedisValue> message = subscriber.Command({"PING"});
  REDLOCK_ASSERT_OK(message.status());
  ASSERT_EQ(message->type, RedisValue::Type::kArray);
  ASSERT_EQ(message->elements.size(), 3u);
  EXPECT_EQ(message->elements[0].str, "message");
  EXPECT_EQ(message->elements[1].str, channel);
  EXPECT_EQ(message->elements[2].str, "") << "the announcement published the token";
  EXPECT_THAT(message->elements[2].str, ::testing::Not(HasSubstr(l->token())));
}

TEST_F(LifecycleTest, ManyWaitersDoNotStampede) {
  Options o = MakeOptions();
  o.retry_delay = absl::Seconds(20);
  o.wait_poll_max = absl::Seconds(5);
  auto holder = MakeClient(o);
  auto waiters = MakeClient(o);
  absl::StatusOr<Lease> held = holder->TryAcquire("hot", absl::Seconds(30));
  REDLOCK_ASSERT_OK(held.status());
  constexpr int kWaiters = 16;
  const long long releases = ReleasesRun();
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<Lease>> leases(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      leases[i] = waiters->Acquire("hot", absl::Seconds(30), absl::Milliseconds(2500));
      if (leases[i].ok()) ++winners;
    });
  }
  ASSERT_TRUE(WaitingForARelease("hot", releases, kWaiters)) << "not all waiters failed once";
  REDLOCK_ASSERT_OK(holder->Release(*held));
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
  // One release, one client: one attempt (the oldest waiter's), not sixteen.
  // A loser makes its first attempt and one more at its deadline (its
  // polling pause is longer than the wait); a loser woken by the release
  // makes a third.
  int woken_losers = 0;
  for (auto& l : leases) {
    if (l.ok()) {
      REDLOCK_EXPECT_OK(waiters->Release(*l));
      continue;
    }
    std::optional<Outcome> o = GetOutcome(l.status());
    ASSERT_TRUE(o.has_value()) << l.status();
    EXPECT_EQ(o->kind, Outcome::Kind::kWaitExpired) << l.status();
    woken_losers += o->attempts > 2;
  }
  EXPECT_LE(woken_losers, 1) << "the release woke " << woken_losers << " losing waiters";
}

TEST_P(LifecycleCoreTest, RenewedLeaseOutlivesThreeTtls) {
  auto c = MakeClient();
  absl::StatusOr<Lease> l = c->TryAcquire("long-job", absl::Milliseconds(300));
  REDLOCK_ASSERT_OK(l.status());
  std::atomic<bool> lost{false};
  auto renewal = c->AutoRenew(*l, RenewOptions(), [&](absl::Status) { lost = true; });
  REDLOCK_ASSERT_OK(renewal.status());
  // Ten renewals, a period (ttl/3) apart: past three ttls.
  EXPECT_TRUE(
      testkit::Eventually([&] { return (*renewal)->renewals() >= 10; }, true, absl::Seconds(5)));
  EXPECT_GE(SteadyClock::now(), l->acquired_at() + std::chrono::milliseconds(900));
  EXPECT_FALSE(lost.load());
  EXPECT_TRUE((*renewal)->active());
  EXPECT_GT((*renewal)->lease().TimeLeft(), absl::ZeroDuration());
  EXPECT_GE(KeyCount("long-job"), 3);
  // Release stops the renewal (without calling on_lost).
  REDLOCK_ASSERT_OK(c->Release(*l));
  EXPECT_FALSE((*renewal)->active());
  REDLOCK_EXPECT_OK((*renewal)->status());
  // A window of more than a renewal period in which a renewal that had
  // not stopped would act (nothing to wait for: it must not happen).
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(KeyCountSettled("long-job"), 0) << "a stopped renewal must not re-create the key";
  EXPECT_FALSE(lost.load());
}

TEST_F(LifecycleTest, KeyDeletedOnMajorityFiresTheCallbackWithinOnePeriod) {
  auto c = MakeClient();
  absl::StatusOr<Lease> l = c->TryAcquire("job", absl::Milliseconds(600));
  REDLOCK_ASSERT_OK(l.status());
  std::promise<std::pair<absl::Status, SteadyClock::time_point>> lost;
  auto renewal = c->AutoRenew(*l, RenewOptions(), [&](absl::Status why) {
    lost.set_value({why, SteadyClock::now()});
  });
  REDLOCK_ASSERT_OK(renewal.status());
  // Mid-renewal: after the first extension.
  ASSERT_TRUE(
      testkit::Eventually([&] { return (*renewal)->renewals() >= 1; }, true, absl::Seconds(3)));
  SteadyClock::time_point deleted = SteadyClock::now();
  for (int i : {0, 1, 2}) REDLOCK_ASSERT_OK(fleet_->Command(i, {"DEL", prefix_ + "job"}).status());
  auto future = lost.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(3)), std::future_status::ready);
  auto [why, at] = future.get();
  EXPECT_EQ(why.code(), absl::StatusCode::kFailedPrecondition) << why;
  EXPECT_LT(absl::FromChrono(at - deleted), absl::Milliseconds(200 + 150)) << "period is 200ms";
  EXPECT_FALSE((*renewal)->active());
  EXPECT_EQ((*renewal)->status().code(), absl::StatusCode::kFailedPrecondition);
  for (int i : {0, 1, 2}) EXPECT_FALSE(KeyOn(i, "job")) << "re-created on node " << i;
}

TEST_F(LifecycleTest, MutexStatusReflectsALostLease) {
  auto c = MakeClient();
  MutexOptions mo;
  mo.ttl = absl::Milliseconds(600);
  Mutex m(c.get(), "m", mo);
  ASSERT_TRUE(m.try_lock());
  for (int i : {0, 1, 2}) REDLOCK_ASSERT_OK(fleet_->Command(i, {"DEL", prefix_ + "m"}).status());
  EXPECT_FALSE(testkit::Eventually([&] { return m.held_ok(); }, false, absl::Seconds(1)));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("lock lost while held"));
  m.unlock();
}

// held_ok() reads the validity of the lease as last renewed: a hold longer
// than the first lease's validity is still held_ok().
TEST_F(LifecycleTest, HeldOkStaysTrueWhileTheRenewedLockOutlivesItsFirstLease) {
  auto c = MakeClient();
  MutexOptions mo;
  mo.ttl = absl::Milliseconds(400);
  Mutex m(c.get(), "renewed", mo);
  RecursiveMutex r(c.get(), "renewed-recursive", mo);
  m.lock();
  r.lock();
  Lease first = m.lease();
  // Held past the first lease's validity.
  ASSERT_TRUE(testkit::Eventually([&] { return first.TimeLeft() == absl::ZeroDuration(); }, true,
                                  absl::Seconds(3)))
      << "the first lease never ran out";
  REDLOCK_EXPECT_OK(m.status());
  EXPECT_GT(m.lease().TimeLeft(), absl::ZeroDuration());
  EXPECT_GE(KeyCount("renewed"), 3);
  EXPECT_TRUE(m.held_ok());
  REDLOCK_EXPECT_OK(r.status());
  EXPECT_TRUE(r.held_ok());
  m.unlock();
  r.unlock();
  EXPECT_FALSE(m.held_ok());
  EXPECT_EQ(KeyCountSettled("renewed") + KeyCountSettled("renewed-recursive"), 0);
}

TEST_F(LifecycleTest, AScopedLeaseIsReleasedOnEveryExitPath) {
  auto c = MakeClient();
  {
    absl::StatusOr<ScopedLease> held = ScopedLease::Acquire(*c, "scoped", absl::Seconds(10));
    REDLOCK_ASSERT_OK(held.status());
    EXPECT_TRUE(held->owns());
    EXPECT_GE(KeyCount("scoped"), 3);
    ScopedLease moved = *std::move(held);
    EXPECT_FALSE(held->owns());
    EXPECT_TRUE(moved.owns());
  }
  EXPECT_EQ(KeyCountSettled("scoped"), 0) << "released when the owner went out of scope";
  absl::StatusOr<ScopedLease> kept = ScopedLease::Acquire(*c, "kept", absl::Seconds(10));
  REDLOCK_ASSERT_OK(kept.status());
  Lease dismissed = kept->Dismiss();
  kept = absl::StatusOr<ScopedLease>(ScopedLease());
  EXPECT_GE(KeyCount("kept"), 3) << "dismissed: not released";
  REDLOCK_EXPECT_OK(c->Release(dismissed));
}

TEST_F(LifecycleTest, WithLockRenewsWhileTheWorkRunsAndReportsALoss) {
  auto c = MakeClient();
  int runs = 0;
  REDLOCK_EXPECT_OK(WithLock(*c, "with", absl::Milliseconds(400), LockOptions{},
                             [&](const Lease& lease, const StopToken& lost) {
                               ++runs;
                               EXPECT_EQ(lease.resource(), "with");
                               // Past the lease's own validity: held only
                               // because it is renewed.
                               EXPECT_TRUE(testkit::Eventually(
                                   [&] { return lease.TimeLeft() == absl::ZeroDuration(); }, true,
                                   absl::Seconds(3)));
                               EXPECT_FALSE(lost.stop_requested());
                               EXPECT_GE(KeyCount("with"), 3);
                               return absl::OkStatus();
                             }));
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(KeyCountSettled("with"), 0);

  // Lost while the work runs: the token stops, and the OK becomes the loss.
  absl::Status lost_run =
      WithLock(*c, "lost-with", absl::Milliseconds(600), LockOptions{},
               [&](const Lease& lease, const StopToken& lost) {
                 for (int i : {0, 1, 2}) {
                   EXPECT_TRUE(fleet_->Command(i, {"DEL", prefix_ + "lost-with"}).ok());
                 }
                 EXPECT_TRUE(testkit::Eventually([&] { return lost.stop_requested(); }, true,
                                                 absl::Seconds(3)));
                 return absl::OkStatus();
               });
  EXPECT_TRUE(absl::IsFailedPrecondition(lost_run)) << lost_run;
  EXPECT_THAT(std::string(lost_run.message()), HasSubstr("lost while the work ran"));

  // Not acquired: the function does not run.
  auto other = MakeClient();
  absl::StatusOr<Lease> held = other->TryAcquire("busy-with", absl::Seconds(10));
  REDLOCK_ASSERT_OK(held.status());
  bool ran = false;
  absl::Status busy = WithLock(*c, "busy-with", absl::Seconds(1), LockOptions{},
                               [&](const Lease&, const StopToken&) {
                                 ran = true;
                                 return absl::OkStatus();
                               });
  EXPECT_TRUE(absl::IsAborted(busy)) << busy;
  EXPECT_FALSE(ran);
  REDLOCK_EXPECT_OK(other->Release(*held));
}

TEST_F(LifecycleTest, RenewalCapLetsTheLeaseRunOut) {
  auto c = MakeClient();
  absl::StatusOr<Lease> l = c->TryAcquire("capped", absl::Milliseconds(300));
  REDLOCK_ASSERT_OK(l.status());
  RenewOptions ro;
  ro.max_renewals = 2;
  std::promise<absl::Status> lost;
  auto renewal = c->AutoRenew(*l, ro, [&](absl::Status why) { lost.set_value(why); });
  REDLOCK_ASSERT_OK(renewal.status());
  auto future = lost.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(3)), std::future_status::ready);
  absl::Status why = future.get();
  EXPECT_EQ(why.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(why.message()), HasSubstr("limit of 2 renewals"));
  EXPECT_EQ((*renewal)->renewals(), 2);
}

TEST_F(LifecycleTest, DestroyingAClientWithLiveRenewalsIsClean) {
  std::vector<std::unique_ptr<Renewal>> handles;
  {
    auto c = MakeClient();
    // A ttl the script-free path keeps up with in a sanitizer build: there
    // each node runs one transaction per round trip, and 50 leases renewed
    // every 67 ms (a 200 ms ttl) asked 750 a second of each node, more than
    // a sanitized client ran on two busy cores in CI, so every renewal ran
    // out before its first extension came back.
    for (int i = 0; i < 50; ++i) {
      absl::StatusOr<Lease> l = c->TryAcquire(absl::StrCat("many", i), absl::Seconds(1));
      REDLOCK_ASSERT_OK(l.status());
      auto r = c->AutoRenew(*l, RenewOptions(), [](absl::Status) {});
      REDLOCK_ASSERT_OK(r.status());
      handles.push_back(*std::move(r));
    }
    // Every renewal has extended at least once.
    EXPECT_TRUE(testkit::Eventually(
        [&] {
          for (auto& h : handles) {
            if (h->renewals() < 1) return false;
          }
          return true;
        },
        true, absl::Seconds(3)));
  }  // the client goes while 50 renewals run on its I/O thread
  for (auto& h : handles) {
    EXPECT_FALSE(h->active());
    // No longer renewed: the work the lease guards must stop.
    EXPECT_TRUE(h->lost().stop_requested());
    EXPECT_EQ(h->status().code(), absl::StatusCode::kCancelled) << h->status();
    h->Stop();  // inert, but safe
  }
  handles.clear();
}

TEST_F(LifecycleTest, InvalidRenewalsAreRejected) {
  auto c = MakeClient();
  EXPECT_EQ(c->AutoRenew(Lease(), RenewOptions(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Lease> l = c->TryAcquire("x", absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  RenewOptions ro;
  ro.interval_fraction = 1.5;
  EXPECT_EQ(c->AutoRenew(*l, ro, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  REDLOCK_EXPECT_OK(c->Release(*l));
}

}  // namespace
}  // namespace redlock
