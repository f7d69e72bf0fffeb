// What an engine runs besides I/O (docs/design.md 3.3): timers
// (Transport::RunAfter) and tasks posted to whoever polls, both run by the
// poller during its turn; and the user's callbacks, which only the I/O
// thread runs (Transport::DeliverToUser), one at a time, never nested.
//
// Thread-safe; the Run* methods run what is due outside the lock.

#ifndef REDLOCK_INTERNAL_ENGINE_TASKS_H_
#define REDLOCK_INTERNAL_ENGINE_TASKS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"

namespace redlock::internal {

class EngineTasks {
 public:
  using Task = absl::AnyInvocable<void()>;
  using TimePoint = std::chrono::steady_clock::time_point;
  using TimerId = uint64_t;

  // ---- Timers and posted tasks (run by the poller) ----
  TimerId AddTimer(TimePoint at, Task fn);
  bool Cancel(TimerId id);
  // Queues a task for the next turn; true when none was queued before (the
  // poller must then be woken).
  bool Post(Task fn);
  // The earliest of `wake`, the first timer, and `now` when tasks are posted.
  TimePoint NextWake(TimePoint now, TimePoint wake) const;
  // Whether a turn that sleeps until `wake` would sleep past work: a posted
  // task, an earlier timer, or (for the I/O thread) a user callback.
  bool DueBefore(TimePoint wake, bool io_thread) const;
  void RunTimers(TimePoint now);
  // The tasks posted so far (those they post run on the next turn).
  void RunPosted();

  // ---- User callbacks (the I/O thread) ----
  void PushUser(Task fn);
  bool HasUser() const;
  // Runs the queued user callbacks, up to 100 rounds of them.
  void RunUser();
  // Runs one user callback now (on the I/O thread).
  void RunUserCallback(Task& fn);
  // True while a user callback runs (the next is queued, not nested).
  bool in_user_callback() const { return in_user_callback_; }

  // ---- Shutdown ----
  // Posted or user tasks are queued.
  bool HasQueued() const;
  // Runs every timer, posted task and user callback round after round
  // until none is left, or `max_rounds` (then the rest are dropped, said
  // on stderr).
  void RunAllRemaining(int max_rounds);

 private:
  mutable std::mutex mu_;
  // Vectors, not deques: an empty std::deque allocates, and a batch is
  // taken every turn. Each batch is run from a spare vector that trades
  // places with the queue, so that neither is allocated again once warm.
  std::vector<Task> posted_;
  std::vector<Task> user_;
  std::vector<Task> posted_spare_;  // the poller's
  std::vector<Task> user_spare_;    // the I/O thread's
  std::map<std::pair<TimePoint, TimerId>, Task> timers_;
  std::unordered_map<TimerId, TimePoint> timer_index_;
  TimerId next_timer_id_ = 1;
  bool in_user_callback_ = false;  // the I/O thread only
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ENGINE_TASKS_H_
