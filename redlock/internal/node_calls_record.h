// NodeCalls' record of one command in flight (NodeCalls::Call), shared by
// the front (node_calls.cc) and the releases that must not be lost
// (node_calls_release.cc). Internal to those two files.

#ifndef REDLOCK_INTERNAL_NODE_CALLS_RECORD_H_
#define REDLOCK_INTERNAL_NODE_CALLS_RECORD_H_

#include <atomic>
#include <mutex>
#include <optional>

#include "absl/status/statusor.h"
#include "redlock/internal/node_calls.h"

namespace redlock::internal {

// One command in flight: its judge, its sends (rounds), its confirmation and
// the answer it delivers once.
struct NodeCalls::Call {
  std::atomic<int> refs{0};  // CallRef
  NodeCalls* owner = nullptr;
  int node = 0;
  uint64_t tag = 0;  // Send's, for the Answer
  Judge judge;
  bool durable = false;
  OnNoScript noscript = OnNoScript::kFail;
  bool probe = false;              // sent while the node's replicas are lagging
  const Script* script = nullptr;  // the command runs a script
  // The command, when it may be sent again: kResend after NOSCRIPT, or to
  // a cluster node (redirected); empty payload: none.
  Command resend;
  std::mutex mu;
  Done done;      // empty once delivered
  int round = 0;  // the sends so far, minus one
  bool noscript_resent = false;
  int redirects = 0;    // MOVED and ASK followed
  bool asking = false;  // the latest send went with ASKING (two replies)
  ConnectionId conn = 0;
  // Durable writes queued so far (one per send; a script-free transaction
  // run again writes again), and whether a confirmation followed one.
  int writes = 0;
  bool confirm_sent = false;
  Clock::TimePoint first_sent{};  // for TRYAGAIN's deadline
  bool write_answered = false;
  bool write_yes = false;
  // Read only once write_answered (no message: a Status with one is an
  // allocation per node per command).
  absl::StatusOr<Reply> write_reply;
  Vote write_vote;
  std::optional<Vote> confirmation;  // if it came before the write's answer
  // A release that must not be lost (SendRelease): kept for a retry when
  // its answer does not settle it (Finish). In the record, not in a
  // callback around `done`: no allocation per node per release.
  std::optional<ReleaseRetries::Pending> release;
  // A release sent from its shared command without a copy of its own
  // (SendRelease): `resend` is built from `release` only if it must go
  // again (NOSCRIPT), behind this connection.
  bool resend_from_release = false;
  ConnectionId release_after = 0;
};

// A release's command for a node: `r`'s, behind `after`, in its EVAL form
// with `eval` (node_calls_release.cc).
Command ReleaseCommandFor(const KeysRelease& r, ConnectionId after, bool eval);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_NODE_CALLS_RECORD_H_
