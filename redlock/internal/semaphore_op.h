// A semaphore's acquisition (redlock/semaphore.h): K permits, each a plain
// lock key "<resource>:permit:<i>" held with the ordinary Redlock quorum.
//
// One attempt sends one script to every node: "take the first free permit
// key in the order first, first+1, ... (mod K)". Nodes in the same state
// pick the same permit, so a quorum of them grants it in one round trip.
// The attempt succeeds as soon as one permit has a quorum of picks (and,
// with fencing, the permit's own fencing round 2 confirms it); it fails as
// soon as no permit can reach a quorum with the nodes still to answer. The
// picks of other permits, and all picks of a failed attempt, are released
// at once behind their scripts on each node's ordered connection. Every
// other rule is the plain acquisition's (docs/design.md 4.2, acquire_op.h):
// per-node deadlines, validity = ttl - elapsed - drift, retries, the wait
// woken by release announcements, cancellation, the durability vote.
//
// Why K permits with a majority each, and not a holder count per node
// granted on a majority (unsafe for K > 1) or counts on more than
// N*K/(K+1) nodes (safe, but it stops granting with a single node down for
// most K): README "Semaphore".

#ifndef REDLOCK_INTERNAL_SEMAPHORE_OP_H_
#define REDLOCK_INTERNAL_SEMAPHORE_OP_H_

#include <optional>
#include <string>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/context.h"
#include "redlock/lease.h"
#include "redlock/stop_token.h"

namespace redlock::internal {

// The resource name of permit `slot` (0-based) of semaphore `resource`.
std::string PermitResource(absl::string_view resource, int slot);

struct SemaphoreRequest {
  std::string resource;  // checked by the caller (with the permit suffix)
  int permits = 1;       // K >= 1
  LockTtl ttl;           // checked (algorithm.h), with its drift allowance
  int quorum = 0;        // resolved
  int max_attempts = 1;  // without `wait`
  std::optional<absl::Duration> wait;
  StopToken stop;
};

// A granted permit: the lease of its key, and its index.
using PermitCallback = absl::AnyInvocable<void(absl::StatusOr<std::pair<Lease, int>>)>;

// Starts the acquisition; `done` runs exactly once, where it completes.
void StartSemaphoreAcquire(OpContext* ctx, SemaphoreRequest request, PermitCallback done);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SEMAPHORE_OP_H_
