// The Redlock state machines (docs/design.md section 5) over fake nodes and a
// fake clock: every decision and every figure is exact here.

#include <malloc.h>

#include <algorithm>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/internal/client_impl.h"
#include "redlock/observer.h"
#include "redlock/outcome.h"
#include "tests/unit/logic_test_kit.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::FakeTransport;
using testkit::FillSlot;
using testkit::NewSlot;
using testkit::Slot;

class ClientLogicTest : public testkit::FakeNodesTest {
 protected:
  void Make(int nodes, Options o = Options()) {
    o = testkit::WithFakeNodes(std::move(o), nodes);
    ASSERT_TRUE(ValidateOptions(o).ok());
    MakeClient(o);
  }

  // Starts an async acquisition that waits up to `wait` for the resource, and
  // returns the slot its result lands in.
  Slot<Lease> AcquireWaiting(const std::string& r, absl::Duration ttl, absl::Duration wait,
                             const StopToken& stop = StopToken()) {
    Slot<Lease> out = NewSlot<Lease>();
    client_->AcquireAsync(r, ttl, wait, stop, FillSlot(out));
    return out;
  }

  // Waiters that poll only every few seconds: within a test, only a release
  // announcement wakes them.
  void MakeSlowPolling(int nodes) {
    Options o;
    o.retry_delay = absl::Seconds(20);  // polling pauses of seconds
    o.wait_poll_max = absl::Seconds(5);
    Make(nodes, o);
  }

  // `token` holds "r" (without expiry) on nodes [from, to).
  void HeldOn(int from, int to, const std::string& token) {
    for (int i = from; i < to; ++i) transport_->node(i).keys["r"] = {token, std::nullopt, false};
  }

  // Its holder `token` lets "r" go on nodes [from, to), and they announce it.
  void ReleasedOn(int from, int to, const std::string& token) {
    for (int i = from; i < to; ++i) transport_->node(i).keys.erase("r");
    for (int i = from; i < to; ++i) transport_->Publish(i, "redlock:release:r", token);
  }

  bool Holds(int node, const std::string& key, const std::string& token) {
    auto& keys = transport_->node(node).keys;
    auto it = keys.find(key);
    return it != keys.end() && it->second.data == token &&
           (!it->second.expires || *it->second.expires > clock_.Now());
  }
};

TEST_F(ClientLogicTest, SendsToEveryNodeAtOnceAndDecidesAtQuorum) {
  Make(5);
  auto result = TryAcquire("orders/42", absl::Seconds(10));
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(transport_->pending(i).size(), 1u) << "fan-out to node " << i;
  transport_->AnswerAll(0);
  transport_->AnswerAll(1);
  EXPECT_FALSE(result->has_value());
  transport_->AnswerAll(2);
  ASSERT_TRUE(result->has_value()) << "decided at the third grant, nodes 3 and 4 still pending";
  ASSERT_TRUE((*result)->ok()) << (*result)->status();
  EXPECT_EQ((**result)->nodes_granted(), 3);
  EXPECT_EQ(transport_->pending(3).size(), 1u);
  // Stragglers that grant later hold our token too; Release removes them.
  transport_->AnswerAll(3);
  transport_->AnswerAll(4);
  Lease lease = ***result;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Holds(i, "orders/42", lease.token()));
  absl::Status released = ReleaseAndAnswer(lease);
  EXPECT_TRUE(released.ok()) << released;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(HasKey(i, "orders/42"));
}

TEST_F(ClientLogicTest, ValidityIsTtlMinusElapsedMinusDrift) {
  Make(5);
  auto start = clock_.Now();
  auto result = TryAcquire("r", absl::Seconds(10));
  clock_.Advance(absl::Seconds(3));  // a slow round
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);
  ASSERT_TRUE(result->has_value() && (*result)->ok());
  const Lease& lease = ***result;
  // 10s - 3s - (10s * 0.01 + 2ms)
  EXPECT_EQ(lease.TimeLeft(clock_.Now()), absl::Milliseconds(6898));
  EXPECT_EQ(lease.valid_until(), start + std::chrono::milliseconds(10000 - 102));
  EXPECT_EQ(lease.acquired_at(), start);
  EXPECT_EQ(lease.ttl(), absl::Seconds(10));
  EXPECT_EQ(lease.token().size(), 40u);
}

TEST_F(ClientLogicTest, NoValidityLeftIsDeadlineExceededAndReleasesEverywhere) {
  Make(5);
  auto result = TryAcquire("r", absl::Seconds(1));
  clock_.Advance(absl::Milliseconds(990));  // 1000 - 990 - 12 < 0
  for (int i = 0; i < 3; ++i) transport_->AnswerAll(i);
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ((*result)->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string((*result)->status().message()), HasSubstr("no validity was left"));
  EXPECT_EQ(transport_->sent_count("release"), 5)
      << "released on all nodes, also those not yet answered";
  transport_->AnswerEverything();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(HasKey(i, "r")) << i;
}

TEST_F(ClientLogicTest, FailsAsSoonAsQuorumIsImpossible) {
  Make(5);
  HeldOn(0, 3, "someone-else");
  auto result = TryAcquire("r", absl::Seconds(10));
  transport_->AnswerAll(0);
  transport_->AnswerAll(1);
  EXPECT_FALSE(result->has_value());
  transport_->AnswerAll(2);
  ASSERT_TRUE(result->has_value()) << "three refusals out of five: decided without nodes 3 and 4";
  EXPECT_EQ((*result)->status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ((*result)->status().message(),
            "acquire \"r\": 0 of 5 nodes granted (quorum 3); held by another client on 3 nodes");
  // The stragglers then grant; the release sent after the failure follows
  // their SET on the same ordered stream and removes it.
  transport_->AnswerAll(3);
  transport_->AnswerAll(4);
  EXPECT_FALSE(HasKey(3, "r"));
  EXPECT_FALSE(HasKey(4, "r"));
  EXPECT_EQ(transport_->node(0).keys["r"].data, "someone-else") << "never touches a foreign lock";
}

TEST_F(ClientLogicTest, TimeoutsMakeUnavailableNamingTheNodes) {
  Make(5);
  auto result = TryAcquire("r", absl::Seconds(10));
  transport_->AnswerAll(0);
  transport_->AnswerAll(1);
  transport_->TimeOutAll(2);
  transport_->TimeOutAll(3);
  transport_->TimeOutAll(4);
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ((*result)->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*result)->status().message(),
            "acquire \"r\": 2 of 5 nodes granted (quorum 3); fake2:6379: no reply within 50ms; "
            "fake3:6379: no reply within 50ms; fake4:6379: no reply within 50ms");
}

TEST_F(ClientLogicTest, StragglerThatExecutedIsReleasedAfterFailure) {
  Make(3);
  auto result = TryAcquire("r", absl::Seconds(10));
  transport_->AnswerAll(0);
  transport_->ExecuteSilently(1);  // SET done, reply lost
  transport_->TimeOutAll(2);
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ((*result)->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(HasKey(1, "r"));
  transport_->AnswerEverything();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(HasKey(i, "r")) << i;
}

TEST_F(ClientLogicTest, RetriesReleaseBeforeTheNextAttempt) {
  Options o;
  o.max_attempts = 3;
  o.retry_delay = absl::Milliseconds(200);
  o.retry_jitter = absl::ZeroDuration();
  Make(3, o);
  transport_->node(0).keys["r"] = {"other", clock_.Now() + std::chrono::milliseconds(100), false};
  transport_->node(1).keys["r"] = {"other", clock_.Now() + std::chrono::milliseconds(100), false};
  Slot<Lease> out = NewSlot<Lease>();
  client_->AcquireAsync("r", absl::Seconds(10), FillSlot(out));
  transport_->AnswerAll(0);
  transport_->AnswerAll(1);  // attempt 1 fails: held on 0 and 1
  EXPECT_FALSE(out->has_value());
  EXPECT_EQ(transport_->sent_count("release"), 3) << "release on all nodes before any retry";
  EXPECT_EQ(transport_->sent_count("acquire"), 3);
  transport_->AnswerEverything();  // node 2's SET, then its release: nothing left
  EXPECT_FALSE(HasKey(2, "r"));
  transport_->Advance(absl::Milliseconds(199));
  EXPECT_EQ(transport_->sent_count("acquire"), 3) << "waits retry_delay";
  transport_->Advance(absl::Milliseconds(1));  // the foreign lock expired at +100ms
  EXPECT_EQ(transport_->sent_count("acquire"), 6);
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  ASSERT_TRUE((*out)->ok()) << (*out)->status();
  EXPECT_TRUE(Holds(0, "r", (**out)->token()));
}

TEST_F(ClientLogicTest, GivesUpAfterMaxAttempts) {
  Options o;
  o.max_attempts = 2;
  o.retry_jitter = absl::ZeroDuration();
  Make(3, o);
  HeldOn(0, 3, "other");
  Slot<Lease> out = NewSlot<Lease>();
  client_->AcquireAsync("r", absl::Seconds(10), FillSlot(out));
  transport_->AnswerEverything();
  transport_->Advance(o.retry_delay);
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("after 2 attempts"));
  EXPECT_EQ(transport_->sent_count("acquire"), 6);
  EXPECT_EQ(transport_->timers(), 0u);
}

TEST_F(ClientLogicTest, WaitModeStopsAtTheDeadline) {
  Options o;
  o.retry_delay = absl::Milliseconds(300);  // first polling pause ~75ms, growing
  o.wait_poll_max = absl::Milliseconds(250);
  Make(3, o);
  HeldOn(0, 3, "other");
  auto start = clock_.Now();
  auto out = AcquireWaiting("r", absl::Seconds(10), absl::Seconds(1));
  EXPECT_EQ(transport_->subscribers("redlock:release:r"), 1) << "waits on release announcements";
  for (int step = 0; step < 200 && !out->has_value(); ++step) {
    transport_->AnswerEverything();
    transport_->Advance(absl::Milliseconds(10));
  }
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("not held after waiting 1s"));
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("held by another client"));
  EXPECT_LE(clock_.Now() - start, std::chrono::milliseconds(1010));
  int attempts = transport_->sent_count("acquire") / 3;
  // Pauses of 37..112ms, then up to 250ms: between 4 and ~12 attempts in 1s.
  EXPECT_GE(attempts, 4);
  EXPECT_LE(attempts, 14);
  EXPECT_EQ(transport_->subscribers("redlock:release:r"), 0) << "unsubscribed when done";
  transport_->Advance(absl::Seconds(5));
  transport_->AnswerEverything();
  EXPECT_EQ(transport_->sent_count("acquire") / 3, attempts) << "nothing after the deadline";
}

TEST_F(ClientLogicTest, AReleaseAnnouncementWakesTheWaiterAtOnce) {
  MakeSlowPolling(3);
  HeldOn(0, 3, "holder-token");
  auto out = AcquireWaiting("r", absl::Seconds(10), absl::Seconds(30));
  transport_->AnswerEverything();
  EXPECT_EQ(transport_->sent_count("acquire"), 3);
  transport_->Advance(absl::Milliseconds(100));
  EXPECT_EQ(transport_->sent_count("acquire"), 3) << "no polling yet";
  // The holder releases: every node announces it, the waiter tries once.
  ReleasedOn(0, 3, "holder-token");
  transport_->Advance(absl::ZeroDuration());
  EXPECT_EQ(transport_->sent_count("acquire"), 6) << "one attempt for three announcements";
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_TRUE((*out)->ok()) << (*out)->status();
}

TEST_F(ClientLogicTest, OnlyTheOldestWaiterOfAClientIsWoken) {
  MakeSlowPolling(3);
  HeldOn(0, 3, "t0");
  std::vector<std::shared_ptr<std::optional<absl::StatusOr<Lease>>>> outs;
  for (int w = 0; w < 5; ++w) {
    auto out = AcquireWaiting("r", absl::Seconds(10), absl::Seconds(30));
    outs.push_back(out);
  }
  transport_->AnswerEverything();
  EXPECT_EQ(transport_->sent_count("acquire"), 15);
  ReleasedOn(0, 3, "t0");
  transport_->Advance(absl::ZeroDuration());
  EXPECT_EQ(transport_->sent_count("acquire"), 18) << "one attempt for five waiters";
  transport_->AnswerEverything();
  ASSERT_TRUE(outs[0]->has_value()) << "the oldest waiter";
  EXPECT_TRUE((*outs[0])->ok());
  for (int w = 1; w < 5; ++w) EXPECT_FALSE(outs[w]->has_value()) << w;
}

// A release reaches the nodes at different times: the waiter wakes when the
// announcements (plus the nodes that granted its last attempt) make a
// quorum, not at the first one, whose attempt would fail and lose the rest.
TEST_F(ClientLogicTest, AStaggeredReleaseWakesTheWaiterOnceAQuorumIsFree) {
  MakeSlowPolling(5);
  HeldOn(0, 5, "holder");
  auto out = AcquireWaiting("r", absl::Seconds(10), absl::Seconds(30));
  transport_->AnswerEverything();
  EXPECT_EQ(transport_->sent_count("acquire"), 5);
  // Node 0 releases first; the others 200 ms later.
  ReleasedOn(0, 1, "holder");
  transport_->Advance(absl::Milliseconds(200));
  EXPECT_EQ(transport_->sent_count("acquire"), 5) << "one node free of five: no attempt yet";
  ReleasedOn(1, 5, "holder");
  transport_->Advance(absl::ZeroDuration());
  EXPECT_EQ(transport_->sent_count("acquire"), 10) << "one attempt, at the third announcement";
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_TRUE((*out)->ok()) << (*out)->status();
}

TEST_F(ClientLogicTest, NodesThatGrantedTheLastAttemptCountAsFree) {
  MakeSlowPolling(5);
  // The holder has nodes 0-2; nodes 3 and 4 grant the waiter's attempt.
  HeldOn(0, 3, "holder");
  auto out = AcquireWaiting("r", absl::Seconds(10), absl::Seconds(30));
  transport_->AnswerEverything();
  EXPECT_EQ(transport_->sent_count("acquire"), 5);
  ReleasedOn(0, 1, "holder");
  transport_->Advance(absl::ZeroDuration());
  EXPECT_EQ(transport_->sent_count("acquire"), 10) << "3 and 4 plus 0 are a quorum";
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_TRUE((*out)->ok()) << (*out)->status();
}

TEST_F(ClientLogicTest, AnInfiniteWaitPollsUntilStopped) {
  Options o;
  o.release_notifications = false;
  Make(3, o);
  HeldOn(0, 3, "holder");
  StopSource stop;
  auto out = AcquireWaiting("r", absl::Seconds(10), absl::InfiniteDuration(), stop.token());
  for (int i = 0; i < 200; ++i) {
    transport_->AnswerEverything();
    transport_->Advance(absl::Seconds(1));
  }
  EXPECT_FALSE(out->has_value()) << "still waiting after 200 s";
  EXPECT_GE(transport_->sent_count("acquire"), 3 * 100) << "polling at most every 250 ms x 1.5";
  stop.RequestStop();
  transport_->Advance(absl::ZeroDuration());  // completed on the transport's thread, at once
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kCancelled) << (*out)->status();
  transport_->AnswerEverything();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(transport_->node(i).keys["r"].data, "holder");
}

TEST_F(ClientLogicTest, StoppingDuringAnAttemptReturnsAtOnceAndReleasesBehindIt) {
  Make(5);
  StopSource stop;
  auto out = AcquireWaiting("r", absl::Seconds(10), absl::Seconds(30), stop.token());
  transport_->AnswerOne(0);  // node 0 granted; the rest are in flight
  stop.RequestStop();
  // Decided at the stop: the grants that land now do not count.
  transport_->AnswerOne(1);
  transport_->AnswerOne(2);
  transport_->Advance(absl::ZeroDuration());  // completed on the transport's thread, at once
  ASSERT_TRUE(out->has_value()) << "cancelled without waiting for the nodes";
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kCancelled);
  // The other SETs land, and the releases queued behind them remove them.
  transport_->AnswerEverything();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(HasKey(i, "r")) << i;
}

// observer.h: events come from the transport's threads (or the thread that
// starts the call, for a call decided at once), never from the thread that
// requests a stop, and the callback likewise.
TEST_F(ClientLogicTest, ACancelledAcquisitionIsObservedAndCompletedOnTheTransportsThread) {
  struct Log : Observer {
    explicit Log(const FakeTransport* const* t) : transport(t) {}
    void OnAcquire(const AcquireEvent& e) override {
      events.push_back({e.status.code(), (*transport)->InTransportThread()});
    }
    const FakeTransport* const* transport;
    std::vector<std::pair<absl::StatusCode, bool>> events;
  };
  auto log = std::make_shared<Log>(&transport_);
  Options o;
  o.observer = log;
  o.release_notifications = false;
  Make(3, o);
  HeldOn(0, 3, "holder");
  StopSource stop;
  bool completed_in_transport = false;
  std::optional<absl::Status> out;
  client_->AcquireAsync("r", absl::Seconds(10), absl::InfiniteDuration(), stop.token(),
                        [&](absl::StatusOr<Lease> l) {
                          completed_in_transport = transport_->InTransportThread();
                          out = l.status();
                        });
  transport_->AnswerEverything();  // the first attempt fails; a polling pause follows
  stop.RequestStop();
  EXPECT_TRUE(log->events.empty()) << "observed inside RequestStop, on the stopping thread";
  EXPECT_FALSE(out.has_value());
  transport_->Advance(absl::ZeroDuration());
  ASSERT_EQ(log->events.size(), 1u);
  EXPECT_EQ(log->events[0].first, absl::StatusCode::kCancelled);
  EXPECT_TRUE(log->events[0].second);
  ASSERT_TRUE(out.has_value());
  EXPECT_TRUE(absl::IsCancelled(*out)) << *out;
  EXPECT_TRUE(completed_in_transport);
  EXPECT_EQ(transport_->timers(), 0u) << "the polling pause's timer outlived the call";
}

TEST_F(ClientLogicTest, AStopRequestedBeforeTheCallSendsNothing) {
  Make(3);
  StopSource stop;
  stop.RequestStop();
  auto out = AcquireWaiting("r", absl::Seconds(10), absl::Seconds(30), stop.token());
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(transport_->sent_count("acquire"), 0);
}

// Outcomes tell failures apart without parsing messages.
TEST_F(ClientLogicTest, FailuresCarryAnOutcomeWithEveryNodesAnswer) {
  Make(5);
  HeldOn(0, 3, "other");
  auto held = TryAcquire("r", absl::Seconds(10));
  transport_->AnswerAll(0);
  transport_->AnswerAll(1);
  transport_->AnswerAll(3);
  transport_->AnswerAll(2);
  ASSERT_TRUE(held->has_value());
  std::optional<Outcome> o = GetOutcome((*held)->status());
  ASSERT_TRUE(o.has_value()) << (*held)->status();
  EXPECT_EQ(o->kind, Outcome::Kind::kHeldElsewhere);
  EXPECT_EQ(o->quorum, 3);
  EXPECT_EQ(o->refused, 3);
  EXPECT_EQ(o->yes, 1);
  EXPECT_EQ(o->attempts, 1);
  ASSERT_EQ(o->nodes.size(), 5u);
  EXPECT_EQ(o->nodes[0].node, "fake0:6379");
  EXPECT_EQ(o->nodes[0].answer, NodeResult::Answer::kRefused);
  EXPECT_EQ(o->nodes[3].answer, NodeResult::Answer::kYes);
  EXPECT_EQ(o->nodes[4].answer, NodeResult::Answer::kNone) << "decided before it answered";
  transport_->AnswerEverything();

  auto down = TryAcquire("s", absl::Seconds(10));
  for (int i = 0; i < 3; ++i) transport_->TimeOutAll(i);
  ASSERT_TRUE(down->has_value());
  o = GetOutcome((*down)->status());
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->kind, Outcome::Kind::kQuorumUnreachable);
  EXPECT_EQ(o->unavailable, 3);
  EXPECT_FALSE(o->nodes[0].detail.empty());
  transport_->AnswerEverything();

  // No validity left, and a wait that ran out: both kDeadlineExceeded.
  auto slow = TryAcquire("t", absl::Milliseconds(100));
  clock_.Advance(absl::Milliseconds(150));
  transport_->AnswerEverything();
  ASSERT_TRUE(slow->has_value());
  EXPECT_EQ(GetOutcome((*slow)->status())->kind, Outcome::Kind::kNoValidityLeft);
  for (int i = 0; i < 5; ++i) transport_->node(i).keys["w"] = {"other", std::nullopt, false};
  auto waited = AcquireWaiting("w", absl::Seconds(10), absl::Milliseconds(300));
  for (int i = 0; i < 20 && !waited->has_value(); ++i) {
    transport_->AnswerEverything();
    transport_->Advance(absl::Milliseconds(100));
  }
  ASSERT_TRUE(waited->has_value());
  o = GetOutcome((*waited)->status());
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->kind, Outcome::Kind::kWaitExpired);
  EXPECT_GE(o->attempts, 2);
  EXPECT_EQ(GetOutcome(absl::OkStatus()), std::nullopt);
}

TEST_F(ClientLogicTest, InvalidInputSendsNothing) {
  Make(3);
  auto empty = TryAcquire("", absl::Seconds(1));
  auto huge = TryAcquire(std::string(kMaxResourceLength + 1, 'x'), absl::Seconds(1));
  auto short_ttl = TryAcquire("r", absl::Milliseconds(2));
  for (auto* r : {&empty, &huge, &short_ttl}) {
    ASSERT_TRUE((*r)->has_value());
    EXPECT_EQ((**r)->status().code(), absl::StatusCode::kInvalidArgument);
  }
  absl::Status st;
  client_->ReleaseAsync(Lease(), [&](absl::Status s) { st = s; });
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(transport_->pending(i).empty());
}

TEST_F(ClientLogicTest, ExtendNeedsQuorumOfHoldersAndNeverRecreates) {
  Make(5);
  auto result = TryAcquire("r", absl::Seconds(10));
  transport_->AnswerEverything();
  ASSERT_TRUE(result->has_value() && (*result)->ok());
  Lease lease = ***result;
  // The key vanishes on three nodes (early expiry after a clock jump).
  for (int i = 0; i < 3; ++i) transport_->node(i).keys.erase("r");
  std::optional<absl::StatusOr<Lease>> ext;
  client_->ExtendAsync(lease, absl::Seconds(10),
                       [&](absl::StatusOr<Lease> l) { ext.emplace(std::move(l)); });
  transport_->AnswerEverything();
  ASSERT_TRUE(ext.has_value());
  EXPECT_EQ(ext->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(ext->status().message()), HasSubstr("lease lost on 3 nodes"));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(HasKey(i, "r")) << "extend must not re-create the key";
}

TEST_F(ClientLogicTest, ExtendValidityIsMeasuredFromItsOwnStart) {
  Make(3);
  auto result = TryAcquire("r", absl::Seconds(10));
  transport_->AnswerEverything();
  Lease lease = ***result;
  clock_.Advance(absl::Seconds(5));
  std::optional<absl::StatusOr<Lease>> ext;
  client_->ExtendAsync(lease, absl::Seconds(20),
                       [&](absl::StatusOr<Lease> l) { ext.emplace(std::move(l)); });
  clock_.Advance(absl::Seconds(1));
  transport_->AnswerEverything();
  ASSERT_TRUE(ext.has_value() && ext->ok()) << ext->status();
  // 20s - 1s elapsed during the extend - (200ms + 2ms)
  EXPECT_EQ((*ext)->TimeLeft(clock_.Now()), absl::Milliseconds(18798));
  EXPECT_EQ((*ext)->token(), lease.token());
  EXPECT_EQ((*ext)->ttl(), absl::Seconds(20));
}

TEST_F(ClientLogicTest, ReleaseIsIdempotentAndReportsUnavailableBelowQuorum) {
  Make(5);
  Lease foreign = Lease::ForToken("r", std::string(40, 'a'));
  transport_->node(0).keys["r"] = {"owner", std::nullopt, false};
  absl::Status st = absl::UnknownError("pending");
  client_->ReleaseAsync(foreign, [&](absl::Status s) { st = s; });
  transport_->AnswerEverything();
  EXPECT_TRUE(st.ok()) << "releasing a lease we do not hold is fine: " << st;
  EXPECT_EQ(transport_->node(0).keys["r"].data, "owner");
  client_->ReleaseAsync(foreign, [&](absl::Status s) { st = s; });
  transport_->AnswerAll(0);
  transport_->AnswerAll(1);
  transport_->TimeOutAll(2);
  transport_->TimeOutAll(3);
  transport_->TimeOutAll(4);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()), HasSubstr("release \"r\": 2 of 5 nodes confirmed"));
}

TEST_F(ClientLogicTest, WrongTypeOnOneNodeIsAPerNodeFailure) {
  Make(5);
  auto result = TryAcquire("r", absl::Seconds(10));
  transport_->AnswerEverything();
  Lease lease = ***result;
  transport_->node(4).keys["r"] = {"", std::nullopt, true};  // a list, say
  absl::Status st = ReleaseAndAnswer(lease);
  EXPECT_TRUE(st.ok()) << st;
}

TEST_F(ClientLogicTest, NodeErrorRepliesAreVotesNotCrashes) {
  Make(5);
  transport_->node(0).forced_error = "READONLY You can't write against a read only replica.";
  transport_->node(1).forced_error = "LOADING Redis is loading the dataset in memory";
  transport_->node(2).forced_error = "OOM command not allowed when used memory > 'maxmemory'.";
  auto result = TryAcquire("r", absl::Seconds(10));
  transport_->AnswerEverything();
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ((*result)->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string((*result)->status().message()), HasSubstr("fake0:6379: READONLY"));
  transport_->node(0).forced_error.clear();
  transport_->node(1).forced_error.clear();
  result = TryAcquire("r", absl::Seconds(10));
  transport_->AnswerEverything();
  EXPECT_TRUE((*result)->ok()) << "4 of 5 healthy again";
}

TEST_F(ClientLogicTest, AllNodesQuorumFailsOnFirstRefusal) {
  Make(5);
  std::optional<absl::StatusOr<std::vector<Lease>>> out;
  Client::SetRequest call;
  call.resources = {"a", "b"};
  call.ttl = absl::Seconds(10);
  call.quorum = 5;
  call.max_attempts = 1;
  client_->StartSet(std::move(call), nullptr,
                    [&](absl::StatusOr<std::vector<Lease>> l) { out.emplace(std::move(l)); });
  transport_->TimeOutAll(3);
  ASSERT_TRUE(out.has_value()) << "one unavailable node decides the all-nodes mode at once";
  EXPECT_EQ(out->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(out->status().message()), HasSubstr("fake3:6379"));
  transport_->AnswerEverything();
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(HasKey(i, "a")) << i;
    EXPECT_FALSE(HasKey(i, "b")) << i;
  }
}

// ---- Auto-renewal (renewal.h), on the fake clock ----------------------------------

// A renewal's at-risk and lost signals, stamped with the fake time.
struct Signals {
  std::vector<internal::Clock::TimePoint> at_risk;
  std::vector<std::pair<internal::Clock::TimePoint, absl::Status>> lost;
  std::unique_ptr<Renewal> renewal;
};

class RenewalLogicTest : public ClientLogicTest {
 protected:
  // Acquires `resource` on every node at once (no fake time passes) and
  // renews it with `ro`, recording its signals.
  std::shared_ptr<Signals> HoldAndRenew(const std::string& resource, absl::Duration ttl,
                                        RenewOptions ro) {
    auto held = TryAcquire(resource, ttl);
    transport_->AnswerEverything();
    auto signals = std::make_shared<Signals>();
    if (!held->has_value() || !(*held)->ok()) {
      ADD_FAILURE() << "not acquired";
      return signals;
    }
    // Weak: the signals own the renewal, which owns these callbacks.
    std::weak_ptr<Signals> weak = signals;
    ro.on_at_risk = [this, weak](const Lease&, const absl::Status&) {
      if (auto s = weak.lock()) s->at_risk.push_back(clock_.Now());
    };
    absl::StatusOr<std::unique_ptr<Renewal>> renewal =
        client_->AutoRenew(***held, ro, [this, weak](absl::Status why) {
          if (auto s = weak.lock()) s->lost.emplace_back(clock_.Now(), why);
        });
    EXPECT_TRUE(renewal.ok()) << renewal.status();
    if (renewal.ok()) signals->renewal = *std::move(renewal);
    return signals;
  }
};

TEST_F(RenewalLogicTest, WatchOnlyAtRiskFiresAtTheValidityMinusAtRisk) {
  Make(3);
  const auto t0 = clock_.Now();
  RenewOptions ro;
  ro.extend = false;  // a Mutex without auto-renew
  ro.at_risk = absl::Milliseconds(2500);
  // valid_until = t0 + 3000 - (30 + 2) ms; at risk from 2968 - 2500 = 468 ms.
  auto signals = HoldAndRenew("w", absl::Seconds(3), ro);
  Renewal* renewal = signals->renewal.get();
  ASSERT_NE(renewal, nullptr);
  transport_->Advance(absl::Milliseconds(467));
  EXPECT_TRUE(signals->at_risk.empty()) << "early";
  transport_->Advance(absl::Milliseconds(1));
  ASSERT_EQ(signals->at_risk.size(), 1u) << "not at 468 ms";
  EXPECT_EQ(signals->at_risk[0] - t0, std::chrono::milliseconds(468));
  EXPECT_TRUE(renewal->at_risk());
  transport_->Advance(absl::Milliseconds(2499));
  EXPECT_TRUE(signals->lost.empty());
  transport_->Advance(absl::Milliseconds(1));
  ASSERT_EQ(signals->lost.size(), 1u);
  EXPECT_EQ(signals->lost[0].first - t0, std::chrono::milliseconds(2968));
  EXPECT_TRUE(absl::IsDeadlineExceeded(signals->lost[0].second)) << signals->lost[0].second;
  EXPECT_EQ(transport_->sent_count("extend"), 0);
  EXPECT_EQ(signals->at_risk.size(), 1u);
}

// With half the ttl between extensions the at-risk point (default: one
// period of validity left) comes before each extension is due; a healthy
// extension must not trip it, nor spin the timer while it is in flight.
TEST_F(RenewalLogicTest, HealthyRenewalsAreNeverAtRisk) {
  Make(3);
  RenewOptions ro;
  ro.interval_fraction = 0.5;
  auto signals = HoldAndRenew("h", absl::Seconds(1), ro);
  Renewal* renewal = signals->renewal.get();
  ASSERT_NE(renewal, nullptr);
  for (int i = 1; i <= 4; ++i) {
    transport_->Advance(absl::Milliseconds(500));  // due: the extension goes out
    EXPECT_EQ(transport_->sent_count("extend"), 3 * i);
    EXPECT_LE(transport_->timers(), 1u);
    transport_->Advance(absl::Milliseconds(1));  // its round trip
    transport_->AnswerEverything();
    EXPECT_EQ(renewal->renewals(), i);
  }
  EXPECT_TRUE(signals->at_risk.empty()) << signals->at_risk.size() << " of 4 healthy renewals";
  EXPECT_FALSE(renewal->at_risk());
  EXPECT_TRUE(renewal->active());
}

// Extending: at risk once an extension failed and less than at_risk is
// left (not before), cleared by the next success.
TEST_F(RenewalLogicTest, AtRiskFollowsFailedExtensionsAndClearsOnSuccess) {
  Make(3);
  const auto t0 = clock_.Now();
  // Period 1 s, at risk with 1 s left (at 1968 ms).
  auto signals = HoldAndRenew("f", absl::Seconds(3), RenewOptions());
  Renewal* renewal = signals->renewal.get();
  ASSERT_NE(renewal, nullptr);
  // Every extension times out on two nodes of three.
  for (int step = 0; step < 3000 && clock_.Now() - t0 < std::chrono::milliseconds(1967); ++step) {
    transport_->AnswerAll(0);
    transport_->TimeOutAll(1);
    transport_->TimeOutAll(2);
    transport_->Advance(absl::Milliseconds(1));
  }
  EXPECT_TRUE(signals->at_risk.empty()) << "more than at_risk was left";
  EXPECT_GE(transport_->sent_count("extend"), 6) << "extensions were retried";
  transport_->Advance(absl::Milliseconds(1));
  ASSERT_EQ(signals->at_risk.size(), 1u);
  EXPECT_EQ(signals->at_risk[0] - t0, std::chrono::milliseconds(1968));
  EXPECT_TRUE(renewal->at_risk());
  // The nodes answer again: the next extension clears it.
  for (int step = 0; step < 300 && renewal->at_risk(); ++step) {
    transport_->AnswerEverything();
    transport_->Advance(absl::Milliseconds(1));
  }
  EXPECT_FALSE(renewal->at_risk());
  EXPECT_TRUE(renewal->active());
  EXPECT_EQ(signals->at_risk.size(), 1u);
}

// One refusal with two nodes unreachable: 2 of 5 confirmed, but the two
// silent nodes may still hold the token, so a quorum may too. That is not a
// loss: Extend says kUnavailable, and the renewal retries (and at-risk may
// fire) instead of ending as lost.
TEST_F(RenewalLogicTest, ARenewalIsNotLostWhileAQuorumMayStillHoldTheToken) {
  Make(5);
  auto held = TryAcquire("q", absl::Seconds(3));
  transport_->AnswerEverything();
  ASSERT_TRUE((*held)->ok());
  const Lease lease = ***held;
  auto answer_one_refusal_two_silent = [&] {
    transport_->node(0).keys.erase("q");  // refuses
    transport_->AnswerAll(0);
    transport_->AnswerAll(1);
    transport_->AnswerAll(2);
    transport_->TimeOutAll(3);
    transport_->TimeOutAll(4);
  };
  std::optional<absl::StatusOr<Lease>> ext;
  client_->ExtendAsync(lease, absl::Seconds(3),
                       [&](absl::StatusOr<Lease> l) { ext.emplace(std::move(l)); });
  answer_one_refusal_two_silent();
  ASSERT_TRUE(ext.has_value());
  EXPECT_EQ(ext->status().code(), absl::StatusCode::kUnavailable) << ext->status();

  bool lost = false;
  auto renewal = client_->AutoRenew(lease, RenewOptions(), [&](absl::Status) { lost = true; });
  ASSERT_TRUE(renewal.ok());
  transport_->Advance(absl::Seconds(1));  // the first extension is due
  answer_one_refusal_two_silent();
  EXPECT_FALSE(lost);
  EXPECT_TRUE((*renewal)->active());
  EXPECT_TRUE((*renewal)->status().ok()) << (*renewal)->status();
  // Nodes 3 and 4 answer again: the retry succeeds with 4 of 5.
  transport_->Advance(absl::Milliseconds(250));
  transport_->AnswerEverything();
  EXPECT_EQ((*renewal)->renewals(), 1);
  EXPECT_FALSE(lost);

  // Three refusals of five: a quorum no longer holds it. That is a loss.
  for (int i = 1; i < 3; ++i) transport_->node(i).keys.erase("q");
  transport_->Advance(absl::Seconds(1));
  transport_->AnswerEverything();
  EXPECT_TRUE(lost);
  EXPECT_EQ((*renewal)->status().code(), absl::StatusCode::kFailedPrecondition);
}

// The client's destruction ends its renewals: the lease is no longer
// renewed and will run out, which is what lost() tells the work it guards.
TEST_F(RenewalLogicTest, DestroyingTheClientStopsTheLostTokenOfActiveRenewals) {
  Make(3);
  auto held = TryAcquire("d", absl::Seconds(10));
  auto stopped = TryAcquire("s", absl::Seconds(10));
  transport_->AnswerEverything();
  bool on_lost = false;
  auto renewal = client_->AutoRenew(***held, RenewOptions(), [&](absl::Status) { on_lost = true; });
  auto quiet = client_->AutoRenew(***stopped, RenewOptions(), [](absl::Status) {});
  ASSERT_TRUE(renewal.ok() && quiet.ok());
  (*quiet)->Stop();
  bool callback_ran = false;
  StopCallback on_stop((*renewal)->lost(), [&] { callback_ran = true; });
  EXPECT_FALSE((*renewal)->lost().stop_requested());
  client_.reset();
  EXPECT_TRUE((*renewal)->lost().stop_requested()) << "the work goes on with an unrenewed lease";
  EXPECT_TRUE(callback_ran);
  EXPECT_FALSE((*renewal)->active());
  EXPECT_EQ((*renewal)->status().code(), absl::StatusCode::kCancelled) << (*renewal)->status();
  EXPECT_FALSE(on_lost) << "on_lost is for a lost lease, not a client that went";
  // A renewal stopped before the client went is left as it was.
  EXPECT_FALSE((*quiet)->lost().stop_requested());
  EXPECT_TRUE((*quiet)->status().ok());
}

TEST_F(ClientLogicTest, DestroyingTheClientCancelsPendingOperations) {
  Make(3);
  auto result = TryAcquire("r", absl::Seconds(10));
  client_.reset();
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ((*result)->status().code(), absl::StatusCode::kCancelled);
}

// A waiting acquisition whose attempt is refused while the client is being
// destroyed ends CANCELLED (client.h), not with the attempt's refusal.
TEST_F(ClientLogicTest, AnAttemptRefusedDuringShutdownEndsCancelled) {
  Make(3);
  HeldOn(0, 3, "holder");
  auto out = AcquireWaiting("r", absl::Seconds(10), absl::InfiniteDuration(), StopToken());
  transport_->BeginStopping();
  transport_->AnswerEverything();
  transport_->Advance(absl::ZeroDuration());
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kCancelled) << (*out)->status();
}

// Bytes of the heap in use (glibc): the memory test below reads it. Under a
// sanitizer the allocations bypass glibc's heap, and the test is skipped.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kGlibcHeap = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool kGlibcHeap = false;
#else
constexpr bool kGlibcHeap = true;
#endif
#else
constexpr bool kGlibcHeap = true;
#endif

size_t HeapInUse() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // small chunks, and the large ones mmap(2)ed
}

TEST_F(ClientLogicTest, ALongWaitWithoutNotificationsKeepsItsMemoryFlat) {
  if (!kGlibcHeap) GTEST_SKIP() << "the heap is the sanitizer's";
  // Node 0 grants every attempt, nodes 1 and 2 refuse: each attempt fails
  // with one grant, which the cleanup frees again. Without notifications
  // nothing reads the list of freed nodes, which grew by one per attempt.
  Options o;
  o.release_notifications = false;
  Make(3, o);
  HeldOn(1, 3, "holder");
  StopSource stop;
  auto out = AcquireWaiting("r", absl::Seconds(10), absl::InfiniteDuration(), stop.token());
  auto step = [&] {
    transport_->AnswerEverything();
    for (int i = 0; i < 3; ++i) transport_->node(i).log.clear();  // the fake's own record
    transport_->Advance(absl::Milliseconds(400));                 // past the longest polling pause
  };
  for (int i = 0; i < 1000; ++i) step();
  const int before = transport_->sent_count("acquire");
  const size_t heap = HeapInUse();
  for (int i = 0; i < 20000; ++i) step();
  const size_t grown = HeapInUse() - std::min(HeapInUse(), heap);
  EXPECT_GE(transport_->sent_count("acquire") - before, 3 * 20000) << "one attempt per step";
  EXPECT_LT(grown, 32u << 10) << "heap grew by " << grown << " bytes over 20000 attempts";
  stop.RequestStop();
  // The stop completes the call on the transport's thread.
  transport_->Advance(absl::ZeroDuration());
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace redlock
