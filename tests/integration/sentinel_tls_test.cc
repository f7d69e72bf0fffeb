// Sentinel discovery over TLS (rediss+sentinel://): a TLS-only master with a
// TLS-only replica, watched by a Sentinel that listens on a TLS port and
// reaches them over TLS; the client speaks TLS to the Sentinel and to
// whichever master it names, checking each certificate.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "testkit/gtest_fleet.h"
#include "testkit/replication.h"
#include "tests/integration/sentinel_helpers.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::Fleet;
using testkit::Replicas;
using testkit::Sentinel;

class SentinelTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_SENTINEL();
    REDLOCK_REQUIRE_REDIS();
    masters_ = ValueOrFail(Fleet::Start({.nodes = 1, .tls = true}));
    ASSERT_NE(masters_, nullptr);
    replicas_ = ValueOrFail(
        Replicas::Start({.upstreams = {masters_->address(0)}, .tls = *masters_->certificates()}));
    ASSERT_NE(replicas_, nullptr);
    sentinel_ = ValueOrFail(Sentinel::Start(
        {.masters = {{"n0", masters_->address(0)}}, .tls = *masters_->certificates()}));
    ASSERT_NE(sentinel_, nullptr);
    REDLOCK_ASSERT_OK(sentinel_->WaitReplicas("n0", 1, absl::Seconds(15)));
  }

  // `query`: "" or "?tls_server_name=...".
  Options MakeOptions(const std::string& query = "") {
    absl::StatusOr<Endpoint> ep = ParseEndpoint(
        absl::StrCat("rediss+sentinel://127.0.0.1:", sentinel_->tls_port(), "/n0", query));
    EXPECT_TRUE(ep.ok()) << ep.status();
    Options o;
    o.nodes = {ep.ok() ? *ep : Endpoint{}};
    o.node_timeout = absl::Seconds(2);
    o.tls = masters_->ClientTls();
    o.key_prefix =
        absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
    return o;
  }

  std::unique_ptr<Fleet> masters_;
  std::unique_ptr<Replicas> replicas_;
  std::unique_ptr<Sentinel> sentinel_;
};

TEST_F(SentinelTlsTest, FindsTheMasterAndLocksOverTls) {
  Options o = MakeOptions();
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<NodeHealth> health = (*client)->Health();
  ASSERT_EQ(health.size(), 1u);
  EXPECT_EQ(health[0].scheme, "rediss+sentinel");
  EXPECT_EQ(health[0].address, masters_->address(0));
  EXPECT_TRUE(health[0].connected) << health[0].last_error;
  EXPECT_TRUE(health[0].tls);
  EXPECT_THAT(health[0].tls_version, HasSubstr("TLS"));
  ASSERT_EQ(health[0].sentinels.size(), 1u);
  EXPECT_TRUE(health[0].sentinels[0].connected) << health[0].sentinels[0].last_error;
  absl::StatusOr<Lease> lease = (*client)->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(Get(masters_->Command(0, {"GET", o.key_prefix + "r"})), lease->token());
  REDLOCK_EXPECT_OK((*client)->Extend(*lease, absl::Seconds(10)).status());
  REDLOCK_EXPECT_OK((*client)->Release(*lease));
  EXPECT_EQ(Get(masters_->Command(0, {"GET", o.key_prefix + "r"})), "");
}

TEST_F(SentinelTlsTest, FollowsAFailoverOverTls) {
  Options o = MakeOptions();
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->TryAcquire("warm-up", absl::Seconds(1)).ok());
  REDLOCK_ASSERT_OK(masters_->Kill(0));
  ASSERT_NO_FATAL_FAILURE(AwaitFailoverToTheReplica(*sentinel_, masters_->address(0), *replicas_));
  ASSERT_NO_FATAL_FAILURE(ExpectTheLockOnTheNewMaster(**client, *replicas_, o.key_prefix + "r"));
  NodeHealth h = (*client)->Health()[0];
  EXPECT_EQ(h.address, replicas_->address(0, 0));
  EXPECT_THAT(h.tls_version, HasSubstr("TLS"));
}

TEST_F(SentinelTlsTest, TheMasterCertificateIsCheckedAgainstTheConfiguredName) {
  // The certificates carry DNS:localhost and IP:127.0.0.1: the name given
  // for the master is what its certificate must carry.
  {
    auto client = Client::Create(MakeOptions("?tls_server_name=localhost"));
    ASSERT_TRUE(client.ok()) << client.status();
    EXPECT_TRUE((*client)->TryAcquire("r", absl::Seconds(10)).ok());
  }
  Options o = MakeOptions("?tls_server_name=redis.example");
  o.connect_timeout = absl::Milliseconds(500);
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Lease> refused = (*client)->TryAcquire("r", absl::Seconds(10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  NodeHealth h = (*client)->Health()[0];
  EXPECT_FALSE(h.connected);
  EXPECT_THAT(h.last_error, HasSubstr("redis.example")) << "names the name it checked";
  // The Sentinel itself was reached: only the master's certificate failed.
  ASSERT_EQ(h.sentinels.size(), 1u);
  EXPECT_EQ(h.sentinels[0].master, masters_->address(0));
}

TEST_F(SentinelTlsTest, ASentinelWithAnUntrustedCertificateIsNotAsked) {
  Options o = MakeOptions();
  o.tls.ca_file = masters_->certificates()->other_ca_cert;  // trusts nobody here
  o.connect_timeout = absl::Milliseconds(500);
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  NodeHealth h = (*client)->Health()[0];
  EXPECT_FALSE(h.connected);
  EXPECT_EQ(h.address, "") << "no Sentinel could be trusted to name it";
  ASSERT_EQ(h.sentinels.size(), 1u);
  EXPECT_THAT(h.sentinels[0].last_error, HasSubstr("certificate"));
}

}  // namespace
}  // namespace redlock
