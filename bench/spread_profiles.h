// The latency profiles of the `spread` scenario: one delay per node, added
// by a fault proxy in each direction (so a node's round trip grows by twice
// its delay).
//
//   one-zone      every node +0.1 ms: nodes in one zone, a few racks apart
//   three-zones   0.1, 0.1, 1, 1, 2 ms: two nodes in the client's zone, the
//                 others in neighbouring zones of one region
//   two-regions   1, 1, 1, 40, 40 ms: a majority in the client's region
//   far-minority  0.1, 0.1, 0.1, 20, 60 ms: a majority next to the client,
//                 two nodes far away
//
// --latency-profile d1,d2,... replaces them by one profile, "custom", of as
// many nodes as delays.

#ifndef REDLOCK_BENCH_SPREAD_PROFILES_H_
#define REDLOCK_BENCH_SPREAD_PROFILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/context.h"

namespace redlock::bench {

struct SpreadProfile {
  std::string name;
  std::vector<absl::Duration> delays;  // each way, one per node
  bool built_in = true;
};

const std::vector<SpreadProfile>& BuiltInSpreadProfiles();

// The built-in profiles, or the one of --latency-profile.
std::vector<SpreadProfile> SpreadProfilesFor(const BenchSettings& settings);

// "0.1,0.1,1,1,2" (milliseconds) or with units ("100us,2ms"): 1..15 delays
// in [0, 10s]. kInvalidArgument naming the bad entry.
absl::StatusOr<std::vector<absl::Duration>> ParseLatencyProfile(absl::string_view text);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_SPREAD_PROFILES_H_
