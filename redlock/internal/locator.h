// Where one node's master is, for a key: the engine asks its node's Locator,
// and each endpoint scheme (scheme.h) brings its own. A static address
// (redis://, rediss://) knows it from the start; Sentinel discovery
// (redis+sentinel://, rediss+sentinel://) asks the Sentinels and follows
// failovers; a Redis Cluster (redis+cluster://) has one master per hash
// slot, so its locator routes each command by its keys' slot to a
// connection of its own per master (Routes, Route). The engine owns the
// connections to the masters (command and subscriber) and their breakers;
// a locator owns whatever it needs to find them (the Sentinel connections,
// the slot map) and tells the engine through its Host.
//
// Design (docs/design.md 6.8): everything a scheme needs beyond a host and
// a port lives behind this interface, so the engine has no branch per
// scheme, and a new scheme is one unit (its scheme_*.cc) plus its tests.
//
// Thread-safety: every call is made on the engine's poller (the thread
// holding the polling role), except Health(), which may run on any thread.

#ifndef REDLOCK_INTERNAL_LOCATOR_H_
#define REDLOCK_INTERNAL_LOCATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redlock/internal/connection.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/transport.h"
#include "redlock/node_status.h"

namespace redlock::internal {

// The masters a node that routes by key may have connections to (a
// cluster's; Locator::Host::AddShard refuses more).
inline constexpr int kMaxShardsPerNode = 1024;

// Where to connect to reach a master, and how.
struct MasterTarget {
  std::string host;
  int port = 0;
  StreamFactory make_stream;  // null: plain TCP; else TLS checking the right name
};

class Locator {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // What the engine does for the locator of one node. Poller only.
  class Host {
   public:
    virtual ~Host() = default;
    // The master is `target` now: the node's connections go there, at once
    // when it moved (`why` says why, for the node's messages; "" for the
    // first answer).
    virtual void MasterAt(MasterTarget target, const std::string& why) = 0;
    // Nobody can name the master now: the node's breaker opens with `why`.
    virtual void Unlocated(const std::string& why) = 0;
    // The first attempt to locate the master is over, found or not
    // (Client::Create waits for every node's first attempt).
    virtual void FirstAttemptDone() = 0;
    // Registers the locator's connection number `sub` with the poller
    // (readable always, writable when asked; `add` the first time after
    // Start), or removes it.
    virtual void Watch(const Connection& c, uint32_t sub, bool add, bool writable) = 0;
    virtual void Unwatch(const Connection& c) = 0;
    // Drives connection `sub` on poll events: its messages, and writable
    // events only while its stream asks for them. The locator closes it on
    // a failure.
    virtual Connection::Progress Io(Connection& c, uint32_t sub, uint32_t events,
                                    std::vector<Reply>* messages) = 0;
    // The command connection to the master is ready.
    virtual bool MasterConnected() const = 0;
    virtual bool stopping() const = 0;

    // ---- For a locator that routes by key (Routes()) ----
    // Adds a command connection of this node to another master, which
    // `locator` (its own: where that master is, what its failure means)
    // names, and starts connecting it. Returns the engine's index of that
    // connection, what Route returns for the keys it serves. `name` is how
    // messages call it.
    virtual int AddShard(std::unique_ptr<Locator> locator, const std::string& name) = 0;
    // Sends `command` on the node's own command connection (the locator's
    // queries); `done` runs on the poller, never inline.
    virtual void Query(const Command& command, NodeCallback done) = 0;
    // The next attempt of the node's own command connection, after the
    // usual backoff, goes to `target` (no reconnection now).
    virtual void NextAttemptAt(MasterTarget target) = 0;
    // How the connection at engine index `shard` (AddShard) is doing: fills
    // the connection fields of *out. Any thread.
    virtual void ShardState(int shard, ShardHealth* out) const = 0;
  };

  virtual ~Locator() = default;

  // The scheme's name, as written in URLs ("redis", "rediss",
  // "redis+sentinel", "rediss+sentinel"): NodeHealth::scheme.
  virtual std::string Scheme() const = 0;

  // Where the node's connections point before anything is asked: a static
  // address, or an empty host while it must be found.
  virtual MasterTarget Initial() const = 0;

  // Whether the command connection may connect: the master's address is
  // known and no connection to it has failed since.
  virtual bool Known() const = 0;

  // The engine needs the master (Known() is false): find it, and call
  // Host::MasterAt (now or later) or Host::Unlocated.
  virtual void Locate(TimePoint now) { (void)now; }

  // The command connection to the master failed: it may have moved.
  virtual void MasterLost() {}

  // Checks of the master's command connection, after login and before the
  // identity check (Sentinel: ROLE must say master).
  virtual void AddMasterChecks(std::vector<HandshakeStep>* steps) const { (void)steps; }

  // Poll events on the locator's connection `sub`, tagged `generation`
  // (events of a connection closed since are ignored).
  virtual void OnIo(uint32_t sub, uint32_t generation, uint32_t events) {
    (void)sub, (void)generation, (void)events;
  }
  // Timeouts, keep-alives, reconnections: every polling turn.
  virtual void Maintain(TimePoint now) { (void)now; }
  // When Maintain next has something to do (TimePoint::max(): nothing).
  virtual TimePoint Wake(TimePoint now) const {
    (void)now;
    return TimePoint::max();
  }
  // Closes every connection of the locator (shutdown).
  virtual void Close() {}

  // Adds what the locator knows to the node's health (Sentinels, a
  // cluster's masters). Any thread.
  virtual void Health(NodeHealth* health) const { (void)health; }

  // ---- Routing by key (a cluster: one master per hash slot) ----
  // Whether this node's commands go to different masters by their keys.
  virtual bool Routes() const { return false; }
  // The engine index of the connection a command for hash slot `slot`
  // (-1: no key) goes to, or -1 for the node's own connection. With
  // `asking_at` ("host:port", an ASK redirection), the connection to that
  // master. Any thread.
  virtual int Route(int slot, const std::string& asking_at) {
    (void)slot, (void)asking_at;
    return -1;
  }
  // A master of this node answered "MOVED slot host:port": the slot is
  // served there from now on. Poller only.
  virtual void Moved(int slot, const std::string& host, int port) {
    (void)slot, (void)host, (void)port;
  }
  // A master of this node answered "ASK slot host:port" (a migration): the
  // command goes there once (Route with asking_at), so a connection to that
  // master must exist, even when it serves no slot yet. Poller only.
  virtual void Asked(const std::string& host, int port) { (void)host, (void)port; }
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_LOCATOR_H_
