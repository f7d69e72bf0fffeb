// Allocations of this process counted by the bench itself (the allocs/cyc
// column, bench/README.md "Figures per row").
//
// The counting global operator new is bench/counting_new.cc, linked into the
// redlock-bench binary only (never into the library, nor into the other
// binaries that link the bench's core): without it AllocationsCounted()
// returns -1 and the column prints "-". While a window is open every
// operator new of every thread of the process counts (the callers, the
// library's I/O thread, the pipelined limit's loop, the harness's own
// bookkeeping); malloc calls from C code (hiredis's reply objects in the
// baselines and the limit) do not go through operator new and are not seen.

#ifndef REDLOCK_BENCH_ALLOC_COUNT_H_
#define REDLOCK_BENCH_ALLOC_COUNT_H_

#include <atomic>
#include <cstdint>

namespace redlock::bench {

// Starts counting (idempotent). A row opens it when its measurement starts
// and closes it when it stops.
void OpenAllocationCount();
void CloseAllocationCount();
// Every allocation counted since the process started (only those made while
// a window was open); -1 when the counting operator new is not linked in.
int64_t AllocationsCounted();

namespace alloc_count_internal {

// Counters spread over cache lines so that threads of the two cores do not
// contend on one: a thread adds to the shard of its own index.
inline constexpr int kShards = 16;
struct alignas(64) Shard {
  std::atomic<uint64_t> n{0};
};
extern Shard g_shards[kShards];
extern std::atomic<bool> g_open;
extern std::atomic<bool> g_installed;
extern std::atomic<int> g_next_thread;

// Called by the counting operator new on every allocation: no allocation of
// its own, no lock.
inline void Count() {
  if (!g_open.load(std::memory_order_relaxed)) return;
  thread_local int shard = -1;
  if (shard < 0) shard = g_next_thread.fetch_add(1, std::memory_order_relaxed) % kShards;
  g_shards[shard].n.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace alloc_count_internal
}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_ALLOC_COUNT_H_
