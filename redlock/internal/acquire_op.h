// An acquisition: attempts of one round over all nodes (two with fencing),
// the cleanup of a failed attempt, and the retry or wait policy between
// attempts (docs/design.md 5.1-5.6, 5.10, 5.14).

#ifndef REDLOCK_INTERNAL_ACQUIRE_OP_H_
#define REDLOCK_INTERNAL_ACQUIRE_OP_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/context.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/lease.h"
#include "redlock/stop_token.h"

namespace redlock::internal {

using LeasesCallback = absl::AnyInvocable<void(absl::StatusOr<std::vector<Lease>>)>;
// Client::LeaseCallback.
using LeaseCallback = absl::AnyInvocable<void(absl::StatusOr<Lease>)>;

struct AcquireRequest {
  // Checked by the caller: non-empty, each valid, no duplicates.
  std::vector<std::string> resources;
  // A checked ttl (algorithm.h), with its drift allowance.
  LockTtl ttl;
  // Resolved (never 0).
  int quorum = 0;
  // Without `wait`: at most this many attempts, retry_delay apart.
  int max_attempts = 1;
  // Without `wait`: no retry after an attempt that failed for unavailable
  // nodes (MultiLock's all-nodes mode: such a node fails every attempt until
  // it is back).
  bool fail_fast_unavailable = false;
  // With it: attempts until the lock is held or this much time has passed
  // (InfiniteDuration: until held, cancelled or the client goes), woken by
  // release announcements, else jittered polling.
  std::optional<absl::Duration> wait;
  // Cancels the acquisition: it completes with kCancelled at once, and what
  // an attempt in flight sets is released behind it.
  StopToken stop;
  // The lock family's scripts and tokens (lock_shape.h); null: a plain lock.
  std::shared_ptr<const AcquireShape> shape;
};

// Starts the acquisition; `done` runs exactly once, where the operation
// completes (the I/O thread, or a caller polling in a synchronous call).
// One lease per resource, in the order given. The first attempt's fan-out
// runs on the calling thread.
void StartAcquire(OpContext* ctx, AcquireRequest request, LeasesCallback done);
// The same for a request of one resource, `done` getting its one lease.
void StartAcquireOne(OpContext* ctx, AcquireRequest request, LeaseCallback done);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ACQUIRE_OP_H_
