// A fair lock's acquisition (redlock/fair_mutex.h; docs/design.md 5.17):
// Lamport's bakery over quorums, on the mutex's skeleton (attempt_loop.h).
//
// A waiter (an acquisition with a wait) goes through three stages, each an
// attempt of one round to every node:
//   probe     takes the lock only if it is free and nobody waits, and reads
//             each node's highest live ticket (fair-probe). Without a wait
//             this is the whole call.
//   register  takes a place: ticket = 1 + the highest ticket the probe read
//             from a quorum, added on every node (fair-register), and the
//             lock at once where the place is the first and the lock free.
//             The place is taken once a quorum confirmed it.
//   queued    the lock, on each node only for the first live place
//             (fair-acquire), woken by announcements on the waiter's own
//             channel and by its heartbeats.
// Mutual exclusion is the lock key's alone, as for the mutex: each grant
// sets it only where it does not exist, on a quorum, with validity = ttl -
// elapsed - drift. The queue decides only who may try.
//
// While it waits, a waiter's heartbeat (the client's timers, no thread)
// keeps its place alive on the nodes, puts it back on a node that lost it
// while a quorum kept it, and hears whether its place is first and the
// lock free there (a wake-up that no announcement is needed for). The place
// is valid until the start of the last heartbeat (or registration) that a
// quorum confirmed, plus place_ttl, minus drift; once that has passed, or a
// quorum says the place is gone, the call fails with kAborted
// (Outcome::Kind::kPlaceLost). A call that ends without the lock leaves the
// queue on every node; a granted place goes with the lease's release (or
// expires).

#ifndef REDLOCK_INTERNAL_FAIR_OP_H_
#define REDLOCK_INTERNAL_FAIR_OP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/context.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/votes.h"
#include "redlock/lease.h"
#include "redlock/stop_token.h"

namespace redlock::internal {

// A place's ttl when the request gives none, and its limits: at least
// kMinPlaceTtl and 3 node timeouts (a heartbeat every third of it must be
// able to come back), at most kMaxTtlMs.
inline constexpr absl::Duration kDefaultPlaceTtl = absl::Seconds(2);
inline constexpr absl::Duration kMinPlaceTtl = absl::Milliseconds(30);
// Tickets are sorted-set scores (doubles): integers up to 2^53 are exact.
inline constexpr uint64_t kMaxTicket = uint64_t{1} << 53;
// The places a view reads per node.
inline constexpr int kFairViewPlaces = 64;

// `place_ttl` checked for `options` (zero: kDefaultPlaceTtl), in whole ms.
absl::StatusOr<absl::Duration> CheckPlaceTtl(absl::Duration place_ttl, const Options& options);

struct FairRequest {
  std::string resource;  // checked by the caller
  LockTtl ttl;           // checked, with its drift allowance
  int quorum = 0;        // resolved
  // None: one try without a place. Else: a place, then the lock (or the
  // wait passes, kDeadlineExceeded; InfiniteDuration: until held, stopped,
  // the place lost or the client goes).
  std::optional<absl::Duration> wait;
  StopToken stop;
  absl::Duration place_ttl = kDefaultPlaceTtl;  // checked
  // Once the place is on a quorum (the transport's thread).
  std::function<void()> on_queued;
};

using FairCallback = absl::AnyInvocable<void(absl::StatusOr<Lease>)>;

// Starts the acquisition; `done` runs exactly once, where it completes (or
// at once, for a request refused before anything is sent).
void StartFairAcquire(OpContext* ctx, FairRequest request, FairCallback done);

// A node's answer to an acquisition script (fair_scripts.h), decoded.
struct FairReply {
  int64_t code = 0;         // 1 granted; -1 held; -2 another first; -3 no place
  uint64_t max_ticket = 0;  // the node's highest live ticket
  uint64_t counter = 0;     // with fencing, on a grant
};
// Its vote: yes for a grant, refused for -1, -2, -3, else what went wrong
// (a malformed reply or counter is kInternal).
Vote FairVote(const absl::StatusOr<Reply>& r, bool fencing, FairReply* out);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_FAIR_OP_H_
