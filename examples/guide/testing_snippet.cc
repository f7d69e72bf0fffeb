// examples/guide/testing_snippet.cc: the test of docs/guide/testing.md,
// compiled (not run: examples/fake_fleet/ has the complete example and its
// test) so that the page shows code that builds against redlock/testing.h.
// The page's text as it is (includes in its order):
// clang-format off
#include "redlock/testing.h"

#include <gtest/gtest.h>

TEST(MyService, ReportsTheLockServiceDown) {
  redlock::Options options;
  options.fencing = true;
  absl::StatusOr<std::unique_ptr<redlock::testing::FakeFleet>> fleet =
      redlock::testing::FakeFleet::Create(3, options);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  redlock::Client& client = (*fleet)->client();

  ASSERT_TRUE((*fleet)->Stop(0).ok());  // one node down: still granted
  absl::StatusOr<redlock::Lease> lease = client.TryAcquire("orders/42", absl::Seconds(5));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client.Release(*lease).ok());

  ASSERT_TRUE((*fleet)->Stop(1).ok());  // a majority down: kUnavailable
  EXPECT_TRUE(absl::IsUnavailable(client.TryAcquire("orders/42", absl::Seconds(5)).status()));
}
// clang-format on
