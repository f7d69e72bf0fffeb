// Lock tokens: random values only the holder knows.

#ifndef REDLOCK_INTERNAL_TOKEN_H_
#define REDLOCK_INTERNAL_TOKEN_H_

#include <cstdint>
#include <string>

namespace redlock::internal {

// Bytes of randomness in a token (DESIGN.md 4.2 asks for at least 16).
inline constexpr int kTokenBytes = 20;

// 2 * kTokenBytes lowercase hex characters from getrandom(2), the operating
// system's CSPRNG. getrandom on Linux >= 3.17 does not fail for requests this
// small once the pool is initialised; if it ever did, we fall back to
// /dev/urandom, and abort only if both are unusable (a lock with a guessable
// token would be worse than no lock).
std::string NewToken();

// Non-cryptographic randomness for jitter: a per-thread generator seeded
// from getrandom(2). (Not absl::BitGen: Debian's Abseil is not built for
// ThreadSanitizer, which then reports its seed pool.)
double UniformReal(double lo, double hi);
int64_t UniformInt(int64_t lo, int64_t hi);  // inclusive

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_TOKEN_H_
