// The node-facing side of the client, as an interface: the real engine
// (engine.h) talks to redis-server; unit tests drive the algorithm with fake
// nodes and a fake clock (tests/unit/fake_transport.h).

#ifndef REDLOCK_INTERNAL_TRANSPORT_H_
#define REDLOCK_INTERNAL_TRANSPORT_H_

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/scripts.h"
#include "redlock/node_status.h"

namespace redlock::internal {

// A connection of a node, as Transport::Send names it: unique within the
// transport, never reused. 0 names none.
using ConnectionId = uint64_t;

// One command for one node.
struct Command {
  // The command in RESP.
  std::string payload;
  // When `payload` is an EVALSHA of this script (ScriptCommand): the script,
  // for the caller to build the EVAL form (EvalFallback). The transport
  // ignores it: a NOSCRIPT answer is an answer like any other.
  const Script* script = nullptr;
  // The connection of an earlier command this one must follow (0: none): a
  // release behind its SET, a WAIT behind its write. While that connection
  // is still the node's current one, the command is queued on it behind the
  // earlier one whatever the node's circuit breaker says, and over
  // max_in_flight_per_node up to twice that (the load it would be refused
  // for is made of the commands it must follow); it is also still written
  // while the transport shuts down. Once that connection is gone, the
  // command is treated as any other.
  ConnectionId after = 0;
  // With `after`: only on that connection. Once it is gone the command is
  // refused (kUnavailable) instead of going on another: the second half of a
  // WATCH ... EXEC transaction means nothing on a connection that does not
  // hold its WATCH (scriptless.h).
  bool pinned = false;
  // The number of commands in `payload` (RESP commands sent back to back,
  // never split by another caller's). With more than one, the callback gets
  // an array of their replies, in order (errors included).
  uint16_t replies = 1;
  // Not cancelled when the transport shuts down: its real answer is awaited
  // (up to the node timeout, as a command that follows another), so that
  // what it starts can finish (a release run as a transaction, whose second
  // half is sent on the first half's answer).
  bool drain = false;
  // The hash slot of the command's keys (cluster_slots.h; -1: no key): a
  // node that is a Redis Cluster sends it to the master of that slot.
  // ScriptCommand sets it; a command that follows another (`after`) goes
  // where that one went whatever its slot.
  int slot = -1;
  // A node that is a Redis Cluster answered ASK: this one command goes to
  // that master ("host:port"), its payload starting with ASKING. Empty
  // otherwise.
  std::string asking_at;
  // Free-form name for tests and diagnostics ("acquire", "release", ...).
  const char* op = "";
  // The reply types this command can get (reply.h, kExpect*; 0: anything).
  uint8_t expect = 0;
};

// EVALSHA script numkeys keys... args...
Command ScriptCommand(const Script& script, const std::vector<std::string>& keys,
                      const std::vector<std::string>& args);

// The EVAL form of a Command made by ScriptCommand.
std::string EvalFallback(const Command& command);

// What a node answered, or why it did not (kUnavailable: timeout, connection
// failure, circuit breaker, too many requests in flight; kCancelled: the
// transport is shutting down). A Redis error reply is an OK status holding a
// Reply of type kError.
using NodeCallback = absl::AnyInvocable<void(absl::StatusOr<Reply>)>;

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

 private:
  static constexpr uint32_t kReady = 1;
  static constexpr uint32_t kNudged = 2;
  static constexpr uint32_t kSleeping = 4;  // the waiter is (about to be) in futex_wait
  void Wake();
  void Sleep(const timespec* timeout);
  std::atomic<uint32_t> state_{0};
};

class Transport {
 public:
  using TimerId = uint64_t;

  virtual ~Transport() = default;

  // Number of nodes and their names ("host:port") for messages.
  virtual int size() const = 0;
  virtual const std::string& NodeName(int node) const = 0;

  // Sends `command` to `node`. `done` runs exactly once, on the transport's
  // thread, never inline from Send. Commands sent to one node are executed
  // by it in the order of the Send calls, each exactly as sent: the
  // transport never re-sends, reorders or rewrites a command, whatever the
  // node answers. Returns the connection the command was queued on, or 0
  // when it was refused at once (`done` then gets the reason): a command
  // that follows it (Command::after) names that connection.
  virtual ConnectionId Send(int node, const Command& command, NodeCallback done) = 0;

  // False when Send to `node` would now be refused at once (not connected,
  // circuit breaker open), for a command that follows no other. A hint: the
  // answer may change right after.
  virtual bool Accepts(int node) const { return node >= 0; }

  // Runs `fn` on the transport's thread after `delay`. Cancel returns true
  // when it removed a timer that had not run yet.
  virtual TimerId RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) = 0;
  virtual bool Cancel(TimerId id) = 0;

  // Blocks the calling thread until `waiter` is ready. The real engine lets
  // the caller do the polling meanwhile (so a lone synchronous call costs no
  // thread hand-off); `waiter` is completed by a callback of the operation.
  virtual void AwaitSync(const std::shared_ptr<SyncWaiter>& waiter) = 0;

  // Runs `fn` on the transport's I/O thread (inline if already there): user
  // callbacks go through here, so they never run inside a synchronous call
  // made on another thread, which may hold the caller's own locks.
  virtual void DeliverToUser(absl::AnyInvocable<void()> fn) = 0;

  // True while the calling thread runs the transport's callbacks (on the I/O
  // thread, or on a caller polling in AwaitSync).
  virtual bool InTransportThread() const = 0;

  // True once shutdown has begun: new operations must not start.
  virtual bool stopping() const = 0;

  // Completes everything pending with kCancelled (running the callbacks) and
  // stops. Commands that follow one already written (Command::after), sent
  // by those callbacks, are still written and their answers awaited for up
  // to the node timeout. Idempotent. REQUIRES: not called from the
  // transport's thread.
  virtual void Shutdown() = 0;

  // Each node's connection as the transport sees it (Client::Health).
  virtual std::vector<NodeHealth> Health() const = 0;

  // ---- Pub/sub (release notifications) ----------------------------------
  // Messages published on subscribed channels, from any node, go to the
  // handler, on the transport's thread. Set once, before any Subscribe.
  using MessageHandler =
      absl::AnyInvocable<void(int node, const std::string& channel, const std::string& payload)>;
  virtual void SetMessageHandler(MessageHandler handler) = 0;
  // Reference-counted: a channel is subscribed on every node while its count
  // is positive. Subscriptions use connections of their own and survive
  // reconnects. Thread-safe.
  virtual void Subscribe(const std::vector<std::string>& channels) = 0;
  virtual void Unsubscribe(const std::vector<std::string>& channels) = 0;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_TRANSPORT_H_
