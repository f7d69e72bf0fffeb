// The engine's nodes: one per node of the node list, made at the start with
// its scheme's locator, and, for a node whose locator routes by key (a Redis
// Cluster), one more per master, added while running (AddShard); and what
// they tell Client::Health. Polling is in engine.cc, requests in
// engine_node.cc, each command connection's life in engine_connection.cc.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "redlock/internal/engine.h"
#include "redlock/internal/engine_node.h"
#include "redlock/internal/scheme.h"
#include "redlock/internal/url.h"

namespace redlock::internal {

Engine::Engine(Config config)
    : config_(std::move(config)), logical_(static_cast<int>(config_.nodes.size())) {
  base_settings_.connect_timeout = config_.connect_timeout;
  base_settings_.backoff_min = config_.reconnect_backoff_min;
  base_settings_.backoff_max = config_.reconnect_backoff_max;
  base_settings_.reply_limits = config_.reply_limits;
  std::vector<std::unique_ptr<Locator>> locators;
  std::vector<NodeLocatorHost*> hosts;
  capacity_ = config_.nodes.size();
  for (size_t i = 0; i < config_.nodes.size(); ++i) {
    // Where the node's master is: its scheme's locator. Its host is made
    // first (the locator may keep it); the node it serves comes next.
    auto host = std::make_unique<NodeLocatorHost>(this, static_cast<int>(i));
    LocatorEnv env;
    env.settings = base_settings_;
    env.settings.endpoint = config_.nodes[i];
    env.tls = config_.tls;
    env.tls_server_name = config_.tls_server_name;
    env.host = host.get();
    locators.push_back(SchemeOf(config_.nodes[i]).MakeLocator(config_.nodes[i], std::move(env)));
    if (locators.back()->Routes()) capacity_ += kMaxShardsPerNode;
    hosts.push_back(host.release());
  }
  capacity_ = std::min(capacity_, kMaxEngineNodes);
  nodes_ = std::make_unique<std::unique_ptr<Node>[]>(capacity_);
  shards_.assign(config_.nodes.size(), 0);
  run_ids_.resize(capacity_);
  unverified_.resize(config_.nodes.size());
  for (size_t i = 0; i < config_.nodes.size(); ++i) {
    MakeNode(static_cast<int>(i), static_cast<int>(i), config_.nodes[i],
             config_.nodes[i].ToString(), std::move(locators[i]));
    NodeAt(static_cast<int>(i)).locator_host.reset(hosts[i]);
  }
}

void Engine::MakeNode(int index, int owner, const Endpoint& e, std::string name,
                      std::unique_ptr<Locator> locator) {
  Connection::Settings settings = base_settings_;
  settings.endpoint = e;
  auto node = std::make_unique<Node>(index, owner, e, std::move(name), settings);
  Node& n = *node;
  n.locator = std::move(locator);
  n.routes = n.locator->Routes();
  MasterTarget at = n.locator->Initial();
  if (!at.host.empty()) n.address = JoinHostPort(at.host, at.port);
  n.cmd.Retarget(at.host, at.port, at.make_stream);
  n.sub.Retarget(at.host, at.port, at.make_stream);
  nodes_[static_cast<size_t>(index)] = std::move(node);
  count_.store(index + 1, std::memory_order_release);
}

int Engine::AddShard(Node& owner, std::unique_ptr<Locator> locator, const std::string& name) {
  const int next = node_count();
  if (shards_[static_cast<size_t>(owner.index)] >= kMaxShardsPerNode ||
      static_cast<size_t>(next) >= capacity_) {
    return -1;
  }
  ++shards_[static_cast<size_t>(owner.index)];
  MakeNode(next, owner.index, owner.endpoint, name, std::move(locator));
  Node& n = NodeAt(next);
  // A master named by the first slot map (while Client::Create still waits
  // for the first connections) is waited for too; one found later is not.
  {
    std::lock_guard<std::mutex> g(mu_);
    n.first_connect_reported = first_connect_pending_ <= 0;
    if (!n.first_connect_reported) ++first_connect_pending_;
  }
  StartConnect(n);
  return next;
}

// ---- Introspection --------------------------------------------------------------

std::vector<std::pair<int, int>> Engine::DuplicateNodes() const {
  std::lock_guard<std::mutex> identity(identity_mu_);
  return duplicates_;
}

std::vector<NodeHealth> Engine::Health() const {
  std::vector<NodeHealth> out;
  for (int i = 0; i < size(); ++i) {
    const Node& n = NodeAt(i);
    NodeHealth h;
    {
      std::lock_guard<std::mutex> lock(n.mu);
      h.node = n.name;
      h.connected = n.state == Node::State::kReady;
      h.breaker_open = n.breaker_open;
      h.in_flight = n.load();
      h.last_error = n.last_error;
      h.tls = n.endpoint.tls;
      h.address = n.address;
      h.notifications_error = n.sub_error;
      if (h.connected) h.tls_version = n.transport;
    }
    h.scheme = n.locator->Scheme();
    // A cluster: its masters (and how its connections to them are doing).
    n.locator->Health(&h);
    out.push_back(std::move(h));
  }
  return out;
}

void Engine::ShardState(int index, ShardHealth* shard) const {
  if (index < 0 || index >= node_count()) return;
  const Node& n = NodeAt(index);
  std::lock_guard<std::mutex> lock(n.mu);
  shard->connected = n.state == Node::State::kReady;
  shard->breaker_open = n.breaker_open;
  shard->in_flight = n.load();
  shard->last_error = n.last_error;
}

}  // namespace redlock::internal
