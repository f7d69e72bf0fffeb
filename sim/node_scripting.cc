// sim/node_scripting.cc: EVAL, EVALSHA and SCRIPT on a simulated node: the
// node's script cache, and scripts run as written in the thread's Lua
// interpreter (sim/lua_engine.h) with redis.call bound to this node.

#include <unordered_map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/sha1.h"
#include "sim/lua_engine.h"
#include "sim/node_state.h"

namespace redlock::sim::node_internal {
namespace {

constexpr char kNoScriptError[] = "NOSCRIPT No matching script. Please use EVAL.";
// Valkey without its Lua engine (the module unloaded).
constexpr char kNoEngine[] = "ERR Could not find scripting engine 'lua'";

class Host final : public ScriptHost {
 public:
  Host(State& state, Ctx& ctx) : state_(state), ctx_(ctx) {}
  Reply Call(const Argv& argv, std::string* refusal) override {
    return state_.ScriptCall(ctx_, argv, refusal);
  }

 private:
  State& state_;
  Ctx& ctx_;
};

// The SHA-1 of a body, remembered: every connection loads the same scripts
// (a handshake) and EVAL sends the same bodies again. The cache is the
// thread's, bounded, and changes no reply.
std::string ShaOf(const std::string& body) {
  thread_local std::unordered_map<std::string, std::string> cache;
  auto it = cache.find(body);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 1024) cache.clear();
  std::string sha = internal::Sha1Hex(body);
  cache.emplace(body, sha);
  return sha;
}

// EVAL's numkeys, checked as Redis does; false with *error set otherwise.
bool NumKeys(const Argv& a, int* numkeys, Reply* error) {
  int64_t n = 0;
  if (!ParseInt(a[2], &n)) {
    *error = NotInteger();
    return false;
  }
  if (n > static_cast<int64_t>(a.size()) - 3) {
    *error = Err("Number of keys can't be greater than number of args");
    return false;
  }
  if (n < 0) {
    *error = Err("Number of keys can't be negative");
    return false;
  }
  *numkeys = static_cast<int>(n);
  return true;
}

// Adds `body` to the cache (compiling it); "" or the error reply's text.
std::string Load(State& s, const std::string& sha, const std::string& body) {
  if (s.scripts.count(sha) > 0) return "";
  if (!s.config.scripting) return kNoEngine;
  std::string error = LuaEngine::ForThisThread().Compile(sha, body);
  if (!error.empty()) return "ERR " + error;
  s.scripts.emplace(sha, body);
  return "";
}

}  // namespace

Reply State::RunScript(Ctx& ctx, const std::string& sha, const std::string& body, const Argv& argv,
                       int numkeys) {
  ++other_counts[sha];
  Ctx script = ctx;
  script.script = true;
  Host host(*this, script);
  return LuaEngine::ForThisThread().Run(sha, body, argv, numkeys, &host);
}

Reply EvalCmd(State& s, Ctx& ctx, const Argv& a) {
  int numkeys = 0;
  Reply error;
  if (!NumKeys(a, &numkeys, &error)) return error;
  const std::string sha = ShaOf(a[1]);
  std::string refused = Load(s, sha, a[1]);
  if (!refused.empty()) return Reply::Error(std::move(refused));
  return s.RunScript(ctx, sha, a[1], a, numkeys);
}

Reply EvalShaCmd(State& s, Ctx& ctx, const Argv& a) {
  if (a[1].size() != 40) return Reply::Error(kNoScriptError);
  int numkeys = 0;
  Reply error;
  if (!NumKeys(a, &numkeys, &error)) return error;
  const std::string sha = absl::AsciiStrToLower(a[1]);
  auto it = s.scripts.find(sha);
  if (it == s.scripts.end()) return Reply::Error(kNoScriptError);
  // The entry outlives the run: a script cannot flush the cache (SCRIPT is
  // refused from scripts).
  return s.RunScript(ctx, sha, it->second, a, numkeys);
}

Reply ScriptLoadCmd(State& s, Ctx&, const Argv& a) {
  const std::string sha = ShaOf(a[2]);
  std::string refused = Load(s, sha, a[2]);
  if (!refused.empty()) return Reply::Error(std::move(refused));
  return Reply::String(sha);
}

Reply ScriptExistsCmd(State& s, Ctx&, const Argv& a) {
  std::vector<Reply> out;
  for (size_t i = 2; i < a.size(); ++i) {
    out.push_back(Reply::Integer(s.scripts.count(absl::AsciiStrToLower(a[i])) > 0 ? 1 : 0));
  }
  return Reply::Array(std::move(out));
}

Reply ScriptFlushCmd(State& s, Ctx&, const Argv& a) {
  if (a.size() == 3 && !IEquals(a[2], "sync") && !IEquals(a[2], "async")) {
    return Err("SCRIPT FLUSH only support SYNC|ASYNC option");
  }
  if (a.size() > 3) return Err("SCRIPT FLUSH only support SYNC|ASYNC option");
  s.scripts.clear();
  return Ok();
}

Reply ScriptKillCmd(State&, Ctx&, const Argv&) {
  return Reply::Error("NOTBUSY No scripts in execution right now.");
}

}  // namespace redlock::sim::node_internal
