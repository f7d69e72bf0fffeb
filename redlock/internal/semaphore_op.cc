#include "redlock/internal/semaphore_op.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/durability.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/lease_factory.h"
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

std::string Attempts(int n) { return absl::StrCat(n, n == 1 ? " attempt" : " attempts"); }

// A node's answer to the acquisition script: its vote and the permit it set.
Vote PickVote(const absl::StatusOr<Reply>& r, int permits, bool fencing, int* pick,
              uint64_t* counter) {
  *pick = -1;
  if (!r.ok()) {
    return Vote{absl::IsCancelled(r.status()) ? V::kCancelled : V::kUnavailable,
                std::string(r.status().message())};
  }
  if (r->is_error()) return Vote{VoteForErrorReply(r->str), r->str};
  const Reply& reply = *r;
  if (reply.type == Reply::Type::kArray && !reply.elements.empty() &&
      reply.elements[0].type == Reply::Type::kInteger) {
    const int64_t i = reply.elements[0].integer;
    if (i == 0 && reply.elements.size() == 1) return Vote{V::kRefused, ""};
    if (i >= 1 && i <= permits && reply.elements.size() == (fencing ? 2u : 1u)) {
      *pick = static_cast<int>(i - 1);
      if (!fencing) return Vote{V::kYes, ""};
      absl::StatusOr<uint64_t> c = ParseCounter(reply.elements[1].str);
      // The key was set: it is released with the attempt.
      if (!c.ok()) return Vote{V::kInternal, std::string(c.status().message())};
      *counter = *c;
      return Vote{V::kYes, ""};
    }
  }
  return Vote{V::kInternal, absl::StrCat("unexpected reply ", reply.Describe())};
}

class SemaphoreOp : public std::enable_shared_from_this<SemaphoreOp> {
 public:
  SemaphoreOp(OpContext* ctx, SemaphoreRequest request, PermitCallback done)
      : ctx_(ctx),
        request_(std::move(request)),
        k_(request_.permits),
        q_(request_.quorum),
        ttl_ms_(absl::ToInt64Milliseconds(request_.ttl)),
        fencing_(ctx->options().fencing),
        durability_(ctx->options().durability),
        confirm_round1_(DurabilityOn(durability_) && !fencing_),
        what_(absl::StrCat("acquire a permit of \"", request_.resource, "\" (", k_,
                           k_ == 1 ? " permit)" : " permits)")),
        drift_(DriftAllowance(request_.ttl, ctx->options().clock_drift_factor,
                              ctx->options().clock_drift_floor)),
        pause_(std::max(ctx->options().retry_delay / 4, absl::Milliseconds(1))),
        done_(std::move(done)),
        round2_(0, 0) {
    for (int i = 0; i < k_; ++i) {
      keys_.push_back(ctx_->Key(PermitResource(request_.resource, i)));
    }
    if (request_.wait.has_value() && *request_.wait != absl::InfiniteDuration()) {
      deadline_ = ctx_->clock().Now() + absl::ToChronoNanoseconds(*request_.wait);
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
    // The durability vote of the current round (as in acquire_op.cc).
    bool replied = false;
    bool write_yes = false;
    std::optional<Vote> confirm;
  };

  struct Retry {
    absl::Duration delay;
    uint64_t mark = 0;
  };

  struct Outgoing {
    int node;
    std::shared_ptr<const Command> command;
    NodeCallback done;
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
    const Command confirm = confirm_round1_ ? DurabilityCommand(durability_) : Command();
    for (int i = 0; i < n(); ++i) {
      transport().Send(i, command, [self, attempt, i](absl::StatusOr<Reply> r) {
        self->OnRound1(attempt, i, std::move(r));
      });
      if (confirm_round1_) {
        transport().Send(i, confirm, [self, attempt, i](absl::StatusOr<Reply> r) {
          self->OnConfirm(attempt, Phase::kRound1, i, std::move(r));
        });
      }
      std::lock_guard<std::mutex> lock(mu_);
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

  void OnRound1(int attempt, int node, absl::StatusOr<Reply> r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      NodeState& state = nodes_[static_cast<size_t>(node)];
      Vote v = PickVote(r, k_, fencing_, &state.pick, &state.counter);
      std::optional<Vote> vote = WriteVoteLocked(node, std::move(v), confirm_round1_);
      if (vote.has_value()) RecordRound1Locked(node, *std::move(vote));
    }
    AfterUnlock();
  }

  void OnConfirm(int attempt, Phase phase, int node, absl::StatusOr<Reply> r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      NodeState& state = nodes_[static_cast<size_t>(node)];
      Vote v = DurabilityVote(r, durability_);
      if (!state.replied) {
        state.confirm = std::move(v);
        return;
      }
      if (!state.write_yes) return;
      if (v.vote != V::kYes) DropUnconfirmedLocked(node);
      if (phase == Phase::kRound1) {
        RecordRound1Locked(node, std::move(v));
      } else if (phase_ == Phase::kRound2) {
        RecordRound2Locked(node, std::move(v));
      }
    }
    AfterUnlock();
  }

  std::optional<Vote> WriteVoteLocked(int node, Vote v, bool confirmable) {
    NodeState& state = nodes_[static_cast<size_t>(node)];
    state.replied = true;
    state.write_yes = v.vote == V::kYes;
    if (!confirmable || !state.write_yes) return v;
    if (!state.confirm.has_value()) return std::nullopt;
    if (state.confirm->vote != V::kYes) DropUnconfirmedLocked(node);
    return state.confirm;
  }

  // The node set a permit its replicas did not confirm: it does not count,
  // and the key goes at once.
  void DropUnconfirmedLocked(int node) {
    if (!failed_) QueueReleaseLocked(node);
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
        if (failed_) freed_.push_back(node);
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
    for (NodeState& s : nodes_) {
      s.replied = false;
      s.write_yes = false;
      s.confirm.reset();
    }
    phase_ = Phase::kRound2;
    round2_ = Round(static_cast<int>(round2_nodes_.size()), q_);
    const std::string& key = keys_[static_cast<size_t>(winner_)];
    auto command = std::make_shared<Command>(ScriptCommand(FenceCommitScript(),
                                                           {key, absl::StrCat(key, kFenceSuffix)},
                                                           {token_, std::to_string(fence_)}));
    command->op = "fence-commit";
    std::shared_ptr<const Command> wait;
    if (DurabilityOn(durability_)) wait = std::make_shared<Command>(DurabilityCommand(durability_));
    auto self = shared_from_this();
    for (int i : round2_nodes_) {
      outbox_.push_back({i, command, [self, a = attempt_, i](absl::StatusOr<Reply> r) {
                           self->OnRound2(a, i, std::move(r));
                         }});
      if (wait != nullptr) {
        outbox_.push_back({i, wait, [self, a = attempt_, i](absl::StatusOr<Reply> r) {
                             self->OnConfirm(a, Phase::kRound2, i, std::move(r));
                           }});
      }
    }
  }

  void OnRound2(int attempt, int node, absl::StatusOr<Reply> r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      std::optional<Vote> vote = WriteVoteLocked(node, CommitVote(r), DurabilityOn(durability_));
      if (vote.has_value() && phase_ == Phase::kRound2) RecordRound2Locked(node, *std::move(vote));
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
    absl::Duration validity = Validity(request_.ttl, elapsed, drift_);
    if (validity <= absl::ZeroDuration()) {
      FailAttemptLocked(absl::DeadlineExceededError(absl::StrCat(
          what_, ": permit ", winner_, " granted by ", granted, " of ", n(),
          " nodes but no validity was left: the attempt took ", absl::FormatDuration(elapsed),
          " of the ", ttl_ms_, "ms ttl (drift allowance ", absl::FormatDuration(drift_), ")")));
      return;
    }
    Clock::TimePoint valid_until = now + absl::ToChronoNanoseconds(validity);
    Lease lease = LeaseFactory::Make(PermitResource(request_.resource, winner_), token_,
                                     request_.ttl, start_, start_, valid_until, granted, fence);
    SetResultLocked(std::make_pair(std::move(lease), winner_), Outcome::Kind::kSucceeded);
  }

  // Removes whatever this attempt set on node i: one permit at most, which
  // one not known before the reply; the release of every permit key of the
  // token covers it.
  void QueueReleaseLocked(int i) {
    if (release_attempt_ != attempt_) {
      auto release = std::make_shared<Command>(ScriptCommand(ReleaseScript(), keys_, {token_, ""}));
      release->cleanup = true;
      release->since = start_;
      release->op = "release";
      release_ = std::move(release);
      release_attempt_ = attempt_;
    }
    outbox_.push_back({i, release_, [](absl::StatusOr<Reply>) {}});
  }

  void AbandonAttemptLocked() {
    failed_ = true;
    for (int i = 0; i < sent_; ++i) {
      QueueReleaseLocked(i);
      if (nodes_[static_cast<size_t>(i)].pick >= 0) freed_.push_back(i);
    }
  }

  void FailAttemptLocked(absl::Status status) {
    AbandonAttemptLocked();
    phase_ = Phase::kBetween;
    const Outcome::Kind kind = KindOf(status);
    if (absl::IsCancelled(status) || transport().stopping()) {
      SetResultLocked(std::move(status), Outcome::Kind::kCancelled);
      return;
    }
    Retry retry;
    retry.delay = ctx_->RetryDelay();
    if (request_.wait.has_value()) {
      absl::Duration left = absl::InfiniteDuration();
      if (deadline_.has_value()) left = absl::FromChrono(*deadline_ - ctx_->clock().Now());
      if (left <= absl::ZeroDuration()) {
        SetResultLocked(
            absl::DeadlineExceededError(absl::StrCat(
                what_, ": not held after waiting ", absl::FormatDuration(*request_.wait), " (",
                Attempts(attempt_), "); last attempt: ", status.message())),
            Outcome::Kind::kWaitExpired);
        return;
      }
      retry.delay = std::min(pause_ * UniformReal(0.5, 1.5), left);
      pause_ = std::min(pause_ * 2, ctx_->options().wait_poll_max);
      retry.mark = mark_;
    } else if (attempt_ >= request_.max_attempts) {
      if (attempt_ > 1) {
        status = absl::Status(status.code(),
                              absl::StrCat(status.message(), " (after ", Attempts(attempt_), ")"));
      }
      SetResultLocked(std::move(status), kind);
      return;
    }
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
    SetResultLocked(
        absl::CancelledError(absl::StrCat(what_, ": cancelled", attempt_ > 0 ? " after " : "",
                                          attempt_ > 0 ? Attempts(attempt_) : "")),
        Outcome::Kind::kCancelled);
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
    std::vector<int> freed;
    std::vector<Outgoing> outgoing;
    Transport::TimerId retry_timer = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      outgoing.swap(outbox_);
      watch = watch_;
      freed.swap(freed_);
      if (!fanout_active_ && result_.has_value() && done_) {
        done = std::move(done_);
        done_ = nullptr;
        result = std::move(result_);
        watch_.reset();
        stop_callback = std::move(stop_callback_);
        retry_timer = std::exchange(retry_timer_, 0);
      } else if (!fanout_active_ && retry_.has_value()) {
        retry.swap(retry_);
      }
    }
    for (Outgoing& o : outgoing) transport().Send(o.node, *o.command, std::move(o.done));
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
    auto self = shared_from_this();
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
  const Options::Durability durability_;
  const bool confirm_round1_;
  const std::string what_;
  const absl::Duration drift_;
  std::optional<Clock::TimePoint> deadline_;
  std::vector<std::string> keys_;  // the permit keys, in permit order
  std::shared_ptr<ReleaseWatches::Watch> watch_;
  std::unique_ptr<StopCallback> stop_callback_;

  std::mutex mu_;
  absl::Duration pause_;
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
  std::shared_ptr<const Command> release_;
  int release_attempt_ = 0;
  std::vector<int> freed_;
  std::optional<absl::StatusOr<std::pair<Lease, int>>> result_;
  Outcome outcome_;
  const Clock::TimePoint call_start_ = ctx_->clock().Now();
};

}  // namespace

void StartSemaphoreAcquire(OpContext* ctx, SemaphoreRequest request, PermitCallback done) {
  auto op = std::make_shared<SemaphoreOp>(ctx, std::move(request), std::move(done));
  op->Start();
}

}  // namespace redlock::internal
