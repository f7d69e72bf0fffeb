// sim/lua_engine.h: the Lua 5.1 interpreter the simulated nodes run scripts
// in, with Redis 7.0's script environment and reply conversions.
//
// One interpreter per thread serves every node of that thread: a script is
// compiled once (by SHA-1) however many nodes load it, and each node keeps
// its own script cache (which SHA-1s it knows) on its side. The environment
// is the one Redis 7.0 gives EVAL: KEYS and ARGV; `redis.call`,
// `redis.pcall`, `redis.error_reply`, `redis.status_reply`,
// `redis.sha1hex`, `redis.log` (a no-op) and the replication constants; the
// base, string, table and math libraries without the file functions,
// `print`, `math.random` and the heap's measures (`collectgarbage`,
// `gcinfo`: the interpreter is shared, a reply must not depend on what other
// nodes ran); read-only globals and library tables. Not
// there: cjson, bit, struct, cmsgpack (the library's scripts use none), RESP3
// (`redis.setresp`), script flags (`#!lua flags=...`), script timeouts (a
// script that runs more than kMaxInstructions Lua instructions is stopped
// with an error instead: every run of the simulator ends).
//
// Thread-compatible: use an engine from the thread it belongs to.

#ifndef REDLOCK_SIM_LUA_ENGINE_H_
#define REDLOCK_SIM_LUA_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/node.h"

struct lua_State;

namespace redlock::sim {

// What redis.call reaches: the node running the script.
class ScriptHost {
 public:
  virtual ~ScriptHost() = default;
  // Runs one command for the script. When the node refuses it before it
  // runs (an unknown command, a wrong arity, a command scripts may not
  // call), sets *refusal to Redis's text (without the "ERR " code) and the
  // reply is ignored; an error reply of the command itself is a reply.
  virtual Reply Call(const Argv& argv, std::string* refusal) = 0;
};

class LuaEngine {
 public:
  static constexpr int64_t kMaxInstructions = 50'000'000;

  // The calling thread's engine.
  static LuaEngine& ForThisThread();

  LuaEngine();
  ~LuaEngine();
  LuaEngine(const LuaEngine&) = delete;
  LuaEngine& operator=(const LuaEngine&) = delete;

  // Compiles `body` (its SHA-1 is `sha`) unless already done. Returns "" or
  // Redis's error text ("Error compiling script (new function): ...",
  // without the "ERR " code).
  std::string Compile(const std::string& sha, const std::string& body);

  // Runs the script `sha` (compiling `body` first if this thread has not)
  // with KEYS = argv[3 .. 3+numkeys) and ARGV the rest, its redis.call going
  // to `host`. Returns the script's reply, converted as Redis converts it.
  Reply Run(const std::string& sha, const std::string& body, const Argv& argv, int numkeys,
            ScriptHost* host);

 private:
  struct Call;
  static int RedisCall(lua_State* L);
  static int RedisPCall(lua_State* L);
  static int CallCommon(lua_State* L, bool raise);
  static int ErrorHandler(lua_State* L);

  lua_State* L_ = nullptr;
  std::unordered_map<std::string, int> functions_;  // SHA-1 -> registry ref (never iterated)
  ScriptHost* host_ = nullptr;
  Argv call_argv_;  // reused by redis.call
};

}  // namespace redlock::sim

#endif  // REDLOCK_SIM_LUA_ENGINE_H_
