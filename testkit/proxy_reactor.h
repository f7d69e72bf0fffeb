// testkit/proxy_reactor.h: the fault proxy's event-loop thread: epoll, a
// wake-up for work handed over by other threads (RunInLoop), and one
// timerfd armed at the handler's next deadline. It knows nothing of
// connections or faults: every other readiness goes to the Handler. Internal
// to the fault proxy.

#ifndef REDLOCK_TESTKIT_PROXY_REACTOR_H_
#define REDLOCK_TESTKIT_PROXY_REACTOR_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace redlock::testkit::proxy_internal {

// CLOCK_MONOTONIC in nanoseconds, the clock of the reactor's timer.
int64_t NowNanos();

class Reactor {
 public:
  // Tokens 0 and 1 are the reactor's own; handlers use the rest.
  static constexpr uint64_t kFirstFreeToken = 2;

  // Called on the loop thread only.
  class Handler {
   public:
    virtual ~Handler() = default;
    // `fd` registered with `token` is ready (`events`: EPOLLIN, ...).
    virtual void OnReady(uint64_t token, uint32_t events) = 0;
    // The time (NowNanos) the next timer is due, 0 for none; asked before
    // every wait.
    virtual int64_t NextDeadline() = 0;
    // The armed deadline has passed.
    virtual void OnTimer() = 0;
  };

  Reactor() = default;
  // Stops and joins the thread (Stop), then closes its descriptors.
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // Creates epoll, the wake-up eventfd and the timerfd. kUnavailable if the
  // system refuses one.
  absl::Status Init();
  // Starts the loop thread; `handler` must outlive Stop().
  void Start(Handler* handler);
  // Ends the loop thread after the tasks queued so far. Idempotent.
  void Stop();

  // Runs `fn` on the loop thread and waits for it (any thread but the loop's).
  // If the loop has died (an epoll failure), runs it here, serialized.
  void RunInLoop(const std::function<void()>& fn);

  // Loop thread (or before Start): epoll registration. events 0 removes.
  void Add(int fd, uint32_t events, uint64_t token);
  void Modify(int fd, uint32_t events, uint64_t token);
  void Remove(int fd);

 private:
  void Run();
  void Wake();
  // Returns true when the loop must stop.
  bool RunTasks();
  void ArmTimer();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int timer_fd_ = -1;
  int64_t armed_at_ = 0;  // loop thread
  Handler* handler_ = nullptr;
  std::thread thread_;

  // std::mutex rather than absl::Mutex: Debian's prebuilt Abseil is not
  // instrumented, so ThreadSanitizer cannot see absl::Mutex synchronization.
  std::mutex mu_;
  std::condition_variable done_cv_;
  std::vector<std::function<void()>> tasks_;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  bool exited_ = false;                       // guarded by mu_
};

}  // namespace redlock::testkit::proxy_internal

#endif  // REDLOCK_TESTKIT_PROXY_REACTOR_H_
