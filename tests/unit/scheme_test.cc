// Endpoint schemes and their locators (internal/scheme.h, locator.h), without
// a server: which scheme owns an endpoint, their names and keys, and what
// each locator tells the engine before anything is asked.

#include "redlock/internal/scheme.h"

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/internal/sentinel_locator.h"

namespace redlock::internal {
namespace {

#define REDLOCK_EXPECT_OK_UNIT(expr) \
  do {                               \
    const absl::Status st_ = (expr); \
    EXPECT_TRUE(st_.ok()) << st_;    \
  } while (0)

// A Host that records what a locator asks of the engine.
class RecordingHost : public Locator::Host {
 public:
  void MasterAt(MasterTarget target, const std::string& why) override {
    masters.push_back(target.host + ":" + std::to_string(target.port) + " " + why);
  }
  void Unlocated(const std::string& why) override { unlocated.push_back(why); }
  void FirstAttemptDone() override { ++first_attempts; }
  void Watch(const Connection&, uint32_t, bool, bool) override {}
  void Unwatch(const Connection&) override {}
  Connection::Progress Io(Connection&, uint32_t, uint32_t, std::vector<Reply>*) override {
    return {};
  }
  bool MasterConnected() const override { return false; }
  bool stopping() const override { return false; }
  int AddShard(std::unique_ptr<Locator> locator, const std::string& name) override {
    shards.push_back(name);
    shard_locators.push_back(std::move(locator));
    return 100 + static_cast<int>(shards.size()) - 1;
  }
  void Query(const Command& command, NodeCallback done) override {
    queries.push_back(command.payload);
    (void)done;
  }
  void NextAttemptAt(MasterTarget target) override {
    next_attempts.push_back(target.host + ":" + std::to_string(target.port));
  }
  void ShardState(int shard, ShardHealth* out) const override { out->connected = shard != 101; }

  std::vector<std::string> masters;
  std::vector<std::string> shards;  // AddShard's names, engine index 100 + i
  std::vector<std::unique_ptr<Locator>> shard_locators;
  std::vector<std::string> queries;
  std::vector<std::string> next_attempts;
  std::vector<std::string> unlocated;
  int first_attempts = 0;
};

std::unique_ptr<Locator> Make(const Endpoint& e, RecordingHost* host) {
  LocatorEnv env;
  env.host = host;
  return SchemeOf(e).MakeLocator(e, env);
}

TEST(Schemes, EachUrlFormHasItsScheme) {
  const EndpointScheme* bare = SchemeForUrl("");
  ASSERT_NE(bare, nullptr);
  EXPECT_EQ(SchemeForUrl("redis"), bare);
  EXPECT_EQ(SchemeForUrl("rediss"), bare);
  const EndpointScheme* sentinel = SchemeForUrl("redis+sentinel");
  ASSERT_NE(sentinel, nullptr);
  EXPECT_NE(sentinel, bare);
  EXPECT_EQ(SchemeForUrl("rediss+sentinel"), sentinel);
  EXPECT_EQ(SchemeForUrl("redis+tls"), nullptr);
  const EndpointScheme* cluster = SchemeForUrl("redis+cluster");
  ASSERT_NE(cluster, nullptr);
  EXPECT_EQ(SchemeForUrl("rediss+cluster"), cluster);
  EXPECT_EQ(KnownUrlSchemes(),
            "redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel://, "
            "rediss+sentinel://");

  EXPECT_EQ(&SchemeOf(*ParseEndpoint("rediss://h:1")), bare);
  EXPECT_EQ(&SchemeOf(*ParseEndpoint("redis+sentinel://h/m")), sentinel);
  EXPECT_EQ(&SchemeOf(*ParseEndpoint("redis+cluster://h:1+h:2")), cluster);
  // An Endpoint filled in by hand belongs to the scheme its fields say.
  Endpoint by_hand;
  by_hand.sentinel.master = "m";
  EXPECT_EQ(&SchemeOf(by_hand), sentinel);
}

TEST(Schemes, KeysAndFixedAddresses) {
  const Endpoint upper = *ParseEndpoint("Redis-1.Example:7001");
  const Endpoint lower = *ParseEndpoint("redis-1.example:7001");
  EXPECT_EQ(SchemeOf(upper).Key(upper), SchemeOf(lower).Key(lower)) << "host names ignore case";
  std::string host;
  int port = 0;
  ASSERT_TRUE(SchemeOf(upper).FixedAddress(upper, &host, &port));
  EXPECT_EQ(host, "Redis-1.Example");
  EXPECT_EQ(port, 7001);

  const Endpoint a = *ParseEndpoint("redis+sentinel://h/Orders");
  const Endpoint b = *ParseEndpoint("redis+sentinel://h/orders");
  EXPECT_NE(SchemeOf(a).Key(a), SchemeOf(b).Key(b)) << "master names are case-sensitive";
  EXPECT_FALSE(SchemeOf(a).FixedAddress(a, &host, &port)) << "its address is learnt";
}

TEST(Locators, AStaticAddressIsKnownFromTheStart) {
  RecordingHost host;
  for (const char* url : {"127.0.0.1:7001", "redis://:pw@127.0.0.1:7001/2"}) {
    std::unique_ptr<Locator> l = Make(*ParseEndpoint(url), &host);
    EXPECT_EQ(l->Scheme(), "redis") << url;
    EXPECT_TRUE(l->Known());
    MasterTarget t = l->Initial();
    EXPECT_EQ(t.host, "127.0.0.1");
    EXPECT_EQ(t.port, 7001);
    EXPECT_EQ(t.make_stream, nullptr) << "plain TCP";
    std::vector<HandshakeStep> steps;
    l->AddMasterChecks(&steps);
    EXPECT_TRUE(steps.empty());
    l->MasterLost();  // nothing to look for
    EXPECT_TRUE(l->Known());
  }
  EXPECT_TRUE(host.masters.empty());
  EXPECT_TRUE(host.unlocated.empty());
}

TEST(Locators, ASentinelManagedMasterIsUnknownUntilNamed) {
  RecordingHost host;
  std::unique_ptr<Locator> l =
      Make(*ParseEndpoint("redis+sentinel://127.0.0.1:1+[::1]:2/n0"), &host);
  EXPECT_EQ(l->Scheme(), "redis+sentinel");
  EXPECT_FALSE(l->Known());
  EXPECT_TRUE(l->Initial().host.empty());
  // Its master must say it is one.
  std::vector<HandshakeStep> steps;
  l->AddMasterChecks(&steps);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_THAT(steps[0].payload, ::testing::HasSubstr("ROLE"));
  Reply replica;
  replica.type = Reply::Type::kArray;
  replica.elements.resize(1);
  replica.elements[0].type = Reply::Type::kString;
  replica.elements[0].str = "slave";
  EXPECT_THAT(steps[0].check(replica), ::testing::HasSubstr("asking the Sentinels again"));
  replica.elements[0].str = "master";
  EXPECT_EQ(steps[0].check(replica), "");
  // Health lists its Sentinels before any answered.
  NodeHealth h;
  l->Health(&h);
  ASSERT_EQ(h.sentinels.size(), 2u);
  EXPECT_EQ(h.sentinels[0].address, "127.0.0.1:1");
  EXPECT_EQ(h.sentinels[1].address, "[::1]:2");
  EXPECT_FALSE(h.sentinels[0].connected);
  EXPECT_EQ(Make(*ParseEndpoint("rediss+sentinel://h/n0"), &host)->Scheme(), "rediss+sentinel");
}

// CLUSTER SLOTS as a reply: [first, last, [host, port, id]] per range.
Reply SlotsReply(const std::vector<std::tuple<int, int, std::string, int>>& ranges) {
  std::vector<Reply> out;
  for (const auto& [first, last, host, port] : ranges) {
    out.push_back(Reply::Array(
        {Reply::Integer(first), Reply::Integer(last),
         Reply::Array({Reply::String(host), Reply::Integer(port), Reply::String("id")})}));
  }
  return Reply::Array(std::move(out));
}

TEST(Locators, AClusterRoutesEachSlotToItsMaster) {
  RecordingHost host;
  std::unique_ptr<Locator> l =
      Make(*ParseEndpoint("redis+cluster://127.0.0.1:7001+h2:7002"), &host);
  EXPECT_EQ(l->Scheme(), "redis+cluster");
  EXPECT_TRUE(l->Routes());
  EXPECT_TRUE(l->Known());
  EXPECT_EQ(l->Initial().host, "127.0.0.1");
  EXPECT_EQ(l->Initial().port, 7001);
  // Before the map: every command on the node's own connection.
  EXPECT_EQ(l->Route(5, ""), -1);
  std::vector<HandshakeStep> steps;
  l->AddMasterChecks(&steps);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_THAT(steps[0].payload, ::testing::HasSubstr("SLOTS"));
  // A plain server says so; the check names the fix.
  EXPECT_THAT(steps[0].check(Reply::Error("ERR This instance has cluster support disabled")),
              ::testing::HasSubstr("use redis:// for a plain node"));
  // The map: two masters ("" is the member that answered).
  EXPECT_EQ(steps[0].check(SlotsReply({{0, 8000, "", 7001}, {8001, 16383, "10.0.0.2", 7002}})), "");
  ASSERT_EQ(host.shards.size(), 2u);
  EXPECT_THAT(host.shards[0], ::testing::HasSubstr("master 127.0.0.1:7001"));
  EXPECT_EQ(l->Route(0, ""), 100);
  EXPECT_EQ(l->Route(8000, ""), 100);
  EXPECT_EQ(l->Route(8001, ""), 101);
  EXPECT_EQ(l->Route(-1, ""), -1) << "no key: the node's own connection";
  EXPECT_EQ(l->Route(3, "10.0.0.2:7002"), 101) << "ASK names the master";
  EXPECT_EQ(l->Route(3, "10.0.0.9:1"), -1) << "an unknown master";
  // MOVED: the slot is elsewhere at once; a new master gets a connection.
  l->Moved(3, "10.0.0.3", 7003);
  ASSERT_EQ(host.shards.size(), 3u);
  EXPECT_EQ(l->Route(3, ""), 102);
  l->Asked("10.0.0.4", 7004);
  EXPECT_EQ(l->Route(9, "10.0.0.4:7004"), 103);
  // Health: the masters serving slots, and how their connections are.
  NodeHealth h;
  h.connected = true;
  l->Health(&h);
  ASSERT_EQ(h.shards.size(), 3u);
  int slots = 0;
  for (const ShardHealth& s : h.shards) slots += s.slots;
  EXPECT_EQ(slots, 16384);
  EXPECT_FALSE(h.connected) << "the master at index 101 is down";
  EXPECT_EQ(h.slots_uncovered, 0);
  // The member asked for the map failed: the next seed, then the masters.
  l->MasterLost();
  l->MasterLost();
  ASSERT_EQ(host.next_attempts.size(), 2u);
  EXPECT_EQ(host.next_attempts[0], "h2:7002");
  EXPECT_EQ(host.next_attempts[1], "10.0.0.2:7002") << "a master it learned of";
  EXPECT_EQ(Make(*ParseEndpoint("rediss+cluster://h:1"), &host)->Scheme(), "rediss+cluster");
}

TEST(Schemes, ClusterEndpointsAreCheckedAndNamed) {
  absl::StatusOr<Endpoint> e = ParseEndpoint("redis+cluster://u:p@h1:7001+[::1]:7002");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->uses_cluster());
  ASSERT_EQ(e->cluster.seeds.size(), 2u);
  EXPECT_EQ(e->cluster.seeds[1].host, "::1");
  EXPECT_EQ(e->username, "u");
  EXPECT_EQ(e->ToString(), "cluster:h1:7001+[::1]:7002");
  EXPECT_FALSE(e->tls);
  EXPECT_TRUE(ParseEndpoint("rediss+cluster://h:1")->tls);
  EXPECT_EQ(ParseEndpoint("redis+cluster://h:1")->cluster.seeds[0].port, 1);
  EXPECT_EQ(ParseEndpoint("redis+cluster://h")->cluster.seeds[0].port, 6379);
  for (const char* bad : {"redis+cluster://", "redis+cluster://h:1/2", "redis+cluster://h:99999",
                          "redis+cluster://h:1+", "redis+cluster://:pw@/x"}) {
    EXPECT_EQ(ParseEndpoint(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  Options o;
  o.nodes = {*e};
  o.nodes[0].db = 3;
  EXPECT_THAT(std::string(ValidateOptions(o).message()), ::testing::HasSubstr("database 0"));
  o.nodes[0].db = 0;
  REDLOCK_EXPECT_OK_UNIT(ValidateOptions(o));
  o.fencing = true;
  o.fencing_counters = Options::FencingCounters::kShared;
  EXPECT_THAT(std::string(ValidateOptions(o).message()), ::testing::HasSubstr("kPerResource"));
}

}  // namespace
}  // namespace redlock::internal
