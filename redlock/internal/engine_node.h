// The engine's per-node state, shared by engine.cc (polling), engine_node.cc
// (requests on the command connection), engine_connection.cc (that
// connection's life), engine_subscriber.cc and engine_sentinel.cc.
// Internal to the engine.

#ifndef REDLOCK_INTERNAL_ENGINE_NODE_H_
#define REDLOCK_INTERNAL_ENGINE_NODE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "redlock/internal/connection.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/transport.h"
#include "redlock/node_status.h"

namespace redlock::internal {

// epoll data: generation << 32 | sub << 20 | node << 2 | kind; 0 is the
// eventfd. `sub` tells a node's Sentinel connections apart (0 otherwise).
inline constexpr uint64_t kCommandEvents = 1;
inline constexpr uint64_t kSentinelEvents = 2;
inline constexpr uint64_t kSubscriberEvents = 3;
inline constexpr size_t kMaxEngineNodes = size_t{1} << 18;
inline constexpr size_t kMaxSentinelsPerNode = size_t{1} << 12;
uint64_t EngineEventData(uint32_t generation, int node, uint64_t kind, uint32_t sub = 0);

// A side connection (subscriber, Sentinel) silent for this long is sent a
// PING; without any answer within connect_timeout it is replaced. A
// half-open connection (the peer's host gone, a NAT or firewall that forgot
// the flow) is otherwise never noticed, and delivers nothing again.
inline constexpr absl::Duration kKeepaliveIdle = absl::Seconds(1);

// A node behind an open breaker that has not answered anything for this long
// gets a new connection.
inline constexpr absl::Duration kStaleConnection = absl::Seconds(1);

// One request awaiting its reply.
struct Engine::Slot {
  enum class Kind { kRequest, kProbe };
  Kind kind = Kind::kRequest;
  NodeCallback done;  // empty once completed
  TimePoint deadline = TimePoint::max();
  uint8_t expect = 0;   // Command::expect
  const char* op = "";  // Command::op, for messages
  std::string echo;     // kProbe: the nonce the PING must return
  // Command::replies: replies still to come; those before the last are kept.
  uint16_t parts_left = 1;
  bool drain = false;  // Command::drain
  std::vector<Reply> parts;
};

// One Sentinel of a Sentinel-managed node: a connection that asks it where
// the master is in its handshake (and its config epoch), then stays
// subscribed to +switch-master, kept alive by PINGs. Poller only.
struct Engine::SentinelLink {
  using TimePoint = std::chrono::steady_clock::time_point;

  SentinelLink(const Connection::Settings& settings, const SentinelAddress& at)
      : conn(settings), address(HostPort(at)) {
    conn.Retarget(at.host, at.port);
  }
  static std::string HostPort(const SentinelAddress& at) {
    Endpoint e;
    e.host = at.host;
    e.port = at.port;
    return e.ToString();
  }

  Connection conn;
  const std::string address;  // "host:port"
  // What the handshake under way was told (taken once it completes).
  std::string asked_host;
  int asked_port = 0;
  int64_t asked_epoch = -1;
  // Its last answer ("" before any), with its config epoch (-1: unknown).
  std::string host;
  int port = 0;
  int64_t epoch = -1;
  // The discovery round its last answer belongs to, and the last round in
  // which it failed (Node::round).
  uint64_t answered_round = 0;
  uint64_t failed_round = 0;
  std::string error;  // why its last attempt failed ("" since it answered)
  TimePoint last_heard{};
  bool ping_out = false;
  TimePoint ping_sent{};
};

struct Engine::Node {
  enum class State { kDisconnected, kConnecting, kHandshake, kReady };
  using TimePoint = std::chrono::steady_clock::time_point;

  // `settings`: of the node's connections; the Sentinel connections (of a
  // Sentinel-managed node) take their timeouts and backoff.
  Node(int i, const Endpoint& e, const Connection::Settings& settings)
      : index(i),
        endpoint(e),
        name(e.ToString()),
        address(e.uses_sentinel() ? "" : e.ToString()),
        cmd(settings),
        sub(settings) {
    for (const SentinelAddress& at : e.sentinels) {
      sentinels.push_back(std::make_unique<SentinelLink>(SentinelSettings(e, settings), at));
      sentinel_health.push_back(SentinelHealth{.address = sentinels.back()->address});
    }
  }

  static Connection::Settings SentinelSettings(const Endpoint& e, Connection::Settings s) {
    Endpoint login;
    login.username = e.sentinel_username;
    login.password = e.sentinel_password;
    s.endpoint = login;  // host and port: the Sentinel's (Retarget)
    s.make_stream = nullptr;
    return s;
  }

  const int index;
  const Endpoint endpoint;
  const std::string name;

  mutable std::mutex mu;
  // ---- Guarded by mu ----
  State state = State::kDisconnected;
  // The command connection requests are queued on (Transport::Send), named
  // when it starts connecting; kept once it is gone (a follower of it is
  // then treated as any command).
  ConnectionId conn_id = 0;
  // The command connection's stream, for writers outside the poller.
  std::shared_ptr<Stream> stream;
  std::string out;                 // bytes not written yet
  bool writing = false;            // a thread writes n.out outside mu
  bool epollout = false;           // waiting for the socket to take more output
  bool flush_at_turn_end = false;  // output marked during a turn
  std::string write_error;
  std::deque<Slot*> fifo;  // sent, in order, awaiting replies
  size_t expired = 0;      // fifo prefix whose deadline passed
  // fifo suffix whose bytes are not on the wire yet: their deadlines start
  // when they are (a request delayed by this process is not the node's fault).
  size_t unwritten = 0;
  // Requests made while the first connection is being established.
  std::deque<std::pair<Slot*, std::string>> waiting;
  bool breaker_open = false;
  TimePoint breaker_opened_at{};
  TimePoint last_reply_at{};  // any reply, late ones included: the node is alive
  std::string last_error;
  bool probe_in_flight = false;
  TimePoint next_probe{};
  std::vector<Slot*> free_slots;  // recycled requests
  // Completions of one reply batch, run after n.mu is released; kept
  // between batches (taken out while in use) so a batch does not grow a new
  // vector: that was 8 % of the client's time at 64 async chains.
  std::vector<std::pair<NodeCallback, Reply>> ready;
  std::string transport;          // "TLSv1.3", "" for plain TCP (Health)
  std::string address;            // "host:port" connected to ("" while unknown)
  std::vector<NodeEvent> events;  // for the observer, emitted after the turn
  // Why the subscriber connection last failed ("" once it is subscribed
  // again): release notifications fall back to polling meanwhile (Health).
  std::string sub_error;
  std::vector<SentinelHealth> sentinel_health;  // Health(): a copy of the links' state

  // ---- Poller only ----
  Connection cmd;
  bool first_connect_reported = false;
  std::vector<Reply> replies;  // reused per read
  // The subscriber connection (release announcements), opened when the first
  // channel is subscribed.
  Connection sub;
  std::string sub_out;
  bool sub_epollout = false;
  TimePoint sub_last_heard{};  // keep-alive (kKeepaliveIdle)
  bool sub_ping_out = false;
  TimePoint sub_ping_sent{};
  // Sentinel discovery (endpoint.uses_sentinel(), engine_sentinel.cc): one
  // connection per Sentinel. While the master is unknown (at the start, and
  // whenever the connection to it fails) a discovery round asks every
  // Sentinel again, paced by round_backoff; a round is decided once a
  // majority of the Sentinels answered, all of them answered or failed, or
  // connect_timeout passed.
  std::vector<std::unique_ptr<SentinelLink>> sentinels;
  uint64_t round = 0;  // the latest round's number (0: none yet)
  bool round_open = false;
  TimePoint round_deadline{};
  TimePoint next_round{};  // no round starts before
  absl::Duration round_backoff = absl::ZeroDuration();
  // Masters the client could not use (connection failed, ROLE not master),
  // and when: among answers of equal config epoch, the others are tried
  // first, then these, least recently refused first.
  std::map<std::string, TimePoint> refused;
  // The master chosen last, and whether the command connection's target is
  // that master with no connection to it failed since.
  std::string master_host;
  int master_port = 0;
  int64_t master_epoch = -1;  // the config epoch it was named with (-1: unknown)
  bool master_known = false;

  size_t load() const { return fifo.size() + waiting.size(); }
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ENGINE_NODE_H_
