// The lock family's acquisition shapes (lock_shape.h): what a reader, a
// writer and a leader set on the nodes in place of the mutex's scripts, and
// their tokens. The entry point that picks one is family_ops.h.

#ifndef REDLOCK_INTERNAL_FAMILY_SHAPES_H_
#define REDLOCK_INTERNAL_FAMILY_SHAPES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redlock/internal/lock_shape.h"
#include "redlock/options.h"

namespace redlock::internal {

// A reader-writer lock's keys on a node for lock key `w`: the lock key, the
// readers, the writers' intents and, with fencing, the counter (`counters`:
// the one counter key, or none).
std::vector<std::string> RwKeys(const std::string& w, const std::vector<std::string>& counters);

// A reader: its token in the readers set, its fencing value shared with the
// readers that overlap it.
std::shared_ptr<const AcquireShape> ReadShape();

// A leader: its token carries `identity_hex`; the term is its own counter.
std::shared_ptr<const AcquireShape> LeaderShape(std::string identity_hex);

// A writer: the plain lock's key and commit, and, when `intent_ms` > 0, an
// intent (under `waiter`) on the nodes that refuse it, which keeps new
// readers out until it lapses or is withdrawn.
class WriteShape final : public AcquireShape {
 public:
  WriteShape(std::string waiter, int64_t intent_ms)
      : waiter_(std::move(waiter)), intent_ms_(intent_ms) {}
  bool custom_scripts() const override { return true; }
  Command Round1(const std::vector<std::string>& keys, const std::vector<std::string>& counters,
                 const std::string& token, int64_t ttl_ms) const override;
  std::vector<std::string> Keys(const std::vector<std::string>& keys,
                                const std::vector<std::string>& counters) const override;
  absl::StatusOr<uint64_t> Fence(const std::vector<uint64_t>& seen) const override;
  // Commit and cleanup: the plain lock's (the writer's key is a lock key).

  // The attempts made so far.
  int attempts() const { return attempts_.load(std::memory_order_relaxed); }
  const std::string& waiter() const { return waiter_; }

 private:
  const std::string waiter_;
  const int64_t intent_ms_;
  mutable std::atomic<int> attempts_{0};
};

// How long a waiting writer's intent lives after its latest attempt.
int64_t IntentMs(const Options& o);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_FAMILY_SHAPES_H_
