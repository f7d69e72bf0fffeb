#include "redlock/internal/random_source.h"

#include <atomic>

namespace redlock::internal {
namespace {

std::atomic<RandomSource*> g_source{nullptr};

}  // namespace

RandomSource* SetRandomSourceForTesting(RandomSource* source) {
  return g_source.exchange(source, std::memory_order_acq_rel);
}

RandomSource* TestRandomSource() { return g_source.load(std::memory_order_acquire); }

}  // namespace redlock::internal
