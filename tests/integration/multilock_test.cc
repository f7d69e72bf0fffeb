// MultiLock (all-or-nothing sets; quorum and all-nodes modes) against five
// real redis-server processes.

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "multilock/multi_lock.h"
#include "redlock/client.h"
#include "testkit/fleet_suite.h"
#include "tests/integration/forwarding_client.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::RedisValue;
using Mode = MultiLock::Mode;
using SteadyClock = std::chrono::steady_clock;

class MultiLockTest : public testkit::ContendingFleetSuite {
 protected:
  // After a release (which returns at a quorum, the rest following).
  int KeysSettled() {
    return testkit::Eventually([&] { return KeysEverywhere(); }, 0);
  }
};

TEST_F(MultiLockTest, LocksEveryResourceOrNone) {
  auto c = MakeClient();
  for (Mode mode : {Mode::kQuorum, Mode::kAllNodes}) {
    MultiLock multi(c.get(), mode);
    absl::StatusOr<MultiLease> l = multi.TryAcquire({"c", "a", "b", "a"}, absl::Seconds(10));
    REDLOCK_ASSERT_OK(l.status());
    EXPECT_EQ(l->resources(), (std::vector<std::string>{"a", "b", "c"}))
        << "canonical: sorted, deduplicated";
    EXPECT_EQ(l->leases().size(), 3u);
    for (const Lease& each : l->leases()) EXPECT_EQ(each.token(), l->token()) << "one token";
    EXPECT_EQ(MultiLease().token(), "");
    EXPECT_GT(l->TimeLeft(), absl::Seconds(9));
    if (mode == Mode::kAllNodes) {
      EXPECT_EQ(l->nodes_granted(), 5);
      for (int i = 0; i < 5; ++i) EXPECT_EQ(Get(i, "b"), l->token()) << i;
    }
    // {b, d} overlaps on b: refused, and d is left nowhere.
    absl::StatusOr<MultiLease> overlap = multi.TryAcquire({"d", "b"}, absl::Seconds(10));
    EXPECT_EQ(overlap.status().code(), absl::StatusCode::kAborted) << overlap.status();
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(EventuallyGone(i, "d"), "") << "partial grant left on node " << i;
    REDLOCK_ASSERT_OK(multi.Release(*l));
    REDLOCK_ASSERT_OK(multi.Release(*l)) << "idempotent";
    EXPECT_EQ(KeysSettled(), 0);
  }
}

TEST_F(MultiLockTest, ExcludesPlainLocksOnAMemberAndTheReverse) {
  auto c = MakeClient();
  MultiLock multi(c.get());
  absl::StatusOr<MultiLease> l = multi.TryAcquire({"a", "b"}, absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_EQ(c->TryAcquire("b", absl::Seconds(10)).status().code(), absl::StatusCode::kAborted);
  REDLOCK_ASSERT_OK(multi.Release(*l));
  absl::StatusOr<Lease> single = c->TryAcquire("b", absl::Seconds(10));
  REDLOCK_ASSERT_OK(single.status());
  EXPECT_EQ(multi.TryAcquire({"a", "b"}, absl::Seconds(10)).status().code(),
            absl::StatusCode::kAborted);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(EventuallyGone(i, "a"), "") << i;
  REDLOCK_ASSERT_OK(c->Release(*single));
}

TEST_F(MultiLockTest, PartialConflictsRollBackCompletely) {
  auto c = MakeClient();
  // Someone else holds b on three nodes (plain SET NX PX, any Redlock client).
  for (int i : {1, 2, 4}) {
    REDLOCK_ASSERT_OK(
        fleet_->Command(i, {"SET", prefix_ + "b", "theirs", "NX", "PX", "20000"}).status());
  }
  for (Mode mode : {Mode::kQuorum, Mode::kAllNodes}) {
    MultiLock multi(c.get(), mode);
    absl::StatusOr<MultiLease> l = multi.TryAcquire({"a", "b", "c"}, absl::Seconds(10));
    EXPECT_EQ(l.status().code(), absl::StatusCode::kAborted) << l.status();
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(EventuallyGone(i, "a"), "") << "node " << i;
      EXPECT_EQ(EventuallyGone(i, "c"), "") << "node " << i;
    }
  }
  for (int i : {1, 2, 4}) EXPECT_EQ(Get(i, "b"), "theirs") << "never touches a foreign key";
  // Held on one node only: quorum mode gets the other four; all-nodes fails.
  for (int i : {1, 2}) REDLOCK_ASSERT_OK(fleet_->Command(i, {"DEL", prefix_ + "b"}).status());
  MultiLock all(c.get(), Mode::kAllNodes);
  EXPECT_EQ(all.TryAcquire({"a", "b"}, absl::Seconds(10)).status().code(),
            absl::StatusCode::kAborted);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(EventuallyGone(i, "a"), "") << "node " << i;
  MultiLock quorum(c.get(), Mode::kQuorum);
  absl::StatusOr<MultiLease> l = quorum.TryAcquire({"a", "b"}, absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_EQ(Get(4, "a"), "") << "node 4 holds b for someone else: it grants none of the set";
  REDLOCK_EXPECT_OK(quorum.Release(*l));
}

TEST_F(MultiLockTest, OppositeOrdersNeitherDeadlockNorBothHold) {
  auto c1 = MakeClient();
  auto c2 = MakeClient();
  MultiLock m1(c1.get());
  MultiLock m2(c2.get());
  std::atomic<int> holders{0};
  std::atomic<int> max_holders{0};
  std::atomic<int> acquired{0};
  auto run = [&](MultiLock& m, std::vector<std::string> order) {
    for (int i = 0; i < 60; ++i) {
      absl::StatusOr<MultiLease> l = m.Acquire(order, absl::Seconds(5), absl::Seconds(2));
      if (!l.ok()) continue;
      int h = ++holders;
      int prev = max_holders.load();
      while (h > prev && !max_holders.compare_exchange_weak(prev, h)) {
      }
      ++acquired;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      --holders;
      (void)m.Release(*l);
    }
  };
  auto start = SteadyClock::now();
  std::thread t1(run, std::ref(m1), std::vector<std::string>{"x", "y"});
  std::thread t2(run, std::ref(m2), std::vector<std::string>{"y", "x"});
  t1.join();
  t2.join();
  EXPECT_EQ(max_holders.load(), 1);
  EXPECT_EQ(acquired.load(), 120) << "every acquisition completed: no deadlock, no starvation";
  EXPECT_LT(Since(start), absl::Seconds(60));
}

TEST_F(MultiLockTest, RandomOverlappingSubsetsNeverShareAResource) {
  auto c = MakeClient();
  constexpr int kResources = 6;
  constexpr int kThreads = 8;
  std::mutex record_mu;
  std::map<std::string, int> holder;  // resource -> thread holding it
  std::atomic<int> violations{0};
  std::atomic<int> acquired{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      MultiLock multi(c.get(), t % 2 == 0 ? Mode::kQuorum : Mode::kAllNodes);
      for (int i = 0; i < 25; ++i) {
        std::vector<std::string> set;
        for (int r = 0; r < kResources; ++r) {
          if (rng() % 3 == 0) set.push_back(absl::StrCat("r", r));
        }
        if (set.empty()) set.push_back("r0");
        absl::StatusOr<MultiLease> l = multi.Acquire(set, absl::Seconds(5), absl::Seconds(3));
        if (!l.ok()) continue;
        ++acquired;
        {
          std::lock_guard<std::mutex> lock(record_mu);
          for (const auto& r : l->resources()) {
            if (holder.count(r)) ++violations;
            holder[r] = t;
          }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        {
          std::lock_guard<std::mutex> lock(record_mu);
          for (const auto& r : l->resources()) holder.erase(r);
        }
        (void)multi.Release(*l);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(acquired.load(), kThreads * 10);
  EXPECT_EQ(KeysSettled(), 0);
}

TEST_F(MultiLockTest, AllNodesModeFailsFastOnAStoppedNodeAndLeavesNothing) {
  Options o = MakeOptions();
  o.node_timeout = absl::Milliseconds(100);
  o.max_attempts = 5;
  o.retry_delay = absl::Seconds(1);
  auto c = MakeClient(o);
  MultiLock all(c.get(), Mode::kAllNodes);
  MultiLock quorum(c.get(), Mode::kQuorum);
  REDLOCK_ASSERT_OK(fleet_->Stop(3));
  auto start = SteadyClock::now();
  absl::StatusOr<MultiLease> l = all.Acquire({"a", "b", "c"}, absl::Seconds(10));
  absl::Duration took = Since(start);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnavailable) << l.status();
  EXPECT_THAT(std::string(l.status().message()), HasSubstr(fleet_->address(3)));
  EXPECT_LT(took, absl::Milliseconds(800)) << "known down: no retry budget spent (5 x 1s)";
  // Now the client knows: the next attempt fails at once.
  start = SteadyClock::now();
  l = all.TryAcquire({"a", "b", "c"}, absl::Seconds(10));
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(Since(start), absl::Milliseconds(50));
  for (int i : {0, 1, 2, 4}) {
    for (const char* r : {"a", "b", "c"})
      EXPECT_EQ(EventuallyGone(i, r), "") << "node " << i << " kept " << r;
  }
  // The quorum mode rides it out.
  absl::StatusOr<MultiLease> q = quorum.TryAcquire({"a", "b", "c"}, absl::Seconds(10));
  REDLOCK_ASSERT_OK(q.status());
  REDLOCK_ASSERT_OK(quorum.Release(*q));
  REDLOCK_ASSERT_OK(fleet_->Continue(3));
}

TEST_F(MultiLockTest, ExtendNeedsEveryKeyOnTheRequiredNodes) {
  auto c = MakeClient();
  MultiLock all(c.get(), Mode::kAllNodes);
  absl::StatusOr<MultiLease> l = all.TryAcquire({"a", "b"}, absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  absl::StatusOr<MultiLease> e = all.Extend(*l, absl::Seconds(20));
  REDLOCK_ASSERT_OK(e.status());
  EXPECT_GT(e->TimeLeft(), absl::Seconds(19));
  REDLOCK_ASSERT_OK(fleet_->Command(2, {"DEL", prefix_ + "b"}).status());
  e = all.Extend(*l, absl::Seconds(20));
  EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition) << e.status();
  EXPECT_EQ(Get(2, "b"), "") << "never re-created";
  MultiLock quorum(c.get(), Mode::kQuorum);
  REDLOCK_EXPECT_OK(quorum.Extend(*l, absl::Seconds(20)).status()) << "4 of 5 still hold both";
  REDLOCK_EXPECT_OK(all.Release(*l));
}

TEST_F(MultiLockTest, BadInputIsRejectedAndSendsNothing) {
  auto c = MakeClient();
  MultiLock multi(c.get());
  EXPECT_EQ(multi.TryAcquire({}, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(multi.TryAcquire({"a", ""}, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(multi.TryAcquire({std::string(kMaxResourceLength + 1, 'x')}, absl::Seconds(1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<std::string> many;
  for (size_t i = 0; i <= MultiLock::kMaxResources; ++i) many.push_back(absl::StrCat("r", i));
  absl::Status too_many = multi.TryAcquire(many, absl::Seconds(1)).status();
  EXPECT_EQ(too_many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_many.message()), HasSubstr("at most 256"));
  many.pop_back();
  absl::StatusOr<MultiLease> max = multi.TryAcquire(many, absl::Seconds(5));
  REDLOCK_ASSERT_OK(max.status()) << "exactly kMaxResources is fine";
  REDLOCK_ASSERT_OK(multi.Release(*max));
  EXPECT_EQ(multi.TryAcquire({"a"}, absl::Milliseconds(2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(multi.Release(MultiLease()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KeysSettled(), 0);
}

TEST_F(MultiLockTest, WaitIsWokenByARelease) {
  Options o = MakeOptions();
  o.retry_delay = absl::Seconds(20);
  o.wait_poll_max = absl::Seconds(5);
  auto c = MakeClient(o);
  absl::StatusOr<Lease> held = c->TryAcquire("b", absl::Seconds(30));
  REDLOCK_ASSERT_OK(held.status());
  MultiLock multi(c.get());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    (void)c->Release(*held);
  });
  auto start = SteadyClock::now();
  absl::StatusOr<MultiLease> l = multi.Acquire({"a", "b"}, absl::Seconds(5), absl::Seconds(10));
  releaser.join();
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_LT(Since(start), absl::Seconds(2)) << "woken by the release, not by 5s polling";
  REDLOCK_EXPECT_OK(multi.Release(*l));
}

TEST_F(MultiLockTest, AutoRenewKeepsEveryResourceAndAWaitCanBeCancelled) {
  auto c = MakeClient();
  MultiLock multi(c.get(), Mode::kAllNodes);
  absl::StatusOr<MultiLease> l = multi.TryAcquire({"r1", "r2"}, absl::Milliseconds(400));
  REDLOCK_ASSERT_OK(l.status());
  auto renewal = multi.AutoRenew(*l, RenewOptions(), [](absl::Status) {});
  REDLOCK_ASSERT_OK(renewal.status());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // three ttls
  EXPECT_TRUE((*renewal)->active());
  EXPECT_EQ((*renewal)->leases().size(), 2u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Get(i, "r1"), l->token()) << i;
    EXPECT_EQ(Get(i, "r2"), l->token()) << i;
  }
  // Another MultiLock waits for an overlapping set, until stopped.
  MultiLock other(c.get());
  StopSource stop;
  std::promise<absl::Status> got;
  std::thread t([&] {
    got.set_value(
        other.Acquire({"r2", "r3"}, absl::Seconds(5), absl::InfiniteDuration(), stop.token())
            .status());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop.RequestStop();
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(4)), std::future_status::ready);
  EXPECT_TRUE(absl::IsCancelled(future.get()));
  t.join();
  REDLOCK_EXPECT_OK(multi.Release(*l));
  EXPECT_FALSE((*renewal)->active()) << "Release stops the renewal";
  EXPECT_EQ(KeysSettled(), 0);
}

TEST_F(MultiLockTest, WorksOverAClientThatWrapsAnother) {
  auto wrapped = std::make_unique<testkit::ForwardingClient>(MakeClient());
  MultiLock multi(wrapped.get());
  absl::StatusOr<MultiLease> l = multi.TryAcquire({"a", "b"}, absl::Seconds(10));
  ASSERT_TRUE(l.ok()) << l.status();
  // The acquire returned at a quorum: node 0 may answer a moment later.
  EXPECT_EQ(testkit::Eventually([&] { return Get(0, "a"); }, l->token()), l->token());
  absl::StatusOr<MultiLease> e = multi.Extend(*l, absl::Seconds(20));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(multi.Release(*e).ok());
  EXPECT_EQ(wrapped->sets(), 3) << "acquire, extend, release: through the wrapper";
  EXPECT_EQ(KeysSettled(), 0);
  // A wrapper that does not take sets says so.
  wrapped->forward_sets(false);
  absl::StatusOr<MultiLease> refused = multi.TryAcquire({"a", "b"}, absl::Seconds(10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("sets of resources"));
  EXPECT_EQ(KeysEverywhere(), 0);
}

}  // namespace
}  // namespace redlock
