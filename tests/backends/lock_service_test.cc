// Every lock service of backends/lock_service.h against its real servers
// (backends/servers.h): mutual exclusion, release, fencing tokens that grow,
// a wait woken by the release, a wait that runs out. Label "backends": the
// servers take seconds to start (ZooKeeper's JVMs); a missing package skips
// the backend's tests, except under CI=true, where it fails.

#include "backends/lock_service.h"

#include <map>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "backends/servers.h"
#include "gtest/gtest.h"
#include "testkit/fleet.h"

namespace redlock::backends {
namespace {

class LockServiceTest : public ::testing::TestWithParam<Kind> {
 protected:
  static void TearDownTestSuite() { clusters_.clear(); }

  void SetUp() override {
    absl::Status available = ServerAvailable(ServerOf(GetParam()));
    if (available.ok()) available = ClientAvailable(GetParam());
    if (!available.ok()) {
      if (testkit::UnderCi()) FAIL() << available << " (CI=true: a missing package fails)";
      GTEST_SKIP() << available;
    }
    auto& cluster = clusters_[ServerOf(GetParam())];
    if (cluster == nullptr) {
      ClusterOptions o;
      o.kind = ServerOf(GetParam());
      o.members = o.kind == ServerKind::kPostgres ? 1 : 3;
      absl::StatusOr<std::unique_ptr<ServerCluster>> c = ServerCluster::Start(o);
      ASSERT_TRUE(c.ok()) << c.status();
      cluster = *std::move(c);
    }
    ServiceOptions so;
    so.kind = GetParam();
    so.endpoints = cluster->endpoints();
    if (GetParam() == Kind::kRedis) so.endpoints.resize(1);
    so.key_prefix =
        absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
    so.fencing = true;
    so.session_timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<LockService>> s = LockService::Create(so);
    ASSERT_TRUE(s.ok()) << s.status();
    service_ = *std::move(s);
  }

  std::unique_ptr<LockSession> Session() {
    absl::StatusOr<std::unique_ptr<LockSession>> s = service_->NewSession();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  static inline std::map<ServerKind, std::unique_ptr<ServerCluster>> clusters_;
  std::unique_ptr<LockService> service_;
};

TEST_P(LockServiceTest, OneHolderAtATimeAndFencingTokensGrow) {
  std::unique_ptr<LockSession> a = Session(), b = Session();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<Grant> first = a->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GT(a->TimeLeft(*first), absl::Seconds(1));
  absl::StatusOr<Grant> refused = b->TryAcquire("r", absl::Seconds(10));
  EXPECT_TRUE(absl::IsAborted(refused.status())) << refused.status();
  ASSERT_TRUE(a->Release(*first).ok());
  absl::StatusOr<Grant> second = b->TryAcquire("r", absl::Seconds(10));
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(first->fencing_token.has_value());
  ASSERT_TRUE(second->fencing_token.has_value());
  EXPECT_GT(*second->fencing_token, *first->fencing_token);
  EXPECT_TRUE(b->Release(*second).ok());
  // Releasing what is already released is not an error.
  EXPECT_TRUE(b->Release(*second).ok());
}

TEST_P(LockServiceTest, AWaiterGetsTheLockWhenItIsReleased) {
  std::unique_ptr<LockSession> a = Session(), b = Session();
  absl::StatusOr<Grant> held = a->TryAcquire("w", absl::Seconds(10));
  ASSERT_TRUE(held.ok()) << held.status();
  absl::StatusOr<Grant> waited = absl::UnknownError("not run");
  std::thread waiter([&] { waited = b->Acquire("w", absl::Seconds(10), absl::Seconds(20)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(a->Release(*held).ok());
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_TRUE(b->Release(*waited).ok());
}

TEST_P(LockServiceTest, AWaitRunsOutWhileTheLockIsHeld) {
  std::unique_ptr<LockSession> a = Session(), b = Session();
  absl::StatusOr<Grant> held = a->TryAcquire("t", absl::Seconds(10));
  ASSERT_TRUE(held.ok()) << held.status();
  absl::StatusOr<Grant> waited = b->Acquire("t", absl::Seconds(10), absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  EXPECT_TRUE(a->Release(*held).ok());
  // The failed wait left nothing behind: the lock is free.
  absl::StatusOr<Grant> again = b->TryAcquire("t", absl::Seconds(10));
  EXPECT_TRUE(again.ok()) << again.status();
  if (again.ok()) {
    EXPECT_TRUE(b->Release(*again).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, LockServiceTest, ::testing::ValuesIn(AllKinds()),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           std::string name(KindName(info.param));
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace redlock::backends
