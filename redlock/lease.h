// redlock/lease.h: a held lock.
//
// A Lease is a plain value returned by Client::TryAcquire/Acquire/Extend. It
// is what you pass back to Release and Extend. Copying a lease does not copy
// the lock: every copy names the same lock on the nodes.
//
//   absl::StatusOr<redlock::Lease> lease = client->TryAcquire("orders/42", absl::Seconds(10));
//   if (!lease.ok()) return lease.status();
//   if (lease->TimeLeft() < absl::Milliseconds(500)) { /* too late to start work */ }
//   DoWork(lease->fencing_token());
//   (void)client->Release(*lease);
//
// Thread-safety: a const Lease may be read from any number of threads.

#ifndef REDLOCK_LEASE_H_
#define REDLOCK_LEASE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace redlock {

namespace internal {
class LeaseFactory;
}  // namespace internal

// A held lock (see the top of this file): a plain value, cheap to copy; every
// copy names the same lock on the nodes.
class Lease {
 public:
  // Leases are measured on the steady clock, never the wall clock.
  using TimePoint = std::chrono::steady_clock::time_point;

  // An empty lease: resource() and token() are empty, TimeLeft() is zero.
  Lease() = default;

  // A lease known only by its resource and token, e.g. one taken by another
  // process (the `redlock acquire` command prints both). Good for Release
  // and Extend, which need nothing else; it carries no validity (TimeLeft()
  // is zero) and no fencing token.
  static Lease ForToken(std::string resource, std::string token) {
    Lease lease;
    lease.resource_ = std::move(resource);
    lease.token_ = std::move(token);
    return lease;
  }

  // The resource name as given to Acquire (without Options::key_prefix).
  const std::string& resource() const { return resource_; }

  // The random value stored under the key on the nodes: 40 hex characters
  // (20 bytes from the operating system's CSPRNG). Only the holder knows it.
  const std::string& token() const { return token_; }

  // The ttl the keys were set (or last extended) with.
  absl::Duration ttl() const { return ttl_; }

  // Steady-clock time at which the successful attempt (or extend) started.
  TimePoint acquired_at() const { return acquired_at_; }

  // Steady-clock time until which the lock is guaranteed to be held, under
  // the clock-drift assumption of Options::clock_drift_factor:
  //   acquired_at + ttl - drift,  where drift = ttl * factor + floor.
  // Work protected by the lock must finish before this point; past it another
  // client may hold the lock.
  TimePoint valid_until() const { return valid_until_; }

  // valid_until() - now, or zero once it has passed.
  absl::Duration TimeLeft() const { return TimeLeft(std::chrono::steady_clock::now()); }
  // valid_until() - `now`, or zero once `now` has passed it (for callers that
  // read the clock once for many leases).
  absl::Duration TimeLeft(TimePoint now) const {
    if (now >= valid_until_) return absl::ZeroDuration();
    return absl::FromChrono(valid_until_ - now);
  }

  // How many nodes had granted when the lease was decided (>= the quorum).
  // Nodes that answer after the decision are not counted; they are still
  // released by Release.
  int nodes_granted() const { return nodes_granted_; }

  // With Options::fencing: a number that strictly increases across successive
  // holders of this resource (docs/design.md 5.10, docs/guide/fencing.md).
  // Pass it to the protected resource, which must reject numbers lower than
  // the highest it has seen. 0 when fencing is off.
  uint64_t fencing_token() const { return fencing_token_; }

  // True for a shared (reader) lease of a ReadWriteLock
  // (redlock/rw_lock.h): its keys on the nodes differ from a plain lock's,
  // and Client::Extend, Release and AutoRenew treat it accordingly.
  bool shared() const { return kind_ == 1; }

  // True for a lease returned by a successful call (not default-constructed).
  bool has_value() const { return !token_.empty(); }
  // has_value().
  explicit operator bool() const { return has_value(); }

 private:
  // Only the client makes leases with a validity (it measured it).
  friend class internal::LeaseFactory;

  std::string resource_;
  std::string token_;
  absl::Duration ttl_ = absl::ZeroDuration();
  TimePoint acquired_at_{};
  // Per node, the connection the acquisition's SET went on (0: it was not
  // sent there); an extension keeps them. A release follows that SET on its
  // connection, whatever the node's circuit breaker says, while the
  // connection lasts. Null for ForToken: unknown.
  std::shared_ptr<const std::vector<uint64_t>> connections_;
  TimePoint valid_until_{};
  int nodes_granted_ = 0;
  uint64_t fencing_token_ = 0;
  // How the lease's keys look on the nodes (internal::LeaseKind): 0 a plain
  // lock key, 1 a reader of a ReadWriteLock, 2 a fair lock's holder.
  uint8_t kind_ = 0;
};

}  // namespace redlock

#endif  // REDLOCK_LEASE_H_
