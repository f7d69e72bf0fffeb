// The life of each node's command connection: connecting, the handshake
// (login, role, identity, the client's setup commands), becoming ready,
// failing, and the maintenance that reconnects it or replaces a stale one.
// Requests on it are its queue's (node_queue.cc).

#include <sys/epoll.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/engine_node.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

// The run_id line of an INFO reply ("" if absent).
std::string RunIdFromInfo(absl::string_view info) {
  constexpr absl::string_view kKey = "run_id:";
  size_t pos = info.find(kKey);
  if (pos == absl::string_view::npos) return "";
  absl::string_view rest = info.substr(pos + kKey.size());
  return std::string(rest.substr(0, rest.find_first_of("\r\n")));
}

}  // namespace

// ---- Identity ----------------------------------------------------------------------

std::string Engine::CheckIdentity(int node, const std::string& run_id) {
  if (run_id.empty()) return "";
  // Connections of one cluster node may reach one server twice (the member
  // asked for the slot map is also a master): one vote all the same.
  const int owner = NodeAt(node).owner;
  std::lock_guard<std::mutex> identity(identities_.mu);
  const int count = node_count();
  for (int j = 0; j < count; ++j) {
    if (j == node || identities_.run_ids[static_cast<size_t>(j)] != run_id) continue;
    const int other = NodeAt(j).owner;
    if (other == owner) continue;
    identities_.duplicates.emplace_back(other, owner);
    return absl::StrCat("the same server as node ", NodeAt(other).name, " (run_id ", run_id,
                        "): one server listed twice would vote twice; refused");
  }
  identities_.run_ids[static_cast<size_t>(node)] = run_id;
  identities_.unverified[static_cast<size_t>(owner)].clear();
  return "";
}

std::string Engine::UnknownIdentity(int node, const std::string& why) {
  // One node cannot be listed twice; and the user may vouch for the list.
  if (!config_.require_identity || size() < 2) return "";
  const int owner = NodeAt(node).owner;
  const Endpoint& e = NodeAt(owner).endpoint;
  std::string message = absl::StrCat(
      "cannot check that this server is not also another entry of the node list (", why,
      "): one server listed twice would vote twice; refused. Grant the user INFO (ACL SETUSER ",
      e.username.empty() ? "default" : e.username,
      " +info) or set Options::require_node_identity = false");
  std::lock_guard<std::mutex> identity(identities_.mu);
  identities_.unverified[static_cast<size_t>(owner)] = message;
  return message;
}

std::vector<std::string> Engine::UnverifiedNodes() const {
  std::lock_guard<std::mutex> identity(identities_.mu);
  return identities_.unverified;
}

// ---- Connecting ------------------------------------------------------------------------

std::vector<HandshakeStep> Engine::CommandHandshake(Node& n) {
  std::vector<HandshakeStep> steps = LoginSteps(n.endpoint);
  // What the node's scheme checks on its master (Sentinel: ROLE).
  n.locator->AddMasterChecks(&steps);
  // The server's run_id: two entries of the node list that reach one server
  // (two names, a proxy, a port forward) must not give it two votes.
  HandshakeStep info;
  AppendCommand(&info.payload, {"INFO", "server"});
  const int index = n.index;
  info.check = [this, index](const Reply& r) -> std::string {
    if (r.is_error()) {
      if (absl::StrContains(r.str, "NOAUTH")) return HandshakeError("INFO", r);
      // An ACL user without INFO (it is in @dangerous).
      return UnknownIdentity(index, absl::StrCat("INFO failed: ", r.str));
    }
    if (r.type != Reply::Type::kString) return "INFO returned " + r.Describe();
    std::string run_id = RunIdFromInfo(r.str);
    if (run_id.empty()) return UnknownIdentity(index, "INFO server has no run_id");
    return CheckIdentity(index, run_id);
  };
  steps.push_back(std::move(info));
  // What the client runs on every connection before any request.
  if (config_.setup) {
    std::vector<HandshakeStep> setup = config_.setup(n.owner);
    steps.insert(steps.end(), setup.begin(), setup.end());
  }
  return steps;
}

void Engine::StartConnect(Node& n) {
  if (stopping()) return;
  if (!n.locator->Known()) {
    // Connects once the locator has named the master (MasterAt).
    n.locator->Locate(Clock::now());
    return;
  }
  std::string why;
  if (!n.cmd.Start(CommandHandshake(n), &why)) {
    Disconnect(n, why);
    return;
  }
  // The node's index in the low bits: a command that follows one sent on
  // this connection is routed here (Engine::Route).
  n.queue.Connecting(
      (next_connection_id_.fetch_add(1, std::memory_order_relaxed) << Poller::kNodeBits) |
      static_cast<ConnectionId>(n.index));
  poller_.Register(n.cmd, n.index, Poller::kCommand, EPOLL_CTL_ADD,
                   /*writable=*/true);  // connect done
}

void Engine::OnCommandIo(Node& n, uint32_t events) {
  const Connection::State before = n.cmd.state();
  n.replies.clear();
  Connection::Progress p = n.cmd.HandleIo(events, &n.replies);
  std::string failure = p.failure;
  if (failure.empty() && n.cmd.state() != Connection::State::kConnecting && !n.cmd.ready() &&
      (before == Connection::State::kConnecting || before == Connection::State::kEstablishing)) {
    // Connected, establishing the stream or in the handshake: readable
    // events, and writable ones only while the stream asks for them.
    n.queue.Handshaking(p.want_write);
  }
  if (p.ready) OnReady(n);
  if (!n.replies.empty()) n.queue.Dispatch(n.replies, n.routes || n.shard(), &failure);
  if (!failure.empty()) {
    Disconnect(n, failure);
    return;
  }
  if ((events & EPOLLOUT) && n.cmd.ready()) n.queue.OnWritable();
}

void Engine::OnReady(Node& n) {
  // The requests made while connecting go out now.
  n.queue.Ready(n.cmd.stream());
  FirstConnectDone(n);
}

void Engine::FirstConnectDone(Node& n) {
  if (n.first_connect_reported) return;
  n.first_connect_reported = true;
  std::lock_guard<std::mutex> g(first_.mu);
  --first_.pending;
  first_.cv.notify_all();
}

void Engine::Disconnect(Node& n, const std::string& why, bool ask_locator) {
  std::vector<NodeCallback> failed;
  const int fd = n.cmd.fd();
  n.queue.Disconnected(why, &failed);
  {
    std::lock_guard<std::mutex> identity(identities_.mu);
    identities_.run_ids[static_cast<size_t>(n.index)].clear();
  }
  poller_.Unregister(fd);
  n.cmd.Close();
  FirstConnectDone(n);
  // The master may have moved: the locator looks again before the next
  // attempt (a static address has nothing to look for).
  if (ask_locator) n.locator->MasterLost();
  absl::Status status = stopping() ? absl::CancelledError("the client is shutting down")
                                   : absl::UnavailableError(why);
  for (auto& done : failed) done(status);
}

void Engine::MaintainNodes(TimePoint now) {
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    MaintainCommand(n, now);
    if (!n.shard() && n.locator->Known()) subscriber_.Maintain(n.sub, n.endpoint, n.index, now);
    n.locator->Maintain(now);
  }
}

void Engine::MaintainCommand(Node& n, TimePoint now) {
  const NodeQueue::Maintenance m = n.queue.Maintain(now);
  if (!m.write_error.empty()) {
    Disconnect(n, m.write_error);
    return;
  }
  switch (n.cmd.state()) {
    case Connection::State::kDisconnected:
      if (now >= n.cmd.next_connect()) StartConnect(n);
      break;
    case Connection::State::kEstablishing:
      if (now >= n.cmd.connect_deadline()) {
        // Only TLS streams take time to establish.
        Disconnect(n, absl::StrCat("TLS handshake not finished within ",
                                   absl::FormatDuration(config_.connect_timeout),
                                   ": the node accepted the connection but does not answer "
                                   "the handshake (a plaintext port? use redis:// for it; or "
                                   "the node is stopped)"));
      }
      break;
    case Connection::State::kConnecting:
    case Connection::State::kHandshake:
      if (now >= n.cmd.connect_deadline()) {
        Disconnect(n, absl::StrCat("could not connect within ",
                                   absl::FormatDuration(config_.connect_timeout)));
      }
      break;
    case Connection::State::kReady:
      if (m.stale) {
        // Silent for long with the breaker open: start afresh rather than
        // wait behind a connection that may be stuck in TCP retransmission
        // backoff (a healed partition) or behind a long backlog.
        Disconnect(n, absl::StrCat("no reply for ", absl::FormatDuration(kStaleConnection),
                                   "; reconnecting"));
      } else if (m.probe) {
        n.queue.SendProbe(next_probe_id_.fetch_add(1));
      }
      break;
  }
}

}  // namespace redlock::internal
