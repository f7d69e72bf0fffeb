#include "sim/random.h"

namespace redlock::sim {
namespace {

uint64_t SplitMix(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

void Rng::Seed(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) s = SplitMix(&x);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

int64_t Rng::Int(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + (span == 0 ? Next() : Next() % span));
}

size_t Rng::Weighted(const std::vector<int>& weights) {
  int64_t total = 0;
  for (int w : weights) total += w > 0 ? w : 0;
  if (total <= 0) return 0;
  int64_t pick = Int(0, total - 1);
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    if (pick < weights[i]) return i;
    pick -= weights[i];
  }
  return weights.size() - 1;
}

uint64_t SubSeed(uint64_t seed, uint64_t purpose) {
  uint64_t x = seed ^ (purpose * 0xd1b54a32d192ed03ull);
  SplitMix(&x);
  return SplitMix(&x);
}

void SeededRandomSource::Fill(unsigned char* buf, size_t n) {
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng_.Next();
    for (size_t j = 0; j < 8 && i + j < n; ++j)
      buf[i + j] = static_cast<unsigned char>(v >> (8 * j));
  }
  if (on_token_ != nullptr) on_token_(on_token_arg_, buf, n);
}

}  // namespace redlock::sim
