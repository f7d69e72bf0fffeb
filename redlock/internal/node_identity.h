// Two entries of a node list must be two servers: one server listed twice
// (two names for one address, a proxy, a port forward) would give it two
// votes, and a quorum could then be fewer real servers than it claims.
// Client::Create compares the resolved addresses here; the engine compares
// each server's run_id after the handshake (Engine::DuplicateNodes), and
// refuses a server whose run_id it cannot read (Engine::UnverifiedNodes,
// Options::require_node_identity).

#ifndef REDLOCK_INTERNAL_NODE_IDENTITY_H_
#define REDLOCK_INTERNAL_NODE_IDENTITY_H_

#include <vector>

#include "absl/status/status.h"
#include "redlock/options.h"

namespace redlock::internal {

// kInvalidArgument naming both entries when two endpoints resolve to a
// common address with the same port. Hosts that do not resolve are left to
// the connection (they fail there, like any unreachable node).
absl::Status CheckDistinctAddresses(const std::vector<Endpoint>& nodes);

// The message for nodes `first` and `second` found to be one server.
absl::Status SameServerError(const std::vector<Endpoint>& nodes, int first, int second,
                             const char* evidence);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_NODE_IDENTITY_H_
