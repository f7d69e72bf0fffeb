// Releases that must not be lost (docs/design.md 5.8): one job of the calls
// to the nodes (node_calls.h).
//
// A release that cannot be sent, is not answered or is answered with an
// error is kept and sent again, every retry interval, once the node takes
// commands, until it is answered or no key can be left: the keys' expiry if
// their SET ran when sent, pushed to a ttl from now after every try the node
// left unanswered (a stopped node runs what its socket holds when it
// resumes). At most 64 per node per round and one round out per node at a
// time; at most `max_pending` wait per node (the oldest are dropped first);
// those still waiting at shutdown are dropped.
//
// Thread-safe. The resends run on the transport's thread.

#ifndef REDLOCK_INTERNAL_RELEASE_RETRIES_H_
#define REDLOCK_INTERNAL_RELEASE_RETRIES_H_

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/command.h"
#include "redlock/internal/transport.h"
#include "redlock/node_status.h"

namespace redlock::internal {

// The keys of one acquisition to remove from the nodes.
struct KeysRelease {
  std::vector<std::string> keys;
  std::string token;
  // Prefix of the channel the release is announced on ("" announces
  // nothing: a failed attempt's cleanup must not wake the waiters). A
  // constant of the library's (kReleaseChannelPrefix): not copied per
  // release.
  absl::string_view channel_prefix;
  // The keys' ttl, and when they expire at the latest if their SET ran when
  // sent (a key set later lives longer: see ReleaseRetries).
  absl::Duration ttl;
  Clock::TimePoint expires;
  // The command that removes them: the release script on `keys`
  // (ScriptRelease), or another (a reader's lease, a failed attempt of the
  // lock family: lock_shape.h). Made by ScriptCommand, so that it has an
  // EVAL form. Built once by the release's maker, copied per node; left
  // empty, each send builds the script release. A maker that sets it may
  // leave `keys` and `token` empty (only that build reads them).
  Command command;
};

// The release script on `release`'s keys with its token, announced on the
// channel of its prefix (none when the prefix is empty).
Command ScriptRelease(const KeysRelease& release);

class ReleaseRetries {
 public:
  // One release to send again.
  struct Pending {
    std::shared_ptr<const KeysRelease> release;
    ConnectionId after = 0;      // the SET's connection
    ConnectionId queued_on = 0;  // where the last try went (0: refused)
    Clock::TimePoint until;      // no key can be left after this
  };
  // Sends `p` to `node` again (its EVAL form); `done` runs once it was
  // answered or failed. Returns the connection it went on (0: refused now).
  using Resend = std::function<ConnectionId(int node, Pending p, absl::AnyInvocable<void()> done)>;

  // Releases sent again per node and round, at most.
  static constexpr size_t kBatch = 64;

  // `transport` and `clock` must outlive this.
  ReleaseRetries(Transport* transport, const Clock* clock, absl::Duration interval,
                 size_t max_pending, Resend resend);
  ~ReleaseRetries();
  ReleaseRetries(const ReleaseRetries&) = delete;
  ReleaseRetries& operator=(const ReleaseRetries&) = delete;

  // `p` did not get through to `node`: not answered (`answered` false: the
  // node may still hold its SET), or answered with an error. Kept for a
  // retry unless no key can be left.
  void Keep(int node, Pending p, bool answered);

  // Fills NodeHealth::cleanups_pending.
  void AddHealth(std::vector<NodeHealth>* health) const;

  // Drops what is pending and stops the retries.
  void Shutdown();

 private:
  struct NodeState {
    std::deque<Pending> pending;  // oldest first
    int retrying = 0;             // out now
  };
  void ArmLocked(std::vector<absl::AnyInvocable<void()>>* after_unlock);
  void Retry();

  Transport* const transport_;
  const Clock* const clock_;
  const absl::Duration interval_;
  const size_t max_pending_;
  const Resend resend_;
  mutable std::mutex mu_;
  std::vector<NodeState> nodes_;
  bool armed_ = false;
  Transport::TimerId timer_ = 0;
  bool stopped_ = false;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_RELEASE_RETRIES_H_
