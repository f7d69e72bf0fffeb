// Requests on each node's command connection: sending (in order, never
// re-sent), writing once per turn, dispatching replies to their requests,
// deadlines, and the circuit breaker with its probes. The connection's life
// is in engine_connection.cc, the subscriber connection in
// engine_subscriber.cc, the locator's side in engine_locator.cc.

#include "redlock/internal/engine_node.h"

#include <sys/epoll.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

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
  slot->expect = 0;
  slot->op = "";
  slot->echo.clear();
  slot->parts_left = 1;
  slot->parts.clear();
  slot->drain = false;
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

ConnectionId Engine::Send(int node, const Command& command, NodeCallback done) {
  Node& n = Route(node, command);
  std::unique_lock<std::mutex> lock(n.mu);
  // Follows a command queued on the node's current connection: it goes
  // behind it, on that connection, as long as there is one.
  const bool follows =
      command.after != 0 && command.after == n.conn_id && n.state != Node::State::kDisconnected;
  if (command.pinned && !follows) {
    lock.unlock();
    FailLater(std::move(done),
              absl::UnavailableError(
                  absl::StrCat("the connection ", command.op,
                               " must follow is gone (a WATCH holds only on its own connection)")));
    return 0;
  }
  if (stopping() && !follows) {
    lock.unlock();
    FailLater(std::move(done), absl::CancelledError("the client is shutting down"));
    return 0;
  }
  std::string why;
  if (n.load() >= config_.max_in_flight_per_node * (follows ? 2 : 1)) {
    why = absl::StrCat(n.load(), " commands already waiting for this node (",
                       n.breaker_open ? n.last_error : "it is slow", ")");
  } else if (n.state == Node::State::kDisconnected || (n.breaker_open && !follows)) {
    why = n.last_error.empty() ? std::string("not connected") : n.last_error;
    if (n.breaker_open) absl::StrAppend(&why, " (node marked down until a probe succeeds)");
  }
  if (!why.empty()) {
    lock.unlock();
    FailLater(std::move(done), absl::UnavailableError(why));
    return 0;
  }
  Slot* slot = NewSlotLocked(n);
  slot->done = std::move(done);
  slot->deadline = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
  slot->expect = command.expect;
  slot->op = command.op;
  slot->parts_left = std::max<uint16_t>(command.replies, 1);
  slot->drain = command.drain;
  const ConnectionId conn = n.conn_id;
  if (n.state != Node::State::kReady) {
    // The connection is still being established: sent once it is ready.
    n.waiting.emplace_back(slot, command.payload);
    return conn;
  }
  EnqueueLocked(n, lock, slot, command.payload);
  return conn;
}

bool Engine::Accepts(int node) const {
  // A cluster node: its own connection (to the member it asks for the slot
  // map) says whether the cluster is reachable; each master's breaker
  // answers for its slots.
  const Node& n = NodeAt(node);
  std::lock_guard<std::mutex> lock(n.mu);
  return n.state != Node::State::kDisconnected && !n.breaker_open;
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
  FlushSoonLocked(n, lock);
}

void Engine::FlushSoonLocked(Node& n, std::unique_lock<std::mutex>& lock) {
  if (in_turn_.load(std::memory_order_acquire)) {
    n.flush_at_turn_end = true;
    return;
  }
  FlushLocked(n, lock);
}

void Engine::FlushTurn() {
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    std::unique_lock<std::mutex> lock(n.mu);
    if (!n.flush_at_turn_end) continue;
    n.flush_at_turn_end = false;
    if (!n.writing && !n.epollout) FlushLocked(n, lock);
  }
}

void Engine::FlushLocked(Node& n, std::unique_lock<std::mutex>& lock) {
  n.writing = true;
  std::string buf = std::move(n.spare);
  for (int rounds = 0; rounds < 64 && !n.out.empty() && n.stream != nullptr; ++rounds) {
    buf.clear();
    buf.swap(n.out);  // n.out takes buf's capacity: appends do not allocate
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
  // Kept for the next flush, unless a burst made it large.
  constexpr size_t kMaxSpare = 1 << 20;
  buf.clear();
  if (buf.capacity() <= kMaxSpare) n.spare = std::move(buf);
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
  for (int i = 0; i < node_count(); ++i) {
    std::vector<NodeEvent> events;
    {
      Node& n = NodeAt(i);
      std::lock_guard<std::mutex> lock(n.mu);
      events.swap(n.events);
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

void Engine::Dispatch(Node& n, std::vector<Reply>& replies, std::string* failure) {
  std::vector<std::pair<NodeCallback, Reply>> ready;
  {
    std::unique_lock<std::mutex> lock(n.mu);
    ready.swap(n.ready);
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
      if (slot->parts_left > 1) {
        // A command of several (Command::replies): the last reply completes it.
        --slot->parts_left;
        slot->parts.push_back(std::move(reply));
        continue;
      }
      if (!slot->parts.empty()) {
        slot->parts.push_back(std::move(reply));
        reply = Reply::Array(std::move(slot->parts));
        slot->parts.clear();
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
        // Passed over by a shutdown (Command::drain), not by its deadline
        // (which takes `done`): it still gets its answer.
        if (slot->drain && slot->done) ready.emplace_back(std::move(slot->done), std::move(reply));
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
        case Slot::Kind::kRequest:
          // Whatever it is (a NOSCRIPT included): its caller decides.
          if (slot->done) ready.emplace_back(std::move(slot->done), std::move(reply));
          break;
      }
      FreeSlotLocked(n, slot);
    }
  }
  for (auto& [done, reply] : ready) {
    // A cluster's master redirecting the command: its locator learns where
    // the slot is before the command's caller decides what to do.
    if (n.routes || n.shard()) NoteRedirects(n, reply);
    done(std::move(reply));
  }
  ready.clear();
  std::lock_guard<std::mutex> lock(n.mu);
  if (n.ready.capacity() < ready.capacity()) n.ready.swap(ready);
}

void Engine::ExpireDeadlines(TimePoint now) {
  std::vector<NodeCallback> expired;
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
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
      OpenBreakerLocked(
          n, absl::StrCat("no reply within ", absl::FormatDuration(config_.node_timeout)));
    }
  }
  if (expired.empty()) return;
  std::string why = absl::StrCat("no reply within ", absl::FormatDuration(config_.node_timeout));
  for (auto& done : expired) done(absl::UnavailableError(why));
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
