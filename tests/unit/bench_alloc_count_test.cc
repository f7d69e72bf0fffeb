// The bench's allocation count (bench/alloc_count.h): this binary links the
// bench's counting operator new (bench/counting_new.cc), as redlock-bench
// does. It counts every allocation while the window is open, on every
// thread, and nothing while it is closed; usage deltas carry the count.

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "bench/alloc_count.h"
#include "bench/stats.h"
#include "gtest/gtest.h"

namespace redlock::bench {
namespace {

// Allocations the compiler cannot elide: kept until the end.
std::vector<std::unique_ptr<int>> Allocate(int n) {
  std::vector<std::unique_ptr<int>> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<int>(i));
  return out;
}

TEST(BenchAllocCountTest, CountsOnlyWhileOpen) {
  ASSERT_GE(AllocationsCounted(), 0) << "the counting operator new is linked in";
  const int64_t before = AllocationsCounted();
  auto closed = Allocate(100);
  EXPECT_EQ(AllocationsCounted(), before);

  OpenAllocationCount();
  const int64_t start = AllocationsCounted();
  auto open = Allocate(100);  // the vector's block and 100 ints
  const int64_t end = AllocationsCounted();
  CloseAllocationCount();
  EXPECT_EQ(end - start, 101);

  auto after = Allocate(100);
  EXPECT_EQ(AllocationsCounted(), end);
}

TEST(BenchAllocCountTest, CountsEveryThread) {
  OpenAllocationCount();
  const int64_t start = AllocationsCounted();
  std::vector<std::thread> threads;
  threads.reserve(4);
  const int64_t after_reserve = AllocationsCounted();
  for (int t = 0; t < 4; ++t) {
    // std::thread allocates its own state too: counted apart below.
    threads.emplace_back([] { auto kept = Allocate(50); });
  }
  for (auto& t : threads) t.join();
  const int64_t end = AllocationsCounted();
  CloseAllocationCount();
  EXPECT_EQ(after_reserve - start, 1);
  // Each thread: its vector and 50 ints; each std::thread: at least its state.
  EXPECT_GE(end - after_reserve, 4 * 51 + 4);
  EXPECT_LE(end - after_reserve, 4 * 51 + 4 * 4);
}

TEST(BenchAllocCountTest, UsageCarriesTheCount) {
  OpenAllocationCount();
  const ProcessUsage start = CurrentProcessUsage();
  auto kept = Allocate(10);
  const ProcessUsage end = CurrentProcessUsage();
  CloseAllocationCount();
  EXPECT_EQ(UsageDelta(end, start).allocations, 11);

  ProcessUsage not_counted;
  EXPECT_EQ(not_counted.allocations, -1);
  EXPECT_EQ(UsageDelta(end, not_counted).allocations, -1);
  ProcessUsage sum;
  sum.allocations = 0;
  AddAllocations(&sum, 5);
  AddAllocations(&sum, 6);
  EXPECT_EQ(sum.allocations, 11);
  AddAllocations(&sum, -1);
  EXPECT_EQ(sum.allocations, -1);
  AddAllocations(&sum, 3);
  EXPECT_EQ(sum.allocations, -1);
}

}  // namespace
}  // namespace redlock::bench
