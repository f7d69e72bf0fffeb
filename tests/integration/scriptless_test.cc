// Nodes that forbid scripting (redlock/internal/scriptless.h): found at the
// handshake, shown by Health, and served with WATCH/MULTI/EXEC.

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "multilock/multi_lock.h"
#include "redlock/client.h"
#include "redlock/fair_mutex.h"
#include "testkit/fleet_suite.h"
#include "tests/integration/own_fleet_test.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::RedisValue;

class ScriptlessTest : public testkit::OwnFleetTest {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    StartFleet({.nodes = 3, .deny_scripting = {true, false, true}});
  }
};

TEST_F(ScriptlessTest, HealthShowsWhichNodesForbidScripting) {
  auto client = Client::Create(MakeOptions());
  ASSERT_TRUE(client.ok()) << client.status();
  std::string reason;
  ASSERT_NO_FATAL_FAILURE(ExpectNodes0And2Scriptless(**client, &reason));
  EXPECT_THAT(reason, HasSubstr("NOPERM"));
}

// The scripts' path and the transactions' path, without the server's own
// compare-and-set commands (a Valkey 9.1 releases with DELIFEQ and extends
// with SET IFEQ wherever it can: servers_test.cc covers those).
Options ScriptsOrTransactions(Options o) {
  o.server_commands = false;
  return o;
}

TEST_F(ScriptlessTest, ReleaseAndExtendUseTransactionsOnlyWhereScriptsAreForbidden) {
  auto client = Client::Create(ScriptsOrTransactions(MakeOptions()));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_NO_FATAL_FAILURE(ExtendCheckAndRelease(**client, *lease));
  ASSERT_NO_FATAL_FAILURE(ExpectGoneEverywhere("r"));
  // Nodes 0 and 2 never ran a script of ours, node 1 never a transaction.
  EXPECT_EQ(Calls(0, "evalsha"), 0);
  EXPECT_EQ(Calls(2, "evalsha"), 0);
  EXPECT_GE(Calls(0, "exec"), 2);
  EXPECT_GE(Calls(2, "exec"), 2);
  EXPECT_GE(Calls(1, "evalsha"), 2);
  EXPECT_EQ(Calls(1, "exec"), 0);
}

TEST_F(ScriptlessTest, ExtendAndReleaseOfALostLeaseTouchNothing) {
  Options o = MakeOptions();
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const std::string key = o.key_prefix + "r";
  // Someone else's key on every node now.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fleet_->Command(i, {"SET", key, "other"}).ok());
  absl::StatusOr<Lease> longer = (*client)->Extend(*lease, absl::Seconds(20));
  EXPECT_EQ(longer.status().code(), absl::StatusCode::kFailedPrecondition) << longer.status();
  EXPECT_TRUE((*client)->Release(*lease).ok());
  Drain(**client);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<RedisValue> v = fleet_->Command(i, {"GET", key});
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->str, "other") << "node " << i;
    absl::StatusOr<RedisValue> ttl = fleet_->Command(i, {"PTTL", key});
    EXPECT_EQ(ttl->integer, -1) << "node " << i;
  }
}

// Many callers' transactions on one shared connection per node: each one's
// WATCH must hold until its own EXEC, whoever else is releasing.
TEST_F(ScriptlessTest, ConcurrentCallersNeverShareAWatch) {
  Options o = MakeOptions();
  o.node_timeout = absl::Milliseconds(500);
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr int kThreads = 8;
  constexpr int kRounds = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::string r = absl::StrCat("r", t, "-", i % 3);
        absl::StatusOr<Lease> lease = (*client)->TryAcquire(r, absl::Seconds(10));
        if (!lease.ok()) {
          failures.fetch_add(1);
          continue;
        }
        absl::StatusOr<Lease> longer = (*client)->Extend(*lease, absl::Seconds(10));
        if (!longer.ok()) failures.fetch_add(1);
        if (!(*client)->Release(*lease).ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  // Destroying the client would drop what is still queued.
  Drain(**client);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<RedisValue> keys = fleet_->Command(i, {"KEYS", o.key_prefix + "*"});
    ASSERT_TRUE(keys.ok());
    EXPECT_TRUE(keys->elements.empty()) << "node " << i << " kept " << keys->elements.size();
  }
}

TEST_F(ScriptlessTest, MultiLockIsAllOrNothingOnScriptlessNodes) {
  Options o = MakeOptions();
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  // b is held elsewhere on every node: {a, b, c} must take nothing.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(fleet_->Command(i, {"SET", o.key_prefix + "b", "other", "PX", "30000"}).ok());
  }
  MultiLock ml(client->get());
  absl::StatusOr<MultiLease> none = ml.TryAcquire({"a", "b", "c"}, absl::Seconds(10));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kAborted) << none.status();
  Drain(**client);
  for (int i = 0; i < 3; ++i) {
    for (const char* r : {"a", "c"}) {
      absl::StatusOr<RedisValue> v = fleet_->Command(i, {"EXISTS", o.key_prefix + r});
      ASSERT_TRUE(v.ok());
      EXPECT_EQ(v->integer, 0) << "node " << i << " kept " << r;
    }
  }
  absl::StatusOr<MultiLease> all = ml.TryAcquire({"a", "c", "d"}, absl::Seconds(10));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(ml.Release(*all).ok());
}

TEST_F(ScriptlessTest, FencingTokensIncreaseOnScriptlessNodes) {
  Options o = MakeOptions();
  o.fencing = true;
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<Lease> lease = (*client)->TryAcquire("acct", absl::Seconds(10));
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_GT(lease->fencing_token(), last);
    last = lease->fencing_token();
    ASSERT_TRUE((*client)->Release(*lease).ok());
  }
  Drain(**client);
  // The commit goes to the first two nodes that granted: a scriptless one
  // at least (node 1 is the only other).
  int counters = 0;
  for (int i = 0; i < 3; i += 2) {
    absl::StatusOr<RedisValue> v = fleet_->Command(i, {"GET", o.key_prefix + "acct:fence"});
    ASSERT_TRUE(v.ok());
    counters += v->str.empty() ? 0 : 1;
  }
  EXPECT_GE(counters, 1);
  EXPECT_EQ(Calls(0, "evalsha"), 0);
}

// The lock family's scripts have no script-free form: on a node that
// forbids scripting they are refused with an error naming it. Here two of
// three nodes forbid it, so a shared lock cannot get a quorum.
TEST_F(ScriptlessTest, TheLockFamilyIsRefusedNamingTheNode) {
  auto client = Client::Create(MakeOptions());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_NO_FATAL_FAILURE(ExpectSharedLockRefusedByNode0(**client));
}

// So is the fair lock's: a try and a waiter both get that node's "no".
TEST_F(ScriptlessTest, TheFairLockIsRefusedNamingTheNode) {
  auto client = Client::Create(MakeOptions());
  ASSERT_TRUE(client.ok()) << client.status();
  FairLock fair(client->get(), "queue");
  for (absl::Duration wait : {absl::ZeroDuration(), absl::Milliseconds(300)}) {
    absl::StatusOr<Lease> l = fair.Acquire(absl::Seconds(10), wait);
    ASSERT_FALSE(l.ok()) << "wait " << wait;
    EXPECT_THAT(std::string(l.status().message()),
                HasSubstr(absl::StrCat(fleet_->address(0), " forbids scripting")))
        << l.status();
  }
}

TEST_F(ScriptlessTest, ScriptingRevokedWhileRunningSwitchesThePath) {
  Options o = ScriptsOrTransactions(MakeOptions());
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_FALSE((*client)->Health()[1].scriptless);
  // Node 1's clients now log in as a user that is then denied scripting:
  // here the default user, which the client uses on node 1.
  ASSERT_TRUE(fleet_->Command(1, {"ACL", "SETUSER", "default", "-@scripting"}).ok());
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  // The release's EVALSHA is refused by node 1, which goes script-free and
  // gets the release again as a transaction.
  // The release returns at a quorum (nodes 0 and 2); node 1's refusal and
  // the resend follow, with a moment between them where nothing is in
  // flight (Drain alone may return there): awaited.
  ASSERT_TRUE((*client)->Release(*lease).ok());
  EXPECT_TRUE(testkit::Eventually([&] { return (*client)->Health()[1].scriptless; }, true,
                                  absl::Seconds(5)));
  EXPECT_EQ(testkit::Eventually(
                [&] {
                  absl::StatusOr<RedisValue> v = fleet_->Command(1, {"EXISTS", o.key_prefix + "r"});
                  return v.ok() ? v->integer : -1;
                },
                0LL, absl::Seconds(5)),
            0LL);
}

}  // namespace
}  // namespace redlock
