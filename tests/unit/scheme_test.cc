// Endpoint schemes and their locators (internal/scheme.h, locator.h), without
// a server: which scheme owns an endpoint, their names and keys, and what
// each locator tells the engine before anything is asked.

#include "redlock/internal/scheme.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/internal/sentinel_locator.h"

namespace redlock::internal {
namespace {

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

  std::vector<std::string> masters;
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
  EXPECT_EQ(KnownUrlSchemes(), "redis://, rediss://, redis+sentinel://, rediss+sentinel://");

  EXPECT_EQ(&SchemeOf(*ParseEndpoint("rediss://h:1")), bare);
  EXPECT_EQ(&SchemeOf(*ParseEndpoint("redis+sentinel://h/m")), sentinel);
  // An Endpoint filled in by hand belongs to the scheme its fields say.
  Endpoint by_hand;
  by_hand.sentinel_master = "m";
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

}  // namespace
}  // namespace redlock::internal
