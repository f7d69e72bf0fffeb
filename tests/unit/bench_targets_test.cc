// The bench's target checks (bench/results.cc, docs/design.md 9.3) on rows
// made up here: which rows each target reads, its arithmetic, and its
// verdict either side of the bound. No server, no timing.

#include <string>
#include <vector>

#include "bench/results.h"
#include "bench/stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace redlock::bench {
namespace {

using ::testing::HasSubstr;

Distribution Cycles(int64_t p50_us) {
  LatencyHistogram h;
  for (int i = 0; i < 100; ++i) h.Record(p50_us * 1000);
  return Distribution(h);
}

// A row of `successes` cycles in one second, each costing the client
// `client_us` and the servers `server_us` (negative: not measured).
RowResult Row(const std::string& family, const std::string& variant, int callers, int64_t successes,
              double client_us, double server_us, int64_t p50_us = 100) {
  RowResult r = RowIdentity(family, family, variant, callers);
  r.attempts = successes;
  r.successes = successes;
  r.measured_s = 1;
  r.usage_cycles = successes;
  r.usage.user_us = static_cast<int64_t>(client_us * static_cast<double>(successes));
  r.usage.voluntary_csw = 2 * successes;
  r.server_cpu_us =
      server_us < 0 ? -1 : static_cast<int64_t>(server_us * static_cast<double>(successes));
  r.cycle = Cycles(p50_us);
  return r;
}

TargetCheck Find(const std::vector<TargetCheck>& checks, const std::string& figure) {
  for (const TargetCheck& t : checks) {
    if (t.figure == figure) return t;
  }
  static const TargetCheck kNone{"", "", "absent", "absent"};
  ADD_FAILURE() << "no target named " << figure;
  return kNone;
}

BenchResults Healthy(std::vector<RowResult> n1, std::vector<RowResult> n5) {
  BenchResults b;
  b.info.callers_many = 64;
  GroupResult g1;
  g1.scenario = "healthy";
  g1.n = 1;
  g1.rows = std::move(n1);
  GroupResult g5;
  g5.scenario = "healthy";
  g5.n = 5;
  g5.rows = std::move(n5);
  b.groups = {g1, g5};
  return b;
}

TEST(BenchTargetsTest, OneCallerAtFiveNodesIsMeasuredAgainstThePipelinedLimitWithOneChain) {
  for (const auto& [library_us, status] : {std::pair<int64_t, const char*>{110, "met"},
                                           std::pair<int64_t, const char*>{125, "missed"}}) {
    BenchResults b = Healthy(
        {}, {Row(kFloor, "", 1, 1000, 10, 10, 40), Row(kLibrary, "", 1, 1000, 10, 10, library_us),
             Row(kPipelinedLimit, "", 1, 1000, 10, 10, 100)});
    const TargetCheck t = Find(CheckTargets(b), "N=5, 1 caller, acquire+release p50");
    EXPECT_EQ(t.status, status) << t.measured;
    EXPECT_THAT(t.measured, HasSubstr("x limit")) << t.measured;
    EXPECT_THAT(t.measured, HasSubstr("the floor: 40 us")) << t.measured;
  }
  // Without the limit's row the target is not measured, whatever the floor.
  BenchResults b =
      Healthy({}, {Row(kFloor, "", 1, 1000, 10, 10, 40), Row(kLibrary, "", 1, 1000, 10, 10, 50)});
  EXPECT_EQ(Find(CheckTargets(b), "N=5, 1 caller, acquire+release p50").status, "n/a");
  EXPECT_EQ(Find(CheckTargets(b), "N=5, 1 caller, p50 / floor: no regression").status, "met");
}

TEST(BenchTargetsTest, BlockingCallersAreJudgedOnTheMachinesCpuNotTheClientsAlone) {
  // More client CPU than the naive row but less for client and servers
  // together: met, with the client's share printed beside it.
  BenchResults b =
      Healthy({Row(kLibrary, "", 64, 30000, 44, 12), Row(kSequential, "", 64, 20000, 40, 40)}, {});
  TargetCheck t = Find(CheckTargets(b), "N=1, 64 blocking callers vs naive hiredis per thread");
  EXPECT_EQ(t.status, "met") << t.measured;
  EXPECT_THAT(t.measured, HasSubstr("0.70 x its machine CPU per cycle (56.0 us vs 80.0 us)"));
  EXPECT_THAT(t.measured, HasSubstr("client alone 1.10 x (44.0 us vs 40.0 us)"));
  // The machine costs more per cycle: missed, though the cycles/s are higher.
  b = Healthy({Row(kLibrary, "", 64, 30000, 45, 40), Row(kSequential, "", 64, 20000, 40, 40)}, {});
  t = Find(CheckTargets(b), "N=1, 64 blocking callers vs naive hiredis per thread");
  EXPECT_EQ(t.status, "missed") << t.measured;
  // Nodes that are not the bench's own: the servers' CPU is unknown, and
  // the target is not judged on the client alone.
  b = Healthy({Row(kLibrary, "", 64, 30000, 10, -1), Row(kSequential, "", 64, 20000, 40, -1)}, {});
  t = Find(CheckTargets(b), "N=1, 64 blocking callers vs naive hiredis per thread");
  EXPECT_EQ(t.status, "n/a") << t.measured;
  EXPECT_THAT(t.measured, HasSubstr("servers' CPU not measured"));
}

TEST(BenchTargetsTest, AsyncChainsAgainstTheLimitPrintWhereEachCycleCosts) {
  BenchResults b = Healthy({}, {Row(kLibrary, kAsync, 64, 40000, 16.2, 23.0),
                                Row(kPipelinedLimit, "", 64, 51000, 8.6, 20.5)});
  const TargetCheck t = Find(CheckTargets(b), "N=5, 64 async chains vs the pipelined limit");
  EXPECT_EQ(t.status, "missed") << t.measured;
  EXPECT_THAT(t.measured, HasSubstr("0.78 x limit"));
  EXPECT_THAT(t.measured,
              HasSubstr("per cycle client 16.2 us vs 8.6 us, servers 23.0 us vs 20.5 us"));
}

}  // namespace
}  // namespace redlock::bench
