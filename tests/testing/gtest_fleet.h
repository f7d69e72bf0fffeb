// GoogleTest glue for the fleet: skip when redis-server is missing, except
// under CI=true where that is a failure.

#ifndef REDLOCK_TESTS_TESTING_GTEST_FLEET_H_
#define REDLOCK_TESTS_TESTING_GTEST_FLEET_H_

#include "gtest/gtest.h"
#include "tests/testing/fleet.h"

// Use at the top of a test or SetUp().
#define REDLOCK_REQUIRE_REDIS()                                                         \
  do {                                                                                  \
    ::absl::Status redlock_avail_ = ::redlock::testing::CheckRedisServerAvailable();    \
    if (::absl::IsFailedPrecondition(redlock_avail_)) GTEST_SKIP() << redlock_avail_;   \
    ASSERT_TRUE(redlock_avail_.ok()) << redlock_avail_;                                 \
  } while (0)

#define REDLOCK_ASSERT_OK(expr)                      \
  do {                                               \
    const auto& redlock_st_ = (expr);                \
    ASSERT_TRUE(redlock_st_.ok()) << redlock_st_;    \
  } while (0)

#define REDLOCK_EXPECT_OK(expr)                      \
  do {                                               \
    const auto& redlock_st_ = (expr);                \
    EXPECT_TRUE(redlock_st_.ok()) << redlock_st_;    \
  } while (0)

#endif  // REDLOCK_TESTS_TESTING_GTEST_FLEET_H_
