// A fair waiter's place in the queue (fair_op_impl.h): established once a
// quorum holds it, kept alive by the heartbeat (which puts it back where a
// node lost it and hears whether it is first with the lock free), lost when
// it expires or a quorum no longer holds it, and left on every node when
// the call ends without the lock.

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "redlock/internal/fair_op_impl.h"
#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/release_watch.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {
namespace {

using V = Round::Vote;

}  // namespace

// The place is on a quorum now (the first time): the waiter is queued.
// Returns the request's on_queued, to be called without the lock.
std::function<void()> FairOp::NotePlacedLocked() {
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

void FairOp::ArmHeartbeatLocked(absl::Duration after) {
  if (finished_ || transport().stopping()) return;
  std::weak_ptr<FairOp> weak = weak_from_this();
  hb_timer_ = transport().RunAfter(std::max(after, absl::ZeroDuration()), [weak] {
    if (auto self = weak.lock()) self->Heartbeat();
  });
}

void FairOp::Heartbeat() {
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
                       /*durable=*/false, OnNoScript::kResend, [weak, seq, i](NodeCalls::Answer a) {
                         if (auto self = weak.lock()) self->OnHeartbeat(seq, i, std::move(a));
                       });
  }
}

void FairOp::OnHeartbeat(uint64_t seq, int node, NodeCalls::Answer a) {
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
bool FairOp::PlaceLostLocked(absl::Status status) {
  if (result_.has_value() || !done_) return false;
  if (phase_ == Phase::kRound1 || phase_ == Phase::kRound2) AbandonAttemptLocked();
  retry_.reset();
  SetResultLocked(std::move(status), Outcome::Kind::kPlaceLost);
  return true;
}

// What follows a decision made outside an answer (the heartbeat): on the
// transport's thread, as a stop's.
void FairOp::PostAfterUnlock() {
  auto self = shared_from_this();
  transport().RunAfter(absl::ZeroDuration(), [self] { self->AfterUnlock(); });
}

// The call is over (outside mu_, before the user's callback): no more
// heartbeats, and a waiter that did not get the lock leaves the queue.
void FairOp::Finish(bool granted) {
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
      leave->command =
          ScriptCommand(FairLeaveScript(), fair_keys_, {waiter_, std::string(kFairChannelPrefix)});
    }
  }
  if (timer != 0) transport().Cancel(timer);
  // Sent again until answered, or until the place would have expired
  // anyway (NodeCalls::Release).
  if (leave != nullptr) {
    for (int i = 0; i < n(); ++i) ctx_->calls().Release(i, 0, leave);
  }
}

}  // namespace redlock::internal
