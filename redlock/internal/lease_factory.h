// Makes leases with a validity: only the operations that measured it may.

#ifndef REDLOCK_INTERNAL_LEASE_FACTORY_H_
#define REDLOCK_INTERNAL_LEASE_FACTORY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "redlock/internal/transport.h"
#include "redlock/lease.h"

namespace redlock::internal {

// How a lease's keys look on the nodes: what its extension and release run.
enum class LeaseKind : uint8_t {
  kPlain = 0,   // the lock key holds the token (Client, MultiLock, writers, permits, leaders)
  kShared = 1,  // a reader of a ReadWriteLock: the token in the resource's readers set
  kFair = 2,    // a fair lock's holder: the lock key holds the token, and the
                // release also removes the holder's place and wakes the next
                // waiter (fair_scripts.h)
};

class LeaseFactory {
 public:
  using Connections = std::shared_ptr<const std::vector<ConnectionId>>;

  // `acquired_at`: the start of the acquisition or extension that measured
  // `valid_until`; `connections`: per node, the connection the SET that set
  // the keys went on (an extension keeps the acquisition's).
  static Lease Make(std::string resource, std::string token, absl::Duration ttl,
                    Lease::TimePoint acquired_at, Connections connections,
                    Lease::TimePoint valid_until, int nodes_granted, uint64_t fencing_token,
                    LeaseKind kind = LeaseKind::kPlain) {
    Lease l;
    l.resource_ = std::move(resource);
    l.token_ = std::move(token);
    l.ttl_ = ttl;
    l.acquired_at_ = acquired_at;
    l.connections_ = std::move(connections);
    l.valid_until_ = valid_until;
    l.nodes_granted_ = nodes_granted;
    l.fencing_token_ = fencing_token;
    l.kind_ = static_cast<uint8_t>(kind);
    return l;
  }

  static LeaseKind Kind(const Lease& l) { return static_cast<LeaseKind>(l.kind_); }

  static void SetConnections(Lease* l, Connections connections) {
    l->connections_ = std::move(connections);
  }

  // The connection node `node`'s SET went on: 0 when it was not sent there,
  // nullopt when unknown (Lease::ForToken).
  static std::optional<ConnectionId> ConnectionOf(const Lease& l, int node) {
    return ConnectionIn(l.connections_, node);
  }
  // The same, from a lease's connection list (AllConnections) kept apart.
  static std::optional<ConnectionId> ConnectionIn(const Connections& c, int node) {
    if (c == nullptr || node >= static_cast<int>(c->size())) return std::nullopt;
    return (*c)[static_cast<size_t>(node)];
  }
  static const Connections& AllConnections(const Lease& l) { return l.connections_; }
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_LEASE_FACTORY_H_
