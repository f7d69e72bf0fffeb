// The skeleton every acquiring operation shares (acquire_op.cc for locks and
// sets, semaphore_op.cc for permits; docs/design.md 5.5): attempts fanned out
// to every node without the lock held, the cleanup of a failed attempt
// behind its commands on each node's ordered connection, the fencing
// commits and releases sent after the lock is dropped, the next attempt
// after a pause or a release announcement (AttemptPolicy), the stop, and
// the single delivery of the result once the fan-out is over.
//
// What an operation provides, and what it is given: attempt_loop_config.h.

#ifndef REDLOCK_INTERNAL_ATTEMPT_LOOP_H_
#define REDLOCK_INTERNAL_ATTEMPT_LOOP_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/attempt_loop_config.h"
#include "redlock/internal/attempts.h"
#include "redlock/internal/context.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/outcome_payload.h"
#include "redlock/internal/release_watch.h"
#include "redlock/internal/votes.h"
#include "redlock/observer.h"
#include "redlock/stop_token.h"

namespace redlock::internal {

template <typename Op, typename NodeState, typename Value>
class AttemptLoop : public std::enable_shared_from_this<Op> {
 public:
  using Callback = absl::AnyInvocable<void(absl::StatusOr<Value>)>;

  // Opens the release watch of a wait (before the first attempt, so a
  // release that lands between a failed attempt and the wait is not
  // missed), then decides a stopped call at once, on the calling thread
  // (nothing is sent), or starts the first attempt.
  void Start(ReleaseWatches::Wakeup wakeup) {
    if (wait_.has_value() && ctx_->options().release_notifications) {
      watch_ = watch_channels_.empty() ? ctx_->watches().Open(keys_, wakeup)
                                       : ctx_->watches().OpenChannels(watch_channels_, wakeup);
    }
    if (stop_.stop_requested()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        CancelLocked();
      }
      AfterUnlock();
      return;
    }
    if (stop_.stop_possible()) {
      std::weak_ptr<Op> weak = this->weak_from_this();
      // On the thread that requests the stop (or here, if that happened
      // meanwhile).
      stop_callback_ = std::make_unique<StopCallback>(stop_, [weak] {
        if (auto self = weak.lock()) self->OnStop();
      });
    }
    StartAttempt();
  }

 protected:
  enum class Phase { kRound1, kRound2, kBetween, kDone };

  // What follows a failed attempt, done outside mu_ (AfterUnlock).
  struct Retry {
    absl::Duration delay;
    uint64_t mark = 0;
  };

  // A command decided under mu_ and sent after it (AfterUnlock): Send may
  // write to the node's socket, which must not happen under the lock. A
  // fencing commit (commit_), or the release of attempt release_attempt_
  // behind the command on connection `after`.
  struct Outgoing {
    int node;
    bool commit;
    ConnectionId after = 0;
  };

  AttemptLoop(OpContext* ctx, AttemptLoopConfig config, Callback done)
      : ctx_(ctx),
        keys_(std::move(config.keys)),
        ttl_(config.ttl),
        wait_(config.wait),
        stop_(std::move(config.stop)),
        watch_channels_(std::move(config.watch_channels)),
        attempts_(*ctx, config.wait, config.max_attempts, config.fail_fast_unavailable),
        done_(std::move(done)) {}

  Op* op() { return static_cast<Op*>(this); }

  // The default of the hook above: the policy's pause.
  absl::Duration RetryDelayLocked(absl::Duration policy) const { return policy; }
  int n() const { return ctx_->nodes(); }
  Transport& transport() { return ctx_->transport(); }

  // Fencing round 2 (docs/design.md 5.10) on `nodes`, the ones counted in
  // round 1 (a quorum of them), every one of which must confirm: `command`
  // goes to each once the lock is dropped. `lost` says what a node that
  // refuses lost ("the key").
  void StartCommitLocked(const std::vector<int>& nodes, Command command, absl::string_view lost) {
    phase_ = Phase::kRound2;
    commit_round_ = Round(static_cast<int>(nodes.size()), op()->quorum());
    command.op = "fence-commit";
    commit_ = std::make_shared<const Command>(std::move(command));
    commit_lost_ = absl::StrCat("lost ", lost, " before confirming");
    // With Options::durability the commit's confirmation covers the counter
    // write and, on the same connection, round 1's command.
    for (int i : nodes) outbox_.push_back({i, /*commit=*/true});
  }

  // A node set this attempt's keys but its replicas did not confirm: its
  // vote is "no" and the keys go at once (a failed attempt's cleanup has
  // sent that already).
  void DropUnconfirmedLocked(int node, ConnectionId after) {
    if (!failed_) QueueReleaseLocked(node, after);
  }

  // Removes what this attempt may have set on node i (sent by AfterUnlock),
  // behind its command on connection `after`: it goes out even to a node
  // marked down, and is sent again if it does not get through
  // (NodeCalls::Release). A node that never got the command needs none.
  void QueueReleaseLocked(int i, ConnectionId after) {
    if (after == 0) return;
    if (release_attempt_ != attempt_) {
      auto release = std::make_shared<KeysRelease>();
      release->keys = keys_;
      release->token = token_;
      release->ttl = ttl_;
      release->expires = start_ + absl::ToChronoNanoseconds(ttl_);
      op()->FillRelease(release.get());
      if (release->command.payload.empty()) release->command = ScriptRelease(*release);
      release_ = std::move(release);
      release_attempt_ = attempt_;
    }
    outbox_.push_back({i, /*commit=*/false, after});
  }
  void QueueReleaseLocked(int i) { QueueReleaseLocked(i, nodes_[static_cast<size_t>(i)].conn); }

  // Ends the attempt in flight: its keys are released on every node its
  // command went to (those not sent to yet are handled by StartAttempt).
  void AbandonAttemptLocked() {
    failed_ = true;
    for (int i = 0; i < sent_; ++i) {
      QueueReleaseLocked(i);
      if (op()->FreedByCleanupLocked(i)) freed_.push_back(i);
    }
  }

  void FailAttemptLocked(absl::Status status) {
    AbandonAttemptLocked();
    phase_ = Phase::kBetween;
    AttemptPolicy::Decision next =
        attempts_.AfterFailure(op()->What(), attempt_, std::move(status));
    if (!next.retry) {
      SetResultLocked(std::move(next.status), next.kind);
      return;
    }
    Retry retry;
    retry.delay = op()->RetryDelayLocked(next.delay);
    if (wait_.has_value()) retry.mark = mark_;
    retry_.emplace(std::move(retry));
  }

  void SetResultLocked(absl::StatusOr<Value> result, Outcome::Kind kind) {
    phase_ = Phase::kDone;
    // A success says nothing more to a caller without an observer: its
    // Outcome (every node's name and detail) is not built.
    if (result.ok() && ctx_->observer() == nullptr) {
      result_.emplace(std::move(result));
      return;
    }
    // The outcome of the whole call, with its last round per node.
    std::vector<NodeResult> results;
    results.reserve(nodes_.size());
    for (const NodeState& s : nodes_) results.push_back(s.result);
    outcome_ = MakeOutcome(kind, op()->quorum(), std::move(results));
    outcome_.attempts = attempt_;
    outcome_.elapsed = absl::FromChrono(ctx_->clock().Now() - call_start_);
    if (!result.ok()) {
      absl::Status st = result.status();
      AttachOutcome(&st, outcome_);
      result = std::move(st);
    }
    result_.emplace(std::move(result));
  }

  // Runs what a locked section decided, outside mu_: the commands it queued,
  // the user's callback (once, and only after the fan-out loop is done: a
  // callback that releases the lease must not overtake a SET), or the wait
  // before the next attempt.
  void AfterUnlock() {
    Callback done;
    std::optional<absl::StatusOr<Value>> result;
    std::optional<Retry> retry;
    std::shared_ptr<ReleaseWatches::Watch> watch;
    std::unique_ptr<StopCallback> stop_callback;
    std::vector<int> freed;
    std::vector<Outgoing> outgoing;
    std::shared_ptr<const Command> commit;
    std::shared_ptr<const KeysRelease> release;
    int attempt = 0;
    Transport::TimerId retry_timer = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      outgoing.swap(outbox_);
      commit = commit_;
      release = release_;
      attempt = attempt_;
      watch = watch_;
      // Taken even without a watch (notifications off): nothing else reads
      // it, and a long wait would grow it by every failed attempt.
      freed.swap(freed_);
      if (!fanout_active_ && result_.has_value() && done_) {
        done = std::move(done_);
        done_ = nullptr;
        if (result_->ok()) {
          // Where each node's command went, for the lease's release.
          auto conns = std::make_shared<std::vector<ConnectionId>>(nodes_.size());
          for (size_t i = 0; i < nodes_.size(); ++i) (*conns)[i] = nodes_[i].conn;
          Op::SetConnections(&**result_, std::move(conns));
        }
        result = std::move(result_);
        watch_.reset();  // unsubscribes once `watch` goes too
        // The stop callback goes last: destroying it waits for an OnStop()
        // running on another thread, which needs mu_.
        stop_callback = std::move(stop_callback_);
        retry_timer = std::exchange(retry_timer_, 0);
      } else if (!fanout_active_ && retry_.has_value()) {
        retry.swap(retry_);
      }
    }
    // Commands queued by different sections may go out in another order than
    // they were queued; only a release overtaking its own command would
    // matter, and a release is queued only once its command was sent (sent_).
    auto self = this->shared_from_this();
    for (const Outgoing& o : outgoing) {
      if (!o.commit) {
        ctx_->calls().Release(o.node, o.after, release);
        continue;
      }
      // A commit that got NOSCRIPT may run later than sent (it raises the
      // counter only while the key holds the token): sent again, with its
      // own confirmation.
      ctx_->calls().Send(
          o.node, *commit, CommitVote, /*durable=*/true, OnNoScript::kResend,
          [self](NodeCalls::Answer a) {
            const uint64_t tag = a.tag;
            self->OnRound2(AttemptOfTag(tag), NodeOfTag(tag), std::move(a));
          },
          AnswerTag(attempt, o.node));
    }
    // Before the wait, which counts them.
    if (watch != nullptr) {
      for (int node : freed) watch->Freed(node);
    }
    if (done) {
      if (retry_timer != 0) transport().Cancel(retry_timer);
      if (watch != nullptr) watch->Cancel();
      watch.reset();
      stop_callback.reset();
      if (Observer* observer = ctx_->observer()) {
        AcquireEvent event;
        event.status = result->status();
        event.outcome = outcome_;
        op()->FillEvent(*result, &event);
        observer->OnAcquire(event);
      }
      done(*std::move(result));
      return;
    }
    if (!retry.has_value()) return;
    if (watch != nullptr) {
      watch->Wait(retry->mark, op()->quorum(), retry->delay,
                  [self](absl::Status) { self->StartAttempt(); });
      return;
    }
    Transport::TimerId timer = transport().RunAfter(retry->delay, [self] { self->StartAttempt(); });
    // Cancelled when the call is decided during the pause (a stop), so the
    // operation does not live on until the pause ends.
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ == Phase::kBetween) retry_timer_ = timer;
  }

  OpContext* const ctx_;
  const std::vector<std::string> keys_;
  const absl::Duration ttl_;
  const std::optional<absl::Duration> wait_;
  const StopToken stop_;
  const std::vector<std::string> watch_channels_;
  std::shared_ptr<ReleaseWatches::Watch> watch_;
  std::unique_ptr<StopCallback> stop_callback_;

  std::mutex mu_;
  AttemptPolicy attempts_;
  Callback done_;
  int attempt_ = 0;
  std::string token_;
  Clock::TimePoint start_;
  uint64_t mark_ = 0;
  Phase phase_ = Phase::kBetween;
  bool failed_ = false;         // the current attempt failed
  int sent_ = 0;                // nodes [0, sent_) have this attempt's round 1
  bool fanout_active_ = false;  // StartAttempt is still sending
  // In the op for up to kInlineNodes nodes (no allocation per call).
  static constexpr size_t kInlineNodes = 5;
  absl::InlinedVector<NodeState, kInlineNodes> nodes_;
  std::optional<Retry> retry_;
  Transport::TimerId retry_timer_ = 0;          // the pause before the next attempt
  std::vector<Outgoing> outbox_;                // sent by AfterUnlock
  std::shared_ptr<const Command> commit_;       // the fencing commit of the attempt
  Round commit_round_{0, 0};                    // its votes
  std::string commit_lost_;                     // what a refusal lost, for messages
  std::shared_ptr<const KeysRelease> release_;  // the release of attempt release_attempt_
  int release_attempt_ = 0;
  std::vector<int> freed_;  // nodes freed by a failed attempt's cleanup, for the watch
  std::optional<absl::StatusOr<Value>> result_;
  Outcome outcome_;  // goes with result_
  const Clock::TimePoint call_start_ = ctx_->clock().Now();

 private:
  // The next attempt: its state reset and round 1 sent to every node, unless
  // the call is decided (cancelled meanwhile: delivered, if nobody has yet)
  // or the client is shutting down (the call ends CANCELLED). The fan-out
  // runs without mu_, so replies are counted while later nodes are still
  // being sent to. If the attempt fails meanwhile, the decider releases the
  // nodes sent so far (sent_) and this loop releases each node whose send
  // was in progress, and sends no more: a release never overtakes its
  // command on a node's ordered connection. Round 1 is not sent again after
  // NOSCRIPT: its release may already be queued behind it.
  void StartAttempt() {
    Command command;
    int attempt = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (phase_ != Phase::kDone && transport().stopping()) {
        SetResultLocked(
            absl::CancelledError(absl::StrCat(op()->What(), ": the client is shutting down")),
            Outcome::Kind::kCancelled);
      } else if (phase_ != Phase::kDone) {
        attempt = ++attempt_;
        start_ = ctx_->clock().Now();
        mark_ = watch_ != nullptr ? watch_->Mark() : 0;
        phase_ = Phase::kRound1;
        failed_ = false;
        nodes_.assign(static_cast<size_t>(n()), NodeState{});
        for (int i = 0; i < n(); ++i) {
          nodes_[static_cast<size_t>(i)].result.node = transport().NodeName(i);
        }
        sent_ = 0;
        fanout_active_ = true;
        command = op()->Round1Locked();
        command.op = "acquire";
      }
    }
    if (attempt != 0) {
      auto self = this->shared_from_this();
      const NodeCalls::Judge judge = op()->Round1Judge();
      const bool durable = op()->Round1Durable();
      for (int i = 0; i < n(); ++i) {
        ConnectionId conn = ctx_->calls().Send(
            i, command, judge, durable, OnNoScript::kFail,
            [self](NodeCalls::Answer a) {
              const uint64_t tag = a.tag;
              self->OnRound1(AttemptOfTag(tag), NodeOfTag(tag), std::move(a));
            },
            AnswerTag(attempt, i));
        std::lock_guard<std::mutex> lock(mu_);
        nodes_[static_cast<size_t>(i)].conn = conn;
        sent_ = i + 1;
        if (failed_) {
          QueueReleaseLocked(i);
          break;
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      fanout_active_ = false;
    }
    AfterUnlock();
  }

  void OnRound2(int attempt, int node, NodeCalls::Answer a) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      if (a.unconfirmed) DropUnconfirmedLocked(node, a.connection);
      if (phase_ == Phase::kRound2) {
        Round::Outcome outcome =
            commit_round_.Record(transport().NodeName(node), a.vote.vote, a.vote.detail);
        if (outcome == Round::Outcome::kSucceeded) {
          op()->CommittedLocked();
        } else if (outcome == Round::Outcome::kFailed) {
          // The key was gone when the commit came (FenceCommitFailure).
          FailAttemptLocked(FenceCommitFailure(commit_round_, op()->What(), commit_lost_,
                                               absl::FromChrono(ctx_->clock().Now() - start_), ttl_,
                                               ctx_->options()));
        }
      }
    }
    AfterUnlock();
  }

  // The stop was requested, on the requesting thread. The call is decided
  // now (no grant counts after this point), but what follows (the releases,
  // the observer, the callback) runs on the transport's thread: the
  // requesting thread is no thread of the client's (observer.h), and a
  // caller polling for this call must be woken, which the timer does.
  void OnStop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!CancelLocked()) return;
    }
    auto self = this->shared_from_this();
    transport().RunAfter(absl::ZeroDuration(), [self] { self->AfterUnlock(); });
  }

  // Decides the call as cancelled, unless it is decided already (a success
  // just before the stop stands: see Client::Acquire). The keys of an
  // attempt in flight are released behind their commands.
  bool CancelLocked() {
    if (result_.has_value() || !done_) return false;
    if (phase_ == Phase::kRound1 || phase_ == Phase::kRound2) AbandonAttemptLocked();
    retry_.reset();
    SetResultLocked(AttemptPolicy::Cancelled(op()->What(), attempt_), Outcome::Kind::kCancelled);
    return true;
  }
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ATTEMPT_LOOP_H_
