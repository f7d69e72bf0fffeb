// One node's command connection as a queue (node_queue.h): sending (in
// order, never re-sent), writing once per turn, and the connection's life
// as the queue sees it. Replies, deadlines and the circuit breaker are in
// node_queue_answers.cc.

#include "redlock/internal/node_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

// Spare requests a burst may leave behind per node.
constexpr size_t kMaxSpareRequests = 1024;

}  // namespace

NodeQueue::NodeQueue(int index, const std::string* name, const Limits* limits, Host* host,
                     bool events)
    : index_(index), name_(*name), limits_(*limits), host_(*host), events_wanted_(events) {}

NodeQueue::~NodeQueue() {
  for (Request* r : requests_.free) delete r;
  for (Request* r : requests_.fifo) delete r;
  for (auto& [r, payload] : requests_.waiting) delete r;
}

// ---- Requests ------------------------------------------------------------------------

NodeQueue::Request* NodeQueue::NewRequestLocked() {
  if (requests_.free.empty()) return new Request();
  Request* r = requests_.free.back();
  requests_.free.pop_back();
  return r;
}

void NodeQueue::FreeRequestLocked(Request* r) {
  r->kind = Request::Kind::kRequest;
  r->done = nullptr;
  r->deadline = TimePoint::max();
  r->expect = 0;
  r->op = "";
  r->echo.clear();
  r->parts_left = 1;
  r->parts.clear();
  r->drain = false;
  // Bounded: a burst leaves at most this many spare requests behind.
  if (requests_.free.size() < kMaxSpareRequests) {
    requests_.free.push_back(r);
  } else {
    delete r;
  }
}

bool NodeQueue::Fits(const Request& r, const Reply& reply) {
  if (r.kind != Request::Kind::kRequest) {
    return reply.is_error() || (reply.type == Reply::Type::kString && reply.str == r.echo);
  }
  return ReplyFits(r.expect, reply);
}

ConnectionId NodeQueue::Send(const Command& command, NodeCallback& done, bool stopping,
                             absl::Status* refused) {
  std::unique_lock<std::mutex> lock(mu_);
  // Follows a command queued on the node's current connection: it goes
  // behind it, on that connection, as long as there is one.
  const bool follows =
      command.after != 0 && command.after == conn_id_ && state_ != State::kDisconnected;
  if (command.pinned && !follows) {
    *refused = absl::UnavailableError(
        absl::StrCat("the connection ", command.op,
                     " must follow is gone (a WATCH holds only on its own connection)"));
    return 0;
  }
  if (stopping && !follows) {
    *refused = absl::CancelledError("the client is shutting down");
    return 0;
  }
  if (LoadLocked() >= limits_.max_in_flight * (follows ? 2 : 1)) {
    *refused = absl::UnavailableError(
        absl::StrCat(LoadLocked(), " commands already waiting for this node (",
                     breaker_.open ? breaker_.last_error : "it is slow", ")"));
    return 0;
  }
  if (state_ == State::kDisconnected || (breaker_.open && !follows)) {
    std::string why =
        breaker_.last_error.empty() ? std::string("not connected") : breaker_.last_error;
    if (breaker_.open) absl::StrAppend(&why, " (node marked down until a probe succeeds)");
    *refused = absl::UnavailableError(why);
    return 0;
  }
  if (requests_.resync && state_ == State::kReady) {
    // A deadline passed: a marker ahead of this request says, when its
    // nonce comes back, whether replies were lost (Request::Kind::kMarker).
    // Between commands of its own Send only, never inside a MULTI (a
    // transaction goes in one Send).
    requests_.resync = false;
    Request* m = NewRequestLocked();
    m->kind = Request::Kind::kMarker;
    m->op = "a PING marker";
    m->deadline = Clock::now() + absl::ToChronoNanoseconds(limits_.node_timeout);
    m->echo = absl::StrCat("redlock-sync-", ++requests_.markers);
    // Written with the request (its EnqueueLocked flushes both).
    requests_.fifo.push_back(m);
    ++requests_.unwritten;
    AppendCommand(&output_.out, {"PING", m->echo});
  }
  Request* r = NewRequestLocked();
  r->done = std::move(done);
  r->deadline = Clock::now() + absl::ToChronoNanoseconds(limits_.node_timeout);
  r->expect = command.expect;
  r->op = command.op;
  r->parts_left = std::max<uint16_t>(command.replies, 1);
  r->drain = command.drain;
  const ConnectionId conn = conn_id_;
  const TimePoint deadline = r->deadline;
  if (state_ != State::kReady) {
    // The connection is still being established: sent once it is ready.
    requests_.waiting.emplace_back(r, command.payload);
  } else {
    EnqueueLocked(lock, r, command.payload);
  }
  if (lock.owns_lock()) lock.unlock();
  host_.DeadlineSet(deadline);
  return conn;
}

bool NodeQueue::Accepts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ != State::kDisconnected && !breaker_.open;
}

bool NodeQueue::ProbeInFlight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return breaker_.probe_in_flight;
}

bool NodeQueue::Holds(ConnectionId after) const {
  std::lock_guard<std::mutex> lock(mu_);
  return conn_id_ == after && state_ != State::kDisconnected;
}

// ---- Writing ----------------------------------------------------------------------------

void NodeQueue::EnqueueLocked(std::unique_lock<std::mutex>& lock, Request* r,
                              absl::string_view payload) {
  requests_.fifo.push_back(r);
  ++requests_.unwritten;
  output_.out.append(payload.data(), payload.size());
  // A write in progress takes it along; a blocked socket gets it when
  // writable; during a turn the poller writes it at the turn's end (read
  // under mu_, so a turn that just ended has flushed or will see it).
  if (output_.writing || output_.epollout || output_.flush_at_turn_end) return;
  FlushSoonLocked(lock);
}

void NodeQueue::FlushSoonLocked(std::unique_lock<std::mutex>& lock) {
  if (host_.InTurn()) {
    output_.flush_at_turn_end = true;
    return;
  }
  FlushLocked(lock);
}

void NodeQueue::FlushTurnEnd() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!output_.flush_at_turn_end) return;
  output_.flush_at_turn_end = false;
  if (!output_.writing && !output_.epollout) FlushLocked(lock);
}

void NodeQueue::OnWritable() {
  std::unique_lock<std::mutex> lock(mu_);
  if (output_.epollout && output_.stream != nullptr) {
    output_.epollout = false;
    host_.WatchWritable(index_, false);
    if (!output_.writing) FlushSoonLocked(lock);
  }
}

void NodeQueue::FlushLocked(std::unique_lock<std::mutex>& lock) {
  Output& o = output_;
  o.writing = true;
  std::string buf = std::move(o.spare);
  for (int rounds = 0; rounds < 64 && !o.out.empty() && o.stream != nullptr; ++rounds) {
    buf.clear();
    buf.swap(o.out);  // out takes buf's capacity: appends do not allocate
    std::shared_ptr<Stream> stream = o.stream;
    lock.unlock();
    Connection::Progress p = Connection::WriteSome(*stream, &buf);
    lock.lock();
    if (o.stream != stream) break;  // the connection was dropped meanwhile
    if (buf.empty()) {
      if (o.out.empty()) StampWrittenLocked();
      continue;
    }
    if (p.failure.empty()) {
      // The socket is full: the rest goes when it is writable again. The
      // node not reading is the node's problem: its deadlines run.
      StampWrittenLocked();
      o.out.insert(0, buf);
      o.epollout = true;
      host_.WatchWritable(index_, true);
    } else {
      o.write_error = p.failure;
      host_.WakePoller();
    }
    break;
  }
  if (!o.out.empty() && !o.epollout && o.stream != nullptr && o.write_error.empty()) {
    // Bounded rounds exhausted with more queued: let the poller finish.
    o.epollout = true;
    host_.WatchWritable(index_, true);
  }
  // Kept for the next flush, unless a burst made it large.
  constexpr size_t kMaxSpare = 1 << 20;
  buf.clear();
  if (buf.capacity() <= kMaxSpare) o.spare = std::move(buf);
  o.writing = false;
}

void NodeQueue::StampWrittenLocked() {
  const TimePoint deadline = Clock::now() + absl::ToChronoNanoseconds(limits_.node_timeout);
  Fifo& fifo = requests_.fifo;
  for (size_t i = fifo.size() - std::min(requests_.unwritten, fifo.size()); i < fifo.size(); ++i) {
    fifo[i]->deadline = deadline;
  }
  requests_.unwritten = 0;
}

// ---- The connection's life -----------------------------------------------------------

NodeQueue::State NodeQueue::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void NodeQueue::Connecting(ConnectionId id) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::kConnecting;
  conn_id_ = id;
  output_.write_error.clear();
}

void NodeQueue::Handshaking(bool want_write) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::kHandshake;
  host_.WatchWritable(index_, want_write);
}

void NodeQueue::Ready(std::shared_ptr<Stream> stream) {
  std::unique_lock<std::mutex> lock(mu_);
  state_ = State::kReady;
  EventLocked(NodeEvent::Kind::kConnected, "");
  if (breaker_.open) EventLocked(NodeEvent::Kind::kBreakerClosed, "connected");
  output_.stream = std::move(stream);
  transport_ = output_.stream->Describe();
  host_.WatchWritable(index_, false);
  breaker_.open = false;
  breaker_.probe_in_flight = false;
  breaker_.last_error.clear();
  requests_.resync = false;  // a new connection is in step
  // Requests made while connecting.
  auto waiting = std::move(requests_.waiting);
  requests_.waiting.clear();
  for (auto& [r, payload] : waiting) {
    if (!r->done) {  // its caller gave up (a timeout): never sent
      FreeRequestLocked(r);
      continue;
    }
    requests_.fifo.push_back(r);
    ++requests_.unwritten;
    output_.out.append(payload);
  }
  if (!output_.out.empty() && !output_.writing && !output_.epollout) FlushSoonLocked(lock);
}

void NodeQueue::Disconnected(const std::string& why, std::vector<NodeCallback>* failed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kDisconnected) EventLocked(NodeEvent::Kind::kDisconnected, why);
  state_ = State::kDisconnected;
  // A writer outside the lock keeps its own reference to the stream.
  output_.stream.reset();
  output_.out.clear();
  output_.epollout = false;
  output_.flush_at_turn_end = false;
  output_.write_error.clear();
  for (Request* r : requests_.fifo) {
    if (r->done) failed->push_back(std::move(r->done));
    FreeRequestLocked(r);
  }
  requests_.fifo.clear();
  requests_.expired = 0;
  requests_.unwritten = 0;
  for (auto& [r, payload] : requests_.waiting) {
    if (r->done) failed->push_back(std::move(r->done));
    FreeRequestLocked(r);
  }
  requests_.waiting.clear();
  breaker_.probe_in_flight = false;
  OpenBreakerLocked(why);
}

void NodeQueue::CancelInFlight(std::vector<NodeCallback>* cancelled) {
  std::lock_guard<std::mutex> lock(mu_);
  Requests& q = requests_;
  for (size_t i = q.expired; i < q.fifo.size(); ++i) {
    if (q.fifo[i]->done && !q.fifo[i]->drain) cancelled->push_back(std::move(q.fifo[i]->done));
  }
  q.expired = q.fifo.size();  // their replies are discarded (but Command::drain's)
  for (auto& w : q.waiting) {
    if (w.first->done) cancelled->push_back(std::move(w.first->done));
  }
}

bool NodeQueue::AwaitingAnswers() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kDisconnected) return false;
  if (requests_.fifo.size() > requests_.expired) return true;
  for (const Request* r : requests_.fifo) {
    if (r->drain && r->done) return true;
  }
  for (auto& w : requests_.waiting) {
    if (w.first->done) return true;
  }
  return false;
}

// ---- Introspection --------------------------------------------------------------------

bool NodeQueue::SetAddress(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool moved = address_ != address;
  address_ = address;
  return moved;
}

void NodeQueue::FillHealth(NodeHealth* h) const {
  std::lock_guard<std::mutex> lock(mu_);
  h->connected = state_ == State::kReady;
  h->breaker_open = breaker_.open;
  h->in_flight = LoadLocked();
  h->last_error = breaker_.last_error;
  h->address = address_;
  if (h->connected) h->tls_version = transport_;
}

void NodeQueue::FillShard(ShardHealth* s) const {
  std::lock_guard<std::mutex> lock(mu_);
  s->connected = state_ == State::kReady;
  s->breaker_open = breaker_.open;
  s->in_flight = LoadLocked();
  s->last_error = breaker_.last_error;
}

void NodeQueue::EventLocked(NodeEvent::Kind kind, const std::string& detail) {
  if (!events_wanted_) return;
  events_.push_back(NodeEvent{kind, name_, detail});
  host_.EventQueued();
}

std::vector<NodeEvent> NodeQueue::TakeEvents() {
  std::vector<NodeEvent> events;
  std::lock_guard<std::mutex> lock(mu_);
  events.swap(events_);
  return events;
}

}  // namespace redlock::internal
