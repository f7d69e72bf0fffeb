#include "redlock/internal/node_calls.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/scheme.h"

namespace redlock::internal {
namespace {

using V = Round::Vote;

// A release's command for a node: `r`'s, behind `after`, in its EVAL form
// with `eval` (defined with the releases, below).
Command ReleaseCommand(const KeysRelease& r, ConnectionId after, bool eval);

}  // namespace

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

namespace {

// Recycled call records: one per command in flight, so a warm client makes
// none (a record costs an allocation otherwise, per node per command).
// Shared by every client of the process; kept for the process's life
// (records may be released after their client is gone).
class CallPool {
 public:
  static CallPool& Get() {
    static CallPool* pool = new CallPool;
    return *pool;
  }
  void* Take(size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        void* p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    return ::operator new(size);
  }
  void Give(void* p) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (free_.size() < kMaxFree) {
        if (free_.capacity() == 0) free_.reserve(kMaxFree);
        free_.push_back(p);
        return;
      }
    }
    ::operator delete(p);
  }

 private:
  static constexpr size_t kMaxFree = 4096;
  std::mutex mu_;
  std::vector<void*> free_;
};

}  // namespace

NodeCalls::Call* NodeCalls::NewCallRecord() {
  return new (CallPool::Get().Take(sizeof(Call))) Call;
}

NodeCalls::CallRef::CallRef(Call* call) : call_(call) {
  call_->refs.fetch_add(1, std::memory_order_relaxed);
}

NodeCalls::CallRef::CallRef(const CallRef& other) noexcept : call_(other.call_) {
  if (call_ != nullptr) call_->refs.fetch_add(1, std::memory_order_relaxed);
}

NodeCalls::CallRef::~CallRef() {
  if (call_ == nullptr || call_->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  call_->~Call();
  CallPool::Get().Give(call_);
}

NodeCalls::NodeCalls(Transport* transport, const Clock* clock, const Options& options,
                     std::shared_ptr<ScriptingModes> modes,
                     std::shared_ptr<ServerCommands> commands)
    : transport_(transport),
      clock_(clock),
      node_timeout_(options.node_timeout),
      clusters_(KeyRoutedNodes(options, transport->size())),
      delivery_(transport, std::move(modes), std::move(commands), options.max_in_flight_per_node,
                ScriptlessTurnWait(options.node_timeout)),
      confirmations_(transport, clock, options),
      retries_(transport, clock, std::max(options.breaker_probe_interval, options.node_timeout),
               options.max_in_flight_per_node,
               [this](int node, ReleaseRetries::Pending p, absl::AnyInvocable<void()> done) {
                 return SendRelease(node, std::move(p), /*eval=*/true,
                                    [done = std::move(done)](Answer) mutable { done(); });
               }) {}

NodeCalls::~NodeCalls() = default;

ConnectionId NodeCalls::Send(int node, const Command& command, const Judge& judge, bool durable,
                             OnNoScript noscript, Done done, uint64_t tag) {
  CallRef call = NewCall(node, command, judge, durable, noscript, std::move(done), tag);
  if (!call) return 0;
  if (KeepsCommand(*call.get())) call->resend = command;
  return SendOnce(call, 0, command);
}

ConnectionId NodeCalls::Send(int node, Command&& command, const Judge& judge, bool durable,
                             OnNoScript noscript, Done done, uint64_t tag) {
  CallRef call = NewCall(node, command, judge, durable, noscript, std::move(done), tag);
  if (!call) return 0;
  return SendNew(call, std::move(command));
}

ConnectionId NodeCalls::SendNew(const CallRef& call, Command&& command) {
  if (!KeepsCommand(*call.get())) return SendOnce(call, 0, command);
  // Only Send writes resend, before the command goes out.
  call->resend = std::move(command);
  return SendOnce(call, 0, call->resend);
}

bool NodeCalls::KeepsCommand(const Call& call) const {
  return (call.noscript == OnNoScript::kResend && call.script != nullptr) || cluster(call.node);
}

NodeCalls::CallRef NodeCalls::NewCall(int node, const Command& command, const Judge& judge,
                                      bool durable, OnNoScript noscript, Done done, uint64_t tag) {
  CallRef call(NewCallRecord());
  call->owner = this;
  call->node = node;
  call->tag = tag;
  call->judge = judge;
  call->durable = durable && confirmations_.on();
  call->noscript = noscript;
  call->script = command.script;
  call->done = std::move(done);
  if (cluster(node)) call->first_sent = clock_->Now();
  if (call->durable) {
    std::string why = confirmations_.Admit(node, &call->probe);
    if (!why.empty()) {
      // Never inline (Transport::Send's promise, which the callers rely on).
      transport_->RunAfter(absl::ZeroDuration(), [call, why] {
        Answer a{absl::UnavailableError(why), Vote{V::kUnavailable, why}};
        a.tag = call->tag;
        call->done(std::move(a));
      });
      return CallRef();
    }
  }
  return call;
}

ConnectionId NodeCalls::SendOnce(const CallRef& call, int round, const Command& command) {
  // A transaction (a script-free node) writes when its EXEC is queued: a
  // durable write's confirmation follows that, once known.
  const bool transacted = delivery_.Transacted(call->node, command);
  ScriptlessRunner::Written written;
  if (transacted && call->durable) {
    written = [call, round](ConnectionId c) {
      {
        std::lock_guard<std::mutex> lock(call->mu);
        call->conn = c;
      }
      call->owner->Wrote(call, round, c);
    };
  }
  ConnectionId conn;
  {
    // Held across the send, so that the answer (on another thread, maybe
    // before it returns) knows the connection.
    std::lock_guard<std::mutex> lock(call->mu);
    conn = delivery_.Deliver(call->node, command, std::move(written),
                             [call, round](absl::StatusOr<Reply> r) {
                               call->owner->OnWrite(call, round, std::move(r));
                             });
    call->conn = conn;
  }
  if (call->durable && !transacted) Wrote(call, round, conn);
  return conn;
}

void NodeCalls::Wrote(const CallRef& call, int round, ConnectionId conn) {
  int write;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    write = ++call->writes;
    // A confirmation of an earlier write of this round (a WAIT behind an
    // EXEC that aborted) says nothing of this one.
    call->confirmation.reset();
    if (conn != 0) call->confirm_sent = true;
  }
  confirmations_.Follow(call->node, conn, call->probe, [call, round, write](Vote v) {
    call->owner->OnConfirm(call, round, write, std::move(v));
  });
}

bool NodeCalls::Redirected(const CallRef& call, int round, absl::StatusOr<Reply>* r) {
  if (!cluster(call->node) || !r->ok() || !(*r)->is_error()) return false;
  if (IsTryAgain(*r)) {
    // The keys of a multi-key call split by a migration for a moment: again
    // after a pause, while the node's deadline allows.
    const absl::Duration pause = TryAgainPause(node_timeout_);
    {
      std::lock_guard<std::mutex> lock(call->mu);
      if (round != call->round || !call->done) return true;
      if (call->resend.payload.empty() ||
          clock_->Now() + absl::ToChronoNanoseconds(pause) >=
              call->first_sent + absl::ToChronoNanoseconds(node_timeout_)) {
        return false;
      }
      ++call->round;
      call->asking = false;
    }
    transport_->RunAfter(pause, [this, call, round] {
      SendOnce(call, round + 1, RedirectedCopy(call->resend, Redirect{}));
    });
    return true;
  }
  std::optional<Redirect> redirect = ParseRedirect((*r)->str);
  if (!redirect.has_value()) return false;
  // A master that does not serve the key's slot (any more, or not yet: a
  // migration): the command did not run there. It goes where the node
  // said, at the end of that master's queue, with its own confirmation;
  // what followed it on the old connection is redirected behind it in the
  // same way (a release behind its SET), so the order holds there too.
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (round != call->round || !call->done) return true;
    if (call->redirects < kMaxRedirects && !call->resend.payload.empty()) {
      ++call->redirects;
      ++call->round;
      call->asking = redirect->ask;
    } else {
      *r = absl::UnavailableError(
          absl::StrCat("redirected ", kMaxRedirects, " times (last: ", (*r)->str,
                       "): the cluster's slot map keeps changing, or the slot has no master"));
      return false;
    }
  }
  SendOnce(call, round + 1, RedirectedCopy(call->resend, *redirect));
  return true;
}

void NodeCalls::OnWrite(const CallRef& call, int round, absl::StatusOr<Reply> r) {
  ConnectionId on;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (round != call->round || !call->done) return;
    // Sent with ASKING in front: the command's own reply is the second.
    if (call->asking) r = AnswerAfterAsking(std::move(r));
    on = call->conn;
  }
  if (Redirected(call, round, &r)) return;
  const ScriptDelivery::Scripting scripting = delivery_.Read(call->node, call->script, r, on);
  const bool noscript = scripting == ScriptDelivery::Scripting::kNoScript;
  bool resend = false;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (round != call->round || !call->done) return;
    if (scripting != ScriptDelivery::Scripting::kRan && call->resend_from_release &&
        call->resend.payload.empty() && call->release.has_value()) {
      // The release's command, rebuilt now that it must go again.
      call->resend = ReleaseCommand(*call->release->release, call->release_after, false);
    }
    if (scripting != ScriptDelivery::Scripting::kRan && !call->noscript_resent &&
        call->noscript == OnNoScript::kResend && !call->resend.payload.empty()) {
      // Its EVAL form (or its script-free form) goes at the end of the
      // queue, with its own confirmation; the WAIT already sent behind this
      // one confirms nothing.
      call->noscript_resent = true;
      ++call->round;
      call->asking = false;
      resend = true;
    }
  }
  if (resend) {
    SendOnce(call, round + 1, ScriptDelivery::Again(call->resend, scripting));
    return;
  }
  if (noscript) {
    r = absl::UnavailableError(
        absl::StrCat("the node's script cache was flushed (", r->str,
                     "): the command did not run; the scripts are being loaded again"));
  }
  Vote v = call->judge(r);
  Done done;
  Answer answer;
  bool probe_unasked = false;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    call->write_answered = true;
    // A probe that wrote nothing for a WAIT to follow (a script-free write
    // decided in its first phase): it asked the replicas nothing, and the
    // next write may probe.
    probe_unasked = call->probe && !call->confirm_sent;
    if (!call->durable || v.vote != V::kYes) {
      // A "no" needs no confirmation (the WAIT's answer still counts for
      // the node's replicas).
      done = std::move(call->done);
      call->done = nullptr;
      answer = Answer{std::move(r), std::move(v), false, call->conn};
    } else if (call->confirmation.has_value()) {
      const bool confirmed = call->confirmation->vote == V::kYes;
      done = std::move(call->done);
      call->done = nullptr;
      answer = Answer{std::move(r), confirmed ? std::move(v) : *call->confirmation, !confirmed,
                      call->conn};
    } else {
      call->write_yes = true;
      call->write_reply = std::move(r);
      call->write_vote = std::move(v);
    }
  }
  if (probe_unasked) confirmations_.ProbeUnasked(call->node);
  answer.tag = call->tag;
  if (done) Finish(call, std::move(done), std::move(answer));
}

void NodeCalls::OnConfirm(const CallRef& call, int round, int write, Vote cv) {
  Done done;
  Answer answer;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    // Only the confirmation behind the call's latest write counts.
    if (round != call->round || write != call->writes || !call->done) return;
    if (!call->write_answered) {
      call->confirmation = std::move(cv);
      return;
    }
    if (!call->write_yes) return;
    const bool confirmed = cv.vote == V::kYes;
    done = std::move(call->done);
    call->done = nullptr;
    answer = Answer{std::move(call->write_reply), confirmed ? std::move(call->write_vote) : cv,
                    !confirmed, call->conn};
  }
  answer.tag = call->tag;
  Finish(call, std::move(done), std::move(answer));
}

void NodeCalls::Finish(const CallRef& call, Done done, Answer answer) {
  // Only the thread that took `done` (once, under the call's mutex) gets
  // here: `release`, written before the first send, is its alone now.
  if (call->release.has_value()) KeepRelease(call->node, &*call->release, answer);
  if (done) done(std::move(answer));
}

// ---- Releases that must not be lost ----------------------------------------------

namespace {

Command ReleaseCommand(const KeysRelease& r, ConnectionId after, bool eval) {
  // A maker that left the command empty still gets the script release.
  Command c = r.command.payload.empty() ? ScriptRelease(r) : r.command;
  if (eval) c.payload = EvalFallback(c);
  c.after = after;
  c.op = "release";
  return c;
}

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
  Command command = ReleaseCommand(*p.release, after, eval);
  CallRef call = NewCall(node, command, ReleaseVote, /*durable=*/false, OnNoScript::kResend,
                         std::move(done), tag);
  if (!call) return 0;
  // Before the send: the answer (Finish) may come on another thread before
  // it returns.
  call->release.emplace(std::move(p));
  return SendNew(call, std::move(command));
}

namespace {

// The command a thread sends a release's first try from: its buffers are
// reused from one release to the next (the transport copies what it sends).
struct ReleaseScratch {
  Command command;
  bool busy = false;
};
thread_local ReleaseScratch t_release_scratch;

}  // namespace

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
  ReleaseScratch& scratch = t_release_scratch;
  if (scratch.busy) {
    // Sent from within a send on this thread (never so far): its own copy.
    return SendOnce(call, 0, ReleaseCommand(*call->release->release, after, false));
  }
  scratch.busy = true;
  // Copy-assignment keeps the scratch's buffer: no allocation once warm.
  scratch.command = shared;
  scratch.command.after = after;
  scratch.command.op = "release";
  const ConnectionId conn = SendOnce(call, 0, scratch.command);
  scratch.busy = false;
  return conn;
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

void NodeCalls::AddHealth(std::vector<NodeHealth>* health) const {
  confirmations_.AddHealth(health);
  delivery_.AddHealth(health);
  retries_.AddHealth(health);
}

void NodeCalls::Shutdown() {
  retries_.Shutdown();
  delivery_.Shutdown();
}

}  // namespace redlock::internal
