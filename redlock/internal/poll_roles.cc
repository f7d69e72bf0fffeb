#include "redlock/internal/poll_roles.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

namespace redlock::internal {
namespace {

int64_t NowNs() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// The idle I/O thread's wake-up time when it sleeps until woken.
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

// The roles whose callbacks the current thread is running, if any.
thread_local const void* t_polling = nullptr;

}  // namespace

PollRoles::PollRoles(Driver* driver, absl::Duration watch_after)
    : driver_(*driver), watch_after_ns_(absl::ToInt64Nanoseconds(watch_after)) {}

PollRoles::Polling::Polling(const PollRoles* roles) : saved_(t_polling) { t_polling = roles; }

PollRoles::Polling::~Polling() { t_polling = saved_; }

bool PollRoles::PollingHere() const { return t_polling == this; }

void PollRoles::WakeIoThread() {
  std::lock_guard<std::mutex> lock(mu_);
  idle_cv_.notify_one();
}

void PollRoles::Kick() {
  // Once until the I/O thread takes the role: later kicks change nothing.
  if (!kicked_.exchange(true)) MaybeWakeIoThread();
}

bool PollRoles::IoThreadKeepsPolling() const {
  // Callers sleep until their calls complete: someone must poll for them.
  // Otherwise a lone synchronous caller polls itself (no hand-off on its
  // fast path); with no call active the I/O thread keeps the role and
  // sleeps in the poll until something happens.
  return sleepers_.load() > 0 || sync_active_.load() == 0;
}

bool PollRoles::IoThreadTakesRole(int64_t now_ns) const {
  if (caller_polls_.load()) return false;  // it wakes us when it lets go
  if (sleepers_.load() > 0) return true;
  // Between the back-to-back calls of a lone caller the role stays free:
  // the caller's next call takes it without a hand-off. The I/O thread
  // takes it for work from outside the calls, or once the engine needs a
  // turn (the time the last caller handed over).
  if (sync_active_.load() > 0) return false;
  return kicked_.load() || now_ns >= next_turn_ns_.load();
}

void PollRoles::IoThreadIdle(std::unique_lock<std::mutex>& lock) {
  for (;;) {
    // Published before looking: whoever changes what is looked at from now
    // on sees that the thread is idle (MaybeWakeIoThread), and wakes it
    // under mu_, which it holds until it sleeps.
    io_idle_until_ns_.store(kForever);
    if (driver_.stopping() || driver_.HasUserTasks()) break;
    const int64_t now = NowNs();
    if (IoThreadTakesRole(now)) break;
    // Until the engine needs a turn; past that (a call is active: its
    // caller polls, and hands over when it leaves), until woken.
    int64_t until = next_turn_ns_.load();
    if (until <= now) until = kForever;
    io_idle_until_ns_.store(until);
    if (until == kForever) {
      idle_cv_.wait(lock);
    } else {
      idle_cv_.wait_until(lock,
                          std::chrono::steady_clock::time_point(std::chrono::nanoseconds(until)));
    }
  }
  io_idle_until_ns_.store(-1);
}

void PollRoles::HandBack() {
  const int64_t next = driver_.NextTurnNs();
  next_turn_ns_.store(std::min(next, NowNs() + watch_after_ns_));
}

void PollRoles::MaybeWakeIoThread() {
  const int64_t until = io_idle_until_ns_.load();
  if (until < 0) return;  // not idle: it looks at everything before it sleeps
  if (!IoThreadTakesRole(NowNs()) && next_turn_ns_.load() >= until) return;
  WakeIoThread();
}

void PollRoles::AwaitSync(const std::shared_ptr<SyncWaiter>& waiter) {
  sync_active_.fetch_add(1);
  while (!waiter->ready() && !driver_.stopping()) {
    std::unique_lock<std::mutex> poll(poll_mu_, std::try_to_lock);
    if (!poll.owns_lock() && sync_active_.load() == 1 && io_polling_.load()) {
      // Alone, but the I/O thread has the role (it served others a moment
      // ago, or the client was idle): ask it to let go (it nudges us when it
      // does), then take over; it may also complete the call meanwhile.
      // Never block on poll_mu_: the I/O thread keeps the role while other
      // callers sleep.
      {
        std::lock_guard<std::mutex> lock(mu_);
        role_waiter_ = waiter;
      }
      driver_.Interrupt();
      waiter->Wait(absl::Milliseconds(1));
      std::lock_guard<std::mutex> lock(mu_);
      if (role_waiter_ == waiter) role_waiter_.reset();
      continue;
    }
    if (poll.owns_lock()) {
      caller_polls_.store(true);
      {
        Polling polling(this);
        while (!waiter->ready() && !driver_.stopping()) driver_.Turn();
        HandBack();
      }
      caller_polls_.store(false);
      poll.unlock();
      // Callers that slept meanwhile: the I/O thread polls for them now.
      if (sleepers_.load() > 0) MaybeWakeIoThread();
      break;
    }
    // Someone polls: it completes this call. Sleep until then. While
    // sleepers_ > 0 the I/O thread polls (woken here if it is idle, or by
    // the caller that polls when it lets go), so the timeout is only a
    // safety net: every timed-out sleep is a context switch that completes
    // nothing (at 2 ms, with 64 callers at N=5 and calls of 4-5 ms, they
    // were a third of the blocking path's switches).
    constexpr absl::Duration kSleeperRecheck = absl::Milliseconds(50);
    sleepers_.fetch_add(1);
    MaybeWakeIoThread();
    waiter->Wait(kSleeperRecheck);
    sleepers_.fetch_sub(1);
  }
  // Shutting down: the I/O thread completes everything with kCancelled.
  waiter->WaitReady();
  sync_active_.fetch_sub(1);
  // The last call out: the I/O thread takes the role when the engine needs
  // a turn (HandBack), at once if work came from outside meanwhile.
  MaybeWakeIoThread();
}

void PollRoles::RunIoThread() {
  while (!driver_.stopping()) {
    driver_.RunUserTasks();
    {
      std::unique_lock<std::mutex> lock(mu_);
      IoThreadIdle(lock);
    }
    if (driver_.stopping() || !IoThreadTakesRole(NowNs())) continue;  // user callbacks, stop
    std::unique_lock<std::mutex> poll(poll_mu_, std::try_to_lock);
    if (!poll.owns_lock()) {
      // A caller took the role a moment ago and has not said so yet.
      std::this_thread::yield();
      continue;
    }
    kicked_.store(false);
    io_polling_.store(true);
    {
      Polling polling(this);
      // Keeps the role across turns while it has work; a lone synchronous
      // caller that wants it gets it at the next turn.
      do {
        driver_.Turn();
        driver_.RunUserTasks();
      } while (!driver_.stopping() && IoThreadKeepsPolling());
      HandBack();
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
