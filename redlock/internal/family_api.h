// What the lock family's classes (redlock/rw_lock.h, semaphore.h,
// election.h) need of a Client made by Client::Create: its operations with
// a shape (lock_shape.h), its context, and a command sent to every node.

#ifndef REDLOCK_INTERNAL_FAMILY_API_H_
#define REDLOCK_INTERNAL_FAMILY_API_H_

#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "redlock/client.h"
#include "redlock/internal/client_impl.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/transport.h"

namespace redlock::internal {

// The implementation behind `client`, or null for another Client.
ClientImpl* ImplOf(Client* client);

// kFailedPrecondition naming `what`, for a Client not made by Client::Create.
absl::Status NotACreatedClient(absl::string_view what);

// Sends `command` to every node; `done` (may be null: fire and forget) gets
// every node's reply, in node order, once all have answered or failed. It
// runs where the last reply completes (the transport's thread).
void SendToAll(OpContext& ctx, const Command& command,
               absl::AnyInvocable<void(std::vector<absl::StatusOr<Reply>>)> done);

// The same, blocking (not from a callback of the client: kFailedPrecondition).
absl::StatusOr<std::vector<absl::StatusOr<Reply>>> SendToAllAndWait(ClientImpl& impl,
                                                                    const Command& command);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_FAMILY_API_H_
