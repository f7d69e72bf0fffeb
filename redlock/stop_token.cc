#include "redlock/stop_token.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace redlock {
namespace internal {

class StopState {
 public:
  bool stop_requested() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  }

  bool RequestStop() {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) return false;
    stopped_ = true;
    runner_ = std::this_thread::get_id();
    // Callbacks run one by one outside the mutex; each is taken out first,
    // so one that unregisters itself (or another) does not deadlock.
    while (!callbacks_.empty()) {
      auto it = callbacks_.begin();
      running_ = it->first;
      absl::AnyInvocable<void()> fn = std::move(it->second);
      callbacks_.erase(it);
      lock.unlock();
      fn();
      lock.lock();
      running_ = 0;
      done_cv_.notify_all();
    }
    return true;
  }

  // 0 when already stopped (then `fn` is left alone: the caller runs it).
  uint64_t Register(absl::AnyInvocable<void()>& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return 0;
    uint64_t id = ++next_id_;
    callbacks_.emplace(id, std::move(fn));
    return id;
  }

  void Unregister(uint64_t id) {
    std::unique_lock<std::mutex> lock(mu_);
    if (callbacks_.erase(id) > 0) return;
    // Running, or already run: wait only if it runs now on another thread.
    if (runner_ == std::this_thread::get_id()) return;
    done_cv_.wait(lock, [&] { return running_ != id; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool stopped_ = false;
  uint64_t next_id_ = 0;
  uint64_t running_ = 0;
  std::thread::id runner_;
  std::map<uint64_t, absl::AnyInvocable<void()>> callbacks_;
};

}  // namespace internal

bool StopToken::stop_requested() const { return state_ != nullptr && state_->stop_requested(); }

StopSource::StopSource() : state_(std::make_shared<internal::StopState>()) {}

bool StopSource::RequestStop() { return state_->RequestStop(); }

bool StopSource::stop_requested() const { return state_->stop_requested(); }

StopCallback::StopCallback(const StopToken& token, absl::AnyInvocable<void()> fn)
    : state_(token.state_) {
  if (state_ == nullptr) return;
  id_ = state_->Register(fn);
  if (id_ == 0) {
    fn();
    state_.reset();
  }
}

StopCallback::~StopCallback() {
  if (state_ != nullptr) state_->Unregister(id_);
}

}  // namespace redlock
