#include "redlock/internal/lock_shape.h"

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/token.h"

namespace redlock::internal {
std::vector<std::string> WithCounters(const std::vector<std::string>& keys,
                                      absl::string_view shared) {
  std::vector<std::string> out = keys;
  for (const auto& k : keys) {
    out.push_back(shared.empty() ? absl::StrCat(k, kFenceSuffix) : std::string(shared));
  }
  return out;
}

std::vector<std::string> FairKeys(const std::string& key) {
  return {key, absl::StrCat(key, kFairQueueSuffix), absl::StrCat(key, kFairExpirySuffix)};
}

std::string AcquireShape::Token() const { return NewToken(); }

namespace {

std::vector<std::string> Concat(const std::vector<std::string>& a,
                                const std::vector<std::string>& b) {
  std::vector<std::string> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

Command AcquireShape::Round1(const std::vector<std::string>& keys,
                             const std::vector<std::string>& counters, const std::string& token,
                             int64_t ttl_ms) const {
  if (!counters.empty()) {
    return ScriptCommand(FenceAcquireScript(), Concat(keys, counters),
                         {token, std::to_string(ttl_ms)});
  }
  return ScriptCommand(AcquireSetScript(), keys, {token, std::to_string(ttl_ms)});
}

std::vector<std::string> AcquireShape::Keys(const std::vector<std::string>& keys,
                                            const std::vector<std::string>& counters) const {
  return Concat(keys, counters);
}

Command AcquireShape::Commit(const std::vector<std::string>& keys,
                             const std::vector<std::string>& counters, const std::string& token,
                             const std::vector<uint64_t>& fences) const {
  std::vector<std::string> args = {token};
  for (uint64_t f : fences) args.push_back(std::to_string(f));
  return ScriptCommand(FenceCommitScript(), Concat(keys, counters), args);
}

Command AcquireShape::Cleanup(const std::vector<std::string>& keys,
                              const std::string& token) const {
  return ScriptCommand(ReleaseScript(), keys, {token, ""});
}

absl::StatusOr<uint64_t> AcquireShape::Fence(const std::vector<uint64_t>& seen) const {
  return NextFence(seen);
}

Command ReleaseCommand(LeaseKind kind, const std::vector<std::string>& keys,
                       const std::string& token, absl::string_view channel_prefix) {
  if (kind == LeaseKind::kShared) {
    return ScriptCommand(RwReadReleaseScript(), {keys[0], absl::StrCat(keys[0], kReadersSuffix)},
                         {token, std::string(channel_prefix)});
  }
  if (kind == LeaseKind::kFair) {
    // The next waiter is woken on its own channel, whatever the caller's
    // prefix says ("" still announces nothing).
    return ScriptCommand(
        FairReleaseScript(), FairKeys(keys[0]),
        {token, channel_prefix.empty() ? "" : std::string(kFairChannelPrefix), "release"});
  }
  return ScriptCommand(ReleaseScript(), keys, {token, std::string(channel_prefix)});
}

Command ExtendCommand(LeaseKind kind, const std::vector<std::string>& keys,
                      const std::string& token, int64_t ttl_ms) {
  if (kind == LeaseKind::kShared) {
    return ScriptCommand(RwReadExtendScript(), {absl::StrCat(keys[0], kReadersSuffix)},
                         {token, std::to_string(ttl_ms)});
  }
  return ScriptCommand(ExtendScript(), keys, {token, std::to_string(ttl_ms)});
}

}  // namespace redlock::internal
