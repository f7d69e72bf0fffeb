#include "redlock/internal/jitter.h"

#include <cstdint>
#include <random>

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
  return std::uniform_real_distribution<double>(lo, hi)(ThreadRng());
}

int64_t UniformInt(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(ThreadRng());
}

}  // namespace redlock::internal
