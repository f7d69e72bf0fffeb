#include "redlock/internal/node_calls.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/node_calls_record.h"
#include "redlock/internal/scheme.h"

namespace redlock::internal {
namespace {

using V = Round::Vote;

}  // namespace

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
      call->resend = ReleaseCommandFor(*call->release->release, call->release_after, false);
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
