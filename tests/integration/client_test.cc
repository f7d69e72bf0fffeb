// redlock::Client against five real redis-server processes.

#include "redlock/client.h"

#include <stdint.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <memory>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testkit/fleet_suite.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::Fleet;
using testkit::RedisValue;

using SteadyClock = std::chrono::steady_clock;

class ClientTest : public testkit::FleetSuite {
 protected:
  // Options whose Acquire, after a failed attempt, waits 10 s before the
  // next (of 5): an acquisition of a held resource stays pending.
  Options SlowRetries() {
    Options o = FleetSuite::SlowRetries(MakeOptions(), absl::Seconds(10));
    o.max_attempts = 5;
    return o;
  }
};

// The core cases, over plain TCP and over TLS (rediss://, with the fleet's
// throw-away CA): Plain/ClientCoreTest.* and Tls/ClientCoreTest.*.
class ClientCoreTest : public testkit::OverTransports<ClientTest> {};
REDLOCK_INSTANTIATE_OVER_TRANSPORTS(ClientCoreTest);

TEST_P(ClientCoreTest, TwoClientsContendExactlyOneWinsAndReleaseFreesIt) {
  auto a = MakeClient();
  auto b = MakeClient();
  absl::StatusOr<Lease> la;
  absl::StatusOr<Lease> lb;
  std::thread ta([&] { la = a->TryAcquire("r", absl::Seconds(10)); });
  std::thread tb([&] { lb = b->TryAcquire("r", absl::Seconds(10)); });
  ta.join();
  tb.join();
  ASSERT_NE(la.ok(), lb.ok()) << la.status() << " / " << lb.status();
  absl::StatusOr<Lease>& winner = la.ok() ? la : lb;
  absl::StatusOr<Lease>& loser = la.ok() ? lb : la;
  Client* winner_client = la.ok() ? a.get() : b.get();
  Client* loser_client = la.ok() ? b.get() : a.get();
  // Split votes (neither gets a quorum) are possible in principle; here one
  // must have won, and the loser sees either a clean refusal or a split.
  EXPECT_TRUE(absl::IsAborted(loser.status()) || absl::IsUnavailable(loser.status()))
      << loser.status();
  EXPECT_GE(winner->nodes_granted(), 3);
  EXPECT_GT(winner->TimeLeft(), absl::Seconds(9));
  // Key and value are exactly resource and token: other Redlock clients agree.
  int holding = 0;
  for (int i = 0; i < 5; ++i) holding += Get(i, "r") == winner->token();
  EXPECT_GE(holding, 3);

  absl::StatusOr<Lease> again = loser_client->TryAcquire("r", absl::Seconds(10));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAborted) << again.status();
  REDLOCK_ASSERT_OK(winner_client->Release(*winner));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(EventuallyGone(i, "r"), "") << "node " << i;
  absl::StatusOr<Lease> after = loser_client->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(after.status());
  REDLOCK_EXPECT_OK(loser_client->Release(*after));
}

TEST_P(ClientCoreTest, OneStoppedNodeCostsFarLessThanNodeTimeout) {
  Options o = MakeOptions();
  o.node_timeout = absl::Milliseconds(500);
  auto c = MakeClient(o);
  REDLOCK_ASSERT_OK(fleet_->Stop(4));
  for (int round = 0; round < 20; ++round) {
    auto start = SteadyClock::now();
    absl::StatusOr<Lease> l = c->TryAcquire(absl::StrCat("r", round), absl::Seconds(10));
    absl::Duration took = Since(start);
    REDLOCK_ASSERT_OK(l.status());
    EXPECT_LT(took, absl::Milliseconds(250)) << "round " << round << " waited for the stopped node";
    REDLOCK_EXPECT_OK(c->Release(*l));
  }
  REDLOCK_ASSERT_OK(fleet_->Continue(4));
}

TEST_P(ClientCoreTest, ThreeStoppedNodesFailSoonAfterNodeTimeoutAndLeaveNothing) {
  Options o = MakeOptions();
  o.node_timeout = absl::Milliseconds(100);
  auto c = MakeClient(o);
  for (int i : {1, 2, 3}) REDLOCK_ASSERT_OK(fleet_->Stop(i));
  auto start = SteadyClock::now();
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(10));
  absl::Duration took = Since(start);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnavailable) << l.status();
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("2 of 5 nodes granted (quorum 3)"));
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("no reply within 100ms"));
  EXPECT_GE(took, absl::Milliseconds(100));
  EXPECT_LT(took, absl::Milliseconds(1000));
  // The SETs are still queued on the stopped nodes, followed by the release.
  for (int i : {1, 2, 3}) REDLOCK_ASSERT_OK(fleet_->Continue(i));
  testkit::Eventually([&] { return KeysEverywhere(); }, 0);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(KeysOn(i), 0) << "node " << i << " kept a key of the failed attempt";
}

TEST_P(ClientCoreTest, StragglersLateSetIsRemovedByTheRelease) {
  Options o = MakeOptions();
  o.node_timeout = absl::Milliseconds(50);
  auto c = MakeClient(o);
  REDLOCK_ASSERT_OK(fleet_->Stop(0));
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(30));
  REDLOCK_ASSERT_OK(l.status());
  std::this_thread::sleep_for(std::chrono::milliseconds(80));  // node 0's SET is now late
  REDLOCK_ASSERT_OK(c->Release(*l));
  REDLOCK_ASSERT_OK(fleet_->Continue(0));
  // Node 0 now executes the late SET, then the release queued behind it.
  EXPECT_EQ(EventuallyGone(0, "r"), "") << "the straggler's SET outlived the release";
}

TEST_P(ClientCoreTest, RestartedNodeIsUsedAgain) {
  Options o = MakeOptions();
  o.quorum = 5;  // every node must take part
  auto c = MakeClient(o);
  REDLOCK_ASSERT_OK(c->TryAcquire("before", absl::Seconds(5)).status());
  REDLOCK_ASSERT_OK(fleet_->Restart(2));
  absl::StatusOr<Lease> l;
  auto start = SteadyClock::now();
  for (int tries = 0; tries < 300; ++tries) {
    l = c->TryAcquire(absl::StrCat("after", tries), absl::Seconds(5));
    if (l.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_LT(Since(start), absl::Seconds(3)) << "reconnect should follow the backoff, not a restart";
  EXPECT_EQ(l->nodes_granted(), 5);
}

TEST_P(ClientCoreTest, ExtendAfterKeyVanishedOnMajorityFailsAndRecreatesNothing) {
  auto c = MakeClient();
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  absl::StatusOr<Lease> ok = c->Extend(*l, absl::Seconds(20));
  REDLOCK_ASSERT_OK(ok.status());
  EXPECT_GT(ok->TimeLeft(), absl::Seconds(19));
  for (int i : {0, 1, 2}) REDLOCK_ASSERT_OK(fleet_->Command(i, {"DEL", prefix_ + "r"}).status());
  absl::StatusOr<Lease> lost = c->Extend(*l, absl::Seconds(20));
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kFailedPrecondition) << lost.status();
  for (int i : {0, 1, 2}) EXPECT_EQ(Get(i, "r"), "") << "extend re-created the key on node " << i;
}

TEST_F(ClientTest, WrongPasswordIsUnavailableNamingTheAuthFailure) {
  auto secured = Fleet::Start({.nodes = 3, .password = "right"});
  REDLOCK_ASSERT_OK(secured.status());
  Options o;
  o.nodes = (*secured)->endpoints();
  for (auto& ep : o.nodes) ep.password = "wrong";
  o.connect_timeout = absl::Milliseconds(500);
  auto c = MakeClient(o);
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(5));
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("authentication failed"));
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("WRONGPASS"));

  // No password at all: the node's NOAUTH is explained.
  for (auto& ep : o.nodes) ep.password.clear();
  c = MakeClient(o);
  l = c->TryAcquire("r", absl::Seconds(5));
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("authentication required"));

  // The right one works, with the password from a redis:// URL.
  o.nodes.clear();
  for (int i = 0; i < 3; ++i) {
    o.nodes.push_back(
        *ParseEndpoint(absl::StrCat("redis://:right@127.0.0.1:", (*secured)->port(i), "/3")));
  }
  c = MakeClient(o);
  l = c->TryAcquire("r", absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  // SELECT 3 happened: the key lives in db 3.
  absl::StatusOr<RedisValue> v = (*secured)->Command(
      0, {"EVAL", "redis.call('select', 3) return redis.call('get', 'r')", "0"});
  REDLOCK_ASSERT_OK(v.status());
  EXPECT_EQ(v->str, l->token());
}

TEST_F(ClientTest, AclUserAndPassword) {
  // The default user has another password: only AUTH alice pw gets in.
  auto secured =
      Fleet::Start({.nodes = 3,
                    .password = "default-password",
                    .extra_args = {"--user", "alice", "on", ">pw", "~*", "&*", "+@all"}});
  REDLOCK_ASSERT_OK(secured.status());
  Options o;
  for (int i = 0; i < 3; ++i) {
    o.nodes.push_back(
        *ParseEndpoint(absl::StrCat("redis://alice:pw@127.0.0.1:", (*secured)->port(i))));
  }
  auto c = MakeClient(o);
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  REDLOCK_EXPECT_OK(c->Release(*l));
}

TEST_F(ClientTest, KeyOfWrongTypeOnOneNodeIsAPerNodeFailure) {
  REDLOCK_ASSERT_OK(fleet_->Command(3, {"RPUSH", prefix_ + "r", "x"}).status());
  auto c = MakeClient();
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  absl::StatusOr<Lease> e = c->Extend(*l, absl::Seconds(10));
  REDLOCK_EXPECT_OK(e.status());
  REDLOCK_EXPECT_OK(c->Release(*l));
  // With the list on three nodes the acquire is refused there, cleanly.
  for (int i : {0, 1})
    REDLOCK_ASSERT_OK(fleet_->Command(i, {"RPUSH", prefix_ + "r", "x"}).status());
  l = c->TryAcquire("r", absl::Seconds(10));
  EXPECT_EQ(l.status().code(), absl::StatusCode::kAborted) << l.status();
}

TEST_F(ClientTest, HundredsOfConcurrentAcquiresOnDistinctResourcesAllSucceed) {
  auto c = MakeClient();
  constexpr int kThreads = 16;
  constexpr int kPerThread = 40;
  std::atomic<int> ok{0};
  std::vector<std::string> failures;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<Lease> l = c->TryAcquire(absl::StrCat("t", t, "/", i), absl::Seconds(10));
        if (!l.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(l.status().ToString());
          continue;
        }
        ++ok;
        absl::Status s = c->Release(*l);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(s.ToString());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures.front();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(testkit::Eventually([&] { return KeysOn(i); }, 0), 0);
}

TEST_F(ClientTest, InteroperatesWithOtherRedlockClients) {
  auto c = MakeClient();
  // Another implementation holds the lock: plain SET NX PX on a majority.
  for (int i : {0, 1, 2}) {
    REDLOCK_ASSERT_OK(
        fleet_->Command(i, {"SET", prefix_ + "r", "their-token", "NX", "PX", "10000"}).status());
  }
  EXPECT_EQ(c->TryAcquire("r", absl::Seconds(5)).status().code(), absl::StatusCode::kAborted);
  for (int i : {0, 1, 2}) REDLOCK_ASSERT_OK(fleet_->Command(i, {"DEL", prefix_ + "r"}).status());
  // We hold it: their SET NX fails on every node we hold.
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<RedisValue> v =
        fleet_->Command(i, {"SET", prefix_ + "r", "their-token", "NX", "PX", "10000"});
    refused += v.ok() && v->type == RedisValue::Type::kNil;
  }
  EXPECT_GE(refused, 3);
}

TEST_F(ClientTest, ReloadsScriptsAfterScriptFlush) {
  auto c = MakeClient();
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  for (int i = 0; i < 5; ++i) REDLOCK_ASSERT_OK(fleet_->Command(i, {"SCRIPT", "FLUSH"}).status());
  REDLOCK_ASSERT_OK(c->Release(*l));
  // The last nodes answer NOSCRIPT first, then run the EVAL fallback.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(EventuallyGone(i, "r"), "") << "node " << i;
  l = c->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  REDLOCK_EXPECT_OK(c->Extend(*l, absl::Seconds(10)).status());
  REDLOCK_EXPECT_OK(c->Release(*l));
}

TEST_F(ClientTest, BadInputChangesNothing) {
  auto c = MakeClient();
  EXPECT_EQ(c->TryAcquire("", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      c->TryAcquire(std::string(kMaxResourceLength + 1, 'x'), absl::Seconds(1)).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->TryAcquire("r", absl::Milliseconds(2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Acquire("r", absl::Seconds(1), -absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Release(Lease()).code(), absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(KeysOn(i), 0);

  Options o = MakeOptions();
  o.nodes.push_back(o.nodes[0]);
  EXPECT_EQ(Client::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = MakeOptions();
  o.quorum = 2;
  EXPECT_EQ(Client::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, UnreachableNodesAreVotesNotErrorsAtCreate) {
  Options o = MakeOptions();
  absl::StatusOr<int> p1 = testkit::PickFreePort("127.0.0.1");
  absl::StatusOr<int> p2 = testkit::PickFreePort("127.0.0.1");
  REDLOCK_ASSERT_OK(p1.status());
  o.nodes[3].port = *p1;  // nothing listens there
  o.nodes[4].port = *p2;
  auto c = MakeClient(o);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_EQ(l->nodes_granted(), 3);
  o.nodes[2].port = *p1 + 1 == *p2 ? *p2 + 1 : *p1 + 1;
  c = MakeClient(o);
  auto start = SteadyClock::now();
  l = c->TryAcquire("r2", absl::Seconds(5));
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("Connection refused"));
  EXPECT_LT(Since(start), absl::Milliseconds(50)) << "known-down nodes are refused at once";
  std::vector<NodeHealth> health = c->Health();
  ASSERT_EQ(health.size(), 5u);
  EXPECT_TRUE(health[0].connected);
  EXPECT_TRUE(health[4].breaker_open);
  EXPECT_THAT(health[4].last_error, HasSubstr("Connection refused"));
}

TEST_F(ClientTest, AsyncFormsAndBlockingFromCallbackIsRefused) {
  auto c = MakeClient();
  std::promise<absl::StatusOr<Lease>> got;
  c->AcquireAsync("r", absl::Seconds(10),
                  [&](absl::StatusOr<Lease> l) { got.set_value(std::move(l)); });
  absl::StatusOr<Lease> l = got.get_future().get();
  REDLOCK_ASSERT_OK(l.status());
  std::promise<absl::Status> nested;
  c->ExtendAsync(*l, absl::Seconds(10), [&](absl::StatusOr<Lease> e) {
    // A blocking call here would deadlock the I/O thread: it is refused.
    absl::StatusOr<Lease> blocked = c->TryAcquire("other", absl::Seconds(1));
    nested.set_value(blocked.status());
  });
  EXPECT_EQ(nested.get_future().get().code(), absl::StatusCode::kFailedPrecondition);
  std::promise<absl::Status> released;
  c->ReleaseAsync(*l, [&](absl::Status s) { released.set_value(s); });
  REDLOCK_EXPECT_OK(released.get_future().get());
}

TEST_F(ClientTest, DestroyingTheClientCancelsPendingCallbacks) {
  ASSERT_NO_FATAL_FAILURE(HoldElsewhere("r"));
  auto c = MakeClient(SlowRetries());
  std::promise<absl::Status> got;
  c->AcquireAsync("r", absl::Seconds(10),
                  [&](absl::StatusOr<Lease> l) { got.set_value(l.status()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // now waiting out the retry delay
  c.reset();
  EXPECT_EQ(got.get_future().get().code(), absl::StatusCode::kCancelled);
}

// client.h: when the client is destroyed, every pending call completes with
// kCancelled before the destructor returns. That includes the calls its
// callbacks start meanwhile (of every kind, from a completion callback and
// from a renewal's lost() token, which the destruction stops), and theirs.
TEST_F(ClientTest, CallsStartedByCallbacksDuringDestructionAllCallBack) {
  ASSERT_NO_FATAL_FAILURE(HoldElsewhere("held"));
  // Starts one call of each kind whose callback starts the next generation.
  struct Chain : std::enable_shared_from_this<Chain> {
    void Start(int depth) {
      if (depth > 2) return;
      auto self = shared_from_this();
      auto next = [self, depth] {
        ++self->done;
        self->Start(depth + 1);
      };
      started += 4;
      client->TryAcquireAsync("x", absl::Seconds(1), [next](absl::StatusOr<Lease>) { next(); });
      client->AcquireAsync("held", absl::Seconds(1), absl::Seconds(10),
                           [next](absl::StatusOr<Lease>) { next(); });
      client->ExtendAsync(Lease::ForToken("x", "t"), absl::Seconds(1),
                          [next](absl::StatusOr<Lease>) { next(); });
      client->ReleaseAsync(Lease::ForToken("x", "t"), [next](absl::Status) { next(); });
    }
    Client* client = nullptr;
    std::atomic<int> started{0}, done{0};
  };
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE(round);
    auto c = MakeClient(SlowRetries());
    auto chain = std::make_shared<Chain>();
    chain->client = c.get();
    // Pending at destruction: an acquisition waiting out its retry delay...
    chain->started += 1;
    c->AcquireAsync("held", absl::Seconds(10), [chain](absl::StatusOr<Lease> l) {
      EXPECT_TRUE(absl::IsCancelled(l.status())) << l.status();
      ++chain->done;
      chain->Start(1);
    });
    // ... and a renewal, whose lost() the destruction stops.
    absl::StatusOr<Lease> mine = c->TryAcquire(absl::StrCat("mine", round), absl::Seconds(30));
    REDLOCK_ASSERT_OK(mine.status());
    auto renewal = c->AutoRenew(*mine, RenewOptions(), [](absl::Status) {});
    REDLOCK_ASSERT_OK(renewal.status());
    StopCallback on_lost((*renewal)->lost(), [chain] { chain->Start(1); });
    c.reset();
    EXPECT_EQ(chain->started.load(), 1 + 2 * (4 + 16));
    EXPECT_EQ(chain->done.load(), chain->started.load()) << "calls never called back";
  }
}

// An acquisition whose callback starts it again on every error, kCancelled
// included: during the destruction each such call completes at once. The
// callbacks must run one after another, not nested in each other on the I/O
// thread's stack.
TEST_F(ClientTest, AnAcquisitionReissuedOnEveryErrorDuringDestructionDoesNotRecurse) {
  ASSERT_NO_FATAL_FAILURE(HoldElsewhere("held"));
  struct Reissue {
    void Start() {
      client->AcquireAsync("held", absl::Seconds(10), [this](absl::StatusOr<Lease> l) {
        char probe;
        const auto at = reinterpret_cast<uintptr_t>(&probe);
        lowest = std::min(lowest, at);
        highest = std::max(highest, at);
        ++calls;
        if (!l.ok() && calls <= limit) Start();
      });
    }
    Client* client = nullptr;
    int limit = 0;
    int calls = 0;  // only on the I/O thread
    uintptr_t lowest = UINTPTR_MAX, highest = 0;
  };
  Reissue bounded;
  auto c = MakeClient(SlowRetries());
  bounded.client = c.get();
  bounded.limit = 1000;
  bounded.Start();
  c.reset();
  EXPECT_EQ(bounded.calls, 1001);
  EXPECT_LT(bounded.highest - bounded.lowest, 64u * 1024)
      << "the callbacks ran nested: " << (bounded.highest - bounded.lowest) << " bytes of stack";

  // Without a limit the chain would never end: the destructor still returns
  // (the client follows such a chain a bounded number of rounds).
  Reissue forever;
  c = MakeClient(SlowRetries());
  forever.client = c.get();
  forever.limit = std::numeric_limits<int>::max();
  forever.Start();
  c.reset();
  EXPECT_GE(forever.calls, 1000);
  EXPECT_LT(forever.highest - forever.lowest, 64u * 1024);
}

TEST_F(ClientTest, InFlightStaysBoundedWhileANodeIsStopped) {
  Options o = MakeOptions();
  o.max_in_flight_per_node = 64;
  auto c = MakeClient(o);
  REDLOCK_ASSERT_OK(fleet_->Stop(1));
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<Lease> l = c->TryAcquire(absl::StrCat("r", i), absl::Seconds(10));
    REDLOCK_ASSERT_OK(l.status());
    REDLOCK_ASSERT_OK(c->Release(*l));
  }
  std::vector<NodeHealth> health = c->Health();
  EXPECT_TRUE(health[1].breaker_open);
  EXPECT_LE(health[1].in_flight, 64u);
  REDLOCK_ASSERT_OK(fleet_->Continue(1));
  // Once the node answers a probe, it is used again.
  EXPECT_FALSE(
      testkit::Eventually([&] { return c->Health()[1].breaker_open; }, false, absl::Seconds(3)));
}

TEST_F(ClientTest, InspectShowsWhoHoldsWhat) {
  auto c = MakeClient();
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  absl::StatusOr<std::vector<NodeView>> views = c->Inspect("r");
  REDLOCK_ASSERT_OK(views.status());
  ASSERT_EQ(views->size(), 5u);
  int held = 0;
  for (const NodeView& v : *views) {
    REDLOCK_EXPECT_OK(v.status);
    if (v.held) {
      ++held;
      EXPECT_EQ(v.token, l->token());
      EXPECT_GT(v.ttl_left, absl::Seconds(8));
    }
  }
  EXPECT_GE(held, 3);
}

}  // namespace
}  // namespace redlock
