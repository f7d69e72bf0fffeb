// redlock/options.h: where the Redis masters are and how locks on them behave.
//
// Usage:
//
//   redlock::Options options;
//   for (absl::string_view spec : {"127.0.0.1:7001", "127.0.0.1:7002",
//                                  "redis://:secret@127.0.0.1:7003/2"}) {
//     absl::StatusOr<redlock::Endpoint> node = redlock::ParseEndpoint(spec);
//     if (!node.ok()) return node.status();
//     options.nodes.push_back(*std::move(node));
//   }
//   options.node_timeout = absl::Milliseconds(50);
//   auto client = redlock::Client::Create(options);
//
// Every field is validated by Client::Create(); an invalid combination is
// rejected with kInvalidArgument and nothing is sent to any node.

#ifndef REDLOCK_OPTIONS_H_
#define REDLOCK_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace redlock {

class Observer;  // redlock/observer.h

// One Sentinel of a Sentinel-managed node (SentinelSpec::sentinels), or one
// seed of a cluster (ClusterSpec::seeds).
struct SentinelAddress {
  std::string host;  // name or address (IPv6 without brackets)
  int port = 26379;  // 1..65535

  // Same host (as written) and port.
  friend bool operator==(const SentinelAddress& a, const SentinelAddress& b) {
    return a.host == b.host && a.port == b.port;
  }
};

// Sentinel discovery of a node's master (Endpoint::sentinel, what
// redis+sentinel:// sets).
struct SentinelSpec {
  // When set, the node is the master that `sentinels` know by this name:
  // the engine asks every one of them where it is (SENTINEL
  // get-master-addr-by-name, and SENTINEL MASTER for the config epoch),
  // checks that the server found there is a master (ROLE), follows
  // +switch-master announcements from each, and treats a failover as a
  // reconnect to the new master. While the node is down it asks them all
  // again (paced by the reconnection backoff) and prefers the highest config
  // epoch, then a master it has not just failed to use, then the answer of
  // the most Sentinels (docs/guide/nodes.md, "Finding the master through Sentinel").
  // Endpoint::host and port are then not used. Endpoint::username, password
  // and db still apply to the master.
  //
  // SAFETY: a failover can lose a lock this node granted (the replica that
  // is promoted may not have the key yet). Redlock tolerates that on fewer
  // nodes than the quorum margin; to make each node's vote survive its own
  // failover, set Options::durability. With Endpoint::tls
  // (rediss+sentinel://) the Sentinels' certificates are checked against
  // their hosts (or Options::tls.server_name) and the master's as
  // Endpoint::tls_server_name says.
  // Default: empty (a plain node).
  std::string master;
  // The Sentinels to ask (all of them; the order breaks ties between equal
  // answers). Required with `master`, unused otherwise. At most 4096.
  std::vector<SentinelAddress> sentinels;
  // AUTH for the Sentinels (Sentinel's own requirepass or ACL user), which
  // need not be the master's. Empty: no AUTH.
  std::string username;
  // See username.
  std::string password;

  // Field by field.
  friend bool operator==(const SentinelSpec& a, const SentinelSpec& b) {
    return a.master == b.master && a.sentinels == b.sentinels && a.username == b.username &&
           a.password == b.password;
  }
};

// A Redis Cluster as one node (Endpoint::cluster, what redis+cluster://
// sets).
struct ClusterSpec {
  // When set, the node is a whole Redis Cluster: it votes once, and its
  // vote for a key is the answer of the master serving that key's hash
  // slot. The client learns the slot map from any of these seeds (CLUSTER
  // SLOTS), keeps a connection to each master, refreshes the map when a
  // master answers MOVED, when a master's connection fails and every few
  // seconds, and follows ASK during a slot migration. Endpoint::host and
  // port are then not used; Endpoint::username, password and tls apply to
  // every member (Endpoint::db must be 0: a cluster has one database).
  //
  // Keys that one call touches together must share a hash slot on a
  // cluster node: a plain lock has one key; a fencing counter is kept in
  // its resource's slot by the client; a MultiLock set, and the
  // reader-writer lock's and the semaphore's keys, need resources with a
  // common hash tag ("{order42}:a", "{order42}:b"); a call whose keys
  // would span slots is refused before anything is sent (docs/guide/nodes.md,
  // "A Redis Cluster as a node"). SAFETY: a cluster failover can lose a key its old
  // master granted, as a Sentinel failover can (Options::durability).
  // Default: empty (not a cluster). At most 1024 masters per cluster.
  std::vector<SentinelAddress> seeds;

  // Field by field.
  friend bool operator==(const ClusterSpec& a, const ClusterSpec& b) { return a.seeds == b.seeds; }
};

// One independent Redis master.
struct Endpoint {
  // Host name or IPv4/IPv6 address. IPv6 literals are written in brackets in
  // the textual forms ("[::1]:6379") and stored here without them.
  std::string host;
  // TCP port, 1..65535.
  int port = 6379;
  // ACL user name sent with AUTH (Redis 6+). Empty: AUTH with the password
  // only (the "default" user), or no AUTH at all if the password is empty too.
  std::string username;
  // Password sent with AUTH on every (re)connection. Empty: no AUTH.
  std::string password;
  // Logical database selected with SELECT on every (re)connection. Default 0.
  int db = 0;
  // Talk TLS to this node (what rediss:// sets). Trust roots, the client
  // certificate and verification come from Options::tls; the certificate is
  // checked against `host` unless Options::tls.server_name says otherwise.
  // Plain and TLS nodes may be mixed in one client. With Sentinel discovery
  // (rediss+sentinel://), the Sentinels and the master are both reached over
  // TLS. Default: false.
  bool tls = false;
  // With `tls`: the name this node's master certificate is checked against
  // (and sent as SNI), instead of Options::tls.server_name or the host. For
  // a Sentinel-managed node the host is whatever address the Sentinels name
  // (often an IP address, and a different one after every failover): set
  // this to the name the master and its replicas all carry in their
  // certificates. URL form: ?tls_server_name=NAME. Default: empty.
  std::string tls_server_name;

  // ---- How the master is found, one group per scheme -------------------------
  // At most one group is set; a plain node sets none. Each is its scheme's
  // own (redlock/internal/scheme_*.cc): a new scheme adds its group here
  // and touches no other.

  // Sentinel discovery (what redis+sentinel:// sets). Default: unset.
  SentinelSpec sentinel;
  // True for a Sentinel-managed node (sentinel.master set).
  bool uses_sentinel() const { return !sentinel.master.empty(); }

  // A Redis Cluster as one node (what redis+cluster:// sets). Default: unset.
  ClusterSpec cluster;
  // True for a Redis Cluster node (cluster.seeds set).
  bool uses_cluster() const { return !cluster.seeds.empty(); }

  // "host:port" (IPv6 in brackets); for a Sentinel-managed node
  // "sentinel:<master>@host:port+host:port..." (its Sentinels); for a
  // cluster "cluster:host:port+host:port..." (its seeds). Never
  // contains a password; this is the name of the node in every error message.
  std::string ToString() const;

  // Every field equal (a field-by-field comparison: two different hosts
  // that are one server compare unequal; Client::Create finds those).
  friend bool operator==(const Endpoint& a, const Endpoint& b) {
    return a.host == b.host && a.port == b.port && a.username == b.username &&
           a.password == b.password && a.db == b.db && a.tls == b.tls &&
           a.tls_server_name == b.tls_server_name && a.sentinel == b.sentinel &&
           a.cluster == b.cluster;
  }
  // !(a == b).
  friend bool operator!=(const Endpoint& a, const Endpoint& b) { return !(a == b); }
};

// Parses one endpoint. Accepted forms:
//   host:port
//   [ipv6]:port
//   redis://[[user]:password@]host:port[/db]
//   rediss://[[user]:password@]host:port[/db]    (TLS: sets Endpoint::tls)
//   redis+sentinel://[[user]:password@]host[:port][+host[:port]...]/master[/db]
//       (Sentinel discovery: the hosts are the Sentinels, default port
//       26379; `master` is the name they know the master by; the password
//       is the master's. Sentinel credentials are set in Endpoint::sentinel.)
//   rediss+sentinel://...    (the same, Sentinels and master over TLS)
//   redis+cluster://[[user]:password@]host:port[+host:port...]
//       (a Redis Cluster as one node: the hosts are seeds to learn the slot
//       map from, any members of the cluster; see ClusterSpec)
//   rediss+cluster://...     (the same, every member over TLS)
// A TLS form may end in ?tls_server_name=NAME (Endpoint::tls_server_name).
// The password may be percent-encoded (needed for '@', ':' and '/'). A URL
// without a port means 6379.
// Returns kInvalidArgument with the offending text for anything else (missing
// port, port out of range, empty host, bad db number, unknown scheme).
[[nodiscard]] absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text);

// Parses a comma-separated list of endpoints ("h1:p1,h2:p2,..."), as taken by
// the command-line tools and the REDLOCK_NODES environment variable. Empty
// items are an error.
[[nodiscard]] absl::StatusOr<std::vector<Endpoint>> ParseEndpointList(absl::string_view text);

// TLS settings for the nodes whose endpoint has `tls` set (rediss://).
// Loaded once by Client::Create(): a missing, unreadable or malformed file is
// kInvalidArgument naming it. Setting any of these while no node uses TLS is
// kInvalidArgument too (plaintext where TLS was meant).
//
//   options.nodes = *ParseEndpointList("rediss://:pw@redis-1.example:6380,...");
//   options.tls.ca_file = "/etc/redis/tls/ca.crt";
//   options.tls.cert_file = "/etc/redis/tls/client.crt";  // mutual TLS only
//   options.tls.key_file = "/etc/redis/tls/client.key";
struct TlsOptions {
  // Trust roots that the nodes' certificates must chain to: a PEM file of
  // CA certificates, and/or a directory of them in OpenSSL's hashed layout
  // (c_rehash). Both empty: the system's trusted CAs (what a managed Redis
  // with a public certificate needs). Default: empty.
  std::string ca_file;
  // See ca_file.
  std::string ca_dir;

  // Client certificate (PEM, may include intermediates) and its private key
  // (PEM, not encrypted), for nodes that require one (tls-auth-clients yes:
  // mutual TLS). Both or neither. Default: none.
  std::string cert_file;
  // See cert_file.
  std::string key_file;

  // The name the nodes' certificates are checked against, and sent as SNI
  // (for names; IP addresses are checked against the certificate's IP
  // entries and not sent). Empty: each node's own host. Set it when every
  // node is reached by address but presents a certificate for one name.
  // Default: empty.
  std::string server_name;

  // Check the node's certificate: a trusted chain, in its validity period,
  // issued for the server name. UNSAFE when false: anyone on the path can
  // then impersonate the nodes, read the traffic and grant or steal locks;
  // for experiments only. Default: true.
  bool verify_peer = true;
};

// Options: where the nodes are and how locks on them behave, every field with
// its default (see the top of this file). Checked by ValidateOptions and
// Client::Create.
struct Options {
  // ---- Nodes and quorum ---------------------------------------------------

  // The independent Redis masters (not replicas of each other: Redlock's
  // safety rests on their independence). At least one; no server may appear
  // twice, since it would then vote twice: Client::Create refuses two entries
  // that resolve to one address and port, and two entries whose servers
  // report the same run_id (two names for one server, a proxy, a port
  // forward); a duplicate found only on a later connection is refused, with
  // that message in Health() and in every call's node errors. The run_id
  // comes from INFO: see require_node_identity for ACL users denied it.
  std::vector<Endpoint> nodes;

  // Refuse a node whose server cannot be identified, so that no server can
  // hide behind two entries of `nodes`. The identity is INFO's run_id; an
  // ACL user that may not run INFO (INFO is in @dangerous, so the common
  // "+@all -@dangerous" denies it) leaves it unknown, and then a server
  // listed twice (two addresses of one host, a proxy, a port forward) would
  // count twice: an acquisition is safe from that (its SET NX succeeds on
  // one of the two entries only) but an Extend is not (the token is found
  // under both, two votes from one server). With true, such a node is
  // refused when the client has two nodes or more: Client::Create fails with
  // kFailedPrecondition naming it, and a node met later is refused on every
  // connection with that message in Health() and the calls' node errors.
  // Fix it by granting the user INFO (`ACL SETUSER <user> +info`). False
  // accepts such nodes unchecked: you vouch that the entries are distinct
  // servers. Default: true.
  bool require_node_identity = true;

  // How many nodes must grant for a lock to be held. 0 means a majority,
  // N/2+1. Otherwise it must be a majority (> N/2) and at most N; quorum == N
  // is the all-nodes mode (see multilock/multi_lock.h).
  // Default: 0.
  int quorum = 0;

  // ---- Timing ---------------------------------------------------------------

  // Deadline for one node to answer one command. A node that has not answered
  // by then counts as a "no" for that round and its late reply is discarded.
  // Keep it small compared to the lock ttl: it bounds how much of the ttl a
  // slow node can eat. Default: 50 ms.
  absl::Duration node_timeout = absl::Milliseconds(50);

  // Allowance for the rate difference between the clocks of the client and of
  // the nodes, as a fraction of the ttl. A lease's validity is
  //   ttl - elapsed - (ttl * clock_drift_factor + clock_drift_floor).
  // Must be in [0, 1). Default: 0.01.
  double clock_drift_factor = 0.01;

  // Constant part of the drift allowance (timer granularity of Redis, which
  // expires keys with millisecond resolution). Must be >= 0. Default: 2 ms.
  absl::Duration clock_drift_floor = absl::Milliseconds(2);

  // ---- Retries (Acquire without a wait) -------------------------------------

  // Attempts made by Acquire(resource, ttl). TryAcquire always makes one.
  // Must be >= 1. Default: 3.
  int max_attempts = 3;

  // Pause between attempts: uniformly random in
  // [retry_delay - retry_jitter, retry_delay + retry_jitter], clamped at 0.
  // The randomness keeps competing clients from retrying in lock step.
  // Defaults: 200 ms and 100 ms.
  absl::Duration retry_delay = absl::Milliseconds(200);
  // See retry_delay.
  absl::Duration retry_jitter = absl::Milliseconds(100);

  // ---- Blocking acquisition (Acquire with a wait, Mutex::lock) ---------------

  // While waiting for a held resource, subscribe (on each node, on connections
  // of their own) to the channel the release script publishes on, and try
  // again as soon as a release is announced. Default: true.
  bool release_notifications = true;

  // Polling fallback while waiting (a lost notification, a lease that simply
  // expired, notifications off): the pause between attempts starts at
  // retry_delay/4, doubles up to this cap, with jitter. Must be > 0.
  // Default: 250 ms.
  absl::Duration wait_poll_max = absl::Milliseconds(250);

  // ---- Keys -------------------------------------------------------------------

  // Prepended to every resource name to form the Redis key. The default
  // (empty) makes the key exactly the resource name and the value exactly the
  // random token, the convention of every other Redlock client, so locks taken
  // by redsync, node-redlock, Redisson's RedLock or redis-plus-plus on the same
  // nodes and names exclude ours and the reverse. Default: "".
  std::string key_prefix;

  // Fencing tokens (see lease.h, Lease::fencing_token()). The counters live
  // on the nodes without a ttl and must survive restarts: run the nodes with
  // appendfsync always, or see fencing_lost_counters (with an odd N and the
  // default quorum, one node that loses its counter can repeat a token; see
  // docs/guide/fencing.md). Costs one extra round trip per acquisition
  // and keeps one counter key per resource on every node (or one per
  // namespace: fencing_counters). Default: false.
  bool fencing = false;

  // How many nodes may lose their fencing counter (a restart without
  // appendfsync always, a counter set back by a restore or by hand) while
  // tokens still strictly increase across holders. A fenced acquisition then
  // needs grants from, reads the counters of, and commits its token to
  //   F = max(quorum, ceil((N + fencing_lost_counters + 1) / 2))
  // nodes instead of a quorum, so that the commit sets of any two holders
  // share fencing_lost_counters + 1 nodes or more (the proof is in README
  // "Fencing tokens"). What it costs: availability, since only N - F nodes
  // may be down, slower than node_timeout or holding a garbage counter
  // before fenced acquisitions fail (kUnavailable when down; with 1: N=3 none
  // instead of 1, N=5 one instead of 2, N=7 two instead of 3), and rounds
  // that wait for the F-th reply instead of the quorum-th (see the bench's
  // fencing rows). An even N already survives one lost counter with 0 (N=4:
  // any two sets of 3 share two nodes). Extend and Release keep the quorum.
  // Needs fencing; must be in 0..N-1. Default: 0.
  int fencing_lost_counters = 0;

  // Where the fencing counters live (docs/guide/fencing.md, memory per
  // resource):
  // - kPerResource: one counter per resource, `<key_prefix><resource>:fence`,
  //   never expiring: one key per resource ever locked, on every node.
  // - kShared: one counter for the whole namespace, `<key_prefix>:fence`,
  //   shared by every resource under this key_prefix: nothing per resource.
  //   Tokens still strictly increase per resource (the counter only grows,
  //   and each holder reads and raises it as with kPerResource); they are no
  //   longer consecutive per resource, and every fenced acquisition of the
  //   namespace writes the one key (Redis serves it at memory speed; in a
  //   Redis Cluster it is one slot). Clients of one namespace must agree:
  //   switching to kShared is safe (tokens jump up) only if the shared
  //   counter starts above every per-resource one, so set it once to their
  //   maximum first; switching back is not.
  // Needs fencing. Default: kPerResource.
  enum class FencingCounters { kPerResource, kShared };
  // See FencingCounters.
  FencingCounters fencing_counters = FencingCounters::kPerResource;

  // ---- Durability on replicated nodes ----------------------------------------

  // Redlock wants independent masters. Many fleets nonetheless run each node
  // as a master with asynchronous replicas (Sentinel, a managed service).
  // There a node can lose a lock it granted: the master fails before its
  // replica has the key and the replica is promoted (the failover every
  // article on Redis locks starts from), or a partitioned old master keeps
  // granting while a new one is promoted (split brain). Lose that on a
  // majority and two clients hold the lock.
  //
  // With `durability.replicas` = K > 0, a node's grant counts only once at
  // least K of its replicas have the write: behind the SET, on the same
  // connection, the client sends `WAIT K timeout` (or `WAITAOF`, see
  // `fsync`), pipelined right behind it when no other WAIT is out on that
  // node, else as soon as that one returns (a WAIT covers every earlier
  // write on its connection: one in flight per node, per master of a
  // cluster node, confirms them all). A
  // node that cannot confirm in time votes "no" and its key is removed at
  // once. The same holds for the fencing round's counter write (the WAIT
  // behind the commit covers the round-1 SET too: one stream, one offset)
  // and for Extend (an extension counts only where it is replicated).
  // Releases are not waited for: a release lost in a failover only delays
  // the next holder. A node whose replicas left 3 WAITs in a row unconfirmed
  // votes "no" at once, without being asked, until a probe write (one every
  // max(breaker_probe_interval, 4 x timeout)) is confirmed
  // (NodeHealth::replicas_lagging).
  //
  // What it protects against: a failover to a replica that has the key (so K
  // must cover the replica that will be promoted: with one replica K = 1;
  // with several, K = all of them, or trust the failover to pick the most
  // up-to-date one, which Sentinel does by replication offset) and a split
  // brain (a partitioned master gets no replica acknowledgements, so it
  // cannot grant). What it does not: losing the master and every replica
  // that confirmed at once, or replicas that restart without persistence.
  //
  // What it costs: on every grant, extension and fencing commit, the time
  // the replicas take to acknowledge (one replica round trip on a healthy
  // node; see the bench's `durability` rows), and on a node whose replicas
  // lag or are gone, `timeout` at a time during which that node's
  // connection (shared by every caller of the client) executes nothing
  // else, until that node is left out (above).
  struct Durability {
    // K: replicas that must confirm each write before the node's vote
    // counts. 0 turns the check off (the nodes are independent masters).
    // Default: 0.
    int replicas = 0;
    // How long a node waits for its replicas (WAIT's timeout, whole
    // milliseconds, at least 1 ms). It is part of the node's round trip, so
    // it must be shorter than node_timeout; leave room for the round trip
    // itself (node_timeout / 2 or less). Default: 20 ms.
    absl::Duration timeout = absl::Milliseconds(20);
    // Also require the write to be on disk: `WAITAOF 1 K timeout` instead of
    // WAIT (the node's own append-only file and those of K replicas, fsynced).
    // Needs Redis 7.2 or later with appendonly yes on the node and its
    // replicas; Client::Create asks every reachable node whether it knows
    // WAITAOF and fails with kFailedPrecondition naming the first that does
    // not; a node met later without it votes "no". Default: false.
    bool fsync = false;
  };
  // See Durability. Default: off (replicas = 0).
  Durability durability;

  // ---- Connections --------------------------------------------------------------

  // Deadline for one connection attempt including the TLS handshake, AUTH,
  // SELECT and loading the scripts. Default: 1 s.
  absl::Duration connect_timeout = absl::Seconds(1);

  // TLS for the nodes whose endpoint says so (rediss://). See TlsOptions.
  TlsOptions tls;

  // Release and extend a single lock by the server's own compare-and-set
  // commands where it has them (DELIFEQ or DELEX ... IFEQ, and SET ... IFEQ
  // ... PX: Valkey 9, Redis 8.4), as learned at each connection's handshake
  // from COMMAND INFO and COMMAND DOCS. False keeps every node on the
  // scripts (or on the script-free transactions where scripting is
  // forbidden); the bench compares the two. Default: true.
  bool server_commands = true;

  // Reconnection backoff: the first retry after a failed or lost connection
  // waits reconnect_backoff_min, each further failure doubles it up to
  // reconnect_backoff_max. Defaults: 10 ms and 1 s.
  absl::Duration reconnect_backoff_min = absl::Milliseconds(10);
  // See reconnect_backoff_min.
  absl::Duration reconnect_backoff_max = absl::Seconds(1);

  // Circuit breaker: after a node misses a deadline or its connection fails,
  // requests to it fail at once (a "no" vote that costs nothing) until a PING
  // probe, sent every breaker_probe_interval, is answered within node_timeout.
  // Default: 100 ms.
  absl::Duration breaker_probe_interval = absl::Milliseconds(100);

  // Most commands that may wait for a reply on one node's connection (the
  // rest fail at once with kUnavailable). Bounds memory while a node is
  // stopped. A release that follows its SET on that connection may go up to
  // twice this (it must not be refused: its SET may still run), and a
  // release that did not get through waits to be sent again, at most this
  // many per node. Must be >= 16. Default: 4096.
  size_t max_in_flight_per_node = 4096;

  // ---- Replies from hostile or broken nodes ---------------------------------------

  // The largest reply a node may send, in bytes as encoded on the wire
  // (nested elements included). A reply that announces more (a bulk string
  // whose header says 2 GB) or reaches more (a line without an end) is a
  // protocol violation, refused before the memory is taken: the node's
  // connection is dropped and reconnected, and its requests fail with
  // "protocol error: reply over the limit: ... Options::max_reply_bytes"
  // (the node is named in the call's error, in Health() and in the
  // observer's node events). The library's own replies are small (an INFO
  // section, a fencing counter per resource); larger ones can only be values
  // that someone else wrote under a lock key (Client::Inspect returns it).
  // Must be >= 64 KiB. Default: 1 MiB.
  size_t max_reply_bytes = size_t{1} << 20;

  // The most elements one reply may hold, counted over all its nested
  // arrays. An array header announcing more (`*2000000000`) is refused the
  // same way before anything is allocated. The largest array the library
  // asks for has one element per resource of a multi-resource lock, plus
  // one (MultiLock takes up to 256 resources). Must be >= 1024.
  // Default: 4096.
  size_t max_reply_elements = 4096;

  // Wait in Client::Create() for the first connection to every node (a node
  // that is down does not fail Create: Redlock tolerates a minority down).
  // Default: true.
  bool wait_for_connections = true;

  // ---- Observation -----------------------------------------------------------------

  // Receives an event for every acquisition, extension and release, lease
  // at risk or lost, and node state change (redlock/observer.h: threads and
  // re-entrancy rules). redlock/metrics.h's MetricsCollector is one.
  // Default: none.
  std::shared_ptr<Observer> observer;
};

// Checks `options` as Client::Create() does, except that it opens no file
// (Create also loads the TLS files). Returns kInvalidArgument naming the
// first offending field.
[[nodiscard]] absl::Status ValidateOptions(const Options& options);

// The quorum that `options` resolves to (N/2+1 when options.quorum is 0).
int EffectiveQuorum(const Options& options);

// The clock drift allowance of a lock of `ttl` (docs/design.md 5.3):
//   ttl * options.clock_drift_factor + options.clock_drift_floor.
// A lease's validity is ttl - elapsed - DriftAllowance(ttl, options), and a
// ttl not larger than its allowance is refused. The one place this rule is
// written: the client computes it here, and so do the harnesses and
// baselines that must judge a lease as the client does.
absl::Duration DriftAllowance(absl::Duration ttl, const Options& options);

// Limits on what a resource name may be (see Client::TryAcquire).
inline constexpr size_t kMaxResourceLength = 4096;

// The smallest values Options::max_reply_bytes and max_reply_elements take.
inline constexpr size_t kMinReplyBytes = size_t{64} << 10;
// See kMinReplyBytes.
inline constexpr size_t kMinReplyElements = 1024;

}  // namespace redlock

#endif  // REDLOCK_OPTIONS_H_
