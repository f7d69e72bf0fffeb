// A Redis Cluster as one node (redis+cluster://): a local cluster of three
// masters with one replica each (testkit/cluster.h). Locks land on the master
// of their key's slot; a slot migrated while a lock is held (ASK, then
// MOVED) and a master killed and replaced by its replica are followed;
// MultiLock and fencing need keys that share a slot; a fleet mixes a cluster
// with plain nodes.

#include "testkit/cluster.h"

#include <sys/resource.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "multilock/multi_lock.h"
#include "redlock/client.h"
#include "redlock/internal/cluster_slots.h"
#include "testkit/gtest_fleet.h"

namespace redlock {
namespace {

using internal::KeySlot;
using ::testing::HasSubstr;
using testkit::Cluster;
using testkit::Fleet;
using testkit::RedisValue;

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    auto cluster = Cluster::Start({.masters = 3, .replicas_per_master = 1});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  Options MakeOptions() {
    Options o;
    o.nodes = {cluster_->endpoint()};
    o.node_timeout = absl::Seconds(1);
    o.key_prefix =
        absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
    return o;
  }

  std::unique_ptr<Client> MakeClient(Options o) {
    auto c = Client::Create(std::move(o));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Two clients with options `o`, both created. Use with
  // ASSERT_NO_FATAL_FAILURE.
  void MakeTwoClients(const Options& o, std::unique_ptr<Client>* a, std::unique_ptr<Client>* b) {
    *a = MakeClient(o);
    *b = MakeClient(o);
    ASSERT_NE(*a, nullptr);
    ASSERT_NE(*b, nullptr);
  }

  // MakeOptions() with every grant waiting for one replica's confirmation,
  // for at most `timeout`.
  Options Durable(absl::Duration timeout) {
    Options o = MakeOptions();
    o.durability.replicas = 1;
    o.durability.timeout = timeout;
    return o;
  }

  // The value of `key` on the member serving its slot ("" when absent).
  std::string OnItsMaster(const std::string& key) {
    absl::StatusOr<int> m = cluster_->MasterOf(KeySlot(key));
    if (!m.ok()) return "(" + std::string(m.status().message()) + ")";
    absl::StatusOr<RedisValue> v = cluster_->fleet().Command(*m, {"GET", key});
    return v.ok() && v->type == RedisValue::Type::kString ? v->str : "";
  }

  // Retries (bounded) while the client follows a change of the cluster.
  static absl::StatusOr<Lease> AcquireWithin(Client& client, const std::string& resource,
                                             absl::Duration budget) {
    absl::StatusOr<Lease> r = absl::UnknownError("not tried");
    const absl::Time end = absl::Now() + budget;
    for (int i = 0; i < 2000 && absl::Now() < end; ++i) {
      r = client.TryAcquire(resource, absl::Seconds(10));
      if (r.ok() || absl::IsAborted(r.status())) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return r;
  }

  static std::string DescribeShards(const NodeHealth& h) {
    std::string out =
        absl::StrCat("connected ", h.connected, ", last error: ", h.last_error,
                     ", slots uncovered ", h.slots_uncovered, ", address ", h.address);
    for (const ShardHealth& s : h.shards) {
      absl::StrAppend(&out, "\n  ", s.address, " slots ", s.slots, " connected ", s.connected,
                      " error ", s.last_error);
    }
    return out;
  }

  // This process's CPU time (user and system) over `wall`, idle meanwhile.
  static double CpuSecondsOver(absl::Duration wall) {
    auto cpu = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
             (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
    };
    const double before = cpu();
    absl::SleepFor(wall);
    return cpu() - before;
  }

  std::unique_ptr<Cluster> cluster_;
};

TEST_F(ClusterTest, LocksLandOnTheMasterOfTheirSlot) {
  Options o = MakeOptions();
  std::unique_ptr<Client> c, other;
  ASSERT_NO_FATAL_FAILURE(MakeTwoClients(o, &c, &other));
  // Resources spread over every master.
  std::vector<Lease> leases;
  std::vector<int> per_master(3, 0);
  for (int i = 0; i < 30; ++i) {
    const std::string resource = absl::StrCat("res", i);
    absl::StatusOr<Lease> l = c->TryAcquire(resource, absl::Seconds(10));
    REDLOCK_ASSERT_OK(l.status());
    const std::string key = o.key_prefix + resource;
    EXPECT_EQ(OnItsMaster(key), l->token()) << key;
    absl::StatusOr<int> m = cluster_->MasterOf(KeySlot(key));
    REDLOCK_ASSERT_OK(m.status());
    ++per_master[static_cast<size_t>(*m)];
    EXPECT_EQ(other->TryAcquire(resource, absl::Seconds(10)).status().code(),
              absl::StatusCode::kAborted);
    leases.push_back(*std::move(l));
  }
  for (int n : per_master) EXPECT_GT(n, 0);
  for (Lease& l : leases) {
    absl::StatusOr<Lease> e = c->Extend(l, absl::Seconds(20));
    REDLOCK_ASSERT_OK(e.status());
    absl::StatusOr<int> m = cluster_->MasterOf(KeySlot(o.key_prefix + l.resource()));
    REDLOCK_ASSERT_OK(m.status());
    absl::StatusOr<RedisValue> ttl =
        cluster_->fleet().Command(*m, {"PTTL", o.key_prefix + l.resource()});
    REDLOCK_ASSERT_OK(ttl.status());
    EXPECT_GT(ttl->integer, 10000);
    REDLOCK_EXPECT_OK(c->Release(*e));
  }
  for (Lease& l : leases) EXPECT_EQ(OnItsMaster(o.key_prefix + l.resource()), "");
}

TEST_F(ClusterTest, HealthShowsEveryMasterAndItsSlots) {
  auto c = MakeClient(MakeOptions());
  ASSERT_NE(c, nullptr);
  std::vector<NodeHealth> h = c->Health();
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].scheme, "redis+cluster");
  EXPECT_TRUE(
      testkit::Eventually([&] { return c->Health()[0].connected; }, true, absl::Seconds(5)));
  h = c->Health();
  ASSERT_EQ(h[0].shards.size(), 3u);
  int slots = 0;
  for (const ShardHealth& s : h[0].shards) {
    EXPECT_TRUE(s.connected) << s.address << ": " << s.last_error;
    slots += s.slots;
  }
  EXPECT_EQ(slots, 16384);
  EXPECT_EQ(h[0].slots_uncovered, 0);
}

TEST_F(ClusterTest, AFleetMixesAClusterWithPlainNodes) {
  REDLOCK_REQUIRE_REDIS();
  auto plain = Fleet::Start({.nodes = 2});
  ASSERT_TRUE(plain.ok()) << plain.status();
  Options o = MakeOptions();
  o.nodes = {cluster_->endpoint(), (*plain)->endpoint(0), (*plain)->endpoint(1)};
  std::unique_ptr<Client> a, b;
  ASSERT_NO_FATAL_FAILURE(MakeTwoClients(o, &a, &b));
  absl::StatusOr<Lease> l = a->TryAcquire("mixed", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_EQ(OnItsMaster(o.key_prefix + "mixed"), l->token());
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<RedisValue> v = (*plain)->Command(i, {"GET", o.key_prefix + "mixed"});
    REDLOCK_ASSERT_OK(v.status());
    EXPECT_EQ(v->str, l->token());
  }
  EXPECT_EQ(b->TryAcquire("mixed", absl::Seconds(10)).status().code(), absl::StatusCode::kAborted);
  // The cluster and one plain node are a quorum of the three.
  REDLOCK_ASSERT_OK((*plain)->Kill(1));
  REDLOCK_ASSERT_OK(a->Release(*l));
  REDLOCK_EXPECT_OK(b->TryAcquire("mixed", absl::Seconds(10)).status());
}

TEST_F(ClusterTest, AMultiLockSetNeedsACommonHashTag) {
  Options o = MakeOptions();
  auto c = MakeClient(o);
  ASSERT_NE(c, nullptr);
  MultiLock multi(c.get());
  absl::StatusOr<MultiLease> together =
      multi.TryAcquire({"{order42}:a", "{order42}:b"}, absl::Seconds(10));
  REDLOCK_ASSERT_OK(together.status());
  EXPECT_FALSE(OnItsMaster(o.key_prefix + "{order42}:a").empty());
  EXPECT_FALSE(OnItsMaster(o.key_prefix + "{order42}:b").empty());
  REDLOCK_EXPECT_OK(multi.Release(*together));

  // Two slots: refused before anything is sent, saying what to do.
  ASSERT_NE(KeySlot(o.key_prefix + "apart-a"), KeySlot(o.key_prefix + "apart-b"));
  absl::StatusOr<MultiLease> apart = multi.TryAcquire({"apart-a", "apart-b"}, absl::Seconds(10));
  EXPECT_EQ(apart.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(apart.status().message()), HasSubstr("hash tag"));
  EXPECT_EQ(OnItsMaster(o.key_prefix + "apart-a"), "");
  EXPECT_EQ(OnItsMaster(o.key_prefix + "apart-b"), "");
}

TEST_F(ClusterTest, FencingKeepsTheCounterInItsResourcesSlot) {
  Options o = MakeOptions();
  o.fencing = true;
  auto c = MakeClient(o);
  ASSERT_NE(c, nullptr);
  uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<Lease> l = c->TryAcquire("{acct7}", absl::Seconds(10));
    REDLOCK_ASSERT_OK(l.status());
    EXPECT_GT(l->fencing_token(), last);
    last = l->fencing_token();
    REDLOCK_ASSERT_OK(c->Release(*l));
  }
  EXPECT_EQ(OnItsMaster(o.key_prefix + "{acct7}:fence"), std::to_string(last));
  // Without a hash tag the counter would be in another slot.
  absl::StatusOr<Lease> untagged = c->TryAcquire("acct8", absl::Seconds(10));
  EXPECT_EQ(untagged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(untagged.status().message()), HasSubstr("hash tag"));
  // Inspect reads the counter on the cluster too.
  absl::StatusOr<std::vector<NodeView>> views = c->Inspect("{acct7}");
  REDLOCK_ASSERT_OK(views.status());
  ASSERT_EQ(views->size(), 1u);
  REDLOCK_EXPECT_OK((*views)[0].status);
  EXPECT_EQ((*views)[0].fence_counter, last);
}

TEST_F(ClusterTest, ASlotMigratedWhileALockIsHeldKeepsItsHolder) {
  Options o = MakeOptions();
  std::unique_ptr<Client> holder, other;
  ASSERT_NO_FATAL_FAILURE(MakeTwoClients(o, &holder, &other));
  const std::string held_key = o.key_prefix + "{mig}held";
  const int slot = KeySlot(held_key);
  absl::StatusOr<int> from = cluster_->MasterOf(slot);
  REDLOCK_ASSERT_OK(from.status());
  const int to = (*from + 1) % cluster_->masters();
  absl::StatusOr<Lease> held = holder->TryAcquire("{mig}held", absl::Seconds(20));
  REDLOCK_ASSERT_OK(held.status());

  // Migrating: the held key is still at the source, a new key of the slot
  // goes to the target (ASK, followed with ASKING).
  REDLOCK_ASSERT_OK(cluster_->BeginMigration(slot, *from, to));
  EXPECT_EQ(other->TryAcquire("{mig}held", absl::Seconds(10)).status().code(),
            absl::StatusCode::kAborted);
  absl::StatusOr<Lease> fresh = other->TryAcquire("{mig}fresh", absl::Seconds(20));
  REDLOCK_ASSERT_OK(fresh.status());
  absl::StatusOr<RedisValue> src = cluster_->fleet().Command(*from, {"EXISTS", held_key});
  REDLOCK_ASSERT_OK(src.status());
  EXPECT_EQ(src->integer, 1);

  // Migrated: every key at the target, the slot there (MOVED from now on).
  REDLOCK_ASSERT_OK(cluster_->FinishMigration(slot, *from, to));
  EXPECT_EQ(OnItsMaster(held_key), held->token());
  EXPECT_EQ(OnItsMaster(o.key_prefix + "{mig}fresh"), fresh->token());
  EXPECT_EQ(other->TryAcquire("{mig}held", absl::Seconds(10)).status().code(),
            absl::StatusCode::kAborted);
  absl::StatusOr<Lease> extended = holder->Extend(*held, absl::Seconds(30));
  REDLOCK_ASSERT_OK(extended.status());
  REDLOCK_ASSERT_OK(holder->Release(*extended));
  REDLOCK_ASSERT_OK(other->Release(*fresh));
  EXPECT_EQ(OnItsMaster(held_key), "");
  EXPECT_EQ(OnItsMaster(o.key_prefix + "{mig}fresh"), "");
  REDLOCK_EXPECT_OK(other->TryAcquire("{mig}held", absl::Seconds(10)).status());
}

// Issue 36 item 7. During a slot migration, a multi-key call whose keys are
// split (the counter of a fenced lock still at the source, its lock key not
// there) is answered TRYAGAIN; it is tried again within the node's deadline
// and succeeds once the migration moved the keys. Before the fix it was a
// plain "unavailable" vote for the whole migration.
TEST_F(ClusterTest, AMultiKeyCallAnsweredTryAgainDuringAMigrationIsTriedAgain) {
  Options o = MakeOptions();
  o.fencing = true;
  o.node_timeout = absl::Seconds(3);
  auto c = MakeClient(o);
  ASSERT_NE(c, nullptr);
  // The counter exists (an earlier holder), the lock key does not.
  absl::StatusOr<Lease> first = c->TryAcquire("{try}r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(first.status());
  REDLOCK_ASSERT_OK(c->Release(*first));
  const std::string key = o.key_prefix + "{try}r";
  const int slot = KeySlot(key);
  absl::StatusOr<int> from = cluster_->MasterOf(slot);
  REDLOCK_ASSERT_OK(from.status());
  const int to = (*from + 1) % cluster_->masters();
  REDLOCK_ASSERT_OK(cluster_->BeginMigration(slot, *from, to));
  // Split: the source has the counter and not the lock key.
  absl::StatusOr<RedisValue> counter = cluster_->fleet().Command(*from, {"EXISTS", key + ":fence"});
  REDLOCK_ASSERT_OK(counter.status());
  ASSERT_EQ(counter->integer, 1);
  std::atomic<bool> done{false};
  absl::StatusOr<Lease> got = absl::UnknownError("not yet");
  std::thread t([&] {
    got = c->TryAcquire("{try}r", absl::Seconds(10));
    done = true;
  });
  // The attempt meets TRYAGAIN while the keys are split; the migration
  // ends within the node's deadline (3 s).
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(done.load()) << "decided while the keys were split: " << got.status();
  REDLOCK_ASSERT_OK(cluster_->FinishMigration(slot, *from, to));
  t.join();
  REDLOCK_ASSERT_OK(got.status());
  EXPECT_EQ(got->fencing_token(), first->fencing_token() + 1);
  EXPECT_EQ(OnItsMaster(key), got->token());
  REDLOCK_ASSERT_OK(c->Release(*got));
}

TEST_F(ClusterTest, AMasterKilledIsReplacedByItsReplica) {
  Options o = MakeOptions();
  o.node_timeout = absl::Milliseconds(200);
  auto c = MakeClient(o);
  ASSERT_NE(c, nullptr);
  // A resource served by master 0.
  std::string resource;
  for (int i = 0; i < 1000 && resource.empty(); ++i) {
    const std::string r = absl::StrCat("fo", i);
    absl::StatusOr<int> m = cluster_->MasterOf(KeySlot(o.key_prefix + r));
    if (m.ok() && *m == 0) resource = r;
  }
  ASSERT_FALSE(resource.empty());
  absl::StatusOr<Lease> before = c->TryAcquire(resource, absl::Seconds(1));
  REDLOCK_ASSERT_OK(before.status());
  REDLOCK_ASSERT_OK(c->Release(*before));

  absl::StatusOr<int> promoted = cluster_->KillMaster(0);
  REDLOCK_ASSERT_OK(promoted.status());
  absl::StatusOr<Lease> after = AcquireWithin(*c, resource, absl::Seconds(15));
  REDLOCK_ASSERT_OK(after.status());
  absl::StatusOr<RedisValue> v =
      cluster_->fleet().Command(*promoted, {"GET", o.key_prefix + resource});
  REDLOCK_ASSERT_OK(v.status());
  EXPECT_EQ(v->str, after->token());
  EXPECT_TRUE(testkit::Eventually(
      [&] {
        const std::vector<NodeHealth> health = c->Health();
        for (const ShardHealth& s : health[0].shards) {
          if (s.address == cluster_->fleet().address(*promoted)) return s.connected;
        }
        return false;
      },
      true, absl::Seconds(20)))
      << DescribeShards(c->Health()[0]) << "\npromoted: " << cluster_->fleet().address(*promoted)
      << "\n"
      <<
      [&] {
        absl::StatusOr<RedisValue> v = cluster_->fleet().Command(*promoted, {"CLUSTER", "NODES"});
        return v.ok() ? v->str : std::string(v.status().message());
      }();
  REDLOCK_EXPECT_OK(c->Release(*after));
  // The killed master serves no slot now: its connection is not retried,
  // and the client's I/O thread sleeps (a reconnection time in the past once
  // kept its poller from sleeping at all).
  EXPECT_LT(CpuSecondsOver(absl::Seconds(1)), 0.3);
}

TEST_F(ClusterTest, TheDurabilityVoteWaitsForTheKeysMastersReplica) {
  Options o = Durable(absl::Milliseconds(200));
  auto c = MakeClient(o);
  ASSERT_NE(c, nullptr);
  // Two resources on master 0 and master 1.
  std::string on0, on1;
  for (int i = 0; i < 1000 && (on0.empty() || on1.empty()); ++i) {
    const std::string r = absl::StrCat("dur", i);
    absl::StatusOr<int> m = cluster_->MasterOf(KeySlot(o.key_prefix + r));
    if (m.ok() && *m == 0 && on0.empty()) on0 = r;
    if (m.ok() && *m == 1 && on1.empty()) on1 = r;
  }
  absl::StatusOr<Lease> l = c->TryAcquire(on0, absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  REDLOCK_ASSERT_OK(c->Release(*l));
  // Master 0's replica stops: its keys cannot be confirmed; master 1's can.
  const int replica0 = cluster_->masters();
  REDLOCK_ASSERT_OK(cluster_->fleet().Stop(replica0));
  absl::StatusOr<Lease> unconfirmed = c->TryAcquire(on0, absl::Seconds(10));
  EXPECT_EQ(unconfirmed.status().code(), absl::StatusCode::kUnavailable) << unconfirmed.status();
  EXPECT_EQ(testkit::Eventually([&] { return OnItsMaster(o.key_prefix + on0); }, std::string(),
                                absl::Seconds(2)),
            "")
      << "the unconfirmed grant is taken back";
  absl::StatusOr<Lease> confirmed = c->TryAcquire(on1, absl::Seconds(10));
  REDLOCK_EXPECT_OK(confirmed.status());
  REDLOCK_ASSERT_OK(cluster_->fleet().Continue(replica0));
}

TEST_F(ClusterTest, DurableWritesOnSeveralMastersAtOnceAreEachConfirmed) {
  // One WAIT in flight per connection: writes on different masters, sent
  // together, each wait for their own master's confirmation (a WAIT on one
  // master confirms nothing of another's writes).
  Options o = Durable(absl::Milliseconds(500));
  auto c = MakeClient(o);
  ASSERT_NE(c, nullptr);
  constexpr int kLocks = 30;
  std::mutex mu;
  std::vector<absl::StatusOr<Lease>> results;
  std::set<int> masters;
  for (int i = 0; i < kLocks; ++i) {
    const std::string r = absl::StrCat("many", i);
    absl::StatusOr<int> m = cluster_->MasterOf(KeySlot(o.key_prefix + r));
    if (m.ok()) masters.insert(*m);
    c->TryAcquireAsync(r, absl::Seconds(10), [&](absl::StatusOr<Lease> l) {
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(std::move(l));
    });
  }
  EXPECT_EQ(masters.size(), 3u);
  EXPECT_TRUE(testkit::Eventually(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return results.size() == kLocks;
      },
      true, absl::Seconds(10)));
  std::lock_guard<std::mutex> lock(mu);
  for (const absl::StatusOr<Lease>& l : results) EXPECT_TRUE(l.ok()) << l.status();
}

TEST_F(ClusterTest, AReleaseWakesAWaiterThroughTheCluster) {
  Options o = MakeOptions();
  o.retry_delay = absl::Seconds(5);  // polling would take seconds
  o.retry_jitter = absl::ZeroDuration();
  std::unique_ptr<Client> a, b;
  ASSERT_NO_FATAL_FAILURE(MakeTwoClients(o, &a, &b));
  absl::StatusOr<Lease> held = a->TryAcquire("wake", absl::Seconds(30));
  REDLOCK_ASSERT_OK(held.status());
  std::atomic<bool> got{false};
  absl::Time acquired_at;
  std::thread waiter([&] {
    absl::StatusOr<Lease> l = b->Acquire("wake", absl::Seconds(10), absl::Seconds(20));
    acquired_at = absl::Now();
    got = l.ok();
  });
  // Let the waiter fail its first attempt and subscribe.
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time released_at = absl::Now();
  REDLOCK_ASSERT_OK(a->Release(*held));
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(acquired_at - released_at, absl::Seconds(2));
}

TEST_F(ClusterTest, APlainServerNamedAsAClusterSaysSo) {
  auto plain = Fleet::Start({.nodes = 1});
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<Endpoint> ep =
      ParseEndpoint(absl::StrCat("redis+cluster://", (*plain)->address(0)));
  REDLOCK_ASSERT_OK(ep.status());
  Options o;
  o.nodes = {*ep};
  auto c = MakeClient(o);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<Lease> l = c->TryAcquire("x", absl::Seconds(5));
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(c->Health()[0].last_error, HasSubstr("cluster support disabled"));
}

}  // namespace
}  // namespace redlock
