// The engine (internal/engine.h) against real servers: a node executes the
// commands of one client in the order they were sent, whatever they answer;
// and the poller, which wakes for events and deadlines only (no periodic
// wake-up), still expires what nobody answers and still watches the sockets
// once a lone synchronous caller has left.

#include "redlock/internal/engine.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/transport.h"
#include "testkit/gtest_fleet.h"
#include "tests/integration/own_fleet_test.h"

namespace redlock {
namespace {

using internal::Command;
using internal::Engine;
using internal::Reply;
using testkit::Fleet;

// Replies collected in the order their callbacks ran.
struct Replies : internal::SyncWaiter {
  std::mutex mu;
  std::vector<std::pair<int, absl::StatusOr<Reply>>> got;
  int expected = 0;

  internal::NodeCallback Slot(int i) {
    return [this, i](absl::StatusOr<Reply> r) {
      bool all;
      {
        std::lock_guard<std::mutex> lock(mu);
        got.emplace_back(i, std::move(r));
        all = static_cast<int>(got.size()) == expected;
      }
      if (all) SetReady();
    };
  }
};

Command Raw(std::initializer_list<absl::string_view> args) {
  Command c;
  c.payload = internal::EncodeCommand(args);
  c.op = "raw";
  return c;
}

class EngineTest : public testkit::OwnFleetTest {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    ASSERT_NO_FATAL_FAILURE(StartFleet({.nodes = 1}));
    Engine::Config config;
    config.nodes = fleet_->endpoints();
    config.node_timeout = absl::Seconds(5);
    auto engine = Engine::Start(config);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->WaitForFirstConnections(absl::Seconds(5));
  }

  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, ACommandThatGetsNoscriptIsNotRunLaterBehindTheNextOnes) {
  // A lock's SET (the acquire script, by SHA), then its release, with the
  // scripts flushed before the SET and loaded again between the two (as
  // another request's reload would): the release must run after the SET,
  // or the key stays.
  const std::string key = "order/k";
  const std::string token = "t0k3n";
  auto replies = std::make_shared<Replies>();
  replies->expected = 4;
  engine_->Send(0, Raw({"SCRIPT", "FLUSH"}), replies->Slot(0));
  engine_->Send(0, internal::ScriptCommand(internal::AcquireSetScript(), {key}, {token, "60000"}),
                replies->Slot(1));
  engine_->Send(0, Raw({"SCRIPT", "LOAD", internal::ReleaseScript().body}), replies->Slot(2));
  engine_->Send(0, internal::ScriptCommand(internal::ReleaseScript(), {key}, {token, ""}),
                replies->Slot(3));
  engine_->AwaitSync(replies);
  std::vector<int> order;
  for (const auto& [i, r] : replies->got) order.push_back(i);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3})) << "replies in the order of the requests";
  ASSERT_EQ(replies->got.size(), 4u);
  const absl::StatusOr<Reply>& set = replies->got[1].second;
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->is_error() && absl::StartsWith(set->str, "NOSCRIPT")) << set->Describe();
  absl::StatusOr<testkit::RedisValue> left = fleet_->Command(0, {"EXISTS", key});
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ(left->integer, 0) << "a SET ran after its release: the key is left for its ttl";
}

// A bounded wait for something another thread does: the bound is a safety
// net (a hang fails the test instead of the run), not a figure under test.
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  void Set() {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  }
  bool WaitFor(std::chrono::seconds bound) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, bound, [this] { return done; });
  }
};

class EnginePollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    auto fleet = Fleet::Start({.nodes = 1});
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = *std::move(fleet);
  }
  void TearDown() override {
    if (fleet_ != nullptr) (void)fleet_->Continue(0);
    engine_.reset();
  }

  void StartEngine(absl::Duration node_timeout) {
    Engine::Config config;
    config.nodes = fleet_->endpoints();
    config.node_timeout = node_timeout;
    config.on_node_event = [this](const NodeEvent& e) {
      if (e.kind == NodeEvent::Kind::kDisconnected) lost_.Set();
    };
    auto engine = Engine::Start(config);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->WaitForFirstConnections(absl::Seconds(5));
  }

  std::unique_ptr<Fleet> fleet_;
  std::unique_ptr<Engine> engine_;
  Latch lost_;
};

TEST_F(EnginePollerTest, ARequestFromAnIdleClientThatGetsNoAnswerExpires) {
  // Nothing else pending: the I/O thread sleeps without a timeout until
  // this request's deadline is armed (an asynchronous start: a thread that
  // neither polls nor is inside a synchronous call).
  StartEngine(absl::Milliseconds(100));
  ASSERT_TRUE(fleet_->Stop(0).ok());
  Latch answered;
  absl::Status status;
  engine_->Send(0, Raw({"PING"}), [&](absl::StatusOr<Reply> r) {
    status = r.status();
    answered.Set();
  });
  ASSERT_TRUE(answered.WaitFor(std::chrono::seconds(30)))
      << "a request to a silent node never expired";
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "no reply within")) << status;
}

TEST_F(EnginePollerTest, SocketsAreWatchedAgainAfterALoneSynchronousCallerLeaves) {
  // A synchronous call polls for itself; with nothing left in flight when
  // it returns, the I/O thread must still take the role back (at most
  // node_timeout later) and see the node drop the connection, without any
  // further call.
  StartEngine(absl::Milliseconds(100));
  auto replies = std::make_shared<Replies>();
  replies->expected = 1;
  {
    internal::SyncCallScope sync_call;
    engine_->Send(0, Raw({"PING"}), replies->Slot(0));
    engine_->AwaitSync(replies);
  }
  ASSERT_EQ(replies->got.size(), 1u);
  ASSERT_TRUE(replies->got[0].second.ok()) << replies->got[0].second.status();
  absl::StatusOr<testkit::RedisValue> killed =
      fleet_->Command(0, {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  ASSERT_TRUE(killed.ok()) << killed.status();
  ASSERT_GE(killed->integer, 1) << "the engine's connection was not there to kill";
  EXPECT_TRUE(lost_.WaitFor(std::chrono::seconds(30)))
      << "the engine never noticed the node closing its connection";
}

}  // namespace
}  // namespace redlock
