#include "redlock/internal/fair_op.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/attempt_loop.h"
#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/lease_factory.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/outcome_payload.h"
#include "redlock/internal/release_watch.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/token.h"
#include "redlock/observer.h"

namespace redlock::internal {

absl::StatusOr<absl::Duration> CheckPlaceTtl(absl::Duration place_ttl, const Options& options) {
  if (place_ttl == absl::ZeroDuration()) return kDefaultPlaceTtl;
  const absl::Duration floor = std::max(kMinPlaceTtl, 3 * options.node_timeout);
  if (place_ttl < floor || place_ttl > absl::Milliseconds(kMaxTtlMs)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "place_ttl ", absl::FormatDuration(place_ttl), " is out of range: at least ",
        absl::FormatDuration(floor), " (30ms and 3 x node_timeout, so that a heartbeat every ",
        "third of it can come back), at most 2^40 ms"));
  }
  return absl::Milliseconds(absl::ToInt64Milliseconds(place_ttl));
}

namespace {

using V = Round::Vote;

absl::StatusOr<uint64_t> ParseTicket(const Reply& r) {
  uint64_t t = 0;
  if (r.type != Reply::Type::kString || !absl::SimpleAtoi(r.str, &t)) {
    return absl::InternalError(absl::StrCat("a ticket that is no number: ", r.Describe()));
  }
  return t;
}

}  // namespace

Vote FairVote(const absl::StatusOr<Reply>& r, bool fencing, FairReply* out) {
  *out = FairReply{};
  if (!r.ok()) {
    return Vote{absl::IsCancelled(r.status()) ? V::kCancelled : V::kUnavailable,
                std::string(r.status().message())};
  }
  if (r->is_error()) return Vote{VoteForErrorReply(r->str), r->str};
  const Reply& reply = *r;
  if (reply.type != Reply::Type::kArray || reply.elements.size() < 2 ||
      reply.elements[0].type != Reply::Type::kInteger) {
    return Vote{V::kInternal, absl::StrCat("unexpected reply ", reply.Describe())};
  }
  const int64_t code = reply.elements[0].integer;
  absl::StatusOr<uint64_t> max = ParseTicket(reply.elements[1]);
  if (!max.ok()) return Vote{V::kInternal, std::string(max.status().message())};
  out->code = code;
  out->max_ticket = *max;
  if (code < 0 && code >= -3 && reply.elements.size() == 2) return Vote{V::kRefused, ""};
  if (code == 1 && reply.elements.size() == (fencing ? 3u : 2u)) {
    if (!fencing) return Vote{V::kYes, ""};
    absl::StatusOr<uint64_t> c = ParseCounter(reply.elements[2].str);
    // The key was set: it goes with the attempt's cleanup.
    if (!c.ok()) return Vote{V::kInternal, std::string(c.status().message())};
    out->counter = *c;
    return Vote{V::kYes, ""};
  }
  out->code = 0;
  return Vote{V::kInternal, absl::StrCat("unexpected reply ", reply.Describe())};
}

namespace {

struct FairNodeState {
  bool granted = false;   // this attempt set the lock key there
  uint64_t counter = 0;   // with fencing, read by the grant
  NodeResult result;      // for the Outcome
  ConnectionId conn = 0;  // where the attempt went (0: not sent)
};

enum class Stage : int { kProbe, kRegister, kQueued };

class FairOp : public AttemptLoop<FairOp, FairNodeState, Lease> {
 public:
  // `waiter`: this call's id in the queue (a fresh token).
  FairOp(OpContext* ctx, FairRequest request, std::string waiter, FairCallback done)
      : AttemptLoop(ctx,
                    {.keys = {ctx->Key(request.resource)},
                     .ttl = request.ttl.ttl,
                     .wait = request.wait,
                     .max_attempts = 1,
                     .stop = request.stop,
                     // Its own channel: only the head is woken.
                     .watch_channels = {absl::StrCat(kFairChannelPrefix, ctx->Key(request.resource),
                                                     ":", waiter)}},
                    [this, done = std::move(done)](absl::StatusOr<Lease> r) mutable {
                      Finish(r.ok());
                      done(std::move(r));
                    }),
        request_(std::move(request)),
        key_(keys_[0]),
        fair_keys_(FairKeys(key_)),
        fencing_(ctx->options().fencing),
        counter_(fencing_ ? ctx->FenceKey(key_) : std::string()),
        waiter_(std::move(waiter)),
        quorum_(fencing_ ? FencedQuorum(ctx->nodes(), request_.quorum,
                                        ctx->options().fencing_lost_counters)
                         : request_.quorum),
        place_quorum_(request_.quorum),
        ttl_ms_(request_.ttl.ms),
        drift_(request_.ttl.drift),
        place_ttl_(request_.place_ttl),
        place_drift_(DriftAllowance(place_ttl_, ctx->options())),
        period_(std::max(place_ttl_ / 3, absl::Milliseconds(1))),
        placed_(static_cast<size_t>(ctx->nodes()), false),
        absent_(static_cast<size_t>(ctx->nodes()), false),
        round_(ctx->nodes(), quorum_) {}

  void Start() { AttemptLoop::Start(ReleaseWatches::Wakeup::kOldest); }

 private:
  friend AttemptLoop;

  std::string What() const { return absl::StrCat("fair acquire \"", request_.resource, "\""); }

  std::vector<std::string> ScriptKeys() const {
    std::vector<std::string> k = fair_keys_;
    if (fencing_) k.push_back(counter_);
    return k;
  }

  // ---- The attempts -------------------------------------------------------------------

  Command Round1Locked() {
    token_ = absl::StrCat(NewToken(), ".", waiter_);
    round_ = Round(n(), quorum_);
    if (stage_ == Stage::kProbe && wait_.has_value() && probe_reads_ >= place_quorum_) {
      // The probe read a quorum's highest tickets: one above them is this
      // waiter's (docs/design.md 5.17: any place a quorum held before the
      // probe began is among them).
      ticket_ = std::min(probe_max_ + 1, kMaxTicket);
      stage_ = Stage::kRegister;
    }
    attempt_stage_.store(stage_, std::memory_order_relaxed);
    const std::string prefix(kFairChannelPrefix);
    switch (stage_) {
      case Stage::kProbe:
        probe_reads_ = 0;
        probe_max_ = 0;
        return ScriptCommand(FairProbeScript(), ScriptKeys(),
                             {token_, std::to_string(ttl_ms_), prefix});
      case Stage::kRegister:
        register_sent_ = true;
        return ScriptCommand(
            FairRegisterScript(), ScriptKeys(),
            {token_, std::to_string(ttl_ms_), prefix, waiter_, std::to_string(ticket_),
             std::to_string(absl::ToInt64Milliseconds(place_ttl_))});
      case Stage::kQueued:
        break;
    }
    return ScriptCommand(FairAcquireScript(), ScriptKeys(),
                         {token_, std::to_string(ttl_ms_), prefix, waiter_});
  }

  NodeCalls::Judge Round1Judge() const {
    const Stage stage = attempt_stage_.load(std::memory_order_relaxed);
    return [stage, fencing = fencing_](const absl::StatusOr<Reply>& r) {
      FairReply f;
      Vote v = FairVote(r, fencing, &f);
      // A place taken is a write the durability vote must confirm as much
      // as a grant: the order rests on it.
      if (stage == Stage::kRegister && v.vote == V::kRefused) return Vote{V::kYes, ""};
      return v;
    };
  }
  // As the mutex: the grant waits for the replicas unless the fencing commit
  // does; a registration always does.
  bool Round1Durable() const {
    return !fencing_ || attempt_stage_.load(std::memory_order_relaxed) == Stage::kRegister;
  }

  void OnRound1(int attempt, int node, NodeCalls::Answer a) {
    std::function<void()> queued;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempt != attempt_) return;
      FairNodeState& s = nodes_[static_cast<size_t>(node)];
      // The reply may come before the fan-out loop stored the connection.
      if (s.conn == 0) s.conn = a.connection;
      const Stage stage = attempt_stage_.load(std::memory_order_relaxed);
      FairReply f;
      const Vote decoded = FairVote(a.reply, fencing_, &f);
      const bool valid = decoded.vote == V::kYes || decoded.vote == V::kRefused;
      if (valid && stage == Stage::kProbe) {
        ++probe_reads_;
        probe_max_ = std::max(probe_max_, f.max_ticket);
      }
      if (valid && f.code == -3) absent_[static_cast<size_t>(node)] = true;
      // a.vote: the judge's, or (durable) the confirmation's.
      const bool confirmed = a.vote.vote == V::kYes;
      if (stage == Stage::kRegister && confirmed) {
        placed_[static_cast<size_t>(node)] = true;
        absent_[static_cast<size_t>(node)] = false;
        queued = NotePlacedLocked();
      }
      s.granted = confirmed && f.code == 1;
      s.counter = f.counter;
      if (a.unconfirmed) DropUnconfirmedLocked(node, a.connection);
      Vote v;
      if (s.granted) {
        v = Vote{V::kYes, ""};
      } else if (!confirmed) {
        v = std::move(a.vote);  // refused, an error, or replicas that did not confirm
      } else {
        v = Vote{V::kRefused, ""};  // a confirmed place, not the lock
      }
      RecordRound1Locked(node, std::move(v));
    }
    if (queued) queued();
    AfterUnlock();
  }

  void RecordRound1Locked(int node, Vote v) {
    FairNodeState& s = nodes_[static_cast<size_t>(node)];
    RecordAnswer(v, absl::FromChrono(ctx_->clock().Now() - start_), &s.result);
    if (phase_ != Phase::kRound1) {
      // Decided already: a late grant of a failed attempt is removed by its
      // cleanup (for the wait, that node is free); one of a success goes
      // with the lease.
      if (failed_ && s.granted) freed_.push_back(node);
      return;
    }
    const Round::Outcome outcome = round_.Record(transport().NodeName(node), v.vote, v.detail);
    if (outcome == Round::Outcome::kSucceeded) {
      if (fencing_) {
        StartRound2Locked();
      } else {
        SucceedLocked(0);
      }
    } else if (outcome == Round::Outcome::kFailed) {
      absl::Status st = round_.Failure(What(), "granted", "held, or another waiter is first",
                                       absl::StatusCode::kAborted);
      if (quorum_ != request_.quorum) {
        st =
            absl::Status(st.code(), absl::StrCat(st.message(), "; fenced acquisitions need ",
                                                 quorum_, " nodes (Options::fencing_lost_counters ",
                                                 ctx_->options().fencing_lost_counters, ")"));
      }
      FailAttemptLocked(std::move(st));
    }
  }

  // The place is on a quorum now (the first time): the waiter is queued.
  // Returns the request's on_queued, to be called without the lock.
  std::function<void()> NotePlacedLocked() {
    if (established_) return nullptr;
    int placed = 0;
    for (bool p : placed_) placed += p ? 1 : 0;
    if (placed < place_quorum_) return nullptr;
    established_ = true;
    stage_ = Stage::kQueued;
    confirmed_ = true;
    // Valid from the registration's start, as a lease from its attempt's.
    place_valid_until_ = start_ + absl::ToChronoNanoseconds(place_ttl_ - place_drift_);
    ArmHeartbeatLocked(period_);
    // Late answers of a call that is over already: it is told nothing more.
    if (result_.has_value() || finished_) return nullptr;
    return request_.on_queued;
  }

  void StartRound2Locked() {
    round2_nodes_.clear();
    std::vector<uint64_t> seen;
    for (int i = 0; i < n(); ++i) {
      const FairNodeState& s = nodes_[static_cast<size_t>(i)];
      if (s.granted) {
        round2_nodes_.push_back(i);
        seen.push_back(s.counter);
      }
    }
    // A writer's token (odd, WriterFence): the counter W:fence is the one a
    // reader-writer lock of the same name shares, and a fair holder
    // excludes its readers as a writer does.
    absl::StatusOr<uint64_t> t = WriterFence(seen);
    if (!t.ok()) {
      FailAttemptLocked(
          absl::Status(t.status().code(), absl::StrCat(What(), ": ", t.status().message())));
      return;
    }
    fence_ = *t;
    StartCommitLocked(
        round2_nodes_,
        ScriptCommand(FenceCommitScript(), {key_, counter_}, {token_, std::to_string(fence_)}),
        "the key");
  }

  void CommittedLocked() { SucceedLocked(fence_); }

  void SucceedLocked(uint64_t fence) {
    const Round& decided = fencing_ ? commit_round_ : round_;
    const Clock::TimePoint now = ctx_->clock().Now();
    const absl::Duration elapsed = absl::FromChrono(now - start_);
    const absl::Duration validity = Validity(request_.ttl.ttl, elapsed, drift_);
    if (validity <= absl::ZeroDuration()) {
      FailAttemptLocked(absl::DeadlineExceededError(absl::StrCat(
          What(), ": ", decided.Summary(fencing_ ? "confirmed" : "granted", ""),
          " but no validity was left: the attempt took ", absl::FormatDuration(elapsed), " of the ",
          ttl_ms_, "ms ttl (drift allowance ", absl::FormatDuration(drift_), ")")));
      return;
    }
    const Clock::TimePoint valid_until = now + absl::ToChronoNanoseconds(validity);
    SetResultLocked(LeaseFactory::Make(request_.resource, token_, request_.ttl.ttl, start_, nullptr,
                                       valid_until, decided.yes(), fence, LeaseKind::kFair),
                    Outcome::Kind::kSucceeded);
  }

  // The pause before the next attempt. A waiter whose probe read a quorum
  // takes its place at once; one that is queued tries only when woken (its
  // channel, its heartbeat, the nodes its own cleanup frees), or at the end
  // of the wait; a long safety pause bounds a wake-up that never comes.
  // Without announcements, or while nodes keep it from its place, it polls
  // as the mutex does.
  absl::Duration RetryDelayLocked(absl::Duration policy) const {
    if (stage_ == Stage::kProbe && probe_reads_ >= place_quorum_) return absl::ZeroDuration();
    if (watch_ == nullptr || stage_ != Stage::kQueued) return policy;
    return std::min(attempts_.Left(), 10 * place_ttl_);
  }

  // ---- The heartbeat ------------------------------------------------------------------

  void ArmHeartbeatLocked(absl::Duration after) {
    if (finished_ || transport().stopping()) return;
    std::weak_ptr<FairOp> weak = weak_from_this();
    hb_timer_ = transport().RunAfter(std::max(after, absl::ZeroDuration()), [weak] {
      if (auto self = weak.lock()) self->Heartbeat();
    });
  }

  void Heartbeat() {
    uint64_t seq = 0;
    std::vector<bool> readd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hb_timer_ = 0;
      if (finished_ || result_.has_value() || transport().stopping()) return;
      const Clock::TimePoint now = ctx_->clock().Now();
      if (now >= place_valid_until_) {
        // Paused, or cut off from the nodes, for longer than the place
        // lives: it may be gone, and another waiter served.
        if (PlaceLostLocked(absl::AbortedError(absl::StrCat(
                What(), ": the waiter's place in the queue expired (no heartbeat confirmed by a ",
                "quorum within place_ttl ", absl::FormatDuration(place_ttl_),
                "; the process was paused or the nodes unreachable)")))) {
          PostAfterUnlock();
        }
        return;
      }
      seq = ++hb_seq_;
      hb_start_ = now;
      hb_present_ = hb_absent_ = hb_answered_ = 0;
      hb_confirmed_ = false;
      for (int i = 0; i < n(); ++i) {
        // Put back only where a node lost it while a quorum kept it.
        readd.push_back(confirmed_ && absent_[static_cast<size_t>(i)]);
      }
    }
    const std::string place_ms = std::to_string(absl::ToInt64Milliseconds(place_ttl_));
    Command keep = ScriptCommand(
        FairRefreshScript(), fair_keys_,
        {std::string(kFairChannelPrefix), waiter_, std::to_string(ticket_), place_ms, "0"});
    keep.op = "fair-heartbeat";
    Command put_back = ScriptCommand(
        FairRefreshScript(), fair_keys_,
        {std::string(kFairChannelPrefix), waiter_, std::to_string(ticket_), place_ms, "1"});
    put_back.op = "fair-heartbeat";
    static const NodeCalls::Judge kAnyAnswer = [](const absl::StatusOr<Reply>&) {
      return Vote{V::kYes, ""};
    };
    std::weak_ptr<FairOp> weak = weak_from_this();
    for (int i = 0; i < n(); ++i) {
      ctx_->calls().Send(i, readd[static_cast<size_t>(i)] ? put_back : keep, kAnyAnswer,
                         /*durable=*/false, OnNoScript::kResend,
                         [weak, seq, i](NodeCalls::Answer a) {
                           if (auto self = weak.lock()) self->OnHeartbeat(seq, i, std::move(a));
                         });
    }
  }

  void OnHeartbeat(uint64_t seq, int node, NodeCalls::Answer a) {
    std::shared_ptr<ReleaseWatches::Watch> wake;
    bool lost = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (seq != hb_seq_ || finished_) return;
      ++hb_answered_;
      const absl::StatusOr<Reply>& r = a.reply;
      if (r.ok() && r->type == Reply::Type::kArray && r->elements.size() == 2 &&
          r->elements[0].type == Reply::Type::kInteger &&
          r->elements[1].type == Reply::Type::kInteger) {
        const size_t i = static_cast<size_t>(node);
        if (r->elements[0].integer == 0) {
          absent_[i] = true;
          placed_[i] = false;
          ++hb_absent_;
        } else {
          absent_[i] = false;
          placed_[i] = true;
          ++hb_present_;
        }
        // First and the lock free there: worth an attempt (counted as an
        // announcement of that node).
        if (r->elements[1].integer == 1) wake = watch_;
      }
      if (!hb_confirmed_ && hb_present_ >= place_quorum_) {
        hb_confirmed_ = true;
        confirmed_ = true;
        place_valid_until_ = hb_start_ + absl::ToChronoNanoseconds(place_ttl_ - place_drift_);
      }
      if (hb_absent_ >= n() - place_quorum_ + 1) {
        confirmed_ = false;
        lost = PlaceLostLocked(absl::AbortedError(
            absl::StrCat(What(), ": the waiter's place in the queue was removed (", hb_absent_,
                         " of ", n(), " nodes no longer hold it; quorum ", place_quorum_, ")")));
      }
      if (hb_answered_ == n() && !lost) {
        const absl::Duration since = absl::FromChrono(ctx_->clock().Now() - hb_start_);
        ArmHeartbeatLocked(period_ - since);
      }
    }
    if (wake != nullptr) wake->Freed(node);
    if (lost) PostAfterUnlock();
  }

  // Ends the call with the lost place, unless it is decided already (a grant
  // that came first stands). The attempt in flight is released behind its
  // commands.
  bool PlaceLostLocked(absl::Status status) {
    if (result_.has_value() || !done_) return false;
    if (phase_ == Phase::kRound1 || phase_ == Phase::kRound2) AbandonAttemptLocked();
    retry_.reset();
    SetResultLocked(std::move(status), Outcome::Kind::kPlaceLost);
    return true;
  }

  // What follows a decision made outside an answer (the heartbeat): on the
  // transport's thread, as a stop's.
  void PostAfterUnlock() {
    auto self = shared_from_this();
    transport().RunAfter(absl::ZeroDuration(), [self] { self->AfterUnlock(); });
  }

  // The call is over (outside mu_, before the user's callback): no more
  // heartbeats, and a waiter that did not get the lock leaves the queue.
  void Finish(bool granted) {
    std::shared_ptr<KeysRelease> leave;
    Transport::TimerId timer = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
      ++hb_seq_;
      timer = std::exchange(hb_timer_, 0);
      if (!granted && register_sent_ && !transport().stopping()) {
        leave = std::make_shared<KeysRelease>();
        leave->keys = fair_keys_;
        leave->token = waiter_;
        leave->ttl = place_ttl_;
        leave->expires = ctx_->clock().Now() + absl::ToChronoNanoseconds(place_ttl_);
        leave->command = ScriptCommand(FairLeaveScript(), fair_keys_,
                                       {waiter_, std::string(kFairChannelPrefix)});
      }
    }
    if (timer != 0) transport().Cancel(timer);
    // Sent again until answered, or until the place would have expired
    // anyway (NodeCalls::Release).
    if (leave != nullptr) {
      for (int i = 0; i < n(); ++i) ctx_->calls().Release(i, 0, leave);
    }
  }

  // ---- The loop's hooks (attempt_loop.h) ----------------------------------------------

  int quorum() const { return quorum_; }
  bool FreedByCleanupLocked(int node) const { return nodes_[static_cast<size_t>(node)].granted; }
  // A failed attempt's cleanup keeps the place (fair-release, "cleanup").
  void FillRelease(KeysRelease* release) const {
    release->command = ScriptCommand(FairReleaseScript(), fair_keys_,
                                     {token_, std::string(kFairChannelPrefix), "cleanup"});
  }
  static void SetConnections(Lease* lease, std::shared_ptr<std::vector<ConnectionId>> conns) {
    LeaseFactory::SetConnections(lease, std::move(conns));
  }
  void FillEvent(const absl::StatusOr<Lease>& result, AcquireEvent* event) const {
    event->resources = {request_.resource};
    if (result.ok()) event->fencing_token = result->fencing_token();
  }

  const FairRequest request_;
  const std::string key_;
  const std::vector<std::string> fair_keys_;  // W, its queue, the places' expiries
  const bool fencing_;
  const std::string counter_;  // with fencing
  const std::string waiter_;   // this call's id in the queue
  // Grants an attempt needs (F with fencing), and places a registration or
  // heartbeat needs (the request's quorum: a majority).
  const int quorum_;
  const int place_quorum_;
  const int64_t ttl_ms_;
  const absl::Duration drift_;
  const absl::Duration place_ttl_;
  const absl::Duration place_drift_;
  const absl::Duration period_;  // between heartbeats

  // Under mu_, as the loop's state.
  Stage stage_ = Stage::kProbe;
  // The stage of the attempt in flight (read by its fan-out without mu_).
  std::atomic<Stage> attempt_stage_{Stage::kProbe};
  int probe_reads_ = 0;     // answers to the last probe
  uint64_t probe_max_ = 0;  // the highest ticket they gave
  uint64_t ticket_ = 0;
  bool register_sent_ = false;
  bool established_ = false;  // the place reached a quorum
  // The last registration or heartbeat that reached a quorum confirmed the
  // place: a node that lost it may put it back.
  bool confirmed_ = false;
  Clock::TimePoint place_valid_until_{};
  std::vector<bool> placed_;  // per node: holds the place, as last heard
  std::vector<bool> absent_;  // per node: said the place is not there
  Round round_;
  std::vector<int> round2_nodes_;
  uint64_t fence_ = 0;
  bool finished_ = false;
  // The heartbeat: its timer, and the round in flight.
  Transport::TimerId hb_timer_ = 0;
  uint64_t hb_seq_ = 0;
  Clock::TimePoint hb_start_{};
  int hb_present_ = 0, hb_absent_ = 0, hb_answered_ = 0;
  bool hb_confirmed_ = false;
};

}  // namespace

void StartFairAcquire(OpContext* ctx, FairRequest request, FairCallback done) {
  // The lock key, its queue, the expiries (and the counter) go in one
  // script: every node must take them in one command (a Redis Cluster's
  // keys share a hash slot: scheme.h); refused before anything is sent.
  const std::string key = ctx->Key(request.resource);
  std::vector<std::string> keys = FairKeys(key);  // the lock key first
  if (ctx->options().fencing) keys.push_back(ctx->FenceKey(key));
  const std::string problem = ctx->KeysProblem(keys);
  if (!problem.empty()) {
    done(absl::InvalidArgumentError(
        absl::StrCat("fair acquire \"", request.resource, "\": ", problem)));
    return;
  }
  auto op = std::make_shared<FairOp>(ctx, std::move(request), NewToken(), std::move(done));
  op->Start();
}

}  // namespace redlock::internal
