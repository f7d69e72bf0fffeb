// The two-round fencing protocol (docs/design.md 5.10) over fake nodes.

#include <map>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/fencing.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/client_impl.h"
#include "redlock/outcome.h"
#include "tests/unit/logic_test_kit.h"

namespace redlock {
namespace {

using internal::ClientImpl;
using ::testing::HasSubstr;
using testkit::FakeClock;
using testkit::FakeTransport;

// What can happen to a node's counter behind the client's back.
enum class Regression {
  kDeleted,  // a restart without persistence
  kSetBack,  // a restore of an older state, or a hand edit
  kGarbage,  // overwritten with something that is no counter
};

const char* RegressionName(Regression r) {
  switch (r) {
    case Regression::kDeleted:
      return "Deleted";
    case Regression::kSetBack:
      return "SetBack";
    case Regression::kGarbage:
      return "Garbage";
  }
  return "?";
}

class FencingLogicTest : public testkit::FakeNodesTest {
 protected:
  void SetUp() override { Make(Options()); }
  void Make(Options o, int nodes = 5) {
    o.fencing = true;
    MakeClient(testkit::WithFakeNodes(std::move(o), nodes));
  }
  // Fencing that tolerates one lost counter (Options::fencing_lost_counters).
  void MakeToleratingALostCounter(int nodes = 5) {
    Options o;
    o.fencing_lost_counters = 1;
    Make(o, nodes);
  }
  // Answers everything pending: `out` is then a granted lease. Use with
  // ASSERT_NO_FATAL_FAILURE.
  void AnswerAllAndExpectGranted(const testkit::Slot<Lease>& out) {
    transport_->AnswerEverything();
    ASSERT_TRUE(out->has_value() && (*out)->ok()) << (*out)->status();
  }
  void SetCounter(int node, const std::string& value) {
    transport_->node(node).keys["r:fence"] = {value, std::nullopt, false};
  }
  std::string Counter(int node) {
    auto& keys = transport_->node(node).keys;
    auto it = keys.find("r:fence");
    return it == keys.end() ? "" : it->second.data;
  }
  void Regress(int node, Regression how, uint64_t below) {
    switch (how) {
      case Regression::kDeleted:
        transport_->node(node).keys.erase("r:fence");
        break;
      case Regression::kSetBack:
        SetCounter(node, std::to_string(below - 1));
        break;
      case Regression::kGarbage:
        SetCounter(node, "garbage");
        break;
    }
  }
  // One fenced acquisition whose round 1 is answered by the nodes in
  // `order`, one after the other (the others answer after the decision),
  // then released. Returns its token.
  absl::StatusOr<uint64_t> HoldAndRelease(const std::vector<int>& order) {
    auto out = TryAcquire();
    for (int i : order) transport_->AnswerOne(i);
    transport_->AnswerEverything();
    if (!out->has_value()) return absl::InternalError("undecided");
    if (!(*out)->ok()) return (*out)->status();
    uint64_t token = (**out)->fencing_token();
    if (absl::Status st = ReleaseAndAnswer(***out); !st.ok()) return st;
    return token;
  }
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
  ASSERT_NO_FATAL_FAILURE(AnswerAllAndExpectGranted(out));
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
  ASSERT_NO_FATAL_FAILURE(AnswerAllAndExpectGranted(out));
  // Any quorum intersects the up-to-date majority: the max is still seen.
  EXPECT_EQ((**out)->fencing_token(), 101u);
}

TEST_F(FencingLogicTest, AMalformedCounterIsAPerNodeFailure) {
  SetCounter(0, "not-a-number");
  auto out = TryAcquire();
  ASSERT_NO_FATAL_FAILURE(AnswerAllAndExpectGranted(out));
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
  // The node lost the key (nobody can take a live one): a node fault, not
  // "held by another client" (ABORTED).
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("fencing round"));
  transport_->AnswerEverything();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(transport_->node(i).keys.count("r"), 0u) << i;
}

// The client stopped between the rounds for longer than the ttl: the key
// that is gone at round 2 expired, nobody else took it. The call says so
// (DEADLINE_EXCEEDED), not "held by another client" (ABORTED).
TEST_F(FencingLogicTest, AKeyThatExpiredBeforeRoundTwoIsNoValidityNotHeldElsewhere) {
  auto out = TryAcquire("r", absl::Seconds(2));
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);
  clock_.Advance(absl::Milliseconds(2100));  // past the ttl: every key expired
  for (int i = 0; i < 3; ++i) transport_->node(i).keys.erase("r");
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kDeadlineExceeded) << (*out)->status();
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("its keys had expired"));
  transport_->AnswerEverything();
}

TEST_F(FencingLogicTest, ARetryAfterAFailedRoundTwoCarriesItsOwnToken) {
  Options o;
  o.max_attempts = 2;
  o.retry_jitter = absl::ZeroDuration();
  Make(o);
  testkit::Slot<Lease> out = testkit::NewSlot<Lease>();
  client_->AcquireAsync("r", absl::Seconds(10), testkit::FillSlot(out));
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);  // attempt 1: round 1 says T = 1
  transport_->node(0).keys.erase("r");                   // lost on nodes 0 and 1 before round 2
  transport_->node(1).keys.erase("r");
  transport_->AnswerEverything();
  ASSERT_FALSE(out->has_value()) << "attempt 1 failed in round 2; a retry is due";
  // Meanwhile other holders came and went: the counters moved on.
  for (int i = 0; i < 5; ++i) SetCounter(i, "41");
  transport_->Advance(o.retry_delay);
  ASSERT_NO_FATAL_FAILURE(AnswerAllAndExpectGranted(out));
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
    ASSERT_NO_FATAL_FAILURE(AnswerAllAndExpectGranted(out));
    EXPECT_GT((**out)->fencing_token(), last);
    last = (**out)->fencing_token();
    absl::Status st = ReleaseAndAnswer(***out);
    ASSERT_TRUE(st.ok());
  }
}

// ---- Options::fencing_lost_counters ------------------------------------------

TEST(FencedQuorum, TheReadAndCommitSetsShareOneMoreNodeThanMayLoseACounter) {
  using internal::CounterLossesSurvived;
  using internal::FencedQuorum;
  for (int n = 1; n <= 9; ++n) {
    const int majority = n / 2 + 1;
    EXPECT_EQ(FencedQuorum(n, majority, 0), majority) << n;
    for (int quorum = majority; quorum <= n; ++quorum) {
      for (int f = 0; f < n; ++f) {
        const int fq = FencedQuorum(n, quorum, f);
        EXPECT_GE(fq, quorum);
        EXPECT_LE(fq, n) << "N=" << n << " f=" << f;
        // Any two sets of fq nodes share 2fq - N: one more than may lose.
        EXPECT_GE(2 * fq - n, f + 1) << "N=" << n << " f=" << f;
        EXPECT_GE(CounterLossesSurvived(n, fq), f);
        // And fq is the least that does (unless the quorum asks for more).
        if (fq > quorum) {
          EXPECT_LT(2 * (fq - 1) - n, f + 1) << "N=" << n << " f=" << f;
        }
      }
    }
  }
  // The README's table: F, and the nodes that may be down (N - F).
  struct Row {
    int n, f, fq, down, survived;
  };
  for (const Row& r :
       {Row{3, 0, 2, 1, 0}, Row{3, 1, 3, 0, 2}, Row{4, 0, 3, 1, 1}, Row{5, 0, 3, 2, 0},
        Row{5, 1, 4, 1, 2}, Row{5, 2, 4, 1, 2}, Row{6, 0, 4, 2, 1}, Row{7, 0, 4, 3, 0},
        Row{7, 1, 5, 2, 2}, Row{7, 3, 6, 1, 4}}) {
    const int fq = FencedQuorum(r.n, r.n / 2 + 1, r.f);
    EXPECT_EQ(fq, r.fq) << "N=" << r.n << " f=" << r.f;
    EXPECT_EQ(r.n - fq, r.down) << "N=" << r.n << " f=" << r.f;
    EXPECT_EQ(CounterLossesSurvived(r.n, fq), r.survived) << "N=" << r.n << " f=" << r.f;
  }
}

// N=5 with one lost counter tolerated: F = ceil((5 + 1 + 1) / 2) = 4.
TEST_F(FencingLogicTest, ToleratingALostCounterWaitsForFourGrantsAndCommitsOnAllFour) {
  MakeToleratingALostCounter();
  for (int i = 0; i < 5; ++i) SetCounter(i, "41");
  auto out = TryAcquire();
  for (int i = 0; i < 3; ++i) transport_->AnswerOne(i);
  EXPECT_EQ(transport_->sent_count("fence-commit"), 0)
      << "three grants hold the lock but are not the four the counters need";
  transport_->AnswerOne(3);
  EXPECT_EQ(transport_->sent_count("fence-commit"), 4)
      << "round 2 goes to exactly the four counted nodes";
  for (int i = 0; i < 3; ++i) transport_->AnswerOne(i);
  EXPECT_FALSE(out->has_value()) << "every one of the four must commit";
  transport_->AnswerOne(3);
  ASSERT_TRUE(out->has_value() && (*out)->ok()) << (*out)->status();
  EXPECT_EQ((**out)->fencing_token(), 42u);
  EXPECT_EQ((**out)->nodes_granted(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Counter(i), "42") << i;
  EXPECT_EQ(Counter(4), "41");
}

// The README's case: with majorities of five, the holders' commit sets
// {0,1,2} and {2,3,4} share node 2 only; with its counter gone (or set back)
// the second holder reads no trace of the first one's token. Tolerating a
// lost counter makes them {0,1,2,3} and {1,2,3,4}: node 2 is not alone.
class FencingLostCounterTest : public FencingLogicTest,
                               public ::testing::WithParamInterface<Regression> {};

TEST_P(FencingLostCounterTest, ARegressedCounterOnASharedNodeStillGivesAHigherToken) {
  MakeToleratingALostCounter();
  for (int i = 0; i < 5; ++i) SetCounter(i, "41");
  absl::StatusOr<uint64_t> first = HoldAndRelease({0, 1, 2, 3, 4});
  ASSERT_TRUE(first.status().ok()) << first.status();
  EXPECT_EQ(*first, 42u);
  Regress(2, GetParam(), *first);
  absl::StatusOr<uint64_t> second = HoldAndRelease({4, 3, 2, 1, 0});
  ASSERT_TRUE(second.status().ok()) << second.status();
  EXPECT_GT(*second, *first) << "nodes 1 and 3 kept the first holder's token";
}

TEST_P(FencingLostCounterTest, WithoutToleranceTheOnlySharedNodeDecides) {
  for (int i = 0; i < 5; ++i) SetCounter(i, "41");
  absl::StatusOr<uint64_t> first = HoldAndRelease({0, 1, 2, 3, 4});
  ASSERT_TRUE(first.status().ok()) << first.status();
  Regress(2, GetParam(), *first);
  absl::StatusOr<uint64_t> second = HoldAndRelease({4, 3, 2, 1, 0});
  ASSERT_TRUE(second.status().ok()) << second.status();
  if (GetParam() == Regression::kGarbage) {
    // A garbage counter is no vote: node 1 takes node 2's place and brings
    // the first token with it. Never a repeat, only a node less.
    EXPECT_GT(*second, *first);
  } else {
    EXPECT_EQ(*second, *first) << "the default (0) repeats the token: why the option exists";
  }
}

INSTANTIATE_TEST_SUITE_P(Regressions, FencingLostCounterTest,
                         ::testing::Values(Regression::kDeleted, Regression::kSetBack,
                                           Regression::kGarbage),
                         [](const ::testing::TestParamInfo<Regression>& info) {
                           return RegressionName(info.param);
                         });

TEST_F(FencingLogicTest, ToleratingALostCounterSurvivesOneNodeDownNotTwo) {
  MakeToleratingALostCounter();
  {
    auto out = TryAcquire();
    transport_->TimeOutAll(4);
    ASSERT_NO_FATAL_FAILURE(AnswerAllAndExpectGranted(out));
    EXPECT_EQ((**out)->nodes_granted(), 4);
    absl::Status st = ReleaseAndAnswer(***out);
    ASSERT_TRUE(st.ok()) << st;
  }
  const int commits = transport_->sent_count("fence-commit");
  auto out = TryAcquire();
  for (int i = 0; i < 3; ++i) transport_->AnswerOne(i);
  transport_->TimeOutAll(3);
  EXPECT_FALSE(out->has_value()) << "one no-vote of two possible";
  transport_->TimeOutAll(4);
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string((*out)->status().message()),
              HasSubstr("3 of 5 nodes granted (quorum 4)"));
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("fencing_lost_counters"));
  std::optional<Outcome> outcome = GetOutcome((*out)->status());
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->quorum, 4);
  EXPECT_EQ(transport_->sent_count("fence-commit"), commits) << "no round 2";
  transport_->AnswerEverything();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(transport_->node(i).keys.count("r"), 0u) << i;
}

TEST_F(FencingLogicTest, ToleratingALostCounterWithThreeNodesNeedsAllThree) {
  MakeToleratingALostCounter(3);
  auto out = TryAcquire();
  transport_->AnswerOne(0);
  transport_->AnswerOne(1);
  EXPECT_EQ(transport_->sent_count("fence-commit"), 0) << "two of three are not enough";
  transport_->TimeOutAll(2);
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kUnavailable);
  transport_->AnswerEverything();
  auto again = TryAcquire();
  transport_->AnswerEverything();
  ASSERT_TRUE(again->has_value() && (*again)->ok()) << (*again)->status();
  EXPECT_EQ((**again)->nodes_granted(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Counter(i), "1") << i;
}

TEST_F(FencingLogicTest, ALateRoundOneGrantIsNeitherReadNorCommitted) {
  MakeToleratingALostCounter();
  for (int i = 0; i < 4; ++i) SetCounter(i, "7");
  // No holder can have committed 1000 on node 4 alone (a holder commits on
  // four nodes): a late grant's counter must not count, whatever it says.
  SetCounter(4, "1000");
  auto out = TryAcquire();
  for (int i = 0; i < 4; ++i) transport_->AnswerOne(i);
  transport_->AnswerOne(4);  // grants after T was computed
  ASSERT_NO_FATAL_FAILURE(AnswerAllAndExpectGranted(out));
  EXPECT_EQ((**out)->fencing_token(), 8u);
  EXPECT_EQ(Counter(4), "1000") << "not part of round 2";
  EXPECT_EQ(transport_->node(4).keys.count("r"), 1u) << "held until the lease is released";
  absl::Status st = ReleaseAndAnswer(***out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(transport_->node(4).keys.count("r"), 0u);
}

TEST_F(FencingLogicTest, ToleratingALostCounterAGarbageCounterCountsAsANodeDown) {
  MakeToleratingALostCounter();
  for (int i = 1; i < 5; ++i) SetCounter(i, "9");
  SetCounter(0, "garbage");
  auto out = TryAcquire();
  ASSERT_NO_FATAL_FAILURE(AnswerAllAndExpectGranted(out));
  EXPECT_EQ((**out)->fencing_token(), 10u);
  EXPECT_EQ(Counter(0), "garbage") << "never overwritten";
  absl::Status st = ReleaseAndAnswer(***out);
  ASSERT_TRUE(st.ok()) << st;
  // With another node down, four are out of reach.
  auto failed = TryAcquire();
  transport_->TimeOutAll(4);
  transport_->AnswerEverything();
  ASSERT_TRUE(failed->has_value());
  EXPECT_FALSE((*failed)->ok());
  EXPECT_THAT(std::string((*failed)->status().message()), HasSubstr("not a decimal number"));
  EXPECT_THAT(std::string((*failed)->status().message()), HasSubstr("(quorum 4)"));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(transport_->node(i).keys.count("r"), 0u) << i;
}

TEST_F(FencingLogicTest, AnAllNodesQuorumIsAlreadyLargeEnough) {
  // MultiLock's all-nodes mode passes quorum N: F = max(N, ...) = N.
  Options o;
  o.quorum = 5;
  o.fencing_lost_counters = 2;
  Make(o);
  auto out = TryAcquire();
  for (int i = 0; i < 4; ++i) transport_->AnswerOne(i);
  EXPECT_EQ(transport_->sent_count("fence-commit"), 0);
  ASSERT_NO_FATAL_FAILURE(AnswerAllAndExpectGranted(out));
  EXPECT_EQ((**out)->nodes_granted(), 5);
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

namespace redlock {
namespace {

// Options::FencingCounters::kShared: one counter for the namespace, whatever
// the resource. The rule: a holder of R reads the shared counter on its F
// nodes with its key set, and raises it there to its token before its key
// goes; holders of other resources only ever raise it further. So two
// successive holders of R, whose F-sets share a node, still get increasing
// tokens, and no key is kept per resource.
TEST(FencingSharedCounterTest, TokensIncreasePerResourceWithOneCounterPerNamespace) {
  FakeClock clock;
  Options o;
  o.fencing = true;
  o.fencing_counters = Options::FencingCounters::kShared;
  o.key_prefix = "ns/";
  for (int i = 0; i < 5; ++i) o.nodes.push_back(Endpoint{"fake" + std::to_string(i), 1});
  auto* t = new FakeTransport(5, &clock);
  ClientImpl client(o, std::unique_ptr<internal::Transport>(t), &clock);
  // Quorums rotate over the nodes, so successive holders of one resource
  // share a single node; resources interleave.
  const std::vector<std::vector<int>> quorums = {
      {0, 1, 2}, {2, 3, 4}, {4, 0, 1}, {1, 2, 3}, {3, 4, 0}};
  std::map<std::string, uint64_t> last;
  for (int i = 0; i < 40; ++i) {
    const std::string r = absl::StrCat("r", i % 7);
    std::optional<absl::StatusOr<Lease>> out;
    client.TryAcquireAsync(r, absl::Seconds(10),
                           [&](absl::StatusOr<Lease> l) { out.emplace(std::move(l)); });
    for (int n : quorums[static_cast<size_t>(i) % quorums.size()]) t->AnswerOne(n);
    t->AnswerEverything();
    ASSERT_TRUE(out.has_value() && out->ok()) << i;
    EXPECT_GT((*out)->fencing_token(), last[r]) << "resource " << r << " at " << i;
    last[r] = (*out)->fencing_token();
    absl::Status st = absl::InternalError("undecided");
    client.ReleaseAsync(**out, [&](absl::Status s) { st = s; });
    t->AnswerEverything();
    ASSERT_TRUE(st.ok()) << st;
  }
  // One counter key per node, none per resource.
  for (int n = 0; n < 5; ++n) {
    for (const auto& [key, value] : t->node(n).keys) {
      EXPECT_EQ(key, "ns/:fence") << "node " << n;
    }
    EXPECT_EQ(t->node(n).keys.count("ns/:fence"), 1u) << "node " << n;
  }
}

TEST(FencingSharedCounterTest, NeedsFencing) {
  Options o;
  o.nodes.push_back(Endpoint{"a", 1});
  o.fencing_counters = Options::FencingCounters::kShared;
  EXPECT_EQ(ValidateOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.fencing = true;
  EXPECT_TRUE(ValidateOptions(o).ok());
}

}  // namespace
}  // namespace redlock
