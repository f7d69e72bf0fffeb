// The fair lock (redlock/fair_mutex.h) against five real redis-server
// processes, over plain TCP and over TLS (Plain/... and Tls/...): the
// order under contention from several clients, one attempt per grant, a
// dead waiter, a paused waiter, a waiter whose place was removed,
// cancellation and waits that run out, the lease's guarantees, the
// TimedLockable form, and a Client that wraps another.

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "redlock/fair_mutex.h"
#include "redlock/observer.h"
#include "redlock/outcome.h"
#include "testkit/fleet_suite.h"
#include "tests/attempt_log.h"
#include "tests/integration/forwarding_client.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::RedisValue;
using SteadyClock = std::chrono::steady_clock;

class FairTest : public testkit::ContendingFleetSuite {
 protected:
  Options Observed(std::shared_ptr<Observer> observer) {
    Options o = MakeOptions();
    o.observer = std::move(observer);
    return o;
  }
  // The places node `node` holds for this test's `resource`, in order.
  std::vector<std::string> Queue(int node, const std::string& resource) {
    absl::StatusOr<RedisValue> v =
        fleet_->Command(node, {"ZRANGE", absl::StrCat(prefix_, resource, ":fair:q"), "0", "-1"});
    std::vector<std::string> out;
    if (!v.ok()) return out;
    for (const RedisValue& e : v->elements) out.push_back(e.str);
    return out;
  }
  // True once every node holds `count` places for `resource`.
  bool QueuedEverywhere(const std::string& resource, size_t count) {
    for (int i = 0; i < fleet_->size(); ++i) {
      if (Queue(i, resource).size() != count) return false;
    }
    return true;
  }
  // A waiting fair acquisition through the Client's entry point, which says
  // when its place was taken.
  static Client::FamilyRequest Waiting(const std::string& resource, absl::Duration wait,
                                       std::function<void()> on_queued = nullptr,
                                       absl::Duration place_ttl = absl::ZeroDuration()) {
    Client::FamilyRequest r;
    r.kind = Client::FamilyRequest::Kind::kFair;
    r.resource = resource;
    r.ttl = absl::Seconds(10);
    r.wait = wait;
    r.on_queued = std::move(on_queued);
    r.place_ttl = place_ttl;
    return r;
  }
  // A fair lock on `resource` that a client of its own holds (for 30 s)
  // until Release(): the one the waiters of a test queue behind.
  struct Holder {
    std::unique_ptr<Client> client;
    std::unique_ptr<FairLock> lock;
    Lease lease;
    absl::Status Release() { return lock->Release(lease); }
  };
  // Use with ASSERT_NO_FATAL_FAILURE.
  void Hold(const std::string& resource, Holder* holder) {
    holder->client = MakeClient();
    ASSERT_NE(holder->client, nullptr);
    holder->lock = std::make_unique<FairLock>(holder->client.get(), resource);
    absl::StatusOr<Lease> held = holder->lock->TryAcquire(absl::Seconds(30));
    REDLOCK_ASSERT_OK(held);
    holder->lease = *std::move(held);
  }
  using Result = std::promise<absl::StatusOr<Client::FamilyGrant>>;
  // Starts `request` (a waiting one) on `client`'s asynchronous entry point
  // and returns true once its place is taken (false after 10 s); the call's
  // end goes to `*result` (none for nullptr).
  static bool Enqueue(Client& client, Client::FamilyRequest request, Result* result) {
    auto queued = std::make_shared<absl::Notification>();
    request.on_queued = [queued] { queued->Notify(); };
    client.AcquireFamilyAsync(std::move(request), [result](absl::StatusOr<Client::FamilyGrant> g) {
      if (result != nullptr) result->set_value(std::move(g));
    });
    return queued->WaitForNotificationWithTimeout(absl::Seconds(10));
  }
};

class FairLockTest : public testkit::OverTransports<FairTest> {};
REDLOCK_INSTANTIATE_OVER_TRANSPORTS(FairLockTest);

// Waiters from four clients (processes, as the nodes see them), each
// entering the queue only after the one before had its place: they are
// served in that order, one at a time, and each with one attempt after its
// place (the release wakes only the first waiter).
TEST_P(FairLockTest, WaitersFromSeveralClientsAreServedInTheOrderTheyQueued) {
  constexpr int kClients = 4;
  constexpr int kWaiters = 8;
  auto counter = std::make_shared<testkit::AttemptLog>();
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(MakeClient(Observed(counter)));
  Holder holder;
  ASSERT_NO_FATAL_FAILURE(Hold("line", &holder));

  std::mutex mu;
  std::vector<int> served;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::vector<absl::Status> results(kWaiters);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWaiters; ++w) {
    auto queued = std::make_shared<std::promise<void>>();
    Client* c = clients[static_cast<size_t>(w % kClients)].get();
    threads.emplace_back([&, w, c, queued] {
      absl::StatusOr<Client::FamilyGrant> g =
          c->AcquireFamily(Waiting("line", absl::Seconds(60), [queued] { queued->set_value(); }));
      results[static_cast<size_t>(w)] = g.status();
      if (!g.ok()) return;
      if (++inside > 1) ++overlaps;
      {
        std::lock_guard<std::mutex> lock(mu);
        served.push_back(w);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      --inside;
      REDLOCK_EXPECT_OK(c->Release(g->lease));
    });
    // The next waiter begins only once this one has its place.
    ASSERT_EQ(queued->get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready)
        << "waiter " << w << " never got its place";
  }
  ASSERT_TRUE(QueuedEverywhere("line", kWaiters));
  REDLOCK_ASSERT_OK(holder.Release());
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWaiters; ++w) REDLOCK_EXPECT_OK(results[static_cast<size_t>(w)]) << w;
  std::vector<int> in_order;
  for (int w = 0; w < kWaiters; ++w) in_order.push_back(w);
  EXPECT_EQ(served, in_order);
  EXPECT_EQ(overlaps.load(), 0);
  // A probe, a registration (both refused: the lock was held), then one
  // attempt when woken: no waiter tried while another was first.
  const std::vector<int> attempts = counter->attempts();
  ASSERT_EQ(attempts.size(), static_cast<size_t>(kWaiters));
  for (int a : attempts) EXPECT_EQ(a, 3) << "attempts of one waiter";
  EXPECT_EQ(testkit::Eventually([&] { return QueuedEverywhere("line", 0); }, true), true)
      << "every holder's place left with its release";
}

// TryAcquire never jumps the queue: with a waiter queued it is refused even
// while the lock is free for a moment.
TEST_P(FairLockTest, TryAcquireSucceedsOnlyWhenTheLockIsFreeAndNobodyWaits) {
  Holder holder;
  ASSERT_NO_FATAL_FAILURE(Hold("door", &holder));
  FairLock& la = *holder.lock;
  auto b = MakeClient();
  FairLock lb(b.get(), "door");
  EXPECT_TRUE(absl::IsAborted(lb.TryAcquire(absl::Seconds(30)).status()));

  absl::StatusOr<Lease> waited;
  absl::Notification queued;
  std::thread waiter([&] {
    absl::StatusOr<Client::FamilyGrant> g =
        b->AcquireFamily(Waiting("door", absl::Seconds(20), [&] { queued.Notify(); }));
    waited = g.ok() ? absl::StatusOr<Lease>(g->lease) : absl::StatusOr<Lease>(g.status());
  });
  ASSERT_TRUE(queued.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // TryAcquire returns at a quorum, and on_queued fires once a quorum has
  // the place: the rest may follow. A node may also never hold the lease
  // (b's refused try can reach it first and then clean it up; the request
  // of a granted lease may time out there): a lease is a quorum's, not
  // every node's. What must hold: every node answers, none has another
  // holder, a quorum has this one, and the waiter's place reaches all.
  const int quorum = fleet_->size() / 2 + 1;
  std::string last_seen;
  auto one_waiter_a_quorum_of_holders = [&] {
    absl::StatusOr<std::vector<FairNodeView>> views = la.Inspect();
    if (!views.ok()) return false;
    int holders = 0;
    last_seen.clear();
    for (const FairNodeView& v : *views) {
      absl::StrAppend(&last_seen, v.node, ": ", v.status.ToString(), " holder ", v.holder,
                      " waiting ", v.waiting, "\n");
      if (!v.status.ok() || v.waiting != 1) return false;
      if (v.holder == holder.lease.token()) {
        ++holders;
      } else if (!v.holder.empty()) {
        return false;
      }
    }
    return holders >= quorum;
  };
  EXPECT_TRUE(testkit::Eventually(one_waiter_a_quorum_of_holders, true, absl::Seconds(10)))
      << last_seen;
  REDLOCK_ASSERT_OK(holder.Release());
  waiter.join();
  REDLOCK_ASSERT_OK(waited);
  // Free again, nobody waits: a try succeeds.
  REDLOCK_ASSERT_OK(lb.Release(*waited));
  absl::StatusOr<Lease> again = la.TryAcquire(absl::Seconds(30));
  REDLOCK_ASSERT_OK(again);
  REDLOCK_EXPECT_OK(la.Release(*again));
}

// A waiter whose process died holds up the queue until its place expires
// (no heartbeat keeps it), then the next waiter goes.
TEST_P(FairLockTest, ADeadWaitersPlaceExpiresAndTheNextWaiterProceeds) {
  Holder holder;
  ASSERT_NO_FATAL_FAILURE(Hold("dead", &holder));
  const absl::Duration place_ttl = absl::Milliseconds(600);
  auto dying = MakeClient();
  ASSERT_TRUE(Enqueue(*dying, Waiting("dead", absl::Seconds(60), nullptr, place_ttl), nullptr));
  auto next_client = MakeClient();
  Result next;
  ASSERT_TRUE(Enqueue(*next_client, Waiting("dead", absl::Seconds(60)), &next));
  ASSERT_TRUE(QueuedEverywhere("dead", 2));
  // The first waiter's process dies: no leave, no heartbeat.
  dying.reset();
  const auto died = SteadyClock::now();
  EXPECT_EQ(Queue(0, "dead").size(), 2u) << "a dead waiter's place stays until it expires";
  REDLOCK_ASSERT_OK(holder.Release());
  auto granted = next.get_future();
  ASSERT_EQ(granted.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  absl::StatusOr<Client::FamilyGrant> g = granted.get();
  REDLOCK_ASSERT_OK(g);
  // Not before the dead place lapsed: it was first on every node.
  EXPECT_GE(absl::FromChrono(SteadyClock::now() - died), place_ttl / 2);
  REDLOCK_EXPECT_OK(next_client->Release(g->lease));
}

// A waiter whose process stops (here: its client's only polling thread is
// blocked, so none of its timers runs) past its place's ttl loses the
// place; the next waiter is served meanwhile; once it runs again it is told
// (kAborted, Outcome::Kind::kPlaceLost) and does not wait on.
TEST_P(FairLockTest, APausedWaiterLosesItsPlaceIsToldAndTheNextWaiterProceeds) {
  Holder holder;
  ASSERT_NO_FATAL_FAILURE(Hold("pause", &holder));
  auto paused = MakeClient();
  Result paused_result;
  ASSERT_TRUE(Enqueue(*paused,
                      Waiting("pause", absl::Seconds(60), nullptr, absl::Milliseconds(300)),
                      &paused_result));
  auto next_client = MakeClient();
  Result next;
  ASSERT_TRUE(Enqueue(
      *next_client, Waiting("pause", absl::Seconds(60), nullptr, absl::Milliseconds(300)), &next));

  // Pause the first waiter: a callback of its client that blocks holds the
  // client's I/O thread, the only one that runs its timers.
  absl::Notification blocked, resume;
  std::atomic<bool> resumed{false};
  paused->ReleaseAsync(Lease::ForToken("elsewhere", "nobody"), [&](absl::Status) {
    blocked.Notify();
    resume.WaitForNotificationWithTimeout(absl::Seconds(30));
    resumed = true;
  });
  ASSERT_TRUE(blocked.WaitForNotificationWithTimeout(absl::Seconds(10)));
  REDLOCK_ASSERT_OK(holder.Release());
  auto granted = next.get_future();
  ASSERT_EQ(granted.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "the next waiter was not served while the first was paused";
  EXPECT_FALSE(resumed.load());
  absl::StatusOr<Client::FamilyGrant> g = granted.get();
  REDLOCK_ASSERT_OK(g);
  resume.Notify();
  auto told = paused_result.get_future();
  ASSERT_EQ(told.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the paused waiter hangs";
  const absl::Status st = told.get().status();
  EXPECT_TRUE(absl::IsAborted(st)) << st;
  ASSERT_TRUE(GetOutcome(st).has_value()) << st;
  EXPECT_EQ(GetOutcome(st)->kind, Outcome::Kind::kPlaceLost) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("expired"));
  REDLOCK_EXPECT_OK(next_client->Release(g->lease));
}

// A waiter's place removed on a quorum of nodes (by hand here) is told at
// its next heartbeat; one removed on a minority is put back, and keeps its
// turn.
TEST_P(FairLockTest, AWaiterWhosePlaceWasRemovedIsToldAMinorityLossIsRepaired) {
  Holder holder;
  ASSERT_NO_FATAL_FAILURE(Hold("gone", &holder));
  auto waiter = MakeClient();
  Result result;
  ASSERT_TRUE(Enqueue(*waiter, Waiting("gone", absl::Seconds(60), nullptr, absl::Milliseconds(300)),
                      &result));
  ASSERT_TRUE(QueuedEverywhere("gone", 1));
  const std::string id = Queue(0, "gone")[0];
  // Two of five nodes lose it: a quorum keeps it, and the heartbeat puts it
  // back.
  for (int i : {1, 3}) {
    REDLOCK_ASSERT_OK(
        fleet_->Command(i, {"DEL", prefix_ + "gone:fair:q", prefix_ + "gone:fair:exp"}));
  }
  EXPECT_TRUE(testkit::Eventually([&] { return QueuedEverywhere("gone", 1); }, true))
      << "the place was not put back on the nodes that lost it";
  auto pending = result.get_future();
  EXPECT_EQ(pending.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
      << "a minority's loss tells the waiter nothing";
  // Now three of five: the place is gone, and the waiter is told. Its
  // heartbeats are held meanwhile (a blocking callback holds its client's
  // I/O thread), or one that saw only part of the removal would put the
  // place back.
  absl::Notification blocked, removed;
  waiter->ReleaseAsync(Lease::ForToken("elsewhere", "nobody"), [&](absl::Status) {
    blocked.Notify();
    removed.WaitForNotificationWithTimeout(absl::Seconds(30));
  });
  ASSERT_TRUE(blocked.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // A heartbeat sent just before has run on the nodes by now.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i : {0, 2, 4}) {
    REDLOCK_ASSERT_OK(fleet_->Command(i, {"ZREM", prefix_ + "gone:fair:q", id}));
  }
  removed.Notify();
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the waiter whose place was removed hangs";
  absl::StatusOr<Client::FamilyGrant> g = pending.get();
  EXPECT_TRUE(absl::IsAborted(g.status())) << g.status();
  ASSERT_TRUE(GetOutcome(g.status()).has_value());
  EXPECT_EQ(GetOutcome(g.status())->kind, Outcome::Kind::kPlaceLost);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("removed"));
  EXPECT_TRUE(testkit::Eventually([&] { return QueuedEverywhere("gone", 0); }, true))
      << "the told waiter left the queue";
  REDLOCK_EXPECT_OK(holder.Release());
}

// A stop ends a waiting call at once; its place leaves the queue, and the
// waiter behind it is the next served.
TEST_P(FairLockTest, ACancelledWaiterLeavesTheQueueAndTheNextIsServed) {
  Holder holder;
  ASSERT_NO_FATAL_FAILURE(Hold("stop", &holder));
  auto b = MakeClient();
  auto c = MakeClient();
  StopSource stop;
  Client::FamilyRequest cancelled = Waiting("stop", absl::InfiniteDuration());
  cancelled.stop = stop.token();
  Result b_result;
  ASSERT_TRUE(Enqueue(*b, std::move(cancelled), &b_result));
  Result c_result;
  ASSERT_TRUE(Enqueue(*c, Waiting("stop", absl::Seconds(30)), &c_result));
  stop.RequestStop();
  auto b_done = b_result.get_future();
  ASSERT_EQ(b_done.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(absl::IsCancelled(b_done.get().status()));
  EXPECT_TRUE(testkit::Eventually([&] { return QueuedEverywhere("stop", 1); }, true))
      << "the cancelled waiter's place left every node";
  REDLOCK_ASSERT_OK(holder.Release());
  auto c_done = c_result.get_future();
  ASSERT_EQ(c_done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  absl::StatusOr<Client::FamilyGrant> g = c_done.get();
  REDLOCK_ASSERT_OK(g);
  REDLOCK_EXPECT_OK(c->Release(g->lease));
}

TEST_P(FairLockTest, AWaitThatRunsOutLeavesNoPlace) {
  Holder holder;
  ASSERT_NO_FATAL_FAILURE(Hold("late", &holder));
  auto b = MakeClient();
  FairLock lb(b.get(), "late");
  absl::StatusOr<Lease> late = lb.Acquire(absl::Seconds(10), absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_TRUE(testkit::Eventually([&] { return QueuedEverywhere("late", 0); }, true));
  REDLOCK_EXPECT_OK(holder.Release());
}

// The mutex's lease: fencing tokens increase across holders, extension,
// renewal, release of the key and the place.
TEST_P(FairLockTest, LeasesFenceExtendRenewAndRelease) {
  auto a = MakeClient(Fenced());
  auto b = MakeClient(Fenced());
  FairLock la(a.get(), "fenced");
  FairLock lb(b.get(), "fenced");
  uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Lease> l = (i % 2 == 0 ? la : lb).Acquire(absl::Seconds(10), absl::Seconds(5));
    REDLOCK_ASSERT_OK(l);
    EXPECT_GT(l->fencing_token(), last);
    EXPECT_EQ(l->fencing_token() % 2, 1u) << "a writer's token (odd)";
    last = l->fencing_token();
    REDLOCK_ASSERT_OK(la.Release(*l));
  }
  absl::StatusOr<Lease> l = la.Acquire(absl::Seconds(1), absl::Seconds(5));
  REDLOCK_ASSERT_OK(l);
  EXPECT_GT(l->fencing_token(), last);
  absl::StatusOr<Lease> extended = la.Extend(*l, absl::Seconds(30));
  REDLOCK_ASSERT_OK(extended);
  EXPECT_GT(extended->TimeLeft(), absl::Seconds(20));
  RenewOptions renew;
  renew.interval_fraction = 0.3;
  absl::StatusOr<std::unique_ptr<Renewal>> r =
      la.AutoRenew(*la.Extend(*l, absl::Seconds(1)), renew, [](absl::Status) {});
  REDLOCK_ASSERT_OK(r);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE((*r)->active());
  EXPECT_GE((*r)->renewals(), 2);
  EXPECT_TRUE(absl::IsAborted(lb.TryAcquire(absl::Seconds(10)).status())) << "still held";
  REDLOCK_ASSERT_OK(la.Release(*l));
  // Release returns at a quorum: the other nodes' deletes follow.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(
        testkit::Eventually([&] { return Get(i, "fenced"); }, std::string(), absl::Seconds(10)), "")
        << i;
  }
  absl::StatusOr<Lease> after = lb.TryAcquire(absl::Seconds(10));
  REDLOCK_ASSERT_OK(after);
  REDLOCK_EXPECT_OK(lb.Release(*after));
}

TEST_P(FairLockTest, FairMutexIsATimedLockableThatExcludesAndServesInTurn) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(MakeClient());
  std::atomic<int> inside{0};
  std::atomic<int> bad{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      FairMutex m(clients[static_cast<size_t>(t % 3)].get(), "tl");
      for (int i = 0; i < 4; ++i) {
        std::unique_lock<FairMutex> hold(m, std::chrono::seconds(30));
        if (!hold.owns_lock() || !m.held_ok()) {
          ++bad;
          continue;
        }
        if (++inside > 1) ++bad;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        --inside;
        ++done;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(done.load(), 24);
  FairMutex m(clients[0].get(), "tl");
  ASSERT_TRUE(m.try_lock());
  FairMutex other(clients[1].get(), "tl");
  EXPECT_FALSE(other.try_lock());
  EXPECT_TRUE(absl::IsAborted(other.status())) << other.status();
  m.unlock();
  REDLOCK_EXPECT_OK(m.status());
}

TEST_P(FairLockTest, AMinorityOfNodesDownChangesNothing) {
  REDLOCK_ASSERT_OK(fleet_->Stop(1));
  REDLOCK_ASSERT_OK(fleet_->Kill(3));
  Holder holder;
  ASSERT_NO_FATAL_FAILURE(Hold("min", &holder));
  auto b = MakeClient();
  FairLock lb(b.get(), "min");
  absl::StatusOr<Lease> waited;
  std::thread t([&] { waited = lb.Acquire(absl::Seconds(10), absl::Seconds(20)); });
  EXPECT_TRUE(testkit::Eventually(
      [&] { return Queue(0, "min").size() == 1 && Queue(2, "min").size() == 1; }, true));
  REDLOCK_ASSERT_OK(holder.Release());
  t.join();
  REDLOCK_ASSERT_OK(waited);
  REDLOCK_EXPECT_OK(lb.Release(*waited));
}

// ---- Over a Client that wraps another ------------------------------------------------

TEST_F(FairTest, TheFairLockWorksOverAClientThatWrapsAnother) {
  auto wrapped = std::make_unique<testkit::ForwardingClient>(MakeClient(Fenced()));
  auto other = MakeClient();
  FairLock lock(wrapped.get(), "fwd");
  FairLock elsewhere(other.get(), "fwd");
  absl::StatusOr<Lease> held = elsewhere.TryAcquire(absl::Seconds(30));
  REDLOCK_ASSERT_OK(held);
  std::promise<absl::StatusOr<Lease>> async;
  lock.AcquireAsync(absl::Seconds(10), absl::Seconds(20), StopToken(),
                    [&](absl::StatusOr<Lease> l) { async.set_value(std::move(l)); });
  EXPECT_TRUE(testkit::Eventually([&] { return QueuedEverywhere("fwd", 1); }, true));
  absl::StatusOr<std::vector<FairNodeView>> views = lock.Inspect();
  REDLOCK_ASSERT_OK(views);
  for (const FairNodeView& v : *views) {
    ASSERT_EQ(v.queue.size(), 1u) << v.node;
    EXPECT_GT(v.queue[0].ticket, 0u);
    EXPECT_GT(v.queue[0].ttl_left, absl::ZeroDuration());
  }
  REDLOCK_ASSERT_OK(elsewhere.Release(*held));
  absl::StatusOr<Lease> l = async.get_future().get();
  REDLOCK_ASSERT_OK(l);
  EXPECT_GT(l->fencing_token(), 0u);
  REDLOCK_ASSERT_OK(lock.Release(*l));
  FairMutex m(wrapped.get(), "fwd");
  EXPECT_TRUE(m.try_lock_for(std::chrono::seconds(5))) << m.status();
  m.unlock();
  // AcquireAsync, Inspect, try_lock_for: every call went through the wrapper.
  EXPECT_EQ(wrapped->family(), 3);

  wrapped->forward_family(false);
  absl::StatusOr<Lease> refused = lock.TryAcquire(absl::Seconds(10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(m.try_lock_for(std::chrono::milliseconds(100)));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
}

TEST_F(FairTest, BadRequestsAreRefusedBeforeAnythingIsSent) {
  auto c = MakeClient();
  FairLock empty(c.get(), "");
  EXPECT_TRUE(absl::IsInvalidArgument(empty.TryAcquire(absl::Seconds(1)).status()));
  FairLock tiny(c.get(), "tiny", FairOptions{.place_ttl = absl::Milliseconds(1)});
  absl::StatusOr<Lease> l = tiny.Acquire(absl::Seconds(1), absl::Seconds(1));
  EXPECT_TRUE(absl::IsInvalidArgument(l.status())) << l.status();
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("place_ttl"));
  EXPECT_EQ(KeysEverywhere(), 0);
}

}  // namespace
}  // namespace redlock
