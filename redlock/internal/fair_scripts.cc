#include "redlock/internal/fair_scripts.h"

#include "redlock/internal/reply.h"

namespace redlock::internal {
namespace {

// What every fair script shares, after kLuaNow (the node's ms clock): the
// head; the purge of expired places, which says whether it changed the
// head; the wake-up of the head (only while W is free, never of `me`); the
// highest live ticket; the sets' own ttl, kept at least as long as their
// longest place.
constexpr const char* kPrelude = R"lua(local function head()
  return redis.call('zrange', KEYS[2], 0, 0)[1]
end
local function purge()
  local dead = redis.call('zrangebyscore', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)
  if #dead == 0 then return false end
  local before = head()
  for i = 1, #dead do
    redis.call('zrem', KEYS[2], dead[i])
    redis.call('zrem', KEYS[3], dead[i])
  end
  return head() ~= before
end
local function wake(prefix, me)
  if prefix == '' or redis.call('exists', KEYS[1]) == 1 then return end
  local h = head()
  if h and h ~= me then redis.call('publish', prefix .. KEYS[1] .. ':' .. h, '') end
end
local function maxticket()
  return redis.call('zrange', KEYS[2], -1, -1, 'WITHSCORES')[2] or '0'
end
local function keep(ms)
  for i = 2, 3 do
    if redis.call('pttl', KEYS[i]) < ms then redis.call('pexpire', KEYS[i], ms) end
  end
end
)lua";

// The grant: W set, and with the counter key the counter as the fencing
// round 1 reads it (21 bytes at most, scripts.cc).
constexpr const char* kGrant = R"lua(
local function grant(max)
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  if #KEYS == 4 then
    return {1, max, string.sub(redis.call('get', KEYS[4]) or '0', 1, 21)}
  end
  return {1, max}
end
)lua";

// This file's scripts (BuiltScripts).
struct FairScriptSet {
  Script fair_probe = MakeScript("fair-probe", kExpectArray, {kLuaNow, kPrelude, kGrant, R"lua(
if purge() then wake(ARGV[3], '') end
local max = maxticket()
if redis.call('exists', KEYS[1]) == 1 then return {-1, max} end
if redis.call('zcard', KEYS[2]) > 0 then return {-2, max} end
return grant(max)
)lua"});

  Script fair_register =
      MakeScript("fair-register", kExpectArray, {kLuaNow, kPrelude, kGrant, R"lua(
local changed = purge()
local id = ARGV[4]
local place = tonumber(ARGV[6])
redis.call('zadd', KEYS[2], ARGV[5], id)
redis.call('zadd', KEYS[3], now + place, id)
keep(place)
local max = maxticket()
if redis.call('exists', KEYS[1]) == 1 then return {-1, max} end
if head() ~= id then
  if changed then wake(ARGV[3], id) end
  return {-2, max}
end
return grant(max)
)lua"});

  Script fair_acquire = MakeScript("fair-acquire", kExpectArray, {kLuaNow, kPrelude, kGrant, R"lua(
local changed = purge()
local id = ARGV[4]
local max = maxticket()
if redis.call('exists', KEYS[1]) == 1 then return {-1, max} end
if head() ~= id then
  if changed then wake(ARGV[3], id) end
  if redis.call('zscore', KEYS[2], id) then return {-2, max} end
  return {-3, max}
end
return grant(max)
)lua"});

  Script fair_refresh = MakeScript("fair-refresh", kExpectArray, {kLuaNow, kPrelude, R"lua(
local changed = purge()
local id = ARGV[2]
local place = tonumber(ARGV[4])
local code = 0
if redis.call('zscore', KEYS[2], id) then
  redis.call('zadd', KEYS[3], now + place, id)
  code = 1
elseif ARGV[5] == '1' then
  redis.call('zadd', KEYS[2], ARGV[3], id)
  redis.call('zadd', KEYS[3], now + place, id)
  code = 2
end
if code > 0 then keep(place) end
if changed then wake(ARGV[1], id) end
local free = 0
if redis.call('exists', KEYS[1]) == 0 and head() == id then free = 1 end
return {code, free}
)lua"});

  Script fair_release = MakeScript("fair-release", kExpectInteger, {kLuaNow, kPrelude, R"lua(
local id = string.match(ARGV[1], '%.(%x+)$')
local deleted = 0
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  deleted = 1
end
if ARGV[3] == 'release' then
  if id then
    redis.call('zrem', KEYS[2], id)
    redis.call('zrem', KEYS[3], id)
  end
  purge()
  wake(ARGV[2], '')
elseif deleted == 1 then
  purge()
  wake(ARGV[2], id)
end
return deleted
)lua"});

  Script fair_leave = MakeScript("fair-leave", kExpectInteger, {kLuaNow, kPrelude, R"lua(
local id = ARGV[1]
local was = head() == id
local n = redis.call('zrem', KEYS[2], id)
redis.call('zrem', KEYS[3], id)
if n > 0 then
  local changed = purge()
  if was or changed then wake(ARGV[2], id) end
end
return n
)lua"});

  Script fair_inspect = MakeScript("fair-inspect", kExpectArray, {kLuaNow, kPrelude, R"lua(
local max = tonumber(ARGV[1])
local live = redis.call('zcount', KEYS[3], '(' .. now, '+inf')
local ids = redis.call('zrange', KEYS[2], 0, 2 * max - 1, 'WITHSCORES')
local entries = {}
for i = 1, #ids, 2 do
  local e = redis.call('zscore', KEYS[3], ids[i])
  if e and tonumber(e) > now and #entries < 3 * max then
    entries[#entries + 1] = ids[i]
    entries[#entries + 1] = ids[i + 1]
    entries[#entries + 1] = tostring(tonumber(e) - now)
  end
end
return {redis.call('get', KEYS[1]) or '', redis.call('pttl', KEYS[1]), live, entries}
)lua"});
};

}  // namespace

const Script& FairProbeScript() { return BuiltScripts<FairScriptSet>().fair_probe; }
const Script& FairRegisterScript() { return BuiltScripts<FairScriptSet>().fair_register; }
const Script& FairAcquireScript() { return BuiltScripts<FairScriptSet>().fair_acquire; }
const Script& FairRefreshScript() { return BuiltScripts<FairScriptSet>().fair_refresh; }
const Script& FairReleaseScript() { return BuiltScripts<FairScriptSet>().fair_release; }
const Script& FairLeaveScript() { return BuiltScripts<FairScriptSet>().fair_leave; }
const Script& FairInspectScript() { return BuiltScripts<FairScriptSet>().fair_inspect; }

const std::vector<const Script*>& FairScripts() {
  static const std::vector<const Script*> all = {
      &FairProbeScript(),   &FairRegisterScript(), &FairAcquireScript(), &FairRefreshScript(),
      &FairReleaseScript(), &FairLeaveScript(),    &FairInspectScript()};
  return all;
}

std::string FairWaiterOfToken(absl::string_view token) {
  const size_t dot = token.rfind('.');
  if (dot == absl::string_view::npos) return "";
  return std::string(token.substr(dot + 1));
}

}  // namespace redlock::internal
