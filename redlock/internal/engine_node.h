// The engine's per-node state, shared by engine.cc (polling), engine_node.cc
// (requests on the command connection), engine_connection.cc (that
// connection's life), engine_subscriber.cc and engine_locator.cc.
// Internal to the engine.

#ifndef REDLOCK_INTERNAL_ENGINE_NODE_H_
#define REDLOCK_INTERNAL_ENGINE_NODE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "redlock/internal/connection.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/locator.h"
#include "redlock/internal/transport.h"
#include "redlock/node_status.h"

namespace redlock::internal {

// epoll data: generation << 32 | sub << 20 | node << 2 | kind; 0 is the
// eventfd. `sub` tells the connections of a node's locator apart (0
// otherwise; at most 4096 of them, sentinel_locator.h).
inline constexpr uint64_t kCommandEvents = 1;
inline constexpr uint64_t kLocatorEvents = 2;
inline constexpr uint64_t kSubscriberEvents = 3;
inline constexpr int kEngineNodeBits = 18;
inline constexpr size_t kMaxEngineNodes = size_t{1} << kEngineNodeBits;
// A connection id carries the index of the engine node it belongs to in its
// low bits (a command that follows it is routed there).
inline constexpr ConnectionId kConnectionNodeMask = kMaxEngineNodes - 1;

uint64_t EngineEventData(uint32_t generation, int node, uint64_t kind, uint32_t sub = 0);

// A node behind an open breaker that has not answered anything for this long
// gets a new connection.
inline constexpr absl::Duration kStaleConnection = absl::Seconds(1);

// One request awaiting its reply.
struct Engine::Slot {
  enum class Kind { kRequest, kProbe };
  Kind kind = Kind::kRequest;
  NodeCallback done;  // empty once completed
  TimePoint deadline = TimePoint::max();
  uint8_t expect = 0;   // Command::expect
  const char* op = "";  // Command::op, for messages
  std::string echo;     // kProbe: the nonce the PING must return
  // Command::replies: replies still to come; those before the last are kept.
  uint16_t parts_left = 1;
  bool drain = false;  // Command::drain
  std::vector<Reply> parts;
};

struct Engine::Node {
  enum class State { kDisconnected, kConnecting, kHandshake, kReady };
  using TimePoint = std::chrono::steady_clock::time_point;

  // `settings`: of the node's connections (their target is the locator's,
  // set by the engine once it is made). `owner`: the node of the node list
  // this is a connection of (itself, or a cluster node for a connection to
  // one of its masters).
  Node(int i, int owner_index, const Endpoint& e, std::string node_name,
       const Connection::Settings& settings)
      : index(i),
        owner(owner_index),
        endpoint(e),
        name(std::move(node_name)),
        cmd(settings),
        sub(settings) {}

  const int index;
  const int owner;
  const Endpoint endpoint;
  const std::string name;
  // A connection to one master of a cluster node (Locator::Host::AddShard):
  // no subscriber connection, not one of the nodes of Transport.
  bool shard() const { return owner != index; }
  // Set once with the locator: the node's commands are routed by key.
  bool routes = false;

  mutable std::mutex mu;
  // ---- Guarded by mu ----
  State state = State::kDisconnected;
  // The command connection requests are queued on (Transport::Send), named
  // when it starts connecting; kept once it is gone (a follower of it is
  // then treated as any command).
  ConnectionId conn_id = 0;
  // The command connection's stream, for writers outside the poller.
  std::shared_ptr<Stream> stream;
  std::string out;  // bytes not written yet
  // The writer's buffer between flushes: n.out and it trade places on
  // each write, so that neither is allocated again per turn.
  std::string spare;
  bool writing = false;            // a thread writes n.out outside mu
  bool epollout = false;           // waiting for the socket to take more output
  bool flush_at_turn_end = false;  // output marked during a turn
  std::string write_error;
  std::deque<Slot*> fifo;  // sent, in order, awaiting replies
  size_t expired = 0;      // fifo prefix whose deadline passed
  // fifo suffix whose bytes are not on the wire yet: their deadlines start
  // when they are (a request delayed by this process is not the node's fault).
  size_t unwritten = 0;
  // Requests made while the first connection is being established.
  std::deque<std::pair<Slot*, std::string>> waiting;
  bool breaker_open = false;
  TimePoint breaker_opened_at{};
  TimePoint last_reply_at{};  // any reply, late ones included: the node is alive
  std::string last_error;
  bool probe_in_flight = false;
  TimePoint next_probe{};
  std::vector<Slot*> free_slots;  // recycled requests
  // Completions of one reply batch, run after n.mu is released; kept
  // between batches (taken out while in use) so a batch does not grow a new
  // vector: that was 8 % of the client's time at 64 async chains.
  std::vector<std::pair<NodeCallback, Reply>> ready;
  std::string transport;          // "TLSv1.3", "" for plain TCP (Health)
  std::string address;            // "host:port" connected to ("" while unknown)
  std::vector<NodeEvent> events;  // for the observer, emitted after the turn
  // Why the subscriber connection last failed ("" once it is subscribed
  // again): release notifications fall back to polling meanwhile (Health).
  std::string sub_error;

  // ---- Poller only ----
  Connection cmd;
  bool first_connect_reported = false;
  std::vector<Reply> replies;  // reused per read
  // The subscriber connection (release announcements), opened when the first
  // channel is subscribed.
  Connection sub;
  std::string sub_out;
  bool sub_epollout = false;
  TimePoint sub_last_heard{};  // keep-alive (kKeepaliveIdle)
  bool sub_ping_out = false;
  TimePoint sub_ping_sent{};
  // Where the master is (its scheme's Locator), and the engine's side of it.
  std::unique_ptr<NodeLocatorHost> locator_host;
  std::unique_ptr<Locator> locator;

  size_t load() const { return fifo.size() + waiting.size(); }
};

// What the engine does for one node's locator (engine_locator.cc).
class Engine::NodeLocatorHost final : public Locator::Host {
 public:
  // For the engine's node `node`, made after this.
  NodeLocatorHost(Engine* engine, int node) : engine_(*engine), index_(node) {}
  void MasterAt(MasterTarget target, const std::string& why) override;
  void Unlocated(const std::string& why) override;
  void FirstAttemptDone() override;
  void Watch(const Connection& c, uint32_t sub, bool add, bool writable) override;
  void Unwatch(const Connection& c) override;
  Connection::Progress Io(Connection& c, uint32_t sub, uint32_t events,
                          std::vector<Reply>* messages) override;
  bool MasterConnected() const override;
  bool stopping() const override;
  int AddShard(std::unique_ptr<Locator> locator, const std::string& name) override;
  void Query(const Command& command, NodeCallback done) override;
  void NextAttemptAt(MasterTarget target) override;
  void ShardState(int shard, ShardHealth* out) const override;

 private:
  Node& node() const { return engine_.NodeAt(index_); }
  Engine& engine_;
  const int index_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ENGINE_NODE_H_
