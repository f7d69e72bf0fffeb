// One engine node: its queue (node_queue.h), its command connection, its
// subscriber connection (subscriber.h) and its locator, with the engine's
// side of the locator. Shared by engine.cc (the turn), engine_connection.cc
// (the command connection's life), engine_locator.cc and engine_nodes.cc.
// Internal to the engine.

#ifndef REDLOCK_INTERNAL_ENGINE_NODE_H_
#define REDLOCK_INTERNAL_ENGINE_NODE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "redlock/internal/connection.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/locator.h"
#include "redlock/internal/node_queue.h"
#include "redlock/internal/poller.h"
#include "redlock/internal/subscriber.h"
#include "redlock/internal/transport.h"

namespace redlock::internal {

inline constexpr size_t kMaxEngineNodes = size_t{1} << Poller::kNodeBits;
// A connection id carries the index of the engine node it belongs to in its
// low bits (a command that follows it is routed there).
inline constexpr ConnectionId kConnectionNodeMask = kMaxEngineNodes - 1;

struct Engine::Node {
  // `settings`: of the node's connections (their target is the locator's,
  // set by the engine once it is made). `owner`: the node of the node list
  // this is a connection of (itself, or a cluster node for a connection to
  // one of its masters).
  Node(int i, int owner_index, const Endpoint& e, std::string node_name,
       const Connection::Settings& settings, const NodeQueue::Limits* limits, NodeQueue::Host* host,
       bool events)
      : index(i),
        owner(owner_index),
        endpoint(e),
        name(std::move(node_name)),
        queue(i, &name, limits, host, events),
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
  // Its requests (any thread, under the queue's own lock).
  NodeQueue queue;

  // ---- Poller only ----
  Connection cmd;
  bool first_connect_reported = false;
  std::vector<Reply> replies;  // reused per read
  SubscriberLink sub;
  // Where the master is (its scheme's Locator), and the engine's side of it.
  std::unique_ptr<NodeLocatorHost> locator_host;
  std::unique_ptr<Locator> locator;
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
