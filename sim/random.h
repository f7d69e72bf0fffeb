// sim/random.h: the simulator's one source of randomness, a seeded
// xoshiro256** generator (its state expanded from the seed by SplitMix64),
// and the library's random source (tokens and jitter) fed from it, so that
// one seed gives one history, byte for byte.

#ifndef REDLOCK_SIM_RANDOM_H_
#define REDLOCK_SIM_RANDOM_H_

#include <cstdint>
#include <vector>

#include "redlock/internal/random_source.h"

namespace redlock::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed) { Seed(seed); }
  void Seed(uint64_t seed);
  uint64_t Next();
  // Uniform in [lo, hi] (lo when hi < lo).
  int64_t Int(int64_t lo, int64_t hi);
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Real(double lo, double hi) { return lo + (hi - lo) * Unit(); }
  bool Chance(double p) { return Unit() < p; }
  // An index drawn with these weights (all zero: 0).
  size_t Weighted(const std::vector<int>& weights);

 private:
  uint64_t s_[4];
};

// Derives an independent stream's seed from a run seed and a purpose.
uint64_t SubSeed(uint64_t seed, uint64_t purpose);

// The library's randomness (redlock/internal/random_source.h) from a seeded
// Rng. `on_token` (may be null) sees every token's bytes as drawn.
class SeededRandomSource final : public internal::RandomSource {
 public:
  explicit SeededRandomSource(uint64_t seed) : rng_(seed) {}
  void Fill(unsigned char* buf, size_t n) override;
  uint64_t Next() override { return rng_.Next(); }
  // Called after each Fill with the bytes drawn.
  void set_on_token(void (*fn)(void*, const unsigned char*, size_t), void* arg) {
    on_token_ = fn;
    on_token_arg_ = arg;
  }

 private:
  Rng rng_;
  void (*on_token_)(void*, const unsigned char*, size_t) = nullptr;
  void* on_token_arg_ = nullptr;
};

}  // namespace redlock::sim

#endif  // REDLOCK_SIM_RANDOM_H_
