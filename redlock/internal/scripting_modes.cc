// What a node does with scripts (scriptless.h): the modes each connection's
// handshake sets, the errors that mean "no scripting here", the handshake's
// script loads, and reading a script call back into its keys and arguments
// for the script-free runner (scriptless.cc).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scriptless.h"

namespace redlock::internal {
namespace {

// Reads one "<marker><n>\r\n" header at *pos.
bool ReadHeader(absl::string_view p, size_t* pos, char marker, size_t* n) {
  if (*pos >= p.size() || p[*pos] != marker) return false;
  size_t end = p.find("\r\n", *pos);
  if (end == absl::string_view::npos) return false;
  if (!absl::SimpleAtoi(p.substr(*pos + 1, end - *pos - 1), n)) return false;
  *pos = end + 2;
  return true;
}

}  // namespace

// ---- Modes -------------------------------------------------------------------------------

ScriptingModes::ScriptingModes(int nodes)
    : scriptless_(new std::atomic<bool>[static_cast<size_t>(nodes)]),
      reasons_(static_cast<size_t>(nodes)) {
  for (int i = 0; i < nodes; ++i) scriptless_[static_cast<size_t>(i)].store(false);
}

bool ScriptingModes::scriptless(int node) const {
  return scriptless_[static_cast<size_t>(node)].load(std::memory_order_acquire);
}

std::string ScriptingModes::reason(int node) const {
  std::lock_guard<std::mutex> lock(mu_);
  return reasons_[static_cast<size_t>(node)];
}

void ScriptingModes::SetScripts(int node) {
  std::lock_guard<std::mutex> lock(mu_);
  reasons_[static_cast<size_t>(node)].clear();
  scriptless_[static_cast<size_t>(node)].store(false, std::memory_order_release);
}

void ScriptingModes::SetScriptless(int node, std::string reason) {
  std::lock_guard<std::mutex> lock(mu_);
  reasons_[static_cast<size_t>(node)] = std::move(reason);
  scriptless_[static_cast<size_t>(node)].store(true, std::memory_order_release);
}

bool RefusesScripting(absl::string_view error) {
  const std::string e = absl::AsciiStrToLower(error);
  // Valkey 9.1 with its Lua engine module not loaded (or unloaded): "ERR
  // Could not find scripting engine 'lua'" to EVAL, EVALSHA and SCRIPT LOAD.
  if (absl::StartsWith(e, "err could not find scripting engine")) return true;
  const bool names_scripting = absl::StrContains(e, "'eval") || absl::StrContains(e, "'script") ||
                               absl::StrContains(e, "'fcall") || absl::StrContains(e, "'function");
  if (!names_scripting) return false;
  // "NOPERM this user has no permissions to run the 'script|load' command";
  // "ERR unknown command 'EVALSHA', with args beginning with: ...".
  return (absl::StartsWith(e, "noperm") && absl::StrContains(e, "command")) ||
         absl::StartsWith(e, "err unknown command");
}

std::vector<HandshakeStep> ScriptLoadSteps(std::shared_ptr<ScriptingModes> modes, int node,
                                           bool scripts_required) {
  std::vector<HandshakeStep> steps;
  const std::vector<const Script*>& all = AllScripts();
  for (size_t i = 0; i < all.size(); ++i) {
    const Script* s = all[i];
    HandshakeStep load;
    AppendCommand(&load.payload, {"SCRIPT", "LOAD", s->body});
    // Each connection decides afresh (an ACL may have changed): the first
    // load that goes through clears the mark, any refusal sets it.
    load.check = [s, modes, node, first = i == 0, scripts_required](const Reply& r) -> std::string {
      if (r.is_error() && RefusesScripting(r.str) && scripts_required) {
        return absl::StrCat(
            "SCRIPT LOAD refused (", r.str,
            "): a cluster node must allow scripting (its transactions could not follow a "
            "key that moves between masters); grant the user @scripting");
      }
      if (r.is_error() && RefusesScripting(r.str)) {
        // Not a failure: this node gets the script-free path.
        modes->SetScriptless(node, r.str);
        return "";
      }
      if (r.is_error()) return HandshakeError("SCRIPT LOAD", r);
      if (r.type != Reply::Type::kString || r.str != s->sha) {
        return absl::StrCat("SCRIPT LOAD of the ", s->name, " script returned ", r.Describe());
      }
      if (first) modes->SetScripts(node);
      return "";
    };
    steps.push_back(std::move(load));
  }
  return steps;
}

bool DecodeScriptCallViews(absl::string_view p, ScriptCallViews* keys, ScriptCallViews* args) {
  size_t pos = 0;
  size_t count = 0;
  if (!ReadHeader(p, &pos, '*', &count) || count < 3) return false;
  absl::InlinedVector<absl::string_view, 8> argv;
  argv.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    size_t len = 0;
    if (!ReadHeader(p, &pos, '$', &len) || pos + len + 2 > p.size()) return false;
    argv.push_back(p.substr(pos, len));
    pos += len + 2;
  }
  size_t numkeys = 0;
  if (!absl::SimpleAtoi(argv[2], &numkeys) || 3 + numkeys > count) return false;
  keys->clear();
  args->clear();
  for (size_t i = 3; i < count; ++i) {
    (i < 3 + numkeys ? keys : args)->push_back(argv[i]);
  }
  return true;
}

bool DecodeScriptCall(absl::string_view p, std::vector<std::string>* keys,
                      std::vector<std::string>* args) {
  ScriptCallViews key_views, arg_views;
  if (!DecodeScriptCallViews(p, &key_views, &arg_views)) return false;
  keys->clear();
  args->clear();
  for (absl::string_view k : key_views) keys->emplace_back(k);
  for (absl::string_view a : arg_views) args->emplace_back(a);
  return true;
}

}  // namespace redlock::internal
