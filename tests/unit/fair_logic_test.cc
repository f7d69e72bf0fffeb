// The fair lock's decisions over fake nodes (tests/unit/fake_transport.h,
// which runs its scripts as fair_scripts.cc writes them): the ticket, the
// grant to the first place only, the wake-up of the first waiter only, the
// heartbeat that keeps, puts back or loses a place, leaving the queue, the
// durability vote on a place, fencing, and the checks.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/fair_mutex.h"
#include "redlock/internal/client_impl.h"
#include "redlock/internal/fair_op.h"
#include "redlock/outcome.h"
#include "tests/unit/logic_test_kit.h"

#define REDLOCK_ASSERT_OK_FAKE(st) ASSERT_TRUE((st).ok()) << (st)

namespace redlock {
namespace {

using internal::Reply;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testkit::FakeNode;
using testkit::FillSlot;
using testkit::NewSlot;
using testkit::Slot;
using Grant = Client::FamilyGrant;

class FairLogicTest : public testkit::FakeNodesTest {
 protected:
  void SetUp() override { Make(Options()); }
  void Make(Options o) { MakeClient(testkit::WithFakeNodes(std::move(o), 5)); }

  int64_t NowMs() { return FakeNode::NowMs(clock_.Now()); }
  // Someone's place (or the lock key) put on node `node` by hand.
  void Place(int node, const std::string& id, uint64_t ticket, absl::Duration ttl) {
    transport_->node(node).fair["r:fair:q"][id] =
        FakeNode::FairPlace{ticket, NowMs() + absl::ToInt64Milliseconds(ttl)};
  }
  void Hold(int node, const std::string& token = "other") {
    transport_->node(node).keys["r"] = {token, std::nullopt, false};
  }
  std::vector<std::string> Order(int node) {
    return transport_->node(node).FairOrder("r:fair:q", clock_.Now());
  }
  uint64_t TicketOf(int node, const std::string& id) {
    return transport_->node(node).fair["r:fair:q"][id].ticket;
  }
  // How many times node `node` ran `script` (its name).
  int Ran(int node, const std::string& script) {
    int n = 0;
    for (const std::string& c : transport_->node(node).log) n += c == script ? 1 : 0;
    return n;
  }
  static std::string Channel(const std::string& id) { return "redlock:fair:r:" + id; }

  // A fair acquisition of "r" (a wait: a waiter; none: a try).
  Slot<Grant> Fair(std::optional<absl::Duration> wait, int* queued = nullptr,
                   absl::Duration place_ttl = absl::ZeroDuration(), StopToken stop = StopToken()) {
    Client::FamilyRequest r;
    r.kind = Client::FamilyRequest::Kind::kFair;
    r.resource = "r";
    r.ttl = absl::Seconds(10);
    r.wait = wait;
    r.place_ttl = place_ttl;
    r.stop = std::move(stop);
    if (queued != nullptr) r.on_queued = [queued] { ++*queued; };
    Slot<Grant> out = NewSlot<Grant>();
    client_->AcquireFamilyAsync(std::move(r), FillSlot(out));
    return out;
  }
  // The id of the one place on node 0 that is not `except`.
  std::string WaiterId(const std::string& except = "") {
    for (const std::string& id : Order(0)) {
      if (id != except) return id;
    }
    return "";
  }
  // Answers everything, and runs what that made due now (a waiter's next
  // stage starts on a zero-delay timer), until quiet.
  void Settle() {
    for (int i = 0; i < 8; ++i) {
      transport_->AnswerEverything();
      transport_->Advance(absl::ZeroDuration());
    }
  }
  // Moves the clock in steps of `step`, answering everything after each,
  // until `slot` is filled or `limit` has passed.
  template <typename T>
  void RunUntil(const Slot<T>& slot, absl::Duration limit,
                absl::Duration step = absl::Milliseconds(50)) {
    for (absl::Duration t = absl::ZeroDuration(); t < limit && !slot->has_value(); t += step) {
      transport_->Advance(step);
      Settle();
    }
  }
};

// ---- Pure parts -------------------------------------------------------------------------

TEST(FairVoteTest, ReadsGrantsRefusalsAndBadReplies) {
  internal::FairReply f;
  auto vote = [&](Reply r, bool fencing = false) {
    return internal::FairVote(absl::StatusOr<Reply>(std::move(r)), fencing, &f).vote;
  };
  using V = internal::Round::Vote;
  EXPECT_EQ(vote(Reply::Array({Reply::Integer(1), Reply::String("7")})), V::kYes);
  EXPECT_EQ(f.max_ticket, 7u);
  for (int code : {-1, -2, -3}) {
    EXPECT_EQ(vote(Reply::Array({Reply::Integer(code), Reply::String("0")})), V::kRefused) << code;
    EXPECT_EQ(f.code, code);
  }
  EXPECT_EQ(vote(Reply::Array({Reply::Integer(1), Reply::String("3"), Reply::String("41")}), true),
            V::kYes);
  EXPECT_EQ(f.counter, 41u);
  EXPECT_EQ(vote(Reply::Array({Reply::Integer(1), Reply::String("3"), Reply::String("x")}), true),
            V::kInternal)
      << "a garbage counter is never read as 0";
  EXPECT_EQ(vote(Reply::Array({Reply::Integer(1), Reply::String("-")})), V::kInternal)
      << "a ticket that is no number";
  EXPECT_EQ(vote(Reply::Array({Reply::Integer(1), Reply::String("3")}), true), V::kInternal)
      << "a fenced grant without its counter";
  EXPECT_EQ(vote(Reply::Integer(1)), V::kInternal);
  EXPECT_EQ(vote(Reply::Error("BUSY Redis is busy")), V::kUnavailable);
  EXPECT_EQ(internal::FairVote(absl::UnavailableError("down"), false, &f).vote, V::kUnavailable);
}

TEST(FairPlaceTtlTest, DefaultsFloorAndCeiling) {
  Options o;
  EXPECT_EQ(*internal::CheckPlaceTtl(absl::ZeroDuration(), o), internal::kDefaultPlaceTtl);
  EXPECT_EQ(*internal::CheckPlaceTtl(absl::Milliseconds(150), o), absl::Milliseconds(150))
      << "3 x the default node_timeout";
  EXPECT_TRUE(
      absl::IsInvalidArgument(internal::CheckPlaceTtl(absl::Milliseconds(149), o).status()));
  o.node_timeout = absl::Milliseconds(5);
  EXPECT_TRUE(absl::IsInvalidArgument(internal::CheckPlaceTtl(absl::Milliseconds(29), o).status()))
      << "30 ms at least";
  EXPECT_TRUE(absl::IsInvalidArgument(
      internal::CheckPlaceTtl(absl::Milliseconds(internal::kMaxTtlMs + 1), o).status()));
}

// ---- Without a place ----------------------------------------------------------------

TEST_F(FairLogicTest, ATryTakesTheLockOnlyWhenItIsFreeAndNobodyWaits) {
  for (int i : {0, 1, 2}) Place(i, "someone", 1, absl::Seconds(10));
  auto refused = Fair(std::nullopt);
  Settle();
  ASSERT_TRUE(refused->has_value());
  EXPECT_TRUE(absl::IsAborted((*refused)->status())) << (*refused)->status();
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(HasKey(i, "r")) << "what the try set on node " << i << " was removed";
    EXPECT_EQ(Ran(i, "fair-register"), 0) << "a try takes no place";
  }
  for (int i : {0, 1, 2}) transport_->node(i).fair.clear();
  auto granted = Fair(std::nullopt);
  Settle();
  ASSERT_TRUE(granted->has_value());
  REDLOCK_ASSERT_OK_FAKE((*granted)->status());
  EXPECT_THAT((**granted)->lease.token(), HasSubstr(".")) << "the waiter's id rides in the token";
}

// ---- Taking a place -------------------------------------------------------------------

// The probe reads every node's highest live ticket; the place takes one
// above the highest of a quorum, and is taken once a quorum has it.
TEST_F(FairLogicTest, APlaceTakesATicketAboveTheHighestAQuorumHoldsAndIsTakenAtAQuorum) {
  for (int i = 0; i < 5; ++i) Hold(i);
  for (int i : {0, 1, 2}) Place(i, "a", 5, absl::Seconds(10));
  Place(3, "b", 9, absl::Seconds(10));
  Place(4, "gone", 50, absl::Milliseconds(1));  // expires before the probe
  transport_->Advance(absl::Milliseconds(2));
  int queued = 0;
  auto w = Fair(absl::Seconds(30), &queued);
  transport_->AnswerEverything();             // the probe, refused everywhere
  transport_->Advance(absl::ZeroDuration());  // the registration goes at once
  EXPECT_EQ(transport_->sent_count("acquire"), 10) << "the probe, then the registration";
  for (int i = 0; i < 2; ++i) transport_->AnswerAll(i);
  EXPECT_EQ(queued, 0) << "two places are not a quorum's";
  transport_->AnswerAll(2);
  EXPECT_EQ(queued, 1);
  Settle();
  const std::string id = WaiterId("a");
  ASSERT_NE(id, "b");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(TicketOf(i, id), 10u) << "one above b's 9, node " << i;
  EXPECT_FALSE(w->has_value());
  EXPECT_EQ(queued, 1) << "called once";
}

// A place counts only once its node's replicas have it (Options::durability):
// the order must survive a failover.
TEST_F(FairLogicTest, APlaceCountsOnlyWhereTheReplicasConfirmedIt) {
  Options o;
  o.durability.replicas = 1;
  Make(o);
  for (int i = 0; i < 5; ++i) {
    Hold(i);
    transport_->node(i).replicas = i < 3 ? 0 : 1;  // 0, 1 and 2 lag
  }
  int queued = 0;
  auto w = Fair(absl::Seconds(30), &queued);
  Settle();
  EXPECT_EQ(queued, 0) << "two confirmed places are not a quorum's";
  for (int i : {0, 1, 2}) EXPECT_EQ(Ran(i, "fair-register"), 1) << i;
  transport_->node(2).replicas = 1;
  // Its next registration goes after the policy's pause.
  RunUntil(w, absl::Seconds(2));
  EXPECT_EQ(queued, 1);
  EXPECT_FALSE(w->has_value());
}

// ---- The lock goes to the first place only ---------------------------------------

TEST_F(FairLogicTest, OnlyTheFirstPlaceIsGrantedTheLaterWaitsUntilItExpires) {
  // Someone queued before, on a quorum, with a place that lapses in 1 s.
  for (int i : {0, 1, 2}) Place(i, "first", 1, absl::Seconds(1));
  auto w = Fair(absl::Seconds(30));
  Settle();
  EXPECT_FALSE(w->has_value()) << "free, but another place is first on a quorum";
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(HasKey(i, "r")) << "the refused attempt's key went";
  const int64_t first_expires = transport_->node(0).fair["r:fair:q"]["first"].expires_ms;
  // Its heartbeat (every place_ttl / 3) finds it first and the lock free
  // once the other place lapsed: an attempt, granted.
  RunUntil(w, absl::Seconds(5));
  ASSERT_TRUE(w->has_value());
  REDLOCK_ASSERT_OK_FAKE((*w)->status());
  EXPECT_GT(NowMs(), first_expires) << "not before the first place expired";
}

// A release announces to the first waiter only, on its own channel; the
// others make no attempt.
TEST_F(FairLogicTest, AReleaseWakesOnlyTheFirstWaiter) {
  auto holder = Fair(std::nullopt);
  Settle();
  ASSERT_TRUE(holder->has_value() && (*holder)->ok());
  auto first = Fair(absl::Seconds(30));
  Settle();
  const std::string first_id = WaiterId();
  auto second = Fair(absl::Seconds(30));
  Settle();
  const std::string second_id = WaiterId(first_id);
  ASSERT_THAT(Order(0), ElementsAre(first_id, second_id));
  std::vector<int> before;
  for (int i = 0; i < 5; ++i) {
    before.push_back(Ran(i, "fair-acquire"));
    transport_->node(i).published.clear();
  }
  ASSERT_EQ(ReleaseAndAnswer((**holder)->lease), absl::OkStatus());
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(transport_->node(i).published, ElementsAre(Channel(first_id))) << i;
  }
  for (int i = 0; i < 5; ++i) transport_->Publish(i, Channel(first_id), "");
  Settle();
  ASSERT_TRUE(first->has_value());
  REDLOCK_ASSERT_OK_FAKE((*first)->status());
  EXPECT_FALSE(second->has_value());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Ran(i, "fair-acquire"), before[static_cast<size_t>(i)] + 1)
        << "one attempt per release on node " << i;
  }
  // An announcement on the plain release channel wakes nobody.
  for (int i = 0; i < 5; ++i) transport_->Publish(i, "redlock:release:r", "");
  Settle();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Ran(i, "fair-acquire"), before[static_cast<size_t>(i)] + 1);
  // The first holder's release takes its place out and wakes the second.
  for (int i = 0; i < 5; ++i) transport_->node(i).published.clear();
  ASSERT_EQ(ReleaseAndAnswer((**first)->lease), absl::OkStatus());
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(Order(i), ElementsAre(second_id)) << i;
    EXPECT_THAT(transport_->node(i).published, ElementsAre(Channel(second_id))) << i;
  }
}

// A failed attempt's cleanup removes the lock key where it was set and
// keeps the place.
TEST_F(FairLogicTest, AFailedAttemptsCleanupKeepsThePlace) {
  for (int i : {0, 1, 2}) Hold(i, "stale");
  auto w = Fair(absl::Seconds(30));
  Settle();
  const std::string id = WaiterId();
  // The registration set the key where it was free and the place first.
  for (int i : {3, 4}) {
    EXPECT_FALSE(HasKey(i, "r")) << "removed by the cleanup, node " << i;
    EXPECT_EQ(Ran(i, "fair-release"), 2) << "the probe's and the registration's cleanups";
  }
  for (int i = 0; i < 5; ++i) EXPECT_THAT(Order(i), ElementsAre(id)) << i;
  EXPECT_FALSE(w->has_value());
}

// ---- Places that expire, come back or go --------------------------------------------

TEST_F(FairLogicTest, TheHeartbeatKeepsThePlaceAndPutsItBackWhereANodeLostIt) {
  for (int i = 0; i < 5; ++i) Hold(i);
  auto w = Fair(absl::Seconds(60), nullptr, absl::Milliseconds(600));
  Settle();
  const std::string id = WaiterId();
  // Far past the place's first ttl: heartbeats kept it.
  for (int step = 0; step < 40; ++step) {
    transport_->Advance(absl::Milliseconds(50));
    Settle();
  }
  for (int i = 0; i < 5; ++i) EXPECT_THAT(Order(i), ElementsAre(id)) << i;
  EXPECT_GE(transport_->sent_count("fair-heartbeat"), 5 * 5);
  // Node 3 restarts without its data: the next heartbeat finds the place
  // missing there, the one after puts it back with its ticket.
  const uint64_t ticket = TicketOf(0, id);
  transport_->node(3).fair.clear();
  for (int step = 0; step < 12; ++step) {
    transport_->Advance(absl::Milliseconds(50));
    Settle();
  }
  EXPECT_THAT(Order(3), ElementsAre(id));
  EXPECT_EQ(TicketOf(3, id), ticket);
  EXPECT_FALSE(w->has_value()) << "a minority's loss tells the waiter nothing";
}

TEST_F(FairLogicTest, AWaiterWhosePlaceAQuorumLostIsToldAndLeaves) {
  for (int i = 0; i < 5; ++i) Hold(i);
  auto w = Fair(absl::Seconds(60), nullptr, absl::Milliseconds(600));
  Settle();
  for (int i : {0, 1, 2}) transport_->node(i).fair.clear();
  RunUntil(w, absl::Seconds(2));
  ASSERT_TRUE(w->has_value());
  const absl::Status st = (*w)->status();
  EXPECT_TRUE(absl::IsAborted(st)) << st;
  ASSERT_TRUE(GetOutcome(st).has_value());
  EXPECT_EQ(GetOutcome(st)->kind, Outcome::Kind::kPlaceLost);
  EXPECT_THAT(std::string(st.message()), HasSubstr("removed (3 of 5 nodes"));
  Settle();
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(Order(i).empty()) << "left node " << i;
    EXPECT_EQ(Ran(i, "fair-leave"), 1) << i;
  }
}

// Paused (here: no heartbeat answered) past place_ttl: by its own clock the
// place may be gone; it is told at its next heartbeat, without asking.
TEST_F(FairLogicTest, AWaiterWhoseHeartbeatsGoUnconfirmedPastPlaceTtlIsTold) {
  for (int i = 0; i < 5; ++i) Hold(i);
  auto w = Fair(absl::Seconds(60), nullptr, absl::Milliseconds(600));
  Settle();
  for (int step = 0; step < 40 && !w->has_value(); ++step) {
    transport_->Advance(absl::Milliseconds(50));
    for (int i = 0; i < 5; ++i) transport_->TimeOutAll(i);
  }
  ASSERT_TRUE(w->has_value());
  const absl::Status st = (*w)->status();
  EXPECT_TRUE(absl::IsAborted(st)) << st;
  EXPECT_EQ(GetOutcome(st)->kind, Outcome::Kind::kPlaceLost);
  EXPECT_THAT(std::string(st.message()), HasSubstr("expired"));
}

TEST_F(FairLogicTest, ACancelledOrTimedOutWaiterLeavesTheQueueAndWakesTheNext) {
  for (int i = 0; i < 5; ++i) Hold(i);
  StopSource stop;
  auto cancelled = Fair(absl::Seconds(60), nullptr, absl::ZeroDuration(), stop.token());
  Settle();
  const std::string cancelled_id = WaiterId();
  auto timed_out = Fair(absl::Seconds(1));
  Settle();
  const std::string timed_out_id = WaiterId(cancelled_id);
  auto last = Fair(absl::Seconds(60));
  Settle();
  stop.RequestStop();
  Settle();
  ASSERT_TRUE(cancelled->has_value());
  EXPECT_TRUE(absl::IsCancelled((*cancelled)->status()));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Order(i).size(), 2u) << i;
    EXPECT_EQ(Order(i)[0], timed_out_id) << i;
  }
  RunUntil(timed_out, absl::Seconds(3));
  ASSERT_TRUE(timed_out->has_value());
  EXPECT_TRUE(absl::IsDeadlineExceeded((*timed_out)->status())) << (*timed_out)->status();
  Settle();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Order(i).size(), 1u) << i;
  // The lock goes; the last waiter, now first, is woken and served.
  for (int i = 0; i < 5; ++i) transport_->node(i).keys.erase("r");
  RunUntil(last, absl::Seconds(3));
  ASSERT_TRUE(last->has_value());
  REDLOCK_ASSERT_OK_FAKE((*last)->status());
}

// ---- Fencing and clusters -------------------------------------------------------------

// A fair holder's token is a writer's (odd: WriterFence), above every
// counter read: the counter may be shared with a reader-writer lock of the
// same name, whose readers take even tokens.
TEST_F(FairLogicTest, AFencedGrantCommitsTheNextWriterToken) {
  for (const auto& [counter, expected] :
       std::vector<std::pair<std::string, std::string>>{{"41", "43"}, {"42", "43"}}) {
    Options o;
    o.fencing = true;
    Make(o);
    for (int i = 0; i < 5; ++i) {
      transport_->node(i).keys["r:fence"] = {counter, std::nullopt, false};
    }
    auto w = Fair(absl::Seconds(30));
    Settle();
    ASSERT_TRUE(w->has_value());
    REDLOCK_ASSERT_OK_FAKE((*w)->status());
    EXPECT_EQ(std::to_string((**w)->lease.fencing_token()), expected) << "counter " << counter;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(transport_->node(i).keys["r:fence"].data, expected) << i << ", counter " << counter;
    }
  }
}

TEST_F(FairLogicTest, OnAClusterNodeTheResourceNeedsAHashTag) {
  Options o = testkit::WithFakeNodes(Options(), 3);
  o.nodes[1].cluster.seeds = {{"fake1", 6379}};
  MakeClient(o);
  auto refused = Fair(absl::Seconds(1));
  ASSERT_TRUE(refused->has_value()) << "refused before anything is sent";
  EXPECT_TRUE(absl::IsInvalidArgument((*refused)->status())) << (*refused)->status();
  EXPECT_THAT(std::string((*refused)->status().message()), HasSubstr("hash tag"));
  EXPECT_EQ(transport_->sent_count("acquire"), 0);
}

}  // namespace
}  // namespace redlock
