// The simulated node against a real redis-server (Debian's 7.0), command by
// command: every reply compared, type and value.
//
// Each command goes to both: to the server over its own connection (one
// per simulated connection), and to a sim::Node whose clock is the
// server's (TIME, read just before), so that expiry is judged at the same
// moment. Only what must differ is normalised: TIME's value, INFO's text
// (its sections and run_id line), ROLE's offset, positive TTLs (the
// milliseconds left depend on when each side ran), the flags of COMMAND
// INFO and the text of COMMAND DOCS.
//
// The commands are (a) a fixed corpus of sequences covering every command
// and script the node implements (also on a user without @scripting and on
// a real Redis Cluster during a slot migration), and (b) the traces under
// tests/sim/traces/ (sim/trace.h), replayed with their time gaps when they
// span ten seconds or less. Two of those traces are written by
// WriteExampleTraces below from scripted sequences of the library's
// commands (REDLOCK_SIM_WRITE_TRACES=1 rewrites them); the simulator's
// --trace writes more. Clock jumps cannot be replayed on a real server:
// node_test.cc covers them.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "redlock/fencing.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/sha1.h"
#include "redlock/internal/status_macros.h"
#include "sim/node.h"
#include "sim/trace.h"
#include "testkit/cluster.h"
#include "testkit/fleet.h"
#include "testkit/gtest_fleet.h"
#include "testkit/redis.h"

#ifndef REDLOCK_SIM_TRACES
#error "REDLOCK_SIM_TRACES must name tests/sim/traces"
#endif

namespace redlock::sim {
namespace {

namespace fs = std::filesystem;
using internal::Script;

// ---- Replies and their normal form ------------------------------------------------------------

Reply FromRedis(const testkit::RedisValue& v) {
  switch (v.type) {
    case testkit::RedisValue::Type::kNil:
      return Reply::Nil();
    case testkit::RedisValue::Type::kStatus:
      return Reply::Status(v.str);
    case testkit::RedisValue::Type::kString:
      return Reply::String(v.str);
    case testkit::RedisValue::Type::kInteger:
      return Reply::Integer(v.integer);
    case testkit::RedisValue::Type::kError:
      return Reply::Error(v.str);
    case testkit::RedisValue::Type::kArray: {
      std::vector<Reply> e;
      for (const testkit::RedisValue& x : v.elements) e.push_back(FromRedis(x));
      return Reply::Array(std::move(e));
    }
  }
  return Reply::Nil();
}

bool IsInspect(const Argv& argv) {
  if (argv.size() < 2) return false;
  const std::string cmd = absl::AsciiStrToUpper(argv[0]);
  std::string sha;
  if (cmd == "EVALSHA") sha = absl::AsciiStrToLower(argv[1]);
  if (cmd == "EVAL") sha = internal::Sha1Hex(argv[1]);
  return sha == internal::InspectScript().sha || sha == internal::RwInspectScript().sha;
}

Reply PositiveTtl(const Reply& r) {
  return r.type == Reply::Type::kInteger && r.integer > 0 ? Reply::String("<positive ttl>") : r;
}

// What may differ between a real server and the simulated node, made equal.
Reply Normalize(const Argv& argv, Reply r) {
  if (r.is_error() || argv.empty()) return r;
  const std::string cmd = absl::AsciiStrToUpper(argv[0]);
  const std::string sub = argv.size() > 1 ? absl::AsciiStrToUpper(argv[1]) : "";
  if (cmd == "TIME" && r.type == Reply::Type::kArray && r.elements.size() == 2) {
    return Reply::String("<time>");
  }
  if (cmd == "INFO" && r.type == Reply::Type::kString) {
    std::vector<std::string> sections;
    bool run_id = false;
    for (absl::string_view line : absl::StrSplit(r.str, "\r\n")) {
      if (absl::StartsWith(line, "# ")) sections.emplace_back(line.substr(2));
      run_id = run_id || absl::StartsWith(line, "run_id:");
    }
    return Reply::String(
        absl::StrCat("<info ", absl::StrJoin(sections, ","), run_id ? " run_id" : "", ">"));
  }
  if (cmd == "ROLE" && r.type == Reply::Type::kArray && r.elements.size() == 3) {
    r.elements[1] = Reply::String("<offset>");
    return r;
  }
  if (cmd == "PTTL" || cmd == "TTL") return PositiveTtl(r);
  if (IsInspect(argv) && r.type == Reply::Type::kArray && r.elements.size() >= 2) {
    r.elements[1] = PositiveTtl(r.elements[1]);
    return r;
  }
  if (cmd == "COMMAND" && sub == "INFO" && r.type == Reply::Type::kArray) {
    for (Reply& e : r.elements) {
      if (e.type == Reply::Type::kArray && e.elements.size() >= 6) {
        e = Reply::Array(
            {e.elements[0], e.elements[1], e.elements[3], e.elements[4], e.elements[5]});
      }
    }
    return r;
  }
  if (cmd == "COMMAND" && sub == "DOCS" && r.type == Reply::Type::kArray) {
    std::vector<Reply> names;
    for (size_t i = 0; i < r.elements.size(); i += 2) names.push_back(r.elements[i]);
    return Reply::Array(std::move(names));
  }
  return r;
}

std::string Show(const Reply& r) { return ReplyToJson(r).dump(); }

std::string ShowArgv(const Argv& argv) {
  std::vector<std::string> parts;
  for (const std::string& a : argv) {
    parts.push_back(a.size() > 40 ? absl::StrCat(a.substr(0, 37), "...") : a);
  }
  return absl::StrJoin(parts, " ");
}

// ---- One real server and one simulated node, side by side ------------------------------------

class Pair {
 public:
  Pair(testkit::Fleet* fleet, int index, Node::Config config)
      : fleet_(fleet), index_(index), config_(std::move(config)) {}

  // Both empty, no scripts, no connection.
  absl::Status Reset() {
    real_.clear();
    sim_.clear();
    node_ = std::make_unique<Node>(config_);
    REDLOCK_RETURN_IF_ERROR(Admin({"FLUSHALL"}));
    return Admin({"SCRIPT", "FLUSH"});
  }

  // The server's clock, in ms.
  absl::StatusOr<int64_t> Now() {
    absl::StatusOr<testkit::RedisValue> t = fleet_->Command(index_, {"TIME"});
    if (!t.ok()) return t.status();
    int64_t s = 0, us = 0;
    if (t->elements.size() != 2 || !absl::SimpleAtoi(t->elements[0].str, &s) ||
        !absl::SimpleAtoi(t->elements[1].str, &us)) {
      return absl::InternalError("TIME answered something else");
    }
    return s * 1000 + us / 1000;
  }

  struct Replies {
    Reply real;
    Reply sim;
  };

  // `argv` on connection `conn` of both, with "$NOW+ms" and "$NOWS+s"
  // replaced by the server's time plus ms (in ms) or plus s (in seconds).
  absl::StatusOr<Replies> Run(int64_t conn, Argv argv) {
    absl::StatusOr<int64_t> now = Now();
    if (!now.ok()) return now.status();
    for (std::string& a : argv) {
      int64_t add = 0;
      if (absl::StartsWith(a, "$NOW+") && absl::SimpleAtoi(a.substr(5), &add)) {
        a = std::to_string(*now + add);
      } else if (absl::StartsWith(a, "$NOWS+") && absl::SimpleAtoi(a.substr(6), &add)) {
        a = std::to_string(*now / 1000 + add);
      }
    }
    absl::StatusOr<testkit::RedisConnection*> c = Connection(conn);
    if (!c.ok()) return c.status();
    Result sim = node_->Execute(sim_[conn], argv, *now);
    absl::StatusOr<testkit::RedisValue> real = (*c)->Command(argv);
    if (!real.ok()) return real.status();
    if (sim.block.has_value()) {
      // What the world answers once the timeout passed: this node has no
      // replica (the real server has none either).
      const Block& b = *sim.block;
      const int acked = node_->AckedReplicas(b.offset);
      sim.reply = b.aof ? Reply::Array({Reply::Integer(config_.appendonly ? 1 : 0),
                                        Reply::Integer(node_->FsyncedReplicas(b.offset))})
                        : Reply::Integer(acked);
    }
    return Replies{Normalize(argv, FromRedis(*real)), Normalize(argv, sim.reply)};
  }

  void Disconnect(int64_t conn) {
    real_.erase(conn);
    auto it = sim_.find(conn);
    if (it != sim_.end()) {
      node_->Disconnect(it->second);
      sim_.erase(it);
    }
  }

  // The server restarted without persistence; every connection replaced.
  absl::Status Restart() {
    real_.clear();
    sim_.clear();
    REDLOCK_RETURN_IF_ERROR(fleet_->Restart(index_));
    node_->Restart(false, "");
    return absl::OkStatus();
  }

  Node& node() { return *node_; }

  absl::Status FlushScripts() {
    node_->FlushScripts();
    return Admin({"SCRIPT", "FLUSH"});
  }

 private:
  absl::Status Admin(const std::vector<std::string>& args) {
    absl::StatusOr<testkit::RedisValue> r = fleet_->Command(index_, args);
    if (!r.ok()) return r.status();
    if (r->is_error()) return absl::InternalError(absl::StrCat(args[0], ": ", r->str));
    return absl::OkStatus();
  }

  absl::StatusOr<testkit::RedisConnection*> Connection(int64_t conn) {
    auto it = real_.find(conn);
    if (it != real_.end()) return it->second.get();
    auto c = std::make_unique<testkit::RedisConnection>(fleet_->endpoint(index_));
    absl::Status st = c->Connect(absl::Seconds(2), absl::Seconds(5));
    if (!st.ok()) return st;
    // What the endpoint logged in as, the simulated session is too.
    if (!fleet_->endpoint(index_).username.empty()) {
      Session& s = sim_[conn];
      s.user = fleet_->endpoint(index_).username;
    }
    return real_.emplace(conn, std::move(c)).first->second.get();
  }

  testkit::Fleet* fleet_;
  int index_;
  Node::Config config_;
  std::unique_ptr<Node> node_;
  std::map<int64_t, std::unique_ptr<testkit::RedisConnection>> real_;
  std::map<int64_t, Session> sim_;
};

// ---- The corpus -------------------------------------------------------------------------------

struct Step {
  int64_t conn = 1;
  Argv argv;  // empty: a pause
  int sleep_ms = 0;
};

struct Sequence {
  std::string name;
  std::vector<Step> steps;
};

Step C(Argv argv) { return Step{1, std::move(argv), 0}; }
Step On(int64_t conn, Argv argv) { return Step{conn, std::move(argv), 0}; }
Step Sleep(int ms) { return Step{1, {}, ms}; }

Argv Sha(const Script& s, const std::vector<std::string>& keys,
         const std::vector<std::string>& args) {
  Argv a = {"EVALSHA", s.sha, std::to_string(keys.size())};
  a.insert(a.end(), keys.begin(), keys.end());
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

Argv Eval(const std::string& body, const std::vector<std::string>& keys,
          const std::vector<std::string>& args) {
  Argv a = {"EVAL", body, std::to_string(keys.size())};
  a.insert(a.end(), keys.begin(), keys.end());
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

std::vector<Step> LoadAllScripts() {
  std::vector<Step> steps;
  for (const Script* s : internal::AllScripts()) steps.push_back(C({"SCRIPT", "LOAD", s->body}));
  return steps;
}

std::vector<Sequence> BasicCorpus() {
  std::vector<Sequence> corpus;
  corpus.push_back({"strings",
                    {C({"SET", "k", "v"}),
                     C({"GET", "k"}),
                     C({"SET", "k", "v", "NX"}),
                     C({"SET", "k", "w", "XX"}),
                     C({"SET", "k", "v", "NX", "PX", "10000"}),
                     C({"SET", "n", "v", "XX"}),
                     C({"SET", "k", "v", "XX", "PX", "10000"}),
                     C({"PTTL", "k"}),
                     C({"SET", "k", "w", "KEEPTTL", "GET"}),
                     C({"PTTL", "k"}),
                     C({"SET", "k", "x", "XX"}),
                     C({"PTTL", "k"}),
                     C({"SET", "k", "y", "NX", "GET"}),
                     C({"SET", "n", "y", "NX", "GET"}),
                     C({"SET", "n", "z", "GET"}),
                     C({"SET", "k", "v", "PXAT", "$NOW+5000"}),
                     C({"PTTL", "k"}),
                     C({"SET", "k", "v", "EXAT", "$NOWS+5"}),
                     C({"TTL", "k"}),
                     C({"SET", "k", "v", "PXAT", "1"}),
                     C({"GET", "k"}),
                     C({"SET", "k", "v", "EX", "1", "EX", "20"}),
                     C({"TTL", "k"}),
                     C({"SET", "k", "v", "nx", "px", "100"}),
                     C({"SET", "k", "v", "NX", "XX"}),
                     C({"SET", "k", "v", "PX"}),
                     C({"SET", "k", "v", "KEEPTTL", "PX", "5"}),
                     C({"SET", "k", "v", "EX", "1", "PX", "5"}),
                     C({"SET", "k", "v", "PX", "0"}),
                     C({"SET", "k", "v", "PX", "-5"}),
                     C({"SET", "k", "v", "EX", "9223372036854775"}),
                     C({"SET", "k", "v", "PX", "9223372036854775807"}),
                     C({"SET", "k", "v", "EXAT", "0"}),
                     C({"SET", "k", "v", "PX", "1x"}),
                     C({"SET", "k", "v", "PX", "010"}),
                     C({"SET", "k", "v", "IFEQ", "v"}),
                     C({"SET", "k", "v", "BOGUS"}),
                     C({"SET", "k"}),
                     C({"GET"}),
                     C({"GET", "a", "b"}),
                     C({"GETRANGE", "none", "0", "5"}),
                     C({"GETRANGE", "none", "x", "5"}),
                     C({"SET", "s", "hello"}),
                     C({"GETRANGE", "s", "0", "2"}),
                     C({"GETRANGE", "s", "-3", "-1"}),
                     C({"GETRANGE", "s", "0", "100"}),
                     C({"GETRANGE", "s", "5", "2"}),
                     C({"GETRANGE", "s", "-1", "-5"}),
                     C({"GETRANGE", "s", "-100", "1"}),
                     C({"GETRANGE", "s", "0", "9223372036854775807"}),
                     C({"GETRANGE", "s", "-9223372036854775808", "-1"}),
                     C({"MGET", "s", "none", "k"})}});
  corpus.push_back({"keys and counters",
                    {C({"SET", "a", "1"}),
                     C({"SET", "b", "1"}),
                     C({"EXISTS", "a", "a", "b", "c"}),
                     C({"DEL", "a", "a", "c"}),
                     C({"UNLINK", "b", "x"}),
                     C({"SET", "b", "1"}),
                     C({"PTTL", "a"}),
                     C({"TTL", "b"}),
                     C({"PEXPIRE", "a", "100"}),
                     C({"PEXPIRE", "b", "100000"}),
                     C({"PEXPIRE", "b", "50000", "GT"}),
                     C({"PEXPIRE", "b", "500000", "GT"}),
                     C({"PEXPIRE", "b", "100", "NX"}),
                     C({"PEXPIRE", "b", "100", "XX", "LT"}),
                     C({"PEXPIRE", "b", "100", "NX", "XX"}),
                     C({"PEXPIRE", "b", "100", "GT", "LT"}),
                     C({"PEXPIRE", "b", "100", "FOO"}),
                     C({"PEXPIRE", "b", "abc"}),
                     C({"PEXPIRE", "b", "9223372036854775807"}),
                     C({"EXPIRE", "b", "9223372036854775807"}),
                     C({"PTTL", "b"}),
                     C({"PERSIST", "b"}),
                     C({"PERSIST", "b"}),
                     C({"PTTL", "b"}),
                     C({"EXPIRE", "b", "100"}),
                     C({"TTL", "b"}),
                     C({"PEXPIREAT", "b", "$NOW+100000"}),
                     C({"PTTL", "b"}),
                     C({"EXPIREAT", "b", "$NOWS+100"}),
                     C({"TTL", "b"}),
                     C({"PEXPIRE", "b", "0"}),
                     C({"EXISTS", "b"}),
                     C({"TYPE", "b"}),
                     C({"TYPE", "a"}),
                     C({"DEL"}),
                     C({"EXISTS"}),
                     C({"INCR", "c"}),
                     C({"INCRBY", "c", "41"}),
                     C({"DECRBY", "c", "2"}),
                     C({"DECR", "c"}),
                     C({"INCRBY", "c", "x"}),
                     C({"SET", "c", "9223372036854775806", "PX", "100000"}),
                     C({"INCR", "c"}),
                     C({"INCR", "c"}),
                     C({"GET", "c"}),
                     C({"PTTL", "c"}),
                     C({"SET", "c", "9223372036854775808"}),
                     C({"INCR", "c"}),
                     C({"SET", "c", "007"}),
                     C({"INCR", "c"}),
                     C({"SET", "c", " 1"}),
                     C({"INCR", "c"}),
                     C({"SET", "c", "-0"}),
                     C({"INCR", "c"}),
                     C({"SET", "c", "1.5"}),
                     C({"INCR", "c"}),
                     C({"SET", "c", ""}),
                     C({"INCR", "c"}),
                     C({"DECRBY", "c", "-9223372036854775808"}),
                     C({"SET", "c", "-9223372036854775808"}),
                     C({"DECR", "c"}),
                     C({"INCRBY", "d", "9223372036854775807"}),
                     C({"INCRBY", "d", "1"}),
                     C({"DBSIZE"}),
                     C({"FLUSHDB", "X"}),
                     C({"FLUSHDB"}),
                     C({"DBSIZE"})}});
  corpus.push_back({"sorted sets",
                    {C({"ZADD", "z", "1", "a", "2", "b", "2", "c"}),
                     C({"ZADD", "z", "0.1", "x"}),
                     C({"ZSCORE", "z", "x"}),
                     C({"ZSCORE", "z", "none"}),
                     C({"ZSCORE", "none", "x"}),
                     C({"ZCARD", "z"}),
                     C({"ZCARD", "none"}),
                     C({"ZRANGEBYSCORE", "z", "(1", "+inf"}),
                     C({"ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "2"}),
                     C({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "-1"}),
                     C({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "1"}),
                     C({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0"}),
                     C({"ZRANGEBYSCORE", "z", "-inf", "+inf", "BAD"}),
                     C({"ZRANGEBYSCORE", "z", "5", "1"}),
                     C({"ZRANGEBYSCORE", "none", "-inf", "+inf"}),
                     C({"ZCOUNT", "z", "1", "2"}),
                     C({"ZCOUNT", "z", "(1", "(2"}),
                     C({"ZADD", "z", "XX", "CH", "5", "a", "1", "new"}),
                     C({"ZADD", "z", "GT", "CH", "1", "a"}),
                     C({"ZADD", "z", "LT", "8", "a", "2", "new2"}),
                     C({"ZADD", "z", "INCR", "2", "a"}),
                     C({"ZADD", "z", "NX", "INCR", "2", "a"}),
                     C({"ZADD", "z", "GT", "INCR", "-1", "a"}),
                     C({"ZINCRBY", "z", "1.5", "a"}),
                     C({"ZADD", "z", "XX", "NX", "1", "a"}),
                     C({"ZADD", "z", "GT", "NX", "1", "a"}),
                     C({"ZADD", "z", "INCR", "1", "a", "2", "b"}),
                     C({"ZADD", "z", "nan", "a"}),
                     C({"ZADD", "z", " 1", "a"}),
                     C({"ZADD", "z", "1", "a", "2"}),
                     C({"ZADD", "z", "NX", "1"}),
                     C({"ZADD", "z"}),
                     C({"ZADD", "z", "inf", "i"}),
                     C({"ZSCORE", "z", "i"}),
                     C({"ZADD", "z", "-inf", "j"}),
                     C({"ZADD", "z", "INCR", "+inf", "j"}),
                     C({"ZADD", "z", "1e300", "e"}),
                     C({"ZSCORE", "z", "e"}),
                     C({"ZADD", "z", "1700000000123.5", "h"}),
                     C({"ZSCORE", "z", "h"}),
                     C({"ZADD", "z", "-0", "zero"}),
                     C({"ZSCORE", "z", "zero"}),
                     C({"ZADD", "z", "0x10", "hex"}),
                     C({"ZSCORE", "z", "hex"}),
                     C({"ZRANGEBYSCORE", "z", "a", "b"}),
                     C({"ZREMRANGEBYSCORE", "z", "-inf", "(2"}),
                     C({"ZREMRANGEBYSCORE", "z", "x", "1"}),
                     C({"ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES"}),
                     C({"ZREM", "z", "a", "b", "c", "none"}),
                     C({"ZREMRANGEBYSCORE", "z", "-inf", "+inf"}),
                     C({"EXISTS", "z"}),
                     C({"ZADD", "xx", "XX", "1", "a"}),
                     C({"EXISTS", "xx"}),
                     C({"SET", "str", "v"}),
                     C({"ZADD", "str", "1", "a"}),
                     C({"ZSCORE", "str", "a"}),
                     C({"ZCARD", "str"}),
                     C({"ZREM", "str", "a"}),
                     C({"GET", "z"}),
                     C({"ZADD", "z2", "1", "m"}),
                     C({"GET", "z2"}),
                     C({"GETRANGE", "z2", "0", "1"}),
                     C({"INCR", "z2"}),
                     C({"SET", "z2", "v", "GET"}),
                     C({"TYPE", "z2"}),
                     C({"MGET", "z2"}),
                     C({"SET", "z2", "v"}),
                     C({"TYPE", "z2"})}});
  corpus.push_back(
      {"expiry",
       {C({"SET", "a", "1", "PX", "100"}), C({"SET", "b", "1", "PX", "10000"}),
        C({"SET", "c", "1", "PX", "100"}), C({"PEXPIRE", "c", "10000"}), C({"ZADD", "z", "1", "m"}),
        C({"PEXPIRE", "z", "100"}), Sleep(300), C({"GET", "a"}), C({"EXISTS", "a"}),
        C({"PTTL", "a"}), C({"GET", "b"}), C({"PTTL", "b"}), C({"GET", "c"}), C({"ZCARD", "z"}),
        C({"SET", "a", "2", "NX", "PX", "10000"}), C({"GET", "a"})}});
  corpus.push_back({"transactions",
                    {C({"EXEC"}),
                     C({"DISCARD"}),
                     C({"WATCH", "k"}),
                     C({"MULTI"}),
                     C({"MULTI"}),
                     C({"WATCH", "k"}),
                     C({"SET", "k", "1"}),
                     C({"GET", "k"}),
                     C({"EXEC"}),
                     C({"WATCH", "k"}),
                     On(2, {"SET", "k", "2"}),
                     C({"MULTI"}),
                     C({"SET", "k", "3"}),
                     C({"EXEC"}),
                     C({"GET", "k"}),
                     C({"WATCH", "m"}),
                     On(2, {"DEL", "m"}),
                     C({"MULTI"}),
                     C({"EXEC"}),
                     C({"WATCH", "m"}),
                     On(2, {"SET", "m", "1"}),
                     On(2, {"DEL", "m"}),
                     C({"MULTI"}),
                     C({"EXEC"}),
                     C({"WATCH", "k"}),
                     C({"SET", "k", "4"}),
                     C({"MULTI"}),
                     C({"EXEC"}),
                     C({"WATCH", "k"}),
                     C({"SET", "k", "5"}),
                     C({"UNWATCH"}),
                     C({"MULTI"}),
                     C({"EXEC"}),
                     C({"MULTI"}),
                     C({"SET", "q", "1"}),
                     C({"NOSUCH", "x"}),
                     C({"EXEC"}),
                     C({"GET", "q"}),
                     C({"MULTI"}),
                     C({"GET"}),
                     C({"EXEC"}),
                     C({"MULTI"}),
                     C({"SET", "q", "1", "BAD"}),
                     C({"INCR", "q"}),
                     C({"WAIT", "0", "0"}),
                     C({"WAIT", "5", "0"}),
                     C({"EVAL", "return redis.call('incr', KEYS[1])", "1", "q"}),
                     C({"UNWATCH"}),
                     C({"PING"}),
                     C({"EXEC"}),
                     C({"MULTI"}),
                     C({"INCR", "q"}),
                     C({"DISCARD"}),
                     C({"GET", "q"}),
                     C({"MULTI"}),
                     C({"SELECT", "2"}),
                     C({"SET", "q", "db2"}),
                     C({"EXEC"}),
                     C({"GET", "q"}),
                     C({"SELECT", "0"}),
                     C({"GET", "q"}),
                     C({"WATCH"}),
                     C({"UNWATCH", "x"})}});
  corpus.push_back({"watch and expiry",
                    {C({"SET", "a", "1", "PX", "100"}),
                     C({"WATCH", "a"}),
                     Sleep(250),
                     C({"MULTI"}),
                     C({"EXEC"}),
                     C({"SET", "b", "1", "PX", "100"}),
                     C({"WATCH", "b"}),
                     Sleep(250),
                     C({"GET", "b"}),
                     C({"MULTI"}),
                     C({"EXEC"}),
                     C({"SET", "c", "1", "PX", "100"}),
                     Sleep(250),
                     C({"WATCH", "c"}),
                     C({"GET", "c"}),
                     C({"MULTI"}),
                     C({"EXEC"}),
                     C({"SET", "d", "1", "PX", "100"}),
                     Sleep(250),
                     C({"WATCH", "d"}),
                     On(2, {"GET", "d"}),
                     On(2, {"SET", "d", "2"}),
                     C({"MULTI"}),
                     C({"EXEC"}),
                     C({"SET", "e", "1", "PX", "10000"}),
                     C({"WATCH", "e"}),
                     Sleep(100),
                     C({"MULTI"}),
                     C({"GET", "e"}),
                     C({"EXEC"})}});
  // The library's script-free forms (scriptless.cc): reads under WATCH,
  // then the writes in MULTI ... EXEC.
  corpus.push_back({"script-free transactions",
                    {C({"WATCH", "lock", "fence"}),
                     C({"EXISTS", "lock"}),
                     C({"GETRANGE", "fence", "0", "20"}),
                     C({"MULTI"}),
                     C({"SET", "lock", "tok", "PX", "10000"}),
                     C({"EXEC"}),
                     C({"WATCH", "lock", "fence"}),
                     C({"GETRANGE", "lock", "0", "3"}),
                     C({"GETRANGE", "fence", "0", "20"}),
                     C({"MULTI"}),
                     C({"SET", "fence", "7"}),
                     C({"EXEC"}),
                     C({"WATCH", "lock"}),
                     C({"GETRANGE", "lock", "0", "3"}),
                     On(2, {"SET", "lock", "other", "PX", "10000"}),
                     C({"MULTI"}),
                     C({"PEXPIRE", "lock", "20000"}),
                     C({"EXEC"}),
                     C({"WATCH", "lock"}),
                     C({"GETRANGE", "lock", "0", "5"}),
                     C({"MULTI"}),
                     C({"DEL", "lock"}),
                     C({"PUBLISH", "released:lock", ""}),
                     C({"EXEC"}),
                     C({"WATCH", "lock"}),
                     C({"GETRANGE", "lock", "0", "3"}),
                     C({"UNWATCH"}),
                     C({"GET", "lock"}),
                     C({"PTTL", "lock"}),
                     C({"GETRANGE", "fence", "0", "20"})}});
  return corpus;
}

std::vector<Sequence> ScriptCorpus() {
  const Script& acquire = internal::AcquireSetScript();
  const Script& release = internal::ReleaseScript();
  const Script& release_one = internal::ReleaseOneScript();
  const Script& extend = internal::ExtendScript();
  const Script& fa = internal::FenceAcquireScript();
  const Script& fc = internal::FenceCommitScript();
  const Script& inspect = internal::InspectScript();
  const Script& rread = internal::RwReadAcquireScript();
  const Script& rwrite = internal::RwWriteAcquireScript();
  const Script& rcommit = internal::RwReadCommitScript();
  const Script& rextend = internal::RwReadExtendScript();
  const Script& rrelease = internal::RwReadReleaseScript();
  const Script& rwithdraw = internal::RwWithdrawScript();
  const Script& rinspect = internal::RwInspectScript();
  const Script& sem = internal::SemAcquireScript();
  const std::vector<std::string> rw = {"W", "W:rw:readers", "W:rw:wait"};
  const std::vector<std::string> rwf = {"W", "W:rw:readers", "W:rw:wait", "W:fence"};
  const std::vector<std::string> permits = {"s:permit:0", "s:permit:1", "s:permit:2"};
  const std::vector<std::string> fenced_permits = {"s:permit:0",   "s:permit:1",   "s:permit:2",
                                                   "s:permit:0:f", "s:permit:1:f", "s:permit:2:f"};
  std::vector<Sequence> corpus;

  Argv exists = {"SCRIPT", "EXISTS"};
  for (const Script* x : internal::AllScripts()) exists.push_back(x->sha);
  exists.push_back("0000000000000000000000000000000000000000");
  Sequence lock{"lock scripts", LoadAllScripts()};
  for (Step step : std::vector<Step>{
           C(exists),
           C(Sha(acquire, {"a", "b"}, {"t1", "10000"})),
           C(Sha(acquire, {"c", "b"}, {"t2", "10000"})),
           C(Eval(acquire.body, {"a", "c"}, {"t2", "10000"})),
           C({"EXISTS", "c"}),
           C({"PTTL", "b"}),
           C(Sha(extend, {"a", "b"}, {"t1", "50000"})),
           C({"PTTL", "a"}),
           C(Sha(extend, {"a", "b"}, {"t2", "90000"})),
           C({"SET", "d", "other"}),
           C(Sha(release, {"a", "b", "d"}, {"t1", "ch:"})),
           C({"GET", "d"}),
           C(Sha(acquire, {"a"}, {"t3", "10000"})),
           C(Sha(release, {"a"}, {"t3", ""})),
           C(Sha(acquire, {"a"}, {"t4", "10000"})),
           C(Sha(release_one, {"a"}, {"t4", "released:a"})),
           C(Sha(release_one, {"a"}, {"t4", "released:a"})),
           C(Sha(acquire, {"e"}, {"t5", "100"})),
           Sleep(250),
           C(Sha(extend, {"e"}, {"t5", "1000"})),
           C({"EXISTS", "e"}),
           C(Sha(acquire, {"e"}, {"t6", "10000"})),
           C(Sha(fa, {"a", "b", "fa", "fb"}, {"t1", "10000"})),
           C(Sha(fa, {"c", "b", "fc", "fb"}, {"t2", "10000"})),
           C(Sha(fc, {"a", "b", "fa", "fb"}, {"t1", "7", "9"})),
           C({"MGET", "fa", "fb"}),
           C(Sha(fc, {"a", "b", "fa", "fb"}, {"t1", "6", "10"})),
           C(Sha(fc, {"a", "b", "fa", "fb"}, {"t9", "100", "100"})),
           C({"MGET", "fa", "fb"}),
           C({"SET", "fa", "9223372036854775807"}),
           C(Sha(fc, {"a", "fa"}, {"t1", "9223372036854775808"})),
           C({"GET", "fa"}),
           C(Sha(inspect, {"a", "fa"}, {})),
           C(Sha(inspect, {"none", "nofence"}, {})),
           C({"SET", "fz", std::string(30, '9')}),
           C(Sha(fa, {"z", "fz"}, {"t3", "10000"})),
           C(Eval(fa.body, {"z", "fz"}, {"t3", "10000"})),
           C({"ZADD", "w", "1", "m"}),
           C(Sha(fc, {"w", "fw"}, {"t1", "5"})),
           C(Sha(acquire, {"w"}, {"t1", "5"})),
           C(Sha(release, {"w"}, {"t1", ""})),
           C(Sha(inspect, {"w", "fw"}, {})),
           C(Sha(acquire, {"x"}, {"t1", "0"})),
           C(Sha(acquire, {"x"}, {"t1", "abc"})),
           C({"SCRIPT", "FLUSH"}),
           C(Sha(acquire, {"n"}, {"t", "10000"})),
           C({"EXISTS", "n"}),
           C(Eval(acquire.body, {"n"}, {"t", "10000"})),
           C(Sha(acquire, {"n2"}, {"t", "10000"})),
           C({"EVALSHA", absl::AsciiStrToUpper(acquire.sha), "1", "n3", "t", "10000"}),
           C({"EVALSHA", "abc", "0"}),
           C({"SCRIPT", "EXISTS", acquire.sha, release.sha}),
       }) {
    lock.steps.push_back(std::move(step));
  }
  corpus.push_back(std::move(lock));

  Sequence family{"lock family scripts", LoadAllScripts()};
  for (Step step : std::vector<Step>{
           C(Sha(rread, rw, {"r1", "10000"})),
           C(Sha(rread, rwf, {"r2", "20000"})),
           C({"PTTL", "W:rw:readers"}),
           C({"ZCARD", "W:rw:readers"}),
           C(Sha(rwrite, rw, {"w1", "10000", "waiter1", "5000"})),
           C({"ZCARD", "W:rw:wait"}),
           C(Sha(rread, rw, {"r3", "10000"})),
           C(Sha(rread, rwf, {"r3", "10000"})),
           C(Sha(rinspect, rwf, {})),
           C(Sha(rcommit, {"W:rw:readers", "W:fence"}, {"r2", "5"})),
           C({"GET", "W:fence"}),
           C(Sha(rcommit, {"W:rw:readers", "W:fence"}, {"nobody", "9"})),
           C(Sha(rextend, {"W:rw:readers"}, {"r1", "30000"})),
           C({"PTTL", "W:rw:readers"}),
           C(Sha(rextend, {"W:rw:readers"}, {"nobody", "30000"})),
           C(Sha(rrelease, {"W", "W:rw:readers"}, {"r1", "ch:"})),
           C(Sha(rrelease, {"W", "W:rw:readers"}, {"r2", "ch:"})),
           C(Sha(rrelease, {"W", "W:rw:readers"}, {"r2", "ch:"})),
           C(Sha(rwrite, rwf, {"w1", "10000", "waiter1", "5000"})),
           C({"EXISTS", "W:rw:wait"}),
           C({"GET", "W"}),
           C(Sha(rread, rwf, {"r4", "10000"})),
           C(Sha(rinspect, rwf, {})),
           C({"DEL", "W"}),
           C(Sha(rread, rw, {"rr", "150"})),
           C(Sha(rwrite, rw, {"w2", "10000", "waiter2", "100"})),
           C(Sha(rwithdraw, {"W", "W:rw:wait"}, {"waiter2", "ch:"})),
           C(Sha(rwithdraw, {"W", "W:rw:wait"}, {"waiter2", "ch:"})),
           C(Sha(rwrite, rw, {"w2", "10000", "waiter2", "100"})),
           Sleep(300),
           C(Sha(rcommit, {"W:rw:readers", "W:fence"}, {"rr", "9"})),
           C(Sha(rextend, {"W:rw:readers"}, {"rr", "1000"})),
           C(Sha(rread, rw, {"r5", "10000"})),
           C(Sha(rinspect, rwf, {})),
           C({"SET", "W:rw:readers", "garbage"}),
           C(Sha(rread, rw, {"r6", "10000"})),
           C(Sha(sem, permits, {"t1", "10000", "1", "3"})),
           C(Sha(sem, permits, {"t2", "10000", "1", "3"})),
           C(Sha(sem, permits, {"t3", "10000", "1", "3"})),
           C(Sha(sem, permits, {"t4", "10000", "1", "3"})),
           C({"DEL", "s:permit:2"}),
           C({"SET", "s:permit:2:f", "41"}),
           C(Sha(sem, fenced_permits, {"t5", "10000", "0", "3"})),
           C({"MGET", "s:permit:0", "s:permit:1", "s:permit:2"}),
       }) {
    family.steps.push_back(std::move(step));
  }
  corpus.push_back(std::move(family));

  const std::string fread(FencedReadScript());
  const std::string fwrite(FencedWriteScript());
  corpus.push_back(
      {"fenced store scripts",
       {C(Eval(fwrite, {"data", "fence"}, {"5", "v5"})), C(Eval(fread, {"data", "fence"}, {"5"})),
        C(Eval(fwrite, {"data", "fence"}, {"4", "v4"})), C(Eval(fread, {"data", "fence"}, {"4"})),
        C(Eval(fwrite, {"data", "fence"}, {"x", "v"})),
        C(Eval(fwrite, {"data", "fence"}, {"05", "v"})),
        C(Eval(fwrite, {"data", "fence"}, {"10", "v10"})), C({"GET", "fence"}),
        C({"GET", "data"})}});

  std::vector<Step> lua;
  for (const char* body : {
           "return {1, 'a', {2}, nil, 5}",
           "return {false, true, 3.99, -3.99}",
           "return 9223372036854775807",
           "return -9223372036854775809",
           "return 1e30",
           "return 0/0",
           "return {err='MY code'}",
           "return {ok='fine'}",
           "return {1, {2, 'a'}, {err='in'}}",
           "return redis.error_reply('FOO')",
           "return redis.error_reply('-BAR baz')",
           "return redis.error_reply('STALE x y')",
           "return redis.error_reply()",
           "return redis.status_reply('X')",
           "return redis.status_reply(1)",
           "return redis.sha1hex('')",
           "return redis.call('set', 'k', 0.1)",
           "return redis.call('get', 'k')",
           "redis.call('set','k', 1e20) return redis.call('get','k')",
           "redis.call('set','k', 12345678901234567) return redis.call('get','k')",
           "redis.call('set','k', -0.0) return redis.call('get','k')",
           "redis.call('set','k', 1/0) return redis.call('get','k')",
           "return redis.call('set', 'k', true)",
           "return redis.call('get', 'nokey')",
           "return {redis.call('get', 'nokey'), 5}",
           "return redis.call('SeT', 'k', 'x')",
           "local x = 1\nreturn redis.call('incr', 'k')",
           "return redis.pcall('incr', 'k')",
           "local r = redis.pcall('set', 'k', 'v', 'px', '-1') return r['err']",
           "return redis.call('zadd', 'zz', '1', 'a')",
           "return redis.call('zscore', 'zz', 'a')",
           "return redis.call('get', 'zz')",
           "return y",
           "y = 1",
           "error('boom')",
           "error({err='CUSTOM boom'})",
           "return redis.call('nosuch')",
           "return redis.pcall('nosuch')",
           "return redis.pcall('get', 'a', 'b')",
           "return redis.call('get', {})",
           "return redis.call()",
           "return redis.call('multi')",
           "return redis.call('wait', 0, 0)",
           "return redis.call('script', 'load', 'return 1')",
           "return redis.call('script')",
           "return redis.call('script', 'nosuch')",
           "return redis.call('select', 20)",
           "return redis.call('asking')",
           "return redis.call('ping')",
           "return redis.call('ping', 'x')",
           "return redis.call('echo', 'x')",
           "return redis.call('exists')",
           "return redis.call('publish', 'ch', 'm')",
           "return redis.call('pexpire', 'k', 0)",
           "return redis.REPL_ALL",
           "return redis.replicate_commands()",
           "return redis.set_repl(redis.REPL_ALL)",
           "return redis.log(redis.LOG_WARNING, 'x')",
           "local t = {} t[1]='a' t[3]='c' return t",
           "return #KEYS + #ARGV",
           "return string.format('%d', 3)",
           "return tostring(1700000000123)",
           "return type(unpack)",
           "return type(os)",
           "return type(print)",
           "string.sub = nil",
           "return string.sub('abc', 2)",
           "return redis.call('time')[1] > '0'",
           "x = ",
       }) {
    lua.push_back(C({"EVAL", body, "0"}));
  }
  lua.push_back(C({"EVAL", "return 1"}));
  lua.push_back(C({"EVAL", "return 1", "2", "a"}));
  lua.push_back(C({"EVAL", "return 1", "-1"}));
  lua.push_back(C({"EVAL", "return 1", "01"}));
  lua.push_back(C({"EVAL", "return 1", "x"}));
  lua.push_back(C({"EVAL", "return KEYS[1] .. ARGV[1]", "1", "k", "v"}));
  lua.push_back(C({"EVAL", "return {KEYS[2], ARGV[2]}", "2", "k1", "k2", "a1", "a2"}));
  lua.push_back(C({"EVAL", "redis.call('select', 3) return redis.call('set', 'sk', 'v')", "0"}));
  lua.push_back(C({"GET", "sk"}));
  lua.push_back(C({"SELECT", "3"}));
  lua.push_back(C({"GET", "sk"}));
  lua.push_back(C({"SCRIPT", "LOAD", "x y"}));
  lua.push_back(C({"SCRIPT", "LOAD", "return 1", "x"}));
  lua.push_back(C({"SCRIPT", "LOAD", "return 1"}));
  lua.push_back(C({"SCRIPT", "EXISTS", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "a"}));
  lua.push_back(C({"SCRIPT", "FLUSH", "ASYNC"}));
  lua.push_back(C({"SCRIPT", "FLUSH", "x"}));
  lua.push_back(C({"SCRIPT", "KILL"}));
  lua.push_back(C({"SCRIPT", "NOSUCH"}));
  lua.push_back(C({"SCRIPT"}));
  lua.push_back(C({"SCRIPT", "EXISTS"}));
  corpus.push_back({"lua", std::move(lua)});
  return corpus;
}

std::vector<Sequence> ServerCorpus() {
  std::vector<Sequence> corpus;
  corpus.push_back({"server and connection",
                    {C({"PING"}),
                     C({"PING", "redlock-probe-1"}),
                     C({"PING", ""}),
                     C({"PING", "a", "b"}),
                     C({"ECHO", "x"}),
                     C({"ECHO"}),
                     C({"ECHO", "a", "b"}),
                     C({"TIME"}),
                     C({"TIME", "x"}),
                     C({"SELECT", "1"}),
                     C({"SELECT", "16"}),
                     C({"SELECT", "-1"}),
                     C({"SELECT", "x"}),
                     C({"SELECT", "0", "1"}),
                     C({"SELECT", "0"}),
                     C({"CLIENT", "GETNAME"}),
                     C({"CLIENT", "SETNAME", "redlock"}),
                     C({"CLIENT", "GETNAME"}),
                     C({"CLIENT", "SETNAME", "a b"}),
                     C({"CLIENT", "SETNAME", ""}),
                     C({"CLIENT", "GETNAME"}),
                     C({"CLIENT", "NOSUCH"}),
                     C({"CLIENT"}),
                     C({"ROLE"}),
                     C({"ROLE", "x"}),
                     C({"INFO", "server"}),
                     C({"INFO", "replication"}),
                     C({"INFO", "server", "replication"}),
                     C({"COMMAND", "INFO", "get", "nosuch", "SET", "eval", "waitaof"}),
                     C({"COMMAND", "INFO", "zadd", "mget", "del", "exists", "watch", "wait"}),
                     C({"COMMAND", "DOCS", "nosuch"}),
                     C({"COMMAND", "DOCS", "get"}),
                     C({"COMMAND", "NOSUCH"}),
                     C({"ASKING"}),
                     C({"ASKING", "x"}),
                     C({"CLUSTER", "SLOTS"}),
                     C({"CLUSTER", "MYID"}),
                     C({"FOO", "a", "b"}),
                     C({"FOO"}),
                     C({std::string(200, 'x'), std::string(200, 'y')}),
                     C({"FOO", "line\none", "two\r\nthree"}),
                     C({"SCRIPT", "NO\nSUCH"}),
                     C({"DELIFEQ", "a", "b"}),
                     C({"DELEX", "a"}),
                     C({"WAITAOF", "0", "0", "0"}),
                     C({"WAIT", "0", "0"}),
                     C({"SET", "k", "v"}),
                     C({"WAIT", "0", "0"}),
                     C({"WAIT", "1", "50"}),
                     C({"WAIT", "x", "0"}),
                     C({"WAIT", "1", "x"}),
                     C({"WAIT", "1", "-1"}),
                     C({"WAIT", "0"}),
                     C({"QUIT", "x"})}});
  corpus.push_back({"pub/sub",
                    {On(2, {"SUBSCRIBE", "a"}),
                     On(2, {"SUBSCRIBE", "a"}),
                     On(2, {"PING"}),
                     On(2, {"PING", "redlock-keepalive"}),
                     On(2, {"GET", "a"}),
                     On(2, {"EVAL", "return 1", "0"}),
                     On(2, {"UNSUBSCRIBE", "zz"}),
                     On(2, {"UNSUBSCRIBE", "a"}),
                     On(2, {"UNSUBSCRIBE"}),
                     On(2, {"PING"}),
                     On(2, {"SUBSCRIBE"}),
                     C({"PUBLISH", "a", "m"}),
                     C({"PUBLISH", "a"}),
                     C({"MULTI"}),
                     C({"SUBSCRIBE", "q"}),
                     C({"EXEC"}),
                     C({"GET", "a"}),
                     C({"PING"}),
                     On(3, {"SUBSCRIBE", "b"}),
                     On(4, {"PUBLISH", "b", "m"}),
                     On(4, {"EVAL", "return redis.call('publish', 'b', 'x')", "0"})}});
  return corpus;
}

// ---- Running sequences and traces
// ----------------------------------------------------------------

// Runs `steps` on `pair`; every difference is a test failure naming the
// sequence, the step and both replies.
void RunSteps(const std::string& name, Pair& pair, const std::vector<Step>& steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    if (step.argv.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(step.sleep_ms));
      continue;
    }
    absl::StatusOr<Pair::Replies> r = pair.Run(step.conn, step.argv);
    ASSERT_TRUE(r.ok()) << name << " step " << i << " (" << ShowArgv(step.argv)
                        << "): " << r.status();
    EXPECT_EQ(Show(r->real), Show(r->sim))
        << name << " step " << i << " on connection " << step.conn << ": " << ShowArgv(step.argv)
        << "\n  redis-server: " << Show(r->real) << "\n  simulated:    " << Show(r->sim);
  }
}

class ConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    absl::StatusOr<std::unique_ptr<testkit::Fleet>> f =
        testkit::Fleet::Start({.nodes = 1, .enable_debug = false});
    ASSERT_TRUE(f.ok()) << f.status();
    fleet_ = *std::move(f);
  }

  void RunCorpus(const std::vector<Sequence>& corpus) {
    for (const Sequence& seq : corpus) {
      SCOPED_TRACE(seq.name);
      Pair pair(fleet_.get(), 0, Node::Config{.name = "sim"});
      ASSERT_TRUE(pair.Reset().ok());
      RunSteps(seq.name, pair, seq.steps);
    }
  }

  std::unique_ptr<testkit::Fleet> fleet_;
};

TEST_F(ConformanceTest, StringsKeysSortedSetsExpiryAndTransactions) { RunCorpus(BasicCorpus()); }

TEST_F(ConformanceTest, TheLibrarysScriptsAndLua) { RunCorpus(ScriptCorpus()); }

TEST_F(ConformanceTest, ServerConnectionAndPubSub) { RunCorpus(ServerCorpus()); }

// A user without @scripting (testkit's deny_scripting) and a node with
// Config::scripting_noperm.
TEST(ConformanceNoPermTest, ScriptingRefused) {
  REDLOCK_REQUIRE_REDIS();
  absl::StatusOr<std::unique_ptr<testkit::Fleet>> fleet =
      testkit::Fleet::Start({.nodes = 1, .enable_debug = false, .deny_scripting = {true}});
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  Pair pair(fleet->get(), 0, Node::Config{.name = "sim", .scripting_noperm = true});
  ASSERT_TRUE(pair.Reset().ok());
  const Script& acquire = internal::AcquireSetScript();
  RunSteps("noperm", pair,
           {C({"EVAL", "return 1", "0"}), C({"EVALSHA", acquire.sha, "1", "k", "t", "100"}),
            C({"SCRIPT", "LOAD", acquire.body}), C({"SCRIPT", "EXISTS", acquire.sha}),
            C({"SCRIPT", "FLUSH"}), C({"SCRIPT"}), C({"EVAL", "return 1"}), C({"MULTI"}),
            C({"SET", "k", "v"}), C({"EVAL", "return 1", "0"}), C({"EXEC"}), C({"GET", "k"}),
            C({"SET", "k", "v", "NX", "PX", "10000"}), C({"WATCH", "k"}),
            C({"GETRANGE", "k", "0", "1"}), C({"MULTI"}), C({"DEL", "k"}), C({"EXEC"})});
}

// A real Redis Cluster of two masters and two simulated members with its
// slot map and ids: CLUSTER answers, redirections, and a slot migration
// step by step (ASK, TRYAGAIN, ASKING, then MOVED).
TEST(ConformanceClusterTest, RedirectionsAndAMigration) {
  REDLOCK_REQUIRE_REDIS();
  absl::StatusOr<std::unique_ptr<testkit::Cluster>> cluster =
      testkit::Cluster::Start({.masters = 2, .replicas_per_master = 0});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  testkit::Fleet& fleet = (*cluster)->fleet();
  // The real map and ids, given to the simulated members.
  absl::StatusOr<testkit::RedisValue> slots = fleet.Command(0, {"CLUSTER", "SLOTS"});
  ASSERT_TRUE(slots.ok()) << slots.status();
  std::vector<Node::ClusterPeer> members(2);
  for (int i = 0; i < 2; ++i) {
    members[static_cast<size_t>(i)].address = fleet.address(i);
    absl::StatusOr<testkit::RedisValue> id = fleet.Command(i, {"CLUSTER", "MYID"});
    ASSERT_TRUE(id.ok()) << id.status();
    members[static_cast<size_t>(i)].id = id->str;
  }
  for (const testkit::RedisValue& range : slots->elements) {
    ASSERT_GE(range.elements.size(), 3u);
    const std::string address =
        absl::StrCat(range.elements[2].elements[0].str, ":", range.elements[2].elements[1].integer);
    for (Node::ClusterPeer& m : members) {
      if (m.address == address) {
        m.slots.emplace_back(static_cast<int>(range.elements[0].integer),
                             static_cast<int>(range.elements[1].integer));
      }
    }
  }
  std::vector<std::unique_ptr<Pair>> pairs;
  for (int i = 0; i < 2; ++i) {
    const Node::ClusterPeer& m = members[static_cast<size_t>(i)];
    pairs.push_back(std::make_unique<Pair>(&fleet, i,
                                           Node::Config{.name = absl::StrCat("m", i),
                                                        .slots = m.slots,
                                                        .address = m.address,
                                                        .cluster_id = m.id}));
    ASSERT_TRUE(pairs.back()->Reset().ok());
    pairs.back()->node().SetClusterPeers({members[static_cast<size_t>(1 - i)]});
  }
  Pair& a = *pairs[0];
  Pair& b = *pairs[1];
  auto run = [](const std::string& name, Pair& pair, const std::vector<Step>& steps) {
    RunSteps(name, pair, steps);
  };
  // Keys of member 0's first slot range, and one of member 1's.
  auto key_in = [&](int member, const std::string& suffix) {
    for (int i = 0;; ++i) {
      const std::string tag = absl::StrCat("{t", i, "}");
      const int slot = internal::KeySlot(tag);
      for (const auto& [first, last] : members[static_cast<size_t>(member)].slots) {
        if (slot >= first && slot <= last) return tag + suffix;
      }
    }
  };
  const std::string k1 = key_in(0, "1");
  const std::string k2 = key_in(0, "2");
  const std::string far = key_in(1, "x");
  const int slot = internal::KeySlot(k1);
  const Script& acquire = internal::AcquireSetScript();
  run("cluster answers", a,
      {C({"CLUSTER", "SLOTS"}),
       C({"CLUSTER", "MYID"}),
       C({"CLUSTER", "KEYSLOT", k1}),
       C({"SET", k1, "v1"}),
       C({"SET", k2, "v2", "PX", "100000"}),
       C({"GET", far}),
       C({"SET", far, "v"}),
       C({"DEL", k1, far}),
       C({"EXISTS", k1, k2}),
       C({"SELECT", "1"}),
       C({"SELECT", "0"}),
       C({"ASKING"}),
       C({"GET", k1}),
       C({"SCRIPT", "LOAD", acquire.body}),
       C(Sha(acquire, {far}, {"t", "1000"})),
       C(Sha(acquire, {k1 + "lock"}, {"t", "1000"})),
       C(Eval("return redis.call('get', ARGV[1])", {}, {far})),
       C(Eval("return redis.call('get', KEYS[1])", {k1}, {})),
       C({"WATCH", far}),
       C({"MULTI"}),
       C({"GET", far}),
       C({"EXEC"}),
       C({"MULTI"}),
       C({"GET", k1}),
       C({"GET", k2}),
       C({"EXEC"})});
  // Migrating the slot of k1 and k2 to member 1: k1 moves first.
  ASSERT_TRUE((*cluster)->BeginMigration(slot, 0, 1).ok());
  a.node().BeginMigration(slot, members[1].address);
  b.node().BeginImport(slot);
  absl::StatusOr<testkit::RedisValue> moved =
      fleet.Command(0, {"MIGRATE", fleet.host(1), std::to_string(fleet.port(1)), k1, "0", "5000"});
  ASSERT_TRUE(moved.ok() && !moved->is_error()) << (moved.ok() ? moved->str : "");
  ASSERT_EQ(a.node().MoveKeys(slot, b.node(), 1, 0), 1);
  run("migrating", a,
      {C({"GET", k2}), C({"GET", k1}), C({"EXISTS", k1, k2}), C({"SET", k1, "new"}),
       C({"PTTL", k2}), C({"CLUSTER", "KEYSLOT", k2})});
  run("importing", b,
      {C({"GET", k1}), C({"ASKING"}), C({"GET", k1}), C({"GET", k1}), C({"ASKING"}),
       C({"EXISTS", k1, k2}), C({"ASKING"}), C({"MULTI"}), C({"GET", k1}), C({"EXEC"}),
       C({"GET", far})});
  ASSERT_TRUE((*cluster)->FinishMigration(slot, 0, 1).ok());
  a.node().MoveKeys(slot, b.node(), 100, 0);
  a.node().EndMigration(slot);
  b.node().EndImport(slot);
  run("after", a, {C({"GET", k1}), C({"GET", k2})});
  run("after", b, {C({"GET", k1}), C({"PTTL", k2}), C({"EXISTS", k1, k2})});
}

// ---- Traces ------------------------------------------------------------------------------------

// Whether a plain redis-server 7.0 answers as this node would.
bool Comparable(const Node::Config& c, std::string* why) {
  if (!c.slots.empty()) *why = "a cluster member";
  if (!c.scripting || c.scripting_noperm) *why = "a node without scripting";
  if (c.delifeq || c.set_ifeq || c.delex) *why = "optional commands a 7.0 server lacks";
  if (absl::AsciiStrToLower(c.server_name) != "redis" || !absl::StartsWith(c.version, "7.0")) {
    *why = absl::StrCat("a ", c.server_name, " ", c.version, " server");
  }
  if (c.appendonly) *why = "an append-only node";
  return why->empty();
}

constexpr int64_t kMaxReplaySpanMs = 10'000;

TEST(ConformanceTraceTest, TracesReplayAlike) {
  REDLOCK_REQUIRE_REDIS();
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(REDLOCK_SIM_TRACES, ec)) {
    if (e.path().extension() == ".jsonl") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "no trace under " << REDLOCK_SIM_TRACES;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    absl::StatusOr<Trace> trace = ReadTrace(file.string());
    ASSERT_TRUE(trace.ok()) << trace.status();
    // The nodes, in the order they appear.
    std::vector<std::string> names;
    std::map<std::string, Node::Config> configs;
    for (const TraceNode& n : trace->nodes) {
      if (configs.emplace(n.name, n.config).second) names.push_back(n.name);
    }
    for (const TraceEntry& e : trace->entries) {
      if (configs.emplace(e.node, Node::Config{.name = e.node}).second) names.push_back(e.node);
    }
    std::map<std::string, int> index;
    for (const std::string& n : names) {
      std::string why;
      if (!Comparable(configs[n], &why)) {
        std::cout << file.filename() << ": node " << n << " not replayed: " << why << "\n";
        continue;
      }
      const int i = static_cast<int>(index.size());
      index[n] = i;
    }
    if (index.empty()) continue;
    ASSERT_LE(index.size(), 8u) << "more nodes than this test starts servers for";
    absl::StatusOr<std::unique_ptr<testkit::Fleet>> fleet =
        testkit::Fleet::Start({.nodes = static_cast<int>(index.size()), .enable_debug = false});
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    std::map<std::string, std::unique_ptr<Pair>> pairs;
    for (const auto& [name, i] : index) {
      Node::Config c = configs[name];
      c.replicas = 0;  // the server has none: WAIT answers as without replicas
      pairs[name] = std::make_unique<Pair>(fleet->get(), i, c);
      ASSERT_TRUE(pairs[name]->Reset().ok());
    }
    int64_t first = -1, last = -1;
    for (const TraceEntry& e : trace->entries) {
      if (index.count(e.node) == 0) continue;
      if (first < 0) first = e.now_ms;
      last = std::max(last, e.now_ms);
    }
    const bool timed = last - first <= kMaxReplaySpanMs;
    if (!timed) {
      std::cout << file.filename() << ": spans " << last - first
                << " ms, replayed without its time gaps\n";
    }
    std::map<std::string, bool> diverged;
    int64_t previous = first;
    int compared = 0;
    for (size_t k = 0; k < trace->entries.size(); ++k) {
      const TraceEntry& e = trace->entries[k];
      auto p = pairs.find(e.node);
      if (p == pairs.end() || diverged[e.node]) continue;
      if (timed && e.now_ms > previous) {
        std::this_thread::sleep_for(std::chrono::milliseconds(e.now_ms - previous));
      }
      previous = std::max(previous, e.now_ms);
      Pair& pair = *p->second;
      if (!e.event.empty()) {
        if (e.event == "restart" && !e.keep_data) {
          ASSERT_TRUE(pair.Restart().ok());
        } else if (e.event == "flush_scripts") {
          ASSERT_TRUE(pair.FlushScripts().ok());
        } else if (e.event == "disconnect") {
          pair.Disconnect(e.conn);
        } else {
          // A failover, replication, a restart from disk: not what one
          // plain server can do. The rest of this node is not compared.
          std::cout << file.filename() << ": node " << e.node << " not compared after line "
                    << k + 1 << " (" << e.event << ")\n";
          diverged[e.node] = true;
        }
        continue;
      }
      const std::string cmd = absl::AsciiStrToUpper(e.argv[0]);
      if ((cmd == "WAIT" || cmd == "WAITAOF") && e.argv.size() >= 3) {
        int64_t timeout = -1;
        if (!absl::SimpleAtoi(e.argv.back(), &timeout) || timeout == 0 || timeout > 2000) {
          continue;  // would block the real server for too long
        }
      }
      absl::StatusOr<Pair::Replies> r = pair.Run(e.conn, e.argv);
      ASSERT_TRUE(r.ok()) << "entry " << k + 1 << ": " << r.status();
      ++compared;
      EXPECT_EQ(Show(r->real), Show(r->sim))
          << "entry " << k + 1 << " (node " << e.node << ", connection " << e.conn
          << "): " << ShowArgv(e.argv) << "\n  redis-server: " << Show(r->real)
          << "\n  simulated:    " << Show(r->sim);
    }
    EXPECT_GT(compared, 0);
  }
}

// ---- The example traces ----------------------------------------------------------------------

// Scripted sequences of the commands the library sends, run on simulated
// nodes at simulated times and written as traces. The committed files must
// be what this writes (the node and the writer are deterministic);
// REDLOCK_SIM_WRITE_TRACES=1 rewrites them.
struct TraceScript {
  std::string file;
  std::string text;
};

class Recorder {
 public:
  explicit Recorder(std::ostream* out) : w_(out) {}
  void AddNode(const std::string& name, Node::Config c) {
    c.name = name;
    w_.Node(name, c);
    nodes_[name] = std::make_unique<Node>(c);
  }
  void Run(const std::string& node, int64_t conn, const Argv& argv) {
    Node& n = *nodes_[node];
    Result r = n.Execute(sessions_[{node, conn}], argv, now_);
    if (r.block.has_value()) r.reply = Reply::Integer(n.AckedReplicas(r.block->offset));
    w_.Command(node, conn, now_, argv, r.reply, r.block.has_value());
  }
  void Event(const std::string& node, const std::string& event, bool keep_data = false) {
    TraceEntry e;
    e.node = node;
    e.now_ms = now_;
    e.event = event;
    e.keep_data = keep_data;
    w_.Event(e);
    if (event == "restart") {
      nodes_[node]->Restart(keep_data, "");
      for (auto it = sessions_.begin(); it != sessions_.end();) {
        it = it->first.first == node ? sessions_.erase(it) : std::next(it);
      }
    }
    if (event == "flush_scripts") nodes_[node]->FlushScripts();
  }
  void Advance(int64_t ms) { now_ += ms; }

 private:
  TraceWriter w_;
  int64_t now_ = 1'700'000'000'000;
  std::map<std::string, std::unique_ptr<Node>> nodes_;
  std::map<std::pair<std::string, int64_t>, Session> sessions_;
};

std::vector<TraceScript> ExampleTraces() {
  const Script& acquire = internal::AcquireSetScript();
  const Script& release_one = internal::ReleaseOneScript();
  const Script& release = internal::ReleaseScript();
  const Script& extend = internal::ExtendScript();
  const Script& fa = internal::FenceAcquireScript();
  const Script& fc = internal::FenceCommitScript();
  const Script& inspect = internal::InspectScript();
  const Script& rread = internal::RwReadAcquireScript();
  const Script& rwrite = internal::RwWriteAcquireScript();
  const Script& rrelease = internal::RwReadReleaseScript();
  const Script& sem = internal::SemAcquireScript();
  std::vector<TraceScript> out;
  {
    // Two clients (connections 1 and 2) and a subscriber (3) on two nodes:
    // the handshake, a mutex taken, refused, extended, released with its
    // announcement, taken again with fencing, and a lease left to expire.
    std::ostringstream text;
    text << "# Written by tests/sim/conformance_test.cc (ExampleTraces): a mutex on two nodes\n";
    Recorder r(&text);
    const std::vector<std::string> nodes = {"n0", "n1"};
    for (const std::string& n : nodes) r.AddNode(n, Node::Config{});
    for (const std::string& n : nodes) {
      for (int64_t conn : {1, 2}) {
        r.Run(n, conn, {"INFO", "server"});
        for (const Script* s : internal::AllScripts()) r.Run(n, conn, {"SCRIPT", "LOAD", s->body});
      }
      r.Run(n, 3, {"PING"});
      r.Run(n, 3, {"SUBSCRIBE", "redlock:released:{job}"});
    }
    r.Advance(5);
    for (const std::string& n : nodes) {
      r.Run(n, 1, {"SET", "{job}", "tokA", "NX", "PX", "3000"});
      r.Run(n, 2, {"SET", "{job}", "tokB", "NX", "PX", "3000"});
    }
    r.Advance(200);
    for (const std::string& n : nodes) {
      r.Run(n, 1, Sha(extend, {"{job}"}, {"tokA", "3000"}));
      r.Run(n, 2, Sha(extend, {"{job}"}, {"tokB", "3000"}));
      r.Run(n, 1, {"WAIT", "0", "100"});
      r.Run(n, 3, {"PING", "redlock-keepalive"});
    }
    r.Advance(300);
    for (const std::string& n : nodes) {
      r.Run(n, 1, Sha(release_one, {"{job}"}, {"tokA", "redlock:released:{job}"}));
      r.Run(n, 1, Sha(release_one, {"{job}"}, {"tokA", "redlock:released:{job}"}));
    }
    r.Advance(10);
    for (const std::string& n : nodes) {
      r.Run(n, 2, Sha(fa, {"{job}", "{job}:fence"}, {"tokB", "500"}));
      r.Run(n, 2, Sha(fc, {"{job}", "{job}:fence"}, {"tokB", "1"}));
      r.Run(n, 1, Sha(inspect, {"{job}", "{job}:fence"}, {}));
      r.Run(n, 1, Sha(fa, {"{job}", "{job}:fence"}, {"tokC", "500"}));
    }
    r.Advance(600);  // tokB's lease lapses
    for (const std::string& n : nodes) {
      r.Run(n, 1, Sha(extend, {"{job}"}, {"tokB", "500"}));
      r.Run(n, 1, Sha(fa, {"{job}", "{job}:fence"}, {"tokC", "2000"}));
      r.Run(n, 1, Sha(fc, {"{job}", "{job}:fence"}, {"tokC", "2"}));
      r.Run(n, 2, Sha(release, {"{job}"}, {"tokB", ""}));
      r.Run(n, 1, Sha(release, {"{job}"}, {"tokC", "redlock:released:"}));
      r.Run(n, 1, {"GET", "{job}:fence"});
    }
    out.push_back({"mutex_two_nodes.jsonl", text.str()});
  }
  {
    // One node: the script-free path, the lock family's scripts, NOSCRIPT
    // after a flush and the EVAL fallback, a restart that loses everything.
    std::ostringstream text;
    text << "# Written by tests/sim/conformance_test.cc (ExampleTraces): script-free "
            "transactions, the lock family, NOSCRIPT, a restart\n";
    Recorder r(&text);
    r.AddNode("n0", Node::Config{});
    for (const Script* s : internal::AllScripts()) r.Run("n0", 1, {"SCRIPT", "LOAD", s->body});
    // Script-free acquire and release (scriptless.cc's transactions).
    r.Run("n0", 2, {"WATCH", "{r}", "{r}:fence"});
    r.Run("n0", 2, {"EXISTS", "{r}"});
    r.Run("n0", 2, {"GETRANGE", "{r}:fence", "0", "20"});
    r.Run("n0", 2, {"MULTI"});
    r.Run("n0", 2, {"SET", "{r}", "tok1", "PX", "2000"});
    r.Run("n0", 2, {"EXEC"});
    r.Advance(20);
    r.Run("n0", 1, Sha(acquire, {"{r}"}, {"tok2", "2000"}));
    r.Run("n0", 2, {"WATCH", "{r}"});
    r.Run("n0", 2, {"GETRANGE", "{r}", "0", "4"});
    r.Run("n0", 1, Sha(extend, {"{r}"}, {"tok1", "2000"}));
    r.Run("n0", 2, {"MULTI"});
    r.Run("n0", 2, {"DEL", "{r}"});
    r.Run("n0", 2, {"PUBLISH", "released:{r}", ""});
    r.Run("n0", 2, {"EXEC"});
    r.Run("n0", 2, {"WATCH", "{r}"});
    r.Run("n0", 2, {"GETRANGE", "{r}", "0", "4"});
    r.Run("n0", 2, {"UNWATCH"});
    // The reader-writer lock and the semaphore.
    const std::vector<std::string> rw = {"{d}", "{d}:rw:readers", "{d}:rw:wait", "{d}:fence"};
    r.Run("n0", 1, Sha(rread, rw, {"rd1", "1500"}));
    r.Run("n0", 2, Sha(rwrite, rw, {"wr1", "1500", "waiter-1", "800"}));
    r.Run("n0", 1, Sha(rread, rw, {"rd2", "1500"}));
    r.Advance(100);
    r.Run("n0", 1, Sha(rrelease, {"{d}", "{d}:rw:readers"}, {"rd1", "released:"}));
    r.Run("n0", 2, Sha(rwrite, rw, {"wr1", "1500", "waiter-1", "800"}));
    r.Run("n0", 1, {"PTTL", "{d}"});
    const std::vector<std::string> permits = {"{s}:permit:0", "{s}:permit:1"};
    r.Run("n0", 1, Sha(sem, permits, {"p1", "1000", "0", "2"}));
    r.Run("n0", 2, Sha(sem, permits, {"p2", "1000", "0", "2"}));
    r.Run("n0", 1, Sha(sem, permits, {"p3", "1000", "1", "2"}));
    r.Run("n0", 1, {"MGET", "{s}:permit:0", "{s}:permit:1"});
    // A flushed script cache: NOSCRIPT, then the EVAL form, then reloads.
    r.Event("n0", "flush_scripts");
    r.Run("n0", 1, Sha(acquire, {"{q}"}, {"tok3", "1000"}));
    r.Run("n0", 1, Eval(acquire.body, {"{q}"}, {"tok3", "1000"}));
    r.Run("n0", 1, {"SCRIPT", "LOAD", release_one.body});
    r.Run("n0", 1, Sha(release_one, {"{q}"}, {"tok3", ""}));
    // A restart without persistence: the locks are gone.
    r.Advance(50);
    r.Event("n0", "restart", /*keep_data=*/false);
    r.Run("n0", 1, {"INFO", "server"});
    r.Run("n0", 1, {"EXISTS", "{r}", "{d}", "{s}:permit:0"});
    r.Run("n0", 1, Sha(acquire, {"{r}"}, {"tok4", "1000"}));
    r.Run("n0", 1, {"SET", "{r}", "tok4", "NX", "PX", "1000"});
    out.push_back({"family_scriptless_restart.jsonl", text.str()});
  }
  return out;
}

TEST(ConformanceTraceTest, ExampleTracesAreWhatTheGeneratorWrites) {
  const bool write = std::getenv("REDLOCK_SIM_WRITE_TRACES") != nullptr &&
                     std::string(std::getenv("REDLOCK_SIM_WRITE_TRACES")) == "1";
  for (const TraceScript& t : ExampleTraces()) {
    const fs::path path = fs::path(REDLOCK_SIM_TRACES) / t.file;
    if (write) {
      std::ofstream(path) << t.text;
      continue;
    }
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << path << " is missing: run with REDLOCK_SIM_WRITE_TRACES=1";
    std::stringstream committed;
    committed << in.rdbuf();
    EXPECT_EQ(committed.str(), t.text)
        << path << " differs from what the generator writes now (the node's replies changed?): "
        << "review, then rewrite with REDLOCK_SIM_WRITE_TRACES=1";
  }
}

}  // namespace
}  // namespace redlock::sim
