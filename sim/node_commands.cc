// sim/node_commands.cc: the command table of a simulated node and the
// commands other than scripting and sorted sets: strings and keys,
// transactions, replication waits, pub/sub, connection and server commands,
// cluster answers. Behaviour, argument checks and error texts follow Redis
// 7.0 (checked against redis-server by tests/sim/conformance_test.cc).

#include <algorithm>
#include <climits>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/sha1.h"
#include "sim/node_state.h"

namespace redlock::sim::node_internal {
namespace {

Reply ExpireTimeError(absl::string_view fullname) {
  return Err(absl::StrCat("invalid expire time in '", fullname, "' command"));
}

// The string at `key`: null when missing; *wrong when of another type.
Entry* FindString(State& s, Ctx& ctx, absl::string_view key, bool* wrong) {
  *wrong = false;
  Entry* e = s.Find(ctx, key);
  if (e != nullptr && e->value.is_zset) {
    *wrong = true;
    return nullptr;
  }
  return e;
}

// ---- Strings and keys ----------------------------------------------------------------------

Reply GetCmd(State& s, Ctx& ctx, const Argv& a) {
  bool wrong = false;
  Entry* e = FindString(s, ctx, a[1], &wrong);
  if (wrong) return WrongType();
  return e == nullptr ? Reply::Nil() : Reply::String(e->value.str);
}

Reply SetCmd(State& s, Ctx& ctx, const Argv& a) {
  enum : unsigned {
    kNx = 1,
    kXx = 2,
    kGet = 4,
    kKeepTtl = 8,
    kEx = 16,
    kPx = 32,
    kExAt = 64,
    kPxAt = 128,
    kIfEq = 256
  };
  unsigned f = 0;
  const std::string* expire = nullptr;
  const std::string* ifeq = nullptr;
  for (size_t j = 3; j < a.size(); ++j) {
    const std::string& o = a[j];
    const bool next = j + 1 < a.size();
    if (IEquals(o, "nx") && !(f & (kXx | kIfEq))) {
      f |= kNx;
    } else if (IEquals(o, "xx") && !(f & (kNx | kIfEq))) {
      f |= kXx;
    } else if (IEquals(o, "get")) {
      f |= kGet;
    } else if (IEquals(o, "keepttl") && !(f & (kEx | kPx | kExAt | kPxAt))) {
      f |= kKeepTtl;
    } else if (IEquals(o, "ex") && !(f & (kKeepTtl | kPx | kExAt | kPxAt)) && next) {
      f |= kEx;
      expire = &a[++j];
    } else if (IEquals(o, "px") && !(f & (kKeepTtl | kEx | kExAt | kPxAt)) && next) {
      f |= kPx;
      expire = &a[++j];
    } else if (IEquals(o, "exat") && !(f & (kKeepTtl | kEx | kPx | kPxAt)) && next) {
      f |= kExAt;
      expire = &a[++j];
    } else if (IEquals(o, "pxat") && !(f & (kKeepTtl | kEx | kPx | kExAt)) && next) {
      f |= kPxAt;
      expire = &a[++j];
    } else if (s.config.set_ifeq && IEquals(o, "ifeq") && !(f & (kNx | kXx)) && next) {
      f |= kIfEq;
      ifeq = &a[++j];
    } else {
      return Syntax();
    }
  }
  int64_t when = -1;
  if (expire != nullptr) {
    int64_t v = 0;
    if (!ParseInt(*expire, &v)) return NotInteger();
    const bool seconds = f & (kEx | kExAt);
    if (v <= 0 || (seconds && v > INT64_MAX / 1000)) return ExpireTimeError("set");
    if (seconds) v *= 1000;
    if (f & (kEx | kPx)) {
      if (v > INT64_MAX - ctx.now) return ExpireTimeError("set");
      v += ctx.now;
    }
    if (v <= 0) return ExpireTimeError("set");
    when = v;
  }
  const std::string& key = a[1];
  bool wrong = false;
  Entry* found = FindString(s, ctx, key, &wrong);
  std::optional<std::string> old;
  if (f & kGet) {
    if (wrong) return WrongType();
    if (found != nullptr) old = found->value.str;
  }
  const bool exists = found != nullptr || wrong;
  auto skipped = [&]() {
    return (f & kGet) && old.has_value() ? Reply::String(*old) : Reply::Nil();
  };
  if (((f & kNx) && exists) || ((f & kXx) && !exists)) return skipped();
  if (f & kIfEq) {
    if (wrong) return WrongType();
    if (found == nullptr || found->value.str != *ifeq) return skipped();
  }
  Entry& e = s.Upsert(ctx, key);
  const int64_t kept = (f & kKeepTtl) && exists ? e.value.expire_at : -1;
  e.value.is_zset = false;
  e.value.zset = ZSet();
  e.value.str = a[2];
  e.value.expire_at = when >= 0 ? when : kept;
  s.Changed(ctx.db, key, e);
  if (f & kGet) return old.has_value() ? Reply::String(*old) : Reply::Nil();
  return Ok();
}

Reply GetRangeCmd(State& s, Ctx& ctx, const Argv& a) {
  int64_t start = 0, end = 0;
  if (!ParseInt(a[2], &start) || !ParseInt(a[3], &end)) return NotInteger();
  bool wrong = false;
  Entry* e = FindString(s, ctx, a[1], &wrong);
  if (wrong) return WrongType();
  if (e == nullptr) return Reply::String("");
  const std::string& str = e->value.str;
  const int64_t len = static_cast<int64_t>(str.size());
  if (start < 0 && end < 0 && start > end) return Reply::String("");
  if (start < 0) start = len + start;
  if (end < 0) end = len + end;
  if (start < 0) start = 0;
  if (end < 0) end = 0;
  if (end >= len) end = len - 1;
  if (start > end || len == 0) return Reply::String("");
  return Reply::String(
      str.substr(static_cast<size_t>(start), static_cast<size_t>(end - start + 1)));
}

Reply MGetCmd(State& s, Ctx& ctx, const Argv& a) {
  std::vector<Reply> out;
  for (size_t i = 1; i < a.size(); ++i) {
    Entry* e = s.Find(ctx, a[i]);
    out.push_back(e == nullptr || e->value.is_zset ? Reply::Nil() : Reply::String(e->value.str));
  }
  return Reply::Array(std::move(out));
}

Reply DelCmd(State& s, Ctx& ctx, const Argv& a) {
  int64_t n = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    if (Entry* e = s.Find(ctx, a[i])) {
      s.Delete(ctx.db, a[i], *e);
      ++n;
    }
  }
  return Reply::Integer(n);
}

Reply ExistsCmd(State& s, Ctx& ctx, const Argv& a) {
  int64_t n = 0;
  for (size_t i = 1; i < a.size(); ++i) n += s.Find(ctx, a[i]) != nullptr ? 1 : 0;
  return Reply::Integer(n);
}

// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX|XX|GT|LT.
Reply ExpireGeneric(State& s, Ctx& ctx, const Argv& a, bool seconds, bool relative,
                    const char* fullname) {
  int64_t when = 0;
  if (!ParseInt(a[2], &when)) return NotInteger();
  bool nx = false, xx = false, gt = false, lt = false;
  for (size_t j = 3; j < a.size(); ++j) {
    if (IEquals(a[j], "nx")) {
      nx = true;
    } else if (IEquals(a[j], "xx")) {
      xx = true;
    } else if (IEquals(a[j], "gt")) {
      gt = true;
    } else if (IEquals(a[j], "lt")) {
      lt = true;
    } else {
      return Err(absl::StrCat("Unsupported option ", a[j]));
    }
  }
  if (nx && (xx || gt || lt))
    return Err("NX and XX, GT or LT options at the same time are not compatible");
  if (gt && lt) return Err("GT and LT options at the same time are not compatible");
  if (seconds) {
    if (when > INT64_MAX / 1000 || when < INT64_MIN / 1000) return ExpireTimeError(fullname);
    when *= 1000;
  }
  const int64_t base = relative ? ctx.now : 0;
  if (when > INT64_MAX - base) return ExpireTimeError(fullname);
  when += base;
  Entry* e = s.Find(ctx, a[1]);
  if (e == nullptr) return Reply::Integer(0);
  const int64_t cur = e->value.expire_at;
  if (nx && cur != -1) return Reply::Integer(0);
  if (xx && cur == -1) return Reply::Integer(0);
  if (gt && (when <= cur || cur == -1)) return Reply::Integer(0);
  if (lt && cur != -1 && when >= cur) return Reply::Integer(0);
  if (when <= ctx.now) {
    s.Delete(ctx.db, a[1], *e);
  } else {
    e->value.expire_at = when;
    s.Changed(ctx.db, a[1], *e);
  }
  return Reply::Integer(1);
}

Reply PExpireCmd(State& s, Ctx& c, const Argv& a) {
  return ExpireGeneric(s, c, a, false, true, "pexpire");
}
Reply ExpireCmd(State& s, Ctx& c, const Argv& a) {
  return ExpireGeneric(s, c, a, true, true, "expire");
}
Reply PExpireAtCmd(State& s, Ctx& c, const Argv& a) {
  return ExpireGeneric(s, c, a, false, false, "pexpireat");
}
Reply ExpireAtCmd(State& s, Ctx& c, const Argv& a) {
  return ExpireGeneric(s, c, a, true, false, "expireat");
}

Reply TtlGeneric(State& s, Ctx& ctx, const Argv& a, bool ms) {
  Entry* e = s.Find(ctx, a[1]);
  if (e == nullptr) return Reply::Integer(-2);
  if (e->value.expire_at < 0) return Reply::Integer(-1);
  int64_t ttl = std::max<int64_t>(0, e->value.expire_at - ctx.now);
  return Reply::Integer(ms ? ttl : (ttl + 500) / 1000);
}
Reply PTtlCmd(State& s, Ctx& c, const Argv& a) { return TtlGeneric(s, c, a, true); }
Reply TtlCmd(State& s, Ctx& c, const Argv& a) { return TtlGeneric(s, c, a, false); }

Reply PersistCmd(State& s, Ctx& ctx, const Argv& a) {
  Entry* e = s.Find(ctx, a[1]);
  if (e == nullptr || e->value.expire_at < 0) return Reply::Integer(0);
  e->value.expire_at = -1;
  s.Changed(ctx.db, a[1], *e);
  return Reply::Integer(1);
}

Reply TypeCmd(State& s, Ctx& ctx, const Argv& a) {
  Entry* e = s.Find(ctx, a[1]);
  return Reply::Status(e == nullptr ? "none" : e->value.is_zset ? "zset" : "string");
}

Reply IncrGeneric(State& s, Ctx& ctx, const std::string& key, int64_t by) {
  bool wrong = false;
  Entry* e = FindString(s, ctx, key, &wrong);
  if (wrong) return WrongType();
  int64_t value = 0;
  if (e != nullptr && !ParseInt(e->value.str, &value)) return NotInteger();
  if ((by < 0 && value < 0 && by < INT64_MIN - value) ||
      (by > 0 && value > 0 && by > INT64_MAX - value)) {
    return Err("increment or decrement would overflow");
  }
  value += by;
  Entry& w = s.Upsert(ctx, key);
  w.value.str = std::to_string(value);  // keeps its expiry
  s.Changed(ctx.db, key, w);
  return Reply::Integer(value);
}

Reply IncrCmd(State& s, Ctx& c, const Argv& a) { return IncrGeneric(s, c, a[1], 1); }
Reply DecrCmd(State& s, Ctx& c, const Argv& a) { return IncrGeneric(s, c, a[1], -1); }
Reply IncrByCmd(State& s, Ctx& c, const Argv& a) {
  int64_t by = 0;
  if (!ParseInt(a[2], &by)) return NotInteger();
  return IncrGeneric(s, c, a[1], by);
}
Reply DecrByCmd(State& s, Ctx& c, const Argv& a) {
  int64_t by = 0;
  if (!ParseInt(a[2], &by)) return NotInteger();
  if (by == INT64_MIN) return Err("decrement would overflow");
  return IncrGeneric(s, c, a[1], -by);
}

Reply DbSizeCmd(State& s, Ctx& ctx, const Argv&) {
  int64_t n = 0;
  for (const auto& [key, e] : s.dbs[static_cast<size_t>(ctx.db)]) {
    n += e.present && !s.Expired(e, ctx.now) ? 1 : 0;
  }
  return Reply::Integer(n);
}

Reply FlushGeneric(State& s, Ctx& ctx, const Argv& a, bool all) {
  if (a.size() > 2) return Syntax();
  if (a.size() == 2 && !IEquals(a[1], "sync") && !IEquals(a[1], "async")) {
    return Syntax();
  }
  for (int db = 0; db < kDatabases; ++db) {
    if (!all && db != ctx.db) continue;
    for (auto& [key, e] : s.dbs[static_cast<size_t>(db)]) {
      if (e.present) s.Delete(db, key, e);
    }
  }
  return Ok();
}
Reply FlushAllCmd(State& s, Ctx& c, const Argv& a) { return FlushGeneric(s, c, a, true); }
Reply FlushDbCmd(State& s, Ctx& c, const Argv& a) { return FlushGeneric(s, c, a, false); }

// DELIFEQ key value (Valkey 9.0): 1 when deleted.
Reply DelIfEqCmd(State& s, Ctx& ctx, const Argv& a) {
  bool wrong = false;
  Entry* e = FindString(s, ctx, a[1], &wrong);
  if (wrong) return WrongType();
  if (e == nullptr || e->value.str != a[2]) return Reply::Integer(0);
  s.Delete(ctx.db, a[1], *e);
  return Reply::Integer(1);
}

// DELEX key [IFEQ value | IFNE value] (Redis 8.4; the digest forms are not
// simulated).
Reply DelExCmd(State& s, Ctx& ctx, const Argv& a) {
  if (a.size() != 2 && a.size() != 4) return Syntax();
  const bool conditional = a.size() == 4;
  const bool ifeq = conditional && IEquals(a[2], "ifeq");
  if (conditional && !ifeq && !IEquals(a[2], "ifne")) return Syntax();
  bool wrong = false;
  Entry* e = FindString(s, ctx, a[1], &wrong);
  if (wrong && conditional) return WrongType();
  if (wrong) e = s.Find(ctx, a[1]);
  if (e == nullptr) return Reply::Integer(0);
  if (conditional && ((e->value.str == a[3]) != ifeq)) return Reply::Integer(0);
  s.Delete(ctx.db, a[1], *e);
  return Reply::Integer(1);
}

// ---- Transactions --------------------------------------------------------------------------

void EndTransaction(Session& session) {
  session.in_multi = false;
  session.multi_error = false;
  session.queued.clear();
  session.watched.clear();
  session.watch_dirty = false;
}

Reply MultiCmd(State&, Ctx& ctx, const Argv&) {
  Session& session = *ctx.session;
  if (session.in_multi) return Err("MULTI calls can not be nested");
  session.in_multi = true;
  session.multi_error = false;
  session.queued.clear();
  return Ok();
}

Reply DiscardCmd(State&, Ctx& ctx, const Argv&) {
  if (!ctx.session->in_multi) return Err("DISCARD without MULTI");
  EndTransaction(*ctx.session);
  return Ok();
}

bool WatchBroken(State& s, const Session& session, int64_t now) {
  if (session.watch_dirty) return true;
  for (const auto& [key, version] : session.watched) {
    const uint64_t at = version >> 5;
    const int db = static_cast<int>((version >> 1) & 15);
    const bool was_expired = version & 1;
    if (s.reset_at > at) return true;
    const Keyspace& ks = s.dbs[static_cast<size_t>(db)];
    auto it = ks.find(key);
    if (it == ks.end()) continue;
    const Entry& e = it->second;
    if (was_expired) {
      // Its deletion (the first change since) is no change; any other is.
      if (e.prev_change > at) return true;
    } else if (e.last_change > at || s.Expired(e, now)) {
      return true;
    }
  }
  return false;
}

Reply ExecCmd(State& s, Ctx& ctx, const Argv&) {
  Session& session = *ctx.session;
  if (!session.in_multi) return Err("EXEC without MULTI");
  if (session.multi_error) {
    EndTransaction(session);
    return Reply::Error("EXECABORT Transaction discarded because of previous errors.");
  }
  if (WatchBroken(s, session, ctx.now)) {
    EndTransaction(session);
    return Reply::Nil();
  }
  std::vector<Argv> queued = std::move(session.queued);
  EndTransaction(session);
  Ctx inner = ctx;
  inner.exec = true;
  std::vector<Reply> out;
  out.reserve(queued.size());
  for (const Argv& argv : queued) {
    const Spec* spec = FindCommand(argv[0]);
    if (spec != nullptr && !spec->subcommands.empty() && argv.size() >= 2) {
      spec = FindSubcommand(*spec, argv[1]);
    }
    inner.db = session.db;
    out.push_back(spec == nullptr ? Err("unknown command") : s.Run(inner, *spec, argv));
  }
  return Reply::Array(std::move(out));
}

Reply WatchCmd(State& s, Ctx& ctx, const Argv& a) {
  Session& session = *ctx.session;
  if (session.in_multi) return Err("WATCH inside MULTI is not allowed");
  for (size_t i = 1; i < a.size(); ++i) {
    bool already = false;
    for (const auto& [key, version] : session.watched) {
      already = already || (key == a[i] && static_cast<int>((version >> 1) & 15) == ctx.db);
    }
    if (already) continue;
    const Keyspace& ks = s.dbs[static_cast<size_t>(ctx.db)];
    auto it = ks.find(a[i]);
    const bool expired = it != ks.end() && s.Expired(it->second, ctx.now);
    session.watched.emplace_back(
        a[i], (s.changes << 5) | (static_cast<uint64_t>(ctx.db) << 1) | (expired ? 1 : 0));
  }
  return Ok();
}

Reply UnwatchCmd(State&, Ctx& ctx, const Argv&) {
  ctx.session->watched.clear();
  ctx.session->watch_dirty = false;
  return Ok();
}

// ---- Replication waits ----------------------------------------------------------------------

bool ParseTimeout(const std::string& arg, int64_t now, int64_t* timeout, Reply* error) {
  int64_t t = 0;
  if (!ParseInt(arg, &t)) {
    *error = Err("timeout is not an integer or out of range");
    return false;
  }
  if (t < 0) {
    *error = Err("timeout is negative");
    return false;
  }
  if (t > 0 && t > INT64_MAX - now) {
    *error = Err("timeout is out of range");
    return false;
  }
  *timeout = t;
  return true;
}

int Acked(const State& s, int64_t offset) {
  int n = 0;
  for (const Replica& r : s.replicas) n += r.offset >= offset ? 1 : 0;
  return n;
}

Reply WaitCmd(State& s, Ctx& ctx, const Argv& a) {
  int64_t numreplicas = 0;
  if (!ParseInt(a[1], &numreplicas)) return NotInteger();
  int64_t timeout = 0;
  Reply error;
  if (!ParseTimeout(a[2], ctx.now, &timeout, &error)) return error;
  const int64_t offset = ctx.session->last_write_offset;
  const int acked = Acked(s, offset);
  if (acked >= numreplicas || ctx.exec) return Reply::Integer(acked);
  Block b;
  b.offset = offset;
  b.numreplicas = static_cast<int>(std::min<int64_t>(numreplicas, INT_MAX));
  b.timeout_ms = timeout;
  ctx.result->block = b;
  return Reply::Nil();
}

Reply WaitAofCmd(State& s, Ctx& ctx, const Argv& a) {
  int64_t numlocal = 0, numreplicas = 0;
  if (!ParseInt(a[1], &numlocal)) return NotInteger();
  if (numlocal < 0 || numlocal > 1) return Err("value is out of range, value must between 0 and 1");
  if (!ParseInt(a[2], &numreplicas)) return NotInteger();
  if (numreplicas < 0) return Err("value is out of range, must be positive");
  int64_t timeout = 0;
  Reply error;
  if (!ParseTimeout(a[3], ctx.now, &timeout, &error)) return error;
  if (numlocal > 0 && !s.config.appendonly) {
    return Err("WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
  }
  const int64_t offset = ctx.session->last_write_offset;
  const int64_t local = s.config.appendonly ? 1 : 0;
  const int acked = Acked(s, offset);
  if ((acked >= numreplicas && local >= numlocal) || ctx.exec) {
    return Reply::Array({Reply::Integer(local), Reply::Integer(acked)});
  }
  Block b;
  b.aof = true;
  b.offset = offset;
  b.numlocal = static_cast<int>(numlocal);
  b.numreplicas = static_cast<int>(std::min<int64_t>(numreplicas, INT_MAX));
  b.timeout_ms = timeout;
  ctx.result->block = b;
  return Reply::Nil();
}

// ---- Pub/sub -------------------------------------------------------------------------------

Reply PublishCmd(State& s, Ctx& ctx, const Argv& a) {
  ctx.result->published.push_back(Publication{a[1], a[2]});
  auto it = s.subscribers.find(a[1]);
  return Reply::Integer(it == s.subscribers.end() ? 0 : it->second);
}

Reply SubscribeCmd(State& s, Ctx& ctx, const Argv& a) {
  Session& session = *ctx.session;
  std::vector<Reply> out;
  for (size_t i = 1; i < a.size(); ++i) {
    if (std::find(session.subscribed.begin(), session.subscribed.end(), a[i]) ==
        session.subscribed.end()) {
      session.subscribed.push_back(a[i]);
      ++s.subscribers[a[i]];
    }
    out.push_back(Reply::Array({Reply::String("subscribe"), Reply::String(a[i]),
                                Reply::Integer(static_cast<int64_t>(session.subscribed.size()))}));
  }
  return out.size() == 1 ? std::move(out[0]) : Reply::Array(std::move(out));
}

Reply UnsubscribeCmd(State& s, Ctx& ctx, const Argv& a) {
  Session& session = *ctx.session;
  std::vector<std::string> channels(a.begin() + 1, a.end());
  if (a.size() == 1) channels = session.subscribed;
  if (channels.empty()) {
    return Reply::Array({Reply::String("unsubscribe"), Reply::Nil(), Reply::Integer(0)});
  }
  std::vector<Reply> out;
  for (const std::string& c : channels) {
    auto it = std::find(session.subscribed.begin(), session.subscribed.end(), c);
    if (it != session.subscribed.end()) {
      session.subscribed.erase(it);
      auto n = s.subscribers.find(c);
      if (n != s.subscribers.end() && --n->second <= 0) s.subscribers.erase(n);
    }
    out.push_back(Reply::Array({Reply::String("unsubscribe"), Reply::String(c),
                                Reply::Integer(static_cast<int64_t>(session.subscribed.size()))}));
  }
  return out.size() == 1 ? std::move(out[0]) : Reply::Array(std::move(out));
}

// ---- Connection and server -----------------------------------------------------------------

Reply PingCmd(State&, Ctx& ctx, const Argv& a) {
  if (a.size() > 2) return ArityError("ping");
  if (ctx.session != nullptr && !ctx.session->subscribed.empty() && !ctx.script) {
    return Reply::Array({Reply::String("pong"), Reply::String(a.size() == 2 ? a[1] : "")});
  }
  return a.size() == 2 ? Reply::String(a[1]) : Reply::Status("PONG");
}

Reply EchoCmd(State&, Ctx&, const Argv& a) { return Reply::String(a[1]); }

Reply TimeCmd(State&, Ctx& ctx, const Argv&) {
  const int64_t sec = ctx.now / 1000;
  const int64_t usec = (ctx.now % 1000) * 1000;
  return Reply::Array({Reply::String(std::to_string(sec)), Reply::String(std::to_string(usec))});
}

Reply QuitCmd(State&, Ctx&, const Argv&) { return Ok(); }

Reply SelectCmd(State& s, Ctx& ctx, const Argv& a) {
  int64_t id = 0;
  if (!ParseInt(a[1], &id) || id < INT_MIN || id > INT_MAX) return NotInteger();
  if (s.cluster && id != 0) return Err("SELECT is not allowed in cluster mode");
  if (id < 0 || id >= kDatabases) return Err("DB index is out of range");
  ctx.db = static_cast<int>(id);
  if (!ctx.script) ctx.session->db = ctx.db;
  return Ok();
}

Reply AuthCmd(State&, Ctx& ctx, const Argv& a) {
  if (a.size() > 3) return Syntax();
  ctx.session->user = a.size() == 3 ? a[1] : "default";
  return Ok();
}

Reply ClientSetNameCmd(State&, Ctx& ctx, const Argv& a) {
  for (char c : a[2]) {
    if (c < '!' || c > '~') {
      return Err("Client names cannot contain spaces, newlines or special characters.");
    }
  }
  ctx.session->name = a[2];
  return Ok();
}

Reply ClientGetNameCmd(State&, Ctx& ctx, const Argv&) {
  return ctx.session->name.empty() ? Reply::Nil() : Reply::String(ctx.session->name);
}

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

int64_t PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  int64_t port = 0;
  if (colon == std::string::npos || !ParseInt(address.substr(colon + 1), &port)) return 0;
  return port;
}

std::string InfoText(const State& s, const std::vector<std::string>& wanted) {
  auto want = [&](const char* section, bool in_default) {
    if (wanted.empty()) return in_default;
    for (const std::string& w : wanted) {
      if (IEquals(w, section) || IEquals(w, "all") || IEquals(w, "everything") ||
          (in_default && IEquals(w, "default"))) {
        return true;
      }
    }
    return false;
  };
  std::string out;
  auto section = [&](const char* title, const std::vector<std::string>& lines) {
    if (!out.empty()) out += "\r\n";
    absl::StrAppend(&out, "# ", title, "\r\n");
    for (const std::string& l : lines) absl::StrAppend(&out, l, "\r\n");
  };
  if (want("server", true)) {
    std::vector<std::string> lines;
    lines.push_back(
        absl::StrCat("redis_version:", s.version[0], ".", s.version[1], ".", s.version[2]));
    if (s.valkey) {
      lines.push_back("server_name:valkey");
      lines.push_back(absl::StrCat("valkey_version:", s.config.version));
    }
    lines.push_back(absl::StrCat("redis_mode:", s.cluster ? "cluster" : "standalone"));
    lines.push_back("os:simulated");
    lines.push_back("process_id:1");
    lines.push_back(absl::StrCat("run_id:", s.run_id));
    lines.push_back(absl::StrCat("tcp_port:", s.cluster ? PortOf(s.Address(0)) : 0));
    section("Server", lines);
  }
  if (want("persistence", true)) {
    section("Persistence",
            {"loading:0", absl::StrCat("aof_enabled:", s.config.appendonly ? 1 : 0)});
  }
  if (want("replication", true)) {
    std::vector<std::string> lines = {"role:master",
                                      absl::StrCat("connected_slaves:", s.replicas.size())};
    for (size_t i = 0; i < s.replicas.size(); ++i) {
      lines.push_back(absl::StrCat("slave", i, ":ip=", s.config.name, "-replica-", i,
                                   ",port=0,state=online,offset=", s.replicas[i].offset, ",lag=0"));
    }
    lines.push_back(absl::StrCat("master_repl_offset:", s.master_offset));
    section("Replication", lines);
  }
  if (want("cluster", true))
    section("Cluster", {absl::StrCat("cluster_enabled:", s.cluster ? 1 : 0)});
  if (want("keyspace", true)) {
    std::vector<std::string> lines;
    for (int db = 0; db < kDatabases; ++db) {
      int64_t keys = 0, expires = 0;
      for (const auto& [key, e] : s.dbs[static_cast<size_t>(db)]) {
        if (!e.present) continue;
        ++keys;
        expires += e.value.expire_at >= 0 ? 1 : 0;
      }
      if (keys > 0)
        lines.push_back(absl::StrCat("db", db, ":keys=", keys, ",expires=", expires, ",avg_ttl=0"));
    }
    section("Keyspace", lines);
  }
  return out;
}

Reply InfoCmd(State& s, Ctx&, const Argv& a) {
  return Reply::String(InfoText(s, std::vector<std::string>(a.begin() + 1, a.end())));
}

Reply RoleCmd(State& s, Ctx&, const Argv&) {
  std::vector<Reply> replicas;
  for (size_t i = 0; i < s.replicas.size(); ++i) {
    replicas.push_back(
        Reply::Array({Reply::String(absl::StrCat(s.config.name, "-replica-", i)),
                      Reply::String("0"), Reply::String(std::to_string(s.replicas[i].offset))}));
  }
  return Reply::Array({Reply::String("master"), Reply::Integer(s.master_offset),
                       Reply::Array(std::move(replicas))});
}

// COMMAND INFO's entry for a spec.
Reply CommandEntry(const Spec& spec) {
  static const std::vector<std::pair<uint32_t, const char*>> kFlagNames = {
      {kWrite, "write"},     {kReadonly, "readonly"}, {kDenyOom, "denyoom"},
      {kAdmin, "admin"},     {kPubSub, "pubsub"},     {kNoScript, "noscript"},
      {kLoading, "loading"}, {kStale, "stale"},       {kFast, "fast"}};
  std::vector<Reply> flags;
  for (const auto& [bit, name] : kFlagNames) {
    if (spec.flags & bit) flags.push_back(Reply::Status(name));
  }
  std::vector<Reply> categories;
  for (absl::string_view c : absl::StrSplit(spec.categories, ' ', absl::SkipEmpty())) {
    categories.push_back(Reply::Status(std::string(c)));
  }
  std::vector<Reply> subs;
  for (const Spec& sub : spec.subcommands) subs.push_back(CommandEntry(sub));
  return Reply::Array({Reply::String(spec.name), Reply::Integer(spec.arity),
                       Reply::Array(std::move(flags)), Reply::Integer(spec.first_key),
                       Reply::Integer(spec.last_key), Reply::Integer(spec.step),
                       Reply::Array(std::move(categories)), Reply::Array({}), Reply::Array({}),
                       Reply::Array(std::move(subs))});
}

bool Visible(const State& s, const Spec& spec) {
  if ((spec.flags & kNeedsVersion72) &&
      !(s.version[0] > 7 || (s.version[0] == 7 && s.version[1] >= 2))) {
    return false;
  }
  if ((spec.flags & kDelifeq) && !s.config.delifeq) return false;
  if ((spec.flags & kDelex) && !s.config.delex) return false;
  return true;
}

Reply CommandInfoCmd(State& s, Ctx&, const Argv& a) {
  std::vector<Reply> out;
  if (a.size() == 2) {
    for (const Spec& spec : CommandTable()) {
      if (Visible(s, spec)) out.push_back(CommandEntry(spec));
    }
    return Reply::Array(std::move(out));
  }
  for (size_t i = 2; i < a.size(); ++i) {
    const Spec* spec = FindCommand(a[i]);
    out.push_back(spec != nullptr && Visible(s, *spec) ? CommandEntry(*spec) : Reply::Nil());
  }
  return Reply::Array(std::move(out));
}

Reply CommandAllCmd(State& s, Ctx& ctx, const Argv&) {
  return CommandInfoCmd(s, ctx, {"COMMAND", "INFO"});
}

Reply CommandCountCmd(State& s, Ctx&, const Argv&) {
  int64_t n = 0;
  for (const Spec& spec : CommandTable()) n += Visible(s, spec) ? 1 : 0;
  return Reply::Integer(n);
}

// COMMAND DOCS: the names and a one-line summary (the rest of Redis's docs
// is not simulated).
Reply CommandDocsCmd(State& s, Ctx&, const Argv& a) {
  std::vector<Reply> out;
  auto add = [&](const Spec& spec) {
    out.push_back(Reply::String(spec.name));
    out.push_back(Reply::Array(
        {Reply::String("summary"), Reply::String(absl::StrCat("the ", spec.name, " command"))}));
  };
  if (a.size() == 2) {
    for (const Spec& spec : CommandTable()) {
      if (Visible(s, spec)) add(spec);
    }
  }
  for (size_t i = 2; i < a.size(); ++i) {
    const Spec* spec = FindCommand(a[i]);
    if (spec != nullptr && Visible(s, *spec)) add(*spec);
  }
  return Reply::Array(std::move(out));
}

// ---- Cluster -------------------------------------------------------------------------------

Reply NoCluster() { return Err("This instance has cluster support disabled"); }

Reply AskingCmd(State& s, Ctx& ctx, const Argv&) {
  if (!s.cluster) return NoCluster();
  if (!ctx.script) ctx.session->asking = true;
  return Ok();
}

Reply ShardEntry(const State& s, int shard) {
  const std::string address = s.Address(shard);
  return Reply::Array({Reply::String(HostOf(address)), Reply::Integer(PortOf(address)),
                       Reply::String(s.shards[static_cast<size_t>(shard)].second),
                       Reply::Array({})});
}

// The slot map as ranges (first, last, owner), by slot.
std::vector<std::tuple<int, int, int>> Ranges(const State& s) {
  std::vector<std::tuple<int, int, int>> out;
  for (int slot = 0; slot < kSlots;) {
    const int owner = s.slot_owner[static_cast<size_t>(slot)];
    int last = slot;
    while (last + 1 < kSlots && s.slot_owner[static_cast<size_t>(last + 1)] == owner) ++last;
    if (owner >= 0) out.emplace_back(slot, last, owner);
    slot = last + 1;
  }
  return out;
}

Reply ClusterSlotsCmd(State& s, Ctx&, const Argv&) {
  if (!s.cluster) return NoCluster();
  std::vector<Reply> out;
  for (const auto& [first, last, owner] : Ranges(s)) {
    out.push_back(
        Reply::Array({Reply::Integer(first), Reply::Integer(last), ShardEntry(s, owner)}));
  }
  return Reply::Array(std::move(out));
}

Reply ClusterMyIdCmd(State& s, Ctx&, const Argv&) {
  if (!s.cluster) return NoCluster();
  return Reply::String(s.shards[0].second);
}

Reply ClusterNodesCmd(State& s, Ctx&, const Argv&) {
  if (!s.cluster) return NoCluster();
  std::map<int, std::vector<std::string>> slots;
  for (const auto& [first, last, owner] : Ranges(s)) {
    slots[owner].push_back(first == last ? std::to_string(first) : absl::StrCat(first, "-", last));
  }
  std::string out;
  for (size_t i = 0; i < s.shards.size(); ++i) {
    const auto& [address, id] = s.shards[i];
    absl::StrAppend(&out, id, " ", address, "@", PortOf(address) + 10000, " ",
                    i == 0 ? "myself,master" : "master", " - 0 0 ", i + 1, " connected");
    for (const std::string& r : slots[static_cast<int>(i)]) absl::StrAppend(&out, " ", r);
    if (i == 0) {
      for (const auto& [slot, target] : s.migrating) {
        absl::StrAppend(&out, " [", slot, "->-", internal::Sha1Hex(absl::StrCat("node:", target)),
                        "]");
      }
    }
    out += "\n";
  }
  return Reply::String(out);
}

Reply ClusterKeySlotCmd(State& s, Ctx&, const Argv& a) {
  if (!s.cluster) return NoCluster();
  return Reply::Integer(internal::KeySlot(a[2]));
}

Reply ClusterInfoCmd(State& s, Ctx&, const Argv&) {
  if (!s.cluster) return NoCluster();
  int64_t assigned = 0;
  for (int16_t o : s.slot_owner) assigned += o >= 0 ? 1 : 0;
  return Reply::String(absl::StrCat("cluster_state:", assigned == kSlots ? "ok" : "fail",
                                    "\r\ncluster_slots_assigned:", assigned,
                                    "\r\ncluster_known_nodes:", s.shards.size(), "\r\n"));
}

// ---- The table -----------------------------------------------------------------------------

std::vector<Spec> BuildTable() {
  constexpr uint32_t kTx = kNoScript | kLoading | kStale | kFast | kImmediate;
  std::vector<Spec> t = {
      {"get", 2, 1, 1, 1, kReadonly | kFast, GetCmd, "@read @string @fast"},
      {"set", -3, 1, 1, 1, kWrite | kDenyOom, SetCmd, "@write @string @slow"},
      {"getrange", 4, 1, 1, 1, kReadonly, GetRangeCmd, "@read @string @slow"},
      {"mget", -2, 1, -1, 1, kReadonly | kFast, MGetCmd, "@read @string @fast"},
      {"del", -2, 1, -1, 1, kWrite, DelCmd, "@keyspace @write @slow"},
      {"unlink", -2, 1, -1, 1, kWrite | kFast, DelCmd, "@keyspace @write @fast"},
      {"exists", -2, 1, -1, 1, kReadonly | kFast, ExistsCmd, "@keyspace @read @fast"},
      {"pexpire", -3, 1, 1, 1, kWrite | kFast, PExpireCmd, "@keyspace @write @fast"},
      {"expire", -3, 1, 1, 1, kWrite | kFast, ExpireCmd, "@keyspace @write @fast"},
      {"pexpireat", -3, 1, 1, 1, kWrite | kFast, PExpireAtCmd, "@keyspace @write @fast"},
      {"expireat", -3, 1, 1, 1, kWrite | kFast, ExpireAtCmd, "@keyspace @write @fast"},
      {"pttl", 2, 1, 1, 1, kReadonly | kFast, PTtlCmd, "@keyspace @read @fast"},
      {"ttl", 2, 1, 1, 1, kReadonly | kFast, TtlCmd, "@keyspace @read @fast"},
      {"persist", 2, 1, 1, 1, kWrite | kFast, PersistCmd, "@keyspace @write @fast"},
      {"type", 2, 1, 1, 1, kReadonly | kFast, TypeCmd, "@keyspace @read @fast"},
      {"incr", 2, 1, 1, 1, kWrite | kDenyOom | kFast, IncrCmd, "@write @string @fast"},
      {"decr", 2, 1, 1, 1, kWrite | kDenyOom | kFast, DecrCmd, "@write @string @fast"},
      {"incrby", 3, 1, 1, 1, kWrite | kDenyOom | kFast, IncrByCmd, "@write @string @fast"},
      {"decrby", 3, 1, 1, 1, kWrite | kDenyOom | kFast, DecrByCmd, "@write @string @fast"},
      {"dbsize", 1, 0, 0, 0, kReadonly | kFast, DbSizeCmd, "@keyspace @read @fast"},
      {"flushall", -1, 0, 0, 0, kWrite, FlushAllCmd, "@keyspace @write @slow @dangerous"},
      {"flushdb", -1, 0, 0, 0, kWrite, FlushDbCmd, "@keyspace @write @slow @dangerous"},
      {"delifeq", 3, 1, 1, 1, kWrite | kFast | kDelifeq, DelIfEqCmd, "@write @string @fast"},
      {"delex", -2, 1, 1, 1, kWrite | kFast | kDelex, DelExCmd, "@write @string @fast"},
      {"zadd", -4, 1, 1, 1, kWrite | kDenyOom | kFast, ZAddCmd, "@write @sortedset @fast"},
      {"zincrby", 4, 1, 1, 1, kWrite | kDenyOom | kFast, ZIncrByCmd, "@write @sortedset @fast"},
      {"zrem", -3, 1, 1, 1, kWrite | kFast, ZRemCmd, "@write @sortedset @fast"},
      {"zscore", 3, 1, 1, 1, kReadonly | kFast, ZScoreCmd, "@read @sortedset @fast"},
      {"zcard", 2, 1, 1, 1, kReadonly | kFast, ZCardCmd, "@read @sortedset @fast"},
      {"zcount", 4, 1, 1, 1, kReadonly | kFast, ZCountCmd, "@read @sortedset @fast"},
      {"zrange", -4, 1, 1, 1, kReadonly, ZRangeCmd, "@read @sortedset @slow"},
      {"zrangebyscore", -4, 1, 1, 1, kReadonly, ZRangeByScoreCmd, "@read @sortedset @slow"},
      {"zremrangebyscore", 4, 1, 1, 1, kWrite, ZRemRangeByScoreCmd, "@write @sortedset @slow"},
      {"multi", 1, 0, 0, 0, kTx, MultiCmd, "@fast @transaction"},
      {"exec", 1, 0, 0, 0, kNoScript | kLoading | kStale | kImmediate, ExecCmd,
       "@slow @transaction"},
      {"discard", 1, 0, 0, 0, kTx, DiscardCmd, "@fast @transaction"},
      {"watch", -2, 1, -1, 1, kTx, WatchCmd, "@fast @transaction"},
      {"unwatch", 1, 0, 0, 0, kNoScript | kLoading | kStale | kFast, UnwatchCmd,
       "@fast @transaction"},
      {"wait", 3, 0, 0, 0, kNoScript, WaitCmd, "@slow @connection"},
      {"waitaof", 4, 0, 0, 0, kNoScript | kNeedsVersion72, WaitAofCmd, "@slow @connection"},
      {"publish", 3, 0, 0, 0, kPubSub | kLoading | kStale | kFast, PublishCmd, "@pubsub @fast"},
      {"subscribe", -2, 0, 0, 0, kPubSub | kNoScript | kLoading | kStale, SubscribeCmd,
       "@pubsub @slow"},
      {"unsubscribe", -1, 0, 0, 0, kPubSub | kNoScript | kLoading | kStale, UnsubscribeCmd,
       "@pubsub @slow"},
      {"ping", -1, 0, 0, 0, kFast | kPubSub, PingCmd, "@fast @connection"},
      {"echo", 2, 0, 0, 0, kLoading | kStale | kFast, EchoCmd, "@fast @connection"},
      {"time", 1, 0, 0, 0, kLoading | kStale | kFast, TimeCmd, "@fast"},
      {"quit", -1, 0, 0, 0, kPubSub | kNoScript | kLoading | kStale | kFast | kImmediate, QuitCmd,
       "@fast @connection"},
      {"select", 2, 0, 0, 0, kLoading | kStale | kFast, SelectCmd, "@fast @connection"},
      {"auth", -2, 0, 0, 0, kNoScript | kLoading | kStale | kFast, AuthCmd, "@fast @connection"},
      {"info", -1, 0, 0, 0, kLoading | kStale, InfoCmd, "@slow @dangerous"},
      {"role", 1, 0, 0, 0, kNoScript | kLoading | kStale | kFast, RoleCmd,
       "@admin @fast @dangerous"},
      {"asking", 1, 0, 0, 0, kFast, AskingCmd, "@fast"},
      {"eval", -3, 0, 0, 0, kNoScript | kStale | kScripting | kEvalKeys, EvalCmd,
       "@slow @scripting"},
      {"evalsha", -3, 0, 0, 0, kNoScript | kStale | kScripting | kEvalKeys, EvalShaCmd,
       "@slow @scripting"},
  };
  Spec script{"script", -2, 0, 0, 0, 0, nullptr, "@slow"};
  script.subcommands = {
      {"script|load", 3, 0, 0, 0, kNoScript | kStale | kScripting, ScriptLoadCmd,
       "@slow @scripting"},
      {"script|exists", -3, 0, 0, 0, kNoScript | kScripting, ScriptExistsCmd, "@slow @scripting"},
      {"script|flush", -2, 0, 0, 0, kNoScript | kScripting, ScriptFlushCmd, "@slow @scripting"},
      {"script|kill", 2, 0, 0, 0, kNoScript | kScripting, ScriptKillCmd, "@slow @scripting"},
  };
  Spec client{"client", -2, 0, 0, 0, 0, nullptr, "@slow"};
  client.subcommands = {
      {"client|setname", 3, 0, 0, 0, kNoScript | kLoading | kStale, ClientSetNameCmd,
       "@slow @connection"},
      {"client|getname", 2, 0, 0, 0, kNoScript | kLoading | kStale, ClientGetNameCmd,
       "@slow @connection"},
  };
  Spec command{"command", -1, 0, 0, 0, kLoading | kStale, CommandAllCmd, "@slow @connection"};
  command.subcommands = {
      {"command|info", -2, 0, 0, 0, kLoading | kStale, CommandInfoCmd, "@slow @connection"},
      {"command|docs", -2, 0, 0, 0, kLoading | kStale, CommandDocsCmd, "@slow @connection"},
      {"command|count", 2, 0, 0, 0, kLoading | kStale, CommandCountCmd, "@slow @connection"},
  };
  Spec cluster{"cluster", -2, 0, 0, 0, 0, nullptr, "@slow"};
  cluster.subcommands = {
      {"cluster|slots", 2, 0, 0, 0, kLoading | kStale, ClusterSlotsCmd, "@slow"},
      {"cluster|myid", 2, 0, 0, 0, kLoading | kStale, ClusterMyIdCmd, "@slow"},
      {"cluster|nodes", 2, 0, 0, 0, kLoading | kStale, ClusterNodesCmd, "@slow"},
      {"cluster|keyslot", 3, 0, 0, 0, kLoading | kStale, ClusterKeySlotCmd, "@slow"},
      {"cluster|info", 2, 0, 0, 0, kLoading | kStale, ClusterInfoCmd, "@slow"},
  };
  t.push_back(std::move(script));
  t.push_back(std::move(client));
  t.push_back(std::move(command));
  t.push_back(std::move(cluster));
  for (size_t i = 0; i < t.size(); ++i) t[i].index = static_cast<int>(i);
  return t;
}

struct CaseLess {
  using is_transparent = void;
  bool operator()(absl::string_view a, absl::string_view b) const {
    const size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
      const char x = absl::ascii_tolower(static_cast<unsigned char>(a[i]));
      const char y = absl::ascii_tolower(static_cast<unsigned char>(b[i]));
      if (x != y) return x < y;
    }
    return a.size() < b.size();
  }
};

const std::map<std::string, const Spec*, CaseLess>& Index() {
  static const auto* index = [] {
    auto* m = new std::map<std::string, const Spec*, CaseLess>();
    for (const Spec& spec : CommandTable()) m->emplace(spec.name, &spec);
    return m;
  }();
  return *index;
}

}  // namespace

const std::vector<Spec>& CommandTable() {
  static const std::vector<Spec>* table = new std::vector<Spec>(BuildTable());
  return *table;
}

const Spec* FindCommand(absl::string_view name) {
  const auto& index = Index();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

const Spec* FindSubcommand(const Spec& container, absl::string_view name) {
  const size_t bar = std::string_view(container.name).size() + 1;
  for (const Spec& sub : container.subcommands) {
    if (IEquals(absl::string_view(sub.name).substr(bar), name)) return &sub;
  }
  return nullptr;
}

bool ArityOk(const Spec& spec, size_t argc) {
  const int64_t n = static_cast<int64_t>(argc);
  return spec.arity > 0 ? n == spec.arity : n >= -spec.arity;
}

std::vector<int> KeyPositions(const Spec& spec, const Argv& argv) {
  std::vector<int> out;
  const int argc = static_cast<int>(argv.size());
  if (spec.flags & kEvalKeys) {
    int64_t numkeys = 0;
    if (argc < 3 || !ParseInt(argv[2], &numkeys) || numkeys < 0 || numkeys > argc - 3) return out;
    for (int i = 0; i < numkeys; ++i) out.push_back(3 + i);
    return out;
  }
  if (spec.first_key <= 0) return out;
  const int last = spec.last_key < 0 ? argc + spec.last_key : spec.last_key;
  for (int i = spec.first_key; i <= last && i < argc; i += std::max(1, spec.step)) {
    out.push_back(i);
  }
  return out;
}

}  // namespace redlock::sim::node_internal
