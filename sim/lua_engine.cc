// sim/lua_engine.cc: Redis 7.0's scripting environment over liblua5.1.
//
// Lua raises errors with longjmp (Debian's liblua5.1 is built as C): every
// function here that Lua may leave by an error keeps no C++ object with a
// destructor alive at that point (the work that needs them is done in a
// helper that returns before the error is raised).

#include "sim/lua_engine.h"

#include <cstdio>
#include <cstring>
#include <lua5.1/lua.hpp>

#include "redlock/internal/sha1.h"

namespace redlock::sim {
namespace {

constexpr int kHookEvery = 10000;
thread_local int64_t instructions = 0;

// An error table {err = text}, as Redis's luaPushError builds it.
void PushErrorTable(lua_State* L, const char* text, size_t len) {
  lua_newtable(L);
  lua_pushlstring(L, text, len);
  lua_setfield(L, -2, "err");
}

// Redis's error_reply/luaPushErrorBuff: "-CODE msg" keeps its code, a text
// without a leading '-' or without a space gets ERR.
void PushCodedError(lua_State* L, const std::string& text) {
  std::string code = "ERR";
  std::string msg;
  if (!text.empty() && text[0] == '-') {
    const size_t space = text.find(' ');
    if (space == std::string::npos) {
      msg = text.substr(1);
    } else {
      code = text.substr(1, space - 1);
      msg = text.substr(space + 1);
    }
  } else {
    msg = text;
  }
  while (!msg.empty() && (msg.back() == '\r' || msg.back() == '\n')) msg.pop_back();
  while (!msg.empty() && (msg.front() == '\r' || msg.front() == '\n')) msg.erase(0, 1);
  const std::string final_text = code + " " + msg;
  PushErrorTable(L, final_text.data(), final_text.size());
}

// Newlines would break the protocol: Redis turns them into spaces.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return s;
}

void PushReply(lua_State* L, const Reply& r) {
  lua_checkstack(L, 4);
  switch (r.type) {
    case Reply::Type::kInteger:
      lua_pushnumber(L, static_cast<lua_Number>(r.integer));
      return;
    case Reply::Type::kString:
      lua_pushlstring(L, r.str.data(), r.str.size());
      return;
    case Reply::Type::kStatus:
      lua_newtable(L);
      lua_pushlstring(L, r.str.data(), r.str.size());
      lua_setfield(L, -2, "ok");
      return;
    case Reply::Type::kError:
      PushErrorTable(L, r.str.data(), r.str.size());
      return;
    case Reply::Type::kArray:
      lua_createtable(L, static_cast<int>(r.elements.size()), 0);
      for (size_t i = 0; i < r.elements.size(); ++i) {
        PushReply(L, r.elements[i]);
        lua_rawseti(L, -2, static_cast<int>(i + 1));
      }
      return;
    case Reply::Type::kNil:
    default:
      lua_pushboolean(L, 0);
      return;
  }
}

// A Lua number as an integer reply: C's (long long) cast, as x86 does it
// (out of range and NaN give the smallest integer).
int64_t LuaInteger(lua_Number d) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return INT64_MIN;
  return static_cast<int64_t>(d);
}

// A table that contains itself would recurse for ever: Redis stops where
// Lua's stack ends; this stops at a fixed depth.
constexpr int kMaxReplyDepth = 1000;

Reply ToReply(lua_State* L, int index, int depth = 0) {
  if (depth > kMaxReplyDepth || !lua_checkstack(L, 4)) {
    return Reply::Error("ERR reached lua stack limit");
  }
  if (index < 0) index = lua_gettop(L) + index + 1;
  switch (lua_type(L, index)) {
    case LUA_TSTRING: {
      size_t len = 0;
      const char* s = lua_tolstring(L, index, &len);
      return Reply::String(std::string(s, len));
    }
    case LUA_TBOOLEAN:
      return lua_toboolean(L, index) ? Reply::Integer(1) : Reply::Nil();
    case LUA_TNUMBER:
      return Reply::Integer(LuaInteger(lua_tonumber(L, index)));
    case LUA_TTABLE: {
      lua_pushliteral(L, "err");
      lua_rawget(L, index);
      if (lua_type(L, -1) == LUA_TSTRING) {
        size_t len = 0;
        const char* s = lua_tolstring(L, -1, &len);
        Reply r = Reply::Error(OneLine(std::string(s, len)));
        lua_pop(L, 1);
        return r;
      }
      lua_pop(L, 1);
      lua_pushliteral(L, "ok");
      lua_rawget(L, index);
      if (lua_type(L, -1) == LUA_TSTRING) {
        size_t len = 0;
        const char* s = lua_tolstring(L, -1, &len);
        Reply r = Reply::Status(OneLine(std::string(s, len)));
        lua_pop(L, 1);
        return r;
      }
      lua_pop(L, 1);
      std::vector<Reply> elements;
      for (int j = 1;; ++j) {
        lua_rawgeti(L, index, j);
        if (lua_isnil(L, -1)) {
          lua_pop(L, 1);
          break;
        }
        elements.push_back(ToReply(L, -1, depth + 1));
        lua_pop(L, 1);
      }
      return Reply::Array(std::move(elements));
    }
    default:
      return Reply::Nil();
  }
}

// The reply of a script that raised an error (the handler's table on top).
Reply ErrorReply(lua_State* L, const std::string& sha) {
  if (!lua_istable(L, -1)) {
    const char* s = lua_tostring(L, -1);
    return Reply::Error(OneLine(std::string("ERR Error running script: ") + (s ? s : "?")));
  }
  // Raw reads: outside the protected call, a metamethod of the script's
  // error object must not run.
  lua_pushliteral(L, "err");
  lua_rawget(L, -2);
  if (lua_type(L, -1) != LUA_TSTRING) {
    // An error object without a message: Redis 7.0 answers nil.
    lua_pop(L, 1);
    return Reply::Nil();
  }
  std::string text = lua_tostring(L, -1);
  lua_pop(L, 1);
  lua_pushliteral(L, "source");
  lua_rawget(L, -2);
  lua_pushliteral(L, "line");
  lua_rawget(L, -3);
  if (lua_type(L, -2) == LUA_TSTRING && lua_isnumber(L, -1)) {
    char line[32];
    snprintf(line, sizeof(line), "%lld", static_cast<long long>(lua_tonumber(L, -1)));
    text += " script: " + sha + ", on " + lua_tostring(L, -2) + ":" + line + ".";
  }
  lua_pop(L, 2);
  return Reply::Error(OneLine(std::move(text)));
}

int ReadonlyNewIndex(lua_State* L) { return luaL_error(L, "Attempt to modify a readonly table"); }

int GlobalIndex(lua_State* L) {
  const char* name = lua_tostring(L, 2);
  return luaL_error(L, "Script attempted to access nonexistent global variable '%s'",
                    name != nullptr ? name : "?");
}

void Hook(lua_State* L, lua_Debug*) {
  instructions += kHookEvery;
  if (instructions > LuaEngine::kMaxInstructions) {
    luaL_error(L, "simulated node: the script ran more than %d instructions (a busy script)",
               static_cast<int>(LuaEngine::kMaxInstructions));
  }
}

// ---- redis.* helpers that do not reach the node ----

int ErrorReplyFn(lua_State* L) {
  if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
    PushCodedError(L, "wrong number or type of arguments");
    return 1;
  }
  size_t len = 0;
  const char* s = lua_tolstring(L, -1, &len);
  {
    std::string text(s, len);
    if (text.empty() || text[0] != '-') text.insert(0, "-");
    PushCodedError(L, text);
  }
  return 1;
}

int StatusReplyFn(lua_State* L) {
  if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
    PushCodedError(L, "wrong number or type of arguments");
    return 1;
  }
  lua_newtable(L);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "ok");
  return 1;
}

// Fills `hex` (41 bytes) with the SHA-1 of the argument; false on a bad call.
bool Sha1Of(lua_State* L, char* hex) {
  if (lua_gettop(L) != 1 || !lua_isstring(L, 1)) return false;
  size_t len = 0;
  const char* s = lua_tolstring(L, 1, &len);
  const std::string sha = internal::Sha1Hex(absl::string_view(s, len));
  memcpy(hex, sha.data(), 40);
  hex[40] = '\0';
  return true;
}

int Sha1HexFn(lua_State* L) {
  char hex[41];
  if (!Sha1Of(L, hex)) return luaL_error(L, "wrong number of arguments");
  lua_pushlstring(L, hex, 40);
  return 1;
}

int NoOp(lua_State*) { return 0; }
int ReturnTrue(lua_State* L) {
  lua_pushboolean(L, 1);
  return 1;
}
int ReturnFalse(lua_State* L) {
  lua_pushboolean(L, 0);
  return 1;
}

// Replaces global table `name` by an empty proxy whose reads go to it and
// whose writes fail: scripts of one node cannot change what another runs.
void Protect(lua_State* L, const char* name) {
  lua_getglobal(L, name);  // the table
  lua_newtable(L);         // the proxy
  lua_newtable(L);         // its metatable
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ReadonlyNewIndex);
  lua_setfield(L, -2, "__newindex");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_setglobal(L, name);
  lua_pop(L, 1);
}

}  // namespace

LuaEngine& LuaEngine::ForThisThread() {
  thread_local LuaEngine engine;
  return engine;
}

LuaEngine::LuaEngine() {
  L_ = luaL_newstate();
  const struct {
    const char* name;
    lua_CFunction open;
  } libs[] = {{"", luaopen_base},
              {LUA_TABLIBNAME, luaopen_table},
              {LUA_STRLIBNAME, luaopen_string},
              {LUA_MATHLIBNAME, luaopen_math}};
  for (const auto& lib : libs) {
    lua_pushcfunction(L_, lib.open);
    lua_pushstring(L_, lib.name);
    lua_call(L_, 1, 0);
  }
  // No files, no output; and nothing that measures the interpreter's heap,
  // which other nodes' scripts have used too (replies must not depend on
  // what ran before).
  for (const char* name : {"dofile", "loadfile", "print", "collectgarbage", "gcinfo"}) {
    lua_pushnil(L_);
    lua_setglobal(L_, name);
  }
  lua_getglobal(L_, "math");
  for (const char* name : {"random", "randomseed"}) {
    lua_pushnil(L_);
    lua_setfield(L_, -2, name);
  }
  lua_pop(L_, 1);

  lua_newtable(L_);
  lua_pushlightuserdata(L_, this);
  lua_pushcclosure(L_, RedisCall, 1);
  lua_setfield(L_, -2, "call");
  lua_pushlightuserdata(L_, this);
  lua_pushcclosure(L_, RedisPCall, 1);
  lua_setfield(L_, -2, "pcall");
  const struct {
    const char* name;
    lua_CFunction fn;
  } fns[] = {{"error_reply", ErrorReplyFn},
             {"status_reply", StatusReplyFn},
             {"sha1hex", Sha1HexFn},
             {"log", NoOp},
             {"set_repl", NoOp},
             {"replicate_commands", ReturnTrue},
             {"breakpoint", ReturnFalse},
             {"debug", NoOp}};
  for (const auto& f : fns) {
    lua_pushcfunction(L_, f.fn);
    lua_setfield(L_, -2, f.name);
  }
  const struct {
    const char* name;
    int value;
  } constants[] = {{"LOG_DEBUG", 0},   {"LOG_VERBOSE", 1},  {"LOG_NOTICE", 2},
                   {"LOG_WARNING", 3}, {"REPL_NONE", 0},    {"REPL_AOF", 1},
                   {"REPL_SLAVE", 2},  {"REPL_REPLICA", 2}, {"REPL_ALL", 3}};
  for (const auto& c : constants) {
    lua_pushinteger(L_, c.value);
    lua_setfield(L_, -2, c.name);
  }
  lua_setglobal(L_, "redis");

  for (const char* name : {"redis", "string", "table", "math"}) Protect(L_, name);
  // Strings' methods ("x"):sub() go through the protected string table too.
  lua_pushliteral(L_, "");
  lua_getmetatable(L_, -1);
  lua_getglobal(L_, "string");
  lua_setfield(L_, -2, "__index");
  lua_pushboolean(L_, 0);
  lua_setfield(L_, -2, "__metatable");
  lua_pop(L_, 2);
  // Read-only globals: a script may neither create one nor read a missing one.
  lua_newtable(L_);
  lua_pushcfunction(L_, GlobalIndex);
  lua_setfield(L_, -2, "__index");
  lua_pushcfunction(L_, ReadonlyNewIndex);
  lua_setfield(L_, -2, "__newindex");
  lua_pushboolean(L_, 0);
  lua_setfield(L_, -2, "__metatable");
  lua_setmetatable(L_, LUA_GLOBALSINDEX);

  lua_pushcfunction(L_, ErrorHandler);
  lua_setfield(L_, LUA_REGISTRYINDEX, "sim_error_handler");
  lua_sethook(L_, Hook, LUA_MASKCOUNT, kHookEvery);
}

LuaEngine::~LuaEngine() {
  if (L_ != nullptr) lua_close(L_);
}

std::string LuaEngine::Compile(const std::string& sha, const std::string& body) {
  if (functions_.count(sha) > 0) return "";
  if (luaL_loadbuffer(L_, body.data(), body.size(), "@user_script") != 0) {
    const char* msg = lua_tostring(L_, -1);
    std::string error =
        OneLine(std::string("Error compiling script (new function): ") + (msg ? msg : "?"));
    lua_pop(L_, 1);
    return error;
  }
  functions_.emplace(sha, luaL_ref(L_, LUA_REGISTRYINDEX));
  return "";
}

Reply LuaEngine::Run(const std::string& sha, const std::string& body, const Argv& argv, int numkeys,
                     ScriptHost* host) {
  auto it = functions_.find(sha);
  if (it == functions_.end()) {
    std::string error = Compile(sha, body);
    if (!error.empty()) return Reply::Error("ERR " + error);
    it = functions_.find(sha);
  }
  lua_settop(L_, 0);
  lua_getfield(L_, LUA_REGISTRYINDEX, "sim_error_handler");
  lua_rawgeti(L_, LUA_REGISTRYINDEX, it->second);
  const size_t first_key = 3;
  const size_t first_arg = first_key + static_cast<size_t>(numkeys);
  const struct {
    const char* name;
    size_t from;
    size_t to;
  } arrays[] = {{"KEYS", first_key, first_arg}, {"ARGV", first_arg, argv.size()}};
  for (const auto& a : arrays) {
    lua_pushstring(L_, a.name);
    lua_createtable(L_, static_cast<int>(a.to - a.from), 0);
    for (size_t i = a.from; i < a.to; ++i) {
      lua_pushlstring(L_, argv[i].data(), argv[i].size());
      lua_rawseti(L_, -2, static_cast<int>(i - a.from + 1));
    }
    lua_rawset(L_, LUA_GLOBALSINDEX);
  }
  host_ = host;
  instructions = 0;
  const int rc = lua_pcall(L_, 0, 1, 1);
  host_ = nullptr;
  Reply r = rc == 0 ? ToReply(L_, -1) : ErrorReply(L_, sha);
  lua_settop(L_, 0);
  return r;
}

int LuaEngine::ErrorHandler(lua_State* L) {
  lua_Debug ar;
  bool have = lua_getstack(L, 1, &ar) && lua_getinfo(L, "nSl", &ar);
  if (have && strcmp(ar.what, "C") == 0) {
    have = lua_getstack(L, 2, &ar) && lua_getinfo(L, "nSl", &ar);
  }
  if (!lua_istable(L, 1)) {
    const char* what = nullptr;
    switch (lua_type(L, 1)) {
      case LUA_TSTRING:
      case LUA_TNUMBER:
        what = lua_tostring(L, 1);
        break;
      case LUA_TNIL:
        what = "nil";
        break;
      case LUA_TBOOLEAN:
        what = lua_toboolean(L, 1) ? "true" : "false";
        break;
      default:
        what = lua_typename(L, lua_type(L, 1));  // no address: replies stay deterministic
    }
    lua_newtable(L);
    lua_pushliteral(L, "ERR ");
    lua_pushstring(L, what);
    lua_concat(L, 2);
    lua_setfield(L, -2, "err");
    lua_replace(L, 1);
  }
  if (have) {
    lua_pushstring(L, ar.source);
    lua_setfield(L, 1, "source");
    lua_pushinteger(L, ar.currentline);
    lua_setfield(L, 1, "line");
  }
  lua_settop(L, 1);
  return 1;
}

// The work of redis.call/pcall, with its C++ objects; leaves the reply or
// the error table on the stack and returns whether to raise it.
struct LuaEngine::Call {
  static bool Run(lua_State* L, bool raise) {
    LuaEngine* self = static_cast<LuaEngine*>(lua_touserdata(L, lua_upvalueindex(1)));
    const int argc = lua_gettop(L);
    if (argc == 0) {
      PushCodedError(L, "Please specify at least one argument for this redis lib call");
      return raise;
    }
    Argv& argv = self->call_argv_;
    argv.resize(static_cast<size_t>(argc));
    for (int i = 1; i <= argc; ++i) {
      std::string& out = argv[static_cast<size_t>(i - 1)];
      if (lua_type(L, i) == LUA_TNUMBER) {
        char buf[64];
        const int n = snprintf(buf, sizeof(buf), "%.17g", static_cast<double>(lua_tonumber(L, i)));
        out.assign(buf, static_cast<size_t>(n));
      } else if (lua_type(L, i) == LUA_TSTRING) {
        size_t len = 0;
        const char* s = lua_tolstring(L, i, &len);
        out.assign(s, len);
      } else {
        PushCodedError(L, "Lua redis lib command arguments must be strings or integers");
        return raise;
      }
    }
    if (self->host_ == nullptr) {
      PushCodedError(L, "redis.call outside a script");
      return raise;
    }
    std::string refusal;
    Reply r = self->host_->Call(argv, &refusal);
    if (!refusal.empty()) {
      PushCodedError(L, refusal);
      return raise;
    }
    PushReply(L, r);
    return raise && r.is_error();
  }
};

int LuaEngine::CallCommon(lua_State* L, bool raise) {
  if (Call::Run(L, raise)) return lua_error(L);
  return 1;
}

int LuaEngine::RedisCall(lua_State* L) { return CallCommon(L, true); }
int LuaEngine::RedisPCall(lua_State* L) { return CallCommon(L, false); }

}  // namespace redlock::sim
