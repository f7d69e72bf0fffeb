#include "redlock/internal/poll_roles.h"

#include <chrono>

#include "absl/time/time.h"

namespace redlock::internal {
namespace {

int64_t NowNs() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// How long the I/O thread stays off polling after a lone synchronous caller
// polled: back-to-back calls of that caller then never need to take the role
// from it.
constexpr int64_t kSyncQuietNs = 1000000;

// The roles whose callbacks the current thread is running, if any.
thread_local const void* t_polling = nullptr;

}  // namespace

PollRoles::Polling::Polling(const PollRoles* roles) : saved_(t_polling) { t_polling = roles; }

PollRoles::Polling::~Polling() { t_polling = saved_; }

bool PollRoles::PollingHere() const { return t_polling == this; }

void PollRoles::WakeIoThread() {
  std::lock_guard<std::mutex> lock(mu_);
  idle_cv_.notify_one();
}

bool PollRoles::IoThreadShouldPoll() const {
  // Callers sleep until their calls complete: someone must poll for them.
  if (sleepers_.load() > 0) return true;
  // A lone synchronous caller polls itself (no hand-off on its fast path),
  // also between its back-to-back calls.
  if (sync_active_.load() > 0) return false;
  return NowNs() - last_sync_end_ns_.load() >= kSyncQuietNs;
}

void PollRoles::AwaitSync(const std::shared_ptr<SyncWaiter>& waiter) {
  sync_active_.fetch_add(1);
  while (!waiter->ready() && !driver_.stopping()) {
    std::unique_lock<std::mutex> poll(poll_mu_, std::try_to_lock);
    if (!poll.owns_lock() && sync_active_.load() == 1 && io_polling_.load()) {
      // Alone, but the I/O thread has the role (it served others a moment
      // ago): ask it to let go (it nudges us when it does), then take over;
      // it may also complete the call meanwhile. Never block on poll_mu_:
      // the I/O thread keeps the role while other callers sleep.
      {
        std::lock_guard<std::mutex> lock(mu_);
        role_waiter_ = waiter;
      }
      driver_.Interrupt();
      WakeIoThread();
      waiter->Wait(absl::Milliseconds(1));
      std::lock_guard<std::mutex> lock(mu_);
      if (role_waiter_ == waiter) role_waiter_.reset();
      continue;
    }
    if (poll.owns_lock()) {
      {
        Polling polling(this);
        while (!waiter->ready() && !driver_.stopping()) driver_.Turn();
      }
      poll.unlock();
      // Callers that slept meanwhile: the I/O thread polls for them now.
      if (sleepers_.load() > 0) WakeIoThread();
      break;
    }
    // Someone polls: it completes this call. Sleep until then. While
    // sleepers_ > 0 the I/O thread polls, and it looks for sleepers at
    // least every millisecond when it is idle or a caller has the role, so
    // the timeout is only a safety net: every timed-out sleep is a context
    // switch that completes nothing (at 2 ms, with 64 callers at N=5 and
    // calls of 4-5 ms, they were a third of the blocking path's switches).
    constexpr absl::Duration kSleeperRecheck = absl::Milliseconds(50);
    sleepers_.fetch_add(1);
    // The I/O thread may be idle (a caller polls, or nobody does): it
    // polls for sleepers. Under mu_, so the wake-up cannot be lost.
    if (!io_polling_.load()) WakeIoThread();
    waiter->Wait(kSleeperRecheck);
    sleepers_.fetch_sub(1);
  }
  // Shutting down: the I/O thread completes everything with kCancelled.
  waiter->WaitReady();
  last_sync_end_ns_.store(NowNs());
  sync_active_.fetch_sub(1);
}

void PollRoles::RunIoThread() {
  while (!driver_.stopping()) {
    driver_.RunUserTasks();
    if (!IoThreadShouldPoll()) {
      std::unique_lock<std::mutex> lock(mu_);
      idle_cv_.wait_for(lock, std::chrono::milliseconds(1), [&] {
        return driver_.HasUserTasks() || driver_.stopping() || sleepers_.load() > 0;
      });
      continue;
    }
    std::unique_lock<std::mutex> poll(poll_mu_, std::try_to_lock);
    if (!poll.owns_lock()) {
      // A caller polls; it wakes us when it leaves callers behind.
      std::unique_lock<std::mutex> lock(mu_);
      idle_cv_.wait_for(lock, std::chrono::milliseconds(1),
                        [&] { return driver_.HasUserTasks() || driver_.stopping(); });
      continue;
    }
    io_polling_.store(true);
    {
      Polling polling(this);
      // Keeps the role across turns while it has work; a lone synchronous
      // caller that wants it gets it at the next turn.
      do {
        driver_.Turn();
        driver_.RunUserTasks();
      } while (!driver_.stopping() && IoThreadShouldPoll());
    }
    io_polling_.store(false);
    poll.unlock();
    std::lock_guard<std::mutex> lock(mu_);
    if (role_waiter_ != nullptr) {
      role_waiter_->Nudge();
      role_waiter_.reset();
    }
  }
}

}  // namespace redlock::internal
