// Makes leases with a validity: only the operations that measured it may.

#ifndef REDLOCK_INTERNAL_LEASE_FACTORY_H_
#define REDLOCK_INTERNAL_LEASE_FACTORY_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "redlock/lease.h"

namespace redlock::internal {

// How a lease's keys look on the nodes: what its extension and release run.
enum class LeaseKind : uint8_t {
  kPlain = 0,   // the lock key holds the token (Client, MultiLock, writers, permits, leaders)
  kShared = 1,  // a reader of a ReadWriteLock: the token in the resource's readers set
};

class LeaseFactory {
 public:
  // `acquired_at`: the start of the acquisition or extension that measured
  // `valid_until`; `first_acquired_at`: the start of the attempt that set
  // the keys (the same for an acquisition, kept by extensions).
  static Lease Make(std::string resource, std::string token, absl::Duration ttl,
                    Lease::TimePoint acquired_at, Lease::TimePoint first_acquired_at,
                    Lease::TimePoint valid_until, int nodes_granted, uint64_t fencing_token,
                    LeaseKind kind = LeaseKind::kPlain) {
    Lease l;
    l.resource_ = std::move(resource);
    l.token_ = std::move(token);
    l.ttl_ = ttl;
    l.acquired_at_ = acquired_at;
    l.first_acquired_at_ = first_acquired_at;
    l.valid_until_ = valid_until;
    l.nodes_granted_ = nodes_granted;
    l.fencing_token_ = fencing_token;
    l.kind_ = static_cast<uint8_t>(kind);
    return l;
  }

  static LeaseKind Kind(const Lease& l) { return static_cast<LeaseKind>(l.kind_); }

  // Since when the nodes may hold the lease's keys: the Command::since of
  // its release.
  static Lease::TimePoint FirstAcquiredAt(const Lease& l) { return l.first_acquired_at_; }
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_LEASE_FACTORY_H_
