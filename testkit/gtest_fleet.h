// GoogleTest glue for the fleet: skip when the selected server
// ($REDLOCK_SERVER, default Debian's redis-server) is missing, except under
// CI=true where that is a failure.

#ifndef REDLOCK_TESTKIT_GTEST_FLEET_H_
#define REDLOCK_TESTKIT_GTEST_FLEET_H_

#include "gtest/gtest.h"
#include "testkit/fleet.h"
#include "testkit/replication.h"

// Use at the top of a test or SetUp().
#define REDLOCK_REQUIRE_REDIS()                                                       \
  do {                                                                                \
    ::absl::Status redlock_avail_ = ::redlock::testkit::CheckRedisServerAvailable();  \
    if (::absl::IsFailedPrecondition(redlock_avail_)) GTEST_SKIP() << redlock_avail_; \
    ASSERT_TRUE(redlock_avail_.ok()) << redlock_avail_;                               \
  } while (0)

// A test that needs one server by name (testkit/servers.h), whatever
// REDLOCK_SERVER says: skips when it is not installed, fails under CI=true.
#define REDLOCK_REQUIRE_SERVER(name)                                                  \
  do {                                                                                \
    ::absl::Status redlock_avail_ = ::redlock::testkit::RequireServer(name).status(); \
    if (::absl::IsFailedPrecondition(redlock_avail_)) GTEST_SKIP() << redlock_avail_; \
    ASSERT_TRUE(redlock_avail_.ok()) << redlock_avail_;                               \
  } while (0)

// The same for the selected server's Sentinel (Replicas and Sentinel
// fixtures): Debian's redis-sentinel by default.
#define REDLOCK_REQUIRE_SENTINEL()                                                     \
  do {                                                                                 \
    REDLOCK_REQUIRE_REDIS();                                                           \
    ::absl::Status redlock_avail_ = ::redlock::testkit::CheckRedisSentinelAvailable(); \
    if (::absl::IsFailedPrecondition(redlock_avail_)) GTEST_SKIP() << redlock_avail_;  \
    ASSERT_TRUE(redlock_avail_.ok()) << redlock_avail_;                                \
  } while (0)

#include <chrono>
#include <thread>

namespace redlock::testkit {

// Calls `probe` until it returns `want` or `timeout` passed (5 ms apart) and
// returns its last value. For state that follows a call's return: a release
// or an acquire returns at a quorum, the other nodes follow moments later.
template <typename F, typename T>
auto Eventually(F probe, const T& want, absl::Duration timeout = absl::Seconds(2))
    -> decltype(probe()) {
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  auto value = probe();
  while (!(value == want) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    value = probe();
  }
  return value;
}

inline const ::absl::Status& StatusOf(const ::absl::Status& s) { return s; }
template <typename T>
const ::absl::Status& StatusOf(const ::absl::StatusOr<T>& s) {
  return s.status();
}
}  // namespace redlock::testkit

// REDLOCK_ASSERT_OK(status or statusor) << "more context";  (fatal)
// REDLOCK_EXPECT_OK(status or statusor) << "more context";  (non-fatal)
#define REDLOCK_ASSERT_OK(expr) REDLOCK_STATUS_CHECK_(expr, FAIL())
#define REDLOCK_EXPECT_OK(expr) REDLOCK_STATUS_CHECK_(expr, ADD_FAILURE())

// The switch makes the macro a single statement that takes a trailing <<
// and cannot capture a following else.
#define REDLOCK_STATUS_CHECK_(expr, on_failure)                                                    \
  switch (0)                                                                                       \
  case 0:                                                                                          \
  default:                                                                                         \
    if (const ::absl::Status redlock_st_ = ::redlock::testkit::StatusOf(expr); redlock_st_.ok()) { \
    } else                                                                                         \
      on_failure << redlock_st_ << " "

#endif  // REDLOCK_TESTKIT_GTEST_FLEET_H_
