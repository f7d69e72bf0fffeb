// redlock/outcome.h: what a call's failure was, without parsing messages.
//
// Every status the library returns from an acquire, extend or release (and
// MultiLock's) carries an Outcome: the kind of failure, the tally of the
// last round and how each node answered it.
//
//   absl::StatusOr<redlock::Lease> lease = client->TryAcquire("orders/42", ttl);
//   if (std::optional<redlock::Outcome> o = redlock::GetOutcome(lease.status())) {
//     if (o->kind == redlock::Outcome::Kind::kHeldElsewhere) {
//       // o->refused nodes hold it for someone else
//     }
//     for (const redlock::NodeResult& n : o->nodes) { /* n.node, n.answer, n.latency */ }
//   }
//
// The absl::Status codes stay as documented (client.h); the Outcome tells
// apart what one code covers (kDeadlineExceeded: no validity left, or the
// wait ran out).

#ifndef REDLOCK_OUTCOME_H_
#define REDLOCK_OUTCOME_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace redlock {

// How one node answered the last round of a call.
struct NodeResult {
  // The kinds of answer.
  enum class Answer {
    kNone,         // not answered when the round was decided (or not asked)
    kYes,          // granted / still held / released
    kRefused,      // held by another token, or the lease is lost there
    kUnavailable,  // timeout, I/O error, breaker open, busy/loading/auth errors
    kError,        // unexpected reply or script error
  };
  std::string node;  // "host:port"
  // What it answered.
  Answer answer = Answer::kNone;
  // From the round's start to the answer (zero for kNone).
  absl::Duration latency = absl::ZeroDuration();
  std::string detail;  // why, for kUnavailable and kError
};

// Outcome: what a call's failure was (see the top of this file); read it
// with GetOutcome.
struct Outcome {
  // The kinds of failure, each with the status code it comes with.
  enum class Kind {
    kSucceeded,          // (events only: a status with an outcome is a failure)
    kHeldElsewhere,      // kAborted: a quorum answered, someone else holds it
    kQuorumUnreachable,  // kUnavailable: too few nodes answered
    kNoValidityLeft,     // kDeadlineExceeded: granted, but the round took too long
    kWaitExpired,        // kDeadlineExceeded: the wait deadline passed
    kCancelled,          // kCancelled: stopped, or the client went away
    kLeaseLost,          // kFailedPrecondition: extend found the lease gone
    kInternal,           // kInternal: unexpected replies from a quorum
    kPlaceLost,          // kAborted: a fair lock's waiter lost its place in the
                         // queue (it expired, or was removed on a quorum)
  };
  // Which of them.
  Kind kind = Kind::kSucceeded;
  // The last round: how many nodes it needed, and how they answered.
  int quorum = 0;
  // Nodes that answered kYes in the last round.
  int yes = 0;
  // Nodes that answered kRefused.
  int refused = 0;
  // Nodes that answered kUnavailable.
  int unavailable = 0;
  // Nodes that answered kError.
  int errors = 0;
  // Attempts made (acquisitions), and the whole call's duration.
  int attempts = 0;
  // See attempts.
  absl::Duration elapsed = absl::ZeroDuration();
  std::vector<NodeResult> nodes;  // every node, in Options::nodes order
};

// "held_elsewhere", "quorum_unreachable", ... (stable: metrics labels use them).
const char* OutcomeKindName(Outcome::Kind kind);
// "none", "yes", "refused", ... (stable: metrics labels use them).
const char* AnswerName(NodeResult::Answer answer);

// The Outcome attached to `status` by the library; nullopt for OK and for
// statuses it did not produce (invalid arguments are plain statuses).
std::optional<Outcome> GetOutcome(const absl::Status& status);

}  // namespace redlock

#endif  // REDLOCK_OUTCOME_H_
