// The engine (internal/engine.h) against real servers: a node executes the
// commands of one client in the order they were sent, whatever they answer.

#include "redlock/internal/engine.h"

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

}  // namespace
}  // namespace redlock
