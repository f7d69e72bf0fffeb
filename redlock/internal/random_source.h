// Where the library's randomness comes from: lock tokens (token.h) and
// jitter (jitter.h). In production both come from the operating system (the
// tokens from getrandom(2), the jitter from a per-thread generator seeded
// from it) and nothing here is used. A test harness that must replay a run
// exactly (the deterministic simulator, sim/README.md) installs one seeded
// source for the whole process, so that the same seed draws the same tokens
// and the same retry pauses.
//
// NOT for production: a source installed here makes every token of the
// process predictable. Nothing in the library installs one.

#ifndef REDLOCK_INTERNAL_RANDOM_SOURCE_H_
#define REDLOCK_INTERNAL_RANDOM_SOURCE_H_

#include <cstddef>
#include <cstdint>

namespace redlock::internal {

class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // Fills `buf` with `n` bytes: the raw material of a lock token.
  virtual void Fill(unsigned char* buf, size_t n) = 0;
  // 64 uniformly distributed bits: jitter.
  virtual uint64_t Next() = 0;
};

// Installs `source` for every thread of the process (null: back to the
// operating system's randomness) and returns the previous one. The source
// must outlive its installation. Install it before the clients that use it
// exist and remove it after they are gone: a token or jitter drawn while it
// is being replaced may come from either source.
RandomSource* SetRandomSourceForTesting(RandomSource* source);

// The installed source, or null (production).
RandomSource* TestRandomSource();

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_RANDOM_SOURCE_H_
