// The life of each node's command connection: connecting, the handshake
// (login, role, identity, the client's setup commands), becoming ready,
// failing, and the maintenance that reconnects it or replaces a stale one.
// Requests on it are in engine_node.cc.

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

// ---- Epoll registration ------------------------------------------------------------

// epoll data: generation << 32 | sub << 20 | node << 2 | kind (1 the command
// connection, 2 a connection of the node's locator, `sub` saying which, 3 the subscriber
// connection; 0 is the eventfd).
uint64_t EngineEventData(uint32_t generation, int node, uint64_t kind, uint32_t sub) {
  return (uint64_t{generation} << 32) | (uint64_t{sub} << 20) | (static_cast<uint64_t>(node) << 2) |
         kind;
}

void Engine::Register(const Connection& c, int node, uint64_t kind, int op, bool writable,
                      uint32_t sub) {
  if (c.fd() < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN | (writable ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  ev.data.u64 = EngineEventData(c.generation(), node, kind, sub);
  epoll_ctl(epoll_fd_, op, c.fd(), &ev);
}

void Engine::WatchWritable(Node& n, bool on) {
  Register(n.cmd, n.index, kCommandEvents, EPOLL_CTL_MOD, on);
}

Connection::Progress Engine::SideConnectionIo(Connection& c, int node, uint64_t kind,
                                              uint32_t events, std::vector<Reply>* messages,
                                              uint32_t sub) {
  const Connection::State before = c.state();
  Connection::Progress p = c.HandleIo(events, messages);
  if (p.failure.empty() &&
      (before == Connection::State::kConnecting || before == Connection::State::kEstablishing) &&
      c.state() != Connection::State::kConnecting) {
    // Connected or establishing the stream (TLS): writable events only while
    // the stream asks for them.
    Register(c, node, kind, EPOLL_CTL_MOD, p.want_write, sub);
  }
  return p;
}

// ---- Identity ----------------------------------------------------------------------

std::string Engine::CheckIdentity(int node, const std::string& run_id) {
  if (run_id.empty()) return "";
  // Connections of one cluster node may reach one server twice (the member
  // asked for the slot map is also a master): one vote all the same.
  const int owner = NodeAt(node).owner;
  std::lock_guard<std::mutex> identity(identity_mu_);
  const int count = node_count();
  for (int j = 0; j < count; ++j) {
    if (j == node || run_ids_[static_cast<size_t>(j)] != run_id) continue;
    const int other = NodeAt(j).owner;
    if (other == owner) continue;
    duplicates_.emplace_back(other, owner);
    return absl::StrCat("the same server as node ", NodeAt(other).name, " (run_id ", run_id,
                        "): one server listed twice would vote twice; refused");
  }
  run_ids_[static_cast<size_t>(node)] = run_id;
  unverified_[static_cast<size_t>(owner)].clear();
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
  std::lock_guard<std::mutex> identity(identity_mu_);
  unverified_[static_cast<size_t>(owner)] = message;
  return message;
}

std::vector<std::string> Engine::UnverifiedNodes() const {
  std::lock_guard<std::mutex> identity(identity_mu_);
  return unverified_;
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
  {
    std::lock_guard<std::mutex> lock(n.mu);
    n.state = Node::State::kConnecting;
    // The node's index in the low bits: a command that follows one sent on
    // this connection is routed here (Engine::Route).
    n.conn_id = (next_connection_id_.fetch_add(1, std::memory_order_relaxed) << kEngineNodeBits) |
                static_cast<ConnectionId>(n.index);
    n.write_error.clear();
  }
  Register(n.cmd, n.index, kCommandEvents, EPOLL_CTL_ADD, /*writable=*/true);  // connect done
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
    std::lock_guard<std::mutex> lock(n.mu);
    n.state = Node::State::kHandshake;
    WatchWritable(n, p.want_write);
  }
  if (p.ready) OnReady(n);
  if (!n.replies.empty()) Dispatch(n, n.replies, &failure);
  if (!failure.empty()) {
    Disconnect(n, failure);
    return;
  }
  if ((events & EPOLLOUT) && n.cmd.ready()) {
    std::unique_lock<std::mutex> lock(n.mu);
    if (n.epollout && n.stream != nullptr) {
      n.epollout = false;
      WatchWritable(n, false);
      if (!n.writing) FlushSoonLocked(n, lock);
    }
  }
}

void Engine::OnReady(Node& n) {
  std::unique_lock<std::mutex> lock(n.mu);
  n.state = Node::State::kReady;
  NodeEventLocked(n, NodeEvent::Kind::kConnected, "");
  if (n.breaker_open) NodeEventLocked(n, NodeEvent::Kind::kBreakerClosed, "connected");
  n.stream = n.cmd.stream();
  n.transport = n.stream->Describe();
  WatchWritable(n, false);
  n.breaker_open = false;
  n.probe_in_flight = false;
  n.last_error.clear();
  // Requests made while connecting.
  auto waiting = std::move(n.waiting);
  n.waiting.clear();
  for (auto& [slot, payload] : waiting) {
    if (!slot->done) {  // its caller gave up (a timeout): never sent
      FreeSlotLocked(n, slot);
      continue;
    }
    n.fifo.push_back(slot);
    ++n.unwritten;
    n.out.append(payload);
  }
  if (!n.out.empty() && !n.writing && !n.epollout) FlushSoonLocked(n, lock);
  FirstConnectDone(n);
}

void Engine::FirstConnectDone(Node& n) {
  if (n.first_connect_reported) return;
  n.first_connect_reported = true;
  std::lock_guard<std::mutex> g(mu_);
  --first_connect_pending_;
  first_connect_cv_.notify_all();
}

void Engine::Disconnect(Node& n, const std::string& why, bool ask_locator) {
  std::vector<NodeCallback> failed;
  const int fd = n.cmd.fd();
  {
    std::lock_guard<std::mutex> lock(n.mu);
    if (n.state != Node::State::kDisconnected) {
      NodeEventLocked(n, NodeEvent::Kind::kDisconnected, why);
    }
    n.state = Node::State::kDisconnected;
    // A writer outside the lock keeps its own reference to the stream.
    n.stream.reset();
    n.out.clear();
    n.epollout = false;
    n.flush_at_turn_end = false;
    n.write_error.clear();
    for (Slot* slot : n.fifo) {
      if (slot->done) failed.push_back(std::move(slot->done));
      FreeSlotLocked(n, slot);
    }
    n.fifo.clear();
    n.expired = 0;
    n.unwritten = 0;
    for (auto& [slot, payload] : n.waiting) {
      if (slot->done) failed.push_back(std::move(slot->done));
      FreeSlotLocked(n, slot);
    }
    n.waiting.clear();
    n.probe_in_flight = false;
    OpenBreakerLocked(n, why);
  }
  {
    std::lock_guard<std::mutex> identity(identity_mu_);
    run_ids_[static_cast<size_t>(n.index)].clear();
  }
  if (fd >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
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
    std::string write_error;
    bool probe = false;
    bool stale = false;
    {
      std::lock_guard<std::mutex> lock(n.mu);
      write_error = n.write_error;
      // A probe counts against max_in_flight_per_node like any request; a
      // node with that many unanswered commands is not probed until it
      // answers some (each late reply triggers a probe).
      probe = n.state == Node::State::kReady && n.breaker_open && !n.probe_in_flight &&
              now >= n.next_probe && n.load() < config_.max_in_flight_per_node;
      stale = n.state == Node::State::kReady && n.breaker_open && !n.fifo.empty() &&
              now - std::max(n.last_reply_at, n.breaker_opened_at) >=
                  absl::ToChronoNanoseconds(kStaleConnection);
    }
    if (!write_error.empty()) {
      Disconnect(n, write_error);
    } else {
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
          if (stale) {
            // Silent for long with the breaker open: start afresh rather than
            // wait behind a connection that may be stuck in TCP retransmission
            // backoff (a healed partition) or behind a long backlog.
            Disconnect(n, absl::StrCat("no reply for ", absl::FormatDuration(kStaleConnection),
                                       "; reconnecting"));
          } else if (probe) {
            SendProbe(n);
          }
          break;
      }
    }
    if (!n.shard()) SubMaintain(n, now);
    n.locator->Maintain(now);
  }
}

}  // namespace redlock::internal
