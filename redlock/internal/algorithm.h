// The arithmetic and decisions of Redlock, free of I/O (docs/design.md 5.2,
// 5.3, 5.10, 7.1), so unit tests can cover them exhaustively.

#ifndef REDLOCK_INTERNAL_ALGORITHM_H_
#define REDLOCK_INTERNAL_ALGORITHM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/options.h"

namespace redlock::internal {

// Largest ttl accepted: 2^40 ms (about 35 years), far below what Redis' PX
// and the steady clock can represent.
inline constexpr int64_t kMaxTtlMs = int64_t{1} << 40;

// Suffix of a resource's fencing counter key: "<prefix><resource>:fence".
inline constexpr absl::string_view kFenceSuffix = ":fence";

// Pub/sub channel prefix on which the release script announces a release:
// channel = kReleaseChannelPrefix + key.
inline constexpr absl::string_view kReleaseChannelPrefix = "redlock:release:";

// ttl - elapsed - drift. May be zero or negative: no validity left.
inline absl::Duration Validity(absl::Duration ttl, absl::Duration elapsed, absl::Duration drift) {
  return ttl - elapsed - drift;
}

// A ttl checked for the client's options, in the forms a lock needs: whole
// milliseconds (what the nodes are sent) and as a duration, with its drift
// allowance (redlock::DriftAllowance), computed once.
struct LockTtl {
  absl::Duration ttl;  // == absl::Milliseconds(ms)
  int64_t ms = 0;
  absl::Duration drift;
};

// Checks a ttl for `options` (finer parts than a millisecond are truncated).
// kInvalidArgument when it is not finite, not larger than the drift
// allowance, or above kMaxTtlMs.
absl::StatusOr<LockTtl> CheckTtl(absl::Duration ttl, const Options& options);

// Checks a resource name: 1..kMaxResourceLength bytes, not ending in
// ":fence" (those names are the counters, with fencing off too: an election
// always keeps one).
absl::Status CheckResource(absl::string_view resource, const Options& options);

// Quoted resource(s) for messages: "a" or {"a", "b"} (long lists elided).
std::string DescribeResources(const std::vector<std::string>& resources);

// "1 attempt", "3 attempts" (the messages of waits and retries).
std::string AttemptCount(int n);

// One fan-out round over N nodes needing `quorum` yes votes. The decision is
// known as soon as quorum nodes said yes, or N - quorum + 1 said anything
// else: no waiting for stragglers.
class Round {
 public:
  // How a node answered.
  enum class Vote {
    kYes,          // granted / still held / released
    kRefused,      // a definite "no": held by another token, or lease lost
    kUnavailable,  // timeout, I/O error, breaker open, busy/loading/auth errors
    kInternal,     // unexpected reply type or script error
    kCancelled,    // the client is shutting down
  };
  enum class Outcome { kPending, kSucceeded, kFailed };

  Round(int nodes, int quorum) : nodes_(nodes), quorum_(quorum) {}

  // Records node `node`'s answer; `detail` is the error text for votes other
  // than kYes/kRefused (kept for the first few).
  Outcome Record(const std::string& node, Vote vote, absl::string_view detail = "");

  Outcome outcome() const;
  int nodes() const { return nodes_; }
  int quorum() const { return quorum_; }
  int yes() const { return yes_; }
  int refused() const { return refused_; }
  int answered() const { return yes_ + refused_ + unavailable_ + internal_ + cancelled_; }

  // The status of a failed round, per docs/design.md 7.1, naming what made the
  // quorum impossible: kCancelled if the client is shutting down;
  // `refused_code` (kAborted for acquire, kFailedPrecondition for extend)
  // when nodes refused and the unavailable ones alone would not have
  // prevented the quorum; kUnavailable when they would have; kInternal when
  // unexpected replies were needed to prevent it. The message is
  //   <what>: <yes> of <N> nodes <yes_verb> (quorum <q>)[; <refused_verb> on
  //   <k> nodes][; <node>: <error>]...
  absl::Status Failure(absl::string_view what, absl::string_view yes_verb,
                       absl::string_view refused_verb, absl::StatusCode refused_code) const;

  // "<yes> of <N> nodes <yes_verb> (quorum <q>)" plus node errors, for
  // messages that are not plain failures.
  std::string Summary(absl::string_view yes_verb, absl::string_view refused_verb) const;

 private:
  int nodes_;
  int quorum_;
  int yes_ = 0;
  int refused_ = 0;
  int unavailable_ = 0;
  int internal_ = 0;
  int cancelled_ = 0;
  std::vector<std::string> errors_;  // "<node>: <detail>", the first kMaxErrors
  int more_errors_ = 0;
};

// Classifies a Redis error reply: availability problems (LOADING, READONLY,
// OOM, NOAUTH, ...) are kUnavailable; anything else (WRONGTYPE, script
// errors) is kInternal.
Round::Vote VoteForErrorReply(absl::string_view error);

// Fencing: parses a counter as read in round 1 ("0" when absent). Counters are
// decimal uint64 without sign or leading zeros.
absl::StatusOr<uint64_t> ParseCounter(absl::string_view text);

// Fencing: how many nodes a fenced acquisition needs (docs/design.md 5.10,
// README "Fencing tokens", Options::fencing_lost_counters). With N nodes,
// the lock's `quorum` and `lost_counters` nodes allowed to lose their
// counter:
//   F = max(quorum, ceil((N + lost_counters + 1) / 2)).
// Round 1 needs F grants; T = 1 + the max of the counters read by exactly
// those F scripts; round 2 commits T on those F nodes and needs all F.
//
// Why tokens still strictly increase. Let A and B be two successful
// holders and C_A, C_B their F nodes. 2F >= N + lost_counters + 1, so C_A
// and C_B share at least lost_counters + 1 nodes. On a shared node n both
// held the lock key, at disjoint times (SET NX); each read n's counter in
// the script that set its key, and raised the counter to its token while
// that key still held. Say A held n first: B's read on n came after A's
// raise, so B read at least T_A there unless n's counter went back in
// between (lost with a restart, set back, or set to garbage and repaired).
// At most lost_counters nodes did, so one shared node kept it and
// T_B = 1 + max(reads) > T_A. Two shared nodes that kept their counters
// cannot disagree on who held first (that would give T_A > T_B > T_A), so
// the holder that came later on them has the higher token, and two holders
// never have the same one. A garbage counter is no read at all: its node
// votes as an error and is not among the F.
//
// Why the reads are the grants and nothing more: a node that refused may
// still hold the previous holder's key, and that holder's commit there may
// come after our read; only the script that set our key reads after every
// earlier holder of that node. So the read set and the commit set are the
// same F nodes, and |R| + |W| = 2F > N + lost_counters.
//
// Availability: N - F nodes may be down, slow past node_timeout, refusing
// or holding a garbage counter. Fewer than F cannot do: two holders using
// F - 1 nodes each may share only lost_counters nodes, all of which may
// have lost what the earlier one wrote. With lost_counters = 0 this is the
// quorum (two majorities of an odd N share at least one node); an even N
// already shares two nodes (N=4: 3 of 4).
int FencedQuorum(int nodes, int quorum, int lost_counters);

// What a failed acquisition's message adds when it needed `fenced` nodes
// (FencedQuorum) rather than its `quorum`: where that number comes from
// ("; fenced acquisitions need F nodes (Options::fencing_lost_counters
// L)"). Empty when the two are the same.
std::string FencedQuorumNote(int fenced, int quorum, int lost_counters);
// `failed` with FencedQuorumNote appended to its message.
absl::Status WithFencedQuorumNote(absl::Status failed, int fenced, int quorum, int lost_counters);

// How many nodes may lose their counter when every holder reads and commits
// on `fenced_quorum` of `nodes`: 2F - N - 1 (at least the lost_counters that
// gave F; one more when N + lost_counters is odd, e.g. N=5, F=4: two).
int CounterLossesSurvived(int nodes, int fenced_quorum);

// Fencing: T = 1 + max(counters). kInternal if a counter is already at the
// maximum (the token space is exhausted, which 2^64 acquisitions never reach
// in practice but must not wrap).
absl::StatusOr<uint64_t> NextFence(const std::vector<uint64_t>& counters);

// The reader-writer lock's tokens on its one counter (docs/design.md 5.15).
// A writer takes the least odd number above every counter read; a reader
// the least even number not below them, and at least 2. So a reader is
// strictly above every writer before it (whose odd token its reads include:
// the F-set argument of FencedQuorum), readers that overlap with no writer
// between them share one token (the store then accepts each of their
// reads), and a writer is strictly above every earlier reader and writer. A
// store that has seen a reader's token refuses the writer before it: a
// writer paused past its lease cannot write under a later reader. A reader's
// token is never 0, the value that says "fencing off". kInternal where the
// token space is exhausted, as NextFence.
absl::StatusOr<uint64_t> WriterFence(const std::vector<uint64_t>& counters);
absl::StatusOr<uint64_t> ReaderFence(const std::vector<uint64_t>& counters);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ALGORITHM_H_
