// The per-node circuit breaker against real servers: a node slower than the
// deadline never delays a decision; a stalled one is back as soon as it
// answers; a silent one does not collect requests it can never need.

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "redlock/internal/engine.h"
#include "redlock/observer.h"
#include "testkit/fault_proxy.h"
#include "testkit/gtest_fleet.h"

namespace redlock {
namespace {

using testkit::Direction;
using testkit::FaultProxy;
using testkit::FaultSpec;
using testkit::Fleet;
using testkit::ProxyOptions;

// A fault proxy in front of node `i` of `fleet`, which `o` now reaches
// through it.
absl::StatusOr<std::unique_ptr<FaultProxy>> ProxyNode(Fleet& fleet, int i, Options& o) {
  ProxyOptions po;
  po.upstream_port = static_cast<uint16_t>(fleet.port(i));
  absl::StatusOr<std::unique_ptr<FaultProxy>> proxy = FaultProxy::Start(po);
  if (proxy.ok()) o.nodes[static_cast<size_t>(i)].port = (*proxy)->listen_port();
  return proxy;
}

// A fault proxy in front of each node of `fleet`, which `o` now reaches
// through them.
absl::StatusOr<std::vector<std::unique_ptr<FaultProxy>>> ProxyEveryNode(Fleet& fleet, Options& o) {
  std::vector<std::unique_ptr<FaultProxy>> proxies;
  for (int i = 0; i < static_cast<int>(o.nodes.size()); ++i) {
    absl::StatusOr<std::unique_ptr<FaultProxy>> p = ProxyNode(fleet, i, o);
    if (!p.ok()) return p.status();
    proxies.push_back(*std::move(p));
  }
  return proxies;
}

// EXISTS `key` on node `i` of `fleet`, polled until it is `want` or
// `timeout` passed (testkit::Eventually).
long long EventuallyExists(Fleet& fleet, int i, const std::string& key, long long want,
                           absl::Duration timeout = absl::Seconds(2)) {
  return testkit::Eventually(
      [&] {
        return fleet.Command(i, {"EXISTS", key})->integer;
      },
      want, timeout);
}

TEST(BreakerTest, ANodeSlowerThanNodeTimeoutNeverDelaysADecision) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 5});
  REDLOCK_ASSERT_OK(fleet.status());
  Options o;
  o.nodes = (*fleet)->endpoints();
  auto proxy = ProxyNode(**fleet, 4, o);
  REDLOCK_ASSERT_OK(proxy.status());
  o.node_timeout = absl::Milliseconds(500);
  auto c = Client::Create(o);
  REDLOCK_ASSERT_OK(c.status());
  // Every reply of node 4 arrives 800 ms late: it is as good as down. (Wide
  // margins: this checks that decisions do not wait for it, not speed.)
  REDLOCK_ASSERT_OK(
      (*proxy)->SetFault(Direction::kToClient, FaultSpec::Latency(absl::Milliseconds(800))));
  for (int i = 0; i < 30; ++i) {
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Lease> l = (*c)->TryAcquire(absl::StrCat("r", i), absl::Seconds(10));
    absl::Duration took = absl::FromChrono(std::chrono::steady_clock::now() - start);
    REDLOCK_ASSERT_OK(l.status());
    EXPECT_LT(took, absl::Milliseconds(250)) << "attempt " << i << " waited for the slow node";
    REDLOCK_ASSERT_OK((*c)->Release(*l));
  }
}

TEST(BreakerTest, ANodeThatStalledIsBackAsSoonAsItAnswers) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 5});
  REDLOCK_ASSERT_OK(fleet.status());
  Options o;
  o.nodes = (*fleet)->endpoints();
  o.quorum = 5;                                 // node 4 must take part
  o.breaker_probe_interval = absl::Seconds(5);  // recovery must not wait for the periodic probe
  auto c = Client::Create(o);
  REDLOCK_ASSERT_OK(c.status());
  REDLOCK_ASSERT_OK((*c)->TryAcquire("before", absl::Seconds(10)).status());
  REDLOCK_ASSERT_OK((*fleet)->Stop(4));  // a stall, as under CPU starvation
  EXPECT_FALSE((*c)->TryAcquire("during", absl::Seconds(10)).ok());
  ASSERT_TRUE((*c)->Health()[4].breaker_open);
  REDLOCK_ASSERT_OK((*fleet)->Continue(4));
  // Its late replies arrive: that triggers a probe at once.
  auto start = std::chrono::steady_clock::now();
  bool closed =
      testkit::Eventually([&] { return !(*c)->Health()[4].breaker_open; }, true, absl::Seconds(4));
  absl::Duration took = absl::FromChrono(std::chrono::steady_clock::now() - start);
  EXPECT_TRUE(closed);
  EXPECT_LT(took, absl::Seconds(1)) << "waited for the periodic probe";
  REDLOCK_EXPECT_OK((*c)->TryAcquire("after", absl::Seconds(10)).status());
}

TEST(BreakerTest, ASilentNodeCollectsNoReleasesForLeasesItNeverSaw) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 5});
  REDLOCK_ASSERT_OK(fleet.status());
  Options o;
  o.nodes = (*fleet)->endpoints();
  auto c = Client::Create(o);
  REDLOCK_ASSERT_OK(c.status());
  REDLOCK_ASSERT_OK((*fleet)->Stop(2));
  // The first attempts still send to node 2 (until its deadline opens the
  // breaker); their releases follow them there.
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<Lease> l = (*c)->TryAcquire(absl::StrCat("early", i), absl::Seconds(10));
    REDLOCK_ASSERT_OK(l.status());
    REDLOCK_ASSERT_OK((*c)->Release(*l));
  }
  bool open = testkit::Eventually([&] { return (*c)->Health()[2].breaker_open; }, true);
  ASSERT_TRUE(open);
  size_t before = (*c)->Health()[2].in_flight;
  // Long enough for the early releases, unanswered, to be sent again a few
  // times (every max(breaker_probe_interval, node_timeout)): those sent again
  // must not queue on the silent node either (a refused one used to forget
  // where its first copy waits, and the next round queued it behind its SET).
  // The largest count seen: the node's connection may be dropped meanwhile.
  size_t most = before;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(900);
  for (int i = 0; i < 20000 && (i < 300 || std::chrono::steady_clock::now() < until); ++i) {
    absl::StatusOr<Lease> l = (*c)->TryAcquire(absl::StrCat("late", i), absl::Seconds(10));
    REDLOCK_ASSERT_OK(l.status());
    REDLOCK_ASSERT_OK((*c)->Release(*l));
    most = std::max(most, (*c)->Health()[2].in_flight);
  }
  EXPECT_LE(most, before + 2)
      << "releases were queued for node 2 while it was down (its breaker open)";
  REDLOCK_ASSERT_OK((*fleet)->Continue(2));
}

// A node whose breaker opened after the acquisition but before an extension
// holds the lease's key (the extension never reached it). Releasing the
// extended lease (what Extend and Renewal::lease() return) must still go
// there, as releasing the original lease does.
TEST(BreakerTest, ReleasingAnExtendedLeaseReachesANodeDownSinceBeforeTheExtension) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 5});
  REDLOCK_ASSERT_OK(fleet.status());
  Options o;
  o.nodes = (*fleet)->endpoints();
  o.node_timeout = absl::Milliseconds(100);
  auto c = Client::Create(o);
  REDLOCK_ASSERT_OK(c.status());
  for (bool renewed : {false, true}) {
    SCOPED_TRACE(renewed ? "the renewal's lease" : "the lease Extend returned");
    const std::string key = renewed ? "renewed" : "extended";
    absl::StatusOr<Lease> first = (*c)->TryAcquire(key, absl::Seconds(30));
    REDLOCK_ASSERT_OK(first.status());
    ASSERT_EQ((*fleet)->Command(4, {"GET", key})->str, first->token());
    // Node 4 stalls; a request to it times out and opens its breaker, its
    // connection staying up.
    REDLOCK_ASSERT_OK((*fleet)->Stop(4));
    EXPECT_FALSE((*c)->Extend(Lease::ForToken("other", "x"), absl::Seconds(1)).ok());
    ASSERT_TRUE(testkit::Eventually([&] { return (*c)->Health()[4].breaker_open; }, true));
    Lease later;
    std::unique_ptr<Renewal> renewal;
    if (!renewed) {
      absl::StatusOr<Lease> extended = (*c)->Extend(*first, absl::Seconds(30));
      REDLOCK_ASSERT_OK(extended.status());
      later = *extended;
    } else {
      RenewOptions ro;
      ro.interval_fraction = 0.01;  // the first extension at once
      auto r = (*c)->AutoRenew(*first, ro, [](absl::Status) {});
      REDLOCK_ASSERT_OK(r.status());
      renewal = *std::move(r);
      ASSERT_TRUE(testkit::Eventually([&] { return renewal->renewals() > 0; }, true));
      later = renewal->lease();
    }
    ASSERT_GT(later.acquired_at(), first->acquired_at());
    REDLOCK_ASSERT_OK((*c)->Release(later));
    // The release waits on node 4's connection behind the stall.
    REDLOCK_ASSERT_OK((*fleet)->Continue(4));
    EXPECT_EQ(EventuallyExists(**fleet, 4, key, 0, absl::Seconds(5)), 0)
        << "the key was left on node 4 for its ttl (pttl "
        << (*fleet)->Command(4, {"PTTL", key})->integer << " ms)";
    ASSERT_FALSE(testkit::Eventually([&] { return (*c)->Health()[4].breaker_open; }, false,
                                     absl::Seconds(5)));
  }
}

TEST(BreakerTest, RepliesLostInTransitNeverCreditAnotherCommand) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 3});
  REDLOCK_ASSERT_OK(fleet.status());
  Options o;
  o.nodes = (*fleet)->endpoints();
  auto proxy = ProxyNode(**fleet, 2, o);
  REDLOCK_ASSERT_OK(proxy.status());
  o.quorum = 3;  // node 2's vote decides
  o.breaker_probe_interval = absl::Milliseconds(20);
  auto c = Client::Create(o);
  REDLOCK_ASSERT_OK(c.status());
  // Someone else holds "victim" on node 2: no acquisition of it can succeed.
  REDLOCK_ASSERT_OK((*fleet)->Command(2, {"SET", "victim", "foreign", "PX", "60000"}).status());
  // Node 2 executes everything, but its replies vanish (a middlebox dropping
  // bytes without resetting the stream). The connection's replies are now
  // behind its requests for good.
  REDLOCK_ASSERT_OK((*proxy)->SetFault(Direction::kToClient, FaultSpec::BlackHole()));
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE((*c)->TryAcquire(absl::StrCat("lost", i), absl::Seconds(10)).ok());
  }
  (*proxy)->ClearFaults();
  int fresh_ok = 0;
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<Lease> fresh = (*c)->TryAcquire(absl::StrCat("fresh", i), absl::Seconds(10));
    if (fresh.ok()) {
      ++fresh_ok;
      (void)(*c)->Release(*fresh);
    }
    absl::StatusOr<Lease> victim = (*c)->TryAcquire("victim", absl::Seconds(10));
    ASSERT_FALSE(victim.ok()) << "round " << i
                              << ": node 2 was credited with another command's reply";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(fresh_ok, 100) << "node 2 never came back into use after the fault";
}

// Replies lost on a connection that stays open (a middlebox dropping bytes
// without resetting the stream): the requests they answered expire, and
// the next reply would be read as the oldest expired request's, every later
// one as an earlier request's, for as long as the connection lives. A PING
// marker sent after the missed deadline (or the breaker's probe) says,
// when its nonce comes back, that the replies ahead of it were lost: the
// queue is back in step on the same connection, without dropping it and
// what is in flight on it (the simulator's hour run, seed 20264397: where
// the node never fell silent long enough for a probe, no grant came for
// the rest of the run).
class Disconnections : public Observer {
 public:
  void OnNode(const NodeEvent& e) override {
    if (e.kind == NodeEvent::Kind::kDisconnected) {
      std::lock_guard<std::mutex> lock(mu_);
      why_.push_back(e.detail);
    }
  }
  std::vector<std::string> why() {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> why_;
};

TEST(BreakerTest, ALostReplyOnAConnectionThatStaysOpenLeavesItInStep) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 1});
  REDLOCK_ASSERT_OK(fleet.status());
  Options o;
  o.nodes = (*fleet)->endpoints();
  auto proxy = ProxyNode(**fleet, 0, o);
  REDLOCK_ASSERT_OK(proxy.status());
  o.node_timeout = absl::Milliseconds(200);
  o.breaker_probe_interval = absl::Milliseconds(50);
  o.max_attempts = 1;
  auto events = std::make_shared<Disconnections>();
  o.observer = events;
  auto c = Client::Create(o);
  REDLOCK_ASSERT_OK(c.status());
  REDLOCK_ASSERT_OK((*c)->TryAcquire("before", absl::Seconds(10)).status());
  // One request's reply vanishes; the connection stays open.
  REDLOCK_ASSERT_OK((*proxy)->SetFault(Direction::kToClient, FaultSpec::BlackHole()));
  EXPECT_FALSE((*c)->TryAcquire("lost", absl::Seconds(10)).ok());
  (*proxy)->ClearFaults();
  int ok = 0;
  std::string last;
  for (int i = 0; i < 40 && ok < 20; ++i) {
    absl::StatusOr<Lease> l = (*c)->TryAcquire(absl::StrCat("after", i), absl::Seconds(10));
    if (l.ok()) {
      ++ok;
      // In step: the lease is this call's (its key holds its token).
      EXPECT_EQ((*fleet)->Command(0, {"GET", absl::StrCat("after", i)})->str, l->token());
      REDLOCK_EXPECT_OK((*c)->Release(*l));
    } else {
      last = l.status().ToString();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a probe's interval
    }
  }
  EXPECT_EQ(ok, 20) << "last failure: " << last;
  // The connection was kept: nothing in flight on it was failed for this.
  EXPECT_THAT(events->why(), ::testing::IsEmpty());
}

// ---- Cleanup releases are never silently dropped (issue 25 item 6) ------------------

// The keys under `prefix` on node `i` of `fleet`.
int64_t KeysWithPrefix(Fleet& fleet, int i, const std::string& prefix) {
  absl::StatusOr<testkit::RedisValue> keys = fleet.Command(i, {"KEYS", prefix + "*"});
  return keys.ok() ? static_cast<int64_t>(keys->elements.size()) : -1;
}

TEST(CleanupTest, ReleasesOverTheInFlightCapStillFollowTheirSets) {
  // Node 0 is stopped: every SET sent to it waits in its socket, and so do
  // the releases of the leases that SET was part of. The in-flight cap is
  // reached within a few acquisitions; a release refused then would leave
  // the key its SET sets once the node resumes.
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 3});
  REDLOCK_ASSERT_OK(fleet.status());
  Options o;
  o.nodes = (*fleet)->endpoints();
  o.node_timeout = absl::Seconds(2);  // node 0's breaker stays closed: the cap refuses
  o.max_in_flight_per_node = 16;
  o.key_prefix = "cap/";
  auto c = Client::Create(o);
  REDLOCK_ASSERT_OK(c.status());
  REDLOCK_ASSERT_OK((*fleet)->Stop(0));
  // 16 acquisitions at once: their SETs fill node 0's queue (nodes 1 and 2
  // grant), then every lease is released.
  constexpr int kLeases = 16;
  std::vector<std::promise<absl::StatusOr<Lease>>> acquired(kLeases);
  for (int i = 0; i < kLeases; ++i) {
    (*c)->TryAcquireAsync(absl::StrCat("k", i), absl::Seconds(60),
                          [&acquired, i](absl::StatusOr<Lease> l) {
                            acquired[static_cast<size_t>(i)].set_value(std::move(l));
                          });
  }
  for (auto& a : acquired) {
    absl::StatusOr<Lease> l = a.get_future().get();
    REDLOCK_ASSERT_OK(l.status());
    REDLOCK_EXPECT_OK((*c)->Release(*l));  // at nodes 1 and 2
  }
  REDLOCK_ASSERT_OK((*fleet)->Continue(0));
  EXPECT_EQ(testkit::Eventually([&] { return KeysWithPrefix(**fleet, 0, "cap/"); }, int64_t{0},
                                absl::Seconds(5)),
            0)
      << "keys left on node 0 for their 60 s ttl";
}

TEST(CleanupTest, AReleaseIsSentAgainAfterTheConnectionDroppedBetweenItAndItsSet) {
  // Node 0 takes an attempt's SET; its connection then drops before the
  // attempt fails (nodes 1 and 2 refuse, late): the release cannot follow
  // the SET on its connection and must go on the next one.
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 3});
  REDLOCK_ASSERT_OK(fleet.status());
  Options o;
  o.nodes = (*fleet)->endpoints();
  auto proxied = ProxyEveryNode(**fleet, o);
  REDLOCK_ASSERT_OK(proxied.status());
  std::vector<std::unique_ptr<FaultProxy>>& proxies = *proxied;
  o.node_timeout = absl::Seconds(3);
  o.max_attempts = 1;
  auto c = Client::Create(o);
  REDLOCK_ASSERT_OK(c.status());
  for (int i : {1, 2}) {
    REDLOCK_ASSERT_OK((*fleet)->Command(i, {"SET", "dropped", "theirs", "PX", "60000"}).status());
    REDLOCK_ASSERT_OK(proxies[static_cast<size_t>(i)]->SetFault(
        Direction::kToClient, FaultSpec::Latency(absl::Milliseconds(800))));
  }
  std::future<absl::StatusOr<Lease>> attempt = std::async(
      std::launch::async, [&] { return (*c)->TryAcquire("dropped", absl::Seconds(60)); });
  ASSERT_EQ(EventuallyExists(**fleet, 0, "dropped", 1), 1) << "node 0 ran the SET";
  proxies[0]->Down();  // before nodes 1 and 2 refuse
  absl::StatusOr<Lease> lease = attempt.get();
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kAborted) << lease.status();
  REDLOCK_ASSERT_OK(proxies[0]->Up());
  EXPECT_EQ(EventuallyExists(**fleet, 0, "dropped", 0, absl::Seconds(5)), 0)
      << "the failed attempt's key was left on node 0 for its ttl";
}

TEST(CleanupTest, DestroyingTheClientReleasesTheAttemptsInFlight) {
  // The client is destroyed while an acquisition waits for its replies (the
  // nodes answer 300 ms late). Its SETs run on the nodes; their releases
  // must follow them before the connections close.
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 3});
  REDLOCK_ASSERT_OK(fleet.status());
  Options o;
  o.nodes = (*fleet)->endpoints();
  auto proxies = ProxyEveryNode(**fleet, o);
  REDLOCK_ASSERT_OK(proxies.status());
  for (std::unique_ptr<FaultProxy>& p : *proxies) {
    REDLOCK_ASSERT_OK(
        p->SetFault(Direction::kToClient, FaultSpec::Latency(absl::Milliseconds(300))));
  }
  o.node_timeout = absl::Seconds(2);
  auto c = Client::Create(o);
  REDLOCK_ASSERT_OK(c.status());
  std::promise<absl::Status> done;
  (*c)->TryAcquireAsync("destroyed", absl::Seconds(60),
                        [&](absl::StatusOr<Lease> l) { done.set_value(l.status()); });
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(EventuallyExists(**fleet, i, "destroyed", 1), 1) << "node " << i << " ran the SET";
  }
  c->reset();
  EXPECT_EQ(done.get_future().get().code(), absl::StatusCode::kCancelled);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(EventuallyExists(**fleet, i, "destroyed", 0, absl::Seconds(5)), 0)
        << "node " << i << " kept the key of an attempt cancelled by the destruction";
  }
}

// Resident memory of this process, from /proc/self/status (-1 if unknown).
int64_t ResidentKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Whether this process's memory is its own to measure: a sanitizer keeps
// freed memory in quarantine, which resident memory then counts.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kPlainHeap = false;
#else
constexpr bool kPlainHeap = true;
#endif

TEST(BreakerTest, SubscriptionChangesForAStoppedNodeDoNotPileUp) {
  REDLOCK_REQUIRE_REDIS();
  if (!kPlainHeap) GTEST_SKIP() << "resident memory includes the sanitizer's quarantine";
  auto fleet = Fleet::Start({.nodes = 2});
  REDLOCK_ASSERT_OK(fleet.status());
  internal::Engine::Config config;
  config.nodes = (*fleet)->endpoints();
  auto engine = internal::Engine::Start(config);
  REDLOCK_ASSERT_OK(engine.status());
  (*engine)->WaitForFirstConnections(absl::Seconds(5));
  (*engine)->SetMessageHandler([](int, const std::string&, const std::string&) {});
  (*engine)->Subscribe({"warmup"});
  auto subscribers = [&] {
    absl::StatusOr<testkit::RedisValue> v = (*fleet)->Command(0, {"PUBSUB", "NUMSUB", "warmup"});
    return v.ok() && v->elements.size() == 2 ? v->elements[1].integer : -1;
  };
  ASSERT_EQ(testkit::Eventually(subscribers, int64_t{1}, absl::Seconds(5)), 1);
  // Waits until the poller has run every subscription change posted so far:
  // a timer set after an earlier one fired runs in a later turn.
  auto drain = [&] {
    for (int k = 0; k < 2; ++k) {
      std::promise<void> fired;
      (*engine)->RunAfter(absl::ZeroDuration(), [&fired] { fired.set_value(); });
      fired.get_future().wait();
    }
  };
  REDLOCK_ASSERT_OK((*fleet)->Stop(0));
  // Waiters come and go on long resource names while node 0 reads nothing:
  // 16000 SUBSCRIBE/UNSUBSCRIBE pairs of 4 KB channels, 130 MB of commands,
  // beyond what the kernel buffers hold.
  const std::string pad(4000, 'c');
  const int64_t before = ResidentKb();
  for (int batch = 0; batch < 160; ++batch) {
    for (int i = 0; i < 100; ++i) {
      std::string channel = absl::StrCat(pad, batch, "/", i);
      (*engine)->Subscribe({channel});
      (*engine)->Unsubscribe({channel});
    }
    drain();
  }
  const int64_t grown_kb = ResidentKb() - before;
  EXPECT_LT(grown_kb, 32 * 1024) << "the subscriber connection's backlog grew with every change";
  REDLOCK_ASSERT_OK((*fleet)->Continue(0));
  // Once node 0 reads again, the subscriber is back (on a fresh connection
  // if it was replaced) with the channels that are still wanted.
  EXPECT_EQ(testkit::Eventually(subscribers, int64_t{1}, absl::Seconds(10)), 1);
}

}  // namespace
}  // namespace redlock
