// The engine's nodes: one per node of the node list, made at the start with
// its scheme's locator, and, for a node whose locator routes by key (a Redis
// Cluster), one more per master, added while running (AddShard); and what
// they tell Client::Health. The turn is in engine.cc, requests in each
// node's queue (node_queue.cc), each command connection's life in
// engine_connection.cc.

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
    : config_(std::move(config)),
      logical_(static_cast<int>(config_.nodes.size())),
      limits_{config_.node_timeout, config_.max_in_flight_per_node, config_.breaker_probe_interval},
      subscriber_(&poller_, this, config_.connect_timeout) {
  Connection::Settings& base = table_.base_settings;
  base.connect_timeout = config_.connect_timeout;
  base.backoff_min = config_.reconnect_backoff_min;
  base.backoff_max = config_.reconnect_backoff_max;
  base.reply_limits = config_.reply_limits;
  std::vector<std::unique_ptr<Locator>> locators;
  std::vector<NodeLocatorHost*> hosts;
  size_t capacity = config_.nodes.size();
  for (size_t i = 0; i < config_.nodes.size(); ++i) {
    // Where the node's master is: its scheme's locator. Its host is made
    // first (the locator may keep it); the node it serves comes next.
    auto host = std::make_unique<NodeLocatorHost>(this, static_cast<int>(i));
    LocatorEnv env;
    env.settings = base;
    env.settings.endpoint = config_.nodes[i];
    env.tls = config_.tls;
    env.tls_server_name = config_.tls_server_name;
    env.host = host.get();
    locators.push_back(SchemeOf(config_.nodes[i]).MakeLocator(config_.nodes[i], std::move(env)));
    if (locators.back()->Routes()) capacity += kMaxShardsPerNode;
    hosts.push_back(host.release());
  }
  table_.capacity = std::min(capacity, kMaxEngineNodes);
  table_.nodes = std::make_unique<std::unique_ptr<Node>[]>(table_.capacity);
  table_.shards.assign(config_.nodes.size(), 0);
  identities_.run_ids.resize(table_.capacity);
  identities_.unverified.resize(config_.nodes.size());
  for (size_t i = 0; i < config_.nodes.size(); ++i) {
    MakeNode(static_cast<int>(i), static_cast<int>(i), config_.nodes[i],
             config_.nodes[i].ToString(), std::move(locators[i]));
    NodeAt(static_cast<int>(i)).locator_host.reset(hosts[i]);
  }
}

void Engine::MakeNode(int index, int owner, const Endpoint& e, std::string name,
                      std::unique_ptr<Locator> locator) {
  Connection::Settings settings = table_.base_settings;
  settings.endpoint = e;
  auto node = std::make_unique<Node>(index, owner, e, std::move(name), settings, &limits_,
                                     &queue_host_, static_cast<bool>(config_.on_node_event));
  Node& n = *node;
  n.locator = std::move(locator);
  n.routes = n.locator->Routes();
  MasterTarget at = n.locator->Initial();
  if (!at.host.empty()) n.queue.SetAddress(JoinHostPort(at.host, at.port));
  n.cmd.Retarget(at.host, at.port, at.make_stream);
  n.sub.conn.Retarget(at.host, at.port, at.make_stream);
  table_.nodes[static_cast<size_t>(index)] = std::move(node);
  table_.count.store(index + 1, std::memory_order_release);
}

int Engine::AddShard(Node& owner, std::unique_ptr<Locator> locator, const std::string& name) {
  const int next = node_count();
  if (table_.shards[static_cast<size_t>(owner.index)] >= kMaxShardsPerNode ||
      static_cast<size_t>(next) >= table_.capacity) {
    return -1;
  }
  ++table_.shards[static_cast<size_t>(owner.index)];
  MakeNode(next, owner.index, owner.endpoint, name, std::move(locator));
  Node& n = NodeAt(next);
  // A master named by the first slot map (while Client::Create still waits
  // for the first connections) is waited for too; one found later is not.
  {
    std::lock_guard<std::mutex> g(first_.mu);
    n.first_connect_reported = first_.pending <= 0;
    if (!n.first_connect_reported) ++first_.pending;
  }
  StartConnect(n);
  return next;
}

// ---- Introspection --------------------------------------------------------------

std::vector<std::pair<int, int>> Engine::DuplicateNodes() const {
  std::lock_guard<std::mutex> identity(identities_.mu);
  return identities_.duplicates;
}

std::vector<NodeHealth> Engine::Health() const {
  std::vector<NodeHealth> out;
  for (int i = 0; i < size(); ++i) {
    const Node& n = NodeAt(i);
    NodeHealth h;
    h.node = n.name;
    h.tls = n.endpoint.tls;
    n.queue.FillHealth(&h);
    h.notifications_error = n.sub.Error();
    h.scheme = n.locator->Scheme();
    // A cluster: its masters (and how its connections to them are doing).
    n.locator->Health(&h);
    out.push_back(std::move(h));
  }
  return out;
}

void Engine::ShardState(int index, ShardHealth* shard) const {
  if (index < 0 || index >= node_count()) return;
  NodeAt(index).queue.FillShard(shard);
}

}  // namespace redlock::internal
