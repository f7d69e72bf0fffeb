// Release and extend: one round of a compare-and-act script over every node
// for the keys of one lease, or of a set of leases sharing a token
// (docs/design.md 5.7, 5.8).

#ifndef REDLOCK_INTERNAL_KEYS_OP_H_
#define REDLOCK_INTERNAL_KEYS_OP_H_

#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/acquire_op.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/context.h"
#include "redlock/lease.h"

namespace redlock::internal {

using StatusCallback = absl::AnyInvocable<void(absl::Status)>;

// kInvalidArgument unless `leases` is a non-empty set of non-empty leases of
// one acquisition (one token), each resource once.
absl::Status CheckLeases(const std::vector<Lease>& leases, absl::string_view what);
// CheckLeases of a list of `lease` alone, without the list.
absl::Status CheckLease(const Lease& lease, absl::string_view what);

// Sets the keys' ttl to `ttl` (checked, algorithm.h) on every node that still
// holds the token, with `quorum` (resolved) nodes needed; `done` gets the
// leases with their new validity, measured from the extend's start.
// REQUIRES: CheckLeases(leases) is OK.
void StartExtend(OpContext* ctx, std::vector<Lease> leases, const LockTtl& ttl, int quorum,
                 LeasesCallback done);

// Deletes the keys where they still hold the token and announces the
// release; kUnavailable when fewer than `quorum` nodes confirmed.
// The leases are read before it returns, not kept.
// REQUIRES: CheckLeases(leases) is OK.
void StartRelease(OpContext* ctx, const std::vector<Lease>& leases, int quorum,
                  StatusCallback done);
// The same for one lease, without a list (the steady path's release).
// REQUIRES: CheckLease(lease) is OK.
void StartReleaseOne(OpContext* ctx, const Lease& lease, int quorum, StatusCallback done);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_KEYS_OP_H_
