#include "bench/alloc_count.h"

namespace redlock::bench {
namespace alloc_count_internal {

Shard g_shards[kShards];
std::atomic<bool> g_open{false};
std::atomic<bool> g_installed{false};
std::atomic<int> g_next_thread{0};

}  // namespace alloc_count_internal

void OpenAllocationCount() { alloc_count_internal::g_open.store(true, std::memory_order_relaxed); }

void CloseAllocationCount() {
  alloc_count_internal::g_open.store(false, std::memory_order_relaxed);
}

int64_t AllocationsCounted() {
  if (!alloc_count_internal::g_installed.load(std::memory_order_relaxed)) return -1;
  uint64_t total = 0;
  for (const alloc_count_internal::Shard& s : alloc_count_internal::g_shards) {
    total += s.n.load(std::memory_order_relaxed);
  }
  return static_cast<int64_t>(total);
}

}  // namespace redlock::bench
