#include "redlock/internal/command.h"

#include <cstdio>

#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

// Length of the RESP array header ("*<n>\r\n") at the start of `payload`.
size_t ArrayHeaderLength(absl::string_view payload) {
  size_t pos = payload.find("\r\n");
  return pos == absl::string_view::npos ? 0 : pos + 2;
}

// A script call's command up to its keys: EVALSHA, the SHA and the number
// of keys, for `arity` keys and arguments in all, with room for `bytes` of
// theirs.
Command ScriptCallHead(const Script& script, size_t num_keys, size_t arity, size_t bytes) {
  Command c;
  c.script = &script;
  c.expect = script.replies;
  c.payload.reserve(96 + script.sha.size() + bytes + 16 * arity);
  AppendArrayHeader(&c.payload, 3 + arity);
  AppendBulk(&c.payload, "EVALSHA");
  AppendBulk(&c.payload, script.sha);
  char num[24];
  int len = snprintf(num, sizeof(num), "%zu", num_keys);
  AppendBulk(&c.payload, absl::string_view(num, static_cast<size_t>(len)));
  return c;
}

// EVALSHA sha numkeys keys... args..., for any range of args that convert
// to absl::string_view.
template <typename Args>
Command EncodeScriptCall(const Script& script, const std::vector<std::string>& keys,
                         const Args& args) {
  size_t bytes = 0;
  size_t nargs = 0;
  for (const auto& k : keys) bytes += k.size();
  for (absl::string_view a : args) {
    bytes += a.size();
    ++nargs;
  }
  Command c = ScriptCallHead(script, keys.size(), keys.size() + nargs, bytes);
  if (!keys.empty()) c.slot = KeySlot(keys[0]);
  for (const auto& k : keys) AppendBulk(&c.payload, k);
  for (absl::string_view a : args) AppendBulk(&c.payload, a);
  return c;
}

}  // namespace

Command ScriptCommand(const Script& script, const std::vector<std::string>& keys,
                      const std::vector<std::string>& args) {
  return EncodeScriptCall(script, keys, args);
}

Command ScriptCommandOf(const Script& script, const std::vector<std::string>& keys,
                        std::initializer_list<absl::string_view> args) {
  return EncodeScriptCall(script, keys, args);
}

Command ScriptCommandOfPieces(const Script& script, size_t num_keys,
                              std::initializer_list<std::initializer_list<absl::string_view>> args,
                              size_t* first_key_at) {
  size_t bytes = 0;
  for (const auto& arg : args) {
    for (absl::string_view piece : arg) bytes += piece.size();
  }
  Command c = ScriptCallHead(script, num_keys, args.size(), bytes);
  size_t key_at = 0;
  size_t key_size = 0;
  size_t i = 0;
  for (const auto& arg : args) {
    size_t size = 0;
    for (absl::string_view piece : arg) size += piece.size();
    AppendBulkHeader(&c.payload, size);
    if (i++ == 0 && num_keys > 0) {
      key_at = c.payload.size();
      key_size = size;
    }
    for (absl::string_view piece : arg) c.payload.append(piece.data(), piece.size());
    c.payload.append("\r\n", 2);
  }
  if (num_keys > 0) {
    c.slot = KeySlot(absl::string_view(c.payload).substr(key_at, key_size));
    if (first_key_at != nullptr) *first_key_at = key_at;
  }
  return c;
}

std::string EvalFallback(const Command& command) {
  absl::string_view p = command.payload;
  size_t header = ArrayHeaderLength(p);
  std::string evalsha_part;
  AppendBulk(&evalsha_part, "EVALSHA");
  AppendBulk(&evalsha_part, command.script->sha);
  std::string out(p.substr(0, header));
  AppendBulk(&out, "EVAL");
  AppendBulk(&out, command.script->body);
  absl::string_view rest = p.substr(header + evalsha_part.size());
  out.append(rest.data(), rest.size());
  return out;
}

absl::Status LostReplyError() {
  return absl::UnavailableError(
      "its reply was lost: the connection kept going without it (a proxy or middlebox dropped "
      "replies), and the replies after it were read as earlier requests' until a PING marker "
      "put them back in step");
}

}  // namespace redlock::internal
