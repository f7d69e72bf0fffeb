// Who polls an engine (docs/design.md 3.2): whoever holds the polling role
// runs the engine's turns (engine.cc) and completes whatever they deliver.
// A synchronous caller that finds nobody polling takes the role and polls
// until its own call completes, so a lone caller costs no thread hand-off;
// a caller that finds someone polling sleeps until the poller completes its
// call. The I/O thread polls whenever callers sleep, and otherwise stays
// off while synchronous callers come and go; there are no hand-offs between
// callers.
//
// Thread-safe.

#ifndef REDLOCK_INTERNAL_POLL_ROLES_H_
#define REDLOCK_INTERNAL_POLL_ROLES_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "redlock/internal/sync_waiter.h"

namespace redlock::internal {

class PollRoles {
 public:
  // What the roles drive: the engine.
  class Driver {
   public:
    virtual ~Driver() = default;
    // One polling turn. REQUIRES: the role is held.
    virtual void Turn() = 0;
    // The user callbacks queued for the I/O thread.
    virtual void RunUserTasks() = 0;
    virtual bool HasUserTasks() const = 0;
    virtual bool stopping() const = 0;
    // Makes the poller's current (or next) wait for events return.
    virtual void Interrupt() = 0;
  };

  explicit PollRoles(Driver* driver) : driver_(*driver) {}

  // Blocks until `waiter` is ready (Blocking::AwaitSync): polls meanwhile,
  // or sleeps while someone else polls.
  void AwaitSync(const std::shared_ptr<SyncWaiter>& waiter);
  // The I/O thread's life until the engine stops.
  void RunIoThread();
  // Wakes the I/O thread if it is off (a user callback to run, a stop).
  void WakeIoThread();
  // Whether the I/O thread should hold the role now (a turn of the I/O
  // thread that is not needed returns at once).
  bool IoThreadShouldPoll() const;
  bool io_polling() const { return io_polling_.load(); }

  // While one lives, the calling thread runs this engine's callbacks
  // (Transport::InTransportThread).
  class Polling {
   public:
    explicit Polling(const PollRoles* roles);
    ~Polling();
    Polling(const Polling&) = delete;
    Polling& operator=(const Polling&) = delete;

   private:
    const void* saved_;
  };
  bool PollingHere() const;
  // The role for the rest of the engine's life (its shutdown).
  std::unique_lock<std::mutex> TakeForGood() { return std::unique_lock<std::mutex>(poll_mu_); }

 private:
  Driver& driver_;
  std::mutex poll_mu_;                   // the polling role
  std::atomic<int> sync_active_{0};      // callers inside AwaitSync
  std::atomic<int> sleepers_{0};         // of them, those sleeping until completed
  std::atomic<bool> io_polling_{false};  // the I/O thread holds poll_mu_
  std::atomic<int64_t> last_sync_end_ns_{0};
  std::mutex mu_;                    // guards the two below
  std::condition_variable idle_cv_;  // the idle I/O thread
  // A lone caller waiting for the I/O thread to give up the polling role.
  std::shared_ptr<SyncWaiter> role_waiter_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_POLL_ROLES_H_
