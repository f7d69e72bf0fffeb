// Valkey 9.1 without its Lua engine (built with BUILD_LUA=module, started
// without --loadmodule of libvalkeylua.so, or with the module unloaded):
// EVAL, EVALSHA and SCRIPT LOAD answer "ERR Could not find scripting engine
// 'lua'". The handshake takes that as a node that forbids scripting
// (RefusesScripting), so the lock takes the script-free path there
// (WATCH/MULTI/EXEC, docs/design.md 5.16) and the lock family is refused
// naming the node. Always on valkey-9.1, whatever REDLOCK_SERVER says
// (skipped when it is not installed, a failure under CI=true).

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "redlock/semaphore.h"
#include "testkit/fleet_suite.h"
#include "tests/integration/own_fleet_test.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::RedisValue;

constexpr char kServer[] = "valkey-9.1";
constexpr char kNoEngine[] = "ERR Could not find scripting engine 'lua'";

class LualessTest : public testkit::OwnFleetTest {
 protected:
  void StartFleet(std::vector<bool> without_lua) {
    OwnFleetTest::StartFleet({.nodes = static_cast<int>(without_lua.size()),
                              .server = kServer,
                              .without_lua = std::move(without_lua)});
  }
  void SetUp() override { REDLOCK_REQUIRE_SERVER(kServer); }
};

TEST_F(LualessTest, TheServerAnswersScriptsWithNoEngine) {
  ASSERT_NO_FATAL_FAILURE(StartFleet({true, false}));
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"EVAL", "return 1", "0"},
           {"SCRIPT", "LOAD", "return 1"},
           {"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"}}) {
    absl::StatusOr<RedisValue> r = fleet_->Command(0, cmd);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->is_error()) << cmd[0];
    if (cmd[0] != "EVALSHA") {
      EXPECT_EQ(r->str, kNoEngine) << cmd[0];
    }
  }
  // The node with its module runs them.
  absl::StatusOr<RedisValue> r = fleet_->Command(1, {"EVAL", "return 1", "0"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->integer, 1) << r->str;
}

TEST_F(LualessTest, HealthSaysWhichNodesForbidScripting) {
  ASSERT_NO_FATAL_FAILURE(StartFleet({true, false, true}));
  auto client = Client::Create(MakeOptions());
  ASSERT_TRUE(client.ok()) << client.status();
  std::string reason;
  ASSERT_NO_FATAL_FAILURE(ExpectNodes0And2Scriptless(**client, &reason));
  EXPECT_EQ(reason, kNoEngine);
}

TEST_F(LualessTest, LocksAreTakenExtendedAndReleasedWithoutLua) {
  ASSERT_NO_FATAL_FAILURE(StartFleet({true, true, true}));
  auto client = Client::Create(MakeOptions());
  ASSERT_TRUE(client.ok()) << client.status();
  auto other = Client::Create(MakeOptions());
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::StatusOr<Lease> taken = (*other)->TryAcquire("r", absl::Seconds(10));
  EXPECT_FALSE(taken.ok()) << "a second client took a held lock";
  ASSERT_NO_FATAL_FAILURE(ExtendCheckAndRelease(**client, *lease));
  const std::string key = MakeOptions().key_prefix + "r";
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<RedisValue> v = fleet_->Command(i, {"EXISTS", key});
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->integer, 0) << "node " << i;
    // The extension and the release ran as Valkey 9.1's own commands
    // (SET ... IFEQ, DELIFEQ), never as scripts.
    EXPECT_EQ(Calls(i, "evalsha"), 0) << "node " << i;
    EXPECT_GE(Calls(i, "delifeq"), 1) << "node " << i;
  }
  // And the lock is free again for the other client.
  absl::StatusOr<Lease> now = (*other)->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_TRUE((*other)->Release(*now).ok());
}

// The lock family's scripts have no script-free form: on a node without
// Lua they are refused with an error naming it. Two of three nodes lack it,
// so no quorum is possible.
// With Lua loaded too: a single lock's release and extension go as the
// server's own commands (issue 38), and its announcement still wakes a
// waiter; a set's stay scripts.
TEST_F(LualessTest, ASingleLocksReleaseAndExtensionUseTheServersCommands) {
  ASSERT_NO_FATAL_FAILURE(StartFleet({false, false, false}));
  Options o = MakeOptions();
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto waiter = Client::Create(o);
  ASSERT_TRUE(waiter.ok()) << waiter.status();
  for (const NodeHealth& h : (*client)->Health()) {
    EXPECT_EQ(h.path, "release by DELIFEQ, extend by SET IFEQ, the rest by scripts") << h.node;
  }
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("one", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::StatusOr<Lease> longer = (*client)->Extend(*lease, absl::Seconds(20));
  ASSERT_TRUE(longer.ok()) << longer.status();
  // A waiter with no polling to speak of: only the announcement wakes it.
  absl::StatusOr<Lease> got;
  std::thread t([&] { got = (*waiter)->Acquire("one", absl::Seconds(10), absl::Seconds(8)); });
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE((*client)->Release(*longer).ok());
  t.join();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE((*waiter)->Release(*got).ok());
  Drain(**client);
  Drain(**waiter);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Calls(i, "evalsha"), 0) << "node " << i << ": no script for a single lock";
    EXPECT_GE(Calls(i, "delifeq"), 2) << "node " << i;
    EXPECT_GE(Calls(i, "publish"), 2) << "node " << i;
  }
  // A lost lease is not re-created by the extension.
  absl::StatusOr<Lease> gone = (*client)->Extend(*longer, absl::Seconds(20));
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kFailedPrecondition) << gone.status();
  ASSERT_NO_FATAL_FAILURE(ExpectGoneEverywhere("one"));
}

TEST_F(LualessTest, TheLockFamilyIsRefusedNamingTheNode) {
  ASSERT_NO_FATAL_FAILURE(StartFleet({true, false, true}));
  auto client = Client::Create(MakeOptions());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_NO_FATAL_FAILURE(ExpectSharedLockRefusedByNode0(**client));

  Semaphore sem(client->get(), "pool", 2);
  absl::StatusOr<Permit> permit = sem.TryAcquire(absl::Seconds(10));
  ASSERT_FALSE(permit.ok());
  EXPECT_THAT(std::string(permit.status().message()),
              HasSubstr(absl::StrCat(fleet_->address(2), " forbids scripting")));
}

// A plain lock on the same fleet still works: the family's refusal is the
// family's only.
TEST_F(LualessTest, APlainLockWorksWhereTheFamilyIsRefused) {
  ASSERT_NO_FATAL_FAILURE(StartFleet({true, false, true}));
  auto client = Client::Create(MakeOptions());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  // The call returns at the quorum; every node, with Lua or without, then
  // holds the token.
  const std::string key = MakeOptions().key_prefix + "r";
  for (int i = 0; i < 3; ++i) {
    auto value = [&] {
      absl::StatusOr<RedisValue> v = fleet_->Command(i, {"GET", key});
      return v.ok() ? v->str : std::string("(no answer)");
    };
    EXPECT_EQ(testkit::Eventually(value, lease->token()), lease->token()) << "node " << i;
  }
  EXPECT_TRUE((*client)->Release(*lease).ok());
}

// The Lua module unloaded while the client is connected (MODULE UNLOAD lua):
// the node's script cache is gone with it, so a set's release (a script:
// a single lock's goes as DELIFEQ) meets NOSCRIPT, and its EVAL form, and
// the reload, "no scripting engine". The node goes script-free and no key
// of ours is left there.
TEST_F(LualessTest, TheModuleUnloadedWhileRunningSwitchesThePath) {
  ASSERT_NO_FATAL_FAILURE(OwnFleetTest::StartFleet(
      {.nodes = 3, .extra_args = {"--enable-module-command", "local"}, .server = kServer}));
  Options o = MakeOptions();
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_FALSE((*client)->Health()[1].scriptless);
  Client::SetRequest set;
  set.resources = {"r", "s"};
  set.ttl = absl::Seconds(30);
  absl::StatusOr<std::vector<Lease>> lease = (*client)->AcquireSet(set);
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::StatusOr<RedisValue> unloaded = fleet_->Command(1, {"MODULE", "UNLOAD", "lua"});
  ASSERT_TRUE(unloaded.ok()) << unloaded.status();
  ASSERT_EQ(unloaded->str, "OK");
  EXPECT_TRUE((*client)->ReleaseSet(*lease, 0).ok());
  const std::string key = o.key_prefix + "r";
  auto exists = [&] {
    absl::StatusOr<RedisValue> v = fleet_->Command(1, {"EXISTS", key});
    return v.ok() ? v->integer : -1;
  };
  EXPECT_EQ(testkit::Eventually(exists, 0LL, absl::Seconds(10)), 0)
      << "the release never reached the node without Lua";
  EXPECT_TRUE((*client)->Health()[1].scriptless);
  EXPECT_EQ((*client)->Health()[1].scriptless_reason, kNoEngine);
  // And the next lock runs there as transactions.
  absl::StatusOr<Lease> again = (*client)->TryAcquire("r", absl::Seconds(30));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*client)->Release(*again).ok());
  EXPECT_EQ(testkit::Eventually(exists, 0LL, absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace redlock
