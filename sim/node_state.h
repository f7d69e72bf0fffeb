// sim/node_state.h: the inside of a simulated node (sim/node.h), shared by
// the files that implement its commands. Private to sim/.
//
// The dataset is one ordered map per database, so that nothing a reply or a
// log shows depends on a hash seed or an address. A key that is deleted
// stays in the map as an absent entry: it keeps the change counters WATCH
// compares (Redis tracks watched keys whether or not they exist).

#ifndef REDLOCK_SIM_NODE_STATE_H_
#define REDLOCK_SIM_NODE_STATE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/node.h"

namespace redlock::sim::node_internal {

inline constexpr int kDatabases = 16;
inline constexpr int kSlots = 16384;

// A sorted set: members by name and by (score, member), as Redis orders them
// (equal scores by member bytes, compared as unsigned).
struct ZSet {
  std::map<std::string, double, std::less<>> scores;
  std::set<std::pair<double, std::string>> order;

  void Set(const std::string& member, double score);  // adds or moves
  bool Remove(absl::string_view member);
  size_t size() const { return scores.size(); }
};

struct Value {
  bool is_zset = false;
  std::string str;
  ZSet zset;
  int64_t expire_at = -1;  // node ms; -1: no expiry
};

// A key's entry. `present` false: the key does not exist (kept for WATCH).
struct Entry {
  bool present = false;
  Value value;
  uint64_t last_change = 0;  // the node's change counter at its last change
  uint64_t prev_change = 0;  // and at the change before that
};

using Keyspace = std::map<std::string, Entry, std::less<>>;
using Dataset = std::array<std::map<std::string, Value, std::less<>>, kDatabases>;

// One key as a write left it, for the replicas.
struct KeyChange {
  int db = 0;
  std::string key;
  std::optional<Value> value;  // nullopt: deleted
};

struct LogEntry {
  int64_t offset = 0;
  std::vector<KeyChange> changes;
};

struct Replica {
  int64_t offset = 0;
  Dataset data;
};

// What one command runs with.
struct Ctx {
  Session* session = nullptr;
  int db = 0;           // the database it addresses (a script may SELECT its own)
  int64_t now = 0;      // node ms
  bool script = false;  // run by redis.call / redis.pcall
  bool exec = false;    // run by EXEC
  bool asking = false;  // the session's ASKING applies
  Result* result = nullptr;
};

class State;
using Handler = Reply (*)(State&, Ctx&, const Argv&);

// One command (or subcommand) of the table.
struct Spec {
  const char* name;   // lower case; "script|load" for a subcommand
  int arity;          // Redis's: n exact, -n at least n
  int first_key = 0;  // key positions (0: none); last -1: to the end
  int last_key = 0;
  int step = 0;
  uint32_t flags = 0;
  Handler handler = nullptr;
  const char* categories = "";  // COMMAND INFO: "@read @string @fast"
  std::vector<Spec> subcommands;
  int index = 0;  // in the table, for the counts
};

enum SpecFlag : uint32_t {
  kWrite = 1,
  kReadonly = 2,
  kNoScript = 4,    // refused from a script
  kPubSub = 8,      // allowed on a subscribed connection (RESP2)
  kScripting = 16,  // @scripting: NOPERM for a user without it
  kImmediate = 32,  // runs at once inside MULTI (MULTI, EXEC, DISCARD, WATCH, QUIT, RESET)
  kEvalKeys = 64,   // keys are EVAL's (numkeys at argv[2])
  kFast = 128,
  kLoading = 256,
  kStale = 512,
  kNeedsVersion72 = 1024,  // exists from Redis 7.2 (or any Valkey)
  kDelifeq = 2048,         // Config::delifeq
  kDelex = 4096,           // Config::delex
  kDenyOom = 8192,
  kAdmin = 16384,
};

// The command table (node_commands.cc), in Redis's names.
const std::vector<Spec>& CommandTable();
// The entry for `name` (any case), or null.
const Spec* FindCommand(absl::string_view name);
// A subcommand of `container` (any case), or null.
const Spec* FindSubcommand(const Spec& container, absl::string_view name);
bool ArityOk(const Spec& spec, size_t argc);
// The key positions of argv for `spec` (EVAL's numkeys, the table's range).
std::vector<int> KeyPositions(const Spec& spec, const Argv& argv);

class State {
 public:
  explicit State(Node::Config c);

  Node::Config config;
  std::string run_id;
  int version[3] = {7, 0, 0};  // the Redis version it behaves as
  bool valkey = false;

  std::array<Keyspace, kDatabases> dbs;
  uint64_t changes = 0;   // the change counter (WATCH)
  uint64_t reset_at = 0;  // changes when the dataset was last replaced (restart, failover)
  int64_t master_offset = 0;
  std::vector<Replica> replicas;
  std::deque<LogEntry> log;  // entries past the slowest replica
  int failovers = 0;

  // The script cache: SHA-1 -> body.
  std::map<std::string, std::string, std::less<>> scripts;
  // Subscribers per channel, over every connection.
  std::map<std::string, int64_t, std::less<>> subscribers;

  // Cluster mode.
  bool cluster = false;
  std::vector<int16_t> slot_owner;  // per slot: -1 nobody, else an index of shards
  std::vector<std::pair<std::string, std::string>> shards;  // address, id; [0] is this member
  std::map<int, std::string> migrating;                     // slot -> target address
  std::set<int> importing;

  // Keys the command running now changed (its replication unit).
  std::vector<std::pair<int, std::string>> unit;

  std::vector<int64_t> command_counts;                       // by Spec::index
  std::map<std::string, int64_t, std::less<>> other_counts;  // unknown names, script SHA-1s
  std::vector<std::pair<std::string, int64_t>> counts_view;

  // ---- The keyspace.
  // The live entry of `key` (expiring it first when its time has passed),
  // or null.
  Entry* Find(Ctx& ctx, absl::string_view key);
  Entry* Find(int db, absl::string_view key, int64_t now);
  // The entry for a write: existing (live) or new, present.
  Entry& Upsert(Ctx& ctx, absl::string_view key);
  // Records a change of `key` (WATCH, replication).
  void Changed(int db, const std::string& key, Entry& e);
  void Delete(int db, const std::string& key, Entry& e);
  bool Expired(const Entry& e, int64_t now) const {
    return e.present && e.value.expire_at >= 0 && e.value.expire_at <= now;
  }
  // Ends the running command's replication unit: gives it an offset when it
  // changed something. Returns true when it did.
  bool EndUnit(Session* session);
  // Every key changed (a replaced dataset): WATCHes made before abort.
  void ResetAll();

  // ---- Cluster.
  // Null when the keys may run here; else the error (MOVED, ASK, TRYAGAIN,
  // CROSSSLOT, CLUSTERDOWN).
  std::optional<Reply> ClusterCheck(const std::vector<std::string>& keys, bool asking, int db,
                                    int64_t now);
  std::string Address(int shard) const;

  // ---- Entry points.
  Reply Call(Ctx& ctx, const Argv& argv);  // from a client (every check of processCommand)
  Reply ScriptCall(Ctx& ctx, const Argv& argv, std::string* error);  // from redis.call
  Reply Run(Ctx& ctx, const Spec& spec, const Argv& argv) { return spec.handler(*this, ctx, argv); }
  void Count(const Spec* spec, const std::string& name);

  // ---- Scripts (node_scripting.cc).
  Reply RunScript(Ctx& ctx, const std::string& sha, const std::string& body, const Argv& argv,
                  int numkeys);
};

// ---- Helpers shared by the command files.

// Redis's string2ll: strict decimal, no spaces, no '+', no leading zeros.
bool ParseInt(absl::string_view s, int64_t* out);
// Redis's string2d (for scores): strtod, no leading space, no NaN.
bool ParseDouble(absl::string_view s, double* out);
// A double as Redis replies it (%.17g, "inf", "-inf", "0" for zeros).
std::string FormatDouble(double d);
std::string Upper(absl::string_view s);
bool IEquals(absl::string_view a, absl::string_view b);

Reply Err(absl::string_view text);  // "ERR " + text
Reply WrongType();
Reply NotInteger();
Reply Syntax();
Reply ArityError(absl::string_view fullname);
Reply Ok();

// ---- Handlers defined outside node_commands.cc.
Reply EvalCmd(State& s, Ctx& ctx, const Argv& a);
Reply EvalShaCmd(State& s, Ctx& ctx, const Argv& a);
Reply ScriptLoadCmd(State& s, Ctx& ctx, const Argv& a);
Reply ScriptExistsCmd(State& s, Ctx& ctx, const Argv& a);
Reply ScriptFlushCmd(State& s, Ctx& ctx, const Argv& a);
Reply ScriptKillCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZAddCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZIncrByCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZRemCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZScoreCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZCardCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZCountCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZRangeCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZRangeByScoreCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZRemRangeByScoreCmd(State& s, Ctx& ctx, const Argv& a);
Reply ZRangeCmd(State& s, Ctx& ctx, const Argv& a);

}  // namespace redlock::sim::node_internal

#endif  // REDLOCK_SIM_NODE_STATE_H_
