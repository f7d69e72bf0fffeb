// Who polls an engine (docs/design.md 3.2): whoever holds the polling role
// runs the engine's turns (engine.cc) and completes whatever they deliver.
// A synchronous caller that finds nobody polling takes the role and polls
// until its own call completes, so a lone caller costs no thread hand-off;
// a caller that finds someone polling sleeps until the poller completes its
// call. The I/O thread polls whenever callers sleep or no synchronous call
// is active, and otherwise stays off while synchronous callers come and go;
// there are no hand-offs between callers.
//
// Nothing here wakes periodically. Idle, the I/O thread holds the role and
// sleeps in the poll until a socket, a deadline or a wake-up. Off, it sleeps
// until an event: callers asleep, a user callback, work from outside any
// call (Kick: an asynchronous start, a timer, a posted task), the stop, or
// the time the last caller to let go of the role handed it (the engine's
// next deadline, at most `watch_after` away, so that sockets are watched
// again soon after a lone caller's last call).
//
// Thread-safe.

#ifndef REDLOCK_INTERNAL_POLL_ROLES_H_
#define REDLOCK_INTERNAL_POLL_ROLES_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/time/time.h"
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
    // When the engine next needs a turn although nothing arrives (its
    // earliest deadline, timer, reconnection, keep-alive), in steady_clock
    // nanoseconds; INT64_MAX when nothing is pending. REQUIRES: the role.
    virtual int64_t NextTurnNs() = 0;
  };

  // `watch_after`: how long after the last synchronous caller lets go of
  // the role the I/O thread takes it back at the latest.
  PollRoles(Driver* driver, absl::Duration watch_after);

  // Blocks until `waiter` is ready (Blocking::AwaitSync): polls meanwhile,
  // or sleeps while someone else polls.
  void AwaitSync(const std::shared_ptr<SyncWaiter>& waiter);
  // The I/O thread's life until the engine stops.
  void RunIoThread();
  // Wakes the I/O thread if it is off (a user callback to run, a stop).
  void WakeIoThread();
  // Work for the poller came from outside every polling thread and every
  // synchronous call (an asynchronous start, a timer, a posted task): the
  // I/O thread takes the role as soon as no synchronous call is active.
  void Kick();
  // Whether the I/O thread keeps the role (a turn of the I/O thread that
  // is not needed returns at once).
  bool IoThreadKeepsPolling() const;
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
  // Whether the I/O thread, off, takes the role now.
  bool IoThreadTakesRole(int64_t now_ns) const;
  // The I/O thread off: sleeps until it takes the role, a user callback
  // waits or the engine stops. Under mu_.
  void IoThreadIdle(std::unique_lock<std::mutex>& lock);
  // Records when the engine next needs a turn, by whoever lets go of the
  // role (while still holding it).
  void HandBack();
  // Wakes the idle I/O thread if what changed makes it take the role, or
  // brings its wake-up time forward.
  void MaybeWakeIoThread();

  Driver& driver_;
  const int64_t watch_after_ns_;
  std::mutex poll_mu_;                     // the polling role
  std::atomic<int> sync_active_{0};        // callers inside AwaitSync
  std::atomic<int> sleepers_{0};           // of them, those sleeping until completed
  std::atomic<bool> io_polling_{false};    // the I/O thread holds poll_mu_
  std::atomic<bool> caller_polls_{false};  // a caller holds poll_mu_
  // When the engine next needs a turn (HandBack): the idle I/O thread takes
  // the role then, if no synchronous call is active.
  std::atomic<int64_t> next_turn_ns_{0};
  std::atomic<bool> kicked_{false};  // Kick() since the I/O thread last took the role
  // The idle I/O thread sleeps until then (kForever: until woken); -1 while
  // it is not idle. Set under mu_.
  std::atomic<int64_t> io_idle_until_ns_{-1};
  std::mutex mu_;                    // guards the two below
  std::condition_variable idle_cv_;  // the idle I/O thread
  // A lone caller waiting for the I/O thread to give up the polling role.
  std::shared_ptr<SyncWaiter> role_waiter_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_POLL_ROLES_H_
