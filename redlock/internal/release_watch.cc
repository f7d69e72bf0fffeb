#include "redlock/internal/release_watch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"

namespace redlock::internal {

ReleaseWatches::ReleaseWatches(Transport* transport) : transport_(transport) {
  transport_->SetMessageHandler([this](int node, const std::string& channel, const std::string&) {
    OnAnnouncement(node, channel);
  });
}

std::shared_ptr<ReleaseWatches::Watch> ReleaseWatches::Open(const std::vector<std::string>& keys,
                                                            Wakeup wakeup) {
  std::vector<std::string> channels;
  channels.reserve(keys.size());
  for (const auto& k : keys) channels.push_back(absl::StrCat(kReleaseChannelPrefix, k));
  return OpenChannels(std::move(channels), wakeup);
}

std::shared_ptr<ReleaseWatches::Watch> ReleaseWatches::OpenChannels(
    std::vector<std::string> channels, Wakeup wakeup) {
  auto watch = std::make_shared<Watch>(this, channels, transport_->size(), wakeup);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : channels) watches_[c].push_back(watch);
  }
  transport_->Subscribe(channels);
  return watch;
}

void ReleaseWatches::Close(Watch* watch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : watch->channels_) {
      auto it = watches_.find(c);
      if (it == watches_.end()) continue;
      it->second.remove_if([watch](const std::weak_ptr<Watch>& w) {
        auto s = w.lock();
        return s == nullptr || s.get() == watch;
      });
      if (it->second.empty()) watches_.erase(it);
    }
  }
  transport_->Unsubscribe(watch->channels_);
}

void ReleaseWatches::OnAnnouncement(int node, const std::string& channel) {
  std::vector<std::shared_ptr<Watch>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watches_.find(channel);
    if (it == watches_.end()) return;
    for (const auto& w : it->second) {
      if (std::shared_ptr<Watch> s = w.lock()) live.push_back(std::move(s));
    }
  }
  // Every kEveryone watch, and one other: the oldest, or for permits the
  // oldest that is waiting now (the oldest may be trying already).
  std::vector<Watch*> to;
  Watch* one = nullptr;
  for (const auto& w : live) {
    if (w->wakeup_ == Wakeup::kEveryone) {
      to.push_back(w.get());
    } else if (one == nullptr) {
      one = w.get();
    }
  }
  if (one != nullptr && one->wakeup_ == Wakeup::kOldestWaiting && !one->Waiting()) {
    for (const auto& w : live) {
      if (w->wakeup_ == Wakeup::kOldestWaiting && w->Waiting()) {
        one = w.get();
        break;
      }
    }
  }
  if (one != nullptr) to.push_back(one);
  for (Watch* w : to) w->Announce(node);
}

ReleaseWatches::Watch::Watch(ReleaseWatches* owner, std::vector<std::string> channels, int nodes,
                             Wakeup wakeup)
    : owner_(owner),
      channels_(std::move(channels)),
      wakeup_(wakeup),
      announced_at_(static_cast<size_t>(nodes), 0) {}

ReleaseWatches::Watch::~Watch() {
  // A wait still pending here belongs to an operation that has finished
  // (it drops its watch only then): its done_ is dropped unrun.
  owner_->Close(this);
}

bool ReleaseWatches::Watch::Waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<bool>(done_);
}

uint64_t ReleaseWatches::Watch::Mark() {
  std::lock_guard<std::mutex> lock(mu_);
  return seq_;
}

void ReleaseWatches::Watch::Announce(int node) {
  absl::AnyInvocable<void(absl::Status)> fire;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (node < 0 || node >= static_cast<int>(announced_at_.size())) return;
    announced_at_[static_cast<size_t>(node)] = ++seq_;
    fire = TakeIfReadyLocked();
  }
  if (fire) fire(absl::OkStatus());
}

absl::AnyInvocable<void(absl::Status)> ReleaseWatches::Watch::TakeLocked() {
  absl::AnyInvocable<void(absl::Status)> fire = std::move(done_);
  done_ = nullptr;
  ++wait_id_;
  if (timer_ != 0) owner_->transport_->Cancel(timer_);
  timer_ = 0;
  return fire;
}

absl::AnyInvocable<void(absl::Status)> ReleaseWatches::Watch::TakeIfReadyLocked() {
  if (!done_) return nullptr;
  int free = 0;
  for (uint64_t at : announced_at_) free += at > mark_;
  if (free < quorum_) return nullptr;
  return TakeLocked();
}

void ReleaseWatches::Watch::Wait(uint64_t mark, int quorum, absl::Duration max_wait,
                                 absl::AnyInvocable<void(absl::Status)> done) {
  Transport& t = *owner_->transport_;
  std::lock_guard<std::mutex> lock(mu_);
  done_ = std::move(done);
  mark_ = mark;
  quorum_ = quorum;
  const uint64_t id = ++wait_id_;
  std::weak_ptr<Watch> weak = weak_from_this();
  // Never inline (the caller holds its own locks): a wait that is already
  // satisfied completes on the transport's thread at once.
  absl::AnyInvocable<void(absl::Status)> ready = TakeIfReadyLocked();
  if (ready) {
    t.RunAfter(absl::ZeroDuration(),
               [ready = std::move(ready)]() mutable { ready(absl::OkStatus()); });
    return;
  }
  timer_ = t.RunAfter(max_wait, [weak, id] {
    auto self = weak.lock();
    if (self == nullptr) return;
    absl::AnyInvocable<void(absl::Status)> fire;
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (self->wait_id_ != id || !self->done_) return;
      self->timer_ = 0;
      fire = self->TakeLocked();
    }
    fire(absl::DeadlineExceededError("no release announced"));
  });
}

void ReleaseWatches::Watch::Cancel() {
  absl::AnyInvocable<void(absl::Status)> fire;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) return;
    fire = TakeLocked();
  }
  fire(absl::CancelledError("the wait was cancelled"));
}

}  // namespace redlock::internal
