// The two-round fencing protocol (DESIGN.md 4.5) over fake nodes.

#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/fencing.h"
#include "redlock/internal/client_impl.h"
#include "tests/unit/fake_transport.h"

namespace redlock {
namespace {

using internal::ClientImpl;
using ::testing::HasSubstr;
using testkit::FakeClock;
using testkit::FakeTransport;

class FencingLogicTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(Options()); }
  void Make(Options o) {
    client_.reset();
    o.fencing = true;
    for (int i = 0; i < 5; ++i) {
      Endpoint ep;
      ep.host = "fake" + std::to_string(i);
      o.nodes.push_back(ep);
    }
    transport_ = new FakeTransport(5, &clock_);
    client_ =
        std::make_unique<ClientImpl>(o, std::unique_ptr<internal::Transport>(transport_), &clock_);
  }
  void SetCounter(int node, const std::string& value) {
    transport_->node(node).keys["r:fence"] = {value, std::nullopt, false};
  }
  std::string Counter(int node) {
    auto& keys = transport_->node(node).keys;
    auto it = keys.find("r:fence");
    return it == keys.end() ? "" : it->second.data;
  }
  std::shared_ptr<std::optional<absl::StatusOr<Lease>>> TryAcquire() {
    auto out = std::make_shared<std::optional<absl::StatusOr<Lease>>>();
    client_->TryAcquireAsync("r", absl::Seconds(10),
                             [out](absl::StatusOr<Lease> l) { out->emplace(std::move(l)); });
    return out;
  }

  FakeClock clock_;
  FakeTransport* transport_;
  std::unique_ptr<ClientImpl> client_;
};

TEST_F(FencingLogicTest, TokenIsOnePlusTheMaxOfTheCountingNodes) {
  SetCounter(0, "7");
  SetCounter(1, "41");
  SetCounter(2, "12");
  auto out = TryAcquire();
  for (int i = 0; i < 3; ++i) transport_->AnswerOne(i);  // round 1 decided by nodes 0..2
  EXPECT_FALSE(out->has_value()) << "round 2 still to go";
  EXPECT_EQ(transport_->sent_count("fence-commit"), 3)
      << "round 2 goes to exactly the counted nodes";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(transport_->pending(i).size(), 1u);
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value() && (*out)->ok()) << (*out)->status();
  EXPECT_EQ((**out)->fencing_token(), 42u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Counter(i), "42") << i;
  EXPECT_EQ(Counter(3), "") << "node 3 granted late: not used for round 2";
}

TEST_F(FencingLogicTest, StaleOrMissingCountersOnAMinorityDoNotMatter) {
  // Nodes 3 and 4 lost their counters (amnesia) or lag behind.
  for (int i : {0, 1, 2}) SetCounter(i, "100");
  SetCounter(3, "5");
  auto out = TryAcquire();
  // The stale node and the empty one answer first; one up-to-date node joins.
  transport_->AnswerAll(3);
  transport_->AnswerAll(4);
  transport_->AnswerAll(0);
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value() && (*out)->ok()) << (*out)->status();
  // Any quorum intersects the up-to-date majority: the max is still seen.
  EXPECT_EQ((**out)->fencing_token(), 101u);
}

TEST_F(FencingLogicTest, AMalformedCounterIsAPerNodeFailure) {
  SetCounter(0, "not-a-number");
  auto out = TryAcquire();
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value() && (*out)->ok()) << (*out)->status();
  EXPECT_EQ((**out)->fencing_token(), 1u);
  EXPECT_EQ(Counter(0), "not-a-number") << "never overwritten by round 2";
}

TEST_F(FencingLogicTest, KeyLostBetweenRoundsFailsTheAttemptAndReleases) {
  auto out = TryAcquire();
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);
  transport_->node(1).keys.erase("r");  // expired early on node 1 between the rounds
  transport_->AnswerAll(0);
  transport_->AnswerAll(1);
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("fencing round"));
  transport_->AnswerEverything();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(transport_->node(i).keys.count("r"), 0u) << i;
}

TEST_F(FencingLogicTest, ARetryAfterAFailedRoundTwoCarriesItsOwnToken) {
  Options o;
  o.max_attempts = 2;
  o.retry_jitter = absl::ZeroDuration();
  Make(o);
  auto out = std::make_shared<std::optional<absl::StatusOr<Lease>>>();
  client_->AcquireAsync("r", absl::Seconds(10),
                        [out](absl::StatusOr<Lease> l) { out->emplace(std::move(l)); });
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);  // attempt 1: round 1 says T = 1
  transport_->node(0).keys.erase("r");                   // lost on nodes 0 and 1 before round 2
  transport_->node(1).keys.erase("r");
  transport_->AnswerEverything();
  ASSERT_FALSE(out->has_value()) << "attempt 1 failed in round 2; a retry is due";
  // Meanwhile other holders came and went: the counters moved on.
  for (int i = 0; i < 5; ++i) SetCounter(i, "41");
  transport_->Advance(o.retry_delay);
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value() && (*out)->ok()) << (*out)->status();
  EXPECT_EQ((**out)->fencing_token(), 42u)
      << "the token of the attempt that succeeded, not of the first";
  EXPECT_EQ(Counter(0), "42");
}

TEST_F(FencingLogicTest, ValidityCoversBothRounds) {
  auto out = TryAcquire();
  clock_.Advance(absl::Seconds(1));
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);
  clock_.Advance(absl::Seconds(2));
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value() && (*out)->ok());
  EXPECT_EQ((**out)->TimeLeft(clock_.Now()),
            absl::Seconds(10) - absl::Seconds(3) - absl::Milliseconds(102));
}

TEST_F(FencingLogicTest, SuccessiveHoldersGetIncreasingTokens) {
  uint64_t last = 0;
  for (int round = 0; round < 20; ++round) {
    auto out = TryAcquire();
    // Vary which nodes answer first.
    for (int k = 0; k < 5; ++k) transport_->AnswerAll((round + k) % 5);
    transport_->AnswerEverything();
    ASSERT_TRUE(out->has_value() && (*out)->ok()) << (*out)->status();
    EXPECT_GT((**out)->fencing_token(), last);
    last = (**out)->fencing_token();
    absl::Status st;
    client_->ReleaseAsync(***out, [&](absl::Status s) { st = s; });
    transport_->AnswerEverything();
    ASSERT_TRUE(st.ok());
  }
}

TEST(FenceGuard, AdmitsNonDecreasingTokensOnly) {
  FenceGuard guard;
  EXPECT_TRUE(guard.Admit(3));
  EXPECT_TRUE(guard.Admit(3)) << "the same holder may act several times";
  EXPECT_TRUE(guard.Admit(9));
  EXPECT_FALSE(guard.Admit(4));
  EXPECT_FALSE(guard.Admit(0));
  EXPECT_EQ(guard.highest(), 9u);
  FenceGuard restored(100);
  EXPECT_FALSE(restored.Admit(99));
}

}  // namespace
}  // namespace redlock
