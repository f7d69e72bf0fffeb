// A fair acquisition's attempts (fair_op_impl.h): each stage's round to
// every node (the probe that reads the highest tickets, the registration
// that takes a ticket one above them, the queued head's try for the lock),
// the answers that count the place and the grants, the fencing commit and
// the grant's validity, and the pause before the next attempt (a queued
// waiter waits for its wake-up: its channel, its heartbeat).

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "redlock/internal/fair_op_impl.h"
#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/lease_factory.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/token.h"

namespace redlock::internal {
namespace {

using V = Round::Vote;

}  // namespace

std::vector<std::string> FairOp::ScriptKeys() const {
  std::vector<std::string> k = fair_keys_;
  if (fencing_) k.push_back(counter_);
  return k;
}

Command FairOp::Round1Locked() {
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

NodeCalls::Judge FairOp::Round1Judge() const {
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
bool FairOp::Round1Durable() const {
  return !fencing_ || attempt_stage_.load(std::memory_order_relaxed) == Stage::kRegister;
}

void FairOp::OnRound1(int attempt, int node, NodeCalls::Answer a) {
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

void FairOp::RecordRound1Locked(int node, Vote v) {
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
    FailAttemptLocked(
        WithFencedQuorumNote(round_.Failure(What(), "granted", "held, or another waiter is first",
                                            absl::StatusCode::kAborted),
                             quorum_, request_.quorum, ctx_->options().fencing_lost_counters));
  }
}

void FairOp::StartRound2Locked() {
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

void FairOp::SucceedLocked(uint64_t fence) {
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
absl::Duration FairOp::RetryDelayLocked(absl::Duration policy) const {
  if (stage_ == Stage::kProbe && probe_reads_ >= place_quorum_) return absl::ZeroDuration();
  if (watch_ == nullptr || stage_ != Stage::kQueued) return policy;
  return std::min(attempts_.Left(), 10 * place_ttl_);
}

}  // namespace redlock::internal
