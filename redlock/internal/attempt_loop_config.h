// What AttemptLoop (attempt_loop.h) is given by an acquiring operation, what
// the operation provides to it, and how a node's answer names the attempt and
// node it belongs to.
//
// What an attempt sends and how its answers are counted is the operation's.
// `Op` derives from AttemptLoop<Op, NodeState, Value> and provides, for the
// loop (declaring it a friend):
//   Command Round1Locked();          a new attempt: sets token_, resets its own
//                                    state, and says what round 1 sends
//   NodeCalls::Judge Round1Judge() const;  how a node's reply votes
//   bool Round1Durable() const;      Options::durability waits on round 1
//   void OnRound1(int attempt, int node, NodeCalls::Answer);
//   void CommittedLocked();          every node of StartCommitLocked confirmed
//   int quorum() const;              an attempt's grants (and a wait's)
//   bool FreedByCleanupLocked(int node) const;  the cleanup frees the node for the wait
//   void FillRelease(KeysRelease*) const;        a cleanup's custom command, if any
//   static void SetConnections(Value*, std::shared_ptr<std::vector<ConnectionId>>);
//   void FillEvent(const absl::StatusOr<Value>&, AcquireEvent*) const;
// and may shadow (the loop's own are the defaults):
//   absl::Duration RetryDelayLocked(absl::Duration policy) const;  the pause
//                                    before the next attempt (the policy's)
// NodeState has `NodeResult result` and `ConnectionId conn` (where round 1
// went; 0: not sent).

#ifndef REDLOCK_INTERNAL_ATTEMPT_LOOP_CONFIG_H_
#define REDLOCK_INTERNAL_ATTEMPT_LOOP_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "redlock/stop_token.h"

namespace redlock::internal {

// What the loop needs of a request.
// The op names its call in messages with `std::string What() const`
// ("acquire \"r\""), built only when a message needs it.
struct AttemptLoopConfig {
  std::vector<std::string> keys;  // every key an attempt may set (with the prefix)
  absl::Duration ttl;
  std::optional<absl::Duration> wait;
  int max_attempts = 1;
  bool fail_fast_unavailable = false;
  StopToken stop;
  // The channels a wait listens on; empty: the release announcements of
  // `keys` (a fair waiter listens on its own channel instead).
  std::vector<std::string> watch_channels;
};

// A node's answer names its attempt and node in its tag
// (NodeCalls::Answer::tag), so that the callback holds only the op and fits
// AnyInvocable's inline storage.
inline uint64_t AnswerTag(int attempt, int node) {
  return (uint64_t{static_cast<uint32_t>(attempt)} << 32) | static_cast<uint32_t>(node);
}
inline int AttemptOfTag(uint64_t tag) { return static_cast<int>(tag >> 32); }
inline int NodeOfTag(uint64_t tag) { return static_cast<int>(tag & 0xffffffffu); }

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ATTEMPT_LOOP_CONFIG_H_
