// Entry points for multilock/: sets of resources on a Client made by
// Client::Create, with the client's own retry and wait policy (one policy,
// one clock, tested once). Not part of the public API: MultiLock is.

#ifndef REDLOCK_INTERNAL_SET_API_H_
#define REDLOCK_INTERNAL_SET_API_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/lease.h"
#include "redlock/renewal.h"
#include "redlock/stop_token.h"

namespace redlock::internal {

struct SetAcquire {
  // Distinct, valid resources (MultiLock canonicalises them).
  std::vector<std::string> resources;
  absl::Duration ttl;
  // Nodes that must grant: 0 is the client's quorum, N every node.
  int quorum = 0;
  // Without a wait: this many attempts (unset: Options::max_attempts), and
  // none after one that failed for unavailable nodes when set (the
  // all-nodes mode: such a node fails every attempt until it is back).
  std::optional<int> max_attempts;
  bool fail_fast_unavailable = false;
  // With one: until held, or this long (may be infinite); see Client::Acquire.
  std::optional<absl::Duration> wait;
  StopToken stop;
};

// Every call returns kFailedPrecondition for a Client not made by
// Client::Create. One lease per resource, in the order given.
absl::StatusOr<std::vector<Lease>> AcquireSet(Client& client, SetAcquire request);
// `done` runs on the client's I/O thread.
void AcquireSetAsync(Client& client, SetAcquire request,
                     absl::AnyInvocable<void(absl::StatusOr<std::vector<Lease>>)> done);
absl::StatusOr<std::vector<Lease>> ExtendSet(Client& client, std::vector<Lease> leases,
                                             absl::Duration ttl, int quorum);
absl::Status ReleaseSet(Client& client, std::vector<Lease> leases, int quorum);
absl::StatusOr<std::unique_ptr<Renewal>> AutoRenewSet(
    Client& client, std::vector<Lease> leases, int quorum, RenewOptions options,
    absl::AnyInvocable<void(absl::Status)> on_lost);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SET_API_H_
