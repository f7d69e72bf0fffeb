// The engine's side of each node's Locator (locator.h): where the locator
// says the master is, the node's connections go; while it cannot say, the
// node's breaker is open with its reason. The locator's own connections
// (a Sentinel-managed node's, one per Sentinel) are polled with the others.

#include <sys/epoll.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/engine_node.h"
#include "redlock/internal/url.h"

namespace redlock::internal {

void Engine::MasterAt(Node& n, MasterTarget target, const std::string& why) {
  const std::string address = JoinHostPort(target.host, target.port);
  bool moved;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    moved = n.address != address;
    n.address = address;
  }
  // The same master: the next attempt comes after the usual backoff.
  if (!moved) return;
  n.cmd.Retarget(target.host, target.port, target.make_stream);
  n.sub.Retarget(target.host, target.port, std::move(target.make_stream));
  if (n.cmd.state() != Connection::State::kDisconnected) {
    Disconnect(n, why, /*ask_locator=*/false);
  }
  if (n.sub.state() != Connection::State::kDisconnected) SubClose(n, why);
  // At once: the backoff of attempts at the old address does not apply.
  StartConnect(n);
}

void Engine::NodeLocatorHost::MasterAt(MasterTarget target, const std::string& why) {
  engine_.MasterAt(node_, std::move(target), why);
}

void Engine::NodeLocatorHost::Unlocated(const std::string& why) {
  std::lock_guard<std::mutex> lock(node_.mu);
  engine_.OpenBreakerLocked(node_, why);
}

void Engine::NodeLocatorHost::FirstAttemptDone() { engine_.FirstConnectDone(node_); }

void Engine::NodeLocatorHost::Watch(const Connection& c, uint32_t sub, bool add, bool writable) {
  engine_.Register(c, node_.index, kLocatorEvents, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, writable,
                   sub);
}

void Engine::NodeLocatorHost::Unwatch(const Connection& c) {
  if (c.fd() >= 0) epoll_ctl(engine_.epoll_fd_, EPOLL_CTL_DEL, c.fd(), nullptr);
}

Connection::Progress Engine::NodeLocatorHost::Io(Connection& c, uint32_t sub, uint32_t events,
                                                 std::vector<Reply>* messages) {
  return engine_.SideConnectionIo(c, node_.index, kLocatorEvents, events, messages, sub);
}

bool Engine::NodeLocatorHost::MasterConnected() const { return node_.cmd.ready(); }

bool Engine::NodeLocatorHost::stopping() const { return engine_.stopping(); }

}  // namespace redlock::internal
