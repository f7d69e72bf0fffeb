// Lock tokens: random values only the holder knows.

#ifndef REDLOCK_INTERNAL_TOKEN_H_
#define REDLOCK_INTERNAL_TOKEN_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace redlock::internal {

// Bytes of randomness in a token (at least 16: docs/design.md 5.1).
inline constexpr int kTokenBytes = 20;

// 2 * kTokenBytes lowercase hex characters from getrandom(2), the operating
// system's CSPRNG. getrandom on Linux >= 3.17 does not fail for requests this
// small once the pool is initialised; if it ever did, we fall back to
// /dev/urandom, and abort only if both are unusable (a lock with a guessable
// token would be worse than no lock). A test's seeded source
// (random_source.h), when one is installed, replaces the operating system.
std::string NewToken();

// Fills `buf` from the operating system's CSPRNG (getrandom(2), else
// /dev/urandom); false when both fail.
bool SystemRandom(unsigned char* buf, size_t n);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_TOKEN_H_
