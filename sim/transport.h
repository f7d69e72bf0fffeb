// sim/transport.h: one simulated client's transport (internal::Transport)
// over the simulated network, with the engine's observable behaviour
// (docs/design.md section 6): per-node order, followers (Command::after,
// pinned, replies, drain), a deadline of node_timeout per request from the
// moment it is written, the circuit breaker and its PING probes, stale
// connections replaced, reconnection with backoff, the handshake (INFO and
// the SCRIPT LOAD of every script, which marks a node that refuses
// scripting in the client's ScriptingModes, exactly as the engine's
// handshake does: the same ScriptLoadSteps), the subscriber connection for
// release announcements (resubscribed on every reconnection, kept alive by
// PING), a Redis Cluster as one node (its members' connections added from
// CLUSTER SLOTS, routing by Command::slot, MOVED noted in the slot table,
// ASK routed by Command::asking_at, the map refreshed), and Health().
//
// Everything runs on the simulator's one thread, in the client's context
// (TransportHost::At / Post): callbacks never run inline from Send, timers
// run on the client's own clock, and InTransportThread() is true while the
// world runs this client's events.
//
// What it does not model: TLS (a TLS node is a plain one at this level),
// AUTH and SELECT (the simulated nodes need none), Sentinel discovery (a
// Sentinel-managed node is modelled by its effect: after a failover the
// connections drop and the next one reaches the promoted replica), the
// identity check of INFO's run_id (the simulated nodes are distinct by
// construction).

#ifndef REDLOCK_SIM_TRANSPORT_H_
#define REDLOCK_SIM_TRANSPORT_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/scriptless.h"
#include "redlock/internal/transport.h"
#include "redlock/options.h"
#include "sim/node.h"

namespace redlock::sim {

// What the transport needs of the world. All times are the client's steady
// clock in nanoseconds.
class TransportHost {
 public:
  virtual ~TransportHost() = default;
  virtual int64_t ClientNow(int client) = 0;
  // Runs `fn` in the client's context once its clock reads `at`.
  virtual void At(int client, int64_t at, absl::AnyInvocable<void()> fn) = 0;
  // Runs `fn` in the client's context after the current event.
  virtual void Post(int client, absl::AnyInvocable<void()> fn) = 0;
  // Opens a connection from the client to member `member` (a sim::Node of
  // the world): the host later calls OnConnected or OnClosed.
  virtual uint64_t Connect(int client, int member) = 0;
  // Writes commands on an open connection (one payload: never split by
  // another's), in order. `handed_at`: the client's clock when the library
  // handed them to the transport (Transport::Send), -1 for the transport's
  // own (handshake, probes); they may wait for a connection before this.
  virtual void Write(uint64_t conn, std::vector<Argv> commands, int64_t handed_at) = 0;
  // Closes a connection (the transport forgets it at once).
  virtual void Close(uint64_t conn) = 0;
  // The member at "host:port" as CLUSTER SLOTS names it, or -1.
  virtual int MemberAt(const std::string& host, int port) = 0;
};

// One node of the client's Options as the transport reaches it.
struct VoterSpec {
  std::string name;        // Endpoint::ToString(), for messages
  int member = -1;         // a plain node: its sim::Node
  std::vector<int> seeds;  // a cluster: the members asked for the slot map
  bool cluster() const { return !seeds.empty(); }
};

class SimTransport final : public internal::Transport {
 public:
  SimTransport(TransportHost* host, int client, std::vector<VoterSpec> voters,
               const Options& options, std::shared_ptr<internal::ScriptingModes> modes);
  ~SimTransport() override;

  // internal::Transport.
  int size() const override { return static_cast<int>(voters_.size()); }
  const std::string& NodeName(int node) const override {
    return voters_[static_cast<size_t>(node)].name;
  }
  internal::ConnectionId Send(int node, const internal::Command& command,
                              internal::NodeCallback done) override;
  bool Accepts(int node) const override;
  std::vector<NodeHealth> Health() const override;
  TimerId RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) override;
  bool Cancel(TimerId id) override;
  void DeliverToUser(absl::AnyInvocable<void()> fn) override;
  bool InTransportThread() const override { return in_context_ > 0; }
  bool stopping() const override { return stopping_; }
  void Shutdown() override;
  void SetMessageHandler(MessageHandler handler) override { handler_ = std::move(handler); }
  void Subscribe(const std::vector<std::string>& channels) override;
  void Unsubscribe(const std::vector<std::string>& channels) override;

  // From the world, in the client's context.
  void OnConnected(uint64_t conn);
  void OnReplies(uint64_t conn, std::vector<Reply> replies);
  void OnClosed(uint64_t conn, const std::string& why);
  // Starts the first connections (the client is made).
  void Start();
  // The world runs an event of this client: callbacks are "on the
  // transport's thread" meanwhile.
  void EnterContext() { ++in_context_; }
  void LeaveContext();

  // What is still held at the end of a run (memory bounded).
  size_t pending_requests() const;
  size_t pending_timers() const { return timers_.size(); }
  size_t subscriptions() const { return channels_.size(); }
  // Where the requests in flight are, node by node (for a finding's text).
  std::string Describe() const;

 private:
  struct Request {
    internal::NodeCallback done;
    uint8_t expect = 0;
    const char* op = "";
    uint16_t parts_left = 1;
    std::vector<Reply> parts;
    bool drain = false;
    bool probe = false;
    bool marker = false;  // the engine's Request::Kind::kMarker (node_queue.h)
    std::string echo;     // a probe's or marker's nonce
    int64_t deadline = 0;
    int64_t handed_at = -1;  // the client's clock at Send (TransportHost::Write)
  };
  enum class State { kDisconnected, kConnecting, kHandshake, kReady };
  // One connection of the engine: a node's own, or one per master of a
  // cluster node (a shard).
  struct EngineNode {
    int index = 0;
    int owner = 0;        // the voter
    bool shard = false;   // a cluster's master
    bool routes = false;  // a cluster voter's own connection (routes by slot)
    std::string address;  // "host:port" of a shard
    int member = -1;      // where it connects now
    std::string name;
    State state = State::kDisconnected;
    internal::ConnectionId conn_id = 0;
    uint64_t net = 0;
    std::deque<std::unique_ptr<Request>> fifo;
    size_t expired = 0;
    bool resync = false;  // a deadline passed: the next request goes behind a marker
    std::vector<std::pair<std::unique_ptr<Request>, std::vector<Argv>>> waiting;
    std::vector<internal::HandshakeStep> steps;
    size_t steps_done = 0;
    int64_t connect_deadline = 0;
    bool breaker_open = false;
    std::string last_error;
    int64_t breaker_opened_at = 0;
    int64_t next_probe = 0;
    bool probe_in_flight = false;
    int64_t last_reply_at = 0;
    int64_t backoff = 0;
    int64_t next_connect = 0;
    // The subscriber connection (voters only).
    State sub_state = State::kDisconnected;
    uint64_t sub_net = 0;
    int64_t sub_next_connect = 0;
    int64_t sub_backoff = 0;
    int64_t sub_deadline = 0;
    int64_t sub_last_heard = 0;
    bool sub_ping_out = false;
    int64_t sub_ping_sent = 0;
    std::string sub_error;
    bool sub_handshake_done = false;
    // A cluster voter's slot map (routes only).
    std::vector<int> slots;             // slot -> engine node index (-1: unknown)
    std::map<std::string, int> shards;  // address -> engine node index
    int seed_attempt = 0;
    bool query_out = false;
    bool query_again = false;
    int64_t refresh_at = 0;
    int64_t last_query = 0;
    bool mapped = false;
    std::string map_error;
    size_t load() const { return fifo.size() + waiting.size(); }
  };

  int64_t Now() const;
  EngineNode& Route(int node, const internal::Command& command);
  void FailLater(internal::NodeCallback done, absl::Status status);
  void StartConnect(EngineNode& n);
  // Takes the callbacks of every request in flight or waiting on `n` (the
  // queue emptied), to be failed or cancelled by the caller.
  void TakeCallbacks(EngineNode& n, std::vector<internal::NodeCallback>* out);
  void Disconnect(EngineNode& n, const std::string& why, bool ask_locator = true);
  void OnReady(EngineNode& n);
  void Enqueue(EngineNode& n, std::unique_ptr<Request> r, std::vector<Argv> commands);
  // The engine's NodeQueue::ResyncLocked: a probe's or marker's nonce read
  // while requests ahead of it wait; their replies were lost.
  bool Resync(EngineNode& n, const Reply& reply, std::vector<internal::NodeCallback>* lost);
  void Dispatch(EngineNode& n, std::vector<Reply>& replies);
  void OpenBreaker(EngineNode& n, const std::string& why);
  void SendProbe(EngineNode& n);
  void Maintain();
  void ExpireDeadlines(int64_t now);
  void Rearm();
  std::vector<internal::HandshakeStep> Handshake(EngineNode& n);
  // Cluster.
  std::string ApplySlots(EngineNode& home, const Reply& r);
  int EnsureShard(EngineNode& home, const std::string& host, int port);
  void NoteRedirect(EngineNode& n, const Reply& reply);
  void RefreshSoon(EngineNode& home);
  void MaintainCluster(EngineNode& home, int64_t now);
  // Subscriber.
  void SubStart(EngineNode& n);
  void SubClose(EngineNode& n, const std::string& why);
  // Closes connection `*net` (and its entry in `index`), marks it
  // disconnected and sets the next attempt after `*backoff` (give or take
  // 20%), doubling it up to Options::reconnect_backoff_max: what
  // Connection::Close does, for a node's connection and its subscriber's.
  void CloseAndBackOff(uint64_t* net, std::map<uint64_t, int>* index, State* state,
                       int64_t* next_connect, int64_t* backoff);
  void SubWrite(EngineNode& n, std::vector<Argv> commands);
  void SubMaintain(EngineNode& n, int64_t now);
  EngineNode* ByNet(uint64_t net, bool* sub);

  TransportHost* const host_;
  const int client_;
  const std::vector<VoterSpec> voters_;
  const Options options_;
  const std::shared_ptr<internal::ScriptingModes> modes_;
  const std::vector<bool> clusters_;
  const int64_t node_timeout_;
  std::vector<std::unique_ptr<EngineNode>> nodes_;  // voters first, then shards
  std::map<uint64_t, int> by_net_;                  // connection -> engine node
  std::map<uint64_t, int> by_sub_net_;
  uint64_t next_conn_id_ = 1;
  std::map<TimerId, absl::AnyInvocable<void()>> timers_;
  TimerId next_timer_ = 1;
  MessageHandler handler_;
  std::map<std::string, int> channels_;
  int in_context_ = 0;
  bool in_user_ = false;
  std::deque<absl::AnyInvocable<void()>> user_tasks_;
  std::deque<absl::AnyInvocable<void()>> shutdown_posted_;
  bool stopping_ = false;
  int64_t armed_at_ = -1;  // client time of the next maintenance (-1: none)
  uint64_t probe_id_ = 1;
};

// Splits a RESP payload (commands written back to back) into argument
// vectors. False when it is not a sequence of arrays of bulk strings.
bool ParseCommands(const std::string& payload, std::vector<Argv>* out);

}  // namespace redlock::sim

#endif  // REDLOCK_SIM_TRANSPORT_H_
