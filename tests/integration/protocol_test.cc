// Nodes that break the protocol's contract: well-formed replies of the wrong
// type, and one server listed twice. Real redis-server processes plus fake
// servers (scripted_server.h) that answer what a test tells them to.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "redlock/internal/engine.h"
#include "testkit/fleet_suite.h"
#include "tests/integration/scripted_server.h"

namespace redlock {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testkit::ScriptedServer;

// Runs `call` on a thread of its own and gives it `limit` to return; a call
// that never returns aborts the test binary (it cannot be joined).
template <typename F>
auto WithinDeadline(F call, absl::Duration limit) -> decltype(call()) {
  auto future = std::async(std::launch::async, std::move(call));
  if (future.wait_for(absl::ToChronoNanoseconds(limit)) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: the call did not return within %s\n",
                 absl::FormatDuration(limit).c_str());
    std::abort();
  }
  return future.get();
}

// SET answered with an integer, scripts with a bulk string: each reply is
// well formed, and none can be the answer to its command.
std::string WrongTypes(const std::vector<std::string>& cmd) {
  if (!cmd.empty() && cmd[0] == "SET") return ":1\r\n";
  if (!cmd.empty() && (cmd[0] == "EVALSHA" || cmd[0] == "EVAL")) return ScriptedServer::Bulk("foo");
  return ScriptedServer::Default(cmd);
}

class ProtocolTest : public testkit::FleetSuite {
 protected:
  // Node 0 of the fleet plus `fakes` fake servers.
  Options WithFakes(const std::vector<std::unique_ptr<ScriptedServer>>& fakes) {
    Options o = MakeOptions();
    o.nodes = {fleet_->endpoint(0)};
    for (const auto& f : fakes) {
      Endpoint e;
      e.host = "127.0.0.1";
      e.port = f->port();
      o.nodes.push_back(e);
    }
    return o;
  }
  // A client with options `o` (one of a hostile node) into `*client`, and
  // its try of "r" with `ttl`, which must fail within 10 s: its status into
  // `*refused`. Use with ASSERT_NO_FATAL_FAILURE.
  void TryFails(const Options& o, absl::Duration ttl, std::unique_ptr<Client>* client,
                absl::Status* refused) {
    *client = MakeClient(o);
    ASSERT_NE(*client, nullptr);
    Client* c = client->get();
    absl::StatusOr<Lease> lease =
        WithinDeadline([&] { return c->TryAcquire("r", ttl); }, absl::Seconds(10));
    ASSERT_FALSE(lease.ok());
    *refused = lease.status();
  }
};

TEST_F(ProtocolTest, WrongTypeRepliesFromTwoOfThreeNodesFailTheCallWithinItsDeadline) {
  std::vector<std::unique_ptr<ScriptedServer>> fakes;
  for (int i = 0; i < 2; ++i) {
    auto s = ScriptedServer::Start([i](const std::vector<std::string>& cmd) {
      if (!cmd.empty() && cmd[0] == "INFO") {
        return ScriptedServer::Default(cmd, absl::StrCat("fake-run-id-", i));
      }
      return WrongTypes(cmd);
    });
    ASSERT_TRUE(s.ok()) << s.status();
    fakes.push_back(*std::move(s));
  }
  auto client = MakeClient(WithFakes(fakes));
  ASSERT_NE(client, nullptr);

  // A free resource.
  absl::StatusOr<Lease> free = WithinDeadline(
      [&] { return client->TryAcquire("free", absl::Seconds(10)); }, absl::Seconds(10));
  ASSERT_FALSE(free.ok());
  EXPECT_THAT(std::string(free.status().message()),
              AllOf(HasSubstr("(integer) 1"), HasSubstr("cannot answer")));

  // A resource held elsewhere (on the real node).
  REDLOCK_ASSERT_OK(fleet_->Command(0, {"SET", prefix_ + "held", "other", "PX", "60000"}).status());
  absl::StatusOr<Lease> held = WithinDeadline(
      [&] { return client->TryAcquire("held", absl::Seconds(10)); }, absl::Seconds(10));
  EXPECT_FALSE(held.ok());

  // Release and extend meet a bulk string where an integer must be.
  absl::Status released = WithinDeadline(
      [&] { return client->Release(Lease::ForToken("free", "tok")); }, absl::Seconds(10));
  EXPECT_FALSE(released.ok());
  absl::StatusOr<Lease> extended = WithinDeadline(
      [&] { return client->Extend(Lease::ForToken("free", "tok"), absl::Seconds(5)); },
      absl::Seconds(10));
  EXPECT_FALSE(extended.ok());

  // Nothing of ours stayed on the real node.
  EXPECT_EQ(testkit::Eventually([&] { return Get(0, "free"); }, std::string()), "");
  EXPECT_EQ(Get(0, "held"), "other");
}

// A fake node that answers the lock commands (SET, scripts) with `reply`
// and counts its connections (the handshake's INFO is sent once on each).
struct HostileNode {
  std::unique_ptr<ScriptedServer> server;
  std::shared_ptr<std::atomic<int>> connections = std::make_shared<std::atomic<int>>(0);
};

HostileNode StartHostile(std::string reply) {
  HostileNode h;
  auto connections = h.connections;
  auto s = ScriptedServer::Start([reply, connections](const std::vector<std::string>& cmd) {
    if (!cmd.empty() && cmd[0] == "INFO") {
      ++*connections;
      return ScriptedServer::Default(cmd, "hostile");
    }
    if (!cmd.empty() && (cmd[0] == "SET" || cmd[0] == "EVALSHA" || cmd[0] == "EVAL")) return reply;
    return ScriptedServer::Default(cmd);
  });
  EXPECT_TRUE(s.ok()) << s.status();
  if (s.ok()) h.server = *std::move(s);
  return h;
}

// A one-node client of the hostile node: its error is the call's.
Options HostileOnly(const HostileNode& h) {
  Options o;
  Endpoint e;
  e.host = "127.0.0.1";
  e.port = h.server->port();
  o.nodes = {e};
  o.max_attempts = 1;
  // The refusal must come from the limits, never from a timeout.
  o.node_timeout = absl::Seconds(5);
  return o;
}

TEST_F(ProtocolTest, AnArrayHeaderAnnouncingBillionsOfElementsFailsTheNodeNotTheProcess) {
  // Before the limit, hiredis' reader had the array allocated at its header:
  // bad_alloc thrown through C frames, std::terminate.
  HostileNode h = StartHostile("*2000000000\r\n");
  ASSERT_NE(h.server, nullptr);
  Options o = HostileOnly(h);
  std::unique_ptr<Client> client;
  absl::Status refused;
  ASSERT_NO_FATAL_FAILURE(TryFails(o, absl::Seconds(10), &client, &refused));
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()),
              AllOf(HasSubstr(o.nodes[0].ToString()), HasSubstr("2000000000"),
                    HasSubstr("Options::max_reply_elements (4096)")));
  // Dropped and reconnected, as for any protocol violation.
  EXPECT_GE(testkit::Eventually([&] { return std::min(h.connections->load(), 2); }, 2), 2);
}

TEST_F(ProtocolTest, ABulkStringAnnouncingGigabytesIsRefusedAtItsHeader) {
  // The header and a first 256 KiB: the node is refused without the client
  // waiting (or buffering) for the rest.
  HostileNode h = StartHostile("$2000000000\r\n" + std::string(256 << 10, 'x'));
  ASSERT_NE(h.server, nullptr);
  Options o = HostileOnly(h);
  std::unique_ptr<Client> client;
  absl::Status refused;
  ASSERT_NO_FATAL_FAILURE(TryFails(o, absl::Seconds(30), &client, &refused));
  EXPECT_THAT(std::string(refused.message()),
              AllOf(HasSubstr(o.nodes[0].ToString()), HasSubstr("2000000000 bytes announced"),
                    HasSubstr("Options::max_reply_bytes (1048576)")));
  EXPECT_THAT(client->Health().at(0).last_error, HasSubstr("max_reply_bytes"));
}

TEST_F(ProtocolTest, ALineWithoutEndIsRefusedOnceItPassesTheLimit) {
  // A status line of 8 MiB and no CRLF: nothing announces its size.
  HostileNode h = StartHostile("+" + std::string(8 << 20, 'x'));
  ASSERT_NE(h.server, nullptr);
  Options o = HostileOnly(h);
  o.max_reply_bytes = kMinReplyBytes;
  std::unique_ptr<Client> client;
  absl::Status refused;
  ASSERT_NO_FATAL_FAILURE(TryFails(o, absl::Seconds(30), &client, &refused));
  EXPECT_THAT(std::string(refused.message()),
              AllOf(HasSubstr("bytes received of one reply"),
                    HasSubstr(absl::StrCat("Options::max_reply_bytes (", kMinReplyBytes, ")"))));
}

TEST_F(ProtocolTest, RepliesUpToTheLimitsAreRead) {
  // Inspect returns the lock key's value, whatever another client wrote.
  Options o = MakeOptions();
  o.max_reply_bytes = kMinReplyBytes;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  const std::string big(kMinReplyBytes - 100, 'v');
  const std::string too_big(kMinReplyBytes, 'v');
  REDLOCK_ASSERT_OK(fleet_->Command(0, {"SET", prefix_ + "fits", big, "PX", "60000"}).status());
  REDLOCK_ASSERT_OK(fleet_->Command(1, {"SET", prefix_ + "over", too_big, "PX", "60000"}).status());
  absl::StatusOr<std::vector<NodeView>> fits = client->Inspect("fits");
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->at(0).token, big);
  absl::StatusOr<std::vector<NodeView>> over = client->Inspect("over");
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_THAT(std::string(over->at(1).status.message()), HasSubstr("max_reply_bytes"));
  // The node's connection comes back for the next call.
  EXPECT_TRUE(testkit::Eventually(
      [&] { return client->TryAcquire("after", absl::Seconds(10)).ok(); }, true));
}

TEST_F(ProtocolTest, AHugeValueUnderAFencingCounterCostsOneVoteNotTheConnection) {
  // Round 1 returns the counters; garbage there is not a counter, and the
  // script sends no more of it than a counter can be long. One node, so its
  // vote is the call's.
  Options o = MakeOptions();
  o.nodes = {fleet_->endpoint(0)};
  o.fencing = true;
  o.max_attempts = 1;
  // The script copies the 4 MB value into Lua: slow on a loaded machine, and
  // this is about the vote and the connection, not speed.
  o.node_timeout = absl::Seconds(5);
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  REDLOCK_ASSERT_OK(
      fleet_->Command(0, {"SET", prefix_ + "fenced:fence", std::string(4 << 20, '9')}).status());
  absl::StatusOr<Lease> lease = client->TryAcquire("fenced", absl::Seconds(10));
  ASSERT_FALSE(lease.ok());
  EXPECT_THAT(std::string(lease.status().message()), HasSubstr("not a decimal number"));
  // No reconnect: the node's connection stays up and clean.
  EXPECT_TRUE(client->Health().at(0).connected);
  EXPECT_EQ(client->Health().at(0).last_error, "");
  REDLOCK_ASSERT_OK(fleet_->Command(0, {"SET", prefix_ + "fenced:fence", "41"}).status());
  lease = client->TryAcquire("fenced", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->fencing_token(), 42u);
}

TEST_F(ProtocolTest, OneServerUnderTwoNamesIsRefusedAtCreate) {
  Options o = MakeOptions();
  Endpoint by_name = fleet_->endpoint(0);
  by_name.host = "localhost";
  o.nodes = {fleet_->endpoint(0), by_name, fleet_->endpoint(1)};
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(o);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(client.status())) << client.status();
  EXPECT_THAT(
      std::string(client.status().message()),
      AllOf(HasSubstr(fleet_->endpoint(0).ToString()),
            HasSubstr(absl::StrCat("localhost:", fleet_->port(0))), HasSubstr("same server")));
}

TEST_F(ProtocolTest, TwoEndpointsReachingOneServerAreRefusedByRunId) {
  // Two addresses no resolver can match, one server behind both (as through
  // a proxy or a port forward): the same run_id gives it away.
  std::vector<std::unique_ptr<ScriptedServer>> fakes;
  for (int i = 0; i < 2; ++i) {
    auto s = ScriptedServer::Start(
        [](const std::vector<std::string>& cmd) { return ScriptedServer::Default(cmd, "same"); });
    ASSERT_TRUE(s.ok()) << s.status();
    fakes.push_back(*std::move(s));
  }
  Options o = WithFakes(fakes);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(o);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(client.status())) << client.status();
  EXPECT_THAT(std::string(client.status().message()),
              AllOf(HasSubstr(o.nodes[1].ToString()), HasSubstr(o.nodes[2].ToString()),
                    HasSubstr("run_id")));

  // Found only after Create (no waiting for connections): the second one is
  // refused with that message, and never votes.
  o.wait_for_connections = false;
  auto late = MakeClient(o);
  ASSERT_NE(late, nullptr);
  // Refused and connected are reached in either order (a slow build connects
  // the third node after the second was refused): wait for both.
  struct Counts {
    int refused = 0, connected = 0;
    bool operator==(const Counts& o) const {
      return refused == o.refused && connected == o.connected;
    }
  };
  auto counts = [&] {
    Counts c;
    for (const NodeHealth& n : late->Health()) {
      c.refused += absl::StrContains(n.last_error, "same server");
      c.connected += n.connected;
    }
    return c;
  };
  const Counts seen = testkit::Eventually(counts, Counts{1, 2}, absl::Seconds(5));
  EXPECT_EQ(seen.refused, 1);
  EXPECT_EQ(seen.connected, 2);
}

// A server reached at two loopback addresses, by an ACL user that may not
// run INFO (it is in @dangerous): no resolver and no run_id can tell the two
// entries apart.
class UnverifiedIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    auto fleet = testkit::Fleet::Start(
        {.nodes = 2,
         .extra_args = {"--bind", "127.0.0.1", "127.0.0.2", "--user", "locker", "on", ">pw", "~*",
                        "&*", "+@all", "-@dangerous"}});
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = *std::move(fleet);
  }

  // Node 0 twice (127.0.0.1 and 127.0.0.2), then node 1.
  Options TwiceListed() {
    Options o;
    for (int i : {0, 0, 1}) {
      Endpoint e = fleet_->endpoint(i);
      e.username = "locker";
      e.password = "pw";
      o.nodes.push_back(e);
    }
    o.nodes[1].host = "127.0.0.2";
    o.max_attempts = 1;
    return o;
  }

  std::unique_ptr<testkit::Fleet> fleet_;
};

TEST_F(UnverifiedIdentityTest, ANodeWhoseIdentityCannotBeReadIsRefused) {
  Options o = TwiceListed();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(o);
  if (client.ok()) {
    // What the check prevents: one server's two entries are two votes for
    // Extend, which a lease that holds on that server alone passes.
    absl::StatusOr<Lease> lease = (*client)->TryAcquire("r", absl::Seconds(30));
    ASSERT_TRUE(lease.ok()) << lease.status();
    REDLOCK_ASSERT_OK(fleet_->Command(1, {"DEL", "r"}).status());
    absl::StatusOr<Lease> extended = (*client)->Extend(*lease, absl::Seconds(30));
    FAIL() << "Create accepted one server listed twice without checking it; Extend then "
           << (extended.ok() ? "succeeded on that one server's two votes"
                             : std::string(extended.status().message()));
  }
  EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
  EXPECT_THAT(std::string(client.status().message()),
              AllOf(HasSubstr(o.nodes[0].ToString()), HasSubstr("INFO"),
                    HasSubstr("require_node_identity")));

  // Found after Create: the node is refused on every connection, with that
  // message in Health().
  o.wait_for_connections = false;
  auto late = Client::Create(o);
  ASSERT_TRUE(late.ok()) << late.status();
  auto refused = [&] {
    int n = 0;
    for (const NodeHealth& h : (*late)->Health()) {
      n += absl::StrContains(h.last_error, "require_node_identity");
    }
    return n;
  };
  EXPECT_EQ(testkit::Eventually(refused, 3), 3);
  EXPECT_FALSE((*late)->TryAcquire("r", absl::Seconds(30)).ok());
}

TEST_F(UnverifiedIdentityTest, OneNodeNeedsNoIdentityAndTheCheckCanBeWaived) {
  Options one = TwiceListed();
  one.nodes.resize(1);
  auto single = Client::Create(one);
  ASSERT_TRUE(single.ok()) << single.status();
  REDLOCK_EXPECT_OK((*single)->TryAcquire("alone", absl::Seconds(10)).status());

  Options waived = TwiceListed();
  waived.nodes.erase(waived.nodes.begin() + 1);  // two distinct servers
  waived.require_node_identity = false;
  auto client = Client::Create(waived);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("waived", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->nodes_granted(), 2);
}

// A subscriber connection (release announcements) whose node stops
// answering on it while the connection stays open (half-open: a host that
// vanished, a NAT that forgot the flow) delivers nothing again, and nothing
// shows it. The fake node answers every command but a PING with an argument,
// which only the keep-alive sends: the connection must be replaced, and the
// channels subscribed again on the new one.
TEST(SideConnectionTest, ASilentSubscriberConnectionIsReplaced) {
  std::atomic<int> subscribes{0};
  auto server = ScriptedServer::Start([&](const std::vector<std::string>& cmd) -> std::string {
    if (cmd[0] == "SUBSCRIBE") {
      ++subscribes;
      return absl::StrCat("*3\r\n", ScriptedServer::Bulk("subscribe"), ScriptedServer::Bulk(cmd[1]),
                          ":1\r\n");
    }
    if (cmd[0] == "PING" && cmd.size() > 1) return "";  // silent from here on
    return ScriptedServer::Default(cmd);
  });
  ASSERT_TRUE(server.ok()) << server.status();
  internal::Engine::Config config;
  Endpoint e;
  e.host = "127.0.0.1";
  e.port = (*server)->port();
  config.nodes = {e};
  auto engine = internal::Engine::Start(config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  (*engine)->WaitForFirstConnections(absl::Seconds(5));
  (*engine)->SetMessageHandler([](int, const std::string&, const std::string&) {});
  (*engine)->Subscribe({"redlock:release:r"});
  ASSERT_EQ(testkit::Eventually([&] { return subscribes.load() >= 1; }, true, absl::Seconds(5)),
            true);
  EXPECT_EQ(testkit::Eventually([&] { return subscribes.load() >= 2; }, true, absl::Seconds(15)),
            true)
      << "the silent subscriber connection was kept: release announcements are lost for good";
}

}  // namespace
}  // namespace redlock
