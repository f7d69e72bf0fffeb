#include "redlock/internal/acquire_op.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/attempts.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/jitter.h"
#include "redlock/internal/lease_factory.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/outcome_payload.h"
#include "redlock/internal/release_watch.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/token.h"
#include "redlock/internal/votes.h"
#include "redlock/observer.h"

namespace redlock::internal {
namespace {

class AcquireOp : public std::enable_shared_from_this<AcquireOp> {
 public:
  AcquireOp(OpContext* ctx, AcquireRequest request, LeasesCallback done)
      : ctx_(ctx),
        request_(std::move(request)),
        shape_(request_.shape),
        custom_(shape_ != nullptr && shape_->custom_scripts()),
        ttl_ms_(request_.ttl.ms),
        form_(ctx->options().fencing || (shape_ != nullptr && shape_->force_fencing())
                  ? AcquireForm::kFencing
              : request_.resources.size() == 1 && !custom_ ? AcquireForm::kSet
                                                           : AcquireForm::kScript),
        quorum_(form_ == AcquireForm::kFencing ? FencedQuorum(ctx->nodes(), request_.quorum,
                                                              ctx->options().fencing_lost_counters)
                                               : request_.quorum),
        what_(absl::StrCat("acquire ", DescribeResources(request_.resources))),
        drift_(request_.ttl.drift),
        // With Options::durability: without fencing the grant itself waits
        // for the replicas; with fencing the commit does, and its WAIT covers
        // the round-1 SET too.
        confirm_round1_(form_ != AcquireForm::kFencing),
        attempts_(*ctx, request_.wait, request_.max_attempts, request_.fail_fast_unavailable),
        done_(std::move(done)),
        round_(ctx->nodes(), quorum_) {
    for (const auto& r : request_.resources) keys_.push_back(ctx_->Key(r));
  }

  void Start() {
    if (request_.wait.has_value() && ctx_->options().release_notifications) {
      // Before the first attempt, so a release that lands between a failed
      // attempt and the wait is not missed.
      watch_ = ctx_->watches().Open(keys_, shape_ != nullptr && shape_->shared_wakeups()
                                               ? ReleaseWatches::Wakeup::kEveryone
                                               : ReleaseWatches::Wakeup::kOldest);
    }
    if (request_.stop.stop_requested()) {
      // Decided at once, on the calling thread: nothing is sent.
      {
        std::lock_guard<std::mutex> lock(mu_);
        CancelLocked();
      }
      AfterUnlock();
      return;
    }
    if (request_.stop.stop_possible()) {
      std::weak_ptr<AcquireOp> weak = weak_from_this();
      // On the thread that requests the stop (or here, if that happened
      // meanwhile).
      stop_callback_ = std::make_unique<StopCallback>(request_.stop, [weak] {
        if (auto self = weak.lock()) self->OnStop();
      });
    }
    StartAttempt();
  }

 private:
  enum class Phase { kRound1, kRound2, kBetween, kDone };

  struct NodeState {
    bool granted = false;            // round 1 set our key on the node
    std::vector<uint64_t> counters;  // fencing round 1
    NodeResult result;               // for the Outcome
    ConnectionId conn = 0;           // where round 1 went (0: not sent)
  };

  // What follows a failed attempt, done outside mu_ (AfterUnlock).
  struct Retry {
    absl::Duration delay;
    uint64_t mark = 0;
  };

  // A command decided under mu_ and sent after it (AfterUnlock): Send may
  // write to the node's socket, which must not happen under the lock. A
  // fencing commit of round2_, or the release of attempt release_attempt_
  // behind the command on connection `after`.
  struct Outgoing {
    int node;
    bool commit;
    ConnectionId after = 0;
  };

  int n() const { return ctx_->nodes(); }

  Transport& transport() { return ctx_->transport(); }

  Command Round1Command() {
    Command command;
    switch (form_) {
      case AcquireForm::kFencing:
        command = ScriptCommand(FenceAcquireScript(), ctx_->WithFenceKeys(keys_),
                                {token_, std::to_string(ttl_ms_)});
        break;
      case AcquireForm::kSet:
        // The classic single-key form, identical to every other Redlock client.
        command.payload =
            EncodeCommand({"SET", keys_[0], token_, "NX", "PX", std::to_string(ttl_ms_)});
        command.expect = kExpectStatus | kExpectNil;
        command.slot = KeySlot(keys_[0]);
        break;
      case AcquireForm::kScript:
        command = ScriptCommand(AcquireSetScript(), keys_, {token_, std::to_string(ttl_ms_)});
        break;
    }
    return command;
  }

  void StartAttempt() {
    Command command;
    int attempt = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (phase_ == Phase::kDone) {
        // Cancelled meanwhile: deliver, if nobody has yet.
      } else if (transport().stopping()) {
        SetResultLocked(absl::CancelledError(absl::StrCat(what_, ": the client is shutting down")),
                        Outcome::Kind::kCancelled);
      } else {
        attempt = ++attempt_;
        token_ = shape_ != nullptr ? shape_->Token() : NewToken();
        start_ = ctx_->clock().Now();
        mark_ = watch_ != nullptr ? watch_->Mark() : 0;
        phase_ = Phase::kRound1;
        failed_ = false;
        round_ = Round(n(), quorum_);
        nodes_.assign(static_cast<size_t>(n()), NodeState{});
        for (int i = 0; i < n(); ++i) {
          nodes_[static_cast<size_t>(i)].result.node = transport().NodeName(i);
        }
        sent_ = 0;
        fanout_active_ = true;
        command = custom_ ? shape_->Round1(keys_, token_, ttl_ms_, form_ == AcquireForm::kFencing)
                          : Round1Command();
        command.op = "acquire";
      }
    }
    if (attempt == 0) {
      AfterUnlock();
      return;
    }
    // The fan-out runs without mu_, so replies are counted while later nodes
    // are still being sent to. If the attempt fails meanwhile, the decider
    // releases the nodes sent so far (sent_) and this loop releases each
    // node whose send was in progress, and sends no more: a release never
    // overtakes its SET on a node's ordered connection.
    auto self = shared_from_this();
    // An acquisition that got NOSCRIPT is not sent again: its release may
    // already be queued behind it.
    const NodeCalls::Judge judge = [form = form_,
                                    keys = keys_.size()](const absl::StatusOr<Reply>& r) {
      std::vector<uint64_t> counters;
      return AcquireVote(r, form, keys, &counters);
    };
    for (int i = 0; i < n(); ++i) {
      ConnectionId conn = ctx_->calls().Send(
          i, command, judge, confirm_round1_, OnNoScript::kFail,
          [self, attempt, i](NodeCalls::Answer a) { self->OnRound1(attempt, i, std::move(a)); });
      std::lock_guard<std::mutex> lock(mu_);
      nodes_[static_cast<size_t>(i)].conn = conn;
      sent_ = i + 1;
      if (failed_) {
        QueueReleaseLocked(i);
        break;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      fanout_active_ = false;
    }
    AfterUnlock();
  }

  // The node's vote on round 1 (with Options::durability, once its replicas
  // confirmed the grant, or did not).
  void OnRound1(int attempt, int node, NodeCalls::Answer a) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      NodeState& state = nodes_[static_cast<size_t>(node)];
      state.granted =
          AcquireVote(a.reply, form_, keys_.size(), &state.counters).vote == Round::Vote::kYes;
      if (a.unconfirmed) DropUnconfirmedLocked(node, a.connection);
      RecordRound1Locked(node, std::move(a.vote));
    }
    AfterUnlock();
  }

  // A node granted but its replicas did not confirm: its vote is "no" and
  // our key goes at once (a failed attempt's cleanup has sent that already).
  void DropUnconfirmedLocked(int node, ConnectionId after) {
    if (!failed_) QueueReleaseLocked(node, after);
  }

  void RecordRound1Locked(int node, Vote v) {
    NodeState& state = nodes_[static_cast<size_t>(node)];
    RecordAnswer(v, absl::FromChrono(ctx_->clock().Now() - start_), &state.result);
    Round::Outcome outcome = Round::Outcome::kPending;
    if (phase_ != Phase::kRound1) {
      // Decided already. A late grant of a failed attempt is removed by
      // its cleanup: for the wait, that node is free.
      if (failed_ && state.granted) freed_.push_back(node);
    } else {
      outcome = round_.Record(transport().NodeName(node), v.vote, v.detail);
    }
    if (outcome == Round::Outcome::kSucceeded) {
      if (form_ == AcquireForm::kFencing) {
        StartRound2Locked();
      } else {
        SucceedLocked({});
      }
    } else if (outcome == Round::Outcome::kFailed) {
      absl::Status st =
          round_.Failure(what_, "granted", "held by another client", absl::StatusCode::kAborted);
      if (quorum_ != request_.quorum) {
        // The tally says "quorum F": say where F comes from.
        st =
            absl::Status(st.code(), absl::StrCat(st.message(), "; fenced acquisitions need ",
                                                 quorum_, " nodes (Options::fencing_lost_counters ",
                                                 ctx_->options().fencing_lost_counters, ")"));
      }
      FailAttemptLocked(std::move(st));
    }
  }

  // Fencing round 2 (docs/design.md 5.10): T = 1 + max of the counters read
  // from exactly the nodes counted so far (quorum_ of them: F of FencedQuorum
  // in algorithm.h, where the rule and its proof are); only they take part,
  // and every one of them must confirm. A grant that arrives later was read
  // after T was computed and is not committed (its key goes with the lease).
  void StartRound2Locked() {
    round2_nodes_.clear();
    fences_.clear();
    std::vector<std::string> args = {token_};
    for (size_t j = 0; j < keys_.size(); ++j) {
      std::vector<uint64_t> seen;
      for (const NodeState& s : nodes_) {
        if (s.granted) seen.push_back(s.counters[j]);
      }
      absl::StatusOr<uint64_t> t = shape_ != nullptr ? shape_->Fence(seen) : NextFence(seen);
      if (!t.ok()) {
        FailAttemptLocked(
            absl::Status(t.status().code(), absl::StrCat(what_, ": ", t.status().message())));
        return;
      }
      fences_.push_back(*t);
      args.push_back(std::to_string(*t));
    }
    for (int i = 0; i < n(); ++i) {
      if (nodes_[static_cast<size_t>(i)].granted) round2_nodes_.push_back(i);
    }
    phase_ = Phase::kRound2;
    round_ = Round(static_cast<int>(round2_nodes_.size()), quorum_);
    auto command = std::make_shared<Command>(
        custom_ ? shape_->Commit(keys_, token_, fences_)
                : ScriptCommand(FenceCommitScript(), ctx_->WithFenceKeys(keys_), args));
    command->op = "fence-commit";
    round2_ = std::move(command);
    // With Options::durability the commit's confirmation covers the counter
    // write and, on the same stream, round 1's SET.
    for (int i : round2_nodes_) outbox_.push_back({i, /*commit=*/true});
  }

  void OnRound2(int attempt, int node, NodeCalls::Answer a) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      if (a.unconfirmed) DropUnconfirmedLocked(node, a.connection);
      if (phase_ == Phase::kRound2) RecordRound2Locked(node, std::move(a.vote));
    }
    AfterUnlock();
  }

  void RecordRound2Locked(int node, Vote v) {
    Round::Outcome outcome = round_.Record(transport().NodeName(node), v.vote, v.detail);
    if (outcome == Round::Outcome::kSucceeded) {
      SucceedLocked(fences_);
    } else if (outcome == Round::Outcome::kFailed) {
      FailAttemptLocked(round_.Failure(absl::StrCat(what_, " (fencing round)"), "confirmed",
                                       "lost the key before confirming",
                                       absl::StatusCode::kAborted));
    }
  }

  void SucceedLocked(const std::vector<uint64_t>& fences) {
    Clock::TimePoint now = ctx_->clock().Now();
    absl::Duration elapsed = absl::FromChrono(now - start_);
    absl::Duration validity = Validity(request_.ttl.ttl, elapsed, drift_);
    if (validity <= absl::ZeroDuration()) {
      FailAttemptLocked(absl::DeadlineExceededError(absl::StrCat(
          what_, ": ", round_.Summary(fences.empty() ? "granted" : "confirmed", ""),
          " but no validity was left: the attempt took ", absl::FormatDuration(elapsed), " of the ",
          ttl_ms_, "ms ttl (drift allowance ", absl::FormatDuration(drift_), ")")));
      return;
    }
    Clock::TimePoint valid_until = now + absl::ToChronoNanoseconds(validity);
    std::vector<Lease> leases;
    leases.reserve(request_.resources.size());
    for (size_t j = 0; j < request_.resources.size(); ++j) {
      // The connections are set once the fan-out is over (AfterUnlock).
      leases.push_back(LeaseFactory::Make(
          request_.resources[j], token_, request_.ttl.ttl, start_, nullptr, valid_until, round_.yes(),
          fences.empty() ? 0 : fences[j], shape_ != nullptr ? shape_->kind() : LeaseKind::kPlain));
    }
    SetResultLocked(std::move(leases), Outcome::Kind::kSucceeded);
  }

  // Removes what this attempt may have set on node i (sent by AfterUnlock),
  // behind its SET on connection `after`: it goes out even to a node marked
  // down, and is sent again if it does not get through (NodeCalls::Release).
  // A node that never took the SET needs none.
  void QueueReleaseLocked(int i, ConnectionId after) {
    if (after == 0) return;
    if (release_attempt_ != attempt_) {
      auto release = std::make_shared<KeysRelease>();
      release->keys = keys_;
      release->token = token_;
      release->ttl = request_.ttl.ttl;
      release->expires = start_ + absl::ToChronoNanoseconds(request_.ttl.ttl);
      if (custom_) release->command = shape_->Cleanup(keys_, token_);
      release_ = std::move(release);
      release_attempt_ = attempt_;
    }
    outbox_.push_back({i, /*commit=*/false, after});
  }
  void QueueReleaseLocked(int i) { QueueReleaseLocked(i, nodes_[static_cast<size_t>(i)].conn); }

  // Ends the attempt in flight: its keys are released on every node its SET
  // went to (those not sent to yet are handled by the fan-out loop).
  void AbandonAttemptLocked() {
    failed_ = true;
    for (int i = 0; i < sent_; ++i) {
      QueueReleaseLocked(i);
      if (nodes_[static_cast<size_t>(i)].granted) freed_.push_back(i);
    }
  }

  void FailAttemptLocked(absl::Status status) {
    AbandonAttemptLocked();
    phase_ = Phase::kBetween;
    AttemptPolicy::Decision next = attempts_.AfterFailure(what_, attempt_, std::move(status));
    if (!next.retry) {
      SetResultLocked(std::move(next.status), next.kind);
      return;
    }
    Retry retry;
    retry.delay = next.delay;
    if (request_.wait.has_value()) retry.mark = mark_;
    retry_.emplace(std::move(retry));
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
    auto self = shared_from_this();
    transport().RunAfter(absl::ZeroDuration(), [self] { self->AfterUnlock(); });
  }

  // Decides the call as cancelled, unless it is decided already (a success
  // just before the stop stands: see Client::Acquire). The keys of an
  // attempt in flight are released behind their SETs.
  bool CancelLocked() {
    if (result_.has_value() || !done_) return false;
    if (phase_ == Phase::kRound1 || phase_ == Phase::kRound2) AbandonAttemptLocked();
    retry_.reset();
    SetResultLocked(AttemptPolicy::Cancelled(what_, attempt_), Outcome::Kind::kCancelled);
    return true;
  }

  void SetResultLocked(absl::StatusOr<std::vector<Lease>> result, Outcome::Kind kind) {
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
    outcome_ = MakeOutcome(kind, quorum_, std::move(results));
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
    LeasesCallback done;
    std::optional<absl::StatusOr<std::vector<Lease>>> result;
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
      commit = round2_;
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
          // Where each node's SET went, for the lease's release.
          auto conns = std::make_shared<std::vector<ConnectionId>>();
          for (const NodeState& s : nodes_) conns->push_back(s.conn);
          for (Lease& l : **result_) LeaseFactory::SetConnections(&l, conns);
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
    // they were queued; only a release overtaking its own SET would matter,
    // and a release is queued only once its SET was sent (sent_).
    auto self = shared_from_this();
    for (const Outgoing& o : outgoing) {
      if (!o.commit) {
        ctx_->calls().Release(o.node, o.after, release);
        continue;
      }
      // A commit that got NOSCRIPT may run later than sent (it raises the
      // counter only while the key holds the token): sent again, with its
      // own confirmation.
      ctx_->calls().Send(o.node, *commit, CommitVote, /*durable=*/true, OnNoScript::kResend,
                         [self, attempt, i = o.node](NodeCalls::Answer a) {
                           self->OnRound2(attempt, i, std::move(a));
                         });
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
        event.resources = request_.resources;
        event.status = result->status();
        event.outcome = outcome_;
        if (result->ok() && !(*result)->empty()) {
          event.fencing_token = (**result)[0].fencing_token();
        }
        observer->OnAcquire(event);
      }
      done(*std::move(result));
      return;
    }
    if (!retry.has_value()) return;
    if (watch != nullptr) {
      watch->Wait(retry->mark, quorum_, retry->delay,
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
  const AcquireRequest request_;
  const std::shared_ptr<const AcquireShape> shape_;  // null: a plain lock
  const bool custom_;                                // shape_ replaces the scripts
  const int64_t ttl_ms_;
  const AcquireForm form_;
  // The grants an attempt needs: the request's quorum, or with fencing F
  // (FencedQuorum), which is also round 2's size and quorum.
  const int quorum_;
  const std::string what_;
  const absl::Duration drift_;
  const bool confirm_round1_;
  std::vector<std::string> keys_;
  std::shared_ptr<ReleaseWatches::Watch> watch_;
  std::unique_ptr<StopCallback> stop_callback_;

  std::mutex mu_;
  AttemptPolicy attempts_;
  LeasesCallback done_;
  int attempt_ = 0;
  std::string token_;
  Clock::TimePoint start_;
  uint64_t mark_ = 0;
  Phase phase_ = Phase::kBetween;
  bool failed_ = false;         // the current attempt failed
  int sent_ = 0;                // nodes [0, sent_) have this attempt's SET
  bool fanout_active_ = false;  // StartAttempt is still sending
  Round round_;
  std::vector<NodeState> nodes_;
  std::vector<int> round2_nodes_;
  std::vector<uint64_t> fences_;
  std::optional<Retry> retry_;
  Transport::TimerId retry_timer_ = 0;          // the pause before the next attempt
  std::vector<Outgoing> outbox_;                // sent by AfterUnlock
  std::shared_ptr<const Command> round2_;       // the fencing commit of the attempt
  std::shared_ptr<const KeysRelease> release_;  // the release of attempt release_attempt_
  int release_attempt_ = 0;
  std::vector<int> freed_;  // nodes freed by a failed attempt's cleanup, for the watch
  std::optional<absl::StatusOr<std::vector<Lease>>> result_;
  Outcome outcome_;  // goes with result_
  const Clock::TimePoint call_start_ = ctx_->clock().Now();
};

}  // namespace

void StartAcquire(OpContext* ctx, AcquireRequest request, LeasesCallback done) {
  if (ctx->has_cluster()) {
    // On a cluster node the keys of one call must share a hash slot;
    // refused before anything is sent.
    std::vector<std::string> keys;
    for (const auto& r : request.resources) keys.push_back(ctx->Key(r));
    const bool derived = ctx->options().fencing ||
                         (request.shape != nullptr &&
                          (request.shape->force_fencing() || request.shape->custom_scripts()));
    const std::string problem = ctx->ClusterKeysProblem(keys, derived);
    if (!problem.empty()) {
      done(absl::InvalidArgumentError(
          absl::StrCat("acquire ", DescribeResources(request.resources), ": ", problem)));
      return;
    }
  }
  auto op = std::make_shared<AcquireOp>(ctx, std::move(request), std::move(done));
  op->Start();
}

}  // namespace redlock::internal
