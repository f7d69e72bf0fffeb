// The fake fleet (redlock/testing.h): the library's real client over
// in-memory nodes that a test stops, slows, partitions, restarts without
// their data and moves in time. No server.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "redlock/observer.h"
#include "redlock/testing.h"
#include "tests/attempt_log.h"

namespace redlock::testing {
namespace {

// Bounded waits for what the nodes do in their own time (never a timed
// assertion: the bound only ends a test that would otherwise hang).
constexpr absl::Duration kPatience = absl::Seconds(20);

// Options whose node timeout a loaded test machine does not reach by
// accident (the fleet runs in real time); the tests about timeouts set
// their own.
Options Generous() {
  Options options;
  options.node_timeout = absl::Seconds(1);
  return options;
}

std::unique_ptr<FakeFleet> MakeFleet(int nodes, Options options = Generous()) {
  absl::StatusOr<std::unique_ptr<FakeFleet>> fleet = FakeFleet::Create(nodes, std::move(options));
  EXPECT_TRUE(fleet.ok()) << fleet.status();
  return fleet.ok() ? *std::move(fleet) : nullptr;
}

// The holder of `held` finds it lost (its extension by `ttl` fails); then a
// new client of `fleet` (over new connections) tries the lock for `ttl`.
absl::StatusOr<Lease> LostToANewClient(FakeFleet& fleet, const Lease& held, absl::Duration ttl) {
  absl::StatusOr<Lease> extended = fleet.client().Extend(held, ttl);
  EXPECT_TRUE(absl::IsFailedPrecondition(extended.status())) << extended.status();
  absl::StatusOr<std::unique_ptr<Client>> other = fleet.NewClient();
  if (!other.ok()) return other.status();
  return (*other)->TryAcquire(held.resource(), ttl);
}

// A one-shot signal between threads on the standard library's primitives
// (which ThreadSanitizer sees; Debian's Abseil is not instrumented).
class Signal {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  bool WaitFor(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

// Polls `done` every millisecond until it is true or kPatience passed.
template <typename F>
bool Eventually(F done) {
  const absl::Time until = absl::Now() + kPatience;
  while (!done()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(FakeFleetTest, AcquireHoldsEveryNodeAndReleaseFreesThem) {
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3);
  ASSERT_NE(fleet, nullptr);
  absl::StatusOr<Lease> lease = fleet->client().Acquire("orders/42", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_GE(lease->nodes_granted(), 2);

  // Another client is refused while it is held.
  absl::StatusOr<std::unique_ptr<Client>> other = fleet->NewClient();
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<Lease> refused = (*other)->TryAcquire("orders/42", absl::Seconds(10));
  EXPECT_TRUE(absl::IsAborted(refused.status())) << refused.status();

  ASSERT_TRUE(fleet->client().Release(*lease).ok());
  // A release needs only a quorum to confirm; the last node may answer later.
  EXPECT_TRUE(Eventually([&] {
    for (int i = 0; i < fleet->size(); ++i) {
      if (fleet->Get(i, "orders/42").ok()) return false;
    }
    return true;
  }));
  absl::StatusOr<Lease> granted = (*other)->TryAcquire("orders/42", absl::Seconds(10));
  ASSERT_TRUE(granted.ok()) << granted.status();
  // Where it granted, the node holds the new holder's token.
  int holding = 0;
  for (int i = 0; i < fleet->size(); ++i) {
    absl::StatusOr<std::string> value = fleet->Get(i, "orders/42");
    if (value.ok()) {
      EXPECT_EQ(*value, granted->token());
      ++holding;
    }
  }
  EXPECT_GE(holding, 2);
}

TEST(FakeFleetTest, BadInputIsRefusedAndChangesNothing) {
  EXPECT_TRUE(absl::IsInvalidArgument(FakeFleet::Create(0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(FakeFleet::Create(FakeFleet::kMaxNodes + 1).status()));
  Options named;
  named.nodes.resize(2);
  named.nodes[0].host = "a";
  named.nodes[1].host = "b";
  EXPECT_TRUE(absl::IsInvalidArgument(FakeFleet::Create(3, named).status()));
  Options durable;
  durable.durability.replicas = 1;
  absl::Status st = FakeFleet::Create(3, durable).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "replicas")) << st;

  std::unique_ptr<FakeFleet> fleet = MakeFleet(3);
  ASSERT_NE(fleet, nullptr);
  EXPECT_EQ(fleet->NodeName(0), "fake-node-0:6379");
  EXPECT_EQ(fleet->NodeName(3), "");
  st = fleet->Stop(3);
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "no node 3")) << st;
  EXPECT_TRUE(absl::IsInvalidArgument(fleet->Slow(0, -absl::Milliseconds(1))));
  EXPECT_TRUE(absl::IsInvalidArgument(fleet->JumpClock(-1, absl::Seconds(1))));
  EXPECT_TRUE(absl::IsInvalidArgument(fleet->JumpClock(0, absl::InfiniteDuration())));
  // Another client must name the same nodes.
  EXPECT_TRUE(absl::IsInvalidArgument(fleet->NewClient(named).status()));
  // Nothing was stopped or slowed by the refused calls.
  absl::StatusOr<Lease> lease = fleet->client().TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(fleet->client().Health()[i].connected);
}

TEST(FakeFleetTest, NodesNamedByTheOptionsAreNamedInMessages) {
  Options options = Generous();
  for (const char* host : {"redis-a.example", "redis-b.example", "redis-c.example"}) {
    Endpoint ep;
    ep.host = host;
    ep.port = 7000;
    options.nodes.push_back(ep);
  }
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3, options);
  ASSERT_NE(fleet, nullptr);
  EXPECT_EQ(fleet->NodeName(1), "redis-b.example:7000");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fleet->Stop(i).ok());
  absl::StatusOr<std::unique_ptr<Client>> other = fleet->NewClient();  // the same names
  ASSERT_TRUE(other.ok()) << other.status();
  absl::Status st = (*other)->TryAcquire("named", absl::Seconds(10)).status();
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "redis-a.example:7000")) << st;
}

TEST(FakeFleetTest, StoppedMinorityStillGrants) {
  std::unique_ptr<FakeFleet> fleet = MakeFleet(5);
  ASSERT_NE(fleet, nullptr);
  ASSERT_TRUE(fleet->Stop(0).ok());
  ASSERT_TRUE(fleet->Stop(1).ok());
  absl::StatusOr<Lease> lease = fleet->client().TryAcquire("minority", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_GE(lease->nodes_granted(), 3);
  EXPECT_TRUE(absl::IsNotFound(fleet->Get(0, "minority").status()));
  std::vector<NodeHealth> health = fleet->client().Health();
  EXPECT_FALSE(health[0].connected);
  EXPECT_TRUE(absl::StrContains(health[0].last_error, "refused")) << health[0].last_error;
  EXPECT_TRUE(health[2].connected);
}

TEST(FakeFleetTest, StoppedMajorityIsUnavailableAndStartedAgainGrants) {
  std::unique_ptr<FakeFleet> fleet = MakeFleet(5);
  ASSERT_NE(fleet, nullptr);
  absl::StatusOr<Lease> before = fleet->client().Acquire("kept", absl::Seconds(30));
  ASSERT_TRUE(before.ok()) << before.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fleet->Stop(i).ok());
  absl::StatusOr<Lease> lease = fleet->client().TryAcquire("majority", absl::Seconds(10));
  EXPECT_TRUE(absl::IsUnavailable(lease.status())) << lease.status();
  EXPECT_TRUE(absl::StrContains(lease.status().message(), "fake-node-0:6379")) << lease.status();
  EXPECT_TRUE(absl::StrContains(lease.status().message(), "refused")) << lease.status();

  // Started again, the nodes have their data (the held lock is still held)
  // and an empty script cache, which the reconnection's handshake fills.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fleet->Start(i).ok());
  EXPECT_TRUE(fleet->Get(0, "kept").ok());
  absl::StatusOr<Lease> again = fleet->client().TryAcquire("majority", absl::Seconds(10));
  EXPECT_TRUE(again.ok()) << again.status();
  absl::StatusOr<Lease> held = fleet->client().TryAcquire("kept", absl::Seconds(10));
  EXPECT_TRUE(absl::IsAborted(held.status())) << held.status();
}

TEST(FakeFleetTest, PartitionTimesOutAfterTheNodeTimeout) {
  Options options;
  options.node_timeout = absl::Milliseconds(50);
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3, options);
  ASSERT_NE(fleet, nullptr);
  ASSERT_TRUE(fleet->Partition(0).ok());
  ASSERT_TRUE(fleet->Partition(1).ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<Lease> lease = fleet->client().TryAcquire("cut", absl::Seconds(10));
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(lease.status())) << lease.status();
  EXPECT_TRUE(absl::StrContains(lease.status().message(), "no reply within 50ms"))
      << lease.status();
  // The nodes got nothing: the requests were lost, not refused.
  EXPECT_TRUE(absl::IsNotFound(fleet->Get(0, "cut").status()));
  EXPECT_GE(took, options.node_timeout);

  // Healed, they answer again.
  ASSERT_TRUE(fleet->Heal(0).ok());
  ASSERT_TRUE(fleet->Heal(1).ok());
  absl::StatusOr<Lease> healed = fleet->client().Acquire("cut", absl::Seconds(10), kPatience);
  ASSERT_TRUE(healed.ok()) << healed.status();
}

TEST(FakeFleetTest, SlowNodeMissesTheDeadlineButExecutesTheCommand) {
  Options options;
  options.node_timeout = absl::Milliseconds(300);
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3, options);
  ASSERT_NE(fleet, nullptr);
  ASSERT_TRUE(fleet->Slow(0, absl::Milliseconds(600)).ok());
  absl::StatusOr<Lease> lease = fleet->client().TryAcquire("late", absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  // The SET reaches node 0 late and is executed there, as on a real server.
  EXPECT_TRUE(Eventually([&] { return fleet->Get(0, "late").ok(); }));
  EXPECT_EQ(fleet->Get(0, "late").value_or(""), lease->token());
}

TEST(FakeFleetTest, ClockJumpForwardLosesTheLeaseAndTheNextTokenIsHigher) {
  Options options = Generous();
  options.fencing = true;
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3, options);
  ASSERT_NE(fleet, nullptr);
  absl::StatusOr<Lease> first = fleet->client().Acquire("jump", absl::Seconds(10));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT(first->fencing_token(), 0u);

  // Two nodes' clocks jump past the ttl: the key is gone there.
  ASSERT_TRUE(fleet->JumpClock(0, absl::Seconds(20)).ok());
  ASSERT_TRUE(fleet->JumpClock(1, absl::Seconds(20)).ok());
  EXPECT_TRUE(absl::IsNotFound(fleet->Get(0, "jump").status()));
  EXPECT_TRUE(fleet->Get(2, "jump").ok());

  absl::StatusOr<Lease> second = LostToANewClient(*fleet, *first, absl::Seconds(10));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->fencing_token(), first->fencing_token());
}

TEST(FakeFleetTest, RenewalReportsTheLeaseLostAfterAClockJump) {
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3);
  ASSERT_NE(fleet, nullptr);
  absl::StatusOr<Lease> lease = fleet->client().Acquire("renewed", absl::Seconds(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  Signal lost;
  absl::Status why;
  absl::StatusOr<std::unique_ptr<Renewal>> renewal =
      fleet->client().AutoRenew(*lease, RenewOptions(), [&](absl::Status s) {
        why = s;
        lost.Notify();
      });
  ASSERT_TRUE(renewal.ok()) << renewal.status();
  ASSERT_TRUE(fleet->JumpClock(0, absl::Seconds(5)).ok());
  ASSERT_TRUE(fleet->JumpClock(1, absl::Seconds(5)).ok());
  ASSERT_TRUE(lost.WaitFor(kPatience));
  EXPECT_FALSE(why.ok());
  EXPECT_TRUE((*renewal)->lost().stop_requested());
}

TEST(FakeFleetTest, RestartWithoutDataForgetsTheLocks) {
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3);
  ASSERT_NE(fleet, nullptr);
  absl::StatusOr<Lease> lease = fleet->client().Acquire("restart", absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  // Decided on a quorum: the third node may take the key a moment later.
  ASSERT_TRUE(Eventually([&] { return fleet->Get(2, "restart").ok(); }));
  ASSERT_TRUE(fleet->RestartWithoutData(0).ok());
  ASSERT_TRUE(fleet->RestartWithoutData(1).ok());
  EXPECT_TRUE(fleet->Keys(0)->empty());
  EXPECT_TRUE(fleet->Keys(1)->empty());

  // The holder's extension finds its lease lost; another client gets the
  // lock (over new connections, which load the scripts again).
  absl::StatusOr<Lease> taken = LostToANewClient(*fleet, *lease, absl::Seconds(30));
  EXPECT_TRUE(taken.ok()) << taken.status();
}

TEST(FakeFleetTest, BlockingAcquisitionIsWokenByTheReleaseAnnouncement) {
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3);
  ASSERT_NE(fleet, nullptr);
  absl::StatusOr<Lease> held = fleet->client().Acquire("wake", absl::Seconds(60));
  ASSERT_TRUE(held.ok()) << held.status();

  // The waiter polls only every 20 s and waits 10 s: only the release
  // announcement can get it the lock in time.
  Options options = Generous();
  options.retry_delay = absl::Seconds(80);
  options.wait_poll_max = absl::Seconds(20);
  auto log = std::make_shared<testkit::AttemptLog>();
  options.observer = log;
  absl::StatusOr<std::unique_ptr<Client>> waiter = fleet->NewClient(options);
  ASSERT_TRUE(waiter.ok()) << waiter.status();

  // Every node has the holder's key (a quorum decided; the last one may
  // come later), so that what the nodes execute next is the waiter's.
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 3; ++i) {
      if (!fleet->Get(i, "wake").ok()) return false;
    }
    return true;
  }));
  std::vector<int64_t> before;
  for (int i = 0; i < 3; ++i) before.push_back(*fleet->CommandsExecuted(i));
  absl::StatusOr<Lease> got = absl::UnknownError("not run");
  std::thread t([&] { got = (*waiter)->Acquire("wake", absl::Seconds(10), absl::Seconds(10)); });
  // Its first attempt has been refused by a majority before the release,
  // so that it cannot succeed (it may never reach the last node: an attempt
  // stops sending once it is decided).
  EXPECT_TRUE(Eventually([&] {
    int reached = 0;
    for (int i = 0; i < 3; ++i) {
      reached += *fleet->CommandsExecuted(i) > before[static_cast<size_t>(i)];
    }
    return reached >= 2;
  }));
  ASSERT_TRUE(fleet->client().Release(*held).ok());
  t.join();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(log->attempts().size(), 1u);
  EXPECT_GE(log->attempts()[0], 2);
}

TEST(FakeFleetTest, ShutdownCompletesPendingCallsWithCancelled) {
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3);
  ASSERT_NE(fleet, nullptr);
  // Longer than the test takes to send two calls and destroy the client, so
  // that nothing times out first; the destruction waits this long for the
  // releases that the cancelled attempts send behind their SETs (lost too),
  // as the real client waits for them.
  Options options = Generous();
  options.node_timeout = absl::Seconds(3);
  absl::StatusOr<std::unique_ptr<Client>> client = fleet->NewClient(options);
  ASSERT_TRUE(client.ok()) << client.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fleet->Partition(i).ok());

  std::atomic<int> cancelled{0};
  std::atomic<int> other{0};
  auto record = [&](absl::StatusOr<Lease> r) {
    (absl::IsCancelled(r.status()) ? cancelled : other).fetch_add(1);
  };
  // Both in flight: their requests are lost and would time out in 3 s.
  (*client)->TryAcquireAsync("one", absl::Seconds(10), record);
  (*client)->AcquireAsync("two", absl::Seconds(10), absl::InfiniteDuration(), record);
  client->reset();
  EXPECT_EQ(cancelled.load(), 2);
  EXPECT_EQ(other.load(), 0);
}

TEST(FakeFleetTest, BlockingCallFromACallbackIsRefused) {
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3);
  ASSERT_NE(fleet, nullptr);
  Signal done;
  absl::Status inner;
  fleet->client().TryAcquireAsync("cb", absl::Seconds(10), [&](absl::StatusOr<Lease> r) {
    inner = fleet->client().TryAcquire("cb2", absl::Seconds(10)).status();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitFor(kPatience));
  EXPECT_TRUE(absl::IsFailedPrecondition(inner)) << inner;
}

TEST(FakeFleetTest, ClientsOutliveTheFleet) {
  std::unique_ptr<FakeFleet> fleet = MakeFleet(3);
  ASSERT_NE(fleet, nullptr);
  absl::StatusOr<std::unique_ptr<Client>> client = fleet->NewClient();
  ASSERT_TRUE(client.ok()) << client.status();
  fleet.reset();
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("after", absl::Seconds(10));
  EXPECT_TRUE(lease.ok()) << lease.status();
}

}  // namespace
}  // namespace redlock::testing
