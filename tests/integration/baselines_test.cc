// The bench's Redlock baselines (bench/baselines.h) against a real fleet:
// what they report must be what happened on the nodes, or the rows they
// produce compare the library with a wrong figure.

#include "bench/baselines.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testkit/fleet_suite.h"

namespace redlock::bench {
namespace {

using Factory = absl::StatusOr<std::unique_ptr<Locker>> (*)(const BaselineOptions&, std::string);

struct Baseline {
  const char* name;
  Factory make;
};

class BaselineTest : public testkit::FleetSuite, public ::testing::WithParamInterface<Baseline> {
 protected:
  std::unique_ptr<Locker> MakeLocker(const std::string& resource) {
    BaselineOptions o;
    o.nodes = fleet_->endpoints();
    absl::StatusOr<std::unique_ptr<Locker>> l = GetParam().make(o, prefix_ + resource);
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? *std::move(l) : nullptr;
  }
};

TEST_P(BaselineTest, AcquiresAndReleasesOnEveryNode) {
  std::unique_ptr<Locker> l = MakeLocker("r");
  ASSERT_NE(l, nullptr);
  ASSERT_TRUE(l->Acquire(absl::Seconds(10)).ok());
  EXPECT_EQ(KeysEverywhere(), kNodes);
  EXPECT_TRUE(l->Release().ok());
  EXPECT_EQ(KeysEverywhere(), 0);
}

// A node that lost its script cache (a restart, SCRIPT FLUSH) answers the
// release's EVALSHA with NOSCRIPT: the baseline falls back to EVAL, and the
// release still succeeds with every key gone.
TEST_P(BaselineTest, ANodeWithoutTheScriptIsReleasedByEval) {
  std::unique_ptr<Locker> l = MakeLocker("r");
  ASSERT_NE(l, nullptr);
  ASSERT_TRUE(l->Acquire(absl::Seconds(10)).ok());
  ASSERT_TRUE(fleet_->Command(0, {"SCRIPT", "FLUSH"}).ok());
  absl::Status released = l->Release();
  EXPECT_TRUE(released.ok()) << released;
  EXPECT_EQ(KeysEverywhere(), 0);
}

INSTANTIATE_TEST_SUITE_P(Baselines, BaselineTest,
                         ::testing::Values(Baseline{"sequential", &NewSequentialLocker},
                                           Baseline{"wait_for_all", &NewWaitForAllLocker}),
                         [](const ::testing::TestParamInfo<Baseline>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace redlock::bench
