// The durability vote (Options::durability) against real replicated nodes:
// Debian's redis-server as masters and asynchronous replicas, and Debian's
// redis-sentinel failing a master over. Clients reach each node through a
// fault proxy that the test re-points at the promoted replica, as a
// Sentinel-aware client follows the master.

#include "testkit/replication.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "multilock/multi_lock.h"
#include "redlock/client.h"
#include "testkit/fault_proxy.h"
#include "testkit/gtest_fleet.h"
#include "tests/integration/sentinel_helpers.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::Fleet;
using testkit::RedisValue;
using testkit::Replicas;
using testkit::Sentinel;

// The replica's acknowledgement is a round trip between two processes on
// a shared machine: where a test needs a grant, it retries (bounded) a
// refusal for lack of one, instead of relying on timing.
absl::StatusOr<Lease> UntilGranted(Client& client, const std::string& resource = "r") {
  absl::StatusOr<Lease> r = absl::UnknownError("not tried");
  for (int i = 0; i < 10; ++i) {
    r = client.TryAcquire(resource, absl::Seconds(10));
    if (!absl::IsUnavailable(r.status())) break;
  }
  return r;
}

// The options of these tests: generous timeouts (the replicas' acknowledgement
// is a round trip between processes on a shared machine) and a key prefix
// per test.
Options DurableOptions(std::vector<Endpoint> nodes, int k) {
  Options o;
  o.nodes = std::move(nodes);
  o.node_timeout = absl::Seconds(2);
  o.durability.replicas = k;
  o.durability.timeout = absl::Milliseconds(500);
  o.key_prefix = absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
  return o;
}

// One node: a master with one replica.
class DurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    masters_ = ValueOrFail(Fleet::Start({.nodes = 1}));
    ASSERT_NE(masters_, nullptr);
    replicas_ = ValueOrFail(Replicas::Start({.upstreams = {masters_->address(0)}}));
    ASSERT_NE(replicas_, nullptr);
  }

  Options MakeOptions(int k) { return DurableOptions(masters_->endpoints(), k); }
  std::unique_ptr<Client> MakeClient(Options o) {
    return ValueOrFail(Client::Create(std::move(o)));
  }
  std::string OnReplica(const std::string& key) {
    return Get(replicas_->fleet().Command(0, {"GET", key}));
  }
  std::string OnMaster(const std::string& key) { return Get(masters_->Command(0, {"GET", key})); }

  std::unique_ptr<Fleet> masters_;
  std::unique_ptr<Replicas> replicas_;
};

TEST_F(DurabilityTest, RefusesAGrantWhileTheReplicaIsStoppedAndAcceptsWhenItIsBack) {
  Options o = MakeOptions(1);
  const std::string key = o.key_prefix + "r";
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  REDLOCK_ASSERT_OK(replicas_->fleet().Stop(0));
  absl::StatusOr<Lease> refused = client->TryAcquire("r", absl::Seconds(10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_THAT(
      std::string(refused.status().message()),
      HasSubstr("granted, but only 0 replicas of 1 confirmed the write within 500ms (WAIT)"));
  EXPECT_EQ(testkit::Eventually([&] { return OnMaster(key); }, std::string()), "")
      << "the unconfirmed grant's key is removed from the master";

  REDLOCK_ASSERT_OK(replicas_->fleet().Continue(0));
  REDLOCK_ASSERT_OK(replicas_->WaitSynced(0, 0, absl::Seconds(10)));
  absl::StatusOr<Lease> lease = UntilGranted(*client);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(OnReplica(key), lease->token()) << "confirmed: the replica has it";
  REDLOCK_EXPECT_OK(client->Release(*lease));
}

TEST_F(DurabilityTest, WithoutTheVoteTheGrantDoesNotWaitForTheReplica) {
  auto client = MakeClient(MakeOptions(0));
  ASSERT_NE(client, nullptr);
  REDLOCK_ASSERT_OK(replicas_->fleet().Stop(0));
  absl::StatusOr<Lease> lease = client->TryAcquire("r", absl::Seconds(10));
  EXPECT_TRUE(lease.ok()) << lease.status();
  REDLOCK_ASSERT_OK(replicas_->fleet().Continue(0));
}

TEST_F(DurabilityTest, ExtendCountsOnlyWhenReplicated) {
  auto client = MakeClient(MakeOptions(1));
  ASSERT_NE(client, nullptr);
  absl::StatusOr<Lease> lease = UntilGranted(*client);
  ASSERT_TRUE(lease.ok()) << lease.status();
  REDLOCK_ASSERT_OK(replicas_->fleet().Stop(0));
  absl::StatusOr<Lease> ext = client->Extend(*lease, absl::Seconds(10));
  EXPECT_EQ(ext.status().code(), absl::StatusCode::kUnavailable) << ext.status();
  REDLOCK_ASSERT_OK(replicas_->fleet().Continue(0));
  REDLOCK_ASSERT_OK(replicas_->WaitSynced(0, 0, absl::Seconds(10)));
  for (int i = 0; i < 10; ++i) {
    ext = client->Extend(*lease, absl::Seconds(10));
    if (!absl::IsUnavailable(ext.status())) break;
  }
  EXPECT_TRUE(ext.ok()) << ext.status();
}

TEST_F(DurabilityTest, FencingCounterIsOnTheReplicaWhenTheLeaseIsGranted) {
  Options o = MakeOptions(1);
  o.fencing = true;
  const std::string counter = o.key_prefix + "r:fence";
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Lease> lease = UntilGranted(*client);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(OnReplica(counter), std::to_string(lease->fencing_token()));
    REDLOCK_ASSERT_OK(client->Release(*lease));
  }
  REDLOCK_ASSERT_OK(replicas_->fleet().Stop(0));
  absl::StatusOr<Lease> refused = client->TryAcquire("r", absl::Seconds(10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("(fencing round)"));
  REDLOCK_ASSERT_OK(replicas_->fleet().Continue(0));
}

TEST_F(DurabilityTest, FsyncNeedsAServerThatKnowsWaitAof) {
  Options o = MakeOptions(1);
  o.durability.fsync = true;
  absl::StatusOr<RedisValue> info = masters_->Command(0, {"COMMAND", "INFO", "WAITAOF"});
  ASSERT_TRUE(info.ok()) << info.status();
  const bool known = info->elements.size() == 1 && !info->elements[0].is_nil();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(o);
  if (known) {
    EXPECT_TRUE(client.ok()) << client.status();  // Redis 7.2 and later
    return;
  }
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition) << client.status();
  EXPECT_THAT(std::string(client.status().message()),
              HasSubstr(absl::StrCat("durability.fsync needs WAITAOF (Redis 7.2 or later): ",
                                     masters_->address(0), " does not know it")));
}

// ---- A confirmation counts only for the write it follows (issue 25 item 1) ------------
//
// After SCRIPT FLUSH the node answers the write's EVALSHA with NOSCRIPT. The
// WAIT pipelined behind that write then has nothing new to wait for (the
// replica acknowledged every earlier write before it was stopped) and
// answers at once: it must not be taken as the confirmation of a write that
// runs after it, if ever.

class ScriptFlushTest : public DurabilityTest {
 protected:
  // The master's replication offset and what the replica acknowledged.
  std::pair<int64_t, int64_t> Offsets() {
    absl::StatusOr<RedisValue> info = masters_->Command(0, {"INFO", "replication"});
    if (!info.ok()) return {-1, -2};
    int64_t master = -1, acked = -2;
    for (absl::string_view line : absl::StrSplit(info->str, "\r\n")) {
      if (absl::ConsumePrefix(&line, "master_repl_offset:")) {
        (void)absl::SimpleAtoi(line, &master);
      } else if (absl::ConsumePrefix(&line, "slave0:")) {
        for (absl::string_view field : absl::StrSplit(line, ',')) {
          if (absl::ConsumePrefix(&field, "offset=")) (void)absl::SimpleAtoi(field, &acked);
        }
      }
    }
    return {master, acked};
  }
  // The replica has acknowledged the master's whole replication stream: a
  // WAIT after any command then has nothing to wait for. (Redis counts from
  // the master's offset after the client's latest command, whatever it
  // was; the replica acknowledges the offset once a second.)
  void ReplicaAcknowledgedEverything() {
    REDLOCK_ASSERT_OK(
        masters_->Command(0, {"CONFIG", "SET", "repl-ping-replica-period", "3600"}).status());
    REDLOCK_ASSERT_OK(masters_->Command(0, {"SET", "sync", "1"}).status());
    absl::StatusOr<RedisValue> acked = masters_->Command(0, {"WAIT", "1", "5000"});
    ASSERT_TRUE(acked.ok()) << acked.status();
    ASSERT_EQ(acked->integer, 1) << "the replica did not acknowledge";
    ASSERT_TRUE(testkit::Eventually(
        [&] {
          auto [master, replica] = Offsets();
          return master == replica;
        },
        true, absl::Seconds(5)))
        << "the replica did not acknowledge the whole stream";
  }
  // The master forgets the scripts, the replica acknowledges everything and
  // stops.
  void FlushScriptsAndStopReplica() {
    REDLOCK_ASSERT_OK(masters_->Command(0, {"SCRIPT", "FLUSH"}).status());
    ReplicaAcknowledgedEverything();
    REDLOCK_ASSERT_OK(replicas_->fleet().Stop(0));
  }
  void TearDown() override {
    if (replicas_ != nullptr) (void)replicas_->fleet().Continue(0);
  }
};

TEST_F(ScriptFlushTest, ExtendIsNotConfirmedByAWaitThatRanBeforeIt) {
  auto client = MakeClient(MakeOptions(1));
  ASSERT_NE(client, nullptr);
  absl::StatusOr<Lease> lease = UntilGranted(*client);
  ASSERT_TRUE(lease.ok()) << lease.status();
  FlushScriptsAndStopReplica();
  absl::StatusOr<Lease> ext = client->Extend(*lease, absl::Seconds(20));
  EXPECT_FALSE(ext.ok()) << "the replica is stopped: nothing can confirm the extension";
  EXPECT_EQ(ext.status().code(), absl::StatusCode::kUnavailable) << ext.status();
}

TEST_F(ScriptFlushTest, ASetAcquisitionIsNotConfirmedByAWaitThatRanBeforeIt) {
  Options o = MakeOptions(1);
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  FlushScriptsAndStopReplica();
  MultiLock multi(client.get());
  absl::StatusOr<MultiLease> set = multi.TryAcquire({"a", "b"}, absl::Seconds(10));
  EXPECT_FALSE(set.ok()) << "the replica is stopped: nothing can confirm the grant";
  EXPECT_EQ(set.status().code(), absl::StatusCode::kUnavailable) << set.status();
  for (const char* r : {"a", "b"}) {
    EXPECT_EQ(testkit::Eventually([&] { return OnMaster(o.key_prefix + r); }, std::string()), "")
        << "an unconfirmed grant's key is removed: " << r;
  }
}

TEST_F(ScriptFlushTest, AFencingCommitIsNotConfirmedByAWaitThatRanBeforeIt) {
  // The client reaches the master through a proxy that holds round 1's
  // reply while the test stops the replica and flushes the scripts: the
  // commit then gets NOSCRIPT.
  testkit::ProxyOptions po;
  po.upstream_port = static_cast<uint16_t>(masters_->port(0));
  auto proxy = testkit::FaultProxy::Start(po);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  Endpoint front;
  front.host = "127.0.0.1";
  front.port = (*proxy)->listen_port();
  Options o = DurableOptions({front}, 1);
  o.fencing = true;
  o.node_timeout = absl::Seconds(5);
  o.max_attempts = 1;
  const std::string key = o.key_prefix + "r";
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  REDLOCK_ASSERT_OK((*proxy)->SetFault(testkit::Direction::kToClient, testkit::FaultSpec::Hold()));
  std::future<absl::StatusOr<Lease>> acquired =
      std::async(std::launch::async, [&] { return client->TryAcquire("r", absl::Seconds(20)); });
  ASSERT_TRUE(testkit::Eventually([&] { return !OnMaster(key).empty(); }, true, absl::Seconds(3)))
      << "round 1 ran on the master";
  FlushScriptsAndStopReplica();
  (*proxy)->ClearFaults();
  absl::StatusOr<Lease> lease = acquired.get();
  EXPECT_FALSE(lease.ok())
      << "the replica is stopped: nothing can confirm the commit; fencing token "
      << (lease.ok() ? lease->fencing_token() : 0);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kUnavailable) << lease.status();
}

// ---- A lagging replica costs its node, not the client (issue 25 item 5) --------------
//
// Three masters with a replica each; node 0's replica is stopped while many
// callers acquire and release. Node 0 cannot confirm anything: each WAIT
// there holds the node's one connection for durability.timeout. Measured:
// node 0's queue (Health().in_flight) during the run and at its end, the
// callers' latency (decided by the other two nodes), and the keys left on
// the masters once everything is answered.

class LaggingReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    masters_ = ValueOrFail(Fleet::Start({.nodes = 3}));
    ASSERT_NE(masters_, nullptr);
    std::vector<std::string> upstreams;
    for (int i = 0; i < 3; ++i) upstreams.push_back(masters_->address(i));
    replicas_ = ValueOrFail(Replicas::Start({.upstreams = upstreams}));
    ASSERT_NE(replicas_, nullptr);
  }
  void TearDown() override {
    if (replicas_ != nullptr) (void)replicas_->fleet().Continue(0);
  }
  size_t KeysOn(int master, const std::string& prefix) {
    absl::StatusOr<RedisValue> keys = masters_->Command(master, {"KEYS", prefix + "*"});
    return keys.ok() ? keys->elements.size() : 9999;
  }

  std::unique_ptr<Fleet> masters_;
  std::unique_ptr<Replicas> replicas_;
};

TEST_F(LaggingReplicaTest, ItsNodeDoesNotQueueAndLeavesNoKey) {
  Options o = DurableOptions(masters_->endpoints(), 1);
  o.node_timeout = absl::Milliseconds(200);
  o.durability.timeout = absl::Milliseconds(50);
  auto created = Client::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<Client> client = *std::move(created);
  REDLOCK_ASSERT_OK(replicas_->fleet().Stop(0));

  constexpr int kCallers = 32;
  const absl::Duration kRun = absl::Seconds(3);
  std::atomic<bool> running{true};
  std::atomic<size_t> max_depth{0};
  std::atomic<uint64_t> depth_sum{0}, samples{0};
  std::thread monitor([&] {
    for (int i = 0; i < 100000 && running.load(); ++i) {
      const size_t depth = client->Health()[0].in_flight;
      size_t seen = max_depth.load();
      while (depth > seen && !max_depth.compare_exchange_weak(seen, depth)) {
      }
      depth_sum += depth;
      ++samples;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::mutex mu;
  std::vector<double> latencies_ms;
  int granted = 0, refused = 0, released = 0;
  std::string first_refusal;
  std::vector<std::thread> callers;
  const absl::Time end = absl::Now() + kRun;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int n = 0; n < 100000 && absl::Now() < end; ++n) {
        const absl::Time start = absl::Now();
        absl::StatusOr<Lease> lease =
            client->TryAcquire(absl::StrCat("c", c, "/", n), absl::Seconds(30));
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
        bool ok = lease.ok() && client->Release(*lease).ok();
        std::lock_guard<std::mutex> lock(mu);
        latencies_ms.push_back(ms);
        if (!lease.ok() && first_refusal.empty()) first_refusal = lease.status().ToString();
        (lease.ok() ? granted : refused)++;
        released += ok;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  const size_t depth_at_end = client->Health()[0].in_flight;
  running = false;
  monitor.join();
  // Node 0 answers everything it holds once its replica is back.
  REDLOCK_ASSERT_OK(replicas_->fleet().Continue(0));
  const absl::Time drain_start = absl::Now();
  EXPECT_EQ(testkit::Eventually([&] { return client->Health()[0].in_flight; }, size_t{0},
                                absl::Seconds(120)),
            0u);
  const absl::Duration drain = absl::Now() - drain_start;
  std::vector<size_t> left;
  for (int i = 0; i < 3; ++i) {
    left.push_back(
        testkit::Eventually([&] { return KeysOn(i, o.key_prefix); }, size_t{0}, absl::Seconds(5)));
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto pct = [&](double p) {
    return latencies_ms.empty() ? 0.0
                                : latencies_ms[static_cast<size_t>(p * (latencies_ms.size() - 1))];
  };
  const std::string figures = absl::StrCat(
      "callers ", kCallers, ", run ", absl::FormatDuration(kRun), ": ", granted, " granted (",
      released, " released), ", refused, " refused; acquire latency p50 ", pct(0.5), " ms, p99 ",
      pct(0.99), " ms; node 0 queue: max ", max_depth.load(), ", mean ",
      samples.load() == 0 ? 0 : depth_sum.load() / samples.load(), ", at the end ", depth_at_end,
      ", drained in ", absl::FormatDuration(drain),
      " once the replica was back; keys left: ", left[0], " on node 0, ", left[1], " on node 1, ",
      left[2], " on node 2", refused > 0 ? absl::StrCat("; first refusal: ", first_refusal) : "");
  std::cout << "[ figures  ] " << figures << "\n";
  RecordProperty("figures", figures);
  EXPECT_GT(granted, 0) << "the other two nodes grant";
  EXPECT_LE(depth_at_end, size_t{kCallers} * 4) << "node 0's queue outgrew the callers";
  EXPECT_LT(max_depth.load(), o.max_in_flight_per_node) << "node 0's queue reached its cap";
  EXPECT_EQ(left, (std::vector<size_t>{0, 0, 0})) << "orphan keys";
}

// ---- A Sentinel failover -----------------------------------------------------------

// One node: a master with one replica, watched by a Sentinel. The client
// reaches the node through `front_`, re-pointed at whatever Sentinel says the
// master is; the replica replicates through `link_`, which the test can hold
// (replication delayed) and cut.
class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_SENTINEL();
    masters_ = ValueOrFail(Fleet::Start({.nodes = 1}));
    ASSERT_NE(masters_, nullptr);
    front_ = StartProxy();
    link_ = StartProxy();
    ASSERT_NE(front_, nullptr);
    ASSERT_NE(link_, nullptr);
    replicas_ = ValueOrFail(Replicas::Start({.upstreams = {link_->listen_address()}}));
    ASSERT_NE(replicas_, nullptr);
    sentinel_ = ValueOrFail(Sentinel::Start({.masters = {{"n0", masters_->address(0)}}}));
    ASSERT_NE(sentinel_, nullptr);
    REDLOCK_ASSERT_OK(sentinel_->WaitReplicas("n0", 1, absl::Seconds(15)));
  }

  std::unique_ptr<testkit::FaultProxy> StartProxy() {
    testkit::ProxyOptions po;
    po.upstream_port = static_cast<uint16_t>(masters_->port(0));
    return ValueOrFail(testkit::FaultProxy::Start(po));
  }

  Options MakeOptions(int k) {
    Endpoint ep;
    ep.host = "127.0.0.1";
    ep.port = front_->listen_port();
    return DurableOptions({ep}, k);
  }

  // The master dies with the replication link cut (whatever it held is lost),
  // Sentinel promotes the replica, and the client's proxy follows.
  void FailOver() {
    link_->Down();
    REDLOCK_ASSERT_OK(masters_->Kill(0));
    absl::StatusOr<std::string> now =
        sentinel_->AwaitFailover("n0", masters_->address(0), absl::Seconds(20));
    ASSERT_TRUE(now.ok()) << now.status();
    ASSERT_EQ(*now, replicas_->address(0, 0));
    absl::StatusOr<Endpoint> ep = testkit::EndpointOf(*now);
    ASSERT_TRUE(ep.ok());
    REDLOCK_ASSERT_OK(front_->Retarget(ep->host, static_cast<uint16_t>(ep->port)));
  }

  // A client of `o` in `holder`, and from now on the replica hears nothing
  // of the master (the replication stream held).
  void HolderWithReplicationHeld(const Options& o, std::unique_ptr<Client>& holder) {
    absl::StatusOr<std::unique_ptr<Client>> created = Client::Create(o);
    ASSERT_TRUE(created.ok()) << created.status();
    holder = std::move(*created);
    REDLOCK_ASSERT_OK(link_->SetFault(testkit::Direction::kToClient, testkit::FaultSpec::Hold()));
  }

  // A second client tries the lock on the promoted replica (retrying while it
  // connects, or while the replica still answers READONLY).
  absl::StatusOr<Lease> Contender(Options o) {
    o.durability.replicas = 0;  // the promoted replica has none
    auto c = Client::Create(o);
    if (!c.ok()) return c.status();
    return AcquireWithin(**c, absl::Seconds(5));
  }

  std::unique_ptr<Fleet> masters_;
  std::unique_ptr<testkit::FaultProxy> front_;
  std::unique_ptr<testkit::FaultProxy> link_;
  std::unique_ptr<Replicas> replicas_;
  std::unique_ptr<Sentinel> sentinel_;
};

TEST_F(FailoverTest, WithoutTheVoteAFailoverLosesTheLock) {
  Options o = MakeOptions(0);
  std::unique_ptr<Client> holder;
  ASSERT_NO_FATAL_FAILURE(HolderWithReplicationHeld(o, holder));
  absl::StatusOr<Lease> lease = holder->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  FailOver();
  absl::StatusOr<Lease> second = Contender(o);
  EXPECT_TRUE(second.ok()) << "the textbook case: the replica was promoted without the key, so a "
                              "second client takes the lock the first still holds: "
                           << second.status();
}

TEST_F(FailoverTest, WithTheVoteAGrantedLockSurvivesTheFailover) {
  Options o = MakeOptions(1);
  std::unique_ptr<Client> holder;
  ASSERT_NO_FATAL_FAILURE(HolderWithReplicationHeld(o, holder));
  absl::StatusOr<Lease> refused = holder->TryAcquire("r", absl::Seconds(10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable)
      << "replication is held: nothing can be confirmed: " << refused.status();
  link_->ClearFaults();  // the replica catches up
  absl::StatusOr<Lease> lease = UntilGranted(*holder);
  ASSERT_TRUE(lease.ok()) << lease.status();
  FailOver();
  absl::StatusOr<Lease> second = Contender(o);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAborted)
      << "the promoted replica has the key: " << second.status();
  EXPECT_EQ(Get(replicas_->fleet().Command(0, {"GET", o.key_prefix + "r"})), lease->token());
}

// ---- Sentinel discovery (redis+sentinel://) ---------------------------------------

// One node: a master with one replica, watched by a Sentinel; the client
// knows only the Sentinel and the master's name.
class SentinelDiscoveryTest : public DurabilityTest {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_SENTINEL();
    DurabilityTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    sentinel_ = ValueOrFail(Sentinel::Start({.masters = {{"n0", masters_->address(0)}}}));
    ASSERT_NE(sentinel_, nullptr);
    REDLOCK_ASSERT_OK(sentinel_->WaitReplicas("n0", 1, absl::Seconds(15)));
  }

  Options MakeOptions(const std::string& master = "n0") {
    absl::StatusOr<Endpoint> ep =
        ParseEndpoint(absl::StrCat("redis+sentinel://", sentinel_->address(), "/", master));
    EXPECT_TRUE(ep.ok()) << ep.status();
    return DurableOptions({ep.ok() ? *ep : Endpoint{}}, 0);
  }

  std::unique_ptr<Sentinel> sentinel_;
};

TEST_F(SentinelDiscoveryTest, FindsTheMasterThroughTheSentinel) {
  Options o = MakeOptions();
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<NodeHealth> health = (*client)->Health();
  ASSERT_EQ(health.size(), 1u);
  EXPECT_EQ(health[0].node, absl::StrCat("sentinel:n0@", sentinel_->address()));
  EXPECT_EQ(health[0].address, masters_->address(0));
  EXPECT_TRUE(health[0].connected) << health[0].last_error;
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(Get(masters_->Command(0, {"GET", o.key_prefix + "r"})), lease->token());
}

TEST_F(SentinelDiscoveryTest, FollowsAFailoverWhileTheOldMasterStillRuns) {
  // A manual failover: the old master stays up (and still answers as a
  // master until Sentinel converts it), so only +switch-master (or the ROLE
  // check) can tell the client to move.
  Options o = MakeOptions();
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->TryAcquire("warm-up", absl::Seconds(1)).ok());
  REDLOCK_ASSERT_OK(
      testkit::RunCommand(sentinel_->endpoint(), {"SENTINEL", "FAILOVER", "n0"}, absl::Seconds(2))
          .status());
  ASSERT_NO_FATAL_FAILURE(AwaitFailoverToTheReplica(*sentinel_, masters_->address(0), *replicas_));
  ASSERT_NO_FATAL_FAILURE(ExpectTheLockOnTheNewMaster(**client, *replicas_, o.key_prefix + "r"));
  EXPECT_EQ((*client)->Health()[0].address, replicas_->address(0, 0));
}

TEST_F(SentinelDiscoveryTest, FollowsTheMasterAfterItDies) {
  Options o = MakeOptions();
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  REDLOCK_ASSERT_OK(masters_->Kill(0));
  absl::StatusOr<Lease> refused = (*client)->TryAcquire("r", absl::Seconds(10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("sentinel:n0@"));
  ASSERT_NO_FATAL_FAILURE(
      ExpectTheClientToFollowTheFailover(*sentinel_, masters_->address(0), **client));
}

TEST_F(SentinelDiscoveryTest, AnUnknownMasterNameIsNamedInTheError) {
  auto client = Client::Create(MakeOptions("no-such-master"));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Lease> r = (*client)->TryAcquire("r", absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("the Sentinel knows no master named \"no-such-master\""));
  EXPECT_EQ((*client)->Health()[0].address, "");
}

TEST_F(SentinelDiscoveryTest, AnUnreachableSentinelIsSkipped) {
  // The first Sentinel listed is down: the second one names the master.
  absl::StatusOr<int> dead = testkit::PickFreePort("127.0.0.1");
  ASSERT_TRUE(dead.ok()) << dead.status();
  absl::StatusOr<Endpoint> ep = ParseEndpoint(
      absl::StrCat("redis+sentinel://127.0.0.1:", *dead, "+", sentinel_->address(), "/n0"));
  ASSERT_TRUE(ep.ok()) << ep.status();
  auto client = Client::Create(DurableOptions({*ep}, 0));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Lease> lease = AcquireWithin(**client, absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ((*client)->Health()[0].address, masters_->address(0));
}

TEST_F(SentinelDiscoveryTest, WhenNoSentinelAnswersTheErrorNamesEach) {
  absl::StatusOr<int> a = testkit::PickFreePort("127.0.0.1");
  absl::StatusOr<int> b = testkit::PickFreePort("127.0.0.1");
  for (int i = 0; i < 5 && a.ok() && b.ok() && *a == *b; ++i) {
    b = testkit::PickFreePort("127.0.0.1");
  }
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_NE(*a, *b);
  absl::StatusOr<Endpoint> ep =
      ParseEndpoint(absl::StrCat("redis+sentinel://127.0.0.1:", *a, "+127.0.0.1:", *b, "/n0"));
  ASSERT_TRUE(ep.ok()) << ep.status();
  auto client = Client::Create(DurableOptions({*ep}, 0));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Lease> r = (*client)->TryAcquire("r", absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(r.status().message());
  EXPECT_THAT(message, HasSubstr("cannot learn where master \"n0\" is"));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("Sentinel 127.0.0.1:", *a, ": ")));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("Sentinel 127.0.0.1:", *b, ": ")));
}

// ---- Sentinel discovery with stale, unreachable and silent Sentinels --------------

// A Sentinel with a view of its own: it watches `address` under the name
// "n0" (a Sentinel left behind with an old view names the old master, or a
// replica; one pointed at a dead address names that).
std::unique_ptr<Sentinel> StaleSentinel(const std::string& address) {
  return ValueOrFail(Sentinel::Start({.masters = {{"n0", address}}}));
}

Options SentinelOptionsFor(const std::vector<std::string>& sentinels) {
  absl::StatusOr<Endpoint> ep =
      ParseEndpoint(absl::StrCat("redis+sentinel://", absl::StrJoin(sentinels, "+"), "/n0"));
  EXPECT_TRUE(ep.ok()) << ep.status();
  return DurableOptions({ep.ok() ? *ep : Endpoint{}}, 0);
}

// A client of `o` in `client`, which then acquires and releases "r" `times`
// times. Fatal failures: call it within ASSERT_NO_FATAL_FAILURE.
void CreateAndUse(const Options& o, int times, std::unique_ptr<Client>& client) {
  absl::StatusOr<std::unique_ptr<Client>> created = Client::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  client = std::move(*created);
  for (int i = 0; i < times; ++i) {
    SCOPED_TRACE(absl::StrCat("acquisition ", i));
    ASSERT_NO_FATAL_FAILURE(AcquireAndRelease(*client));
  }
}

// Issue 25 item 4, as reported: two Sentinels, the first naming the replica.
// The client asked that one again after every failed ROLE check and never
// acquired (0 of 25 in 5 s; 25 of 25 with the two listed the other way).
TEST_F(SentinelDiscoveryTest, AStaleSentinelListedFirstDoesNotPinTheNode) {
  std::unique_ptr<Sentinel> stale = StaleSentinel(replicas_->address(0, 0));
  ASSERT_NE(stale, nullptr);
  ASSERT_EQ(stale->MasterAddress("n0").value_or(""), replicas_->address(0, 0));
  Options o = SentinelOptionsFor({stale->address(), sentinel_->address()});
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(CreateAndUse(o, 25, client));
  const NodeHealth health = client->Health()[0];
  EXPECT_EQ(health.address, masters_->address(0));
  // Health() shows what each Sentinel says.
  ASSERT_EQ(health.sentinels.size(), 2u);
  EXPECT_EQ(health.sentinels[0].address, stale->address());
  EXPECT_EQ(health.sentinels[0].master, replicas_->address(0, 0));
  EXPECT_EQ(health.sentinels[1].address, sentinel_->address());
  EXPECT_EQ(health.sentinels[1].master, masters_->address(0));
  EXPECT_EQ(health.sentinels[1].config_epoch, 0);
  EXPECT_TRUE(health.sentinels[1].connected) << health.sentinels[1].last_error;
}

// The same when the first Sentinel names an address where nothing listens.
TEST_F(SentinelDiscoveryTest, AStaleSentinelNamingADeadAddressDoesNotPinTheNode) {
  absl::StatusOr<int> dead = testkit::PickFreePort("127.0.0.1");
  ASSERT_TRUE(dead.ok()) << dead.status();
  std::unique_ptr<Sentinel> stale = StaleSentinel(absl::StrCat("127.0.0.1:", *dead));
  ASSERT_NE(stale, nullptr);
  Options o = SentinelOptionsFor({stale->address(), sentinel_->address()});
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(CreateAndUse(o, 5, client));
  EXPECT_EQ(client->Health()[0].address, masters_->address(0));
}

// The first Sentinel listed accepts connections but never answers (a
// black-holed path): the node is found through the second, and a failover is
// followed, the first still silent.
TEST_F(SentinelDiscoveryTest, FollowsAFailoverWhileTheFirstSentinelIsUnreachable) {
  testkit::ProxyOptions po;
  po.upstream_port = static_cast<uint16_t>(sentinel_->port());
  auto silent = testkit::FaultProxy::Start(po);
  ASSERT_TRUE(silent.ok()) << silent.status();
  REDLOCK_ASSERT_OK((*silent)->SetFaultBoth(testkit::FaultSpec::BlackHole()));
  Options o = SentinelOptionsFor({(*silent)->listen_address(), sentinel_->address()});
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(CreateAndUse(o, 1, client));
  REDLOCK_ASSERT_OK(masters_->Kill(0));
  ASSERT_NO_FATAL_FAILURE(
      ExpectTheClientToFollowTheFailover(*sentinel_, masters_->address(0), *client));
}

// The client's only path to its Sentinel goes silent (black-holed: the
// connection stays open, nothing arrives either way), so +switch-master
// would never arrive on it: the silence must be noticed and the connection
// replaced (a half-open connection is never noticed otherwise); a failover
// made meanwhile is followed once the Sentinel answers again.
TEST_F(SentinelDiscoveryTest, ASilentSentinelConnectionIsReplacedAndTheFailoverFollowed) {
  testkit::ProxyOptions po;
  po.upstream_port = static_cast<uint16_t>(sentinel_->port());
  auto path = testkit::FaultProxy::Start(po);
  ASSERT_TRUE(path.ok()) << path.status();
  Options o = SentinelOptionsFor({(*path)->listen_address()});
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(CreateAndUse(o, 1, client));
  const uint64_t connections = (*path)->Stats().connections_accepted;
  REDLOCK_ASSERT_OK((*path)->SetFaultBoth(testkit::FaultSpec::BlackHole()));
  auto replaced = [&] { return (*path)->Stats().connections_accepted > connections; };
  EXPECT_TRUE(testkit::Eventually(replaced, true, absl::Seconds(15)))
      << "the silent Sentinel connection was kept: a failover would never be announced on it";
  EXPECT_THAT(
      client->Health()[0].sentinels[0].last_error,
      testing::AnyOf(HasSubstr("no answer to a keep-alive PING"), HasSubstr("no answer within")));
  REDLOCK_ASSERT_OK(
      testkit::RunCommand(sentinel_->endpoint(), {"SENTINEL", "FAILOVER", "n0"}, absl::Seconds(2))
          .status());
  ASSERT_NO_FATAL_FAILURE(AwaitFailoverToTheReplica(*sentinel_, masters_->address(0), *replicas_));
  (*path)->ClearFaults();
  const std::string now = replicas_->address(0, 0);
  auto address = [&] { return client->Health()[0].address; };
  EXPECT_EQ(testkit::Eventually(address, now, absl::Seconds(20)), now);
  EXPECT_EQ(client->Health()[0].sentinels[0].config_epoch, 1) << "the failover's epoch";
  ASSERT_NO_FATAL_FAILURE(ExpectTheLockOnTheNewMaster(*client, *replicas_, o.key_prefix + "r"));
}

// Issue 25 item 4 with a failover: the first Sentinel listed is cut off
// from the other Sentinel and from the hello channel (the servers' default
// user, which it logs in as, may not use that channel, nor REPLICAOF),
// while clients still reach it: it never learns the failover the other
// Sentinel (logged in as a user of its own) makes, and names the old master
// for ever. The old master stays up and becomes a replica: the client must
// follow the new master, not stay with the first Sentinel's answer.
TEST_F(SentinelDiscoveryTest, FollowsAFailoverThatTheFirstSentinelNeverLearns) {
  const std::string pw = "sentinel-pw";
  const std::vector<std::vector<std::string>> acl = {
      {"ACL", "SETUSER", "sentinel", "on", ">" + pw, "~*", "&*", "+@all"},
      {"ACL", "SETUSER", "default", "resetchannels", "&redlock:*", "-replicaof", "-slaveof"}};
  for (const auto& command : acl) {
    REDLOCK_ASSERT_OK(masters_->Command(0, command).status());
    REDLOCK_ASSERT_OK(replicas_->fleet().Command(0, command).status());
  }
  // Neither fails the master over on its own (a long down-after; quorum 2
  // for the one that never hears of another Sentinel).
  auto good = Sentinel::Start({.masters = {{"n0", masters_->address(0)}},
                               .down_after = absl::Seconds(60),
                               .extra_config = {"sentinel auth-user n0 sentinel",
                                                absl::StrCat("sentinel auth-pass n0 ", pw)}});
  ASSERT_TRUE(good.ok()) << good.status();
  REDLOCK_ASSERT_OK((*good)->WaitReplicas("n0", 1, absl::Seconds(15)));
  auto stale = Sentinel::Start(
      {.masters = {{"n0", masters_->address(0), 2}}, .down_after = absl::Seconds(60)});
  ASSERT_TRUE(stale.ok()) << stale.status();
  Options o = SentinelOptionsFor({(*stale)->address(), (*good)->address()});
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(CreateAndUse(o, 1, client));
  REDLOCK_ASSERT_OK(
      testkit::RunCommand((*good)->endpoint(), {"SENTINEL", "FAILOVER", "n0"}, absl::Seconds(2))
          .status());
  ASSERT_NO_FATAL_FAILURE(AwaitFailoverToTheReplica(**good, masters_->address(0), *replicas_));
  ASSERT_NO_FATAL_FAILURE(
      ExpectTheLockOnTheNewMaster(*client, *replicas_, o.key_prefix + "r", absl::Seconds(15)));
  EXPECT_EQ(client->Health()[0].address, replicas_->address(0, 0));
  // The first Sentinel really was stale all along.
  EXPECT_EQ((*stale)->MasterAddress("n0").value_or(""), masters_->address(0));
}

}  // namespace
}  // namespace redlock
