// The node-facing side of the client, as interfaces, one per job: the nodes
// (NodeIo), the transport's thread and its timers (TransportThread), its
// life (Lifecycle) and release announcements (Announcements). The real
// engine (engine.h) is all of them, and a caller can also wait on it
// (Blocking, sync_waiter.h); unit tests drive the algorithm with fake nodes
// and a fake clock (tests/unit/fake_transport.h), which are a Transport
// that no caller blocks on. What a command is: command.h.

#ifndef REDLOCK_INTERNAL_TRANSPORT_H_
#define REDLOCK_INTERNAL_TRANSPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "redlock/internal/command.h"
#include "redlock/node_status.h"

namespace redlock::internal {

// The nodes: how many, their names, sending them commands, and how their
// connections are doing.
class NodeIo {
 public:
  virtual ~NodeIo() = default;

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

  // Each node's connection as the transport sees it (Client::Health).
  virtual std::vector<NodeHealth> Health() const = 0;
};

// The transport's thread: where the callbacks run, timers, and handing
// user callbacks to the I/O thread.
class TransportThread {
 public:
  using TimerId = uint64_t;

  virtual ~TransportThread() = default;

  // Runs `fn` on the transport's thread after `delay`. Cancel returns true
  // when it removed a timer that had not run yet.
  virtual TimerId RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) = 0;
  virtual bool Cancel(TimerId id) = 0;

  // Runs `fn` on the transport's I/O thread (inline if already there): user
  // callbacks go through here, so they never run inside a synchronous call
  // made on another thread, which may hold the caller's own locks.
  virtual void DeliverToUser(absl::AnyInvocable<void()> fn) = 0;

  // True while the calling thread runs the transport's callbacks (on the I/O
  // thread, or on a caller polling in Blocking::AwaitSync).
  virtual bool InTransportThread() const = 0;
};

// Shutting down.
class Lifecycle {
 public:
  virtual ~Lifecycle() = default;

  // True once shutdown has begun: new operations must not start.
  virtual bool stopping() const = 0;

  // Completes everything pending with kCancelled (running the callbacks) and
  // stops. Commands that follow one already written (Command::after), sent
  // by those callbacks, are still written and their answers awaited for up
  // to the node timeout. Idempotent. REQUIRES: not called from the
  // transport's thread.
  virtual void Shutdown() = 0;
};

// Release announcements (pub/sub), for waiting acquisitions.
class Announcements {
 public:
  virtual ~Announcements() = default;

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

// What the operations are given: every job above.
class Transport : public NodeIo, public TransportThread, public Lifecycle, public Announcements {};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_TRANSPORT_H_
