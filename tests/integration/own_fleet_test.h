// A fixture for suites whose tests each start a fleet of their own (a
// server configuration the shared fleet of testkit/fleet_suite.h cannot
// have: nodes that forbid scripting, a server without Lua, one node): the
// fleet, options with a per-test key prefix, and a wait until a client has
// nothing in flight.

#ifndef REDLOCK_TESTS_INTEGRATION_OWN_FLEET_TEST_H_
#define REDLOCK_TESTS_INTEGRATION_OWN_FLEET_TEST_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
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

  std::unique_ptr<Fleet> fleet_;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTS_INTEGRATION_OWN_FLEET_TEST_H_
