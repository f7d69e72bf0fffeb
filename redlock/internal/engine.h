// The I/O engine: per node, one ordered command connection shared by every
// caller of a client, one connection that listens for release announcements
// and whatever connections the node's locator keeps to find its master
// (locator.h: one to each Sentinel of a Sentinel-managed node). It moves commands and
// replies and keeps their order; what to send and how answers count is the
// operations' business (acquire_op, keys_op, node_calls).
//
// Design (docs/design.md section 6):
// - Connections (connection.h) are written once for the three kinds:
//   connect, stream (plain TCP or TLS), handshake, reply framing, backoff.
//   The engine adds what a node needs on top: the FIFO of requests awaiting
//   replies, their deadlines, the circuit breaker, the identity check, the
//   subscriber connection's channels; the node's locator says where the
//   master is (the engine has no branch per endpoint scheme).
// - Order: a node executes the commands of its command connection in the
//   order of the Send calls, and the engine never re-sends, reorders or
//   rewrites one, whatever the node answers (a NOSCRIPT is an answer like
//   any other). A command may follow one sent earlier on the same
//   connection (Command::after): it is then queued behind it even behind an
//   open breaker, and still written while the engine shuts down.
// - Sending: a caller appends its command to the node's output buffer and
//   its request to the node's FIFO under the node's mutex. During a polling
//   turn (replies being dispatched, callbacks sending the next commands, a
//   connection becoming ready or writable) the output is only marked, and
//   the poller writes each node's buffer once at the end of the turn: one
//   write(2) per node per turn however many commands. Outside a turn the
//   caller writes itself (no wake-up of another thread), unless a write is
//   already in progress.
// - Every request's deadline is its send time plus node_timeout, so deadlines
//   grow along each FIFO and expired requests always form a prefix of it;
//   their late replies are discarded. The poller never sleeps longer than
//   node_timeout, so a new request never needs to wake it to arm a timer.
// - Who polls (reads replies, runs deadlines and timers): whoever holds
//   poll_mu_. A synchronous caller that finds nobody polling polls itself
//   until its own call completes, so a lone caller costs no thread hand-off.
//   A caller that finds someone polling sleeps until its call completes:
//   the poller completes it. The I/O thread polls whenever callers sleep or
//   asynchronous work is pending, and leaves the role to a lone synchronous
//   caller; there are no hand-offs between callers. The I/O thread is also
//   the only thread that runs user callbacks (DeliverToUser), so those never
//   run inside another call, nor nested in another user callback.
// - A node silent for node_timeout opens its circuit breaker: normal
//   requests then fail at once, and a PING probe carrying a nonce is sent
//   every breaker_probe_interval until one is answered in time. Requests in
//   flight per node are capped, so nothing grows without bound behind a
//   stopped node.

#ifndef REDLOCK_INTERNAL_ENGINE_H_
#define REDLOCK_INTERNAL_ENGINE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/locator.h"
#include "redlock/internal/sync_waiter.h"
#include "redlock/internal/transport.h"
#include "redlock/node_status.h"
#include "redlock/observer.h"
#include "redlock/options.h"

namespace redlock::internal {

class TlsContext;  // tls_stream.h

class Engine final : public Transport, public Blocking {
 public:
  struct Config {
    std::vector<Endpoint> nodes;
    absl::Duration node_timeout = absl::Milliseconds(50);
    absl::Duration connect_timeout = absl::Seconds(1);
    absl::Duration reconnect_backoff_min = absl::Milliseconds(10);
    absl::Duration reconnect_backoff_max = absl::Seconds(1);
    absl::Duration breaker_probe_interval = absl::Milliseconds(100);
    size_t max_in_flight_per_node = 4096;
    // Refuse a node whose run_id cannot be read (Options::require_node_identity).
    bool require_identity = true;
    // What one reply from a node may take (every connection of the node).
    ReplyLimits reply_limits;
    // Trust roots and client certificate of every TLS connection (nodes
    // whose endpoint says tls; null when none does), and the name their
    // certificates are checked against unless the endpoint names one
    // (Options::tls.server_name; empty: each connection's host).
    std::shared_ptr<TlsContext> tls;
    std::string tls_server_name;
    // Node state changes (connected, lost, breaker opened or closed), called
    // on the polling thread outside every lock. Optional.
    std::function<void(const NodeEvent&)> on_node_event;
    // Per node, the commands each of its command connections runs after
    // logging in and checking the server, before any request (the client
    // loads its scripts there, and learns whether the node allows them); a
    // failed check fails the connection. Null: none.
    std::function<std::vector<HandshakeStep>(int node)> setup;
  };

  // Starts the loop thread and the first connection to every node.
  static absl::StatusOr<std::unique_ptr<Engine>> Start(Config config);

  ~Engine() override;

  // Blocks until every node has connected or failed once, or `timeout`.
  void WaitForFirstConnections(absl::Duration timeout);

  // Completes every pending request, timer and task with kCancelled and
  // stops the thread; what those callbacks send behind a command already
  // written (Command::after) still goes out, and is awaited for up to
  // node_timeout. Idempotent; called by the destructor.
  void Shutdown() override;

  std::vector<NodeHealth> Health() const override;

  // Pairs (first, second) of nodes found to be one server (same run_id):
  // the second was refused. Checked when each connection is established.
  std::vector<std::pair<int, int>> DuplicateNodes() const;

  // Per node, why its last connection was refused for an identity that
  // could not be read (Config::require_identity), or "".
  std::vector<std::string> UnverifiedNodes() const;

  // Transport.
  int size() const override { return logical_; }
  const std::string& NodeName(int node) const override;
  ConnectionId Send(int node, const Command& command, NodeCallback done) override;
  bool Accepts(int node) const override;
  TimerId RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) override;
  bool Cancel(TimerId id) override;
  void AwaitSync(const std::shared_ptr<SyncWaiter>& waiter) override;
  void DeliverToUser(absl::AnyInvocable<void()> fn) override;
  bool InTransportThread() const override;
  bool stopping() const override { return stopping_.load(std::memory_order_acquire); }

  void SetMessageHandler(MessageHandler handler) override { message_handler_ = std::move(handler); }
  void Subscribe(const std::vector<std::string>& channels) override;
  void Unsubscribe(const std::vector<std::string>& channels) override;

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Node;
  struct Slot;
  class NodeLocatorHost;

  explicit Engine(Config config);

  // The engine's nodes: the Transport's nodes (0..size()-1), then the
  // connections to the other masters of cluster nodes, added while running
  // (AddShard). Stable addresses; the count only grows.
  Node& NodeAt(int i) const { return *nodes_[static_cast<size_t>(i)]; }
  int node_count() const { return count_.load(std::memory_order_acquire); }
  // The engine node a command for Transport node `node` goes to: its own,
  // or for a cluster node the connection to the master of its slot (or of
  // the command it follows).
  Node& Route(int node, const Command& command);
  // Locator::Host::AddShard of node `owner`. Poller only. -1 when the node
  // has kMaxShardsPerNode connections already.
  int AddShard(Node& owner, std::unique_ptr<Locator> locator, const std::string& name);
  // Makes the engine's node `index` (its locator and its connections'
  // first target).
  void MakeNode(int index, int owner, const Endpoint& e, std::string name,
                std::unique_ptr<Locator> locator);
  // A reply on a connection of a cluster node: a redirection (MOVED, ASK)
  // tells its locator where the slot is. Poller only.
  void NoteRedirects(Node& n, const Reply& reply);
  // Locator::Host::ShardState.
  void ShardState(int index, ShardHealth* shard) const;

  // ---- Polling (engine.cc) ----
  void Loop();
  // Whether the I/O thread should hold the polling role now.
  bool IoThreadShouldPoll() const;
  // One round of polling: wait for events (or the next deadline), then
  // process them, deadlines, reconnections, timers and tasks, then write
  // the output the turn produced. REQUIRES: poll_mu_ held.
  void RunOnce();
  TimePoint NextWake(TimePoint now);
  void RunUserTasks();
  // Runs a user callback on the I/O thread (see DeliverToUser).
  void RunUserCallback(absl::AnyInvocable<void()>& fn);
  void RunTimers(TimePoint now);
  void RunPosted();
  void Post(absl::AnyInvocable<void()> fn);
  void Wake();
  // Shutting down: completes the requests in flight with kCancelled, then
  // polls until what their callbacks sent behind them (Command::after) is
  // answered, or node_timeout passed.
  void DrainFollowers();
  bool AwaitingFollowers();
  void CancelEverything();

  // ---- Requests on the command connections (engine_node.cc) ----
  void Dispatch(Node& n, std::vector<Reply>& replies, std::string* failure);
  void ExpireDeadlines(TimePoint now);
  void SendProbe(Node& n);
  // Appends under n.mu and writes, or leaves it to the end of the turn.
  void EnqueueLocked(Node& n, std::unique_lock<std::mutex>& lock, Slot* slot,
                     absl::string_view payload);
  // Writes n.out now, or at the end of the turn during one.
  void FlushSoonLocked(Node& n, std::unique_lock<std::mutex>& lock);
  // Writes n.out; `lock` holds n.mu and is released around the write.
  void FlushLocked(Node& n, std::unique_lock<std::mutex>& lock);
  // Writes the output marked during the turn that just ended.
  void FlushTurn();

  // ---- The command connections' life (engine_connection.cc) ----
  void StartConnect(Node& n);
  void OnCommandIo(Node& n, uint32_t events);
  void OnReady(Node& n);
  // Closes the command connection and fails its requests with `why`. The
  // node's locator then looks for the master again (Locator::MasterLost),
  // unless `ask_locator` is false (it has just named the new master).
  void Disconnect(Node& n, const std::string& why, bool ask_locator = true);
  // Once per node: its first connection succeeded or failed (Create waits).
  void FirstConnectDone(Node& n);
  void MaintainNodes(TimePoint now);
  // (Re)registers connection `c` of node `node` with epoll (op ADD or MOD):
  // readable always, writable when asked. `sub`: which of the locator's
  // connections.
  void Register(const Connection& c, int node, uint64_t kind, int op, bool writable,
                uint32_t sub = 0);
  void WatchWritable(Node& n, bool on);
  // I/O on a side connection of node `node` (subscriber, locator's): reads
  // its messages, and once it has left the connecting state, asks for
  // writable events only while the stream does. The caller closes the
  // connection on a failure.
  Connection::Progress SideConnectionIo(Connection& c, int node, uint64_t kind, uint32_t events,
                                        std::vector<Reply>* messages, uint32_t sub = 0);
  // Every request of n is on the wire (or the node stopped reading): their
  // deadlines run from now. REQUIRES: n.mu held.
  void StampWrittenLocked(Node& n);
  void OpenBreakerLocked(Node& n, const std::string& why);
  // Queues a node event (under n.mu) for EmitNodeEvents, which the poller
  // runs at the end of every turn, outside the locks.
  void NodeEventLocked(Node& n, NodeEvent::Kind kind, const std::string& detail);
  void EmitNodeEvents();
  std::vector<HandshakeStep> CommandHandshake(Node& n);
  std::string CheckIdentity(int node, const std::string& run_id);
  // The handshake's verdict on a node whose INFO gave no run_id (`why`).
  std::string UnknownIdentity(int node, const std::string& why);
  // Requests are recycled per node (no allocation per request once warm).
  // REQUIRES: n.mu held.
  Slot* NewSlotLocked(Node& n);
  void FreeSlotLocked(Node& n, Slot* slot);
  void FailLater(NodeCallback done, absl::Status status);
  static bool ReplyFits(const Slot& slot, const Reply& reply);

  // ---- Subscriber connections (engine_subscriber.cc) ----
  void SubStart(Node& n);
  void OnSubIo(Node& n, uint32_t events);
  void SubWrite(Node& n, std::string bytes);
  void SubMaintain(Node& n, TimePoint now);
  void SubClose(Node& n, const std::string& why);
  // Records why the subscriber connection failed (Health).
  void SubFailed(Node& n, const std::string& why);

  // ---- Where each node's master is (engine_locator.cc) ----
  // The node's locator named its master (Locator::Host::MasterAt): the
  // command and subscriber connections go there, at once when it moved.
  void MasterAt(Node& n, MasterTarget target, const std::string& why);

  const Config config_;
  const int logical_;  // the Transport's nodes
  // Fixed capacity (the Transport's nodes, and kMaxShardsPerNode per node
  // that routes by key); written by the poller, read by any thread below
  // count_.
  std::unique_ptr<std::unique_ptr<Node>[]> nodes_;
  size_t capacity_ = 0;
  std::atomic<int> count_{0};
  // Per Transport node, how many shards it has (poller only).
  std::vector<int> shards_;
  Connection::Settings base_settings_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::thread thread_;
  std::atomic<std::thread::id> thread_id_{};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
  std::mutex shutdown_mu_;
  // Latest point in time at which the poller will wake by itself (ns since
  // the steady clock's epoch); RunAfter wakes it only for earlier timers.
  std::atomic<int64_t> wake_at_ns_{0};

  // Polling roles (see the file comment).
  std::mutex poll_mu_;
  std::atomic<int> sync_active_{0};      // callers inside AwaitSync
  std::atomic<int> sleepers_{0};         // of them, those sleeping until completed
  std::atomic<bool> io_polling_{false};  // the I/O thread holds poll_mu_
  std::atomic<int64_t> last_sync_end_ns_{0};
  // True while a poller dispatches (output is then written at the turn's end).
  std::atomic<bool> in_turn_{false};
  std::atomic<uint64_t> next_probe_id_{1};
  std::atomic<ConnectionId> next_connection_id_{1};
  std::atomic<bool> node_events_pending_{false};
  // I/O thread only: a user callback is running (DeliverToUser queues the
  // next one instead of nesting it).
  bool in_user_callback_ = false;

  mutable std::mutex mu_;                              // guards the members below
  std::deque<absl::AnyInvocable<void()>> posted_;      // run by any poller
  std::deque<absl::AnyInvocable<void()>> user_tasks_;  // run by the I/O thread
  std::condition_variable idle_cv_;                    // the idle I/O thread
  // A lone caller waiting for the I/O thread to give up the polling role.
  std::shared_ptr<SyncWaiter> role_waiter_;
  std::map<std::pair<TimePoint, TimerId>, absl::AnyInvocable<void()>> timers_;
  std::unordered_map<TimerId, TimePoint> timer_index_;
  TimerId next_timer_id_ = 1;
  int first_connect_pending_ = 0;
  std::condition_variable first_connect_cv_;

  // Poller only: subscribed channels and their reference counts, and what
  // one SUBSCRIBE of all of them takes (bounds a subscriber's backlog).
  std::map<std::string, int> channels_;
  size_t channel_bytes_ = 0;
  MessageHandler message_handler_;

  mutable std::mutex identity_mu_;               // guards the three below
  std::vector<std::string> run_ids_;             // per node, of its current connection
  std::vector<std::pair<int, int>> duplicates_;  // (kept, refused)
  std::vector<std::string> unverified_;          // per node (UnverifiedNodes)
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ENGINE_H_
