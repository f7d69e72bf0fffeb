// S5's scan: the keys a run's clients may leave behind and what each node
// still holds of them after the quiet tail.

#include "chaos/run/leftovers.h"

#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace redlock::chaos {

std::vector<ScanTarget> LeftoverScanTargets(const Scenario& sc) {
  std::set<std::pair<std::string, bool>> keys;
  for (const ClientConfig& c : sc.setup.clients) {
    for (const std::string& r : c.resources) {
      if (c.variant == ClientVariant::kMajorityCount) {
        keys.insert({r + ":holders", true});
      } else if (c.primitive == Primitive::kSemaphore) {
        for (int i = 0; i < c.permits; ++i) keys.insert({absl::StrCat(r, ":permit:", i), false});
      } else if (c.primitive == Primitive::kRwLock) {
        keys.insert({r, false});
        keys.insert({r + ":rw:readers", true});
      } else if (c.primitive == Primitive::kFair) {
        // The places, by their expiry on the node's clock.
        keys.insert({r, false});
        keys.insert({r + ":fair:exp", true});
      } else {
        keys.insert({r, false});
      }
    }
  }
  std::vector<ScanTarget> out;
  for (const auto& [key, set] : keys) out.push_back({key, set});
  return out;
}

std::vector<KeyState> ScanLeftovers(Run& run, const std::vector<ScanTarget>& targets) {
  std::vector<KeyState> out;
  for (int i = 0; i < run.num_nodes(); ++i) {
    for (const ScanTarget& target : targets) {
      const std::string& r = target.key;
      if (target.set) {
        // Live members: scored by expiry on the node's own clock.
        absl::StatusOr<testkit::RedisValue> now = run.NodeCommand(i, {"TIME"});
        absl::StatusOr<testkit::RedisValue> t = run.NodeCommand(i, {"PTTL", r});
        if (!now.ok() || !t.ok() || now->elements.size() != 2) {
          run.Note(absl::StrCat("S5 scan of n", i,
                                " failed: ", (!now.ok() ? now.status() : t.status()).ToString()));
          continue;
        }
        int64_t sec = 0, usec = 0;
        (void)absl::SimpleAtoi(now->elements[0].str, &sec);
        (void)absl::SimpleAtoi(now->elements[1].str, &usec);
        absl::StatusOr<testkit::RedisValue> members = run.NodeCommand(
            i, {"ZRANGEBYSCORE", r, absl::StrCat("(", sec * 1000 + usec / 1000), "+inf"});
        if (!members.ok()) continue;
        for (const testkit::RedisValue& m : members->elements) {
          out.push_back({i, r, m.str, t->integer});
        }
        continue;
      }
      absl::StatusOr<testkit::RedisValue> v = run.NodeCommand(i, {"GET", r});
      absl::StatusOr<testkit::RedisValue> t = run.NodeCommand(i, {"PTTL", r});
      if (!v.ok() || !t.ok()) {
        run.Note(absl::StrCat("S5 scan of n", i,
                              " failed: ", (!v.ok() ? v.status() : t.status()).ToString()));
        continue;
      }
      if (v->type != testkit::RedisValue::Type::kString) continue;
      out.push_back({i, r, v->str, t->integer});
    }
  }
  return out;
}

}  // namespace redlock::chaos
