// The locator of a Sentinel-managed node (scheme_sentinel.cc): asks the
// node's Sentinels where its master is and follows its failovers
// (docs/design.md 6.8).

#ifndef REDLOCK_INTERNAL_SENTINEL_LOCATOR_H_
#define REDLOCK_INTERNAL_SENTINEL_LOCATOR_H_

#include <cstddef>
#include <memory>

#include "redlock/internal/scheme.h"

namespace redlock::internal {

// The most Sentinels one node may list (what the poll events can tell apart).
inline constexpr size_t kMaxSentinels = size_t{1} << 12;

std::unique_ptr<Locator> MakeSentinelLocator(const Endpoint& e, LocatorEnv env);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SENTINEL_LOCATOR_H_
