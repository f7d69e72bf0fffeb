// Non-cryptographic randomness for jitter (retry pauses, reconnection
// backoff): a per-thread generator seeded from the operating system (or,
// in a test that installed one, the process's seeded source:
// random_source.h). Lock tokens come from token.h.
// (Not absl::BitGen: Debian's Abseil is not built for ThreadSanitizer, which
// then reports its seed pool.)

#ifndef REDLOCK_INTERNAL_JITTER_H_
#define REDLOCK_INTERNAL_JITTER_H_

#include <cstdint>

namespace redlock::internal {

// Uniform in [lo, hi).
double UniformReal(double lo, double hi);
// Uniform in [lo, hi], both included.
int64_t UniformInt(int64_t lo, int64_t hi);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_JITTER_H_
