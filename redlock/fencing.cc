#include "redlock/fencing.h"

namespace redlock {
namespace {

// Shared prologue: compare ARGV[1] with the fence as decimal strings (length,
// then bytes), refuse a lower token, raise the fence otherwise.
#define REDLOCK_FENCE_PROLOGUE                                                                 \
  "local t = ARGV[1]\n"                                                                        \
  "local f = redis.call('get', KEYS[2]) or '0'\n"                                              \
  "if not (t == '0' or string.match(t, '^[1-9]%d*$')) then return redis.error_reply('ERR bad " \
  "token') end\n"                                                                              \
  "if #t < #f or (#t == #f and t < f) then\n"                                                  \
  "  return redis.error_reply('STALE token ' .. t .. ' < fence ' .. f)\n"                      \
  "end\n"                                                                                      \
  "redis.call('set', KEYS[2], t)\n"

}  // namespace

absl::string_view FencedReadScript() {
  static constexpr char kScript[] = REDLOCK_FENCE_PROLOGUE "return redis.call('get', KEYS[1])\n";
  return kScript;
}

absl::string_view FencedWriteScript() {
  static constexpr char kScript[] =
      REDLOCK_FENCE_PROLOGUE "return redis.call('set', KEYS[1], ARGV[2])\n";
  return kScript;
}

}  // namespace redlock
