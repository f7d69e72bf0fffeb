// The faults redlock-bench puts on its own fleet's nodes for a row: a node
// SIGSTOPped (and continued), and fault proxies (testkit/fault_proxy.h) in
// front of some nodes, through which the rows then reach them.

#ifndef REDLOCK_BENCH_FAULTS_H_
#define REDLOCK_BENCH_FAULTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "redlock/options.h"
#include "testkit/fault_proxy.h"
#include "testkit/fleet.h"

namespace redlock::bench {

// A fault switched on before a row's warm-up and off after its measurement.
struct Fault {
  std::string description;
  std::function<absl::Status()> on;
  std::function<absl::Status()> off;
};

// Node `node` of `fleet` SIGSTOPped; off continues it and waits (bounded)
// until it answers PING again. REQUIRES: `fleet` outlives the fault.
Fault StopFault(testkit::Fleet* fleet, int node);

// Fault proxies in front of some nodes: `endpoints` are all the nodes as
// clients reach them (the proxied ones replaced by their proxy's address).
struct ProxyFront {
  std::vector<Endpoint> endpoints;
  // One per proxied node, in the order of `which` given to
  // PutBehindProxies; their upstream addresses in `upstreams`.
  std::vector<std::unique_ptr<testkit::FaultProxy>> proxies;
  std::vector<std::string> upstreams;
};

// Starts one proxy in front of each node of `eps` whose index is in `which`
// (loopback nodes only); the proxies' jitter is seeded from `seed`.
absl::StatusOr<ProxyFront> PutBehindProxies(std::vector<Endpoint> eps,
                                            const std::vector<int>& which, uint64_t seed);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_FAULTS_H_
