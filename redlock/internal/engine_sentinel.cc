// Sentinel discovery for a node written as redis+sentinel://: one connection
// to one of the node's Sentinels asks where the master is in its handshake
// (SENTINEL get-master-addr-by-name), then stays subscribed to
// +switch-master. A failover is a reconnect of the node's connections to the
// new master; a failed connection to the master asks the Sentinels again.
//
// Not a safety mechanism: a promoted replica may not have a key its master
// granted. Options::durability is what makes a node's vote survive that.

#include <sys/epoll.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/engine_node.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

constexpr absl::string_view kSwitchMaster = "+switch-master";

std::string HostPort(const std::string& host, int port) {
  Endpoint e;
  e.host = host;
  e.port = port;
  return e.ToString();
}

}  // namespace

void Engine::SentinelStart(Node& n) {
  if (stopping()) return;
  const std::vector<SentinelAddress>& all = n.endpoint.sentinels;
  const SentinelAddress& at = all[n.sentinel_at % all.size()];
  n.sentinel.Retarget(at.host, at.port);
  Endpoint login;
  login.username = n.endpoint.sentinel_username;
  login.password = n.endpoint.sentinel_password;
  std::vector<HandshakeStep> steps = LoginSteps(login);
  HandshakeStep ask;
  AppendCommand(&ask.payload, {"SENTINEL", "get-master-addr-by-name", n.endpoint.sentinel_master});
  ask.check = [&n](const Reply& r) -> std::string {
    if (r.is_error()) return HandshakeError("SENTINEL get-master-addr-by-name", r);
    if (r.is_nil()) {
      return absl::StrCat("the Sentinel knows no master named \"", n.endpoint.sentinel_master,
                          "\"");
    }
    int port = 0;
    if (r.type != Reply::Type::kArray || r.elements.size() != 2 ||
        r.elements[0].type != Reply::Type::kString || r.elements[0].str.empty() ||
        !absl::SimpleAtoi(r.elements[1].str, &port) || port < 1 || port > 65535) {
      return absl::StrCat("SENTINEL get-master-addr-by-name returned ", r.Describe());
    }
    n.said_host = r.elements[0].str;
    n.said_port = port;
    return "";
  };
  steps.push_back(std::move(ask));
  std::string why;
  if (!n.sentinel.Start(std::move(steps), &why)) {
    SentinelFail(n, why);
    return;
  }
  Register(n.sentinel, n.index, kSentinelEvents, EPOLL_CTL_ADD, /*writable=*/true);
}

void Engine::OnSentinelIo(Node& n, uint32_t events) {
  std::vector<Reply> messages;
  Connection::Progress p =
      SideConnectionIo(n.sentinel, n.index, kSentinelEvents, events, &messages);
  if (!p.failure.empty()) {
    SentinelFail(n, p.failure);
    return;
  }
  if (p.ready) {
    n.sentinel_errors.clear();
    std::string subscribe = EncodeCommand({"SUBSCRIBE", std::string(kSwitchMaster)});
    Connection::Progress w = n.sentinel.Write(&subscribe);
    if (!w.failure.empty() || !subscribe.empty()) {
      SentinelFail(n, w.failure.empty() ? "could not subscribe to +switch-master" : w.failure);
      return;
    }
    MasterAt(n, n.said_host, n.said_port, "");
  }
  for (const Reply& m : messages) {
    // ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"]
    if (m.type != Reply::Type::kArray || m.elements.size() != 3 || m.elements[0].str != "message" ||
        m.elements[1].str != kSwitchMaster) {
      continue;  // the subscription's confirmation
    }
    std::vector<std::string> f = absl::StrSplit(m.elements[2].str, ' ');
    int port = 0;
    if (f.size() != 5 || f[0] != n.endpoint.sentinel_master || !absl::SimpleAtoi(f[4], &port)) {
      continue;  // another master of this Sentinel
    }
    MasterAt(n, f[3], port,
             absl::StrCat("failover: the Sentinels moved master \"", f[0], "\" from ", f[1], ":",
                          f[2], " to ", f[3], ":", f[4], "; reconnecting"));
  }
}

void Engine::MasterAt(Node& n, const std::string& host, int port, const std::string& why) {
  const std::string address = HostPort(host, port);
  bool moved;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    moved = n.address != address;
    n.address = address;
  }
  n.master_known = true;
  // The same master: the next attempt comes after the usual backoff.
  if (!moved) return;
  n.cmd.Retarget(host, port);
  n.sub.Retarget(host, port);
  const std::string reason =
      why.empty() ? absl::StrCat("the Sentinels name ", address, " as the master now") : why;
  if (n.cmd.state() != Connection::State::kDisconnected) {
    Disconnect(n, reason, /*ask_sentinel=*/false);
  }
  if (n.sub.state() != Connection::State::kDisconnected) SubClose(n, reason);
  // At once: the backoff of attempts at the old address does not apply.
  StartConnect(n);
}

void Engine::SentinelMaintain(Node& n, TimePoint now) {
  if (stopping()) return;
  switch (n.sentinel.state()) {
    case Connection::State::kDisconnected:
      if (now >= n.sentinel.next_connect()) SentinelStart(n);
      break;
    case Connection::State::kReady:
      break;
    default:
      if (now >= n.sentinel.connect_deadline()) {
        SentinelFail(
            n, absl::StrCat("no answer within ", absl::FormatDuration(config_.connect_timeout)));
      }
      break;
  }
}

void Engine::SentinelFail(Node& n, const std::string& why) {
  const std::vector<SentinelAddress>& all = n.endpoint.sentinels;
  const size_t i = n.sentinel_at % all.size();
  n.sentinel_errors.resize(all.size());
  n.sentinel_errors[i] = absl::StrCat("Sentinel ", HostPort(all[i].host, all[i].port), ": ", why);
  SentinelClose(n);
  n.sentinel_at = (n.sentinel_at + 1) % all.size();
  if (n.master_known) return;  // the master is still reachable: keep using it
  // Each Sentinel tried so far, and why it did not say.
  std::vector<std::string> said;
  for (const std::string& e : n.sentinel_errors) {
    if (!e.empty()) said.push_back(e);
  }
  const bool all_tried = said.size() == all.size();
  {
    std::lock_guard<std::mutex> lock(n.mu);
    OpenBreakerLocked(n, absl::StrCat("cannot learn where master \"", n.endpoint.sentinel_master,
                                      "\" is: ", absl::StrJoin(said, "; ")));
  }
  // Create waits for every node's first attempt: here, one at every Sentinel.
  if (all_tried) FirstConnectDone(n);
}

void Engine::SentinelClose(Node& n) {
  if (n.sentinel.fd() >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, n.sentinel.fd(), nullptr);
  n.sentinel.Close();
}

}  // namespace redlock::internal
