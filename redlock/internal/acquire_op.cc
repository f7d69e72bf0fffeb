#include "redlock/internal/acquire_op.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/attempt_loop.h"
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

struct LockNodeState {
  bool granted = false;            // round 1 set our key on the node
  std::vector<uint64_t> counters;  // fencing round 1
  NodeResult result;               // for the Outcome
  ConnectionId conn = 0;           // where round 1 went (0: not sent)
};

// The fencing counter of each lock key: the namespace's shared one with
// Options::FencingCounters::kShared, unless the shape keeps its own (a
// leader's term); none without fencing.
std::vector<std::string> CounterKeys(const OpContext& ctx, const std::vector<std::string>& keys,
                                     AcquireForm form, const AcquireShape* shape) {
  std::vector<std::string> out;
  if (form != AcquireForm::kFencing) return out;
  const bool own = shape != nullptr && shape->own_counters();
  for (const auto& k : keys) out.push_back(own ? absl::StrCat(k, kFenceSuffix) : ctx.FenceKey(k));
  return out;
}

std::vector<std::string> WithCountersOf(const std::vector<std::string>& keys,
                                        const std::vector<std::string>& counters) {
  std::vector<std::string> out = keys;
  out.insert(out.end(), counters.begin(), counters.end());
  return out;
}

std::vector<std::string> LockKeys(const OpContext& ctx, const AcquireRequest& request) {
  std::vector<std::string> keys;
  for (const auto& r : request.resources) keys.push_back(ctx.Key(r));
  return keys;
}

class AcquireOp : public AttemptLoop<AcquireOp, LockNodeState, std::vector<Lease>> {
 public:
  // `keys`: the lock keys of `request` (LockKeys), made once by the caller.
  AcquireOp(OpContext* ctx, AcquireRequest request, std::vector<std::string> keys,
            LeasesCallback done)
      : AttemptLoop(ctx,
                    {.keys = std::move(keys),
                     .ttl = request.ttl.ttl,
                     .wait = request.wait,
                     .max_attempts = request.max_attempts,
                     .fail_fast_unavailable = request.fail_fast_unavailable,
                     .stop = request.stop},
                    std::move(done)),
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
        drift_(request_.ttl.drift),
        // With Options::durability: without fencing the grant itself waits
        // for the replicas; with fencing the commit does, and its WAIT covers
        // the round-1 SET too.
        confirm_round1_(form_ != AcquireForm::kFencing),
        counters_(CounterKeys(*ctx, keys_, form_, shape_.get())),
        round_(ctx->nodes(), quorum_) {}

  // A request of one resource whose caller takes its one lease: the loop's
  // callback holds only the op (inline in AnyInvocable, no adapter
  // allocated around `done`); the loop runs it once, while the op lives.
  AcquireOp(OpContext* ctx, AcquireRequest request, std::vector<std::string> keys,
            LeaseCallback done)
      : AcquireOp(ctx, std::move(request), std::move(keys),
                  LeasesCallback([this](absl::StatusOr<std::vector<Lease>> r) {
                    LeaseCallback one = std::move(one_done_);
                    one_done_ = nullptr;
                    if (!r.ok()) {
                      one(r.status());
                    } else {
                      one(std::move((*r)[0]));
                    }
                  })) {
    one_done_ = std::move(done);
  }

  void Start() {
    Start(shape_ != nullptr && shape_->shared_wakeups() ? ReleaseWatches::Wakeup::kEveryone
                                                        : ReleaseWatches::Wakeup::kOldest);
  }
  using AttemptLoop::Start;

 private:
  friend AttemptLoop;

  std::string What() const {
    return absl::StrCat("acquire ", DescribeResources(request_.resources));
  }

  Command Round1Command() {
    Command command;
    switch (form_) {
      case AcquireForm::kFencing:
        command = ScriptCommand(FenceAcquireScript(), WithCountersOf(keys_, counters_),
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

  Command Round1Locked() {
    token_ = shape_ != nullptr ? shape_->Token() : NewToken();
    round_ = Round(n(), quorum_);
    return custom_ ? shape_->Round1(keys_, counters_, token_, ttl_ms_) : Round1Command();
  }

  NodeCalls::Judge Round1Judge() const {
    return [form = form_, keys = keys_.size()](const absl::StatusOr<Reply>& r) {
      std::vector<uint64_t> counters;
      return AcquireVote(r, form, keys, &counters);
    };
  }
  bool Round1Durable() const { return confirm_round1_; }

  // The node's vote on round 1 (with Options::durability, once its replicas
  // confirmed the grant, or did not).
  void OnRound1(int attempt, int node, NodeCalls::Answer a) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      LockNodeState& state = nodes_[static_cast<size_t>(node)];
      state.granted =
          AcquireVote(a.reply, form_, keys_.size(), &state.counters).vote == Round::Vote::kYes;
      if (a.unconfirmed) DropUnconfirmedLocked(node, a.connection);
      RecordRound1Locked(node, std::move(a.vote));
    }
    AfterUnlock();
  }

  void RecordRound1Locked(int node, Vote v) {
    LockNodeState& state = nodes_[static_cast<size_t>(node)];
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
      // The tally says "quorum F": say where F comes from.
      FailAttemptLocked(WithFencedQuorumNote(
          round_.Failure(What(), "granted", "held by another client", absl::StatusCode::kAborted),
          quorum_, request_.quorum, ctx_->options().fencing_lost_counters));
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
      for (const LockNodeState& s : nodes_) {
        if (s.granted) seen.push_back(s.counters[j]);
      }
      absl::StatusOr<uint64_t> t = shape_ != nullptr ? shape_->Fence(seen) : NextFence(seen);
      if (!t.ok()) {
        FailAttemptLocked(
            absl::Status(t.status().code(), absl::StrCat(What(), ": ", t.status().message())));
        return;
      }
      fences_.push_back(*t);
      args.push_back(std::to_string(*t));
    }
    for (int i = 0; i < n(); ++i) {
      if (nodes_[static_cast<size_t>(i)].granted) round2_nodes_.push_back(i);
    }
    StartCommitLocked(
        round2_nodes_,
        custom_ ? shape_->Commit(keys_, counters_, token_, fences_)
                : ScriptCommand(FenceCommitScript(), WithCountersOf(keys_, counters_), args),
        "the key");
  }

  void CommittedLocked() { SucceedLocked(fences_); }

  void SucceedLocked(const std::vector<uint64_t>& fences) {
    const Round& decided = fences.empty() ? round_ : commit_round_;
    Clock::TimePoint now = ctx_->clock().Now();
    absl::Duration elapsed = absl::FromChrono(now - start_);
    absl::Duration validity = Validity(request_.ttl.ttl, elapsed, drift_);
    if (validity <= absl::ZeroDuration()) {
      FailAttemptLocked(absl::DeadlineExceededError(absl::StrCat(
          What(), ": ", decided.Summary(fences.empty() ? "granted" : "confirmed", ""),
          " but no validity was left: the attempt took ", absl::FormatDuration(elapsed), " of the ",
          ttl_ms_, "ms ttl (drift allowance ", absl::FormatDuration(drift_), ")")));
      return;
    }
    Clock::TimePoint valid_until = now + absl::ToChronoNanoseconds(validity);
    std::vector<Lease> leases;
    leases.reserve(request_.resources.size());
    for (size_t j = 0; j < request_.resources.size(); ++j) {
      // The connections are set once the fan-out is over (AfterUnlock).
      leases.push_back(LeaseFactory::Make(request_.resources[j], token_, request_.ttl.ttl, start_,
                                          nullptr, valid_until, decided.yes(),
                                          fences.empty() ? 0 : fences[j],
                                          shape_ != nullptr ? shape_->kind() : LeaseKind::kPlain));
    }
    SetResultLocked(std::move(leases), Outcome::Kind::kSucceeded);
  }

  // The loop's hooks (attempt_loop.h).
  int quorum() const { return quorum_; }
  // A failed attempt's grant is removed by its cleanup: for the wait, that
  // node is free.
  bool FreedByCleanupLocked(int node) const { return nodes_[static_cast<size_t>(node)].granted; }
  void FillRelease(KeysRelease* release) const {
    if (custom_) release->command = shape_->Cleanup(keys_, token_);
  }
  static void SetConnections(std::vector<Lease>* leases,
                             std::shared_ptr<std::vector<ConnectionId>> conns) {
    for (Lease& l : *leases) LeaseFactory::SetConnections(&l, conns);
  }
  void FillEvent(const absl::StatusOr<std::vector<Lease>>& result, AcquireEvent* event) const {
    event->resources = request_.resources;
    if (result.ok() && !result->empty()) event->fencing_token = (*result)[0].fencing_token();
  }

  const AcquireRequest request_;
  const std::shared_ptr<const AcquireShape> shape_;  // null: a plain lock
  const bool custom_;                                // shape_ replaces the scripts
  const int64_t ttl_ms_;
  const AcquireForm form_;
  // The grants an attempt needs: the request's quorum, or with fencing F
  // (FencedQuorum), which is also round 2's size and quorum.
  const int quorum_;
  const absl::Duration drift_;
  const bool confirm_round1_;
  // With fencing, the counter key of each lock key (empty without).
  const std::vector<std::string> counters_;

  Round round_;  // round 1's votes, under mu_ as the loop's state
  std::vector<int> round2_nodes_;
  // The caller's callback of a one-resource request (see its constructor).
  LeaseCallback one_done_;
  std::vector<uint64_t> fences_;
};

}  // namespace

namespace {

// StartAcquire's checks and start, with `done` either callback.
template <typename Done>
void Start(OpContext* ctx, AcquireRequest request, Done done) {
  // Every key one call touches must be able to go to every node in one
  // command (a Redis Cluster's keys share a hash slot: scheme.h); refused
  // before anything is sent.
  std::vector<std::string> keys = LockKeys(*ctx, request);
  const AcquireShape* shape = request.shape.get();
  const bool fencing = ctx->options().fencing || (shape != nullptr && shape->force_fencing());
  const std::vector<std::string> counters =
      CounterKeys(*ctx, keys, fencing ? AcquireForm::kFencing : AcquireForm::kScript, shape);
  std::string problem;
  if (shape != nullptr && shape->custom_scripts()) {
    problem = ctx->KeysProblem(shape->Keys(keys, counters));
  } else if (counters.empty()) {
    problem = ctx->KeysProblem(keys);  // no copy of the keys on the plain path
  } else {
    problem = ctx->KeysProblem(WithCountersOf(keys, counters));
  }
  if (!problem.empty()) {
    done(absl::InvalidArgumentError(
        absl::StrCat("acquire ", DescribeResources(request.resources), ": ", problem)));
    return;
  }
  auto op = std::make_shared<AcquireOp>(ctx, std::move(request), std::move(keys), std::move(done));
  op->Start();
}

}  // namespace

void StartAcquire(OpContext* ctx, AcquireRequest request, LeasesCallback done) {
  Start(ctx, std::move(request), std::move(done));
}

void StartAcquireOne(OpContext* ctx, AcquireRequest request, LeaseCallback done) {
  Start(ctx, std::move(request), std::move(done));
}

}  // namespace redlock::internal
