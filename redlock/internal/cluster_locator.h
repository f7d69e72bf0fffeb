// The locator of a node that is a whole Redis Cluster (scheme_cluster.cc):
// the node's vote for a key is the answer of the master serving the key's
// hash slot (docs/design.md 6.12).
//
// - The node's own command connection goes to one member of the cluster (a
//   seed at first, then any master it learned of) and asks it for the slot
//   map: CLUSTER SLOTS in its handshake, again every kClusterRefresh, and
//   soon after a master answered MOVED or a master's connection failed. Its
//   subscriber connection listens there for release announcements
//   (PUBLISH reaches every member of a cluster).
// - Each master gets a command connection of its own (an engine node of
//   the cluster node, Locator::Host::AddShard), with its own queue,
//   deadlines and breaker. A command goes to the master of its slot
//   (Command::slot), or, once, to the master an ASK named; a command that
//   follows another goes behind it on that one's connection.
// - A MOVED answer moves its slot in the map at once (the command's caller
//   sends it again: node_calls.h); ASK creates the connection to its
//   master if needed. A master that serves no slot any more keeps its
//   connection while it lasts and is not reconnected.

#ifndef REDLOCK_INTERNAL_CLUSTER_LOCATOR_H_
#define REDLOCK_INTERNAL_CLUSTER_LOCATOR_H_

#include <memory>

#include "absl/time/time.h"
#include "redlock/internal/scheme.h"

namespace redlock::internal {

// How often a healthy cluster node's slot map is asked again.
inline constexpr absl::Duration kClusterRefresh = absl::Seconds(5);

std::unique_ptr<Locator> MakeClusterLocator(const Endpoint& e, LocatorEnv env);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_CLUSTER_LOCATOR_H_
