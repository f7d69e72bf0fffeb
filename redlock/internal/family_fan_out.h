// One command to every node through NodeCalls, every reply gathered: the
// lock family's views and a waiting writer's intent withdrawal
// (family_ops.h).

#ifndef REDLOCK_INTERNAL_FAMILY_FAN_OUT_H_
#define REDLOCK_INTERNAL_FAMILY_FAN_OUT_H_

#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "redlock/internal/command.h"
#include "redlock/internal/context.h"
#include "redlock/internal/reply.h"

namespace redlock::internal {

using Replies = std::vector<absl::StatusOr<Reply>>;

// Sends `command` to every node through NodeCalls (so a NOSCRIPT is loaded
// and resent, a script-free node runs its form or says why not, a cluster
// redirection is followed); `done` (may be null) gets every node's reply in
// node order once all have answered or failed, where the last one
// completes.
void FanOut(OpContext& ctx, const Command& command, absl::AnyInvocable<void(Replies)> done);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_FAMILY_FAN_OUT_H_
