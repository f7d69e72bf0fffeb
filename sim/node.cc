// sim/node.cc: the node's state, its keyspace, replication, restarts,
// failovers, cluster slots and the checks every command goes through (what
// Redis's processCommand and scriptCall check, in their order).

#include "sim/node.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/sha1.h"
#include "sim/node_state.h"

namespace redlock::sim {
namespace node_internal {
namespace {

// The version a Config names ("7.0.15"): missing parts are 0.
void ParseVersion(const std::string& text, int out[3]) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() < 3) {
    size_t dot = text.find('.', start);
    parts.push_back(text.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  for (int i = 0; i < 3; ++i) {
    int v = 0;
    if (static_cast<size_t>(i) < parts.size() && absl::SimpleAtoi(parts[i], &v)) out[i] = v;
  }
}

bool AtLeast(const int v[3], int major, int minor) {
  return v[0] > major || (v[0] == major && v[1] >= minor);
}

std::string DefaultId(absl::string_view seed) { return internal::Sha1Hex(seed); }

// The text an unknown command gets: its name and up to 128 bytes of args.
std::string UnknownCommand(const Argv& argv) {
  std::string args;
  for (size_t i = 1; i < argv.size() && args.size() < 128; ++i) {
    absl::StrAppend(&args, "'", absl::string_view(argv[i]).substr(0, 128 - args.size()), "' ");
  }
  return absl::StrCat("unknown command '", absl::string_view(argv[0]).substr(0, 128),
                      "', with args beginning with: ", args);
}

}  // namespace

// ---- ZSet --------------------------------------------------------------------------------

void ZSet::Set(const std::string& member, double score) {
  if (score == 0) score = 0;  // -0 is 0
  auto it = scores.find(member);
  if (it != scores.end()) {
    if (it->second == score) return;
    order.erase({it->second, member});
    it->second = score;
  } else {
    scores.emplace(member, score);
  }
  order.emplace(score, member);
}

bool ZSet::Remove(absl::string_view member) {
  auto it = scores.find(member);
  if (it == scores.end()) return false;
  order.erase({it->second, it->first});
  scores.erase(it);
  return true;
}

// ---- State -------------------------------------------------------------------------------

State::State(Node::Config c) : config(std::move(c)) {
  run_id = config.run_id.empty() ? DefaultId(absl::StrCat("run:", config.name)) : config.run_id;
  valkey = absl::AsciiStrToLower(config.server_name) == "valkey";
  if (valkey) {
    // Valkey reports redis_version 7.2.4 and has everything Redis 7.2 has.
    version[0] = 7;
    version[1] = 2;
    version[2] = 4;
  } else {
    ParseVersion(config.version, version);
  }
  replicas.resize(static_cast<size_t>(std::max(0, config.replicas)));
  command_counts.assign(CommandTable().size() + 64, 0);
  if (!config.slots.empty()) {
    cluster = true;
    slot_owner.assign(kSlots, -1);
    const std::string address = config.address.empty() ? "127.0.0.1:7000" : config.address;
    shards.emplace_back(address, config.cluster_id.empty()
                                     ? DefaultId(absl::StrCat("node:", config.name))
                                     : config.cluster_id);
    for (const auto& [first, last] : config.slots) {
      for (int s = std::max(0, first); s <= std::min(kSlots - 1, last); ++s) slot_owner[s] = 0;
    }
  }
}

Entry* State::Find(int db, absl::string_view key, int64_t now) {
  Keyspace& ks = dbs[static_cast<size_t>(db)];
  auto it = ks.find(key);
  if (it == ks.end() || !it->second.present) return nullptr;
  Entry& e = it->second;
  if (Expired(e, now)) {
    // Lazy expiry: a change for WATCH, not replicated (a replica expires
    // by the same clock, and nothing it answers depends on the deletion).
    e.present = false;
    e.value = Value();
    e.prev_change = e.last_change;
    e.last_change = ++changes;
    return nullptr;
  }
  return &e;
}

Entry* State::Find(Ctx& ctx, absl::string_view key) { return Find(ctx.db, key, ctx.now); }

Entry& State::Upsert(Ctx& ctx, absl::string_view key) {
  if (Entry* e = Find(ctx, key)) return *e;
  Keyspace& ks = dbs[static_cast<size_t>(ctx.db)];
  auto it = ks.find(key);
  if (it == ks.end()) it = ks.emplace(std::string(key), Entry()).first;
  it->second.present = true;
  it->second.value = Value();
  return it->second;
}

void State::Changed(int db, const std::string& key, Entry& e) {
  e.prev_change = e.last_change;
  e.last_change = ++changes;
  for (const auto& [d, k] : unit) {
    if (d == db && k == key) return;
  }
  unit.emplace_back(db, key);
}

void State::Delete(int db, const std::string& key, Entry& e) {
  e.present = false;
  e.value = Value();
  Changed(db, key, e);
}

bool State::EndUnit(Session* session) {
  if (unit.empty()) return false;
  ++master_offset;
  if (!replicas.empty()) {
    LogEntry entry;
    entry.offset = master_offset;
    for (auto& [db, key] : unit) {
      KeyChange change;
      change.db = db;
      const Keyspace& ks = dbs[static_cast<size_t>(db)];
      auto it = ks.find(key);
      if (it != ks.end() && it->second.present) change.value = it->second.value;
      change.key = std::move(key);
      entry.changes.push_back(std::move(change));
    }
    log.push_back(std::move(entry));
  }
  unit.clear();
  if (session != nullptr) session->last_write_offset = master_offset;
  return true;
}

void State::ResetAll() { reset_at = ++changes; }

std::string State::Address(int shard) const {
  return shard >= 0 && static_cast<size_t>(shard) < shards.size() ? shards[shard].first : "";
}

std::optional<Reply> State::ClusterCheck(const std::vector<std::string>& keys, bool asking, int db,
                                         int64_t now) {
  if (!cluster || keys.empty()) return std::nullopt;
  const int slot = internal::KeySlot(keys[0]);
  for (size_t i = 1; i < keys.size(); ++i) {
    if (internal::KeySlot(keys[i]) != slot) {
      return Reply::Error("CROSSSLOT Keys in request don't hash to the same slot");
    }
  }
  const int owner = slot_owner[static_cast<size_t>(slot)];
  if (owner < 0) return Reply::Error("CLUSTERDOWN Hash slot not served");
  auto migrating_to = migrating.find(slot);
  const bool migrating_here = owner == 0 && migrating_to != migrating.end();
  const bool importing_here = owner != 0 && importing.count(slot) > 0;
  int missing = 0;
  int existing = 0;
  if (migrating_here || importing_here) {
    const Keyspace& ks = dbs[static_cast<size_t>(db)];
    for (const std::string& k : keys) {
      auto it = ks.find(k);
      const bool live = it != ks.end() && it->second.present && !Expired(it->second, now);
      (live ? existing : missing) += 1;
    }
  }
  if (migrating_here && missing > 0) {
    if (existing > 0) {
      return Reply::Error("TRYAGAIN Multiple keys request during rehashing of slot");
    }
    return Reply::Error(absl::StrCat("ASK ", slot, " ", migrating_to->second));
  }
  if (importing_here && asking) {
    if (keys.size() > 1 && missing > 0) {
      return Reply::Error("TRYAGAIN Multiple keys request during rehashing of slot");
    }
    return std::nullopt;
  }
  if (owner != 0) return Reply::Error(absl::StrCat("MOVED ", slot, " ", Address(owner)));
  return std::nullopt;
}

void State::Count(const Spec* spec, const std::string& name) {
  if (spec != nullptr) {
    ++command_counts[static_cast<size_t>(spec->index)];
  } else {
    ++other_counts[absl::AsciiStrToUpper(name)];
  }
}

namespace {

bool Gated(const State& s, const Spec& spec) {
  if ((spec.flags & kNeedsVersion72) && !AtLeast(s.version, 7, 2)) return true;
  if ((spec.flags & kDelifeq) && !s.config.delifeq) return true;
  if ((spec.flags & kDelex) && !s.config.delex) return true;
  return false;
}

std::vector<std::string> KeysOf(const Spec& spec, const Argv& argv) {
  std::vector<std::string> keys;
  for (int p : KeyPositions(spec, argv)) keys.push_back(argv[static_cast<size_t>(p)]);
  return keys;
}

// The keys of everything a MULTI queued (EXEC's cluster check).
std::vector<std::string> QueuedKeys(const Session& session) {
  std::vector<std::string> keys;
  for (const Argv& q : session.queued) {
    const Spec* spec = FindCommand(q[0]);
    if (spec == nullptr) continue;
    if (!spec->subcommands.empty() && q.size() >= 2) spec = FindSubcommand(*spec, q[1]);
    if (spec == nullptr) continue;
    for (std::string& k : KeysOf(*spec, q)) keys.push_back(std::move(k));
  }
  return keys;
}

void Discard(Session& session) {
  session.in_multi = false;
  session.multi_error = false;
  session.queued.clear();
  session.watched.clear();
  session.watch_dirty = false;
}

}  // namespace

Reply State::Call(Ctx& ctx, const Argv& argv) {
  Session& session = *ctx.session;
  if (argv.empty()) return Err("empty command");
  const Spec* spec = FindCommand(argv[0]);
  if (spec != nullptr && Gated(*this, *spec)) spec = nullptr;
  Count(spec, argv[0]);
  const bool was_asking = session.asking;
  ctx.asking = was_asking;
  // ASKING lasts for the next command (through a MULTI, until its EXEC).
  auto clear_asking = [&](const Spec* s) {
    if (!session.in_multi && (s == nullptr || std::string_view(s->name) != "asking")) {
      session.asking = false;
    }
  };
  auto refuse = [&](Reply error) {
    if (session.in_multi) session.multi_error = true;
    clear_asking(spec);
    return error;
  };
  if (spec == nullptr) return refuse(Err(UnknownCommand(argv)));
  if (!spec->subcommands.empty() && argv.size() >= 2) {
    const Spec* sub = FindSubcommand(*spec, argv[1]);
    if (sub == nullptr) {
      return refuse(
          Err(absl::StrCat("unknown subcommand '", absl::string_view(argv[1]).substr(0, 128),
                           "'. Try ", Upper(argv[0]), " HELP.")));
    }
    spec = sub;
  }
  if (!ArityOk(*spec, argv.size())) return refuse(ArityError(spec->name));
  if ((spec->flags & kScripting) && config.scripting_noperm) {
    return refuse(
        Reply::Error(AtLeast(version, 7, 2)
                         ? absl::StrCat("NOPERM User ", session.user,
                                        " has no permissions to run the '", spec->name, "' command")
                         : absl::StrCat("NOPERM this user has no permissions to run the '",
                                        spec->name, "' command")));
  }
  const bool is_exec = std::string_view(spec->name) == "exec";
  if (cluster) {
    std::optional<Reply> redirect;
    if (is_exec && session.in_multi) {
      redirect = ClusterCheck(QueuedKeys(session), was_asking, 0, ctx.now);
      if (redirect.has_value()) {
        Discard(session);
        session.asking = false;
        return *redirect;
      }
    } else {
      redirect = ClusterCheck(KeysOf(*spec, argv), was_asking, 0, ctx.now);
      if (redirect.has_value()) return refuse(*redirect);
    }
  }
  if (!session.subscribed.empty() && !(spec->flags & kPubSub)) {
    return refuse(Err(absl::StrCat("Can't execute '", spec->name,
                                   "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
                                   "RESET are allowed in this context")));
  }
  if (session.in_multi && !(spec->flags & kImmediate)) {
    session.queued.push_back(argv);
    return Reply::Status("QUEUED");
  }
  Reply r = Run(ctx, *spec, argv);
  clear_asking(spec);
  return r;
}

Reply State::ScriptCall(Ctx& ctx, const Argv& argv, std::string* error) {
  const Spec* spec = FindCommand(argv[0]);
  if (spec != nullptr && Gated(*this, *spec)) spec = nullptr;
  if (spec != nullptr && !spec->subcommands.empty() && argv.size() >= 2) {
    spec = FindSubcommand(*spec, argv[1]);
  }
  if (spec == nullptr) {
    *error = "Unknown Redis command called from script";
    return Reply();
  }
  if (!ArityOk(*spec, argv.size())) {
    *error = "Wrong number of args calling Redis command from script";
    return Reply();
  }
  if (spec->flags & kNoScript) {
    *error = "This Redis command is not allowed from script";
    return Reply();
  }
  if (cluster && ClusterCheck(KeysOf(*spec, argv), ctx.asking, 0, ctx.now).has_value()) {
    *error = "Script attempted to access a non local key in a cluster node";
    return Reply();
  }
  return Run(ctx, *spec, argv);
}

// ---- Helpers ------------------------------------------------------------------------------

bool ParseInt(absl::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  size_t i = 0;
  bool negative = false;
  if (s[0] == '-') {
    negative = true;
    i = 1;
    if (s.size() == 1) return false;
  }
  if (s.size() == 1 && s[0] == '0') {
    *out = 0;
    return true;
  }
  if (s[i] < '1' || s[i] > '9') return false;
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  if (negative) {
    if (v > static_cast<uint64_t>(INT64_MAX) + 1) return false;
    *out = v == static_cast<uint64_t>(INT64_MAX) + 1 ? INT64_MIN : -static_cast<int64_t>(v);
  } else {
    if (v > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(v);
  }
  return true;
}

bool ParseDouble(absl::string_view s, double* out) {
  if (s.empty() || s.size() > 5 * 1024 || absl::ascii_isspace(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  std::string buf(s);
  char* end = nullptr;
  errno = 0;
  const double v = strtod(buf.c_str(), &end);
  if (end != buf.c_str() + buf.size() || std::isnan(v)) return false;
  if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || v == 0)) return false;
  *out = v;
  return true;
}

std::string FormatDouble(double d) {
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return "0";
  char buf[64];
  const int n = snprintf(buf, sizeof(buf), "%.17g", d);
  return std::string(buf, static_cast<size_t>(n));
}

std::string Upper(absl::string_view s) { return absl::AsciiStrToUpper(s); }

bool IEquals(absl::string_view a, absl::string_view b) { return absl::EqualsIgnoreCase(a, b); }

Reply Err(absl::string_view text) {
  // As Redis's formatted errors: newlines (a client's argument quoted in
  // the text) become spaces.
  std::string e = absl::StrCat("ERR ", text);
  for (char& c : e) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return Reply::Error(std::move(e));
}
Reply WrongType() {
  return Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value");
}
Reply NotInteger() { return Err("value is not an integer or out of range"); }
Reply Syntax() { return Err("syntax error"); }
Reply ArityError(absl::string_view fullname) {
  return Err(absl::StrCat("wrong number of arguments for '", fullname, "' command"));
}
Reply Ok() { return Reply::Status("OK"); }

}  // namespace node_internal

// The node's state is node_internal::State (node_state.h), shared with the
// files that implement the commands.
struct Node::State : node_internal::State {
  using node_internal::State::State;
};

using node_internal::Ctx;
using node_internal::Entry;
using node_internal::kDatabases;
using node_internal::State;

namespace {

node_internal::Dataset Snapshot(const State& s) {
  node_internal::Dataset data;
  for (int db = 0; db < kDatabases; ++db) {
    for (const auto& [key, e] : s.dbs[static_cast<size_t>(db)]) {
      if (e.present) data[static_cast<size_t>(db)].emplace(key, e.value);
    }
  }
  return data;
}

void Load(State& s, const node_internal::Dataset& data) {
  for (int db = 0; db < kDatabases; ++db) {
    node_internal::Keyspace& ks = s.dbs[static_cast<size_t>(db)];
    ks.clear();
    for (const auto& [key, value] : data[static_cast<size_t>(db)]) {
      Entry e;
      e.present = true;
      e.value = value;
      ks.emplace(key, std::move(e));
    }
  }
}

void Resync(State& s) {
  for (node_internal::Replica& r : s.replicas) {
    r.data = Snapshot(s);
    r.offset = s.master_offset;
  }
  s.log.clear();
}

}  // namespace

Node::Node(Config config) : state_(std::make_unique<State>(std::move(config))) {}
Node::~Node() = default;

const Node::Config& Node::config() const { return state_->config; }

Result Node::Execute(Session& session, const Argv& argv, int64_t now_ms) {
  State& s = *state_;
  Result result;
  Ctx ctx;
  ctx.session = &session;
  ctx.db = session.db;
  ctx.now = now_ms;
  ctx.result = &result;
  s.unit.clear();
  result.reply = s.Call(ctx, argv);
  result.wrote = s.EndUnit(&session);
  return result;
}

int64_t Node::master_offset() const { return state_->master_offset; }

void Node::Replicate(int replica, int64_t up_to_offset) {
  State& s = *state_;
  if (replica < 0 || static_cast<size_t>(replica) >= s.replicas.size()) return;
  node_internal::Replica& r = s.replicas[static_cast<size_t>(replica)];
  up_to_offset = std::min(up_to_offset, s.master_offset);
  for (const node_internal::LogEntry& entry : s.log) {
    if (entry.offset <= r.offset) continue;
    if (entry.offset > up_to_offset) break;
    for (const node_internal::KeyChange& c : entry.changes) {
      auto& db = r.data[static_cast<size_t>(c.db)];
      if (c.value.has_value()) {
        db[c.key] = *c.value;
      } else {
        db.erase(c.key);
      }
    }
    r.offset = entry.offset;
  }
  r.offset = std::max(r.offset, std::min(up_to_offset, s.master_offset));
  int64_t slowest = s.master_offset;
  for (const node_internal::Replica& x : s.replicas) slowest = std::min(slowest, x.offset);
  while (!s.log.empty() && s.log.front().offset <= slowest) s.log.pop_front();
}

int64_t Node::replica_offset(int replica) const {
  const State& s = *state_;
  if (replica < 0 || static_cast<size_t>(replica) >= s.replicas.size()) return 0;
  return s.replicas[static_cast<size_t>(replica)].offset;
}

int Node::AckedReplicas(int64_t offset) const {
  int n = 0;
  for (const node_internal::Replica& r : state_->replicas) n += r.offset >= offset ? 1 : 0;
  return n;
}

int Node::FsyncedReplicas(int64_t offset) const { return AckedReplicas(offset); }

void Node::Failover(int replica) {
  State& s = *state_;
  if (replica < 0 || static_cast<size_t>(replica) >= s.replicas.size()) return;
  const node_internal::Replica promoted = s.replicas[static_cast<size_t>(replica)];
  Load(s, promoted.data);
  s.ResetAll();
  s.master_offset = promoted.offset;
  for (node_internal::Replica& r : s.replicas) r = promoted;
  s.log.clear();
  s.scripts.clear();
  s.subscribers.clear();
  ++s.failovers;
  s.run_id = internal::Sha1Hex(absl::StrCat("run:", s.config.name, ":failover:", s.failovers));
}

void Node::Restart(bool keep_data, const std::string& new_run_id) {
  State& s = *state_;
  if (keep_data) {
    Load(s, Snapshot(s));
  } else {
    for (auto& ks : s.dbs) ks.clear();
  }
  s.ResetAll();
  Resync(s);
  s.scripts.clear();
  s.subscribers.clear();
  s.run_id = new_run_id.empty()
                 ? internal::Sha1Hex(absl::StrCat("run:", s.config.name, ":", s.changes))
                 : new_run_id;
}

void Node::BeginMigration(int slot, const std::string& target_name) {
  if (slot < 0 || slot >= node_internal::kSlots) return;
  state_->migrating[slot] = target_name;
}

void Node::EndMigration(int slot) {
  State& s = *state_;
  if (!s.cluster || slot < 0 || slot >= node_internal::kSlots) return;
  auto it = s.migrating.find(slot);
  if (it == s.migrating.end()) return;
  int index = -1;
  for (size_t i = 1; i < s.shards.size(); ++i) {
    if (s.shards[i].first == it->second) index = static_cast<int>(i);
  }
  if (index < 0) {
    s.shards.emplace_back(it->second, internal::Sha1Hex(absl::StrCat("node:", it->second)));
    index = static_cast<int>(s.shards.size()) - 1;
  }
  s.slot_owner[static_cast<size_t>(slot)] = static_cast<int16_t>(index);
  s.migrating.erase(it);
}

void Node::BeginImport(int slot) {
  if (slot < 0 || slot >= node_internal::kSlots) return;
  state_->importing.insert(slot);
}

void Node::EndImport(int slot) {
  State& s = *state_;
  if (!s.cluster || slot < 0 || slot >= node_internal::kSlots) return;
  s.importing.erase(slot);
  s.slot_owner[static_cast<size_t>(slot)] = 0;
}

int Node::MoveKeys(int slot, Node& to, int count, int64_t now_ms) {
  State& s = *state_;
  State& t = *to.state_;
  if (&s == &t || count <= 0) return 0;
  std::vector<std::string> keys;
  for (const auto& [key, e] : s.dbs[0]) {
    if (static_cast<int>(keys.size()) >= count) break;
    if (e.present && !s.Expired(e, now_ms) && internal::KeySlot(key) == slot) keys.push_back(key);
  }
  s.unit.clear();
  t.unit.clear();
  for (const std::string& key : keys) {
    Entry* from = s.Find(0, key, now_ms);
    if (from == nullptr) continue;
    Ctx ctx;
    ctx.now = now_ms;
    Entry& dest = t.Upsert(ctx, key);
    dest.value = from->value;
    t.Changed(0, key, dest);
    s.Delete(0, key, *from);
  }
  s.EndUnit(nullptr);
  t.EndUnit(nullptr);
  return static_cast<int>(keys.size());
}

void Node::SetClusterPeers(std::vector<ClusterPeer> peers) {
  State& s = *state_;
  if (!s.cluster) return;
  s.shards.resize(1);
  for (int16_t& owner : s.slot_owner) {
    if (owner > 0) owner = -1;
  }
  for (ClusterPeer& p : peers) {
    const int16_t index = static_cast<int16_t>(s.shards.size());
    s.shards.emplace_back(
        p.address, p.id.empty() ? internal::Sha1Hex(absl::StrCat("node:", p.address)) : p.id);
    for (const auto& [first, last] : p.slots) {
      for (int slot = std::max(0, first); slot <= std::min(node_internal::kSlots - 1, last);
           ++slot) {
        if (s.slot_owner[static_cast<size_t>(slot)] != 0) {
          s.slot_owner[static_cast<size_t>(slot)] = index;
        }
      }
    }
  }
}

void Node::Disconnect(Session& session) {
  State& s = *state_;
  for (const std::string& channel : session.subscribed) {
    auto it = s.subscribers.find(channel);
    if (it != s.subscribers.end() && --it->second <= 0) s.subscribers.erase(it);
  }
  session = Session();
}

int Node::ActiveExpire(int64_t now_ms) {
  State& s = *state_;
  int n = 0;
  for (int db = 0; db < kDatabases; ++db) {
    for (auto& [key, e] : s.dbs[static_cast<size_t>(db)]) {
      if (s.Expired(e, now_ms)) {
        s.Find(db, key, now_ms);  // deletes it
        ++n;
      }
    }
  }
  return n;
}

std::optional<std::string> Node::Get(const std::string& key, int64_t now_ms) {
  const State& s = *state_;
  auto it = s.dbs[0].find(key);
  if (it == s.dbs[0].end() || !it->second.present || s.Expired(it->second, now_ms) ||
      it->second.value.is_zset) {
    return std::nullopt;
  }
  return it->second.value.str;
}

std::optional<int64_t> Node::ExpireAt(const std::string& key, int64_t now_ms) {
  const State& s = *state_;
  auto it = s.dbs[0].find(key);
  if (it == s.dbs[0].end() || !it->second.present || s.Expired(it->second, now_ms)) {
    return std::nullopt;
  }
  return it->second.value.expire_at;
}

std::vector<std::string> Node::Keys(int64_t now_ms) {
  const State& s = *state_;
  std::vector<std::string> keys;
  for (const auto& [key, e] : s.dbs[0]) {
    if (e.present && !s.Expired(e, now_ms)) keys.push_back(key);
  }
  return keys;
}

std::vector<std::string> Node::CachedScripts() const {
  std::vector<std::string> out;
  for (const auto& [sha, body] : state_->scripts) out.push_back(sha);
  return out;
}

void Node::FlushScripts() { state_->scripts.clear(); }

const std::vector<std::pair<std::string, int64_t>>& Node::CommandCounts() const {
  State& s = *state_;
  std::map<std::string, int64_t> all(s.other_counts.begin(), s.other_counts.end());
  const std::vector<node_internal::Spec>& table = node_internal::CommandTable();
  for (const node_internal::Spec& spec : table) {
    const int64_t n = s.command_counts[static_cast<size_t>(spec.index)];
    if (n > 0) all[node_internal::Upper(spec.name)] += n;
  }
  s.counts_view.assign(all.begin(), all.end());
  return s.counts_view;
}

}  // namespace redlock::sim
