// One node's command connection seen as a queue (docs/design.md 6.2-6.4):
// the requests sent on it, in order, awaiting their replies (the FIFO),
// their deadlines, the output not written yet, and the circuit breaker with
// its probes. The connection's life (connecting, the handshake) is the
// engine's (engine_connection.cc); the queue is told when it is ready or
// gone.
//
// Thread-safe: every method takes the queue's own mutex, which is released
// around socket writes and never held while a callback runs (the callbacks
// of answered, expired or failed requests are returned to the caller, or
// run by Dispatch after the lock is released).
//
// Invariants, under the mutex:
// - fifo_ holds, in the order they were sent, the requests whose bytes were
//   queued on the current connection; replies complete them from the front.
// - The first `expired_` of them passed their deadline and were answered
//   kUnavailable already; their late replies are read and discarded.
// - The last `unwritten_` of them are not on the wire yet: their deadlines
//   start when they are (a request delayed by this process is not the
//   node's fault). So deadlines grow along the FIFO and the expired
//   requests are always a prefix of it.
// - waiting_ holds the requests made while the connection is being
//   established (state_ != kReady); they join the FIFO, in order, when it
//   is ready.
// - While the breaker is open, requests that follow no other are refused at
//   once; a probe (a PING with a nonce) is in flight at most once.
// - Outside a polling turn the thread that queues bytes writes them itself
//   (one writer at a time: `writing`); during a turn the poller writes each
//   queue once at the turn's end (FlushTurnEnd).

#ifndef REDLOCK_INTERNAL_NODE_QUEUE_H_
#define REDLOCK_INTERNAL_NODE_QUEUE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/command.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/stream.h"
#include "redlock/node_status.h"
#include "redlock/observer.h"

namespace redlock::internal {

// A node behind an open breaker that has not answered anything for this long
// gets a new connection.
inline constexpr absl::Duration kStaleConnection = absl::Seconds(1);

class NodeQueue {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  enum class State { kDisconnected, kConnecting, kHandshake, kReady };

  // The engine's settings every queue shares.
  struct Limits {
    absl::Duration node_timeout;
    size_t max_in_flight = 4096;
    absl::Duration probe_interval;
  };

  // What a queue asks of the engine that polls it.
  class Host {
   public:
    virtual ~Host() = default;
    // True while a poller runs a turn: output is then written at its end.
    virtual bool InTurn() const = 0;
    // Writable events on node `node`'s command connection, on or off.
    virtual void WatchWritable(int node, bool on) = 0;
    // The poller must run a turn soon (a write failed outside it).
    virtual void WakePoller() = 0;
    // A request's deadline was set by a thread that may not be polling.
    virtual void DeadlineSet(TimePoint at) = 0;
    // A node event was queued (TakeEvents, at the end of the turn).
    virtual void EventQueued() = 0;
    // A reply of node `node` about to be delivered (cluster redirections).
    virtual void BeforeDelivery(int node, const Reply& reply) = 0;
  };

  // What the poller's maintenance must do for the node (Maintenance()).
  struct Maintenance {
    std::string write_error;  // a write failed: disconnect
    bool probe = false;       // the breaker is open and a probe is due
    bool stale = false;       // the breaker is open and the node silent too long
  };

  // `name` (of the node, for events) and `host` outlive the queue.
  // `events`: whether node events are wanted at all.
  NodeQueue(int index, const std::string* name, const Limits* limits, Host* host, bool events);
  ~NodeQueue();
  NodeQueue(const NodeQueue&) = delete;
  NodeQueue& operator=(const NodeQueue&) = delete;

  // ---- Requests (any thread) ----
  // Queues `command` (Transport::Send for this node). Returns the
  // connection it was queued on; when it is refused (not connected, breaker,
  // cap, shutting down, a pinned follower whose connection is gone),
  // returns 0 and sets *refused, leaving `done` to the caller.
  ConnectionId Send(const Command& command, NodeCallback& done, bool stopping,
                    absl::Status* refused);
  // False when a request that follows no other would be refused now.
  bool Accepts() const;
  // A breaker probe awaits its answer (the answer closes the breaker).
  bool ProbeInFlight() const;
  // Whether a command that follows connection `after` goes on this queue's
  // current connection.
  bool Holds(ConnectionId after) const;

  // ---- The poller ----
  // Completes requests from the front with `replies`; *failure is set when
  // a reply cannot be the answer to the request it meets (the connection
  // must be dropped). The callbacks run after the lock is released.
  void Dispatch(std::vector<Reply>& replies, bool redirects, std::string* failure);
  // True when the first unexpired request's deadline has passed.
  bool DeadlineDue(TimePoint now) const;
  // Answers the requests whose deadline passed (their callbacks go to
  // *expired) and opens the breaker if the node is silent too.
  void Expire(TimePoint now, std::vector<NodeCallback>* expired);
  // What is due for the node now.
  Maintenance Maintain(TimePoint now) const;
  void SendProbe(uint64_t probe_id);
  // Writes the output a turn produced.
  void FlushTurnEnd();
  // The socket takes output again.
  void OnWritable();
  // The earliest of `wake` and what the queue waits for (deadlines, probes).
  TimePoint NextWake(TimePoint now, TimePoint wake) const;

  // ---- The connection's life (the poller) ----
  State state() const;
  // A new connection is being made: requests now wait for it.
  void Connecting(ConnectionId id);
  // The stream is up, the handshake runs: writable events on demand.
  void Handshaking(bool want_write);
  // The handshake finished: the waiting requests go out on `stream`.
  void Ready(std::shared_ptr<Stream> stream);
  // The connection is gone: every request in flight or waiting fails (its
  // callback goes to *failed), the breaker opens with `why`.
  void Disconnected(const std::string& why, std::vector<NodeCallback>* failed);
  // Opens the breaker with `why` (a locator that cannot name the master).
  void OpenBreaker(const std::string& why);
  // Shutting down: every request not exempt (Command::drain) is answered
  // now (*cancelled); their late replies are discarded.
  void CancelInFlight(std::vector<NodeCallback>* cancelled);
  // Shutting down: whether answers are still awaited (followers, drains).
  bool AwaitingAnswers() const;

  // ---- Introspection (any thread) ----
  // Sets the address shown in Health; true when it changed.
  bool SetAddress(const std::string& address);
  void FillHealth(NodeHealth* h) const;
  void FillShard(ShardHealth* s) const;
  std::vector<NodeEvent> TakeEvents();

 private:
  // One request awaiting its reply.
  struct Request {
    // kMarker: a PING with a nonce sent ahead of the first request after a
    // missed deadline. A request whose reply never comes (a proxy or a
    // middlebox that dropped it and kept the connection) would otherwise
    // leave every later reply read as an earlier request's, and every
    // request expiring, for as long as the connection lives; the nonce
    // read while requests ahead of its PING still wait says their replies
    // were lost, and the queue is back in step (Dispatch).
    enum class Kind { kRequest, kProbe, kMarker };
    Kind kind = Kind::kRequest;
    NodeCallback done;  // empty once completed
    TimePoint deadline = TimePoint::max();
    uint8_t expect = 0;   // Command::expect
    const char* op = "";  // Command::op, for messages
    std::string echo;     // kProbe, kMarker: the nonce the PING must return
    // Command::replies: replies still to come; those before the last are kept.
    uint16_t parts_left = 1;
    bool drain = false;  // Command::drain
    std::vector<Reply> parts;
  };
  // The output and who writes it.
  struct Output {
    std::shared_ptr<Stream> stream;  // the connection's, for writers outside the poller
    std::string out;                 // bytes not written yet
    // The writer's buffer between flushes: out and it trade places on each
    // write, so that neither is allocated again per turn.
    std::string spare;
    bool writing = false;            // a thread writes `out` outside the lock
    bool epollout = false;           // waiting for the socket to take more output
    bool flush_at_turn_end = false;  // output marked during a turn
    std::string write_error;
  };
  // The FIFO of requests: a vector and the index of its front, so that a
  // warm queue allocates nothing (a std::deque allocates a block every 64
  // requests that pass through it). The vector is emptied when the front
  // reaches its end, and compacted when the front is past half of it.
  class Fifo {
   public:
    size_t size() const { return v_.size() - head_; }
    bool empty() const { return head_ == v_.size(); }
    Request* front() const { return v_[head_]; }
    Request*& operator[](size_t i) { return v_[head_ + i]; }
    Request* operator[](size_t i) const { return v_[head_ + i]; }
    void push_back(Request* r) { v_.push_back(r); }
    void pop_front() {
      if (++head_ == v_.size()) {
        v_.clear();
        head_ = 0;
      } else if (head_ >= 64 && head_ * 2 >= v_.size()) {
        v_.erase(v_.begin(), v_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
      }
    }
    void clear() {
      v_.clear();
      head_ = 0;
    }
    std::vector<Request*>::const_iterator begin() const {
      return v_.begin() + static_cast<std::ptrdiff_t>(head_);
    }
    std::vector<Request*>::const_iterator end() const { return v_.end(); }

   private:
    std::vector<Request*> v_;
    size_t head_ = 0;
  };
  // The requests.
  struct Requests {
    Fifo fifo;             // sent, in order, awaiting replies
    size_t expired = 0;    // fifo prefix whose deadline passed
    size_t unwritten = 0;  // fifo suffix not on the wire yet
    // A deadline passed on this connection: the next request goes behind a
    // marker (Request::Kind::kMarker).
    bool resync = false;
    uint64_t markers = 0;  // markers sent, for their nonces
    // Made while the connection is being established.
    std::deque<std::pair<Request*, std::string>> waiting;
    std::vector<Request*> free;  // recycled requests (at most 1024)
    // Completions of one reply batch, run after the lock is released; kept
    // between batches so a batch does not grow a new vector (that was 8 % of
    // the client's time at 64 async chains).
    std::vector<std::pair<NodeCallback, Reply>> ready;
  };
  // The circuit breaker (docs/design.md 6.4).
  struct Breaker {
    bool open = false;
    TimePoint opened_at{};
    TimePoint last_reply_at{};  // any reply, late ones included: the node is alive
    std::string last_error;
    bool probe_in_flight = false;
    TimePoint next_probe{};
  };

  size_t LoadLocked() const { return requests_.fifo.size() + requests_.waiting.size(); }
  Request* NewRequestLocked();
  void FreeRequestLocked(Request* r);
  static bool Fits(const Request& r, const Reply& reply);
  // A marker's or probe's nonce read while `reply` is not the front's: the
  // replies of the requests ahead of it were lost. Takes them out of the
  // FIFO (their callbacks, if still waiting, into *lost) and returns true.
  bool ResyncLocked(const Reply& reply, std::vector<NodeCallback>* lost);
  // Appends under mu_ and writes, or leaves it to the end of the turn.
  void EnqueueLocked(std::unique_lock<std::mutex>& lock, Request* r, absl::string_view payload);
  void FlushSoonLocked(std::unique_lock<std::mutex>& lock);
  // Writes out; `lock` is released around the write.
  void FlushLocked(std::unique_lock<std::mutex>& lock);
  // Every request is on the wire (or the node stopped reading): their
  // deadlines run from now.
  void StampWrittenLocked();
  void OpenBreakerLocked(const std::string& why);
  void CloseBreakerLocked(absl::string_view why);
  void EventLocked(NodeEvent::Kind kind, const std::string& detail);

  const int index_;
  const std::string& name_;
  const Limits& limits_;
  Host& host_;
  const bool events_wanted_;

  mutable std::mutex mu_;
  State state_ = State::kDisconnected;
  // The connection requests are queued on, named when it starts connecting;
  // kept once it is gone (a follower of it is then treated as any command).
  ConnectionId conn_id_ = 0;
  Output output_;
  Requests requests_;
  Breaker breaker_;
  std::string transport_;          // "TLSv1.3", "" for plain TCP (Health)
  std::string address_;            // "host:port" connected to ("" while unknown)
  std::vector<NodeEvent> events_;  // for the observer, emitted after the turn
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_NODE_QUEUE_H_
