#include "redlock/internal/scripts.h"

#include "redlock/internal/family_scripts.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/sha1.h"

namespace redlock::internal {
namespace {

Script Make(const char* name, uint8_t replies, const char* body) {
  return MakeScript(name, replies, {body});
}

}  // namespace

Script MakeScript(const char* name, uint8_t replies, std::initializer_list<const char*> parts) {
  Script s{name, "", "", replies};
  for (const char* p : parts) s.body += p;
  s.sha = Sha1Hex(s.body);
  return s;
}

const char* const kLuaNow = R"lua(
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
)lua";

namespace {

// This file's scripts (BuiltScripts).
struct LockScripts {
  Script acquire_set = Make("acquire", kExpectInteger, R"lua(
for i = 1, #KEYS do
  if redis.call('exists', KEYS[i]) == 1 then return -i end
end
for i = 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
)lua");

  Script release = Make("release", kExpectInteger, R"lua(
local n = 0
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[1] then
    redis.call('del', KEYS[i])
    if ARGV[2] ~= '' then redis.call('publish', ARGV[2] .. KEYS[i], '') end
    n = n + 1
  end
end
return n
)lua");

  Script release_one = Make("release-one", kExpectInteger, R"lua(
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
if ARGV[2] ~= '' then redis.call('publish', ARGV[2], '') end
return 1
)lua");

  Script extend = Make("extend", kExpectInteger, R"lua(
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return 1
)lua");

  Script fence_acquire = Make("fence-acquire", kExpectArray, R"lua(
local n = #KEYS / 2
for i = 1, n do
  if redis.call('exists', KEYS[i]) == 1 then return {-i} end
end
for i = 1, n do
  redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
local out = {1}
for i = 1, n do
  -- 21 bytes tell a garbage value from any 64-bit counter (20 digits at
  -- most), and a huge one never travels.
  out[i + 1] = string.sub(redis.call('get', KEYS[n + i]) or '0', 1, 21)
end
return out
)lua");

  // The counter is written even when it is not raised (another resource's
  // holder raised a shared counter past T first): a WAIT behind the commit
  // waits for the connection's last write, and this write comes after round
  // 1's SET on the node, so once replicated it covers the grant too, on
  // whatever connection the commit went (docs/design.md 5.11).
  Script fence_commit = Make("fence-commit", kExpectInteger, R"lua(
local n = #KEYS / 2
for i = 1, n do
  if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, n do
  local cur = redis.call('get', KEYS[n + i]) or '0'
  local want = ARGV[i + 1]
  if #cur < #want or (#cur == #want and cur < want) then cur = want end
  redis.call('set', KEYS[n + i], cur)
end
return 1
)lua");

  Script inspect = Make("inspect", kExpectArray, R"lua(
return {redis.call('get', KEYS[1]) or '', redis.call('pttl', KEYS[1]),
        redis.call('get', KEYS[2]) or '0'}
)lua");
};

}  // namespace

const Script& AcquireSetScript() { return BuiltScripts<LockScripts>().acquire_set; }
const Script& ReleaseScript() { return BuiltScripts<LockScripts>().release; }
const Script& ReleaseOneScript() { return BuiltScripts<LockScripts>().release_one; }
const Script& ExtendScript() { return BuiltScripts<LockScripts>().extend; }
const Script& FenceAcquireScript() { return BuiltScripts<LockScripts>().fence_acquire; }
const Script& FenceCommitScript() { return BuiltScripts<LockScripts>().fence_commit; }
const Script& InspectScript() { return BuiltScripts<LockScripts>().inspect; }

const std::vector<const Script*>& AllScripts() {
  static const std::vector<const Script*> all = [] {
    std::vector<const Script*> v = {
        &AcquireSetScript(),   &ReleaseScript(),     &ReleaseOneScript(), &ExtendScript(),
        &FenceAcquireScript(), &FenceCommitScript(), &InspectScript()};
    // The lock family's (family_scripts.h).
    for (const Script* s : FamilyScripts()) v.push_back(s);
    return v;
  }();
  return all;
}

}  // namespace redlock::internal
