// How each node's answer counts in a round: the decoding of replies into
// votes (algorithm.h's Round), one function per kind of request. Pure: unit
// tests feed them replies directly.

#ifndef REDLOCK_INTERNAL_VOTES_H_
#define REDLOCK_INTERNAL_VOTES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/reply.h"
#include "redlock/outcome.h"

namespace redlock::internal {

// A node's vote and, for votes other than yes/refused, what went wrong.
struct Vote {
  Round::Vote vote = Round::Vote::kInternal;
  std::string detail;
};

// The form of an acquisition's first round.
enum class AcquireForm {
  kSet,      // SET key token NX PX ttl (one key, no fencing)
  kScript,   // the acquire script over a set of keys
  kFencing,  // the fencing round-1 script (sets the keys, reads the counters)
};

// Round 1 of an acquisition over `keys` keys. For a fencing grant,
// `counters` receives the node's counters, one per key.
Vote AcquireVote(const absl::StatusOr<Reply>& r, AcquireForm form, size_t keys,
                 std::vector<uint64_t>* counters);

// Fencing round 2 (the commit script): 1 yes, 0 the key was lost.
Vote CommitVote(const absl::StatusOr<Reply>& r);

// Extend (1: still held and extended, 0: lost) and release (any count: the
// key is gone either way).
Vote ExtendVote(const absl::StatusOr<Reply>& r);
Vote ReleaseVote(const absl::StatusOr<Reply>& r);

// Records a node's answer for the Outcome (outcome.h).
void RecordAnswer(const Vote& vote, absl::Duration latency, NodeResult* out);

// The kind of a failed call's status (kDeadlineExceeded: no validity left;
// a wait that ran out is told apart by its caller).
Outcome::Kind KindOf(const absl::Status& status);

// An outcome of `kind` with the answers of a round and their tally.
Outcome MakeOutcome(Outcome::Kind kind, int quorum, std::vector<NodeResult> nodes);

// A node's answer to the semaphore's acquisition script over `permits`
// permit keys (with `fencing`, their counters too): its vote, the permit it
// set (`pick`, 0-based; -1: none) and that permit's counter.
Vote PermitVote(const absl::StatusOr<Reply>& r, int permits, bool fencing, int* pick,
                uint64_t* counter);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_VOTES_H_
