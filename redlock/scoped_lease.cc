#include "redlock/scoped_lease.h"

#include "absl/strings/str_cat.h"

namespace redlock {

ScopedLease& ScopedLease::operator=(ScopedLease&& other) noexcept {
  if (this != &other) {
    (void)Release();
    client_ = other.client_;
    lease_ = std::move(other.lease_);
    other.client_ = nullptr;
    other.lease_ = Lease();
  }
  return *this;
}

ScopedLease::~ScopedLease() { (void)Release(); }

absl::StatusOr<ScopedLease> ScopedLease::Acquire(Client& client, absl::string_view resource,
                                                 absl::Duration ttl, absl::Duration wait,
                                                 const StopToken& stop) {
  absl::StatusOr<Lease> lease = client.Acquire(resource, ttl, wait, stop);
  if (!lease.ok()) return lease.status();
  return ScopedLease(&client, *std::move(lease));
}

absl::Status ScopedLease::Release() {
  if (!owns()) return absl::OkStatus();
  Client* client = client_;
  client_ = nullptr;
  Lease lease = std::move(lease_);
  lease_ = Lease();
  return client->Release(lease);
}

Lease ScopedLease::Dismiss() {
  client_ = nullptr;
  Lease lease = std::move(lease_);
  lease_ = Lease();
  return lease;
}

absl::Status WithLock(
    Client& client, absl::string_view resource, absl::Duration ttl, const LockOptions& options,
    absl::FunctionRef<absl::Status(const Lease& lease, const StopToken& lost)> fn) {
  absl::StatusOr<ScopedLease> held =
      ScopedLease::Acquire(client, resource, ttl, options.wait, options.stop);
  if (!held.ok()) return held.status();
  absl::StatusOr<std::unique_ptr<Renewal>> renewal =
      client.AutoRenew(held->lease(), options.renew, [](absl::Status) {});
  if (!renewal.ok()) return renewal.status();
  absl::Status result = fn(held->lease(), (*renewal)->lost());
  (*renewal)->Stop();
  if (result.ok() && !(*renewal)->status().ok()) {
    absl::Status lost = (*renewal)->status();
    result = absl::Status(
        lost.code(), absl::StrCat("with lock \"", resource,
                                  "\": the lock was lost while the work ran: ", lost.message()));
  }
  // Release reports only problems with the nodes: the work is done either way.
  (void)held->Release();
  return result;
}

}  // namespace redlock
