// The engine's side of each node's Locator (locator.h): where the locator
// says the master is, the node's connections go; while it cannot say, the
// node's breaker is open with its reason. The locator's own connections
// (a Sentinel-managed node's, one per Sentinel) are polled with the others.

#include <sys/epoll.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/engine_node.h"
#include "redlock/internal/url.h"

namespace redlock::internal {

void Engine::MasterAt(Node& n, MasterTarget target, const std::string& why) {
  const bool moved = n.queue.SetAddress(JoinHostPort(target.host, target.port));
  // The same master: the next attempt comes after the usual backoff.
  if (!moved) return;
  n.cmd.Retarget(target.host, target.port, target.make_stream);
  n.sub.conn.Retarget(target.host, target.port, std::move(target.make_stream));
  if (n.cmd.state() != Connection::State::kDisconnected) {
    Disconnect(n, why, /*ask_locator=*/false);
  }
  if (n.sub.conn.state() != Connection::State::kDisconnected) subscriber_.Close(n.sub, why);
  // At once: the backoff of attempts at the old address does not apply.
  StartConnect(n);
}

void Engine::NodeLocatorHost::MasterAt(MasterTarget target, const std::string& why) {
  engine_.MasterAt(node(), std::move(target), why);
}

void Engine::NodeLocatorHost::Unlocated(const std::string& why) { node().queue.OpenBreaker(why); }

void Engine::NodeLocatorHost::FirstAttemptDone() { engine_.FirstConnectDone(node()); }

void Engine::NodeLocatorHost::Watch(const Connection& c, uint32_t sub, bool add, bool writable) {
  engine_.poller_.Register(c, index_, Poller::kLocator, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD,
                           writable, sub);
}

void Engine::NodeLocatorHost::Unwatch(const Connection& c) { engine_.poller_.Unregister(c.fd()); }

Connection::Progress Engine::NodeLocatorHost::Io(Connection& c, uint32_t sub, uint32_t events,
                                                 std::vector<Reply>* messages) {
  return engine_.poller_.SideIo(c, index_, Poller::kLocator, events, messages, sub);
}

bool Engine::NodeLocatorHost::MasterConnected() const { return node().cmd.ready(); }

bool Engine::NodeLocatorHost::stopping() const { return engine_.stopping(); }

int Engine::NodeLocatorHost::AddShard(std::unique_ptr<Locator> locator, const std::string& name) {
  return engine_.AddShard(node(), std::move(locator), name);
}

void Engine::NodeLocatorHost::Query(const Command& command, NodeCallback done) {
  // Node index_ is one of the Transport's nodes (a shard's locator asks
  // nothing); a command without a slot goes on its own connection.
  Command c = command;
  c.slot = -1;
  c.asking_at.clear();
  engine_.Send(index_, c, std::move(done));
}

void Engine::NodeLocatorHost::NextAttemptAt(MasterTarget target) {
  Node& n = node();
  n.queue.SetAddress(JoinHostPort(target.host, target.port));
  n.cmd.Retarget(target.host, target.port, target.make_stream);
  n.sub.conn.Retarget(target.host, target.port, std::move(target.make_stream));
}

void Engine::NodeLocatorHost::ShardState(int shard, ShardHealth* out) const {
  engine_.ShardState(shard, out);
}

// ---- Routing by key (a cluster node's masters) -------------------------------------------

Engine::Node& Engine::Route(int node, const Command& command) {
  Node& home = NodeAt(node);
  if (!home.routes) return home;
  if (command.after != 0) {
    // Behind the command it follows, on that command's connection while it
    // is still that master's (else as any command: by its slot).
    const int i = static_cast<int>(command.after & kConnectionNodeMask);
    if (i < node_count() && NodeAt(i).owner == node && NodeAt(i).queue.Holds(command.after)) {
      return NodeAt(i);
    }
  }
  const int i = home.locator->Route(command.slot, command.asking_at);
  return i >= 0 && i < node_count() ? NodeAt(i) : home;
}

void Engine::NoteRedirects(Node& n, const Reply& reply) {
  if (reply.type == Reply::Type::kArray) {
    // A command of several (ASKING, then the command): each part.
    for (const Reply& part : reply.elements) NoteRedirects(n, part);
    return;
  }
  if (!reply.is_error()) return;
  std::optional<Redirect> r = ParseRedirect(reply.str);
  if (!r.has_value()) return;
  Locator& locator = *NodeAt(n.owner).locator;
  if (r->ask) {
    locator.Asked(r->host, r->port);
  } else {
    locator.Moved(r->slot, r->host, r->port);
  }
}

}  // namespace redlock::internal
