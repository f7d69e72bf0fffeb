// The lock family behind Client::AcquireFamily and Client::InspectFamily
// (client.h): the one internal entry point of the reader-writer lock, the
// semaphore and the election (docs/design.md 5.15). It checks a request,
// picks the primitive's shape (lock_shape.h: the scripts that replace the
// mutex's, the token rule, the lease kind) or the semaphore's own operation
// (semaphore_op.h), starts it on the mutex's code, withdraws a waiting
// writer's intent when its call ends, and reads every node's view. Every
// command goes through NodeCalls (NOSCRIPT, script-free nodes, cluster
// redirections): the public classes build no wire command and reach no
// implementation, so they work over any Client that forwards these calls.
//
// The files: family_ops.cc (checks, the dispatch, the grants, the intent's
// withdrawal), family_shapes.h (the shapes), family_views.cc (the views),
// family_fan_out.h (one command to every node).

#ifndef REDLOCK_INTERNAL_FAMILY_OPS_H_
#define REDLOCK_INTERNAL_FAMILY_OPS_H_

#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "redlock/client.h"
#include "redlock/node_status.h"
#include "redlock/options.h"

namespace redlock::internal {

class ClientImpl;
class OpContext;

// Whether `request` is well formed for `options` (a resource, a wait >= 0,
// and the kind's own fields); kInvalidArgument saying what is not.
absl::Status CheckFamilyRequest(const Client::FamilyRequest& request, const Options& options);

// Starts one acquisition of `request`. `done` runs once: where the
// acquisition completes (the transport's thread), or at once on the calling
// thread for a request refused before anything is sent.
void StartFamily(ClientImpl& impl, Client::FamilyRequest request, Client::FamilyCallback done);

using FamilyViewsCallback = absl::AnyInvocable<void(absl::StatusOr<std::vector<FamilyNodeView>>)>;

// Reads every node's view of `request`'s primitive; `done` runs once every
// node answered or failed (or at once for a bad request).
void StartInspectFamily(OpContext& ctx, const Client::FamilyRequest& request,
                        FamilyViewsCallback done);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_FAMILY_OPS_H_
