// The durability vote (Options::durability): the command a node runs right
// behind a write to confirm that its replicas have it, how its reply counts,
// and the check Client::Create makes for WAITAOF.

#ifndef REDLOCK_INTERNAL_DURABILITY_H_
#define REDLOCK_INTERNAL_DURABILITY_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/sync_waiter.h"
#include "redlock/internal/transport.h"
#include "redlock/internal/votes.h"
#include "redlock/options.h"

namespace redlock::internal {

// True when `d` asks for the check.
inline bool DurabilityOn(const Options::Durability& d) { return d.replicas > 0; }

// `WAIT K timeout_ms`, or `WAITAOF 1 K timeout_ms` with d.fsync. Sent on the
// connection of the write it confirms, right behind it: WAIT waits for the
// connection's latest write, so it covers every earlier write on it too.
// REQUIRES: DurabilityOn(d).
Command DurabilityCommand(const Options::Durability& d);

// How the node's answer to DurabilityCommand counts: yes when at least K
// replicas (and with WAITAOF the node itself) confirmed; kUnavailable naming
// how many did otherwise; kInternal for a server that does not know WAITAOF.
Vote DurabilityVote(const absl::StatusOr<Reply>& r, const Options::Durability& d);

// With d.fsync: asks every node whether it knows WAITAOF (COMMAND INFO, one
// round trip per node, in parallel) and returns kFailedPrecondition naming
// the first node that answered without it. Nodes that do not answer are not
// judged (their votes will say). OK at once without d.fsync.
// REQUIRES: not called from the transport's thread.
absl::Status CheckDurabilitySupport(NodeIo& transport, Blocking& blocking,
                                    const Options::Durability& d);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_DURABILITY_H_
