// The durability vote (Options::durability) over fake nodes: a node's grant,
// fencing commit or extension counts only once its replicas confirmed it
// (WAIT / WAITAOF pipelined right behind the write).

#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/internal/client_impl.h"
#include "tests/unit/logic_test_kit.h"

namespace redlock {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testkit::ParseResp;

Options FiveNodes() { return testkit::WithFakeNodes(Options(), 5); }

Options Durable(int replicas = 1) {
  Options o = FiveNodes();
  o.durability.replicas = replicas;
  o.durability.timeout = absl::Milliseconds(20);
  return o;
}

TEST(DurabilityOptionsTest, Validation) {
  EXPECT_TRUE(ValidateOptions(FiveNodes()).ok()) << "off by default";
  EXPECT_TRUE(ValidateOptions(Durable()).ok());
  Options o = Durable();
  o.durability.replicas = -1;
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("durability.replicas -1 is negative"));
  o = Durable();
  o.durability.timeout = absl::ZeroDuration();
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("at least 1ms"))
      << "WAIT 0 would block forever";
  o.durability.timeout = absl::Microseconds(500);
  EXPECT_EQ(ValidateOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.durability.timeout = absl::InfiniteDuration();
  EXPECT_EQ(ValidateOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.durability.timeout = o.node_timeout;
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("shorter than node_timeout"));
  o = FiveNodes();
  o.durability.fsync = true;
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("durability.fsync needs"));
  o = FiveNodes();
  o.durability.timeout = absl::ZeroDuration();
  EXPECT_TRUE(ValidateOptions(o).ok()) << "the timeout is not checked while the vote is off";
}

class DurabilityLogicTest : public testkit::FakeNodesTest {
 protected:
  // Every node has one replica, which confirms what WAIT asks for.
  void Make(Options o) {
    MakeClient(o);
    for (int i = 0; i < transport_->size(); ++i) transport_->node(i).replicas = 1;
  }
  // The commands waiting on `node`, by name.
  std::vector<std::string> Queued(int node) {
    std::vector<std::string> out;
    for (const auto& p : transport_->pending(node)) out.push_back(p.argv.empty() ? "" : p.argv[0]);
    return out;
  }
};

TEST_F(DurabilityLogicTest, OffSendsNoWait) {
  Make(FiveNodes());
  auto out = TryAcquire();
  for (int i = 0; i < 5; ++i) EXPECT_THAT(Queued(i), ElementsAre("SET"));
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value() && (*out)->ok());
  EXPECT_EQ(transport_->sent_count("wait"), 0);
}

TEST_F(DurabilityLogicTest, WaitIsPipelinedRightBehindEverySet) {
  Make(Durable(2));
  auto out = TryAcquire();
  for (int i = 0; i < 5; ++i) {
    ASSERT_THAT(Queued(i), ElementsAre("SET", "WAIT")) << "node " << i;
    EXPECT_THAT(transport_->pending(i)[1].argv, ElementsAre("WAIT", "2", "20"));
  }
}

TEST_F(DurabilityLogicTest, AGrantCountsOnlyOnceTheReplicasConfirm) {
  Make(Durable());
  auto out = TryAcquire();
  for (int i = 0; i < 3; ++i) transport_->AnswerOne(i);  // the SETs only
  EXPECT_FALSE(out->has_value()) << "three grants, none confirmed yet";
  for (int i = 0; i < 3; ++i) transport_->AnswerOne(i);  // their WAITs
  ASSERT_TRUE(out->has_value());
  ASSERT_TRUE((*out)->ok()) << (*out)->status();
  EXPECT_EQ((**out)->nodes_granted(), 3);
}

TEST_F(DurabilityLogicTest, AnUnconfirmedGrantIsANoAndItsKeyIsRemoved) {
  Make(Durable());
  transport_->node(1).replicas = 0;  // its replica is down
  auto out = TryAcquire();
  transport_->AnswerAll(0);
  transport_->AnswerAll(2);
  transport_->AnswerOne(1);  // SET: OK
  transport_->AnswerOne(1);  // WAIT: 0
  EXPECT_FALSE(out->has_value()) << "node 1 granted without its replica: not a yes";
  EXPECT_THAT(Queued(1), ElementsAre("EVALSHA")) << "its key is released at once";
  transport_->AnswerAll(1);
  EXPECT_FALSE(HasKey(1, "r"));
  transport_->AnswerAll(3);
  ASSERT_TRUE(out->has_value() && (*out)->ok()) << (*out)->status();
  EXPECT_EQ((**out)->nodes_granted(), 3);
  EXPECT_TRUE(HasKey(0, "r") && HasKey(2, "r") && HasKey(3, "r"));
}

TEST_F(DurabilityLogicTest, WithoutAQuorumOfConfirmedGrantsTheAttemptFailsUnavailable) {
  Make(Durable());
  for (int i : {0, 1, 2}) transport_->node(i).replicas = 0;
  auto out = TryAcquire();
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kUnavailable) << (*out)->status();
  EXPECT_THAT(std::string((*out)->status().message()),
              HasSubstr("fake0:6379: granted, but only 0 replicas of 1 confirmed the write within "
                        "20ms (WAIT)"));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(HasKey(i, "r")) << "node " << i;
}

TEST_F(DurabilityLogicTest, AWaitWithoutAnswerIsANo) {
  Make(Durable());
  auto out = TryAcquire();
  for (int i = 0; i < 5; ++i) transport_->AnswerOne(i);  // every SET granted
  for (int i : {0, 1, 2}) transport_->TimeOutAll(i);     // their WAITs never answer
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kUnavailable) << (*out)->status();
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("no answer to WAIT"));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(HasKey(i, "r")) << "node " << i;
}

TEST_F(DurabilityLogicTest, ARefusedSetIsCountedAtOnce) {
  Make(Durable());
  for (int i = 0; i < 5; ++i) transport_->node(i).keys["r"] = {"someone else", std::nullopt, false};
  auto out = TryAcquire();
  for (int i : {0, 1, 2}) transport_->AnswerOne(i);  // three refusals, WAITs still queued
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kAborted) << (*out)->status();
}

TEST_F(DurabilityLogicTest, WaitAofWithFsync) {
  Options o = Durable();
  o.durability.fsync = true;
  Make(o);
  transport_->node(4).knows_waitaof = false;
  transport_->node(3).appendonly = false;
  auto out = TryAcquire();
  EXPECT_THAT(transport_->pending(0)[1].argv, ElementsAre("WAITAOF", "1", "1", "20"));
  transport_->AnswerAll(4);
  transport_->AnswerAll(3);
  transport_->AnswerAll(0);
  transport_->AnswerAll(1);
  EXPECT_FALSE(out->has_value());
  transport_->AnswerAll(2);
  ASSERT_TRUE(out->has_value() && (*out)->ok()) << (*out)->status();
  EXPECT_FALSE(HasKey(3, "r"));
  EXPECT_FALSE(HasKey(4, "r"));

  // Without a quorum the message tells why each node said no.
  for (int i : {0, 1, 2}) transport_->node(i).keys.clear();
  transport_->node(2).replicas = 0;
  client_->ReleaseAsync(***out, [](absl::Status) {});
  transport_->AnswerEverything();
  auto again = TryAcquire();
  transport_->AnswerEverything();
  ASSERT_TRUE(again->has_value());
  const std::string msg((*again)->status().message());
  EXPECT_THAT(msg, HasSubstr("this server does not know WAITAOF (Redis 7.2 or later"));
  EXPECT_THAT(msg, HasSubstr("appendonly is disabled"));
  EXPECT_THAT(msg, HasSubstr("fsynced on only 0 replicas of 1 within 20ms (WAITAOF)"));
}

TEST_F(DurabilityLogicTest, FencingWaitsBehindTheCommitOnly) {
  Options o = Durable();
  o.fencing = true;
  Make(o);
  transport_->node(2).replicas = 0;
  auto out = TryAcquire();
  for (int i = 0; i < 5; ++i) EXPECT_THAT(Queued(i), ElementsAre("EVALSHA")) << "round 1 alone";
  for (int i : {0, 1, 2}) transport_->AnswerOne(i);
  for (int i : {0, 1, 2}) EXPECT_THAT(Queued(i), ElementsAre("EVALSHA", "WAIT")) << i;
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  // Node 2 cannot confirm its commit: round 2 needs all three counted nodes.
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kUnavailable) << (*out)->status();
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("(fencing round)"));

  transport_->node(2).replicas = 1;
  auto again = TryAcquire();
  transport_->AnswerEverything();
  ASSERT_TRUE(again->has_value() && (*again)->ok()) << (*again)->status();
  EXPECT_GT((**again)->fencing_token(), 0u);
}

TEST_F(DurabilityLogicTest, AnExtensionCountsOnlyWhereReplicated) {
  Make(Durable());
  auto out = TryAcquire();
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value() && (*out)->ok());
  for (int i : {0, 1, 2}) transport_->node(i).replicas = 0;
  std::optional<absl::StatusOr<Lease>> ext;
  client_->ExtendAsync(***out, absl::Seconds(10),
                       [&](absl::StatusOr<Lease> l) { ext.emplace(std::move(l)); });
  for (int i = 0; i < 5; ++i) EXPECT_THAT(Queued(i), ElementsAre("EVALSHA", "WAIT"));
  transport_->AnswerEverything();
  ASSERT_TRUE(ext.has_value());
  EXPECT_EQ(ext->status().code(), absl::StatusCode::kUnavailable)
      << "not lost, only not replicated: " << ext->status();

  for (int i : {0, 1, 2}) transport_->node(i).replicas = 1;
  ext.reset();
  client_->ExtendAsync(***out, absl::Seconds(10),
                       [&](absl::StatusOr<Lease> l) { ext.emplace(std::move(l)); });
  transport_->AnswerEverything();
  ASSERT_TRUE(ext.has_value() && ext->ok()) << ext->status();
}

TEST_F(DurabilityLogicTest, ReleaseDoesNotWait) {
  Make(Durable());
  auto out = TryAcquire();
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value() && (*out)->ok());
  const int waits = transport_->sent_count("wait");
  absl::Status released = absl::UnknownError("pending");
  client_->ReleaseAsync(***out, [&](absl::Status s) { released = s; });
  for (int i = 0; i < 5; ++i) EXPECT_THAT(Queued(i), ElementsAre("EVALSHA"));
  transport_->AnswerEverything();
  EXPECT_TRUE(released.ok()) << released;
  EXPECT_EQ(transport_->sent_count("wait"), waits);
}

}  // namespace
}  // namespace redlock
