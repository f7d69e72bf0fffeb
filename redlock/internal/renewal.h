// Auto-renewal (Client::AutoRenew, Mutex, MultiLock): extends a lease at a
// fixed fraction of its ttl on the client's timers (no thread per lease),
// tells when it is at risk and when it is lost. The registry lets Release
// stop the renewals of the lease it releases, and the client detach every
// renewal when it goes.

#ifndef REDLOCK_INTERNAL_RENEWAL_H_
#define REDLOCK_INTERNAL_RENEWAL_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "redlock/internal/context.h"
#include "redlock/lease.h"
#include "redlock/renewal.h"

namespace redlock::internal {

class RenewState;

class Renewals {
 public:
  // Starts renewing `leases` (a set sharing one token; checked by the caller)
  // with `quorum` (resolved) nodes needed per extension.
  absl::StatusOr<std::unique_ptr<Renewal>> Start(OpContext* ctx, std::vector<Lease> leases,
                                                 int quorum, RenewOptions options,
                                                 absl::AnyInvocable<void(absl::Status)> on_lost);
  // Stops the renewals of leases with `token` (their lease is being released).
  void StopFor(const std::string& token);
  // The client is going: every renewal becomes inert (an active one stops
  // its lost() token), and Start refuses new ones (kCancelled).
  void DetachAll();

 private:
  std::mutex mu_;
  bool detached_ = false;
  std::multimap<std::string, std::weak_ptr<RenewState>> by_token_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_RENEWAL_H_
