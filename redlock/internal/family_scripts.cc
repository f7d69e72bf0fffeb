#include "redlock/internal/family_scripts.h"

#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/reply.h"

namespace redlock::internal {
namespace {

// A counter as the fencing scripts send it: 21 bytes at most (scripts.cc).
constexpr const char* kCounter = R"lua(
local function counter(key)
  return string.sub(redis.call('get', key) or '0', 1, 21)
end
)lua";

// One member (ARGV[1]) leaving a set of places (KEYS[2]: W's readers, or
// the writers' intents): removed, and, with announcements on (ARGV[2], the
// channel prefix), the set's last live member's leaving published on W's
// channel (KEYS[1]), unless `unless_written` and a writer holds W. Returns
// how many members went (0 or 1).
constexpr const char* kLeaveSet = R"lua(
local function leave(unless_written)
  local n = redis.call('zrem', KEYS[2], ARGV[1])
  if n > 0 and ARGV[2] ~= '' then
    redis.call('zremrangebyscore', KEYS[2], '-inf', now)
    if redis.call('zcard', KEYS[2]) == 0 and
        not (unless_written and redis.call('exists', KEYS[1]) == 1) then
      redis.call('publish', ARGV[2] .. KEYS[1], '')
    end
  end
  return n
end
)lua";

// This file's scripts (BuiltScripts).
struct FamilyScriptSet {
  Script rw_read_acquire =
      MakeScript("rw-read-acquire", kExpectInteger | kExpectArray, {kLuaNow, kCounter, R"lua(
local fenced = #KEYS == 4
if redis.call('exists', KEYS[1]) == 1 then
  if fenced then return {-1} end
  return -1
end
redis.call('zremrangebyscore', KEYS[3], '-inf', now)
if redis.call('zcard', KEYS[3]) > 0 then
  if fenced then return {-2} end
  return -2
end
redis.call('zremrangebyscore', KEYS[2], '-inf', now)
local ttl = tonumber(ARGV[2])
redis.call('zadd', KEYS[2], now + ttl, ARGV[1])
if redis.call('pttl', KEYS[2]) < ttl then redis.call('pexpire', KEYS[2], ttl) end
if fenced then return {1, counter(KEYS[4])} end
return 1
)lua"});

  Script rw_write_acquire =
      MakeScript("rw-write-acquire", kExpectInteger | kExpectArray, {kLuaNow, kCounter, R"lua(
local fenced = #KEYS == 4
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('zremrangebyscore', KEYS[2], '-inf', now)
  if redis.call('zcard', KEYS[2]) == 0 then
    redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
    redis.call('zrem', KEYS[3], ARGV[3])
    if fenced then return {1, counter(KEYS[4])} end
    return 1
  end
end
local intent = tonumber(ARGV[4])
if intent > 0 then
  redis.call('zremrangebyscore', KEYS[3], '-inf', now)
  redis.call('zadd', KEYS[3], now + intent, ARGV[3])
  if redis.call('pttl', KEYS[3]) < intent then redis.call('pexpire', KEYS[3], intent) end
end
if fenced then return {-1} end
return -1
)lua"});

  Script rw_read_commit = MakeScript("rw-read-commit", kExpectInteger, {kLuaNow, R"lua(
local score = redis.call('zscore', KEYS[1], ARGV[1])
if not score or tonumber(score) <= now then return 0 end
local cur = redis.call('get', KEYS[2]) or '0'
local want = ARGV[2]
if #cur < #want or (#cur == #want and cur < want) then cur = want end
redis.call('set', KEYS[2], cur)
return 1
)lua"});

  Script rw_read_extend = MakeScript("rw-read-extend", kExpectInteger, {kLuaNow, R"lua(
local score = redis.call('zscore', KEYS[1], ARGV[1])
if not score then return 0 end
if tonumber(score) <= now then
  redis.call('zrem', KEYS[1], ARGV[1])
  return 0
end
local ttl = tonumber(ARGV[2])
redis.call('zadd', KEYS[1], 'XX', now + ttl, ARGV[1])
if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end
return 1
)lua"});

  // A reader's release announces the last reader gone (a writer may take
  // W); a writer's intent withdrawn, the last intent gone while no writer
  // holds W (readers may come in).
  Script rw_read_release = MakeScript("rw-read-release", kExpectInteger, {kLuaNow, kLeaveSet, R"lua(
return leave(false)
)lua"});

  Script rw_withdraw = MakeScript("rw-withdraw", kExpectInteger, {kLuaNow, kLeaveSet, R"lua(
return leave(true)
)lua"});

  Script rw_inspect = MakeScript("rw-inspect", kExpectArray, {kLuaNow, R"lua(
local live = '(' .. now
return {redis.call('get', KEYS[1]) or '', redis.call('pttl', KEYS[1]),
        redis.call('zcount', KEYS[2], live, '+inf'), redis.call('zcount', KEYS[3], live, '+inf'),
        redis.call('get', KEYS[4]) or '0'}
)lua"});

  Script sem_acquire = MakeScript("sem-acquire", kExpectArray, {kCounter, R"lua(
local k = tonumber(ARGV[4])
local first = tonumber(ARGV[3])
for j = 0, k - 1 do
  local i = (first + j) % k + 1
  if redis.call('exists', KEYS[i]) == 0 then
    redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])
    if #KEYS == 2 * k then return {i, counter(KEYS[k + i])} end
    return {i}
  end
end
return {0}
)lua"});
};

}  // namespace

const Script& RwReadAcquireScript() { return BuiltScripts<FamilyScriptSet>().rw_read_acquire; }
const Script& RwWriteAcquireScript() { return BuiltScripts<FamilyScriptSet>().rw_write_acquire; }
const Script& RwReadCommitScript() { return BuiltScripts<FamilyScriptSet>().rw_read_commit; }
const Script& RwReadExtendScript() { return BuiltScripts<FamilyScriptSet>().rw_read_extend; }
const Script& RwReadReleaseScript() { return BuiltScripts<FamilyScriptSet>().rw_read_release; }
const Script& RwWithdrawScript() { return BuiltScripts<FamilyScriptSet>().rw_withdraw; }
const Script& RwInspectScript() { return BuiltScripts<FamilyScriptSet>().rw_inspect; }
const Script& SemAcquireScript() { return BuiltScripts<FamilyScriptSet>().sem_acquire; }

const std::vector<const Script*>& FamilyScripts() {
  static const std::vector<const Script*> all = [] {
    std::vector<const Script*> v = {&RwReadAcquireScript(), &RwWriteAcquireScript(),
                                    &RwReadCommitScript(),  &RwReadExtendScript(),
                                    &RwReadReleaseScript(), &RwWithdrawScript(),
                                    &RwInspectScript(),     &SemAcquireScript()};
    // The fair lock's (fair_scripts.h).
    for (const Script* s : FairScripts()) v.push_back(s);
    return v;
  }();
  return all;
}

}  // namespace redlock::internal
