// The poll set of one engine (docs/design.md 3.2, 6): the epoll instance
// every connection of every node is registered with, the eventfd that
// interrupts whoever polls, the time until which the poller sleeps (so that
// a timer or a deadline set on another thread wakes it only when it is
// earlier), and whether a turn is running (output is then written at the
// turn's end). Who polls is poll_roles.h's business; what a turn does,
// the engine's (engine.cc).
//
// Thread-safe: registration, Wake and the published times from any thread;
// Wait from the thread that holds the polling role.

#ifndef REDLOCK_INTERNAL_POLLER_H_
#define REDLOCK_INTERNAL_POLLER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/reply.h"

namespace redlock::internal {

class Poller {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // The kind of connection an event is for.
  enum Kind : uint32_t { kCommand = 1, kLocator = 2, kSubscriber = 3 };
  // One event, decoded: node `node`'s connection of `kind` (`sub` tells a
  // locator's connections apart), of that connection's `generation`.
  struct Event {
    int node = 0;
    Kind kind = kCommand;
    uint32_t sub = 0;
    uint32_t generation = 0;
    uint32_t events = 0;
  };
  // What the event data can tell apart: 2^18 nodes, 4096 `sub`s per node.
  static constexpr int kNodeBits = 18;
  static constexpr uint32_t kMaxSubs = 4096;

  Poller() = default;
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Makes the epoll instance and the eventfd.
  absl::Status Open();

  // (Re)registers connection `c` of `node` (op EPOLL_CTL_ADD or MOD):
  // readable always, writable when asked.
  void Register(const Connection& c, int node, Kind kind, int op, bool writable, uint32_t sub = 0);
  void Unregister(int fd);
  // I/O on a side connection (subscriber, locator's): reads its messages,
  // and once it has left the connecting state, asks for writable events
  // only while the stream does. The caller closes it on a failure.
  Connection::Progress SideIo(Connection& c, int node, Kind kind, uint32_t events,
                              std::vector<Reply>* messages, uint32_t sub = 0);

  // Makes the current (or next) Wait return at once.
  void Wake();
  // Waits up to `timeout_ms` (-1: without limit) for events, decoded into
  // `out`; the eventfd's are consumed and not returned.
  int Wait(int64_t timeout_ms, Event* out, int max);

  // The poller sleeps until `until` (published before it computes its
  // timeout: Sleeping(TimePoint::max()) while computing, then the result).
  void Sleeping(TimePoint until);
  void Awake() { wake_at_ns_.store(0, std::memory_order_seq_cst); }
  // A timer or deadline at `at` was set: wakes the poller if it sleeps
  // past it.
  void WakeIfSleepingPast(TimePoint at);

  bool in_turn() const { return in_turn_.load(std::memory_order_acquire); }
  void set_in_turn(bool on) { in_turn_.store(on, std::memory_order_release); }

 private:
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  // Until when the poller sleeps (ns of the steady clock; 0: it does not).
  std::atomic<int64_t> wake_at_ns_{0};
  // True while a poller dispatches (output is then written at the turn's end).
  std::atomic<bool> in_turn_{false};
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_POLLER_H_
