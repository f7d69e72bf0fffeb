// What an acquisition of the lock family sets on the nodes, as a small hook
// into the plain acquisition (acquire_op.h): the reader-writer lock's
// scripts, the leader's token. Everything else (the fan-out, the per-node
// deadlines, the early decision, the validity, the cleanup of a failed
// attempt, the retries, the wait on release announcements, cancellation,
// the fencing rounds and the durability vote) is the plain acquisition's,
// so every primitive gets the same guarantees from one piece of code.
//
// Also the commands that extend and release a lease by its kind
// (LeaseKind, lease_factory.h), for keys_op.

#ifndef REDLOCK_INTERNAL_LOCK_SHAPE_H_
#define REDLOCK_INTERNAL_LOCK_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "redlock/internal/lease_factory.h"
#include "redlock/internal/transport.h"

namespace redlock::internal {

class AcquireShape {
 public:
  virtual ~AcquireShape() = default;

  // The token of a new attempt. Default: NewToken().
  virtual std::string Token() const;
  // Fencing rounds even when Options::fencing is off (a leader's term).
  virtual bool force_fencing() const { return false; }
  // A counter per lock key ("<key>:fence") even with
  // Options::FencingCounters::kShared (a leader's term counts elections of
  // its own resource only).
  virtual bool own_counters() const { return false; }
  // True when Round1/Commit/Cleanup below replace the plain lock's scripts.
  virtual bool custom_scripts() const { return false; }
  // Round 1 on one node. `keys` are the lock keys of the request and, with
  // fencing, `counters` their counter keys (one per lock key: each key's
  // own, or the namespace's shared one); empty without fencing. The reply
  // must decode as the plain script's (an integer), or with fencing as the
  // fencing round 1's ({1, counter} or {-i}).
  virtual Command Round1(const std::vector<std::string>& keys,
                         const std::vector<std::string>& counters, const std::string& token,
                         int64_t ttl_ms) const;
  // Every key round 1 touches (for the check that one call can go to every
  // node: scheme.h). Default: the lock keys, then the counters.
  virtual std::vector<std::string> Keys(const std::vector<std::string>& keys,
                                        const std::vector<std::string>& counters) const;
  // Fencing round 2 on a granting node: `fences` one per key.
  virtual Command Commit(const std::vector<std::string>& keys,
                         const std::vector<std::string>& counters, const std::string& token,
                         const std::vector<uint64_t>& fences) const;
  // Removes what an attempt set (a failed attempt's cleanup; no announcement).
  virtual Command Cleanup(const std::vector<std::string>& keys, const std::string& token) const;
  // The fencing value from the counters round 1 read on the counted nodes.
  // Default: NextFence (one more than the highest: a new exclusive holder).
  virtual absl::StatusOr<uint64_t> Fence(const std::vector<uint64_t>& seen) const;
  // The kind of the leases made.
  virtual LeaseKind kind() const { return LeaseKind::kPlain; }
  // Waiters of this shape all want every announcement (readers may all go
  // at once), not only the oldest waiter of the client.
  virtual bool shared_wakeups() const { return false; }
};

// `keys` followed by their fencing counter keys, as the fencing scripts
// take them: each key's own, or `shared` for every key when not empty
// (Options::FencingCounters::kShared).
std::vector<std::string> WithCounters(const std::vector<std::string>& keys,
                                      absl::string_view shared = "");

// A fair lock's keys on a node for lock key `key`: the key, its queue and
// the queue's expiries (fair_scripts.h).
std::vector<std::string> FairKeys(const std::string& key);

// The release and extension of a lease of `kind` whose lock keys are `keys`
// (a shared lease and a fair lease have one), as the plain scripts take
// them (a fair lease extends as a plain one: its lock key holds the token).
Command ReleaseCommand(LeaseKind kind, const std::vector<std::string>& keys,
                       const std::string& token, absl::string_view channel_prefix);
Command ExtendCommand(LeaseKind kind, const std::vector<std::string>& keys,
                      const std::string& token, int64_t ttl_ms);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_LOCK_SHAPE_H_
