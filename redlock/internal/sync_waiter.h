// How a synchronous caller waits: a one-shot completion on a futex word
// (SyncWaiter), and the interface of a transport that lets a caller wait
// for one (Blocking: the real engine lets the caller poll meanwhile).

#ifndef REDLOCK_INTERNAL_SYNC_WAITER_H_
#define REDLOCK_INTERNAL_SYNC_WAITER_H_

#include <time.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"

namespace redlock::internal {

// A one-shot completion a blocked caller waits on, with a "nudge" that wakes
// it without completing it (used to hand the polling role to it).
class SyncWaiter : public std::enable_shared_from_this<SyncWaiter> {
 public:
  virtual ~SyncWaiter() = default;
  bool ready() const { return (state_.load(std::memory_order_acquire) & kReady) != 0; }
  // Marks the wait complete and wakes the waiter. Publishes every write made
  // before it to the waiter.
  void SetReady();
  // Wakes the waiter without completing it.
  void Nudge();
  // Blocks until ready, nudged (the nudge is consumed) or `timeout` passed.
  void Wait(absl::Duration timeout);
  // Blocks until ready.
  void WaitReady();

  // While one lives on a thread, the wake-ups SetReady would make there wait
  // until it goes (a poller wakes the callers it completed at the end of its
  // turn, not in the middle of it: a woken caller tends to preempt it).
  class DeferWakes {
   public:
    DeferWakes();
    ~DeferWakes();
    DeferWakes(const DeferWakes&) = delete;
    DeferWakes& operator=(const DeferWakes&) = delete;
    // Makes the deferred wake-ups now.
    void Flush();

   private:
    std::vector<std::shared_ptr<SyncWaiter>> pending_;
    std::vector<std::shared_ptr<SyncWaiter>>* saved_;
  };

 protected:
  // Makes a waiter that is ready, and held by no one but its owner, new
  // again (Waiter::Recycle).
  void Rearm() { state_.store(0, std::memory_order_relaxed); }

 private:
  static constexpr uint32_t kReady = 1;
  static constexpr uint32_t kNudged = 2;
  static constexpr uint32_t kSleeping = 4;  // the waiter is (about to be) in futex_wait
  void Wake();
  void Sleep(const timespec* timeout);
  std::atomic<uint32_t> state_{0};
};

// Marks the calling thread as inside a synchronous call, from before it
// starts the call's operation until the call returns: what the thread sends
// and arms meanwhile is polled by the caller itself (Blocking::AwaitSync),
// so it does not wake the I/O thread the way an asynchronous start does
// (poll_roles.h). Nests.
class SyncCallScope {
 public:
  SyncCallScope();
  ~SyncCallScope();
  SyncCallScope(const SyncCallScope&) = delete;
  SyncCallScope& operator=(const SyncCallScope&) = delete;
  static bool Active();

 private:
  bool saved_;
};

// A transport a synchronous caller can wait on (the engine; fakes of unit
// tests, which are driven by the test's own thread, are not one).
class Blocking {
 public:
  virtual ~Blocking() = default;
  // Blocks the calling thread until `waiter` is ready. The real engine lets
  // the caller do the polling meanwhile (so a lone synchronous call costs no
  // thread hand-off); `waiter` is completed by a callback of the operation.
  virtual void AwaitSync(const std::shared_ptr<SyncWaiter>& waiter) = 0;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SYNC_WAITER_H_
