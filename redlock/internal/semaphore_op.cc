#include "redlock/internal/semaphore_op.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/attempt_loop.h"
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

struct PermitNodeState {
  int pick = -1;         // the permit this attempt's script set there
  uint64_t counter = 0;  // that permit's fencing counter (round 1)
  bool counted = false;  // the pick is in tally_
  // No answer tells what the script did there (a timeout, a lost
  // connection): it may hold any permit of this attempt.
  bool unknown = false;
  NodeResult result;
  ConnectionId conn = 0;  // where round 1 went (0: not sent)
};

std::vector<std::string> PermitKeys(const OpContext& ctx, const SemaphoreRequest& request) {
  std::vector<std::string> keys;
  for (int i = 0; i < request.permits; ++i) {
    keys.push_back(ctx.Key(PermitResource(request.resource, i)));
  }
  return keys;
}

class SemaphoreOp : public AttemptLoop<SemaphoreOp, PermitNodeState, std::pair<Lease, int>> {
 public:
  SemaphoreOp(OpContext* ctx, SemaphoreRequest request, PermitCallback done)
      : AttemptLoop(ctx,
                    {.keys = PermitKeys(*ctx, request),
                     .ttl = request.ttl.ttl,
                     .wait = request.wait,
                     .max_attempts = request.max_attempts,
                     .stop = request.stop},
                    std::move(done)),
        request_(std::move(request)),
        k_(request_.permits),
        // With fencing, F picks of one permit and a commit on all F, as a
        // fenced mutex (FencedQuorum, docs/design.md 5.10).
        q_(ctx->options().fencing
               ? FencedQuorum(ctx->nodes(), request_.quorum, ctx->options().fencing_lost_counters)
               : request_.quorum),
        ttl_ms_(request_.ttl.ms),
        fencing_(ctx->options().fencing),
        drift_(request_.ttl.drift) {}

  // A release of any permit may let this waiter in; each release goes to
  // one waiting waiter of this client (release_watch.h).
  void Start() { Start(ReleaseWatches::Wakeup::kOldestWaiting); }
  using AttemptLoop::Start;

 private:
  friend AttemptLoop;

  std::string What() const {
    return absl::StrCat("acquire a permit of \"", request_.resource, "\" (", request_.permits,
                        request_.permits == 1 ? " permit)" : " permits)");
  }

  Command Round1Command(int first) const {
    // Each permit's counter, or the namespace's one (kShared).
    std::vector<std::string> keys = fencing_ ? ctx_->WithFenceKeys(keys_) : keys_;
    return ScriptCommand(
        SemAcquireScript(), keys,
        {token_, std::to_string(ttl_ms_), std::to_string(first), std::to_string(k_)});
  }

  Command Round1Locked() {
    token_ = NewToken();
    winner_ = -1;
    tally_.assign(static_cast<size_t>(k_), 0);
    answered_ = full_ = unavailable_ = internal_ = cancelled_ = 0;
    errors_.clear();
    // A random first permit: concurrent acquirers then mostly pick
    // different free permits instead of splitting the nodes over one.
    return Round1Command(static_cast<int>(UniformInt(0, k_ - 1)));
  }

  NodeCalls::Judge Round1Judge() const {
    return [k = k_, fencing = fencing_](const absl::StatusOr<Reply>& r) {
      int pick = -1;
      uint64_t counter = 0;
      return PermitVote(r, k, fencing, &pick, &counter);
    };
  }
  // As a plain acquisition: durable unless the fencing commit is.
  bool Round1Durable() const { return !fencing_; }

  // The node's vote (with Options::durability, once its replicas
  // confirmed the pick, or did not: then it is a "no" and the pick goes).
  void OnRound1(int attempt, int node, NodeCalls::Answer a) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      PermitNodeState& state = nodes_[static_cast<size_t>(node)];
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
    PermitNodeState& state = nodes_[static_cast<size_t>(node)];
    RecordAnswer(v, absl::FromChrono(ctx_->clock().Now() - start_), &state.result);
    if (phase_ != Phase::kRound1) {
      // Decided already: a late pick is not part of the permit unless it is
      // the winning one of a success (the lease's release reaches it). A
      // node that did not say what it did may hold any permit: its keys of
      // this token go too (a failed attempt's cleanup has them already).
      const bool unknown = state.pick < 0 && Unknown(v.vote);
      if ((state.pick >= 0 && (failed_ || state.pick != winner_ || v.vote != V::kYes)) || unknown) {
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
    state.unknown = state.pick < 0 && Unknown(v.vote);
    int best = 0;
    for (int s = 0; s < k_; ++s) {
      if (tally_[static_cast<size_t>(s)] >= q_) {
        winner_ = s;
        break;
      }
      best = std::max(best, tally_[static_cast<size_t>(s)]);
    }
    if (winner_ >= 0) {
      // The other picks of this attempt go now; so do later ones, and
      // whatever a node that gave no answer may have taken.
      for (int i = 0; i < n(); ++i) {
        const PermitNodeState& s = nodes_[static_cast<size_t>(i)];
        if ((s.counted && s.pick != winner_) || s.unknown) QueueReleaseLocked(i);
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
    std::string message = absl::StrCat(What(), ": ", TallyText());
    absl::StrAppend(&message,
                    FencedQuorumNote(q_, request_.quorum, ctx_->options().fencing_lost_counters));
    if (cancelled_ > 0 && transport_stopping()) return absl::CancelledError(message);
    // As Round::Failure: held elsewhere unless the nodes that could not
    // answer were enough to prevent the quorum.
    if (n() - unavailable_ - cancelled_ < q_) return absl::UnavailableError(message);
    if (n() - unavailable_ - cancelled_ - internal_ < q_) return absl::InternalError(message);
    return absl::AbortedError(message);
  }

  bool transport_stopping() const { return ctx_->transport().stopping(); }

  // A vote that says nothing of what the node's script did.
  static bool Unknown(V vote) {
    return vote == V::kUnavailable || vote == V::kCancelled || vote == V::kInternal;
  }

  void StartRound2Locked() {
    round2_nodes_.clear();
    std::vector<uint64_t> seen;
    for (int i = 0; i < n(); ++i) {
      const PermitNodeState& s = nodes_[static_cast<size_t>(i)];
      if (s.counted && s.pick == winner_) {
        round2_nodes_.push_back(i);
        seen.push_back(s.counter);
      }
    }
    absl::StatusOr<uint64_t> t = NextFence(seen);
    if (!t.ok()) {
      FailAttemptLocked(
          absl::Status(t.status().code(), absl::StrCat(What(), ": ", t.status().message())));
      return;
    }
    fence_ = *t;
    const std::string& key = keys_[static_cast<size_t>(winner_)];
    StartCommitLocked(round2_nodes_,
                      ScriptCommand(FenceCommitScript(), {key, ctx_->FenceKey(key)},
                                    {token_, std::to_string(fence_)}),
                      "the permit");
  }

  void CommittedLocked() { SucceedLocked(fence_, commit_round_.yes()); }

  void SucceedLocked(uint64_t fence, int granted) {
    Clock::TimePoint now = ctx_->clock().Now();
    absl::Duration elapsed = absl::FromChrono(now - start_);
    absl::Duration validity = Validity(request_.ttl.ttl, elapsed, drift_);
    if (validity <= absl::ZeroDuration()) {
      FailAttemptLocked(absl::DeadlineExceededError(absl::StrCat(
          What(), ": permit ", winner_, " granted by ", granted, " of ", n(),
          " nodes but no validity was left: the attempt took ", absl::FormatDuration(elapsed),
          " of the ", ttl_ms_, "ms ttl (drift allowance ", absl::FormatDuration(drift_), ")")));
      return;
    }
    Clock::TimePoint valid_until = now + absl::ToChronoNanoseconds(validity);
    Lease lease =
        LeaseFactory::Make(PermitResource(request_.resource, winner_), token_, request_.ttl.ttl,
                           start_, nullptr, valid_until, granted, fence);
    SetResultLocked(std::make_pair(std::move(lease), winner_), Outcome::Kind::kSucceeded);
  }

  // The loop's hooks (attempt_loop.h).
  int quorum() const { return q_; }
  // A failed attempt's cleanup removes whatever it set on a node (one
  // permit at most, which one not known before the reply: the release of
  // every permit key of the token covers it). A node whose pick it
  // releases is not counted as free for the wait (as a mutex's is): it may
  // have given this waiter one permit while another permit is the one that
  // failed; waiters that each took a share of different permits and retried
  // at once, as freed nodes let them, kept splitting the votes: thousands of
  // attempts in 20 s, in lockstep, none granted. They retry on an
  // announcement or after the jittered polling pause instead.
  bool FreedByCleanupLocked(int) const { return false; }
  void FillRelease(KeysRelease*) const {}
  static void SetConnections(std::pair<Lease, int>* permit,
                             std::shared_ptr<std::vector<ConnectionId>> conns) {
    LeaseFactory::SetConnections(&permit->first, std::move(conns));
  }
  void FillEvent(const absl::StatusOr<std::pair<Lease, int>>& result, AcquireEvent* event) const {
    event->resources = {result.ok() ? result->first.resource() : request_.resource};
    if (result.ok()) event->fencing_token = result->first.fencing_token();
  }

  const SemaphoreRequest request_;
  const int k_;
  const int q_;
  const int64_t ttl_ms_;
  const bool fencing_;
  const absl::Duration drift_;

  std::vector<int> tally_;  // per permit, the counted picks of this attempt
  int winner_ = -1;         // the permit that reached a quorum
  int answered_ = 0, full_ = 0, unavailable_ = 0, internal_ = 0, cancelled_ = 0;
  std::vector<std::string> errors_;
  std::vector<int> round2_nodes_;
  uint64_t fence_ = 0;
};

}  // namespace

void StartSemaphoreAcquire(OpContext* ctx, SemaphoreRequest request, PermitCallback done) {
  // One call takes a permit among all K permit keys (and their counters):
  // every node must be able to run it as one command (scheme.h).
  const std::vector<std::string> keys = PermitKeys(*ctx, request);
  const std::string problem =
      ctx->KeysProblem(ctx->options().fencing ? ctx->WithFenceKeys(keys) : keys);
  if (!problem.empty()) {
    done(absl::InvalidArgumentError(
        absl::StrCat("acquire a permit of ", request.resource, ": ", problem)));
    return;
  }
  auto op = std::make_shared<SemaphoreOp>(ctx, std::move(request), std::move(done));
  op->Start();
}

}  // namespace redlock::internal
