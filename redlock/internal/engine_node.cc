// The engine's nodes: the command connection (requests, replies in order,
// deadlines, circuit breaker, identity). The subscriber connection is in
// engine_subscriber.cc, Sentinel discovery in engine_sentinel.cc.

#include "redlock/internal/engine_node.h"

#include <sys/epoll.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

std::string FormatMs(absl::Duration d) { return absl::FormatDuration(d); }

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
// connection, 2 a Sentinel connection, `sub` saying which, 3 the subscriber
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

// ---- Requests --------------------------------------------------------------------------

Engine::Slot* Engine::NewSlotLocked(Node& n) {
  if (n.free_slots.empty()) return new Slot();
  Slot* s = n.free_slots.back();
  n.free_slots.pop_back();
  return s;
}

void Engine::FreeSlotLocked(Node& n, Slot* slot) {
  slot->kind = Slot::Kind::kRequest;
  slot->done = nullptr;
  slot->deadline = TimePoint::max();
  slot->cleanup = false;
  slot->expect = 0;
  slot->op = "";
  slot->script = nullptr;
  slot->payload.clear();
  slot->echo.clear();
  // Bounded: a burst leaves at most this many spare requests behind.
  if (n.free_slots.size() < 1024) {
    n.free_slots.push_back(slot);
  } else {
    delete slot;
  }
}

bool Engine::ReplyFits(const Slot& slot, const Reply& reply) {
  if (slot.kind == Slot::Kind::kProbe) {
    return reply.is_error() || (reply.type == Reply::Type::kString && reply.str == slot.echo);
  }
  return internal::ReplyFits(slot.expect, reply);
}

void Engine::Send(int node, const Command& command, NodeCallback done) {
  Node& n = *nodes_[static_cast<size_t>(node)];
  if (stopping()) {
    FailLater(std::move(done), absl::CancelledError("the client is shutting down"));
    return;
  }
  std::unique_lock<std::mutex> lock(n.mu);
  if (n.load() >= config_.max_in_flight_per_node) {
    std::string why = absl::StrCat(n.load(), " commands already waiting for this node (",
                                   n.breaker_open ? n.last_error : "it is slow", ")");
    lock.unlock();
    FailLater(std::move(done), absl::UnavailableError(why));
    return;
  }
  bool usable = n.state != Node::State::kDisconnected;
  // A cleanup goes out behind a SET that may still wait on this connection,
  // unless that SET's attempt began after the breaker opened (never sent).
  if (n.breaker_open && !(command.cleanup && n.state == Node::State::kReady &&
                          command.since <= n.breaker_opened_at)) {
    usable = false;
  }
  if (!usable) {
    std::string why = n.last_error.empty() ? std::string("not connected") : n.last_error;
    if (n.breaker_open) absl::StrAppend(&why, " (node marked down until a probe succeeds)");
    lock.unlock();
    FailLater(std::move(done), absl::UnavailableError(why));
    return;
  }
  Slot* slot = NewSlotLocked(n);
  slot->done = std::move(done);
  slot->deadline = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
  slot->cleanup = command.cleanup;
  slot->expect = command.expect;
  slot->op = command.op;
  if (command.script != nullptr) {
    slot->script = command.script;
    slot->payload.assign(command.payload);
  }
  if (n.state != Node::State::kReady) {
    // The connection is still being established: sent once it is ready.
    n.waiting.emplace_back(slot, command.payload);
    return;
  }
  EnqueueLocked(n, lock, slot, command.payload);
}

void Engine::EnqueueLocked(Node& n, std::unique_lock<std::mutex>& lock, Slot* slot,
                           absl::string_view payload) {
  n.fifo.push_back(slot);
  ++n.unwritten;
  n.out.append(payload.data(), payload.size());
  // A write in progress takes it along; a blocked socket gets it when
  // writable; during a turn the poller writes it at the turn's end (read
  // under n.mu, so a turn that just ended has flushed or will see it).
  if (n.writing || n.epollout || n.flush_at_turn_end) return;
  if (in_turn_.load(std::memory_order_acquire)) {
    n.flush_at_turn_end = true;
    return;
  }
  FlushLocked(n, lock);
}

void Engine::FlushTurn() {
  for (auto& np : nodes_) {
    Node& n = *np;
    std::unique_lock<std::mutex> lock(n.mu);
    if (!n.flush_at_turn_end) continue;
    n.flush_at_turn_end = false;
    if (!n.writing && !n.epollout) FlushLocked(n, lock);
  }
}

void Engine::FlushLocked(Node& n, std::unique_lock<std::mutex>& lock) {
  n.writing = true;
  std::string buf;
  for (int rounds = 0; rounds < 64 && !n.out.empty() && n.stream != nullptr; ++rounds) {
    buf.clear();
    buf.swap(n.out);  // n.out keeps buf's old capacity
    std::shared_ptr<Stream> stream = n.stream;
    lock.unlock();
    Connection::Progress p = Connection::WriteSome(*stream, &buf);
    lock.lock();
    if (n.stream != stream) break;  // the connection was dropped meanwhile
    if (buf.empty()) {
      if (n.out.empty()) StampWrittenLocked(n);
      continue;
    }
    if (p.failure.empty()) {
      // The socket is full: the rest goes when it is writable again. The
      // node not reading is the node's problem: its deadlines run.
      StampWrittenLocked(n);
      n.out.insert(0, buf);
      n.epollout = true;
      WatchWritable(n, true);
    } else {
      n.write_error = p.failure;
      Wake();
    }
    break;
  }
  if (!n.out.empty() && !n.epollout && n.stream != nullptr && n.write_error.empty()) {
    // Bounded rounds exhausted with more queued: let the poller finish.
    n.epollout = true;
    WatchWritable(n, true);
  }
  n.writing = false;
}

void Engine::StampWrittenLocked(Node& n) {
  const TimePoint deadline = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
  for (size_t i = n.fifo.size() - std::min(n.unwritten, n.fifo.size()); i < n.fifo.size(); ++i) {
    n.fifo[i]->deadline = deadline;
  }
  n.unwritten = 0;
}

void Engine::NodeEventLocked(Node& n, NodeEvent::Kind kind, const std::string& detail) {
  if (!config_.on_node_event) return;
  n.events.push_back(NodeEvent{kind, n.name, detail});
  node_events_pending_.store(true, std::memory_order_release);
}

void Engine::EmitNodeEvents() {
  if (!node_events_pending_.exchange(false, std::memory_order_acq_rel)) return;
  for (auto& np : nodes_) {
    std::vector<NodeEvent> events;
    {
      std::lock_guard<std::mutex> lock(np->mu);
      events.swap(np->events);
    }
    for (const NodeEvent& e : events) config_.on_node_event(e);
  }
}

void Engine::OpenBreakerLocked(Node& n, const std::string& why) {
  n.last_error = why;
  if (!n.breaker_open) {
    NodeEventLocked(n, NodeEvent::Kind::kBreakerOpened, why);
    n.breaker_open = true;
    n.breaker_opened_at = Clock::now();
    n.next_probe = n.breaker_opened_at + absl::ToChronoNanoseconds(config_.breaker_probe_interval);
  }
}

// ---- The command connection -------------------------------------------------------------

std::string Engine::CheckIdentity(int node, const std::string& run_id) {
  if (run_id.empty()) return "";
  std::lock_guard<std::mutex> identity(identity_mu_);
  for (size_t j = 0; j < run_ids_.size(); ++j) {
    if (static_cast<int>(j) == node || run_ids_[j] != run_id) continue;
    duplicates_.emplace_back(static_cast<int>(j), node);
    return absl::StrCat("the same server as node ", nodes_[j]->name, " (run_id ", run_id,
                        "): one server listed twice would vote twice; refused");
  }
  run_ids_[static_cast<size_t>(node)] = run_id;
  unverified_[static_cast<size_t>(node)].clear();
  return "";
}

std::string Engine::UnknownIdentity(int node, const std::string& why) {
  // One node cannot be listed twice; and the user may vouch for the list.
  if (!config_.require_identity || size() < 2) return "";
  const Endpoint& e = nodes_[static_cast<size_t>(node)]->endpoint;
  std::string message = absl::StrCat(
      "cannot check that this server is not also another entry of the node list (", why,
      "): one server listed twice would vote twice; refused. Grant the user INFO (ACL SETUSER ",
      e.username.empty() ? "default" : e.username,
      " +info) or set Options::require_node_identity = false");
  std::lock_guard<std::mutex> identity(identity_mu_);
  unverified_[static_cast<size_t>(node)] = message;
  return message;
}

std::vector<std::string> Engine::UnverifiedNodes() const {
  std::lock_guard<std::mutex> identity(identity_mu_);
  return unverified_;
}

std::vector<HandshakeStep> Engine::CommandHandshake(Node& n) {
  std::vector<HandshakeStep> steps = LoginSteps(n.endpoint);
  if (n.endpoint.uses_sentinel()) {
    // What a Sentinel named may be stale (a failover since, the old master
    // back as a replica): only a master is used.
    HandshakeStep role;
    AppendCommand(&role.payload, {"ROLE"});
    role.check = [master = n.endpoint.sentinel_master](const Reply& r) -> std::string {
      if (r.is_error()) return HandshakeError("ROLE", r);
      if (r.type == Reply::Type::kArray && !r.elements.empty() && r.elements[0].str == "master") {
        return "";
      }
      return absl::StrCat(
          "a Sentinel named this server as the master \"", master, "\", but its ROLE is ",
          r.type == Reply::Type::kArray && !r.elements.empty() ? r.elements[0].str : r.Describe(),
          ": asking the Sentinels again");
    };
    steps.push_back(std::move(role));
  }
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
  for (const Script* s : AllScripts()) {
    HandshakeStep load;
    AppendCommand(&load.payload, {"SCRIPT", "LOAD", s->body});
    load.check = [s](const Reply& r) -> std::string {
      if (r.is_error()) return HandshakeError("SCRIPT LOAD", r);
      if (r.type == Reply::Type::kString && r.str == s->sha) return "";
      return absl::StrCat("SCRIPT LOAD of the ", s->name, " script returned ", r.Describe());
    };
    steps.push_back(std::move(load));
  }
  return steps;
}

void Engine::StartConnect(Node& n) {
  if (stopping()) return;
  if (n.endpoint.uses_sentinel() && !n.master_known) {
    // Connects once the Sentinels have named the master (MasterAt).
    SentinelRound(n, Clock::now());
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
      if (!n.writing) FlushLocked(n, lock);
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
    if (!slot->done && !slot->cleanup) {  // timed out, never sent
      FreeSlotLocked(n, slot);
      continue;
    }
    n.fifo.push_back(slot);
    ++n.unwritten;
    n.out.append(payload);
  }
  if (!n.out.empty() && !n.writing && !n.epollout) FlushLocked(n, lock);
  FirstConnectDone(n);
}

void Engine::FirstConnectDone(Node& n) {
  if (n.first_connect_reported) return;
  n.first_connect_reported = true;
  std::lock_guard<std::mutex> g(mu_);
  --first_connect_pending_;
  first_connect_cv_.notify_all();
}

void Engine::Dispatch(Node& n, std::vector<Reply>& replies, std::string* failure) {
  std::vector<std::pair<NodeCallback, Reply>> ready;
  {
    std::unique_lock<std::mutex> lock(n.mu);
    n.last_reply_at = Clock::now();
    for (Reply& reply : replies) {
      if (n.fifo.empty()) {
        *failure = absl::StrCat("unexpected reply from the node: ", reply.Describe());
        break;
      }
      Slot* slot = n.fifo.front();
      if (!ReplyFits(*slot, reply)) {
        // Left in the FIFO, so Disconnect fails its request with this message.
        *failure =
            absl::StrCat("the node sent ", reply.Describe(), ", which cannot answer ", slot->op,
                         " (not a Redis server, or its replies are out of step "
                         "with the requests): reconnecting");
        break;
      }
      n.fifo.pop_front();
      // Answered, so written (its writer may not have said so yet).
      n.unwritten = std::min(n.unwritten, n.fifo.size());
      if (n.expired > 0) {
        // Its deadline passed: the caller has counted it as a "no" already.
        // But the node answers again, in step with its requests: it is not
        // silent, so its breaker closes now (waiting for a probe would fail
        // every request meanwhile, thousands under load, for a node that
        // only stalled).
        --n.expired;
        if (slot->kind == Slot::Kind::kProbe) n.probe_in_flight = false;
        if (n.breaker_open) {
          NodeEventLocked(n, NodeEvent::Kind::kBreakerClosed, "answering again");
          n.breaker_open = false;
          n.last_error.clear();
        }
        FreeSlotLocked(n, slot);
        continue;
      }
      switch (slot->kind) {
        case Slot::Kind::kProbe:
          n.probe_in_flight = false;
          if (n.breaker_open) NodeEventLocked(n, NodeEvent::Kind::kBreakerClosed, "probe answered");
          n.breaker_open = false;
          n.last_error.clear();
          break;
        case Slot::Kind::kReload:
          break;
        case Slot::Kind::kRequest:
          if (reply.is_error() && slot->script != nullptr &&
              absl::StartsWith(reply.str, "NOSCRIPT") && slot->done) {
            // The node's script cache was flushed (SCRIPT FLUSH): send the
            // EVAL form and load the scripts again for the next requests.
            Command again;
            again.payload = slot->payload;
            again.script = slot->script;
            TimePoint deadline = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
            for (const Script* s : AllScripts()) {
              Slot* load = NewSlotLocked(n);
              load->kind = Slot::Kind::kReload;
              load->expect = kExpectString;
              load->op = "SCRIPT LOAD";
              load->deadline = deadline;
              n.fifo.push_back(load);
              ++n.unwritten;
              AppendCommand(&n.out, {"SCRIPT", "LOAD", s->body});
            }
            Slot* retry = NewSlotLocked(n);
            retry->done = std::move(slot->done);
            retry->deadline = deadline;
            retry->cleanup = slot->cleanup;
            retry->expect = slot->expect;
            retry->op = slot->op;
            n.fifo.push_back(retry);
            ++n.unwritten;
            n.out.append(EvalFallback(again));
            if (!n.writing && !n.epollout) FlushLocked(n, lock);
            break;
          }
          if (slot->done) ready.emplace_back(std::move(slot->done), std::move(reply));
          break;
      }
      FreeSlotLocked(n, slot);
    }
  }
  for (auto& [done, reply] : ready) done(std::move(reply));
}

void Engine::Disconnect(Node& n, const std::string& why, bool ask_sentinel) {
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
  // The master may have moved: ask the Sentinels again before the next
  // attempt.
  if (n.endpoint.uses_sentinel() && ask_sentinel) SentinelMasterLost(n);
  absl::Status status = stopping() ? absl::CancelledError("the client is shutting down")
                                   : absl::UnavailableError(why);
  for (auto& done : failed) done(status);
}

void Engine::ExpireDeadlines(TimePoint now) {
  std::vector<NodeCallback> expired;
  for (auto& np : nodes_) {
    Node& n = *np;
    // Replies already in the socket are not late: read them before expiring
    // anything (after a pause of this process, say, they arrived while
    // nobody was polling).
    bool due;
    {
      std::lock_guard<std::mutex> lock(n.mu);
      due = n.state == Node::State::kReady && n.expired + n.unwritten < n.fifo.size() &&
            n.fifo[n.expired]->deadline <= now;
    }
    if (due) OnCommandIo(n, EPOLLIN);
    std::lock_guard<std::mutex> lock(n.mu);
    bool missed = false;
    // Requests still waiting for this process to write them do not expire:
    // their deadline starts when they are on the wire.
    const size_t written = n.fifo.size() - n.unwritten;
    while (n.expired < written && n.fifo[n.expired]->deadline <= now) {
      Slot& slot = *n.fifo[n.expired];
      ++n.expired;
      if (slot.done) expired.push_back(std::move(slot.done));
      // An expired probe stays outstanding until its late reply: a new one
      // could not be answered before it anyway (one ordered stream).
      missed = true;
    }
    for (auto& w : n.waiting) {
      if (w.first->done && w.first->deadline <= now) expired.push_back(std::move(w.first->done));
    }
    // The breaker means "this node is silent": a node that keeps answering,
    // only late (CPU starved, or slower than node_timeout), misses those
    // deadlines (each a "no" vote) but is not shut out.
    if (missed && now - n.last_reply_at >= absl::ToChronoNanoseconds(config_.node_timeout)) {
      OpenBreakerLocked(n, absl::StrCat("no reply within ", FormatMs(config_.node_timeout)));
    }
  }
  if (expired.empty()) return;
  std::string why = absl::StrCat("no reply within ", FormatMs(config_.node_timeout));
  for (auto& done : expired) done(absl::UnavailableError(why));
}

void Engine::MaintainNodes(TimePoint now) {
  for (auto& np : nodes_) {
    Node& n = *np;
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
                                       FormatMs(config_.connect_timeout),
                                       ": the node accepted the connection but does not answer "
                                       "the handshake (a plaintext port? use redis:// for it; or "
                                       "the node is stopped)"));
          }
          break;
        case Connection::State::kConnecting:
        case Connection::State::kHandshake:
          if (now >= n.cmd.connect_deadline()) {
            Disconnect(
                n, absl::StrCat("could not connect within ", FormatMs(config_.connect_timeout)));
          }
          break;
        case Connection::State::kReady:
          if (stale) {
            // Silent for long with the breaker open: start afresh rather than
            // wait behind a connection that may be stuck in TCP retransmission
            // backoff (a healed partition) or behind a long backlog.
            Disconnect(n,
                       absl::StrCat("no reply for ", FormatMs(kStaleConnection), "; reconnecting"));
          } else if (probe) {
            SendProbe(n);
          }
          break;
      }
    }
    SubMaintain(n, now);
    if (n.endpoint.uses_sentinel()) SentinelMaintain(n, now);
  }
}

void Engine::SendProbe(Node& n) {
  std::unique_lock<std::mutex> lock(n.mu);
  Slot* slot = NewSlotLocked(n);
  slot->kind = Slot::Kind::kProbe;
  slot->op = "a PING probe";
  slot->deadline = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
  slot->echo = absl::StrCat("redlock-probe-", next_probe_id_.fetch_add(1));
  n.probe_in_flight = true;
  n.next_probe = Clock::now() + absl::ToChronoNanoseconds(config_.breaker_probe_interval);
  std::string ping = EncodeCommand({"PING", slot->echo});
  EnqueueLocked(n, lock, slot, ping);
}

}  // namespace redlock::internal
