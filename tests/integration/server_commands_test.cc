// Detection of the script-free compare-and-set commands
// (redlock/internal/server_commands.h) on the selected server
// (REDLOCK_SERVER, default redis-7.0): what Health() says each node has
// must be what the server does when sent the command, and an ACL user that
// may not run COMMAND gets "none" and a working connection. The compat run
// (scripts/compat.sh) runs this on every server and records the result in
// docs/compat.md.

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "testkit/fleet_suite.h"
#include "tests/integration/own_fleet_test.h"

namespace redlock {
namespace {

using testkit::RedisValue;

class ServerCommandsTest : public testkit::OwnFleetTest {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    StartFleet({.nodes = 1});
  }
  // A client with `o` into `*client`, and its node's health (connected)
  // into `*health`. Use with ASSERT_NO_FATAL_FAILURE.
  void Connect(Options o, std::unique_ptr<Client>* client, NodeHealth* health) {
    auto c = Client::Create(std::move(o));
    ASSERT_TRUE(c.ok()) << c.status();
    *client = *std::move(c);
    *health = (*client)->Health()[0];
    EXPECT_TRUE(health->connected) << health->last_error;
  }
  NodeHealth HealthOf(Options o) {
    auto client = Client::Create(std::move(o));
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return {};
    return (*client)->Health()[0];
  }
  // No key prefix: the tests read the lock keys by name.
  Options MakeOptions() {
    Options o;
    o.nodes = fleet_->endpoints();
    return o;
  }
  RedisValue Run(const std::vector<std::string>& args) {
    absl::StatusOr<RedisValue> r = fleet_->Command(0, args);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : RedisValue{};
  }
};

// Each flag against what the server does with the command itself.
TEST_F(ServerCommandsTest, HealthSaysWhatTheServerDoes) {
  const NodeHealth h = HealthOf(MakeOptions());
  ASSERT_TRUE(h.connected) << h.last_error;
  ASSERT_TRUE(h.commands_known);
  const std::string server = fleet_->server().name;
  std::vector<std::string> have;
  if (h.has_delifeq) have.push_back("DELIFEQ");
  if (h.has_delex_ifeq) have.push_back("DELEX IFEQ");
  if (h.has_set_ifeq) have.push_back("SET IFEQ");
  // For scripts/compat.sh's matrix (docs/compat.md).
  std::cout << "[compat] " << server
            << " commands: " << (have.empty() ? "none" : absl::StrJoin(have, ", ")) << "\n";

  // A compare-and-delete `cmd` of our key: it deletes where Health says the
  // server has it (`has`), and is an error where not.
  auto deletes_if_equal = [&](const std::vector<std::string>& cmd, bool has) {
    Run({"SET", "k", "mine"});
    RedisValue del = Run(cmd);
    if (has) {
      EXPECT_EQ(del.integer, 1) << server << ": " << del.str;
      EXPECT_EQ(Run({"EXISTS", "k"}).integer, 0) << server;
    } else {
      EXPECT_TRUE(del.is_error()) << server << " ran " << cmd[0] << " but Health says it has none";
    }
  };
  deletes_if_equal({"DELIFEQ", "k", "mine"}, h.has_delifeq);
  deletes_if_equal({"DELEX", "k", "IFEQ", "mine"}, h.has_delex_ifeq);

  Run({"SET", "k", "mine"});
  RedisValue set = Run({"SET", "k", "again", "IFEQ", "mine", "PX", "10000"});
  RedisValue other = Run({"SET", "k", "theirs", "IFEQ", "not-mine", "PX", "10000"});
  if (h.has_set_ifeq) {
    EXPECT_EQ(set.str, "OK") << server;
    EXPECT_EQ(other.type, RedisValue::Type::kNil) << server << ": " << other.str;
    EXPECT_EQ(Run({"GET", "k"}).str, "again") << server;
  } else {
    EXPECT_TRUE(set.is_error()) << server << " ran SET IFEQ but Health says it has none";
    EXPECT_EQ(Run({"GET", "k"}).str, "mine") << server;
  }
}

// What each server has, as checked above on each (docs/compat.md): the
// table the compat run records.
TEST_F(ServerCommandsTest, WhatEachServerHas) {
  const NodeHealth h = HealthOf(MakeOptions());
  ASSERT_TRUE(h.commands_known);
  const std::string server = fleet_->server().name;
  struct Has {
    bool delifeq, delex, set_ifeq;
  };
  Has want{false, false, false};
  if (server == "valkey-9.1") want = {true, false, true};
  EXPECT_EQ(h.has_delifeq, want.delifeq) << server;
  EXPECT_EQ(h.has_delex_ifeq, want.delex) << server;
  EXPECT_EQ(h.has_set_ifeq, want.set_ifeq) << server;
}

// Options::server_commands off: nothing is asked at the handshake, every
// node releases and extends by the scripts, and locks work as before.
TEST_F(ServerCommandsTest, OffKeepsEveryNodeOnTheScripts) {
  const NodeHealth on = HealthOf(MakeOptions());
  ASSERT_TRUE(on.commands_known);
  Options o = MakeOptions();
  o.server_commands = false;
  std::unique_ptr<Client> client;
  NodeHealth off;
  ASSERT_NO_FATAL_FAILURE(Connect(o, &client, &off));
  EXPECT_FALSE(off.commands_known);
  EXPECT_FALSE(off.has_delifeq || off.has_delex_ifeq || off.has_set_ifeq);
  EXPECT_EQ(off.path, "scripts") << fleet_->server().name;
  if (on.has_delifeq || on.has_delex_ifeq || on.has_set_ifeq) {
    EXPECT_NE(on.path, off.path) << fleet_->server().name;
  }
  absl::StatusOr<Lease> lease = client->TryAcquire("off-lock", absl::Seconds(5));
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::StatusOr<Lease> longer = client->Extend(*lease, absl::Seconds(10));
  ASSERT_TRUE(longer.ok()) << longer.status();
  EXPECT_GT(Run({"PTTL", "off-lock"}).integer, 5000);
  EXPECT_TRUE(client->Release(*longer).ok());
  EXPECT_EQ(Run({"EXISTS", "off-lock"}).integer, 0);
}

// A user that may not run COMMAND: none of the commands, and the node
// still takes locks.
TEST_F(ServerCommandsTest, AUserWithoutCommandGetsNoneAndAWorkingNode) {
  ASSERT_TRUE(Run({"ACL", "SETUSER", "nocmd", "on", ">pw", "~*", "&*", "+@all", "-command"}).str ==
              "OK");
  Options o = MakeOptions();
  o.nodes[0].username = "nocmd";
  o.nodes[0].password = "pw";
  std::unique_ptr<Client> client;
  NodeHealth h;
  ASSERT_NO_FATAL_FAILURE(Connect(o, &client, &h));
  EXPECT_TRUE(h.commands_known);
  EXPECT_FALSE(h.has_delifeq || h.has_delex_ifeq || h.has_set_ifeq);
  absl::StatusOr<Lease> lease = client->TryAcquire("nocmd-lock", absl::Seconds(5));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(client->Release(*lease).ok());
}

}  // namespace
}  // namespace redlock
