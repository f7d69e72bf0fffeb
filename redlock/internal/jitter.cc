#include "redlock/internal/jitter.h"

#include <cstdint>
#include <random>

#include "redlock/internal/random_source.h"
#include "redlock/internal/token.h"

namespace redlock::internal {
namespace {

std::mt19937_64& ThreadRng() {
  thread_local std::mt19937_64 rng = [] {
    uint64_t seed = 0;
    unsigned char raw[sizeof(seed)];
    if (!SystemRandom(raw, sizeof(raw))) {
      seed = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&seed)) ^ 0x9e3779b97f4a7c15ull;
    } else {
      for (unsigned char b : raw) seed = (seed << 8) | b;
    }
    return std::mt19937_64(seed);
  }();
  return rng;
}

}  // namespace

double UniformReal(double lo, double hi) {
  if (RandomSource* test = TestRandomSource()) {
    // 53 random bits: [0, 1) exactly as a double holds it.
    const double unit = static_cast<double>(test->Next() >> 11) * 0x1.0p-53;
    return lo + (hi - lo) * unit;
  }
  return std::uniform_real_distribution<double>(lo, hi)(ThreadRng());
}

int64_t UniformInt(int64_t lo, int64_t hi) {
  if (RandomSource* test = TestRandomSource()) {
    if (hi <= lo) return lo;
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    const uint64_t r = test->Next();
    return static_cast<int64_t>(static_cast<uint64_t>(lo) +
                                (span == ~uint64_t{0} ? r : r % (span + 1)));
  }
  return std::uniform_int_distribution<int64_t>(lo, hi)(ThreadRng());
}

}  // namespace redlock::internal
