// NodeCalls, releases that must not be lost: a release's sends (one node's
// share of a lock's release, sent from the release's shared command without
// a copy of its own where it can be), and what is kept for a retry when the
// node's answer does not settle it (release_retries.h).

#include <utility>

#include "redlock/internal/node_calls.h"
#include "redlock/internal/node_calls_record.h"

namespace redlock::internal {
namespace {

// ScratchCommand's kind: a release's first try, from its shared command.
struct SharedReleaseSend;

using V = Round::Vote;

}  // namespace

Command ReleaseCommandFor(const KeysRelease& r, ConnectionId after, bool eval) {
  // A maker that left the command empty still gets the script release.
  Command c = r.command.payload.empty() ? ScriptRelease(r) : r.command;
  if (eval) c.payload = EvalFallback(c);
  c.after = after;
  c.op = "release";
  return c;
}

namespace {

// A release is done once the node answered it (0 deleted included: the key
// was gone).
bool Answered(const absl::StatusOr<Reply>& r) { return r.ok() && !r->is_error(); }

}  // namespace

void NodeCalls::Release(int node, ConnectionId after, std::shared_ptr<const KeysRelease> release,
                        Done done, uint64_t tag) {
  ReleaseRetries::Pending p{std::move(release), after};
  p.until = p.release->expires;
  SendRelease(node, std::move(p), /*eval=*/false, std::move(done), tag);
}

ConnectionId NodeCalls::SendRelease(int node, ReleaseRetries::Pending p, bool eval, Done done,
                                    uint64_t tag) {
  // Behind the SET on its connection; but a release that went there already
  // and got no answer is still queued there: one sent again goes as any
  // command (on a new connection, or refused while the node is down).
  const ConnectionId after = p.queued_on == 0 ? p.after : 0;
  // The call delivers its answer (and keeps the release for a retry:
  // Finish) only while it has a callback: one that does nothing when the
  // caller gave none (inline in AnyInvocable).
  if (!done) done = [](Answer) {};
  if (!eval && !cluster(node) && !p.release->command.payload.empty()) {
    return SendSharedRelease(node, std::move(p), after, std::move(done), tag);
  }
  Command command = ReleaseCommandFor(*p.release, after, eval);
  CallRef call = NewCall(node, command, ReleaseVote, /*durable=*/false, OnNoScript::kResend,
                         std::move(done), tag);
  if (!call) return 0;
  // Before the send: the answer (Finish) may come on another thread before
  // it returns.
  call->release.emplace(std::move(p));
  return SendNew(call, std::move(command));
}

ConnectionId NodeCalls::SendSharedRelease(int node, ReleaseRetries::Pending p, ConnectionId after,
                                          Done done, uint64_t tag) {
  const Command& shared = p.release->command;
  CallRef call = NewCall(node, shared, ReleaseVote, /*durable=*/false, OnNoScript::kResend,
                         std::move(done), tag);
  if (!call) return 0;
  // Before the send: the answer may come on another thread before it
  // returns. The call keeps no copy of the command (not a cluster node: it
  // is never redirected); a NOSCRIPT rebuilds it from `release` (OnWrite).
  call->release.emplace(std::move(p));
  call->resend_from_release = true;
  call->release_after = after;
  // The first try goes from the thread's scratch command; copy-assignment
  // keeps its buffer.
  ScratchCommand<SharedReleaseSend> scratch;
  Command& c = *scratch;
  c = shared;
  c.after = after;
  c.op = "release";
  return SendOnce(call, 0, c);
}

void NodeCalls::KeepRelease(int node, ReleaseRetries::Pending* p, const Answer& a) {
  // A release that can never be sent (the node forbids scripting, and the
  // release has no script-free form) is not kept: the keys go at their ttl.
  if (Answered(a.reply) || a.vote.vote == V::kCancelled ||
      absl::IsFailedPrecondition(a.reply.status())) {
    return;
  }
  // Refused (not sent): the copy sent before still waits where it was
  // queued; forgetting that would let the next round queue another behind
  // the SET, past the breaker.
  if (a.connection != 0) p->queued_on = a.connection;
  retries_.Keep(node, std::move(*p), a.reply.ok());
}

}  // namespace redlock::internal
