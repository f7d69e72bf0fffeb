#include "tests/unit/fake_transport.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "redlock/internal/sha1.h"

namespace redlock::testkit {

using internal::Clock;
using internal::Reply;

std::vector<std::string> ParseResp(const std::string& p) {
  std::vector<std::string> out;
  size_t pos = p.find("\r\n");
  size_t i = pos + 2;
  while (i < p.size() && p[i] == '$') {
    size_t eol = p.find("\r\n", i);
    size_t len = std::strtoul(p.c_str() + i + 1, nullptr, 10);
    out.push_back(p.substr(eol + 2, len));
    i = eol + 2 + len + 2;
  }
  return out;
}

std::vector<std::vector<std::string>> ParseRespAll(const std::string& p) {
  std::vector<std::vector<std::string>> out;
  size_t i = 0;
  while (i < p.size() && p[i] == '*') {
    size_t eol = p.find("\r\n", i);
    size_t count = std::strtoul(p.c_str() + i + 1, nullptr, 10);
    i = eol + 2;
    std::vector<std::string> argv;
    for (size_t k = 0; k < count && i < p.size() && p[i] == '$'; ++k) {
      size_t e = p.find("\r\n", i);
      size_t len = std::strtoul(p.c_str() + i + 1, nullptr, 10);
      argv.push_back(p.substr(e + 2, len));
      i = e + 2 + len + 2;
    }
    out.push_back(std::move(argv));
  }
  return out;
}

const FakeNode::Value* FakeNode::Get(const std::string& key, Clock::TimePoint now) {
  auto it = keys.find(key);
  if (it == keys.end()) return nullptr;
  if (it->second.expires.has_value() && *it->second.expires <= now) {
    keys.erase(it);
    return nullptr;
  }
  return &it->second;
}

FakeNode::FakeNode() {
  for (const internal::Script* s : internal::AllScripts()) scripts.insert(s->sha);
}

Reply FakeNode::Execute(const std::vector<std::string>& argv, Clock::TimePoint now,
                        internal::ConnectionId conn) {
  conn_ = conn;
  if (!forced_error.empty()) return Reply::Error(forced_error);
  const std::string& cmd = argv[0];
  if (!refuse_next.empty() && cmd != "WAIT" && cmd != "WAITAOF") {
    std::string error = std::move(refuse_next.front());
    refuse_next.pop_front();
    log.push_back(error.substr(0, error.find(' ')));
    return Reply::Error(std::move(error));
  }
  if (in_multi && cmd != "EXEC" && cmd != "DISCARD" && cmd != "MULTI" && cmd != "WATCH") {
    queued.push_back(argv);
    return Reply::Status("QUEUED");
  }
  if (std::optional<Reply> plain = ExecutePlain(argv, now)) return *std::move(plain);
  if (cmd == "SET") {
    log.push_back("SET");
    // SET key value [NX] [PX ms]
    bool nx = false;
    std::optional<int64_t> px;
    std::optional<std::string> ifeq;  // SET ... IFEQ current (Valkey 8.1, Redis 8.4)
    for (size_t i = 3; i < argv.size(); ++i) {
      if (argv[i] == "NX") nx = true;
      if (argv[i] == "PX" && i + 1 < argv.size()) px = std::atoll(argv[++i].c_str());
      if (argv[i] == "IFEQ" && i + 1 < argv.size()) ifeq = argv[++i];
    }
    if (nx && Get(argv[1], now) != nullptr) return Reply::Nil();
    if (ifeq.has_value()) {
      const Value* cur = Get(argv[1], now);
      if (cur == nullptr || cur->data != *ifeq) return Reply::Nil();  // never creates it
    }
    Value v;
    v.data = argv[2];
    if (px.has_value()) v.expires = now + std::chrono::milliseconds(*px);
    keys[argv[1]] = v;
    Wrote();
    return Reply::Status("OK");
  }
  if (cmd == "PING") return Reply::Status("PONG");
  if (cmd == "WAIT") {
    log.push_back("WAIT");
    const bool unacked =
        conn_ == 0 ? unacknowledged : unacked_connections.count(conn_) > 0 && replica_stalled;
    return Reply::Integer(unacked ? 0 : replicas);
  }
  if (cmd == "WAITAOF" && knows_waitaof) {
    log.push_back("WAITAOF");
    if (!appendonly && argv[1] != "0") {
      return Reply::Error(
          "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
    }
    return Reply::Array({Reply::Integer(appendonly ? 1 : 0), Reply::Integer(replicas)});
  }
  if (cmd == "SCRIPT" && argv.size() == 3 && argv[1] == "LOAD") {
    log.push_back("SCRIPT LOAD");
    for (const internal::Script* s : internal::AllScripts()) {
      if (argv[2] == s->body) scripts.insert(s->sha);
    }
    return Reply::String(internal::Sha1Hex(argv[2]));
  }
  if (cmd != "EVALSHA" && cmd != "EVAL") return Reply::Error("ERR unknown command");
  const internal::Script* script = nullptr;
  for (const internal::Script* s : internal::AllScripts()) {
    if ((cmd == "EVALSHA" && argv[1] == s->sha && scripts.count(s->sha) > 0) ||
        (cmd == "EVAL" && argv[1] == s->body)) {
      script = s;
    }
  }
  if (script == nullptr) {
    log.push_back("NOSCRIPT");
    return Reply::Error("NOSCRIPT No matching script. Please use EVAL.");
  }
  scripts.insert(script->sha);
  log.push_back(script->name);
  // What a script changes reaches a stalled replica never (a read-only one
  // changes nothing; the others are counted as writes).
  // A script counts as a write only if it changed the dataset (Redis
  // replicates a script's effects; one that wrote nothing moves no offset).
  const std::map<std::string, Value> keys_before = keys;
  const auto zsets_before = zsets;
  const auto fair_before = fair;
  Reply reply = ExecuteScript(*script, argv, now);
  if (keys != keys_before || zsets != zsets_before || fair != fair_before) Wrote();
  return reply;
}

Reply FakeNode::ExecuteScript(const internal::Script& script_ref,
                              const std::vector<std::string>& argv, Clock::TimePoint now) {
  const internal::Script* script = &script_ref;
  size_t numkeys = std::strtoul(argv[2].c_str(), nullptr, 10);
  std::vector<std::string> k(argv.begin() + 3, argv.begin() + 3 + static_cast<long>(numkeys));
  std::vector<std::string> a(argv.begin() + 3 + static_cast<long>(numkeys), argv.end());
  auto wrongtype = [] {
    return Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value");
  };
  auto holds = [&](const std::string& key, const std::string& token, bool* wrong) {
    const Value* v = Get(key, now);
    if (v != nullptr && v->is_list) *wrong = true;
    return v != nullptr && !v->is_list && v->data == token;
  };
  std::string name = script->name;
  if (std::optional<Reply> family = ExecuteFamily(name, k, a, now)) return *std::move(family);
  if (std::optional<Reply> fair_reply = ExecuteFair(name, k, a, now)) {
    return *std::move(fair_reply);
  }
  if (name == "acquire" || name == "fence-acquire") {
    size_t n = name == "acquire" ? k.size() : k.size() / 2;
    for (size_t i = 0; i < n; ++i) {
      if (Get(k[i], now) != nullptr) {
        return name == "acquire" ? Reply::Integer(-static_cast<int64_t>(i + 1))
                                 : Reply::Array({Reply::Integer(-static_cast<int64_t>(i + 1))});
      }
    }
    for (size_t i = 0; i < n; ++i) {
      Value v;
      v.data = a[0];
      v.expires = now + std::chrono::milliseconds(std::atoll(a[1].c_str()));
      keys[k[i]] = v;
    }
    if (name == "acquire") return Reply::Integer(1);
    std::vector<Reply> out = {Reply::Integer(1)};
    for (size_t i = 0; i < n; ++i) {
      const Value* c = Get(k[n + i], now);
      out.push_back(Reply::String(c == nullptr ? "0" : c->data));
    }
    return Reply::Array(std::move(out));
  }
  if (name == "release" || name == "release-one") {
    int64_t deleted = 0;
    for (const auto& key : k) {
      bool wrong = false;
      if (holds(key, a[0], &wrong)) {
        keys.erase(key);
        ++deleted;
      }
      if (wrong) return wrongtype();
    }
    return Reply::Integer(deleted);
  }
  if (name == "extend") {
    for (const auto& key : k) {
      bool wrong = false;
      bool h = holds(key, a[0], &wrong);
      if (wrong) return wrongtype();
      if (!h) return Reply::Integer(0);
    }
    for (const auto& key : k)
      keys[key].expires = now + std::chrono::milliseconds(std::atoll(a[1].c_str()));
    return Reply::Integer(1);
  }
  if (name == "fence-commit") {
    size_t n = k.size() / 2;
    for (size_t i = 0; i < n; ++i) {
      bool wrong = false;
      if (!holds(k[i], a[0], &wrong)) return wrong ? wrongtype() : Reply::Integer(0);
    }
    for (size_t i = 0; i < n; ++i) {
      const Value* c = Get(k[n + i], now);
      uint64_t cur = 0, want = 0;
      if (c != nullptr) (void)absl::SimpleAtoi(c->data, &cur);
      (void)absl::SimpleAtoi(a[i + 1], &want);
      if (cur < want) keys[k[n + i]] = Value{a[i + 1], std::nullopt, false};
    }
    Wrote();  // the script sets every counter, raised or not
    return Reply::Integer(1);
  }
  if (name == "inspect") {
    const Value* v = Get(k[0], now);
    const Value* c = Get(k[1], now);
    int64_t pttl =
        v == nullptr
            ? -2
            : (v->expires ? std::chrono::duration_cast<std::chrono::milliseconds>(*v->expires - now)
                                .count()
                          : -1);
    return Reply::Array({Reply::String(v == nullptr ? "" : v->data), Reply::Integer(pttl),
                         Reply::String(c == nullptr ? "0" : c->data)});
  }
  return Reply::Error("ERR script not modelled");
}

std::optional<Reply> FakeNode::ExecutePlain(const std::vector<std::string>& argv,
                                            Clock::TimePoint now) {
  const std::string& cmd = argv[0];
  auto snapshot = [&](const std::string& key) -> std::optional<Value> {
    const Value* v = Get(key, now);
    if (v == nullptr) return std::nullopt;
    return *v;
  };
  auto same = [](const std::optional<Value>& a, const std::optional<Value>& b) {
    if (a.has_value() != b.has_value()) return false;
    return !a.has_value() ||
           (a->data == b->data && a->expires == b->expires && a->is_list == b->is_list);
  };
  if (cmd == "WATCH") {
    log.push_back("WATCH");
    ++watches;
    for (size_t i = 1; i < argv.size(); ++i) watched.emplace(argv[i], snapshot(argv[i]));
    return Reply::Status("OK");
  }
  if (cmd == "UNWATCH") {
    log.push_back("UNWATCH");
    watched.clear();
    return Reply::Status("OK");
  }
  if (cmd == "MULTI") {
    log.push_back("MULTI");
    if (in_multi) return Reply::Error("ERR MULTI calls can not be nested");
    in_multi = true;
    queued.clear();
    return Reply::Status("OK");
  }
  if (cmd == "EXEC") {
    log.push_back("EXEC");
    if (!in_multi) return Reply::Error("ERR EXEC without MULTI");
    in_multi = false;
    bool dirty = false;
    for (const auto& [key, value] : watched) dirty = dirty || !same(value, snapshot(key));
    watched.clear();
    std::vector<std::vector<std::string>> run;
    run.swap(queued);
    if (dirty) {
      ++exec_aborts;
      return Reply::Nil();
    }
    ++execs;
    std::vector<Reply> out;
    for (const auto& a : run) out.push_back(Execute(a, now, conn_));
    return Reply::Array(std::move(out));
  }
  if (cmd == "EXISTS") {
    int64_t n = 0;
    for (size_t i = 1; i < argv.size(); ++i) n += Get(argv[i], now) != nullptr ? 1 : 0;
    return Reply::Integer(n);
  }
  if (cmd == "GET") {
    const Value* v = Get(argv[1], now);
    return v == nullptr ? Reply::Nil() : Reply::String(v->data);
  }
  if (cmd == "GETRANGE") {
    const Value* v = Get(argv[1], now);
    if (v == nullptr) return Reply::String("");
    const size_t end = static_cast<size_t>(std::atoll(argv[3].c_str()));
    return Reply::String(v->data.substr(0, end + 1));
  }
  if (cmd == "PTTL") {
    const Value* v = Get(argv[1], now);
    if (v == nullptr) return Reply::Integer(-2);
    if (!v->expires) return Reply::Integer(-1);
    return Reply::Integer(
        std::chrono::duration_cast<std::chrono::milliseconds>(*v->expires - now).count());
  }
  if (cmd == "DEL") {
    log.push_back("DEL");
    int64_t n = 0;
    for (size_t i = 1; i < argv.size(); ++i) {
      if (Get(argv[i], now) != nullptr) {
        keys.erase(argv[i]);
        ++n;
      }
    }
    if (n > 0) Wrote();
    return Reply::Integer(n);
  }
  if (cmd == "PEXPIRE") {
    log.push_back("PEXPIRE");
    if (Get(argv[1], now) == nullptr) return Reply::Integer(0);
    keys[argv[1]].expires = now + std::chrono::milliseconds(std::atoll(argv[2].c_str()));
    Wrote();
    return Reply::Integer(1);
  }
  if (cmd == "PUBLISH") {
    published.push_back(argv[1]);
    return Reply::Integer(0);
  }
  if (cmd == "DELIFEQ") {
    log.push_back("DELIFEQ");
    const Value* v = Get(argv[1], now);
    if (v == nullptr || v->data != argv[2]) return Reply::Integer(0);
    keys.erase(argv[1]);
    Wrote();
    return Reply::Integer(1);
  }
  return std::nullopt;
}

std::map<std::string, int64_t>& FakeNode::Live(const std::string& key, Clock::TimePoint now) {
  std::map<std::string, int64_t>& z = zsets[key];
  const int64_t ms = NowMs(now);
  for (auto it = z.begin(); it != z.end();) it = it->second <= ms ? z.erase(it) : std::next(it);
  return z;
}

std::optional<Reply> FakeNode::ExecuteFamily(const std::string& name,
                                             const std::vector<std::string>& k,
                                             const std::vector<std::string>& a,
                                             Clock::TimePoint now) {
  const int64_t ms = NowMs(now);
  auto counter = [&](const std::string& key) {
    const Value* c = Get(key, now);
    return Reply::String(c == nullptr ? "0" : c->data);
  };
  // The integer form, or the fencing form with a counter key.
  auto answer = [&](int64_t v, size_t fenced_keys, const std::string& counter_key) {
    if (k.size() != fenced_keys) return Reply::Integer(v);
    if (v < 0) return Reply::Array({Reply::Integer(v)});
    return Reply::Array({Reply::Integer(v), counter(counter_key)});
  };
  auto raise = [&](const std::string& key, const std::string& want) {
    const Value* c = Get(key, now);
    uint64_t cur = 0, w = 0;
    if (c != nullptr) (void)absl::SimpleAtoi(c->data, &cur);
    (void)absl::SimpleAtoi(want, &w);
    if (cur < w) keys[key] = Value{want, std::nullopt, false};
  };
  if (name == "rw-read-acquire") {
    if (Get(k[0], now) != nullptr) return answer(-1, 4, "");
    if (!Live(k[2], now).empty()) return answer(-2, 4, "");
    Live(k[1], now)[a[0]] = ms + std::atoll(a[1].c_str());
    return answer(1, 4, k.size() == 4 ? k[3] : "");
  }
  if (name == "rw-write-acquire") {
    if (Get(k[0], now) == nullptr && Live(k[1], now).empty()) {
      Value v;
      v.data = a[0];
      v.expires = now + std::chrono::milliseconds(std::atoll(a[1].c_str()));
      keys[k[0]] = v;
      Live(k[2], now).erase(a[2]);
      return answer(1, 4, k.size() == 4 ? k[3] : "");
    }
    const int64_t intent = std::atoll(a[3].c_str());
    if (intent > 0) Live(k[2], now)[a[2]] = ms + intent;
    return answer(-1, 4, "");
  }
  if (name == "rw-read-commit") {
    auto& z = Live(k[0], now);
    if (z.count(a[0]) == 0) return Reply::Integer(0);
    raise(k[1], a[1]);
    Wrote();  // the script sets the counter, raised or not
    return Reply::Integer(1);
  }
  if (name == "rw-read-extend") {
    auto& z = Live(k[0], now);
    auto it = z.find(a[0]);
    if (it == z.end()) return Reply::Integer(0);
    it->second = ms + std::atoll(a[1].c_str());
    return Reply::Integer(1);
  }
  if (name == "rw-read-release") {
    auto& z = Live(k[1], now);
    int64_t n = static_cast<int64_t>(z.erase(a[0]));
    if (n > 0 && !a[1].empty() && z.empty()) published.push_back(a[1] + k[0]);
    return Reply::Integer(n);
  }
  if (name == "rw-withdraw") {
    auto& z = Live(k[1], now);
    int64_t n = static_cast<int64_t>(z.erase(a[0]));
    if (n > 0 && !a[1].empty() && z.empty() && Get(k[0], now) == nullptr) {
      published.push_back(a[1] + k[0]);
    }
    return Reply::Integer(n);
  }
  if (name == "sem-acquire") {
    const int64_t permits = std::atoll(a[3].c_str());
    const int64_t first = std::atoll(a[2].c_str());
    for (int64_t j = 0; j < permits; ++j) {
      const int64_t i = (first + j) % permits;
      const std::string& key = k[static_cast<size_t>(i)];
      if (Get(key, now) != nullptr) continue;
      Value v;
      v.data = a[0];
      v.expires = now + std::chrono::milliseconds(std::atoll(a[1].c_str()));
      keys[key] = v;
      if (static_cast<int64_t>(k.size()) == 2 * permits) {
        return Reply::Array({Reply::Integer(i + 1), counter(k[static_cast<size_t>(permits + i)])});
      }
      return Reply::Array({Reply::Integer(i + 1)});
    }
    return Reply::Array({Reply::Integer(0)});
  }
  return std::nullopt;
}

std::vector<std::string> FakeNode::FairOrder(const std::string& queue_key, Clock::TimePoint now) {
  std::vector<std::pair<uint64_t, std::string>> live;
  const int64_t ms = NowMs(now);
  for (const auto& [id, place] : fair[queue_key]) {
    if (place.expires_ms > ms) live.emplace_back(place.ticket, id);
  }
  std::sort(live.begin(), live.end());
  std::vector<std::string> out;
  for (auto& e : live) out.push_back(std::move(e.second));
  return out;
}

// The scripts as fair_scripts.cc writes them, on `fair` (the queue and its
// expiries as one map, keyed by the queue key k[1]).
std::optional<Reply> FakeNode::ExecuteFair(const std::string& name,
                                           const std::vector<std::string>& k,
                                           const std::vector<std::string>& a,
                                           Clock::TimePoint now) {
  if (name.rfind("fair-", 0) != 0) return std::nullopt;
  const int64_t ms = NowMs(now);
  auto& places = fair[k[1]];
  auto head = [&]() -> std::string {
    std::vector<std::string> order = FairOrder(k[1], now);
    return order.empty() ? "" : order[0];
  };
  // Expired places go; true when that changed the head.
  auto purge = [&] {
    std::string before;
    std::pair<uint64_t, std::string> least{UINT64_MAX, ""};
    for (const auto& [id, p] : places) least = std::min(least, std::make_pair(p.ticket, id));
    before = least.second;
    bool any = false;
    for (auto it = places.begin(); it != places.end();) {
      if (it->second.expires_ms <= ms) {
        it = places.erase(it);
        any = true;
      } else {
        ++it;
      }
    }
    return any && head() != before;
  };
  auto wake = [&](const std::string& prefix, const std::string& me) {
    if (prefix.empty() || Get(k[0], now) != nullptr) return;
    const std::string h = head();
    if (!h.empty() && h != me) published.push_back(prefix + k[0] + ":" + h);
  };
  auto max_ticket = [&] {
    uint64_t m = 0;
    for (const auto& [id, p] : places) m = std::max(m, p.ticket);
    return Reply::String(std::to_string(m));
  };
  auto grant = [&] {
    Value v;
    v.data = a[0];
    v.expires = now + std::chrono::milliseconds(std::atoll(a[1].c_str()));
    keys[k[0]] = v;
    if (k.size() == 4) {
      const Value* c = Get(k[3], now);
      return Reply::Array(
          {Reply::Integer(1), max_ticket(), Reply::String(c == nullptr ? "0" : c->data)});
    }
    return Reply::Array({Reply::Integer(1), max_ticket()});
  };
  auto refuse = [&](int64_t code) { return Reply::Array({Reply::Integer(code), max_ticket()}); };
  if (name == "fair-probe") {
    if (purge()) wake(a[2], "");
    if (Get(k[0], now) != nullptr) return refuse(-1);
    if (!places.empty()) return refuse(-2);
    return grant();
  }
  if (name == "fair-register") {
    const bool changed = purge();
    uint64_t ticket = 0;
    (void)absl::SimpleAtoi(a[4], &ticket);
    places[a[3]] = FairPlace{ticket, ms + std::atoll(a[5].c_str())};
    if (Get(k[0], now) != nullptr) return refuse(-1);
    if (head() != a[3]) {
      if (changed) wake(a[2], a[3]);
      return refuse(-2);
    }
    return grant();
  }
  if (name == "fair-acquire") {
    const bool changed = purge();
    if (Get(k[0], now) != nullptr) return refuse(-1);
    if (head() != a[3]) {
      if (changed) wake(a[2], a[3]);
      return refuse(places.count(a[3]) > 0 ? -2 : -3);
    }
    return grant();
  }
  if (name == "fair-refresh") {
    const bool changed = purge();
    const std::string& id = a[1];
    const int64_t place_ms = std::atoll(a[3].c_str());
    int64_t code = 0;
    if (places.count(id) > 0) {
      places[id].expires_ms = ms + place_ms;
      code = 1;
    } else if (a[4] == "1") {
      uint64_t ticket = 0;
      (void)absl::SimpleAtoi(a[2], &ticket);
      places[id] = FairPlace{ticket, ms + place_ms};
      code = 2;
    }
    if (changed) wake(a[0], id);
    const bool free = Get(k[0], now) == nullptr && head() == id;
    return Reply::Array({Reply::Integer(code), Reply::Integer(free ? 1 : 0)});
  }
  if (name == "fair-release") {
    const std::string& token = a[0];
    const size_t dot = token.rfind('.');
    const std::string id = dot == std::string::npos ? "" : token.substr(dot + 1);
    int64_t deleted = 0;
    const Value* v = Get(k[0], now);
    if (v != nullptr && v->data == token) {
      keys.erase(k[0]);
      deleted = 1;
    }
    if (a[2] == "release") {
      if (!id.empty()) places.erase(id);
      purge();
      wake(a[1], "");
    } else if (deleted == 1) {
      purge();
      wake(a[1], id);
    }
    return Reply::Integer(deleted);
  }
  if (name == "fair-leave") {
    const std::string& id = a[0];
    const bool was = head() == id;
    const int64_t n = static_cast<int64_t>(places.erase(id));
    if (n > 0) {
      const bool changed = purge();
      if (was || changed) wake(a[1], id);
    }
    return Reply::Integer(n);
  }
  if (name == "fair-inspect") {
    const Value* v = Get(k[0], now);
    int64_t pttl = -2;
    if (v != nullptr) {
      pttl = v->expires
                 ? std::chrono::duration_cast<std::chrono::milliseconds>(*v->expires - now).count()
                 : -1;
    }
    std::vector<Reply> entries;
    const std::vector<std::string> order = FairOrder(k[1], now);
    for (const std::string& id : order) {
      const FairPlace& p = places[id];
      entries.push_back(Reply::String(id));
      entries.push_back(Reply::String(std::to_string(p.ticket)));
      entries.push_back(Reply::String(std::to_string(p.expires_ms - ms)));
    }
    return Reply::Array({Reply::String(v == nullptr ? "" : v->data), Reply::Integer(pttl),
                         Reply::Integer(static_cast<int64_t>(order.size())),
                         Reply::Array(std::move(entries))});
  }
  return Reply::Error("ERR fair script not modelled");
}

FakeTransport::FakeTransport(int nodes, FakeClock* clock)
    : clock_(clock),
      nodes_(static_cast<size_t>(nodes)),
      pending_(static_cast<size_t>(nodes)),
      down_(static_cast<size_t>(nodes), false) {
  for (int i = 0; i < nodes; ++i) {
    names_.push_back(absl::StrCat("fake", i, ":6379"));
    connection_.push_back(static_cast<internal::ConnectionId>(i + 1));
  }
}

internal::ConnectionId FakeTransport::Send(int node, const internal::Command& command,
                                           internal::NodeCallback done) {
  ++sent_by_op_[command.op];
  const size_t i = static_cast<size_t>(node);
  const bool follows = command.after != 0 && command.after == connection_[i];
  if (stopping_ && !follows) {
    // Never inline: queue as a cancelled completion for the next Answer.
    pending_[i].push_back(Pending{{}, {}, 0, "cancelled", std::move(done)});
    return 0;
  }
  if ((down_[i] && !follows) || (command.pinned && !follows)) {
    pending_[i].push_back(Pending{{}, {}, 0, "refused", std::move(done)});
    return 0;
  }
  Pending p{ParseResp(command.payload), {}, connection_[i], command.op, std::move(done)};
  if (command.replies > 1) p.batch = ParseRespAll(command.payload);
  pending_[i].push_back(std::move(p));
  return connection_[i];
}

void FakeTransport::Reconnect(int node, bool executed) {
  const size_t i = static_cast<size_t>(node);
  connection_[i] += 1000;
  if (executed) {
    ExecuteSilently(node);
  } else {
    TimeOutAll(node);
  }
}

std::vector<NodeHealth> FakeTransport::Health() const {
  std::vector<NodeHealth> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    NodeHealth h;
    h.node = names_[i];
    h.address = names_[i];
    h.connected = !down_[i];
    h.breaker_open = down_[i];
    h.in_flight = pending_[i].size();
    out.push_back(std::move(h));
  }
  return out;
}

int FakeTransport::sent_count(const std::string& op) const {
  auto it = sent_by_op_.find(op);
  return it == sent_by_op_.end() ? 0 : it->second;
}

void FakeTransport::Complete(internal::NodeCallback& done, absl::StatusOr<Reply> r) {
  ++in_callback_;
  done(std::move(r));
  --in_callback_;
}

bool FakeTransport::AnswerOne(int node) {
  auto& q = pending_[static_cast<size_t>(node)];
  if (q.empty()) return false;
  Pending p = std::move(q.front());
  q.pop_front();
  if (p.op == "cancelled") {
    Complete(p.done, absl::CancelledError("the client is shutting down"));
    return true;
  }
  if (p.op == "refused") {
    Complete(p.done, absl::UnavailableError("not connected (node marked down)"));
    return true;
  }
  Complete(p.done, Run(node, p));
  return true;
}

Reply FakeTransport::Run(int node, const Pending& p) {
  FakeNode& n = nodes_[static_cast<size_t>(node)];
  if (p.batch.empty()) return n.Execute(p.argv, clock_->Now(), p.conn);
  std::vector<Reply> out;
  for (const auto& argv : p.batch) out.push_back(n.Execute(argv, clock_->Now(), p.conn));
  return Reply::Array(std::move(out));
}

void FakeTransport::AnswerAll(int node) {
  for (int guard = 0; guard < 100000 && AnswerOne(node); ++guard) {
  }
}

void FakeTransport::ExecuteSilently(int node) {
  auto& q = pending_[static_cast<size_t>(node)];
  std::deque<Pending> batch;
  batch.swap(q);
  for (auto& p : batch) {
    if (p.op != "cancelled" && p.op != "refused") (void)Run(node, p);
    Complete(p.done, absl::UnavailableError("no reply within 50ms"));
  }
}

void FakeTransport::TimeOutAll(int node) {
  auto& q = pending_[static_cast<size_t>(node)];
  std::deque<Pending> batch;
  batch.swap(q);
  for (auto& p : batch) Complete(p.done, absl::UnavailableError("no reply within 50ms"));
}

void FakeTransport::AnswerEverything() {
  for (int round = 0; round < 1000; ++round) {
    bool any = false;
    for (int i = 0; i < size(); ++i) {
      if (!pending_[static_cast<size_t>(i)].empty()) {
        any = true;
        AnswerAll(i);
      }
    }
    if (!any) return;
  }
}

internal::Transport::TimerId FakeTransport::RunAfter(absl::Duration delay,
                                                     absl::AnyInvocable<void()> fn) {
  TimerId id = next_timer_++;
  timers_.emplace(std::make_pair(clock_->Now() + absl::ToChronoNanoseconds(delay), id),
                  std::move(fn));
  return id;
}

bool FakeTransport::Cancel(TimerId id) {
  for (auto it = timers_.begin(); it != timers_.end(); ++it) {
    if (it->first.second == id) {
      timers_.erase(it);
      return true;
    }
  }
  return false;
}

void FakeTransport::Advance(absl::Duration d) {
  clock_->Advance(d);
  for (int guard = 0;
       guard < 100000 && !timers_.empty() && timers_.begin()->first.first <= clock_->Now();
       ++guard) {
    auto fn = std::move(timers_.begin()->second);
    timers_.erase(timers_.begin());
    ++in_callback_;
    fn();
    --in_callback_;
  }
}

void FakeTransport::Shutdown() {
  if (stopping_) return;
  stopping_ = true;
  for (int round = 0; round < 100; ++round) {
    auto due = std::move(timers_);
    timers_.clear();
    for (auto& [key, fn] : due) {
      ++in_callback_;
      fn();
      --in_callback_;
    }
    bool any = false;
    for (int i = 0; i < size(); ++i) {
      auto& q = pending_[static_cast<size_t>(i)];
      while (!q.empty()) {
        any = true;
        Pending p = std::move(q.front());
        q.pop_front();
        Complete(p.done, absl::CancelledError("the client is shutting down"));
      }
    }
    if (!any && timers_.empty()) return;
  }
}

}  // namespace redlock::testkit
