#include "redlock/internal/release_retries.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {

Command ScriptRelease(const KeysRelease& r) {
  if (r.keys.size() != 1) {
    return ScriptCommandOf(ReleaseScript(), r.keys, {r.token, r.channel_prefix});
  }
  // The one key's channel: the prefix and the key.
  std::string channel;
  if (!r.channel_prefix.empty()) channel = absl::StrCat(r.channel_prefix, r.keys[0]);
  return ScriptCommandOf(ReleaseOneScript(), r.keys, {r.token, channel});
}

ReleaseRetries::ReleaseRetries(Transport* transport, const Clock* clock, absl::Duration interval,
                               size_t max_pending, Resend resend)
    : transport_(transport),
      clock_(clock),
      interval_(interval),
      max_pending_(max_pending),
      resend_(std::move(resend)),
      nodes_(static_cast<size_t>(transport->size())) {}

ReleaseRetries::~ReleaseRetries() = default;

void ReleaseRetries::Keep(int node, Pending p, bool answered) {
  const Clock::TimePoint now = clock_->Now();
  if (!answered) {
    // The node may still hold a SET of these keys that it has not run yet
    // (a stopped node runs what its socket holds when it resumes): the keys
    // may live a ttl from now.
    p.until = std::max(p.until, now + absl::ToChronoNanoseconds(p.release->ttl));
  } else if (now >= p.until) {
    return;  // answered with an error, and the keys are gone by now anyway
  }
  std::vector<absl::AnyInvocable<void()>> after_unlock;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    NodeState& s = nodes_[static_cast<size_t>(node)];
    s.pending.push_back(std::move(p));
    if (s.pending.size() > max_pending_) s.pending.pop_front();  // the oldest
    ArmLocked(&after_unlock);
  }
  for (auto& fn : after_unlock) fn();
}

void ReleaseRetries::ArmLocked(std::vector<absl::AnyInvocable<void()>>* after_unlock) {
  if (armed_ || stopped_) return;
  armed_ = true;
  after_unlock->push_back([this] {
    Transport::TimerId id = transport_->RunAfter(interval_, [this] { Retry(); });
    std::lock_guard<std::mutex> lock(mu_);
    timer_ = id;
  });
}

void ReleaseRetries::Retry() {
  std::vector<std::vector<Pending>> batches(nodes_.size());
  const Clock::TimePoint now = clock_->Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
    timer_ = 0;
    if (stopped_) return;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      NodeState& s = nodes_[i];
      if (s.retrying > 0) continue;  // one batch out per node at a time
      while (!s.pending.empty() && batches[i].size() < kBatch) {
        Pending p = std::move(s.pending.front());
        s.pending.pop_front();
        if (now < p.until) batches[i].push_back(std::move(p));
      }
      s.retrying = static_cast<int>(batches[i].size());
    }
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    const int node = static_cast<int>(i);
    for (size_t k = 0; k < batches[i].size(); ++k) {
      ConnectionId conn = resend_(node, batches[i][k], [this, node] {
        std::lock_guard<std::mutex> lock(mu_);
        --nodes_[static_cast<size_t>(node)].retrying;
      });
      if (conn != 0) continue;
      // The node takes no commands now: the rest wait for the next round.
      std::lock_guard<std::mutex> lock(mu_);
      NodeState& s = nodes_[i];
      for (size_t j = batches[i].size(); j > k + 1; --j) {
        s.pending.push_front(std::move(batches[i][j - 1]));
        --s.retrying;
      }
      break;
    }
  }
  std::vector<absl::AnyInvocable<void()>> after_unlock;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool any = false;
    for (const NodeState& s : nodes_) any = any || !s.pending.empty();
    if (any) ArmLocked(&after_unlock);
  }
  for (auto& fn : after_unlock) fn();
}

void ReleaseRetries::AddHealth(std::vector<NodeHealth>* health) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < health->size() && i < nodes_.size(); ++i) {
    (*health)[i].cleanups_pending =
        nodes_[i].pending.size() + static_cast<size_t>(std::max(nodes_[i].retrying, 0));
  }
}

void ReleaseRetries::Shutdown() {
  Transport::TimerId timer = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    for (NodeState& s : nodes_) s.pending.clear();
    timer = std::exchange(timer_, 0);
  }
  if (timer != 0) transport_->Cancel(timer);
}

}  // namespace redlock::internal
