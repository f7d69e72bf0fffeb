// A fixture for suites whose tests each start a fleet of their own (a
// server configuration the shared fleet of testkit/fleet_suite.h cannot
// have: nodes that forbid scripting, a server without Lua, one node): the
// fleet, options with a per-test key prefix, and a wait until a client has
// nothing in flight.

#ifndef REDLOCK_TESTS_INTEGRATION_OWN_FLEET_TEST_H_
#define REDLOCK_TESTS_INTEGRATION_OWN_FLEET_TEST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "redlock/rw_lock.h"
#include "testkit/fleet.h"

namespace redlock::testkit {

class OwnFleetTest : public ::testing::Test {
 protected:
  // Starts the fleet (a fatal failure if it does not start: call it under
  // ASSERT_NO_FATAL_FAILURE outside SetUp).
  void StartFleet(FleetOptions options) {
    auto fleet = Fleet::Start(std::move(options));
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = *std::move(fleet);
  }

  // The fleet's nodes and this test's key prefix ("<test name>/").
  Options MakeOptions() {
    Options o;
    o.nodes = fleet_->endpoints();
    o.key_prefix =
        absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
    return o;
  }

  // Fleet::CommandCalls.
  long long Calls(int node, const std::string& command) {
    return fleet_->CommandCalls(node, command);
  }

  // A call returns at the quorum: the other nodes' commands may still be on
  // their way (on a script-free node, queued one transaction at a time).
  // Waits until none is (bounded: a failure after 5 s).
  static void Drain(Client& client) {
    for (int i = 0; i < 1000; ++i) {
      size_t in_flight = 0;
      for (const NodeHealth& h : client.Health()) {
        in_flight += h.in_flight + h.transactions_waiting;
      }
      if (in_flight == 0) return;
      absl::SleepFor(absl::Milliseconds(5));
    }
    ADD_FAILURE() << "commands still in flight after 5 s";
  }

  // Extends `lease` (of "r") to 20 s, checks that every node has it for more
  // than 10 s, then releases it; waits for `client` to have nothing in
  // flight after each. Use with ASSERT_NO_FATAL_FAILURE.
  void ExtendCheckAndRelease(Client& client, const Lease& lease) {
    absl::StatusOr<Lease> longer = client.Extend(lease, absl::Seconds(20));
    ASSERT_TRUE(longer.ok()) << longer.status();
    Drain(client);
    ASSERT_NO_FATAL_FAILURE(ExpectTtlAboveEverywhere("r", 10000));
    ASSERT_TRUE(client.Release(*longer).ok());
    Drain(client);
  }

  // This test's key for `resource` has more than `ms` left on every node.
  void ExpectTtlAboveEverywhere(const std::string& resource, int64_t ms) {
    const std::string key = MakeOptions().key_prefix + resource;
    for (int i = 0; i < fleet_->size(); ++i) {
      absl::StatusOr<RedisValue> ttl = fleet_->Command(i, {"PTTL", key});
      ASSERT_TRUE(ttl.ok()) << ttl.status();
      EXPECT_GT(ttl->integer, ms) << "node " << i;
    }
  }

  // This test's key for `resource` is on no node.
  void ExpectGoneEverywhere(const std::string& resource) {
    const std::string key = MakeOptions().key_prefix + resource;
    for (int i = 0; i < fleet_->size(); ++i) {
      absl::StatusOr<RedisValue> v = fleet_->Command(i, {"EXISTS", key});
      ASSERT_TRUE(v.ok()) << v.status();
      EXPECT_EQ(v->integer, 0) << "node " << i;
    }
  }

  // On a fleet of three whose nodes 0 and 2 cannot run scripts (they forbid
  // them, or have no Lua): a client's health marks those two scriptless,
  // with a reason (node 0's into `*reason`), and node 1 not; all connected.
  static void ExpectNodes0And2Scriptless(Client& client, std::string* reason) {
    std::vector<NodeHealth> h = client.Health();
    ASSERT_EQ(h.size(), 3u);
    EXPECT_TRUE(h[0].scriptless);
    EXPECT_FALSE(h[1].scriptless);
    EXPECT_TRUE(h[2].scriptless);
    *reason = h[0].scriptless_reason;
    EXPECT_TRUE(h[1].scriptless_reason.empty());
    for (const NodeHealth& n : h) EXPECT_TRUE(n.connected) << n.node << ": " << n.last_error;
  }

  // On a fleet whose node 0 cannot run scripts (it forbids them, or has no
  // Lua): the lock family's scripts have no script-free form, so a shared
  // lock is refused as unavailable, the error naming that node.
  void ExpectSharedLockRefusedByNode0(Client& client) {
    ReadWriteLock rw(&client, "doc");
    absl::StatusOr<Lease> shared = rw.TryAcquireShared(absl::Seconds(10));
    ASSERT_FALSE(shared.ok());
    EXPECT_EQ(shared.status().code(), absl::StatusCode::kUnavailable) << shared.status();
    EXPECT_THAT(std::string(shared.status().message()),
                ::testing::HasSubstr(absl::StrCat(fleet_->address(0), " forbids scripting")));
    EXPECT_THAT(std::string(shared.status().message()),
                ::testing::HasSubstr("no script-free form"));
  }

  std::unique_ptr<Fleet> fleet_;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTS_INTEGRATION_OWN_FLEET_TEST_H_
