// TEMPORARY stand-in for the simulated node (sim/node.h), so that the world
// (sim/world.h) can run before the real node (an embedded Lua interpreter
// running the library's scripts as written; another helper's branch) is
// merged. When the real node is merged, this file is deleted and
// sim/CMakeLists.txt builds the world against redlock::sim_node instead.
//
// It answers what the library sends with Redis 7's semantics, but models
// each script by its name (as tests/unit/fake_transport.cc does): a bug
// inside a script is invisible here, which is exactly what the real node is
// for. Keys expire lazily on the node's clock; WATCH sees changes and
// expiries; every write is one replication unit with an offset; replicas
// apply the log up to what the world says.

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/sha1.h"
#include "sim/node.h"

namespace redlock::sim {
namespace {

struct Value {
  bool zset = false;
  std::string str;
  std::map<std::string, int64_t> members;  // zset: member -> score
  int64_t expire_ms = -1;                  // absolute, node clock; -1: none
};
using Dataset = std::map<std::string, Value>;
using Change = std::pair<std::string, std::optional<Value>>;

struct LogEntry {
  int64_t offset = 0;
  std::vector<Change> changes;
};

Reply Err(const std::string& s) { return Reply::Error(s); }
Reply WrongType() {
  return Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value");
}
Reply Ok() { return Reply::Status("OK"); }

bool ParseInt(const std::string& s, int64_t* out) { return absl::SimpleAtoi(s, out); }

// Counters compared as the scripts do: decimal strings by (length, bytes).
bool CounterLess(const std::string& a, const std::string& b) {
  return a.size() < b.size() || (a.size() == b.size() && a < b);
}

std::string Upper(const std::string& s) { return absl::AsciiStrToUpper(s); }

}  // namespace

struct Node::State {
  Config config;
  Dataset data;
  std::map<std::string, uint64_t> versions;  // WATCH: every change bumps the key's version
  uint64_t next_version = 1;
  int64_t offset = 0;
  std::deque<LogEntry> log;
  struct Replica {
    int64_t offset = 0;
    Dataset data;
  };
  std::vector<Replica> replicas;
  std::set<std::string> scripts;
  std::string run_id;
  std::map<int, std::string> migrating;  // slot -> target
  std::map<int, std::string> moved;      // slot -> where it went (MOVED)
  std::set<int> importing;
  std::set<int> served;
  std::vector<std::pair<std::string, int64_t>> counts;
  std::map<std::string, size_t> count_index;
  std::vector<Change> pending;  // of the command being run
  std::vector<Publication> published;
  int64_t now = 0;

  void Count(const std::string& what) {
    auto [it, fresh] = count_index.emplace(what, counts.size());
    if (fresh) counts.emplace_back(what, 0);
    ++counts[it->second].second;
  }

  void Touch(const std::string& key) { versions[key] = next_version++; }

  void Put(const std::string& key, Value v) {
    Touch(key);
    pending.emplace_back(key, v);
    data[key] = std::move(v);
  }
  void Erase(const std::string& key) {
    auto it = data.find(key);
    if (it == data.end()) return;
    Touch(key);
    pending.emplace_back(key, std::nullopt);
    data.erase(it);
  }
  // The live key, or null (an expired one is deleted, as a lazy expiry).
  Value* Find(const std::string& key) {
    auto it = data.find(key);
    if (it == data.end()) return nullptr;
    if (it->second.expire_ms >= 0 && it->second.expire_ms <= now) {
      Erase(key);
      return nullptr;
    }
    return &it->second;
  }
  // A string key, or null when missing; *wrong when of another type.
  Value* FindString(const std::string& key, bool* wrong) {
    Value* v = Find(key);
    if (v != nullptr && v->zset) {
      *wrong = true;
      return nullptr;
    }
    return v;
  }
  // Live members of a sorted set, expired entries (score <= now) kept as
  // stored: the scripts purge them themselves.
  Value* FindZset(const std::string& key, bool* wrong) {
    Value* v = Find(key);
    if (v != nullptr && !v->zset) {
      *wrong = true;
      return nullptr;
    }
    return v;
  }
  void SaveZset(const std::string& key, Value v) {
    if (v.members.empty()) {
      Erase(key);
    } else {
      Put(key, std::move(v));
    }
  }

  Reply Run(Session& s, const Argv& argv);
  Reply Script(Session& s, const internal::Script& script, const std::vector<std::string>& k,
               const std::vector<std::string>& a);
  std::optional<Reply> ClusterCheck(Session& s, const Argv& argv);
};

Node::Node(Config config) : state_(new State) {
  state_->config = std::move(config);
  state_->run_id = state_->config.run_id.empty()
                       ? internal::Sha1Hex(absl::StrCat("run:", state_->config.name))
                       : state_->config.run_id;
  state_->replicas.resize(static_cast<size_t>(std::max(state_->config.replicas, 0)));
  for (const auto& [lo, hi] : state_->config.slots) {
    for (int s = lo; s <= hi; ++s) state_->served.insert(s);
  }
}

Node::~Node() = default;

const Node::Config& Node::config() const { return state_->config; }

namespace {

// Keys of a command, for the cluster's slot checks.
std::vector<std::string> CommandKeys(const Argv& argv) {
  const std::string cmd = Upper(argv[0]);
  if (cmd == "EVAL" || cmd == "EVALSHA") {
    int64_t n = 0;
    if (argv.size() < 3 || !ParseInt(argv[2], &n) || n < 0 ||
        3 + static_cast<size_t>(n) > argv.size())
      return {};
    return std::vector<std::string>(argv.begin() + 3, argv.begin() + 3 + n);
  }
  if (cmd == "DEL" || cmd == "EXISTS" || cmd == "WATCH") {
    return std::vector<std::string>(argv.begin() + 1, argv.end());
  }
  static const std::set<std::string> kOneKey = {"SET",   "GET",    "GETRANGE", "PEXPIRE",
                                                "PTTL",  "INCR",   "ZADD",     "ZREM",
                                                "ZCARD", "ZSCORE", "INCRBY"};
  if (kOneKey.count(cmd) > 0 && argv.size() > 1) return {argv[1]};
  return {};
}

}  // namespace

std::optional<Reply> Node::State::ClusterCheck(Session& s, const Argv& argv) {
  if (config.slots.empty()) return std::nullopt;
  std::vector<std::string> keys = CommandKeys(argv);
  const bool asking = s.asking;
  if (Upper(argv[0]) != "ASKING") s.asking = false;
  if (keys.empty()) return std::nullopt;
  const int slot = internal::KeySlot(keys[0]);
  for (const std::string& k : keys) {
    if (internal::KeySlot(k) != slot) {
      return Err("CROSSSLOT Keys in request don't hash to the same slot");
    }
  }
  int missing = 0;
  for (const std::string& k : keys) missing += Find(k) == nullptr ? 1 : 0;
  auto m = migrating.find(slot);
  if (served.count(slot) > 0 && m == migrating.end()) return std::nullopt;
  if (m != migrating.end()) {
    if (missing == 0) return std::nullopt;
    if (keys.size() > 1 && missing < static_cast<int>(keys.size())) {
      return Err("TRYAGAIN Multiple keys request during rehashing of slot");
    }
    return Err(absl::StrCat("ASK ", slot, " ", m->second));
  }
  if (importing.count(slot) > 0 && asking) {
    if (keys.size() > 1 && missing > 0) {
      return Err("TRYAGAIN Multiple keys request during rehashing of slot");
    }
    return std::nullopt;
  }
  auto gone = moved.find(slot);
  if (gone != moved.end()) return Err(absl::StrCat("MOVED ", slot, " ", gone->second));
  return Err(absl::StrCat("CLUSTERDOWN Hash slot not served (slot ", slot, ")"));
}

Result Node::Execute(Session& session, const Argv& argv, int64_t now_ms) {
  State& st = *state_;
  st.now = now_ms;
  st.pending.clear();
  st.published.clear();
  Result result;
  if (argv.empty()) {
    result.reply = Err("ERR empty command");
    return result;
  }
  const std::string cmd = Upper(argv[0]);
  st.Count(cmd);
  if (std::optional<Reply> redirect = st.ClusterCheck(session, argv)) {
    result.reply = *std::move(redirect);
    return result;
  }
  if (session.in_multi && cmd != "EXEC" && cmd != "DISCARD" && cmd != "MULTI" && cmd != "WATCH") {
    session.queued.push_back(argv);
    result.reply = Reply::Status("QUEUED");
    return result;
  }
  if (cmd == "WAIT" || cmd == "WAITAOF") {
    Block b;
    b.aof = cmd == "WAITAOF";
    b.offset = session.last_write_offset;
    int64_t a = 0, c = 0, t = 0;
    const size_t need = b.aof ? 4 : 3;
    if (argv.size() != need || !ParseInt(argv[1], &a) || !ParseInt(argv[2], &c) ||
        (b.aof && !ParseInt(argv[3], &t))) {
      result.reply = Err(absl::StrCat("ERR wrong number of arguments for '", argv[0], "'"));
      return result;
    }
    if (b.aof) {
      if (a > 0 && !st.config.appendonly) {
        result.reply =
            Err("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
        return result;
      }
      b.numlocal = static_cast<int>(a);
      b.numreplicas = static_cast<int>(c);
      b.timeout_ms = t;
    } else {
      b.numreplicas = static_cast<int>(a);
      b.timeout_ms = c;
    }
    const int acked = b.aof ? FsyncedReplicas(b.offset) : AckedReplicas(b.offset);
    if (acked >= b.numreplicas) {
      result.reply =
          b.aof
              ? Reply::Array({Reply::Integer(st.config.appendonly ? 1 : 0), Reply::Integer(acked)})
              : Reply::Integer(acked);
      return result;
    }
    result.block = b;
    return result;
  }
  result.reply = st.Run(session, argv);
  if (!st.pending.empty()) {
    ++st.offset;
    st.log.push_back(LogEntry{st.offset, std::move(st.pending)});
    st.pending.clear();
    session.last_write_offset = st.offset;
    result.wrote = true;
    if (st.replicas.empty()) st.log.clear();
  }
  result.published = std::move(st.published);
  st.published.clear();
  return result;
}

Reply Node::State::Run(Session& s, const Argv& argv) {
  const std::string cmd = Upper(argv[0]);
  const size_t n = argv.size();
  bool wrong = false;
  if (cmd == "PING") {
    if (!s.subscribed.empty()) {
      return Reply::Array({Reply::String("pong"), Reply::String(n > 1 ? argv[1] : "")});
    }
    return n > 1 ? Reply::String(argv[1]) : Reply::Status("PONG");
  }
  if (cmd == "ECHO" && n == 2) return Reply::String(argv[1]);
  if (cmd == "AUTH" || cmd == "SELECT" || cmd == "CLIENT") return Ok();
  if (cmd == "ASKING") {
    s.asking = true;
    return Ok();
  }
  if (cmd == "INFO") {
    return Reply::String(
        absl::StrCat("# Server\r\nredis_version:", config.version, "\r\nrun_id:", run_id, "\r\n"));
  }
  if (cmd == "ROLE") return Reply::Array({Reply::String("master"), Reply::Integer(offset)});
  if (cmd == "TIME") {
    return Reply::Array({Reply::String(std::to_string(now / 1000)),
                         Reply::String(std::to_string((now % 1000) * 1000))});
  }
  if (cmd == "COMMAND" && n >= 3 && Upper(argv[1]) == "INFO") {
    std::vector<Reply> out;
    for (size_t i = 2; i < n; ++i) {
      const std::string c = Upper(argv[i]);
      if (c == "WAITAOF" || c == "WAIT" || c == "SET" || c == "EVALSHA") {
        out.push_back(Reply::Array({Reply::String(absl::AsciiStrToLower(c))}));
      } else {
        out.push_back(Reply::Nil());
      }
    }
    return Reply::Array(std::move(out));
  }
  if (cmd == "SET" && n >= 3) {
    bool nx = false, xx = false;
    int64_t px = -1;
    for (size_t i = 3; i < n; ++i) {
      const std::string o = Upper(argv[i]);
      if (o == "NX") {
        nx = true;
      } else if (o == "XX") {
        xx = true;
      } else if ((o == "PX" || o == "EX") && i + 1 < n) {
        if (!ParseInt(argv[++i], &px) || px <= 0) return Err("ERR invalid expire time in 'set'");
        if (o == "EX") px *= 1000;
      } else {
        return Err("ERR syntax error");
      }
    }
    Value* cur = Find(argv[1]);
    if ((nx && cur != nullptr) || (xx && cur == nullptr)) return Reply::Nil();
    Value v;
    v.str = argv[2];
    v.expire_ms = px > 0 ? now + px : -1;
    Put(argv[1], std::move(v));
    return Ok();
  }
  if (cmd == "GET" && n == 2) {
    Value* v = FindString(argv[1], &wrong);
    if (wrong) return WrongType();
    return v == nullptr ? Reply::Nil() : Reply::String(v->str);
  }
  if (cmd == "GETRANGE" && n == 4) {
    Value* v = FindString(argv[1], &wrong);
    if (wrong) return WrongType();
    int64_t from = 0, to = 0;
    if (!ParseInt(argv[2], &from) || !ParseInt(argv[3], &to)) {
      return Err("ERR value is not an integer or out of range");
    }
    if (v == nullptr) return Reply::String("");
    const int64_t len = static_cast<int64_t>(v->str.size());
    if (from < 0) from = std::max<int64_t>(0, len + from);
    if (to < 0) to = len + to;
    to = std::min(to, len - 1);
    if (from > to || len == 0) return Reply::String("");
    return Reply::String(
        v->str.substr(static_cast<size_t>(from), static_cast<size_t>(to - from + 1)));
  }
  if (cmd == "EXISTS" && n >= 2) {
    int64_t c = 0;
    for (size_t i = 1; i < n; ++i) c += Find(argv[i]) != nullptr ? 1 : 0;
    return Reply::Integer(c);
  }
  if (cmd == "DEL" && n >= 2) {
    int64_t c = 0;
    for (size_t i = 1; i < n; ++i) {
      if (Find(argv[i]) != nullptr) {
        Erase(argv[i]);
        ++c;
      }
    }
    return Reply::Integer(c);
  }
  if (cmd == "PEXPIRE" && n == 3) {
    int64_t ms = 0;
    if (!ParseInt(argv[2], &ms)) return Err("ERR value is not an integer or out of range");
    Value* v = Find(argv[1]);
    if (v == nullptr) return Reply::Integer(0);
    Value copy = *v;
    if (ms <= 0) {
      Erase(argv[1]);
    } else {
      copy.expire_ms = now + ms;
      Put(argv[1], std::move(copy));
    }
    return Reply::Integer(1);
  }
  if (cmd == "PTTL" && n == 2) {
    Value* v = Find(argv[1]);
    if (v == nullptr) return Reply::Integer(-2);
    return Reply::Integer(v->expire_ms < 0 ? -1 : v->expire_ms - now);
  }
  if ((cmd == "INCR" && n == 2) || (cmd == "INCRBY" && n == 3)) {
    Value* v = FindString(argv[1], &wrong);
    if (wrong) return WrongType();
    int64_t cur = 0, by = 1;
    if (v != nullptr && !ParseInt(v->str, &cur)) {
      return Err("ERR value is not an integer or out of range");
    }
    if (cmd == "INCRBY" && !ParseInt(argv[2], &by)) {
      return Err("ERR value is not an integer or out of range");
    }
    Value next = v != nullptr ? *v : Value();
    next.str = std::to_string(cur + by);
    Put(argv[1], std::move(next));
    return Reply::Integer(cur + by);
  }
  if (cmd == "PUBLISH" && n == 3) {
    published.push_back(Publication{argv[1], argv[2]});
    return Reply::Integer(0);  // the world counts the receivers
  }
  if (cmd == "SUBSCRIBE" || cmd == "UNSUBSCRIBE") {
    std::vector<Reply> last;
    for (size_t i = 1; i < n; ++i) {
      auto it = std::find(s.subscribed.begin(), s.subscribed.end(), argv[i]);
      if (cmd == "SUBSCRIBE" && it == s.subscribed.end()) s.subscribed.push_back(argv[i]);
      if (cmd == "UNSUBSCRIBE" && it != s.subscribed.end()) s.subscribed.erase(it);
      last = {Reply::String(absl::AsciiStrToLower(cmd)), Reply::String(argv[i]),
              Reply::Integer(static_cast<int64_t>(s.subscribed.size()))};
    }
    return Reply::Array(std::move(last));
  }
  if (cmd == "WATCH" && n >= 2) {
    if (s.in_multi) return Err("ERR WATCH inside MULTI is not allowed");
    for (size_t i = 1; i < n; ++i) {
      Find(argv[i]);  // an expired key is gone before it is watched
      auto it = versions.find(argv[i]);
      s.watched.emplace_back(argv[i], it == versions.end() ? 0 : it->second);
    }
    return Ok();
  }
  if (cmd == "UNWATCH") {
    s.watched.clear();
    s.watch_dirty = false;
    return Ok();
  }
  if (cmd == "MULTI") {
    if (s.in_multi) return Err("ERR MULTI calls can not be nested");
    s.in_multi = true;
    s.queued.clear();
    return Ok();
  }
  if (cmd == "DISCARD") {
    if (!s.in_multi) return Err("ERR DISCARD without MULTI");
    s.in_multi = false;
    s.queued.clear();
    s.watched.clear();
    return Ok();
  }
  if (cmd == "EXEC") {
    if (!s.in_multi) return Err("ERR EXEC without MULTI");
    s.in_multi = false;
    std::vector<Argv> queued = std::move(s.queued);
    s.queued.clear();
    bool dirty = s.watch_dirty;
    for (const auto& [key, version] : s.watched) {
      Find(key);  // expired since: a change
      auto it = versions.find(key);
      if ((it == versions.end() ? 0 : it->second) != version) dirty = true;
    }
    s.watched.clear();
    s.watch_dirty = false;
    if (dirty) return Reply::Nil();
    std::vector<Reply> out;
    for (const Argv& q : queued) out.push_back(Run(s, q));
    return Reply::Array(std::move(out));
  }
  if (cmd == "SCRIPT" && n >= 2) {
    const std::string sub = Upper(argv[1]);
    if (!config.scripting) {
      return Err("ERR unknown command 'SCRIPT', with args beginning with: " + argv[1]);
    }
    if (config.scripting_noperm) {
      return Err(absl::StrCat("NOPERM User default has no permissions to run the 'script|",
                              absl::AsciiStrToLower(sub), "' command"));
    }
    if (sub == "LOAD" && n == 3) {
      std::string sha;
      for (const internal::Script* x : internal::AllScripts()) {
        if (x->body == argv[2]) sha = x->sha;
      }
      if (sha.empty()) sha = internal::Sha1Hex(argv[2]);
      scripts.insert(sha);
      return Reply::String(sha);
    }
    if (sub == "FLUSH") {
      scripts.clear();
      return Ok();
    }
    if (sub == "EXISTS") {
      std::vector<Reply> out;
      for (size_t i = 2; i < n; ++i) out.push_back(Reply::Integer(scripts.count(argv[i])));
      return Reply::Array(std::move(out));
    }
    return Err("ERR unknown subcommand");
  }
  if (cmd == "EVAL" || cmd == "EVALSHA") {
    if (!config.scripting) {
      return Err(absl::StrCat("ERR unknown command '", argv[0], "', with args beginning with: "));
    }
    if (config.scripting_noperm) {
      return Err(absl::StrCat("NOPERM User default has no permissions to run the '",
                              absl::AsciiStrToLower(cmd), "' command"));
    }
    int64_t numkeys = 0;
    if (n < 3 || !ParseInt(argv[2], &numkeys) || numkeys < 0 ||
        3 + static_cast<size_t>(numkeys) > n) {
      return Err("ERR Number of keys can't be greater than number of args");
    }
    std::string sha = cmd == "EVALSHA" ? argv[1] : "";
    for (const internal::Script* x : internal::AllScripts()) {
      if (cmd == "EVAL" && x->body == argv[1]) sha = x->sha;
    }
    if (sha.empty()) sha = internal::Sha1Hex(argv[1]);
    if (cmd == "EVALSHA" && scripts.count(sha) == 0) {
      return Err("NOSCRIPT No matching script. Please use EVAL.");
    }
    const internal::Script* script = nullptr;
    for (const internal::Script* x : internal::AllScripts()) {
      if (x->sha == sha) script = x;
    }
    if (script == nullptr) return Err("ERR the stand-in node does not model this script");
    if (cmd == "EVAL") scripts.insert(sha);
    Count(std::string("script:") + script->name);
    std::vector<std::string> k(argv.begin() + 3, argv.begin() + 3 + numkeys);
    std::vector<std::string> a(argv.begin() + 3 + numkeys, argv.end());
    return Script(s, *script, k, a);
  }
  return Err(absl::StrCat("ERR unknown command '", argv[0], "', with args beginning with: "));
}

Reply Node::State::Script(Session& s, const internal::Script& script,
                          const std::vector<std::string>& k, const std::vector<std::string>& a) {
  const std::string name = script.name;
  bool wrong = false;
  auto script_error = [&]() {
    return Err(
        absl::StrCat("WRONGTYPE Operation against a key holding the wrong kind of value "
                     "script: ",
                     script.sha, ", on @user_script:1."));
  };
  auto counter = [&](const std::string& key) -> std::optional<std::string> {
    Value* c = FindString(key, &wrong);
    if (wrong) return std::nullopt;
    std::string v = c == nullptr ? "0" : c->str;
    return v.substr(0, 21);
  };
  auto set_key = [&](const std::string& key, const std::string& token, const std::string& ttl) {
    int64_t ms = 0;
    ParseInt(ttl, &ms);
    Value v;
    v.str = token;
    v.expire_ms = now + ms;
    Put(key, std::move(v));
  };
  auto raise = [&](const std::string& key, const std::string& want) {
    Value* c = FindString(key, &wrong);
    const std::string cur = c == nullptr ? "0" : c->str;
    if (CounterLess(cur, want)) {
      Value v;
      v.str = want;
      Put(key, std::move(v));
    }
  };
  if (name == "acquire" || name == "fence-acquire") {
    const bool fenced = name == "fence-acquire";
    const size_t locks = fenced ? k.size() / 2 : k.size();
    for (size_t i = 0; i < locks; ++i) {
      if (Find(k[i]) != nullptr) {
        Reply held = Reply::Integer(-static_cast<int64_t>(i + 1));
        return fenced ? Reply::Array({held}) : held;
      }
    }
    for (size_t i = 0; i < locks; ++i) set_key(k[i], a[0], a[1]);
    if (!fenced) return Reply::Integer(1);
    std::vector<Reply> out = {Reply::Integer(1)};
    for (size_t i = 0; i < locks; ++i) {
      std::optional<std::string> c = counter(k[locks + i]);
      if (!c) return script_error();
      out.push_back(Reply::String(*c));
    }
    return Reply::Array(std::move(out));
  }
  if (name == "release" || name == "release-one") {
    int64_t deleted = 0;
    for (const std::string& key : k) {
      Value* v = FindString(key, &wrong);
      if (wrong) return script_error();
      if (v == nullptr || v->str != a[0]) {
        if (name == "release-one") return Reply::Integer(0);
        continue;
      }
      Erase(key);
      ++deleted;
      if (name == "release-one") {
        if (!a[1].empty()) published.push_back(Publication{a[1], ""});
      } else if (!a[1].empty()) {
        published.push_back(Publication{a[1] + key, ""});
      }
    }
    return Reply::Integer(deleted);
  }
  if (name == "extend") {
    for (const std::string& key : k) {
      Value* v = FindString(key, &wrong);
      if (wrong) return script_error();
      if (v == nullptr || v->str != a[0]) return Reply::Integer(0);
    }
    int64_t ms = 0;
    ParseInt(a[1], &ms);
    for (const std::string& key : k) {
      Value v = *Find(key);
      v.expire_ms = now + ms;
      Put(key, std::move(v));
    }
    return Reply::Integer(1);
  }
  if (name == "fence-commit") {
    const size_t locks = k.size() / 2;
    for (size_t i = 0; i < locks; ++i) {
      Value* v = FindString(k[i], &wrong);
      if (wrong) return script_error();
      if (v == nullptr || v->str != a[0]) return Reply::Integer(0);
    }
    for (size_t i = 0; i < locks && i + 1 < a.size(); ++i) {
      raise(k[locks + i], a[i + 1]);
      if (wrong) return script_error();
    }
    return Reply::Integer(1);
  }
  if (name == "inspect") {
    Value* v = FindString(k[0], &wrong);
    if (wrong) return script_error();
    std::optional<std::string> c = counter(k[1]);
    if (!c) return script_error();
    const int64_t pttl = v == nullptr ? -2 : (v->expire_ms < 0 ? -1 : v->expire_ms - now);
    return Reply::Array({Reply::String(v == nullptr ? "" : v->str), Reply::Integer(pttl),
                         Reply::String(Find(k[1]) == nullptr ? "0" : Find(k[1])->str)});
  }
  // The lock family's scripts (family_scripts.cc), on the node's ms clock.
  auto zset_copy = [&](const std::string& key) -> std::optional<Value> {
    Value* z = FindZset(key, &wrong);
    if (wrong) return std::nullopt;
    Value v = z != nullptr ? *z : Value();
    v.zset = true;
    return v;
  };
  auto purge = [&](Value& z) {
    for (auto it = z.members.begin(); it != z.members.end();) {
      it = it->second <= now ? z.members.erase(it) : std::next(it);
    }
  };
  auto fenced_answer = [&](bool fenced, int64_t v, const std::string& counter_key) -> Reply {
    if (!fenced) return Reply::Integer(v);
    if (v < 0) return Reply::Array({Reply::Integer(v)});
    std::optional<std::string> c = counter(counter_key);
    if (!c) return script_error();
    return Reply::Array({Reply::Integer(v), Reply::String(*c)});
  };
  auto zsave = [&](const std::string& key, Value z, bool changed) {
    if (changed) SaveZset(key, std::move(z));
  };
  if (name == "rw-read-acquire") {
    const bool fenced = k.size() == 4;
    if (Find(k[0]) != nullptr) return fenced_answer(fenced, -1, "");
    std::optional<Value> waiting = zset_copy(k[2]);
    if (!waiting) return script_error();
    const size_t before = waiting->members.size();
    purge(*waiting);
    zsave(k[2], *waiting, waiting->members.size() != before);
    if (!waiting->members.empty()) return fenced_answer(fenced, -2, "");
    std::optional<Value> readers = zset_copy(k[1]);
    if (!readers) return script_error();
    purge(*readers);
    int64_t ttl = 0;
    ParseInt(a[1], &ttl);
    readers->members[a[0]] = now + ttl;
    if (readers->expire_ms < 0 || readers->expire_ms - now < ttl) readers->expire_ms = now + ttl;
    SaveZset(k[1], *std::move(readers));
    return fenced_answer(fenced, 1, fenced ? k[3] : "");
  }
  if (name == "rw-write-acquire") {
    const bool fenced = k.size() == 4;
    if (Find(k[0]) == nullptr) {
      std::optional<Value> readers = zset_copy(k[1]);
      if (!readers) return script_error();
      const size_t before = readers->members.size();
      purge(*readers);
      zsave(k[1], *readers, readers->members.size() != before);
      if (readers->members.empty()) {
        set_key(k[0], a[0], a[1]);
        std::optional<Value> waiting = zset_copy(k[2]);
        if (!waiting) return script_error();
        if (waiting->members.erase(a[2]) > 0) SaveZset(k[2], *std::move(waiting));
        return fenced_answer(fenced, 1, fenced ? k[3] : "");
      }
    }
    int64_t intent = 0;
    ParseInt(a[3], &intent);
    if (intent > 0) {
      std::optional<Value> waiting = zset_copy(k[2]);
      if (!waiting) return script_error();
      purge(*waiting);
      waiting->members[a[2]] = now + intent;
      if (waiting->expire_ms < 0 || waiting->expire_ms - now < intent) {
        waiting->expire_ms = now + intent;
      }
      SaveZset(k[2], *std::move(waiting));
    }
    return fenced_answer(fenced, -1, "");
  }
  if (name == "rw-read-commit") {
    std::optional<Value> readers = zset_copy(k[0]);
    if (!readers) return script_error();
    auto it = readers->members.find(a[0]);
    if (it == readers->members.end() || it->second <= now) return Reply::Integer(0);
    raise(k[1], a[1]);
    if (wrong) return script_error();
    return Reply::Integer(1);
  }
  if (name == "rw-read-extend") {
    std::optional<Value> readers = zset_copy(k[0]);
    if (!readers) return script_error();
    auto it = readers->members.find(a[0]);
    if (it == readers->members.end()) return Reply::Integer(0);
    if (it->second <= now) {
      readers->members.erase(it);
      SaveZset(k[0], *std::move(readers));
      return Reply::Integer(0);
    }
    int64_t ttl = 0;
    ParseInt(a[1], &ttl);
    it->second = now + ttl;
    if (readers->expire_ms < 0 || readers->expire_ms - now < ttl) readers->expire_ms = now + ttl;
    SaveZset(k[0], *std::move(readers));
    return Reply::Integer(1);
  }
  if (name == "rw-read-release" || name == "rw-withdraw") {
    std::optional<Value> z = zset_copy(k[1]);
    if (!z) return script_error();
    const int64_t removed = static_cast<int64_t>(z->members.erase(a[0]));
    if (removed > 0) {
      purge(*z);
      const bool empty = z->members.empty();
      SaveZset(k[1], *std::move(z));
      if (!a[1].empty() && empty && (name == "rw-read-release" || Find(k[0]) == nullptr)) {
        published.push_back(Publication{a[1] + k[0], ""});
      }
    }
    return Reply::Integer(removed);
  }
  if (name == "rw-inspect") {
    Value* w = FindString(k[0], &wrong);
    if (wrong) return script_error();
    auto live = [&](const std::string& key) -> int64_t {
      Value* z = FindZset(key, &wrong);
      if (z == nullptr) return 0;
      int64_t c = 0;
      for (const auto& [m, score] : z->members) c += score > now ? 1 : 0;
      return c;
    };
    const int64_t readers = live(k[1]);
    const int64_t waiting = live(k[2]);
    if (wrong) return script_error();
    Value* c = FindString(k[3], &wrong);
    return Reply::Array(
        {Reply::String(w == nullptr ? "" : w->str),
         Reply::Integer(w == nullptr ? -2 : (w->expire_ms < 0 ? -1 : w->expire_ms - now)),
         Reply::Integer(readers), Reply::Integer(waiting),
         Reply::String(c == nullptr ? "0" : c->str)});
  }
  if (name == "sem-acquire") {
    int64_t permits = 0, first = 0;
    ParseInt(a[3], &permits);
    ParseInt(a[2], &first);
    for (int64_t j = 0; j < permits; ++j) {
      const int64_t i = (first + j) % permits;
      if (Find(k[static_cast<size_t>(i)]) != nullptr) continue;
      set_key(k[static_cast<size_t>(i)], a[0], a[1]);
      if (static_cast<int64_t>(k.size()) == 2 * permits) {
        std::optional<std::string> c = counter(k[static_cast<size_t>(permits + i)]);
        if (!c) return script_error();
        return Reply::Array({Reply::Integer(i + 1), Reply::String(*c)});
      }
      return Reply::Array({Reply::Integer(i + 1)});
    }
    return Reply::Array({Reply::Integer(0)});
  }
  (void)s;
  return Err("ERR the stand-in node does not model this script");
}

int64_t Node::master_offset() const { return state_->offset; }

void Node::Replicate(int replica, int64_t up_to_offset) {
  State& st = *state_;
  if (replica < 0 || replica >= static_cast<int>(st.replicas.size())) return;
  State::Replica& r = st.replicas[static_cast<size_t>(replica)];
  up_to_offset = std::min(up_to_offset, st.offset);
  for (const LogEntry& e : st.log) {
    if (e.offset <= r.offset) continue;
    if (e.offset > up_to_offset) break;
    for (const auto& [key, value] : e.changes) {
      if (value.has_value()) {
        r.data[key] = *value;
      } else {
        r.data.erase(key);
      }
    }
    r.offset = e.offset;
  }
  r.offset = std::max(r.offset, up_to_offset);
  int64_t low = st.offset;
  for (const State::Replica& x : st.replicas) low = std::min(low, x.offset);
  while (!st.log.empty() && st.log.front().offset <= low) st.log.pop_front();
}

int64_t Node::replica_offset(int replica) const {
  if (replica < 0 || replica >= static_cast<int>(state_->replicas.size())) return 0;
  return state_->replicas[static_cast<size_t>(replica)].offset;
}

int Node::AckedReplicas(int64_t offset) const {
  int n = 0;
  for (const State::Replica& r : state_->replicas) n += r.offset >= offset ? 1 : 0;
  return n;
}

int Node::FsyncedReplicas(int64_t offset) const { return AckedReplicas(offset); }

void Node::Failover(int replica) {
  State& st = *state_;
  if (replica < 0 || replica >= static_cast<int>(st.replicas.size())) return;
  Dataset promoted = st.replicas[static_cast<size_t>(replica)].data;
  const int64_t at = st.replicas[static_cast<size_t>(replica)].offset;
  // Every key the lost writes touched changed for a WATCH.
  for (const LogEntry& e : st.log) {
    if (e.offset <= at) continue;
    for (const auto& [key, value] : e.changes) st.Touch(key);
  }
  st.data = std::move(promoted);
  st.offset = at;
  st.log.clear();
  for (State::Replica& r : st.replicas) {
    r.data = st.data;
    r.offset = at;
  }
  st.scripts.clear();
  st.run_id = internal::Sha1Hex(absl::StrCat(st.run_id, ":failover"));
}

void Node::Restart(bool keep_data, const std::string& new_run_id) {
  State& st = *state_;
  if (!keep_data) {
    for (const auto& [key, value] : st.data) st.Touch(key);
    st.data.clear();
  }
  st.scripts.clear();
  st.run_id = new_run_id;
  st.log.clear();
  for (State::Replica& r : st.replicas) {
    r.data = st.data;
    r.offset = st.offset;
  }
}

void Node::BeginMigration(int slot, const std::string& target_name) {
  state_->migrating[slot] = target_name;
}

void Node::EndMigration(int slot) {
  auto it = state_->migrating.find(slot);
  if (it != state_->migrating.end()) state_->moved[slot] = it->second;
  state_->migrating.erase(slot);
  state_->served.erase(slot);
}

void Node::BeginImport(int slot) { state_->importing.insert(slot); }

void Node::EndImport(int slot) {
  state_->importing.erase(slot);
  state_->moved.erase(slot);
  state_->served.insert(slot);
}

int Node::MoveKeys(int slot, Node& to, int count, int64_t now_ms) {
  State& st = *state_;
  st.now = now_ms;
  to.state_->now = now_ms;
  std::vector<std::string> keys;
  for (const auto& [key, value] : st.data) {
    if (internal::KeySlot(key) == slot) keys.push_back(key);
    if (static_cast<int>(keys.size()) >= count) break;
  }
  // MIGRATE: a RESTORE on the target and a DEL here, each replicated as a
  // write of its node.
  auto commit = [](State& s) {
    if (s.pending.empty()) return;
    ++s.offset;
    s.log.push_back(LogEntry{s.offset, std::move(s.pending)});
    s.pending.clear();
    if (s.replicas.empty()) s.log.clear();
  };
  st.pending.clear();
  to.state_->pending.clear();
  for (const std::string& key : keys) {
    Value v = st.data[key];
    st.Erase(key);
    if (v.expire_ms < 0 || v.expire_ms > now_ms) to.state_->Put(key, std::move(v));
    commit(st);
    commit(*to.state_);
  }
  return static_cast<int>(keys.size());
}

std::optional<std::string> Node::Get(const std::string& key, int64_t now_ms) {
  auto it = state_->data.find(key);
  if (it == state_->data.end() || it->second.zset) return std::nullopt;
  if (it->second.expire_ms >= 0 && it->second.expire_ms <= now_ms) return std::nullopt;
  return it->second.str;
}

std::vector<std::string> Node::Keys(int64_t now_ms) {
  std::vector<std::string> out;
  for (const auto& [key, value] : state_->data) {
    if (value.expire_ms >= 0 && value.expire_ms <= now_ms) continue;
    if (value.zset) {
      bool live = false;
      for (const auto& [m, score] : value.members) live = live || score > now_ms;
      if (!live) continue;
    }
    out.push_back(key);
  }
  return out;
}

std::vector<std::string> Node::CachedScripts() const {
  return std::vector<std::string>(state_->scripts.begin(), state_->scripts.end());
}

void Node::FlushScripts() { state_->scripts.clear(); }

const std::vector<std::pair<std::string, int64_t>>& Node::CommandCounts() const {
  return state_->counts;
}

}  // namespace redlock::sim
