#include "redlock/internal/semaphore_op.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/attempts.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/jitter.h"
#include "redlock/internal/lease_factory.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/outcome_payload.h"
#include "redlock/internal/release_watch.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/token.h"
#include "redlock/internal/votes.h"
#include "redlock/observer.h"

namespace redlock::internal {

std::string PermitResource(absl::string_view resource, int slot) {
  return absl::StrCat(resource, ":permit:", slot);
}

namespace {

using V = Round::Vote;
using Decision = Round::Outcome;

class SemaphoreOp : public std::enable_shared_from_this<SemaphoreOp> {
 public:
  SemaphoreOp(OpContext* ctx, SemaphoreRequest request, PermitCallback done)
      : ctx_(ctx),
        request_(std::move(request)),
        k_(request_.permits),
        q_(request_.quorum),
        ttl_ms_(request_.ttl.ms),
        fencing_(ctx->options().fencing),
        what_(absl::StrCat("acquire a permit of \"", request_.resource, "\" (", k_,
                           k_ == 1 ? " permit)" : " permits)")),
        drift_(request_.ttl.drift),
        attempts_(*ctx, request_.wait, request_.max_attempts, /*fail_fast_unavailable=*/false),
        done_(std::move(done)),
        round2_(0, 0) {
    for (int i = 0; i < k_; ++i) {
      keys_.push_back(ctx_->Key(PermitResource(request_.resource, i)));
    }
  }

  void Start() {
    if (request_.wait.has_value() && ctx_->options().release_notifications) {
      // A release of any permit may let this waiter in; each release goes
      // to one waiting waiter of this client (release_watch.h).
      watch_ = ctx_->watches().Open(keys_, ReleaseWatches::Wakeup::kOldestWaiting);
    }
    if (request_.stop.stop_requested()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        CancelLocked();
      }
      AfterUnlock();
      return;
    }
    if (request_.stop.stop_possible()) {
      std::weak_ptr<SemaphoreOp> weak = weak_from_this();
      stop_callback_ = std::make_unique<StopCallback>(request_.stop, [weak] {
        if (auto self = weak.lock()) self->OnStop();
      });
    }
    StartAttempt();
  }

 private:
  enum class Phase { kRound1, kRound2, kBetween, kDone };

  struct NodeState {
    int pick = -1;         // the permit this attempt's script set there
    uint64_t counter = 0;  // that permit's fencing counter (round 1)
    bool counted = false;  // the pick is in tally_
    NodeResult result;
    ConnectionId conn = 0;  // where round 1 went (0: not sent)
  };

  struct Retry {
    absl::Duration delay;
    uint64_t mark = 0;
  };

  // Sent by AfterUnlock, outside mu_: the fencing commit of the attempt,
  // or its release behind the command on connection `after`.
  struct Outgoing {
    int node;
    bool commit;
    ConnectionId after = 0;
  };

  int n() const { return ctx_->nodes(); }
  Transport& transport() { return ctx_->transport(); }

  Command Round1Command(int first) const {
    std::vector<std::string> keys = keys_;
    if (fencing_) {
      for (const auto& k : keys_) keys.push_back(absl::StrCat(k, kFenceSuffix));
    }
    Command c =
        ScriptCommand(SemAcquireScript(), keys,
                      {token_, std::to_string(ttl_ms_), std::to_string(first), std::to_string(k_)});
    c.op = "acquire";
    return c;
  }

  void StartAttempt() {
    Command command;
    int attempt = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (phase_ == Phase::kDone) {
      } else if (transport().stopping()) {
        SetResultLocked(absl::CancelledError(absl::StrCat(what_, ": the client is shutting down")),
                        Outcome::Kind::kCancelled);
      } else {
        attempt = ++attempt_;
        token_ = NewToken();
        start_ = ctx_->clock().Now();
        mark_ = watch_ != nullptr ? watch_->Mark() : 0;
        phase_ = Phase::kRound1;
        failed_ = false;
        winner_ = -1;
        tally_.assign(static_cast<size_t>(k_), 0);
        answered_ = full_ = unavailable_ = internal_ = cancelled_ = 0;
        errors_.clear();
        nodes_.assign(static_cast<size_t>(n()), NodeState{});
        for (int i = 0; i < n(); ++i) {
          nodes_[static_cast<size_t>(i)].result.node = transport().NodeName(i);
        }
        sent_ = 0;
        fanout_active_ = true;
        // A random first permit: concurrent acquirers then mostly pick
        // different free permits instead of splitting the nodes over one.
        command = Round1Command(static_cast<int>(UniformInt(0, k_ - 1)));
      }
    }
    if (attempt == 0) {
      AfterUnlock();
      return;
    }
    auto self = shared_from_this();
    // As a plain acquisition: not sent again after NOSCRIPT (its release may
    // be queued behind it); durable unless the fencing commit is.
    const NodeCalls::Judge judge = [k = k_, fencing = fencing_](const absl::StatusOr<Reply>& r) {
      int pick = -1;
      uint64_t counter = 0;
      return PermitVote(r, k, fencing, &pick, &counter);
    };
    for (int i = 0; i < n(); ++i) {
      ConnectionId conn = ctx_->calls().Send(
          i, command, judge, /*durable=*/!fencing_, OnNoScript::kFail,
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

  // The node's vote (with Options::durability, once its replicas
  // confirmed the pick, or did not: then it is a "no" and the pick goes).
  void OnRound1(int attempt, int node, NodeCalls::Answer a) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      NodeState& state = nodes_[static_cast<size_t>(node)];
      // The reply may come before the fan-out loop stored the connection.
      if (state.conn == 0) state.conn = a.connection;
      (void)PermitVote(a.reply, k_, fencing_, &state.pick, &state.counter);
      RecordRound1Locked(node, std::move(a.vote));
    }
    AfterUnlock();
  }

  void NoteErrorLocked(int node, const Vote& v) {
    if (v.detail.empty()) return;
    if (errors_.size() < 3) {
      errors_.push_back(absl::StrCat(transport().NodeName(node), ": ", v.detail));
    }
  }

  void RecordRound1Locked(int node, Vote v) {
    NodeState& state = nodes_[static_cast<size_t>(node)];
    RecordAnswer(v, absl::FromChrono(ctx_->clock().Now() - start_), &state.result);
    if (phase_ != Phase::kRound1) {
      // Decided already: a late pick is not part of the permit unless it is
      // the winning one of a success (the lease's release reaches it).
      if (state.pick >= 0 && (failed_ || state.pick != winner_ || v.vote != V::kYes)) {
        if (!failed_) QueueReleaseLocked(node);
      }
      return;
    }
    ++answered_;
    switch (v.vote) {
      case V::kYes:
        state.counted = true;
        ++tally_[static_cast<size_t>(state.pick)];
        break;
      case V::kRefused:
        ++full_;
        break;
      case V::kUnavailable:
        ++unavailable_;
        NoteErrorLocked(node, v);
        break;
      case V::kCancelled:
        ++cancelled_;
        NoteErrorLocked(node, v);
        break;
      case V::kInternal:
        ++internal_;
        NoteErrorLocked(node, v);
        break;
    }
    // Set but not counted (a garbage counter, replicas that did not confirm).
    if (v.vote != V::kYes && state.pick >= 0) QueueReleaseLocked(node);
    int best = 0;
    for (int s = 0; s < k_; ++s) {
      if (tally_[static_cast<size_t>(s)] >= q_) {
        winner_ = s;
        break;
      }
      best = std::max(best, tally_[static_cast<size_t>(s)]);
    }
    if (winner_ >= 0) {
      // The other picks of this attempt go now; so do later ones.
      for (int i = 0; i < n(); ++i) {
        const NodeState& s = nodes_[static_cast<size_t>(i)];
        if (s.counted && s.pick != winner_) QueueReleaseLocked(i);
      }
      if (fencing_) {
        StartRound2Locked();
      } else {
        SucceedLocked(0, tally_[static_cast<size_t>(winner_)]);
      }
      return;
    }
    if (best + (n() - answered_) < q_) FailAttemptLocked(Round1Failure());
  }

  std::string TallyText() const {
    std::vector<std::string> picks;
    for (int s = 0; s < k_; ++s) {
      if (tally_[static_cast<size_t>(s)] > 0) {
        picks.push_back(absl::StrCat("permit ", s, " on ", tally_[static_cast<size_t>(s)]));
      }
    }
    std::string out =
        absl::StrCat("no permit granted by a quorum (quorum ", q_, " of ", n(), " nodes)",
                     picks.empty() ? "" : absl::StrCat(": ", absl::StrJoin(picks, ", ")));
    if (full_ > 0) {
      absl::StrAppend(&out, "; every permit held on ", full_, full_ == 1 ? " node" : " nodes");
    }
    for (const auto& e : errors_) absl::StrAppend(&out, "; ", e);
    return out;
  }

  absl::Status Round1Failure() const {
    const std::string message = absl::StrCat(what_, ": ", TallyText());
    if (cancelled_ > 0 && transport_stopping()) return absl::CancelledError(message);
    // As Round::Failure: held elsewhere unless the nodes that could not
    // answer were enough to prevent the quorum.
    if (n() - unavailable_ - cancelled_ < q_) return absl::UnavailableError(message);
    if (n() - unavailable_ - cancelled_ - internal_ < q_) return absl::InternalError(message);
    return absl::AbortedError(message);
  }

  bool transport_stopping() const { return ctx_->transport().stopping(); }

  void StartRound2Locked() {
    round2_nodes_.clear();
    std::vector<uint64_t> seen;
    for (int i = 0; i < n(); ++i) {
      const NodeState& s = nodes_[static_cast<size_t>(i)];
      if (s.counted && s.pick == winner_) {
        round2_nodes_.push_back(i);
        seen.push_back(s.counter);
      }
    }
    absl::StatusOr<uint64_t> t = NextFence(seen);
    if (!t.ok()) {
      FailAttemptLocked(
          absl::Status(t.status().code(), absl::StrCat(what_, ": ", t.status().message())));
      return;
    }
    fence_ = *t;
    phase_ = Phase::kRound2;
    round2_ = Round(static_cast<int>(round2_nodes_.size()), q_);
    const std::string& key = keys_[static_cast<size_t>(winner_)];
    auto command = std::make_shared<Command>(ScriptCommand(FenceCommitScript(),
                                                           {key, absl::StrCat(key, kFenceSuffix)},
                                                           {token_, std::to_string(fence_)}));
    command->op = "fence-commit";
    commit_ = std::move(command);
    // With Options::durability the commit's confirmation covers the counter
    // write and, on the same connection, round 1's pick.
    for (int i : round2_nodes_) outbox_.push_back({i, /*commit=*/true});
  }

  void OnRound2(int attempt, int node, NodeCalls::Answer a) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      // Committed but not confirmed: the permit goes at once.
      if (a.unconfirmed && !failed_) QueueReleaseLocked(node, a.connection);
      if (phase_ == Phase::kRound2) RecordRound2Locked(node, std::move(a.vote));
    }
    AfterUnlock();
  }

  void RecordRound2Locked(int node, Vote v) {
    Decision outcome = round2_.Record(transport().NodeName(node), v.vote, v.detail);
    if (outcome == Decision::kSucceeded) {
      SucceedLocked(fence_, round2_.yes());
    } else if (outcome == Decision::kFailed) {
      FailAttemptLocked(round2_.Failure(absl::StrCat(what_, " (fencing round)"), "confirmed",
                                        "lost the permit before confirming",
                                        absl::StatusCode::kAborted));
    }
  }

  void SucceedLocked(uint64_t fence, int granted) {
    Clock::TimePoint now = ctx_->clock().Now();
    absl::Duration elapsed = absl::FromChrono(now - start_);
    absl::Duration validity = Validity(request_.ttl.ttl, elapsed, drift_);
    if (validity <= absl::ZeroDuration()) {
      FailAttemptLocked(absl::DeadlineExceededError(absl::StrCat(
          what_, ": permit ", winner_, " granted by ", granted, " of ", n(),
          " nodes but no validity was left: the attempt took ", absl::FormatDuration(elapsed),
          " of the ", ttl_ms_, "ms ttl (drift allowance ", absl::FormatDuration(drift_), ")")));
      return;
    }
    Clock::TimePoint valid_until = now + absl::ToChronoNanoseconds(validity);
    Lease lease = LeaseFactory::Make(PermitResource(request_.resource, winner_), token_,
                                     request_.ttl.ttl, start_, nullptr, valid_until, granted, fence);
    SetResultLocked(std::make_pair(std::move(lease), winner_), Outcome::Kind::kSucceeded);
  }

  // Removes whatever this attempt set on node i: one permit at most, which
  // one not known before the reply; the release of every permit key of the
  // token covers it. Behind the pick on connection `after`, and sent again
  // until it gets through (NodeCalls::Release); none where nothing was sent.
  void QueueReleaseLocked(int i, ConnectionId after) {
    if (after == 0) return;
    if (release_attempt_ != attempt_) {
      auto release = std::make_shared<KeysRelease>();
      release->keys = keys_;
      release->token = token_;
      release->ttl = request_.ttl.ttl;
      release->expires = start_ + absl::ToChronoNanoseconds(request_.ttl.ttl);
      release_ = std::move(release);
      release_attempt_ = attempt_;
    }
    outbox_.push_back({i, /*commit=*/false, after});
  }
  void QueueReleaseLocked(int i) { QueueReleaseLocked(i, nodes_[static_cast<size_t>(i)].conn); }

  void AbandonAttemptLocked() {
    failed_ = true;
    // A node whose pick this attempt releases is not counted as free for the
    // wait (as a mutex's is): it may have given this waiter one permit while
    // another permit is the one that failed; waiters that each took a share
    // of different permits and retried at once, as freed nodes let them,
    // kept splitting the votes: thousands of attempts in 20 s, in lockstep,
    // none granted. They retry on an announcement or after the jittered
    // polling pause instead.
    for (int i = 0; i < sent_; ++i) QueueReleaseLocked(i);
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

  void OnStop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!CancelLocked()) return;
    }
    auto self = shared_from_this();
    transport().RunAfter(absl::ZeroDuration(), [self] { self->AfterUnlock(); });
  }

  bool CancelLocked() {
    if (result_.has_value() || !done_) return false;
    if (phase_ == Phase::kRound1 || phase_ == Phase::kRound2) AbandonAttemptLocked();
    retry_.reset();
    SetResultLocked(AttemptPolicy::Cancelled(what_, attempt_), Outcome::Kind::kCancelled);
    return true;
  }

  void SetResultLocked(absl::StatusOr<std::pair<Lease, int>> result, Outcome::Kind kind) {
    phase_ = Phase::kDone;
    std::vector<NodeResult> results;
    results.reserve(nodes_.size());
    for (const NodeState& s : nodes_) results.push_back(s.result);
    outcome_ = MakeOutcome(kind, q_, std::move(results));
    outcome_.attempts = attempt_;
    outcome_.elapsed = absl::FromChrono(ctx_->clock().Now() - call_start_);
    if (!result.ok()) {
      absl::Status st = result.status();
      AttachOutcome(&st, outcome_);
      result = std::move(st);
    }
    result_.emplace(std::move(result));
  }

  void AfterUnlock() {
    PermitCallback done;
    std::optional<absl::StatusOr<std::pair<Lease, int>>> result;
    std::optional<Retry> retry;
    std::shared_ptr<ReleaseWatches::Watch> watch;
    std::unique_ptr<StopCallback> stop_callback;
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
      if (!fanout_active_ && result_.has_value() && done_) {
        done = std::move(done_);
        done_ = nullptr;
        if (result_->ok()) {
          // Where each node's pick went, for the permit's release.
          auto conns = std::make_shared<std::vector<ConnectionId>>();
          for (const NodeState& s : nodes_) conns->push_back(s.conn);
          LeaseFactory::SetConnections(&(*result_)->first, conns);
        }
        result = std::move(result_);
        watch_.reset();
        stop_callback = std::move(stop_callback_);
        retry_timer = std::exchange(retry_timer_, 0);
      } else if (!fanout_active_ && retry_.has_value()) {
        retry.swap(retry_);
      }
    }
    auto self = shared_from_this();
    for (const Outgoing& o : outgoing) {
      if (!o.commit) {
        ctx_->calls().Release(o.node, o.after, release);
        continue;
      }
      // Sent again after NOSCRIPT, with its own confirmation (as a plain
      // lock's commit).
      ctx_->calls().Send(o.node, *commit, CommitVote, /*durable=*/true, OnNoScript::kResend,
                         [self, attempt, i = o.node](NodeCalls::Answer a) {
                           self->OnRound2(attempt, i, std::move(a));
                         });
    }
    if (done) {
      if (retry_timer != 0) transport().Cancel(retry_timer);
      if (watch != nullptr) watch->Cancel();
      watch.reset();
      stop_callback.reset();
      if (Observer* observer = ctx_->observer()) {
        AcquireEvent event;
        event.resources = {result->ok() ? (*result)->first.resource() : request_.resource};
        event.status = result->status();
        event.outcome = outcome_;
        if (result->ok()) event.fencing_token = (*result)->first.fencing_token();
        observer->OnAcquire(event);
      }
      done(*std::move(result));
      return;
    }
    if (!retry.has_value()) return;
    if (watch != nullptr) {
      watch->Wait(retry->mark, q_, retry->delay, [self](absl::Status) { self->StartAttempt(); });
      return;
    }
    Transport::TimerId timer = transport().RunAfter(retry->delay, [self] { self->StartAttempt(); });
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ == Phase::kBetween) retry_timer_ = timer;
  }

  OpContext* const ctx_;
  const SemaphoreRequest request_;
  const int k_;
  const int q_;
  const int64_t ttl_ms_;
  const bool fencing_;
  const std::string what_;
  const absl::Duration drift_;
  std::vector<std::string> keys_;  // the permit keys, in permit order
  std::shared_ptr<ReleaseWatches::Watch> watch_;
  std::unique_ptr<StopCallback> stop_callback_;

  std::mutex mu_;
  AttemptPolicy attempts_;
  PermitCallback done_;
  int attempt_ = 0;
  std::string token_;
  Clock::TimePoint start_;
  uint64_t mark_ = 0;
  Phase phase_ = Phase::kBetween;
  bool failed_ = false;
  int sent_ = 0;
  bool fanout_active_ = false;
  std::vector<NodeState> nodes_;
  std::vector<int> tally_;  // per permit, the counted picks of this attempt
  int winner_ = -1;         // the permit that reached a quorum
  int answered_ = 0, full_ = 0, unavailable_ = 0, internal_ = 0, cancelled_ = 0;
  std::vector<std::string> errors_;
  Round round2_;
  std::vector<int> round2_nodes_;
  uint64_t fence_ = 0;
  std::optional<Retry> retry_;
  Transport::TimerId retry_timer_ = 0;
  std::vector<Outgoing> outbox_;
  std::shared_ptr<const Command> commit_;       // the fencing commit of the attempt
  std::shared_ptr<const KeysRelease> release_;  // the release of attempt release_attempt_
  int release_attempt_ = 0;
  std::optional<absl::StatusOr<std::pair<Lease, int>>> result_;
  Outcome outcome_;
  const Clock::TimePoint call_start_ = ctx_->clock().Now();
};

}  // namespace

void StartSemaphoreAcquire(OpContext* ctx, SemaphoreRequest request, PermitCallback done) {
  if (ctx->has_cluster()) {
    // One call takes a permit among all K permit keys (and their counters):
    // on a cluster node they must share a hash slot.
    std::vector<std::string> keys;
    for (int i = 0; i < request.permits; ++i) {
      keys.push_back(ctx->Key(PermitResource(request.resource, i)));
    }
    const std::string problem = ctx->ClusterKeysProblem(keys, ctx->options().fencing);
    if (!problem.empty()) {
      done(absl::InvalidArgumentError(
          absl::StrCat("acquire a permit of ", request.resource, ": ", problem)));
      return;
    }
  }
  auto op = std::make_shared<SemaphoreOp>(ctx, std::move(request), std::move(done));
  op->Start();
}

}  // namespace redlock::internal
