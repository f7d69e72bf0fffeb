// redlock/node_status.h: what the client knows about each node: NodeHealth
// (Client::Health: the connection, breaker, TLS, Sentinels, cluster shards)
// and NodeView (Client::Inspect: who holds a resource on each node).
//
//   for (const redlock::NodeHealth& n : client->Health()) {
//     if (!n.connected) LOG(WARNING) << n.node << " down: " << n.last_error;
//   }
//   absl::StatusOr<std::vector<redlock::NodeView>> views = client->Inspect("orders/42");
//   if (views.ok()) {
//     for (const redlock::NodeView& v : *views) {
//       if (v.held) LOG(INFO) << v.node << " holds it for " << v.ttl_left;
//     }
//   }
//
// Both are plain values, copies of the client's state when the call returned.

#ifndef REDLOCK_NODE_STATUS_H_
#define REDLOCK_NODE_STATUS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace redlock {

// What one node says about a resource (Client::Inspect).
struct NodeView {
  std::string node;         // "host:port"
  absl::Status status;      // why the node could not be asked, or OK
  bool held = false;        // the key exists
  std::string token;        // its value, when held
  absl::Duration ttl_left;  // remaining ttl, when held
  // The fencing counter stored next to the key on this node. Counters differ
  // between nodes: a holder's second round raises them only on the nodes of
  // its quorum; the highest one (of any majority) is the latest token.
  uint64_t fence_counter = 0;
};

// What one node says about a primitive of the lock family
// (Client::InspectFamily): the reader-writer lock, a semaphore's permits,
// an election. Read-only; the fields of other kinds stay empty.
struct FamilyNodeView {
  std::string node;     // "host:port"
  absl::Status status;  // why the node could not be read, or OK
  // The lock key's token ("" when free): the writer, or the leader.
  std::string holder;
  // The lock key's remaining ttl, when held.
  absl::Duration holder_ttl_left = absl::ZeroDuration();
  int readers = 0;          // a reader-writer lock's live reader entries
  int waiting_writers = 0;  // and its live writer intents
  // The primitive's fencing counter on this node (a leader's: its term).
  uint64_t fence_counter = 0;
  // A semaphore's permits: each permit key's token ("" when free).
  std::vector<std::string> permits;
  // A fair lock's queue: the live places in order (the first 64), and how
  // many are live in all.
  struct Place {
    std::string waiter;                              // the waiter's id
    uint64_t ticket = 0;                             // its place: served by ticket
    absl::Duration ttl_left = absl::ZeroDuration();  // until the place lapses
  };
  std::vector<Place> queue;  // the first 64 live places, in the order served
  int waiting = 0;           // live places in all
};

// One Sentinel of a Sentinel-managed node (NodeHealth::sentinels), as the
// client sees it: every Sentinel is asked where the master is, and each one
// the client can reach stays connected to announce failovers.
struct SentinelHealth {
  std::string address;  // the Sentinel, "host:port"
  // Its connection is up and subscribed to +switch-master (and answered its
  // last keep-alive PING).
  bool connected = false;
  // The master it named last ("host:port"; "" before it answered), and the
  // config epoch it gave for it (SENTINEL MASTER's config-epoch; -1 when it
  // did not say, e.g. an ACL user without that command). A higher epoch is
  // a later failover: the client prefers the master named with the highest.
  std::string master;
  // See `master`.
  int64_t config_epoch = -1;
  // Why its last connection failed or was replaced ("" while it answers).
  std::string last_error;
};

// One master of a node that is a Redis Cluster (NodeHealth::shards).
struct ShardHealth {
  std::string address;        // "host:port" of the master
  int slots = 0;              // hash slots it serves, as the client's slot map says
  bool connected = false;     // its connection is established and ready
  bool breaker_open = false;  // requests to it fail fast until a probe succeeds
  size_t in_flight = 0;       // commands awaiting its reply
  std::string last_error;     // its most recent connection or request error
};

// Health of one node's connection, as seen by the client (Client::Health).
struct NodeHealth {
  std::string node;  // Endpoint::ToString()
  // How the node is found, as its URL scheme: "redis", "rediss" (a static
  // address), "redis+sentinel", "rediss+sentinel" (Sentinel discovery).
  std::string scheme;
  // Where the node is reached: "host:port"; for a Sentinel-managed node, the
  // master the Sentinels named last ("" until one has).
  std::string address;
  bool connected = false;     // the connection is established and ready
  bool breaker_open = false;  // requests fail fast until a probe succeeds
  size_t in_flight = 0;       // commands awaiting a reply
  std::string last_error;     // the most recent connection or request error
  bool tls = false;           // the node is reached over TLS (rediss://)
  // The protocol its current connection negotiated ("TLSv1.3"); empty while
  // not connected, and for plain TCP.
  std::string tls_version;
  // Why the connection that listens for release announcements last failed
  // ("" once it listens again): waiting acquisitions poll this node
  // meanwhile (Options::release_notifications).
  std::string notifications_error;
  // Options::durability: the node's replicas left its last writes
  // unconfirmed, so its durable votes are "no" at once, without asking it,
  // until a probe write (one every few durability timeouts) is confirmed.
  bool replicas_lagging = false;
  // Releases of keys this client may have left on the node (an attempt that
  // failed, a release that did not get through), waiting to be sent again
  // once the node can take them.
  size_t cleanups_pending = 0;
  // How the lock's compare-and-set steps run on the node: false with Lua
  // scripts (EVALSHA); true when the node forbids scripting (an ACL user
  // without @scripting, EVAL/EVALSHA/SCRIPT renamed away), found at the
  // handshake, and the client uses WATCH/MULTI/EXEC transactions instead
  // (docs/guide/nodes.md, "Nodes that forbid scripting"). `scriptless_reason` is what the
  // node answered.
  bool scriptless = false;
  // See `scriptless`.
  std::string scriptless_reason;
  // On such a node, transactions waiting for their turn (one runs at a
  // time; at most Options::max_in_flight_per_node wait, more are refused).
  size_t transactions_waiting = 0;
  // The script-free compare-and-set commands the node has, as its last
  // handshake read them from COMMAND INFO and COMMAND DOCS (never from its
  // version; docs/compat.md has which server has which). All false until a
  // handshake read them (`commands_known`), and on a server that refuses
  // COMMAND or with Options::server_commands off. For a cluster node, its
  // master last connected.
  bool commands_known = false;
  bool has_delifeq = false;     // DELIFEQ key value (Valkey 9.0+)
  bool has_delex_ifeq = false;  // DELEX key IFEQ value (Redis 8.4+, Valkey 9.2)
  bool has_set_ifeq = false;    // SET key value IFEQ current (Valkey 8.1+, Redis 8.4+)
  // How the node's locks are released and extended: "scripts",
  // "transactions (WATCH/MULTI/EXEC)" on a node that forbids scripting, or
  // with the commands above, e.g. "release by DELIFEQ, extend by SET IFEQ,
  // the rest by scripts" (a single key's release and extension use them;
  // sets and the lock family keep the scripts).
  std::string path;
  // A Sentinel-managed node (redis+sentinel://): its Sentinels, in the
  // endpoint's order. Empty for other nodes.
  std::vector<SentinelHealth> sentinels;
  // A Redis Cluster (redis+cluster://): its masters, as the slot map the
  // client holds names them, with their connections; `connected` is then
  // true when every one of them is connected, and `address` is the member
  // the client asks for the slot map. Empty for other nodes.
  std::vector<ShardHealth> shards;
  // With `shards`: hash slots no master serves in the client's map (0 when
  // the cluster covers them all).
  int slots_uncovered = 0;
};

}  // namespace redlock

#endif  // REDLOCK_NODE_STATUS_H_
