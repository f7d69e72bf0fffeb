// The I/O engine: per node, one ordered command connection shared by every
// caller of a client, one connection that listens for release announcements
// and whatever connections the node's locator keeps to find its master
// (locator.h: one to each Sentinel of a Sentinel-managed node). It moves
// commands and replies and keeps their order; what to send and how answers
// count is the operations' business (acquire_op, keys_op, node_calls).
//
// Design (docs/design.md section 6), one unit per role:
// - A node's queue (node_queue.h): its requests in order (the FIFO), their
//   deadlines, its output buffer and circuit breaker, under its own lock.
//   The engine never re-sends, reorders or rewrites a command, whatever the
//   node answers; a command may follow one sent earlier on the same
//   connection (Command::after).
// - The command connection's life (engine_connection.cc): connecting, the
//   handshake, identity, reconnection; where the master is, the node's
//   locator says (engine_locator.cc: the engine has no branch per scheme).
// - The subscriber (subscriber.h): release announcements.
// - The poller: the poll set (poller.h), who polls (poll_roles.h: a lone
//   synchronous caller polls itself, callers that find someone polling
//   sleep until it completes their call, the I/O thread polls whenever
//   callers sleep and leaves the role to a lone caller), timers, posted
//   tasks and user callbacks (engine_tasks.h: user callbacks run on the I/O
//   thread only, never inside another call nor nested), and the turn
//   itself (engine.cc): read and dispatch replies, expire deadlines,
//   maintain connections, run timers and tasks, then write each node's
//   output once.
// Connections (connection.h) are written once for the three kinds: connect,
// stream (plain TCP or TLS), handshake, reply framing, backoff.

#ifndef REDLOCK_INTERNAL_ENGINE_H_
#define REDLOCK_INTERNAL_ENGINE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/engine_tasks.h"
#include "redlock/internal/locator.h"
#include "redlock/internal/node_queue.h"
#include "redlock/internal/poll_roles.h"
#include "redlock/internal/poller.h"
#include "redlock/internal/subscriber.h"
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
  bool stopping() const override { return io_.stopping.load(std::memory_order_acquire); }

  void SetMessageHandler(MessageHandler handler) override {
    subscriber_.SetHandler(std::move(handler));
  }
  void Subscribe(const std::vector<std::string>& channels) override;
  void Unsubscribe(const std::vector<std::string>& channels) override;

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Node;
  class NodeLocatorHost;

  // The engine's nodes: the Transport's nodes (0..size()-1), then the
  // connections to the other masters of cluster nodes, added while running
  // (AddShard). Fixed capacity (the Transport's nodes, and
  // kMaxShardsPerNode per node that routes by key); stable addresses; the
  // count only grows. Written by the poller, read by any thread below
  // `count`.
  struct NodeTable {
    std::unique_ptr<std::unique_ptr<Node>[]> nodes;
    size_t capacity = 0;
    std::atomic<int> count{0};
    // Per Transport node, how many shards it has (poller only).
    std::vector<int> shards;
    Connection::Settings base_settings;
  };
  // The I/O thread and the engine's life.
  struct IoThread {
    std::thread thread;
    std::atomic<std::thread::id> id{};
    std::atomic<bool> stopping{false};
    std::atomic<bool> stopped{false};
    std::mutex shutdown_mu;
  };
  // The run_id of each engine node's current connection (docs/design.md 6.6).
  struct Identities {
    mutable std::mutex mu;                        // guards the three below
    std::vector<std::string> run_ids;             // per engine node
    std::vector<std::pair<int, int>> duplicates;  // (kept, refused)
    std::vector<std::string> unverified;          // per node (UnverifiedNodes)
  };
  // Client::Create waits until every node connected or failed once.
  struct FirstConnections {
    std::mutex mu;
    int pending = 0;
    std::condition_variable cv;
  };
  // The queues' side of the engine (node_queue.h).
  class QueueHost final : public NodeQueue::Host {
   public:
    explicit QueueHost(Engine* engine) : engine_(*engine) {}
    bool InTurn() const override;
    void WatchWritable(int node, bool on) override;
    void WakePoller() override;
    void DeadlineSet(TimePoint at) override;
    void EventQueued() override;
    void BeforeDelivery(int node, const Reply& reply) override;

   private:
    Engine& engine_;
  };
  // What the polling roles drive (poll_roles.h).
  class RolesDriver final : public PollRoles::Driver {
   public:
    explicit RolesDriver(Engine* engine) : engine_(*engine) {}
    void Turn() override { engine_.RunOnce(); }
    void RunUserTasks() override { engine_.tasks_.RunUser(); }
    bool HasUserTasks() const override { return engine_.tasks_.HasUser(); }
    bool stopping() const override { return engine_.stopping(); }
    void Interrupt() override { engine_.poller_.Wake(); }
    int64_t NextTurnNs() override { return engine_.NextTurnNs(); }

   private:
    Engine& engine_;
  };

  explicit Engine(Config config);

  Node& NodeAt(int i) const { return *table_.nodes[static_cast<size_t>(i)]; }
  int node_count() const { return table_.count.load(std::memory_order_acquire); }
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

  // ---- A turn, and the I/O thread's life (engine.cc) ----
  void Loop();
  // One round of polling: wait for events (or the next deadline, at the
  // latest `until`), then process them, deadlines, reconnections, timers
  // and tasks, then write the output the turn produced. REQUIRES: the
  // polling role.
  void RunOnce(TimePoint until = TimePoint::max());
  // When the engine next needs a turn with nothing arriving: the earliest
  // request deadline, timer, reconnection, keep-alive, probe or locator
  // round; TimePoint::max() when none. REQUIRES: the polling role.
  TimePoint NextWake(TimePoint now);
  // When a caller that lets go of the role leaves the engine its next turn
  // (PollRoles::HandBack): at once while a connection is being set up or a
  // probe awaits its answer (only the socket moves those on), else
  // NextWake, in steady_clock nanoseconds (INT64_MAX: none).
  int64_t NextTurnNs();
  void ExpireDeadlines(TimePoint now);
  void FlushTurn();
  void EmitNodeEvents();
  void Post(absl::AnyInvocable<void()> fn);
  void FailLater(NodeCallback done, absl::Status status);
  // Wakes whoever polls, and the I/O thread if it is off and the work came
  // from outside every polling thread and synchronous call (KickIfOutside).
  void Wake();
  // Work for the poller from a thread that does not poll and is not inside
  // a synchronous call (which polls for itself): an asynchronous start, a
  // timer, a posted task. The I/O thread takes the role if nobody has it.
  void KickIfOutside();
  // Shutting down: completes the requests in flight with kCancelled, then
  // polls until what their callbacks sent behind them (Command::after) is
  // answered, or node_timeout passed.
  void DrainFollowers();
  bool AwaitingFollowers();
  void CancelEverything();

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
  void MaintainCommand(Node& n, TimePoint now);
  std::vector<HandshakeStep> CommandHandshake(Node& n);
  std::string CheckIdentity(int node, const std::string& run_id);
  // The handshake's verdict on a node whose INFO gave no run_id (`why`).
  std::string UnknownIdentity(int node, const std::string& why);

  // ---- Where each node's master is (engine_locator.cc) ----
  // The node's locator named its master (Locator::Host::MasterAt): the
  // command and subscriber connections go there, at once when it moved.
  void MasterAt(Node& n, MasterTarget target, const std::string& why);

  const Config config_;
  const int logical_;  // the Transport's nodes
  const NodeQueue::Limits limits_;
  Poller poller_;
  EngineTasks tasks_;
  RolesDriver roles_driver_{this};
  PollRoles roles_{&roles_driver_, config_.node_timeout};
  QueueHost queue_host_{this};
  Subscriber subscriber_;
  IoThread io_;
  Identities identities_;
  FirstConnections first_;
  // Probe nonces and connection ids; node events queued since the last turn.
  std::atomic<uint64_t> next_probe_id_{1};
  std::atomic<ConnectionId> next_connection_id_{1};
  std::atomic<bool> node_events_pending_{false};
  // Requests sent by threads that do not poll (QueueHost::DeadlineSet): a
  // turn that sees the count change while it computed its sleep sleeps
  // node_timeout at most (the new request's deadline is later).
  std::atomic<uint64_t> outside_sends_{0};
  // Last, so that the nodes (and their locators) go first.
  NodeTable table_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ENGINE_H_
