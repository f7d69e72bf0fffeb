// sim/node.h: one simulated Redis server (a master, its replicas, or a
// Redis Cluster member) for the deterministic simulator (sim/README.md).
//
// A Node executes RESP commands given as argument vectors, with Redis's
// semantics, at a time the caller passes in (the node's own wall clock, in
// milliseconds: the world may make it jump). It never reads a real clock,
// never does I/O and never draws a random number of its own: everything
// that varies comes from the caller, so one seed gives one history.
//
// Scripts run as written: EVAL/EVALSHA bodies go through an embedded Lua 5.1
// interpreter (liblua5.1) whose redis.call/redis.pcall are bound to this
// node, so a bug inside one of the library's scripts is a bug here too.
//
// What is per connection (WATCH, MULTI, ASKING, SELECT) lives in a Session
// the caller keeps for each simulated connection; a Session is reset when
// its connection is replaced.
//
//   sim::Node node(sim::Node::Config{.name = "n0"});
//   sim::Session session;
//   sim::Result r = node.Execute(session, {"SET", "k", "v", "NX", "PX", "100"}, now_ms);
//   // r.reply is +OK; r.published lists what the command published.
//
// Blocking commands (WAIT, WAITAOF) do not block here: Execute returns a
// Result with `block` set, and the world resolves it with AckedReplicas /
// FsyncedReplicas as replication advances or the timeout passes.

#ifndef REDLOCK_SIM_NODE_H_
#define REDLOCK_SIM_NODE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redlock/internal/reply.h"

namespace redlock::sim {

using Argv = std::vector<std::string>;
using internal::Reply;

// Per-connection state. Default-constructed for a new connection.
struct Session {
  int db = 0;
  bool asking = false;  // the next command was preceded by ASKING
  bool in_multi = false;
  bool multi_error = false;  // a queued command was refused: EXEC aborts
  std::vector<Argv> queued;  // commands queued since MULTI
  // key, its version at WATCH: the node's change counter then (bits 5 and
  // up), the database (bits 1-4), and bit 0 set when the key was already
  // expired but not yet deleted (Redis does not count the deletion of such a
  // key as a change).
  std::vector<std::pair<std::string, uint64_t>> watched;
  bool watch_dirty = false;             // a watched key changed (or was flushed/expired)
  int64_t last_write_offset = 0;        // replication offset of this connection's last write
  std::vector<std::string> subscribed;  // channels (subscriber connections)
  std::string user = "default";         // AUTH's user (NOPERM texts name it)
  std::string name;                     // CLIENT SETNAME
};

// A message PUBLISHed by a command (the script's or a PUBLISH).
struct Publication {
  std::string channel;
  std::string payload;
};

// A WAIT or WAITAOF that must wait: the world answers it with
// Reply::Integer(AckedReplicas(offset)) (WAIT) or the two-element array of
// WAITAOF once `numreplicas` are reached or `timeout_ms` passed (0: forever).
struct Block {
  bool aof = false;    // WAITAOF numlocal numreplicas timeout
  int64_t offset = 0;  // the connection's last write when WAIT ran
  int numlocal = 0;    // WAITAOF only
  int numreplicas = 0;
  int64_t timeout_ms = 0;
};

struct Result {
  Reply reply;
  std::optional<Block> block;          // set: reply is not yet decided
  std::vector<Publication> published;  // in order
  bool wrote = false;                  // the command changed the dataset: it has a
                                       // replication offset (Session::last_write_offset)
};

class Node {
 public:
  struct Config {
    std::string name;    // "n0": for error texts and INFO
    std::string run_id;  // INFO server's run_id (40 hex chars); derived from name if empty
    std::string version = "7.0.15";     // redis_version; for Valkey, valkey_version
    std::string server_name = "redis";  // "valkey" adds server_name/valkey_version to INFO
    bool scripting = true;              // false: EVAL/EVALSHA/SCRIPT answer as a Lua-less server
    // EVAL/EVALSHA/SCRIPT answer NOPERM (an ACL user without @scripting).
    bool scripting_noperm = false;
    bool delifeq = false;     // DELIFEQ key value (Valkey 9)
    bool set_ifeq = false;    // SET ... IFEQ value (Valkey 8.1, Redis 8.4)
    bool delex = false;       // DELEX key IFEQ value (Redis 8.4)
    bool appendonly = false;  // WAITAOF's numlocal is 1 when true
    int replicas = 0;         // simulated replicas (see Replicate/Failover)
    // Cluster mode: the slots this member serves (inclusive ranges); empty: not a cluster member.
    std::vector<std::pair<int, int>> slots;
    // Cluster mode: this member's "host:port" as CLUSTER SLOTS and MOVED name
    // it ("127.0.0.1:7000" when empty) and its node id (40 hex chars; derived
    // from the name when empty).
    std::string address;
    std::string cluster_id;
  };

  // Cluster mode: another master as this member knows it.
  struct ClusterPeer {
    std::string address;                     // "host:port"
    std::string id;                          // 40 hex chars; derived from the address when empty
    std::vector<std::pair<int, int>> slots;  // inclusive ranges
  };

  explicit Node(Config config);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const Config& config() const;

  // Executes one command for `session` at node time `now_ms`. Unknown
  // commands answer "ERR unknown command ..." as Redis does. Never throws.
  Result Execute(Session& session, const Argv& argv, int64_t now_ms);

  // Replication. Every write has an offset (1, 2, ...); replica r applies the
  // log up to the offset the world gives it (never backwards).
  int64_t master_offset() const;
  void Replicate(int replica, int64_t up_to_offset);
  int64_t replica_offset(int replica) const;
  int AckedReplicas(int64_t offset) const;    // replicas with replica_offset >= offset
  int FsyncedReplicas(int64_t offset) const;  // same (replicas fsync what they apply)
  // The replica becomes the master: the dataset is what it had applied;
  // writes past its offset are lost. Replicas are reset to that state.
  void Failover(int replica);

  // Restart. With `keep_data` (persistence with appendfsync always) the
  // dataset survives; without, it is empty. Scripts are always flushed and
  // the run id changes (new_run_id). Sessions held by the caller are stale:
  // the world replaces the connections.
  void Restart(bool keep_data, const std::string& new_run_id);

  // Cluster slot migration: `slot` moves from this member to `target_name`
  // ("host:port" as CLUSTER SLOTS names it). While migrating, a command on
  // the slot whose keys are all here runs; one that names a key no longer
  // here answers ASK; a multi-key command with keys on both sides answers
  // TRYAGAIN. Keys are moved by MoveKeys (the world decides when).
  void BeginMigration(int slot, const std::string& target_name);
  void EndMigration(int slot);  // the slot is no longer served here: MOVED
  // Importing side: accepts the slot's commands after ASKING.
  void BeginImport(int slot);
  void EndImport(int slot);  // the slot is served here
  // Moves up to `count` keys of `slot` to `to`; returns how many moved.
  int MoveKeys(int slot, Node& to, int count, int64_t now_ms);

  // Cluster mode: the other masters and their slots, as this member believes
  // them (the world may leave a member's view stale): CLUSTER SLOTS lists
  // them beside this member's own slots, and a command on one of their slots
  // answers MOVED there. A slot nobody serves answers CLUSTERDOWN. This
  // member's own slots (Config::slots, as migrations changed them) win over
  // a peer that claims them.
  void SetClusterPeers(std::vector<ClusterPeer> peers);

  // The connection of `session` closed: its subscriptions end (PUBLISH counts
  // subscribers), its WATCH and MULTI are dropped. The world calls it when it
  // replaces a connection; Restart and Failover drop every subscription.
  void Disconnect(Session& session);

  // Redis's active expiry: deletes every key whose expiry time has passed at
  // `now_ms` (keys otherwise expire lazily, when a command reads them).
  // Returns how many went. Not replicated: a replica expires by the same
  // clock.
  int ActiveExpire(int64_t now_ms);

  // Inspection for checks and tests (never used by the client under test).
  std::optional<std::string> Get(const std::string& key, int64_t now_ms);
  std::vector<std::string> Keys(int64_t now_ms);  // live keys, sorted
  // A live key's expiry time in node ms (-1: none); nullopt when it is gone.
  std::optional<int64_t> ExpireAt(const std::string& key, int64_t now_ms);
  // The SHA-1s of the script cache.
  std::vector<std::string> CachedScripts() const;
  void FlushScripts();  // SCRIPT FLUSH

  // Commands (argv[0], upper case) and script SHA-1s this node has run,
  // with counts: the command-coverage test reads them.
  const std::vector<std::pair<std::string, int64_t>>& CommandCounts() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace redlock::sim

#endif  // REDLOCK_SIM_NODE_H_
