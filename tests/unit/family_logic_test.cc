// The lock family's decisions over fake nodes (tests/unit/fake_transport.h):
// the semaphore's per-permit tally, the reader-writer lock's fencing value,
// writer intents and shared wake-ups, the leader's token.

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/election.h"
#include "redlock/internal/client_impl.h"
#include "redlock/internal/release_watch.h"
#include "redlock/rw_lock.h"
#include "redlock/semaphore.h"
#include "tests/unit/logic_test_kit.h"

#define REDLOCK_ASSERT_OK_FAKE(st) ASSERT_TRUE((st).ok()) << (st)

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::FakeClock;
using testkit::FakeTransport;
using testkit::FillSlot;
using testkit::NewSlot;
using testkit::Slot;

class FamilyLogicTest : public testkit::FakeNodesTest {
 protected:
  void SetUp() override { Make(Options()); }
  void Make(Options o) { MakeClient(testkit::WithFakeNodes(std::move(o), 5)); }
  void Hold(int node, const std::string& key, const std::string& token = "other") {
    transport_->node(node).keys[key] = {token, std::nullopt, false};
  }
  std::string Value(int node, const std::string& key) {
    auto& keys = transport_->node(node).keys;
    auto it = keys.find(key);
    return it == keys.end() ? "" : it->second.data;
  }
  // One attempt (a zero wait), asynchronously.
  Slot<Permit> TryPermit(Semaphore& sem) {
    Slot<Permit> out = NewSlot<Permit>();
    sem.AcquireAsync(absl::Seconds(10), absl::ZeroDuration(), StopToken(), FillSlot(out));
    return out;
  }
  Slot<Lease> Shared(ReadWriteLock& rw, absl::Duration wait = absl::ZeroDuration()) {
    Slot<Lease> out = NewSlot<Lease>();
    rw.AcquireSharedAsync(absl::Seconds(10), wait, StopToken(), FillSlot(out));
    return out;
  }
  Slot<Lease> Exclusive(ReadWriteLock& rw, absl::Duration wait = absl::ZeroDuration()) {
    Slot<Lease> out = NewSlot<Lease>();
    rw.AcquireExclusiveAsync(absl::Seconds(10), wait, StopToken(), FillSlot(out));
    return out;
  }
};

// ---- Semaphore ------------------------------------------------------------------------

TEST_F(FamilyLogicTest, SemaphoreNodesSplitOverTwoPermitsNeitherHasAQuorumEveryPickIsRemoved) {
  Semaphore sem(client_.get(), "s", 2);
  for (int i : {0, 1}) Hold(i, "s:permit:0");  // these take permit 1
  for (int i : {2, 3}) Hold(i, "s:permit:1");  // these take permit 0
  Hold(4, "s:permit:0");
  Hold(4, "s:permit:1");  // full
  auto out = TryPermit(sem);
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_TRUE(absl::IsAborted((*out)->status())) << (*out)->status();
  EXPECT_THAT((*out)->status().message(), HasSubstr("permit 0 on 2"));
  EXPECT_THAT((*out)->status().message(), HasSubstr("permit 1 on 2"));
  EXPECT_THAT((*out)->status().message(), HasSubstr("every permit held on 1 node"));
  for (int i : {0, 1}) EXPECT_EQ(Value(i, "s:permit:1"), "") << i;
  for (int i : {2, 3}) EXPECT_EQ(Value(i, "s:permit:0"), "") << i;
}

TEST_F(FamilyLogicTest, AWaiterWhosePicksSplitOverPermitsPausesBeforeItsNextAttempt) {
  // Every node gave this waiter a permit, but no permit a quorum: its own
  // picks say nothing of whether one permit is free on a quorum. Waiters
  // that retried at once on them split the votes again and again, in
  // lockstep (thousands of attempts in a 20 s wait, none granted); a waiter
  // retries after the polling pause, or an announcement.
  Semaphore sem(client_.get(), "s", 2);
  for (int i : {0, 1}) Hold(i, "s:permit:0");     // these give permit 1
  for (int i : {2, 3, 4}) Hold(i, "s:permit:1");  // these give permit 0
  Hold(4, "s:permit:0");                          // full
  Slot<Permit> out = NewSlot<Permit>();
  sem.AcquireAsync(absl::Seconds(10), absl::Seconds(30), StopToken(), FillSlot(out));
  transport_->AnswerEverything();
  EXPECT_FALSE(out->has_value());
  // A millisecond: less than any polling pause (retry_delay / 8 at least).
  transport_->Advance(absl::Milliseconds(1));
  transport_->AnswerEverything();
  int acquires = 0;
  for (const std::string& c : transport_->node(0).log) acquires += c == "sem-acquire" ? 1 : 0;
  EXPECT_EQ(acquires, 1) << "no second attempt at once";
  // The pause passes: the next attempt goes.
  transport_->Advance(absl::Seconds(1));
  transport_->AnswerEverything();
  acquires = 0;
  for (const std::string& c : transport_->node(0).log) acquires += c == "sem-acquire" ? 1 : 0;
  EXPECT_GE(acquires, 2);
}

TEST_F(FamilyLogicTest, SemaphoreDecidesAtAQuorumOfOnePermitAndRemovesLatePicksOfOthers) {
  Semaphore sem(client_.get(), "s", 2);
  auto out = TryPermit(sem);
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);
  ASSERT_TRUE(out->has_value()) << "decided at three picks of one permit, stragglers pending";
  REDLOCK_ASSERT_OK_FAKE((*out)->status());
  const int won = (**out)->slot();
  EXPECT_EQ((**out)->lease().resource(), "s:permit:" + std::to_string(won));
  EXPECT_EQ((**out)->lease().nodes_granted(), 3);
  // Node 3 finds the winning permit taken by someone else and picks the
  // other one: that pick is not part of the permit and goes at once.
  const std::string other = "s:permit:" + std::to_string(1 - won);
  Hold(3, "s:permit:" + std::to_string(won));
  transport_->AnswerEverything();
  EXPECT_EQ(Value(3, other), "");
  EXPECT_EQ(Value(4, "s:permit:" + std::to_string(won)), (**out)->lease().token())
      << "a late pick of the winning permit stays with the lease";
}

TEST_F(FamilyLogicTest, SemaphoreFullOnAQuorumIsAbortedUnreachableIsUnavailable) {
  Semaphore sem(client_.get(), "s", 1);
  for (int i = 0; i < 3; ++i) Hold(i, "s:permit:0");
  auto full = TryPermit(sem);
  transport_->AnswerEverything();
  ASSERT_TRUE(full->has_value());
  EXPECT_TRUE(absl::IsAborted((*full)->status())) << (*full)->status();

  Semaphore free_sem(client_.get(), "t", 1);
  auto down = TryPermit(free_sem);
  for (int i = 0; i < 3; ++i) transport_->TimeOutAll(i);
  ASSERT_TRUE(down->has_value()) << "three nodes silent: no quorum possible, decided early";
  EXPECT_TRUE(absl::IsUnavailable((*down)->status())) << (*down)->status();
  transport_->AnswerEverything();
  for (int i : {3, 4}) EXPECT_EQ(Value(i, "t:permit:0"), "") << "cleanup on node " << i;
}

TEST_F(FamilyLogicTest, SemaphoreFencingCommitsOnlyTheWinningPermitsCounter) {
  Options o;
  o.fencing = true;
  Make(o);
  Semaphore sem(client_.get(), "f", 1);
  transport_->node(0).keys["f:permit:0:fence"] = {"7", std::nullopt, false};
  transport_->node(1).keys["f:permit:0:fence"] = {"41", std::nullopt, false};
  auto out = TryPermit(sem);
  for (int i = 0; i < 3; ++i) transport_->AnswerOne(i);
  EXPECT_FALSE(out->has_value()) << "round 2 to go";
  EXPECT_EQ(transport_->sent_count("fence-commit"), 3);
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  REDLOCK_ASSERT_OK_FAKE((*out)->status());
  EXPECT_EQ((**out)->fencing_token(), 42u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Value(i, "f:permit:0:fence"), "42") << i;
}

TEST_F(FamilyLogicTest, SemaphorePickWhoseReplicasDidNotConfirmDoesNotCount) {
  Options o;
  o.durability.replicas = 1;
  Make(o);
  for (int i = 0; i < 5; ++i) transport_->node(i).replicas = i < 2 ? 0 : 1;  // 0, 1 lag
  Semaphore sem(client_.get(), "d", 1);
  auto out = TryPermit(sem);
  for (int i = 0; i < 2; ++i) transport_->AnswerAll(i);
  transport_->AnswerAll(2);
  EXPECT_FALSE(out->has_value()) << "one confirmed pick only";
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  REDLOCK_ASSERT_OK_FAKE((*out)->status());
  EXPECT_EQ((**out)->lease().nodes_granted(), 3);
  transport_->AnswerEverything();
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(Value(i, "d:permit:0"), "") << "unconfirmed, removed: " << i;
}

// Issue 36 item 1: a fenced permit needs F = FencedQuorum(N, quorum, f) picks
// and commits on all F, as the mutex does. With N=3 and one lost counter
// tolerated, F is 3: one node down and no permit is granted (before the
// fix it was granted on two, and a lost counter then repeated its token).
TEST_F(FamilyLogicTest, AFencedPermitToleratingALostCounterNeedsFAndCommitsOnAllF) {
  Options o;
  o.fencing = true;
  o.fencing_lost_counters = 1;
  MakeClient(testkit::WithFakeNodes(o, 3));
  Semaphore sem(client_.get(), "s", 2);
  transport_->SetDown(2, true);
  auto down = TryPermit(sem);
  transport_->AnswerEverything();
  ASSERT_TRUE(down->has_value());
  EXPECT_TRUE(absl::IsUnavailable((*down)->status())) << (*down)->status();
  EXPECT_THAT((*down)->status().message(), HasSubstr("fencing_lost_counters"));
  transport_->SetDown(2, false);
  auto up = TryPermit(sem);
  for (int i = 0; i < 2; ++i) transport_->AnswerOne(i);
  EXPECT_EQ(transport_->sent_count("fence-commit"), 0) << "two picks are not the three F needs";
  transport_->AnswerOne(2);
  EXPECT_EQ(transport_->sent_count("fence-commit"), 3);
  transport_->AnswerEverything();
  ASSERT_TRUE(up->has_value());
  REDLOCK_ASSERT_OK_FAKE((*up)->status());
  EXPECT_EQ((**up)->lease().nodes_granted(), 3);
  // Node 0 loses the permit's counter (a restart without persistence):
  // the next holder still reads the token on nodes 1 and 2.
  const std::string counter = (**up)->lease().resource() + ":fence";
  const uint64_t first = (**up)->fencing_token();
  EXPECT_EQ(ReleaseAndAnswer((**up)->lease()), absl::OkStatus());
  transport_->node(0).keys.erase(counter);
  for (int round = 0; round < 4; ++round) {
    auto next = TryPermit(sem);
    transport_->AnswerEverything();
    ASSERT_TRUE(next->has_value() && (*next)->ok()) << (*next)->status();
    if ((**next)->lease().resource() + ":fence" == counter) {
      EXPECT_GT((**next)->fencing_token(), first);
    }
    EXPECT_EQ(ReleaseAndAnswer((**next)->lease()), absl::OkStatus());
  }
}

// Issue 36 item 8: a node whose reply timed out may have taken another
// permit than the winning one; nothing would release or extend it.
TEST_F(FamilyLogicTest, ANodeWhoseReplyTimedOutHasItsOtherPickRemoved) {
  Semaphore sem(client_.get(), "s", 2);
  auto out = TryPermit(sem);
  // The permit every node tries first: the script's third argument.
  const std::vector<std::string>& argv = transport_->pending(4).front().argv;
  const std::string first = argv[argv.size() - 2];
  const std::string other = first == "0" ? "1" : "0";
  Hold(4, "s:permit:" + first);  // node 4 will take the other permit
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);
  ASSERT_TRUE(out->has_value());
  REDLOCK_ASSERT_OK_FAKE((*out)->status());
  ASSERT_EQ(std::to_string((**out)->slot()), first);
  transport_->ExecuteSilently(4);  // it ran; its reply is lost
  EXPECT_EQ(Value(4, "s:permit:" + other), (**out)->lease().token());
  transport_->AnswerEverything();
  EXPECT_EQ(Value(4, "s:permit:" + other), "") << "removed, behind the script that set it";
  EXPECT_EQ(Value(4, "s:permit:" + first), "other") << "someone else's permit is left alone";
}

// Issue 36 item 9: with one shared counter per namespace the semaphore and
// the reader-writer lock use it, and create no counter per permit or lock.
TEST_F(FamilyLogicTest, TheSharedCounterServesPermitsAndTheReaderWriterLock) {
  Options o;
  o.fencing = true;
  o.fencing_counters = Options::FencingCounters::kShared;
  o.key_prefix = "ns:";
  Make(o);
  for (int i = 0; i < 5; ++i) transport_->node(i).keys["ns::fence"] = {"40", std::nullopt, false};
  Semaphore sem(client_.get(), "s", 2);
  auto permit = TryPermit(sem);
  transport_->AnswerEverything();
  ASSERT_TRUE(permit->has_value() && (*permit)->ok()) << (*permit)->status();
  EXPECT_EQ((**permit)->fencing_token(), 41u);
  ReadWriteLock rw(client_.get(), "r");
  auto writer = Exclusive(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(writer->has_value() && (*writer)->ok()) << (*writer)->status();
  EXPECT_GT((**writer)->fencing_token(), 41u);
  EXPECT_EQ(ReleaseAndAnswer(***writer), absl::OkStatus());
  auto reader = Shared(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(reader->has_value() && (*reader)->ok()) << (*reader)->status();
  EXPECT_GT((**reader)->fencing_token(), (**writer)->fencing_token());
  int committed = 0;  // the reader's quorum
  for (int i = 0; i < 5; ++i) {
    for (const auto& [key, value] : transport_->node(i).keys) {
      EXPECT_FALSE(key != "ns::fence" && absl::EndsWith(key, ":fence"))
          << "node " << i << " has a counter of its own: " << key;
    }
    committed += Value(i, "ns::fence") == std::to_string((**reader)->fencing_token()) ? 1 : 0;
  }
  EXPECT_GE(committed, 3);
}

// ---- Reader-writer lock ---------------------------------------------------------------

// Readers and writers share one counter: a writer takes the next odd number
// above every value seen, a reader the least even number not below them
// (and never 0, the value that says "fencing off"). So readers that overlap
// share one token, and every reader is strictly above the last writer: a
// stale writer (paused past its lease) is refused by a store that a later
// reader has read with its token (issue 36 item 2: readers used to carry the
// writer's own token, and the stale writer's write was accepted under them).
TEST_F(FamilyLogicTest, AReaderIsStrictlyAboveTheLastWriterAndReadersShareOneToken) {
  Options o;
  o.fencing = true;
  Make(o);
  ReadWriteLock rw(client_.get(), "r");
  auto first = Shared(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(first->has_value() && (*first)->ok()) << (*first)->status();
  EXPECT_EQ((**first)->fencing_token(), 2u) << "before any writer: not 0";
  EXPECT_EQ(ReleaseAndAnswer(***first), absl::OkStatus());

  auto w = Exclusive(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(w->has_value() && (*w)->ok()) << (*w)->status();
  const uint64_t writer = (**w)->fencing_token();
  EXPECT_EQ(writer, 3u) << "the next odd number";
  EXPECT_EQ(ReleaseAndAnswer(***w), absl::OkStatus());

  auto r1 = Shared(rw);
  auto r2 = Shared(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(r1->has_value() && (*r1)->ok()) << (*r1)->status();
  ASSERT_TRUE(r2->has_value() && (*r2)->ok()) << (*r2)->status();
  EXPECT_GT((**r1)->fencing_token(), writer) << "strictly above the last writer";
  EXPECT_EQ((**r1)->fencing_token(), (**r2)->fencing_token()) << "overlapping readers share";
  EXPECT_EQ(ReleaseAndAnswer(***r1), absl::OkStatus());
  EXPECT_EQ(ReleaseAndAnswer(***r2), absl::OkStatus());

  auto w2 = Exclusive(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(w2->has_value() && (*w2)->ok()) << (*w2)->status();
  EXPECT_GT((**w2)->fencing_token(), (**r1)->fencing_token());
  EXPECT_EQ((**w2)->fencing_token() % 2, 1u);
}

// The counters a quorum saw decide, whoever wrote them: an odd highest value
// (a writer's) puts the reader one above it, an even one (a reader's) is
// shared.
TEST_F(FamilyLogicTest, AReadersFencingValueComesFromTheHighestCounterSeen) {
  Options o;
  o.fencing = true;
  Make(o);
  ReadWriteLock rw(client_.get(), "r");
  transport_->node(0).keys["r:fence"] = {"7", std::nullopt, false};
  transport_->node(1).keys["r:fence"] = {"41", std::nullopt, false};
  transport_->node(2).keys["r:fence"] = {"12", std::nullopt, false};
  auto out = Shared(rw);
  for (int i = 0; i < 3; ++i) transport_->AnswerOne(i);
  EXPECT_EQ(transport_->sent_count("fence-commit"), 3) << "a reader writes its value to a quorum";
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  REDLOCK_ASSERT_OK_FAKE((*out)->status());
  EXPECT_TRUE((**out)->shared());
  EXPECT_EQ((**out)->fencing_token(), 42u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Value(i, "r:fence"), "42") << i;
  EXPECT_EQ(ReleaseAndAnswer(***out), absl::OkStatus());
  auto w = Exclusive(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(w->has_value());
  REDLOCK_ASSERT_OK_FAKE((*w)->status());
  EXPECT_EQ((**w)->fencing_token(), 43u);
}

TEST_F(FamilyLogicTest, OnlyAWaitingWriterRecordsAnIntentAndReadersAreThenRefused) {
  ReadWriteLock rw(client_.get(), "q");
  auto reader = Shared(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(reader->has_value());
  REDLOCK_ASSERT_OK_FAKE((*reader)->status());

  auto once = Exclusive(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(once->has_value());
  EXPECT_TRUE(absl::IsAborted((*once)->status()));
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(transport_->node(i).Live("q:rw:wait", clock_.Now()).empty());

  auto waiting = Exclusive(rw, absl::Seconds(30));
  transport_->AnswerEverything();
  EXPECT_FALSE(waiting->has_value());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(transport_->node(i).Live("q:rw:wait", clock_.Now()).size(), 1u) << i;
  }
  auto late_reader = Shared(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(late_reader->has_value());
  EXPECT_TRUE(absl::IsAborted((*late_reader)->status())) << "writer preference";

  // The intent lapses by itself once its writer stops trying.
  clock_.Advance(absl::Seconds(2));
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(transport_->node(i).Live("q:rw:wait", clock_.Now()).empty());
}

TEST_F(FamilyLogicTest, TheLastReadersReleaseAnnouncesOtherReleasesDoNot) {
  ReadWriteLock rw(client_.get(), "a");
  auto r1 = Shared(rw);
  auto r2 = Shared(rw);
  transport_->AnswerEverything();
  ASSERT_TRUE(r1->has_value() && (*r1)->ok());
  ASSERT_TRUE(r2->has_value() && (*r2)->ok());
  client_->ReleaseAsync(***r1, [](absl::Status) {});
  transport_->AnswerEverything();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(transport_->node(i).published.empty()) << i;
  client_->ReleaseAsync(***r2, [](absl::Status) {});
  transport_->AnswerEverything();
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(transport_->node(i).published, ::testing::ElementsAre("redlock:release:a")) << i;
  }
}

TEST(ReleaseWatchTest, SharedWatchesHearEveryAnnouncementExclusiveOnlyTheOldest) {
  FakeClock clock;
  FakeTransport transport(1, &clock);
  internal::ReleaseWatches watches(&transport);
  auto e1 = watches.Open({"k"});
  auto s1 = watches.Open({"k"}, internal::ReleaseWatches::Wakeup::kEveryone);
  auto e2 = watches.Open({"k"});
  auto s2 = watches.Open({"k"}, internal::ReleaseWatches::Wakeup::kEveryone);
  int woke_e1 = 0, woke_e2 = 0, woke_s1 = 0, woke_s2 = 0;
  auto wait = [](const std::shared_ptr<internal::ReleaseWatches::Watch>& w, int* woke) {
    w->Wait(w->Mark(), 1, absl::Seconds(10), [woke](absl::Status s) {
      if (s.ok()) ++*woke;
    });
  };
  wait(e1, &woke_e1);
  wait(e2, &woke_e2);
  wait(s1, &woke_s1);
  wait(s2, &woke_s2);
  transport.Publish(0, "redlock:release:k", "");
  transport.Advance(absl::ZeroDuration());
  EXPECT_EQ(woke_e1, 1);
  EXPECT_EQ(woke_e2, 0) << "one exclusive waiter per client and announcement";
  EXPECT_EQ(woke_s1, 1);
  EXPECT_EQ(woke_s2, 1);
  e2->Cancel();
}

// A semaphore's waiters: a release goes to a waiter that is waiting, not to
// the oldest one when it is already trying (releases of different permits
// then wake different waiters).
TEST(ReleaseWatchTest, PermitWaitersAreWokenOneAtATimeTheOldestWaitingFirst) {
  FakeClock clock;
  FakeTransport transport(1, &clock);
  internal::ReleaseWatches watches(&transport);
  using Wakeup = internal::ReleaseWatches::Wakeup;
  auto busy = watches.Open({"p0", "p1"}, Wakeup::kOldestWaiting);  // oldest, mid-attempt
  auto a = watches.Open({"p0", "p1"}, Wakeup::kOldestWaiting);
  auto b = watches.Open({"p0", "p1"}, Wakeup::kOldestWaiting);
  int woke_a = 0, woke_b = 0;
  a->Wait(a->Mark(), 1, absl::Seconds(10), [&](absl::Status s) { woke_a += s.ok(); });
  b->Wait(b->Mark(), 1, absl::Seconds(10), [&](absl::Status s) { woke_b += s.ok(); });
  transport.Publish(0, "redlock:release:p0", "");
  EXPECT_EQ(woke_a, 1) << "the oldest waiting watch, not the busy oldest one";
  EXPECT_EQ(woke_b, 0);
  transport.Publish(0, "redlock:release:p1", "");
  EXPECT_EQ(woke_b, 1) << "another permit's release wakes the next waiter";
  // The same for a mutex's watches would go to the oldest (one attempt per
  // release and client).
  auto m_busy = watches.Open({"m"});
  auto m = watches.Open({"m"});
  int woke_m = 0;
  m->Wait(m->Mark(), 1, absl::Seconds(10), [&](absl::Status s) { woke_m += s.ok(); });
  transport.Publish(0, "redlock:release:m", "");
  EXPECT_EQ(woke_m, 0);
  m->Cancel();
}

// ---- Election ---------------------------------------------------------------------------

TEST(ElectionLogicTest, TheIdentityTravelsInTheTokenAnyBytes) {
  EXPECT_EQ(Election::IdentityOf("0123abcd.686f73742d61"), "host-a");
  EXPECT_EQ(Election::IdentityOf("0123abcd"), "") << "a plain lock's token";
  EXPECT_EQ(Election::IdentityOf("0123abcd.zz"), "") << "not hex";
  EXPECT_EQ(Election::IdentityOf("0123abcd.0"), "") << "odd length";
  EXPECT_EQ(Election::IdentityOf("x.00ff2e"), std::string("\0\xff.", 3));
}

}  // namespace
}  // namespace redlock
