// What the operations' calls to the nodes promise (internal/node_calls.h),
// over fake nodes: a NOSCRIPT never makes a command run out of the order it
// was sent in, a confirmation counts only for the writes before it, a node
// whose replicas lag stops costing the calls, and a release that does not get
// through is sent again.

#include "redlock/internal/node_calls.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/internal/client_impl.h"
#include "redlock/internal/scriptless.h"
#include "redlock/internal/server_commands.h"
#include "redlock/rw_lock.h"
#include "tests/unit/fake_transport.h"

namespace redlock {
namespace {

using internal::ClientImpl;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testkit::FakeClock;
using testkit::FakeTransport;

using Result = std::shared_ptr<std::optional<absl::StatusOr<Lease>>>;
using SetResult = std::shared_ptr<std::optional<absl::StatusOr<std::vector<Lease>>>>;

class NodeCallsTest : public ::testing::Test {
 protected:
  // `o` gets `nodes` plain fake endpoints.
  void Make(int nodes, Options& o) {
    o.nodes.clear();
    for (int i = 0; i < nodes; ++i) {
      Endpoint ep;
      ep.host = "fake" + std::to_string(i);
      o.nodes.push_back(ep);
    }
    MakeWith(nodes, o);
  }
  void Make(int nodes, Options&& o = Options()) { Make(nodes, o); }
  // With the endpoints `o` has; `modes`: which nodes forbid scripting;
  // `commands`: which script-free commands they have.
  void MakeWith(int nodes, const Options& o,
                std::shared_ptr<internal::ScriptingModes> modes = nullptr,
                std::shared_ptr<internal::ServerCommands> commands = nullptr) {
    ASSERT_TRUE(ValidateOptions(o).ok()) << ValidateOptions(o);
    client_.reset();
    transport_ = new FakeTransport(nodes, &clock_);
    for (int i = 0; i < nodes; ++i) transport_->node(i).replicas = 1;
    modes_ = modes;
    client_ = std::make_unique<ClientImpl>(o, std::unique_ptr<internal::Transport>(transport_),
                                           &clock_, std::move(modes), nullptr, std::move(commands));
  }
  // Every node forbids scripting (the script-free path, scriptless.h).
  void MakeScriptless(int nodes, Options o) {
    o.nodes.clear();
    for (int i = 0; i < nodes; ++i) {
      Endpoint ep;
      ep.host = "fake" + std::to_string(i);
      o.nodes.push_back(ep);
    }
    auto modes = std::make_shared<internal::ScriptingModes>(nodes);
    for (int i = 0; i < nodes; ++i) {
      modes->SetScriptless(i, "NOPERM this user has no permissions to run the 'eval' command");
    }
    MakeWith(nodes, o, std::move(modes));
  }
  static Options Durable() {
    Options o;
    o.durability.replicas = 1;
    o.durability.timeout = absl::Milliseconds(20);
    return o;
  }
  Result TryAcquire(const std::string& r, absl::Duration ttl = absl::Seconds(10)) {
    auto out = std::make_shared<std::optional<absl::StatusOr<Lease>>>();
    client_->TryAcquireAsync(r, ttl,
                             [out](absl::StatusOr<Lease> l) { out->emplace(std::move(l)); });
    return out;
  }
  SetResult TryAcquireSet(std::vector<std::string> resources) {
    auto out = std::make_shared<std::optional<absl::StatusOr<std::vector<Lease>>>>();
    Client::SetRequest call;
    call.resources = std::move(resources);
    call.ttl = absl::Seconds(10);
    call.max_attempts = 1;
    client_->StartSet(std::move(call), nullptr,
                      [out](absl::StatusOr<std::vector<Lease>> l) { out->emplace(std::move(l)); });
    return out;
  }
  Lease Acquired(const std::string& r, absl::Duration ttl = absl::Seconds(10)) {
    Result out = TryAcquire(r, ttl);
    transport_->AnswerEverything();
    EXPECT_TRUE(out->has_value() && (*out)->ok());
    return out->has_value() && (*out)->ok() ? ***out : Lease();
  }
  // Extends to 20 s and lets every node answer.
  std::optional<absl::StatusOr<Lease>> Extend(const Lease& lease) {
    std::optional<absl::StatusOr<Lease>> out;
    client_->ExtendAsync(lease, absl::Seconds(20),
                         [&](absl::StatusOr<Lease> l) { out.emplace(std::move(l)); });
    transport_->AnswerEverything();
    return out;
  }
  std::optional<absl::Status> Release(const Lease& lease) {
    auto out = std::make_shared<std::optional<absl::Status>>();
    client_->ReleaseAsync(lease, [out](absl::Status s) { out->emplace(std::move(s)); });
    transport_->AnswerEverything();
    return *out;
  }
  std::vector<std::string> Queued(int node) {
    std::vector<std::string> out;
    for (const auto& p : transport_->pending(node)) {
      out.push_back(p.argv.empty() ? p.op : p.argv[0]);
    }
    return out;
  }
  bool HasKey(int node, const std::string& key) {
    auto& keys = transport_->node(node).keys;
    auto it = keys.find(key);
    return it != keys.end() && (!it->second.expires || *it->second.expires > clock_.Now());
  }
  size_t Pending(int node) { return client_->Health()[static_cast<size_t>(node)].cleanups_pending; }
  // Every retry round once (the retry interval here: 100 ms).
  void RetryRound() {
    transport_->Advance(absl::Milliseconds(100));
    transport_->AnswerEverything();
  }

  FakeClock clock_;
  FakeTransport* transport_ = nullptr;
  std::unique_ptr<ClientImpl> client_;
  std::shared_ptr<internal::ScriptingModes> modes_;
};

// ---- NOSCRIPT ------------------------------------------------------------------------

TEST_F(NodeCallsTest, AReleaseThatGetsNoscriptRunsAgainAsEvalAndTheScriptsAreLoaded) {
  Make(3);
  Lease lease = Acquired("r");
  for (int i = 0; i < 3; ++i) transport_->node(i).FlushScripts();
  std::optional<absl::Status> released = Release(lease);
  ASSERT_TRUE(released.has_value());
  EXPECT_TRUE(released->ok()) << *released;
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(HasKey(i, "r")) << "node " << i;
    EXPECT_THAT(transport_->node(i).log, Contains("SCRIPT LOAD"));
    EXPECT_EQ(transport_->node(i).scripts.size(), internal::AllScripts().size());
  }
}

TEST_F(NodeCallsTest, AnAcquisitionThatGetsNoscriptIsANoAndNeverRunsAfterItsRelease) {
  Make(3);
  transport_->node(0).FlushScripts();
  for (int i : {1, 2}) transport_->node(i).keys["b"] = {"someone", std::nullopt, false};
  SetResult out = TryAcquireSet({"a", "b"});
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kAborted) << (*out)->status();
  // Node 0: the acquisition did not run, its release did, and nothing ran
  // the acquisition later.
  const std::vector<std::string>& log = transport_->node(0).log;
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.front(), "NOSCRIPT");
  EXPECT_THAT(log, Not(Contains("acquire")));
  EXPECT_FALSE(HasKey(0, "a"));
  EXPECT_FALSE(HasKey(0, "b"));
}

TEST_F(NodeCallsTest, AnExtensionThatGetsNoscriptCountsOnlyTheWaitBehindItsOwnRun) {
  // The replicas stop after acknowledging everything; the scripts are
  // flushed. The WAIT behind the EVALSHA that got NOSCRIPT answers at once:
  // it followed no write, and must confirm none.
  Make(3, Durable());
  Lease lease = Acquired("r");
  for (int i = 0; i < 3; ++i) {
    transport_->node(i).replica_stalled = true;
    transport_->node(i).FlushScripts();
  }
  std::optional<absl::StatusOr<Lease>> ext = Extend(lease);
  ASSERT_TRUE(ext.has_value());
  EXPECT_EQ(ext->status().code(), absl::StatusCode::kUnavailable) << ext->status();
  EXPECT_THAT(std::string(ext->status().message()), HasSubstr("0 replicas of 1 confirmed"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(transport_->node(i).log, Contains("extend")) << "sent again as EVAL";
  }
}

TEST_F(NodeCallsTest, AWriteRedirectedByAClusterCountsOnlyTheWaitBehindItsNewCopy) {
  // Every node a cluster whose master answers MOVED to the extension (it did
  // not run it there); the replicas stop after acknowledging everything. The
  // WAIT pipelined behind the redirected copy answers at once: it followed
  // no write, and must confirm none; the copy sent again gets its own.
  Options o = Durable();
  Make(3, o);
  for (int i = 0; i < 3; ++i) {
    o.nodes[static_cast<size_t>(i)].host.clear();
    o.nodes[static_cast<size_t>(i)].cluster.seeds = {{"fake" + std::to_string(i), 1}};
  }
  MakeWith(3, o);
  Lease lease = Acquired("r");
  for (int i = 0; i < 3; ++i) {
    transport_->node(i).replica_stalled = true;
    transport_->node(i).refuse_next.push_back("MOVED 7 fake" + std::to_string(i) + ":2");
  }
  std::optional<absl::StatusOr<Lease>> ext = Extend(lease);
  ASSERT_TRUE(ext.has_value());
  EXPECT_EQ(ext->status().code(), absl::StatusCode::kUnavailable) << ext->status();
  EXPECT_THAT(std::string(ext->status().message()), HasSubstr("0 replicas of 1 confirmed"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(transport_->node(i).log, Contains("MOVED"));
    EXPECT_THAT(transport_->node(i).log, Contains("extend")) << "sent again where it was moved";
  }
  // Without stalled replicas, the redirected extension succeeds.
  for (int i = 0; i < 3; ++i) {
    transport_->node(i).replica_stalled = false;
    transport_->node(i).unacknowledged = false;
    transport_->node(i).refuse_next.push_back("MOVED 7 fake" + std::to_string(i) + ":2");
  }
  ext = Extend(lease);
  ASSERT_TRUE(ext.has_value());
  EXPECT_TRUE(ext->ok()) << ext->status();
}

TEST_F(NodeCallsTest, ARedirectionIsFollowedAFewTimesThenIsANo) {
  Options o;
  Make(1, o);
  o.nodes[0].host.clear();
  o.nodes[0].cluster.seeds = {{"fake0", 1}};
  MakeWith(1, o);
  for (int k = 0; k < 10; ++k) transport_->node(0).refuse_next.push_back("MOVED 7 fake0:2");
  Result out = TryAcquire("r");
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string((*out)->status().message()), HasSubstr("redirected 5 times"));
  EXPECT_FALSE(HasKey(0, "r"));
}

// ---- Confirmations -------------------------------------------------------------------

TEST_F(NodeCallsTest, OneConfirmationIsInFlightPerNodeAndCoversTheWritesBeforeIt) {
  Make(3, Durable());
  Result a = TryAcquire("a");
  Result b = TryAcquire("b");
  Result c = TryAcquire("c");
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(Queued(i), ElementsAre("SET", "WAIT", "SET", "SET")) << "node " << i;
  }
  for (int i = 0; i < 3; ++i) {
    transport_->AnswerOne(i);  // a's SET
    transport_->AnswerOne(i);  // its WAIT: the next one goes behind b's and c's SETs
    EXPECT_THAT(Queued(i), ElementsAre("SET", "SET", "WAIT")) << "node " << i;
  }
  ASSERT_TRUE(a->has_value() && (*a)->ok());
  EXPECT_FALSE(b->has_value());
  transport_->AnswerEverything();
  ASSERT_TRUE(b->has_value() && (*b)->ok()) << (*b)->status();
  ASSERT_TRUE(c->has_value() && (*c)->ok()) << (*c)->status();
  EXPECT_EQ(transport_->sent_count("wait"), 6);
}

TEST_F(NodeCallsTest, ANodeWhoseReplicasLagVotesNoWithoutBeingAskedUntilAProbeIsConfirmed) {
  Make(3, Durable());
  transport_->node(0).replicas = 0;
  for (int k = 0; k < internal::kConfirmationsMissed; ++k) {
    Result r = TryAcquire("r" + std::to_string(k));
    transport_->AnswerEverything();
    ASSERT_TRUE(r->has_value() && (*r)->ok()) << "nodes 1 and 2 decide";
    EXPECT_FALSE(HasKey(0, "r" + std::to_string(k))) << "the unconfirmed grant is removed";
  }
  EXPECT_TRUE(client_->Health()[0].replicas_lagging);
  const int sets = transport_->sent_count("acquire");
  Result skipped = TryAcquire("skipped");
  EXPECT_TRUE(Queued(0).empty()) << "nothing is sent to node 0";
  EXPECT_EQ(transport_->sent_count("acquire"), sets + 2);
  transport_->Advance(absl::ZeroDuration());  // node 0's "no" comes from a timer
  transport_->AnswerEverything();
  ASSERT_TRUE(skipped->has_value() && (*skipped)->ok());
  EXPECT_EQ((*skipped)->value().nodes_granted(), 2);

  // The replica is back; after the probe interval a write goes as a probe.
  transport_->node(0).replicas = 1;
  transport_->Advance(absl::Milliseconds(100));
  Result probe = TryAcquire("probe");
  EXPECT_THAT(Queued(0), ElementsAre("SET", "WAIT"));
  transport_->AnswerEverything();
  ASSERT_TRUE(probe->has_value() && (*probe)->ok());
  EXPECT_TRUE(HasKey(0, "probe")) << "node 0's grant was confirmed";
  EXPECT_FALSE(client_->Health()[0].replicas_lagging);
}

// ---- Releases that must not be lost --------------------------------------------------

TEST_F(NodeCallsTest, AReleaseRefusedAfterAReconnectIsSentOnceTheNodeTakesCommands) {
  Make(3);
  Lease lease = Acquired("r");
  // Node 0's connection was replaced (its SET ran), and the node is down.
  transport_->Reconnect(0, /*executed=*/true);
  transport_->SetDown(0, true);
  std::optional<absl::Status> released = Release(lease);
  ASSERT_TRUE(released.has_value() && released->ok()) << "nodes 1 and 2 are a quorum";
  EXPECT_TRUE(HasKey(0, "r"));
  EXPECT_EQ(Pending(0), 1u);
  RetryRound();  // still down
  EXPECT_EQ(Pending(0), 1u);
  transport_->SetDown(0, false);
  RetryRound();
  EXPECT_FALSE(HasKey(0, "r"));
  EXPECT_EQ(Pending(0), 0u);
}

TEST_F(NodeCallsTest, AFailedAttemptsReleaseThatTimesOutIsSentAgainAsEval) {
  // The release's deadline passes before the node answers (it would have
  // answered NOSCRIPT: its scripts were flushed meanwhile).
  Make(3);
  for (int i : {1, 2}) transport_->node(i).keys["r"] = {"someone", std::nullopt, false};
  Result out = TryAcquire("r");
  transport_->AnswerOne(0);  // node 0 grants
  transport_->AnswerAll(1);
  transport_->AnswerAll(2);
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Queued(0), ElementsAre("EVALSHA"));
  transport_->node(0).FlushScripts();
  transport_->TimeOutAll(0);
  EXPECT_TRUE(HasKey(0, "r"));
  EXPECT_EQ(Pending(0), 1u);
  transport_->Advance(absl::Milliseconds(100));
  EXPECT_THAT(Queued(0), ElementsAre("EVAL"));
  transport_->AnswerAll(0);
  EXPECT_FALSE(HasKey(0, "r"));
  EXPECT_EQ(Pending(0), 0u);
}

TEST_F(NodeCallsTest, AReleaseWaitsForANodeDownLongerThanTheTtl) {
  // A stopped node runs the SET its socket holds when it resumes, however
  // late: the release waits for the node, not for the ttl.
  Make(3);
  Lease lease = Acquired("r", absl::Seconds(1));
  transport_->Reconnect(0, /*executed=*/true);
  transport_->SetDown(0, true);
  ASSERT_TRUE(Release(lease).has_value());
  for (int i = 0; i < 30; ++i) RetryRound();  // 3 s
  EXPECT_EQ(Pending(0), 1u);
  transport_->SetDown(0, false);
  const int releases = transport_->sent_count("release");
  RetryRound();
  EXPECT_EQ(transport_->sent_count("release"), releases + 1);
  EXPECT_EQ(Pending(0), 0u);
}

TEST_F(NodeCallsTest, AReleaseAnsweredWithAnErrorIsDroppedOnceItsKeysExpired) {
  Make(3);
  Lease lease = Acquired("r", absl::Seconds(1));
  transport_->node(0).forced_error = "LOADING Redis is loading the dataset in memory";
  ASSERT_TRUE(Release(lease).has_value());
  EXPECT_EQ(Pending(0), 1u);
  for (int i = 0; i < 12 && Pending(0) > 0; ++i) RetryRound();
  EXPECT_EQ(Pending(0), 0u) << "the key's ttl has passed";
}

TEST_F(NodeCallsTest, NoReleaseIsKeptForANodeThatNeverTookTheSet) {
  Make(3);
  transport_->SetDown(0, true);
  Result out = TryAcquire("r");
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value() && (*out)->ok());
  ASSERT_TRUE(Release(***out).has_value());
  EXPECT_EQ(Pending(0), 0u);
}

TEST_F(NodeCallsTest, PendingReleasesAreBoundedPerNode) {
  Options o;
  o.max_in_flight_per_node = 16;
  Make(3, o);
  std::vector<Lease> leases;
  for (int i = 0; i < 20; ++i) leases.push_back(Acquired("r" + std::to_string(i)));
  transport_->Reconnect(0, /*executed=*/true);
  transport_->SetDown(0, true);
  for (const Lease& l : leases) ASSERT_TRUE(Release(l).has_value());
  EXPECT_EQ(Pending(0), 16u);
}

// ---- The release's command ---------------------------------------------------------

// Its maker builds it once (ScriptRelease); a release whose maker left it
// empty still sends the script release, never an empty command.
TEST_F(NodeCallsTest, AReleaseWithoutItsCommandSendsTheScriptRelease) {
  Make(1);
  transport_->node(0).keys["r"] = {"tok", std::nullopt, false};
  transport_->node(0).keys["other"] = {"someone", std::nullopt, false};
  internal::NodeCalls calls(transport_, &clock_, Options());
  for (const std::string& key : {std::string("r"), std::string("other")}) {
    auto release = std::make_shared<internal::KeysRelease>();
    release->keys = {key};
    release->token = "tok";
    release->ttl = absl::Seconds(10);
    release->expires = clock_.Now() + std::chrono::seconds(10);
    ASSERT_TRUE(release->command.payload.empty());
    std::optional<internal::NodeCalls::Answer> answer;
    calls.Release(0, 0, release, [&](internal::NodeCalls::Answer a) { answer = std::move(a); });
    transport_->AnswerEverything();
    ASSERT_TRUE(answer.has_value()) << key;
    ASSERT_TRUE(answer->reply.ok()) << key << ": " << answer->reply.status();
    EXPECT_FALSE(answer->reply->is_error()) << key << ": " << answer->reply->Describe();
  }
  EXPECT_FALSE(HasKey(0, "r")) << "our token: released";
  EXPECT_TRUE(HasKey(0, "other")) << "another token: left alone";
  EXPECT_THAT(transport_->node(0).log,
              ElementsAre(internal::ReleaseOneScript().name, internal::ReleaseOneScript().name));
  calls.Shutdown();
}

// ---- Where two features meet (issue 36) -----------------------------------------

// Item 3. The script-free path with the durability vote: a transaction whose
// EXEC aborted runs again, and only the WAIT behind the run that wrote may
// confirm it. Here the first run's WAIT answers "replicated" (it followed no
// write), then the replica stalls and the second run's write is not
// replicated: the extension must not count.
TEST_F(NodeCallsTest, AScriptFreeWriteRunAgainIsConfirmedOnlyByTheWaitBehindItsOwnRun) {
  MakeScriptless(1, Durable());
  Lease lease = Acquired("r");
  ASSERT_TRUE(HasKey(0, "r"));
  std::optional<absl::StatusOr<Lease>> ext;
  client_->ExtendAsync(lease, absl::Seconds(20),
                       [&](absl::StatusOr<Lease> l) { ext.emplace(std::move(l)); });
  ASSERT_TRUE(transport_->AnswerOne(0));  // phase 1: WATCH, the token read
  EXPECT_THAT(Queued(0), ElementsAre("MULTI", "WAIT"));
  // Another client touches the key: the first EXEC aborts.
  transport_->node(0).keys["r"].expires = clock_.Now() + std::chrono::seconds(30);
  ASSERT_TRUE(transport_->AnswerOne(0));  // EXEC aborted: a second run queued
  EXPECT_EQ(transport_->node(0).exec_aborts, 1);
  ASSERT_TRUE(transport_->AnswerOne(0));  // the first WAIT: nothing to wait for
  transport_->node(0).replica_stalled = true;
  transport_->AnswerEverything();  // the second run writes; its WAIT sees 0 replicas
  EXPECT_EQ(transport_->node(0).execs, 1) << "the extension's second run";
  ASSERT_TRUE(ext.has_value());
  EXPECT_FALSE(ext->ok()) << "confirmed by the WAIT of a run that wrote nothing";
  EXPECT_THAT(std::string(ext->status().message()), HasSubstr("0 replicas of 1 confirmed"));
}

// Item 4. A shared counter with the durability vote: another resource's
// commit raises the counter past our token first, so our commit writes
// nothing; sent on a new connection, its WAIT would cover nothing of round
// 1 (whose SET the stalled replica never got). It follows round 1 on round
// 1's connection, or is refused.
TEST_F(NodeCallsTest, AFencingCommitFollowsRoundOneOnItsConnection) {
  Options o = Durable();
  o.fencing = true;
  o.fencing_counters = Options::FencingCounters::kShared;
  Make(3, o);
  for (int i = 0; i < 3; ++i) transport_->node(i).keys[":fence"] = {"5", std::nullopt, false};
  transport_->node(0).replica_stalled = true;  // node 0's round 1 never reaches its replica
  Result out = TryAcquire("r");
  ASSERT_TRUE(transport_->AnswerOne(0));        // node 0 grants on its connection...
  transport_->Reconnect(0, /*executed=*/true);  // ...which is replaced
  ASSERT_TRUE(transport_->AnswerOne(1));        // quorum: T = 6, committed to nodes 0 and 1
  EXPECT_EQ(transport_->sent_count("fence-commit"), 2);
  // Another resource's holder commits 100 first: ours raises nothing.
  for (int i = 0; i < 3; ++i) transport_->node(i).keys[":fence"] = {"100", std::nullopt, false};
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  EXPECT_FALSE((*out)->ok()) << "granted with a round 1 no replica has; token "
                             << ((*out)->ok() ? (**out)->fencing_token() : 0);
}

// Item 5. The script-free path with the durability vote: the confirmation
// breaker's probe is a write that ends without its phase 2 (an acquisition
// that finds the key held); the breaker must still probe again later.
TEST_F(NodeCallsTest, AScriptFreeProbeThatWroteNothingDoesNotStopTheProbes) {
  MakeScriptless(1, Durable());
  transport_->node(0).replicas = 0;
  // Sets of two resources: the acquire script, a transaction on this node.
  for (int k = 0; k < internal::kConfirmationsMissed; ++k) {
    SetResult r = TryAcquireSet({"a" + std::to_string(k), "b" + std::to_string(k)});
    transport_->AnswerEverything();
    ASSERT_TRUE(r->has_value());
  }
  ASSERT_TRUE(client_->Health()[0].replicas_lagging);
  transport_->node(0).keys["held"] = {"someone", std::nullopt, false};
  transport_->Advance(absl::Milliseconds(100));
  SetResult probe = TryAcquireSet({"held", "x"});  // the probe: refused in phase 1
  transport_->AnswerEverything();
  ASSERT_TRUE(probe->has_value());
  EXPECT_TRUE(absl::IsAborted((*probe)->status())) << (*probe)->status();
  // The replica is back: after the probe interval a write is asked again.
  transport_->node(0).replicas = 1;
  transport_->Advance(absl::Milliseconds(100));
  SetResult next = TryAcquireSet({"free", "y"});
  transport_->Advance(absl::ZeroDuration());
  transport_->AnswerEverything();
  ASSERT_TRUE(next->has_value());
  EXPECT_TRUE((*next)->ok()) << (*next)->status();
  EXPECT_FALSE(client_->Health()[0].replicas_lagging);
}

// Item 6. A shared counter on script-free nodes: an acquisition reads the
// counter inside its transaction instead of watching it, so another
// resource's commit (which raises the counter) does not abort it, and an
// aborted acquisition is no "held by another client".
TEST_F(NodeCallsTest, AScriptFreeFencedAcquisitionDoesNotWatchTheSharedCounter) {
  Options o;
  o.fencing = true;
  o.fencing_counters = Options::FencingCounters::kShared;
  MakeScriptless(3, o);
  Result out = TryAcquire("a");
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(transport_->AnswerOne(i));  // phase 1
    // Another resource's holder commits its token meanwhile.
    transport_->node(i).keys[":fence"] = {"7", std::nullopt, false};
  }
  transport_->AnswerEverything();
  ASSERT_TRUE(out->has_value());
  ASSERT_TRUE((*out)->ok()) << (*out)->status();
  EXPECT_EQ((**out)->fencing_token(), 8u) << "the counter as the transaction read it";
  // A key that appears under the watch is a refusal; a transaction that
  // aborted for any other reason is not "held by another client".
}

// Item 7. A cluster slot in migration: a multi-key call answered TRYAGAIN
// (its keys are split between the two masters for a moment) is tried again
// within the node's deadline.
TEST_F(NodeCallsTest, ATryAgainIsRetriedWithinTheNodesDeadline) {
  Options o;
  o.fencing = true;  // the lock key and its counter: a multi-key call
  o.key_prefix = "{locks}:";
  Make(1, o);
  o.nodes[0].host.clear();
  o.nodes[0].cluster.seeds = {{"fake0", 1}};
  MakeWith(1, o);
  for (int k = 0; k < 2; ++k) {
    transport_->node(0).refuse_next.push_back(
        "TRYAGAIN Multiple keys request during rehashing of slot");
  }
  Result out = TryAcquire("r");
  for (int step = 0; step < 20 && !out->has_value(); ++step) {
    transport_->AnswerEverything();
    transport_->Advance(absl::Milliseconds(2));
  }
  ASSERT_TRUE(out->has_value());
  EXPECT_TRUE((*out)->ok()) << (*out)->status();
  EXPECT_TRUE(HasKey(0, "{locks}:r"));
  EXPECT_THAT(transport_->node(0).log, Contains("TRYAGAIN"));
}

// Item 11. A release that can never be sent (the node forbids scripting
// since the lease was taken, and a reader's release has no script-free
// form) is not kept and retried forever.
TEST_F(NodeCallsTest, AReleaseThatCanNeverBeSentIsNotKept) {
  Options o;
  Make(3, o);
  MakeWith(3, o, std::make_shared<internal::ScriptingModes>(3));
  ReadWriteLock rw(client_.get(), "r");
  std::optional<absl::StatusOr<Lease>> reader;
  rw.AcquireSharedAsync(absl::Seconds(10), absl::ZeroDuration(), StopToken(),
                        [&](absl::StatusOr<Lease> l) { reader.emplace(std::move(l)); });
  transport_->AnswerEverything();
  ASSERT_TRUE(reader.has_value() && reader->ok()) << reader->status();
  modes_->SetScriptless(0, "NOPERM this user has no permissions to run the 'eval' command");
  std::optional<absl::Status> released = Release(**reader);
  ASSERT_TRUE(released.has_value());
  EXPECT_TRUE(released->ok()) << *released;
  EXPECT_EQ(Pending(0), 0u) << "kept to be sent again, which can never succeed";
  for (int i = 0; i < 5; ++i) RetryRound();
  EXPECT_EQ(Pending(0), 0u);
}

// ---- Release and extend by the server's own commands (issue 38) ----------------

// DELIFEQ and SET ... IFEQ where the node has them: the replies read as the
// scripts', the durability vote follows the extension, the announcement
// follows the release, a lost lease is not re-created, and a node that
// answers "unknown command" goes back to the scripts.
TEST_F(NodeCallsTest, ASingleLocksReleaseAndExtensionUseTheNodesCommands) {
  Options o = Durable();
  Make(3, o);
  auto commands = std::make_shared<internal::ServerCommands>(3);
  internal::NodeCommands has;
  has.known = has.delifeq = has.set_ifeq = true;
  for (int i = 0; i < 3; ++i) commands->Set(i, has);
  MakeWith(3, o, nullptr, commands);
  Lease lease = Acquired("r");
  std::optional<absl::StatusOr<Lease>> ext = Extend(lease);
  ASSERT_TRUE(ext.has_value() && ext->ok()) << (ext.has_value() ? ext->status() : absl::OkStatus());
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(transport_->node(i).log, ElementsAre("SET", "WAIT", "SET", "WAIT"))
        << "acquired, extended by SET IFEQ, each confirmed; node " << i;
  }
  std::optional<absl::Status> released = Release(**ext);
  ASSERT_TRUE(released.has_value() && released->ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(HasKey(i, "r")) << i;
    EXPECT_THAT(transport_->node(i).log, Contains("DELIFEQ"));
    EXPECT_THAT(transport_->node(i).log, Not(Contains("release-one"))) << "no script";
    EXPECT_THAT(transport_->node(i).published, ElementsAre("redlock:release:r"));
  }
  // The lease is gone: the extension finds nothing and creates nothing.
  ext = Extend(**ext);
  ASSERT_TRUE(ext.has_value());
  EXPECT_EQ(ext->status().code(), absl::StatusCode::kFailedPrecondition) << ext->status();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(HasKey(i, "r")) << i;
  // A node that no longer knows the command goes back to the scripts.
  Lease again = Acquired("r");
  transport_->node(0).refuse_next.push_back(
      "ERR unknown command 'DELIFEQ', with args beginning with:");
  released = Release(again);
  ASSERT_TRUE(released.has_value() && released->ok());
  EXPECT_FALSE(commands->Get(0).delifeq);
  EXPECT_TRUE(commands->Get(1).delifeq);
  for (int k = 0; k < 3 && HasKey(0, "r"); ++k) RetryRound();
  EXPECT_FALSE(HasKey(0, "r")) << "released again, by the script";
  EXPECT_THAT(transport_->node(0).log, Contains("release-one"));
}

}  // namespace
}  // namespace redlock
