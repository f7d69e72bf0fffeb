// redlock/scoped_lease.h: a lease released when its owner goes out of scope,
// and WithLock, which acquires, renews while a function runs, hands it the
// lost-lease signal and releases (the C++ form of node-redlock's using()).
//
//   absl::Status st = redlock::WithLock(
//       *client, "orders/42", absl::Seconds(10), redlock::LockOptions{},
//       [&](const redlock::Lease& lease, const redlock::StopToken& lost) -> absl::Status {
//         for (const Item& item : items) {
//           if (lost.stop_requested()) return absl::AbortedError("lock lost");
//           REDLOCK_WRITE(item, lease.fencing_token());
//         }
//         return absl::OkStatus();
//       });
//
//   absl::StatusOr<redlock::ScopedLease> held =
//       redlock::ScopedLease::Acquire(*client, "orders/42", absl::Seconds(10));
//   if (!held.ok()) return held.status();
//   Work(held->lease());
//   // released here, on every exit path
//
// Thread-safety: a ScopedLease is owned by one thread at a time, like a
// std::unique_lock. REQUIRES: the Client outlives it.

#ifndef REDLOCK_SCOPED_LEASE_H_
#define REDLOCK_SCOPED_LEASE_H_

#include <memory>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/lease.h"
#include "redlock/renewal.h"
#include "redlock/stop_token.h"

namespace redlock {

// ScopedLease: a lease released when it goes out of scope (see the top of
// this file). Movable, not copyable.
class ScopedLease {
 public:
  // Owns nothing.
  ScopedLease() = default;
  // Owns `lease` (taken with `client`): releases it on destruction.
  ScopedLease(Client* client, Lease lease) : client_(client), lease_(std::move(lease)) {}
  // Takes over what `other` owns; `other` then owns nothing.
  ScopedLease(ScopedLease&& other) noexcept { *this = std::move(other); }
  // Releases what this one owned (errors dropped), then takes over what
  // `other` owns; `other` then owns nothing.
  ScopedLease& operator=(ScopedLease&& other) noexcept;
  ScopedLease(const ScopedLease&) = delete;
  ScopedLease& operator=(const ScopedLease&) = delete;
  // Releases the lease if still owned; errors are dropped (it then runs out
  // at its ttl): call Release() to see them.
  ~ScopedLease();

  // Client::Acquire with a wait (zero: one attempt), owned on success.
  [[nodiscard]] static absl::StatusOr<ScopedLease> Acquire(
      Client& client, absl::string_view resource, absl::Duration ttl,
      absl::Duration wait = absl::ZeroDuration(), const StopToken& stop = StopToken());

  // The lease (empty when it owns nothing).
  const Lease& lease() const { return lease_; }
  // The lease's members: held->token(), held->fencing_token().
  const Lease* operator->() const { return &lease_; }
  // True while it owns a lease that it will release.
  bool owns() const { return client_ != nullptr && lease_.has_value(); }
  // owns().
  explicit operator bool() const { return owns(); }

  // Releases now and gives up ownership; Client::Release's status.
  absl::Status Release();
  // Gives up ownership without releasing (the lease runs out at its ttl,
  // unless someone else releases it by its token).
  Lease Dismiss();

 private:
  Client* client_ = nullptr;
  Lease lease_;
};

// How WithLock waits for the lock and renews it.
struct LockOptions {
  // How long to wait for the lock (zero: one attempt; infinite: until held
  // or `stop`). Default: zero.
  absl::Duration wait = absl::ZeroDuration();
  // Renewal while the function runs (redlock/renewal.h). Default: every
  // ttl/3, no limit.
  RenewOptions renew;
  // Cancels the wait for the lock. Default: never.
  StopToken stop;
};

// Acquires `resource`, keeps it renewed while `fn` runs, passes `fn` the
// lease and a token stopped when the lease is lost, then releases it.
// Returns the acquisition's error if it was not acquired; otherwise `fn`'s
// status, except that a lease lost while `fn` ran turns an OK into the loss
// (kFailedPrecondition or kDeadlineExceeded: the work may have overlapped
// another holder's, so it must not be taken as done under the lock).
[[nodiscard]] absl::Status WithLock(
    Client& client, absl::string_view resource, absl::Duration ttl, const LockOptions& options,
    absl::FunctionRef<absl::Status(const Lease& lease, const StopToken& lost)> fn);

}  // namespace redlock

#endif  // REDLOCK_SCOPED_LEASE_H_
