// Release announcements for waiting acquisitions (Acquire with a wait).
//
// The release script publishes an empty message (never the token) on
// "redlock:release:<key>" on every node where it deleted the key; the
// transport hands each message to OnAnnouncement, which reads only the
// channel and the node.
// A waiter's attempt failed because some nodes refused; a release announced
// by only some of them does not make the next attempt succeed (a release
// reaches the nodes at different times, under load by hundreds of
// milliseconds). So a waiter wakes when the nodes that granted its last
// attempt plus the nodes that announced a release since that attempt started
// make a quorum: one attempt per release in the usual case, and another one
// only when a failed attempt proved the release was not complete yet.
//
// Each announcement goes to the oldest waiter of this client on that channel
// only: the others would contend with it for the same lock, so a release
// costs at most one attempt per client however many threads wait. Shared
// waiters (the readers of a ReadWriteLock, who may all hold at once) get
// every announcement on their channels. A semaphore's waiters (K permits:
// each release frees one of them for one waiter) get it one at a time: the
// oldest of them that is waiting, so that releases of different permits
// wake different waiters instead of the one already trying.

#ifndef REDLOCK_INTERNAL_RELEASE_WATCH_H_
#define REDLOCK_INTERNAL_RELEASE_WATCH_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "redlock/internal/transport.h"

namespace redlock::internal {

class ReleaseWatches {
 public:
  class Watch;

  // Who among this client's watches of a channel hears an announcement.
  enum class Wakeup {
    kOldest,         // the oldest watch (a mutex: one attempt per release)
    kEveryone,       // every such watch (readers)
    kOldestWaiting,  // the oldest watch waiting now, else the oldest (permits)
  };

  explicit ReleaseWatches(Transport* transport);

  // A watch on the channels of `keys` (subscribed while it lives), woken
  // as `wakeup` says (see the file comment).
  std::shared_ptr<Watch> Open(const std::vector<std::string>& keys,
                              Wakeup wakeup = Wakeup::kOldest);
  // The same on channels named in full (a fair lock's waiter listens on a
  // channel of its own, fair_scripts.h).
  std::shared_ptr<Watch> OpenChannels(std::vector<std::string> channels,
                                      Wakeup wakeup = Wakeup::kOldest);

  // One announcement from `node` on `channel` (the transport's thread).
  void OnAnnouncement(int node, const std::string& channel);

 private:
  friend class Watch;
  void Close(Watch* watch);

  Transport* const transport_;
  std::mutex mu_;
  // Per channel, the watches in opening order (oldest first).
  std::map<std::string, std::list<std::weak_ptr<Watch>>> watches_;
};

class ReleaseWatches::Watch : public std::enable_shared_from_this<Watch> {
 public:
  Watch(ReleaseWatches* owner, std::vector<std::string> channels, int nodes,
        Wakeup wakeup = Wakeup::kOldest);
  ~Watch();

  // The announcement count so far: taken when an attempt starts, it tells
  // Wait which announcements came after the attempt began.
  uint64_t Mark();

  // Completes `done` with OK once `quorum` nodes became free after `mark`
  // (announced a release, or were freed by the waiter itself); with
  // kDeadlineExceeded after `max_wait`; with kCancelled on Cancel(). `done`
  // runs on the transport's thread, never inline. One wait at a time.
  // REQUIRES: max_wait is finite (the transport runs every timer at
  // shutdown, which ends every wait).
  void Wait(uint64_t mark, int quorum, absl::Duration max_wait,
            absl::AnyInvocable<void(absl::Status)> done);
  void Cancel();

  // `node` is free as far as this waiter knows: it granted the waiter's
  // failed attempt, whose cleanup removes the key again.
  void Freed(int node) { Announce(node); }

 private:
  friend class ReleaseWatches;
  void Announce(int node);
  // Completes the wait if its condition holds. REQUIRES: mu_ held.
  absl::AnyInvocable<void(absl::Status)> TakeIfReadyLocked();
  absl::AnyInvocable<void(absl::Status)> TakeLocked();
  // True while a Wait is pending (who hears a permit's release).
  bool Waiting();

  ReleaseWatches* const owner_;
  const std::vector<std::string> channels_;
  const Wakeup wakeup_;

  std::mutex mu_;
  uint64_t seq_ = 0;
  std::vector<uint64_t> announced_at_;  // per node, seq_ of its latest announcement
  // The current wait.
  absl::AnyInvocable<void(absl::Status)> done_;
  uint64_t mark_ = 0;
  int quorum_ = 0;
  uint64_t wait_id_ = 0;
  Transport::TimerId timer_ = 0;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_RELEASE_WATCH_H_
