// redlock/fair_mutex.h: a fair lock on N independent Redis masters: first
// come, first served across every process, one waiter woken per release.
//
//   redlock::FairLock jobs(client.get(), "jobs/import");
//   absl::StatusOr<redlock::Lease> lease = jobs.Acquire(absl::Seconds(10), absl::Seconds(30));
//   if (!lease.ok()) return lease.status();  // kDeadlineExceeded: not our turn within 30 s
//   RunImport(lease->fencing_token());
//   (void)jobs.Release(*lease);                // wakes the next waiter, and only that one
//
//   redlock::FairMutex m(client.get(), "jobs/import");  // a TimedLockable
//   std::unique_lock<redlock::FairMutex> hold(m, std::chrono::seconds(30));
//
// The guarantee (docs/design.md 5.17): a waiter whose place was taken
// before another waiter began taking its own is granted the lock first,
// unless it gave up (its wait ran out, it was cancelled) or its place
// expired. A waiter takes its place in one Acquire call: a ticket one above
// the highest ticket a quorum of nodes holds, written to a quorum; the lock
// is then granted only to the waiter whose place is the first on a quorum
// (Lamport's bakery over quorums: two quorums share a node, which holds the
// earlier place when the later one is counted).
//
// What is not promised: an order between waiters whose calls overlapped
// while taking their places (either may go first; they are served one
// after the other all the same); the order across faults that lose places
// on the nodes (a node restarted without persistence, a clock jump beyond
// the drift, a failover without Options::durability: a waiter whose place
// only a bare quorum held may be overtaken until its heartbeat puts the
// place back, at most a heartbeat later); the order against plain locks of
// the same resource (Client::Acquire, Mutex), which share its lock key and
// so exclude it, but ignore the queue. Mutual exclusion is the mutex's
// under every fault: the queue only decides who may try.
//
// Places expire. A waiter keeps its place alive while it waits: a heartbeat
// every place_ttl / 3 on the client's timers (no thread per waiter). A dead
// or paused waiter's place lapses place_ttl after its last heartbeat, and
// the next waiter goes. A live waiter whose place is gone (it was paused or
// cut off from a quorum for longer than place_ttl, or a quorum of nodes
// lost or removed it) is told: its call fails with kAborted, and
// GetOutcome(status)->kind is Outcome::Kind::kPlaceLost; it never waits on.
// Calling again takes a new place, at the back.
//
// Wake-ups: a waiter listens on a channel of its own; a release (or a
// waiter's departure, or a place that expired) announces only to the first
// waiter in the queue, so one release costs one attempt, not one per
// waiting process.
//
// The lease is the mutex's (validity after elapsed time and drift, per-node
// deadlines, cleanup, fencing tokens with Options::fencing, the durability
// vote); Client::Extend, Release and AutoRenew take it. Its Release (this
// class's or the Client's) also takes the holder's place out of the queue
// and wakes the next waiter. TryAcquire never jumps the queue: it succeeds
// only when the lock is free and nobody waits.
//
// Keys on each node, for lock key W (Options::key_prefix + resource): W
// (the holder's token: the key a plain lock of that name uses), W:fair:q
// (places by ticket), W:fair:exp (their expiries on the node's clock), and
// with fencing W:fence. On a Redis Cluster node the resource needs a hash
// tag. Nodes that forbid scripting refuse it, naming the node.
//
// Thread-safety: a FairLock is a thin, stateless wrapper; share it. A
// FairMutex is like Mutex. REQUIRES: the Client outlives them; it takes the
// lock family's calls (Client::AcquireFamily: made by Client::Create, or
// forwarding to one); another answers kUnimplemented.

#ifndef REDLOCK_FAIR_MUTEX_H_
#define REDLOCK_FAIR_MUTEX_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/lease.h"
#include "redlock/mutex.h"
#include "redlock/node_status.h"
#include "redlock/renewal.h"
#include "redlock/stop_token.h"

namespace redlock {

// The fair lock's own option (the rest are the Client's Options).
struct FairOptions {
  // How long a waiter's place outlives the last heartbeat a quorum
  // confirmed: a dead or paused waiter holds up the queue that long at most
  // (plus a heartbeat), and a waiter paused longer loses its place. At least
  // 30 ms and 3 x Options::node_timeout. Default: 2 s.
  absl::Duration place_ttl = absl::Seconds(2);
};

// One node's view of a fair lock (FairLock::Inspect).
struct FairNodeView {
  std::string node;                                       // "host:port"
  absl::Status status;                                    // why the node could not be read
  std::string holder;                                     // the holder's token, "" when free
  absl::Duration holder_ttl_left = absl::ZeroDuration();  // the holder key's ttl left
  int waiting = 0;                                        // live places
  // The first 64 live places, in the order they are served.
  std::vector<FamilyNodeView::Place> queue;
};

// A fair lock on `resource`: waiters are served in the order they took
// their places (docs/guide/lock-family.md, "Fair lock"). Use:
//   redlock::FairLock jobs(client.get(), "jobs/import");
//   absl::StatusOr<redlock::Lease> l = jobs.Acquire(absl::Seconds(10), absl::Seconds(30));
//   if (l.ok()) { Work(l->fencing_token()); (void)jobs.Release(*l); }
class FairLock : public LeaseCalls {
 public:
  // `client` must outlive the lock; a cheap object, any number per resource.
  FairLock(Client* client, std::string resource, FairOptions options = FairOptions());

  // One attempt, without a place: held only when the lock is free and
  // nobody waits (kAborted otherwise).
  [[nodiscard]] absl::StatusOr<Lease> TryAcquire(absl::Duration ttl);
  // A place in the queue, then the lock when the place is the first:
  // until held, `wait` passed (kDeadlineExceeded), `stop` (kCancelled), or
  // the place lost (kAborted, Outcome::Kind::kPlaceLost). `wait` may be
  // infinite; zero is TryAcquire. Every end but a grant takes the place out
  // of the queue.
  [[nodiscard]] absl::StatusOr<Lease> Acquire(absl::Duration ttl, absl::Duration wait,
                                              const StopToken& stop = StopToken());
  // The same; `done` runs on the client's I/O thread.
  void AcquireAsync(absl::Duration ttl, absl::Duration wait, const StopToken& stop,
                    Client::LeaseCallback done);

  // A fair lease of this resource from its token alone, as Lease::ForToken
  // makes a plain one (for a holder in another process: `redlock acquire
  // --fair` prints the token). Good for Release, which then also takes the
  // holder's place out and wakes the next waiter, and for Extend; it
  // carries no validity and no fencing token. A plain Lease::ForToken of a
  // fair holder's token frees the lock key but leaves the place until it
  // lapses (place_ttl), and the next waiter learns of the release only at
  // its next heartbeat.
  [[nodiscard]] Lease ForToken(std::string token) const;
  // Every node's view: the holder and the queue (read-only).
  [[nodiscard]] absl::StatusOr<std::vector<FairNodeView>> Inspect();

  // The resource's name.
  const std::string& resource() const { return resource_; }
  // The options it was made with.
  const FairOptions& options() const { return options_; }

 private:
  Client::FamilyRequest Request(absl::Duration ttl, std::optional<absl::Duration> wait,
                                const StopToken& stop) const;

  const std::string resource_;
  const FairOptions options_;
};

// A TimedLockable fair lock: redlock::Mutex's code and contract (renewal
// while held, status(), held_ok(), lost(), cancellation through
// MutexOptions::stop, lock() that aborts only on errors waiting cannot fix)
// with a FairLock underneath. try_lock() takes the lock only when it is
// free and nobody waits; try_lock_for/until and lock() take a place. A
// place lost while lock() waits is taken again (at the back); try_lock_for
// returns false with the kAborted status.
//
// Why a class of its own over the mutex's code, not a flag of Mutex: its
// try_lock means something else (it never jumps the queue), it has an
// option of its own (the place's ttl), and a type of its own keeps a fair
// and a plain lock of one resource from being mixed by accident.
class FairMutex {
 public:
  // `client` must outlive the mutex.
  FairMutex(Client* client, std::string resource, MutexOptions options = MutexOptions(),
            FairOptions fair = FairOptions());
  FairMutex(const FairMutex&) = delete;
  FairMutex& operator=(const FairMutex&) = delete;

  // Takes a place and waits for the lock (a lost place: a new one, at the back).
  void lock() { mutex_.lock(); }
  // The lock only when it is free and nobody waits.
  bool try_lock() { return mutex_.try_lock(); }
  // A place, then the lock within `d`.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return mutex_.try_lock_for(d);
  }
  // A place, then the lock by `t`.
  template <class ClockT, class DurationT>
  bool try_lock_until(const std::chrono::time_point<ClockT, DurationT>& t) {
    return mutex_.try_lock_until(t);
  }
  // Releases the lock and wakes the next waiter.
  void unlock() noexcept { mutex_.unlock(); }

  // Why the last lock call failed, or how the held lease is doing (Mutex::status).
  absl::Status status() const { return mutex_.status(); }
  // True while the lock is held and its lease still valid (Mutex::held_ok).
  bool held_ok() const { return mutex_.held_ok(); }
  // Stopped when the held lease is lost (Mutex::lost).
  StopToken lost() const { return mutex_.lost(); }
  // The held lease.
  Lease lease() const { return mutex_.lease(); }
  // The resource's name.
  const std::string& resource() const { return fair_->resource(); }
  // The lock underneath.
  FairLock& fair_lock() { return *fair_; }

 private:
  // Shared with the mutex's acquisition function.
  std::shared_ptr<FairLock> fair_;
  Mutex mutex_;
};

}  // namespace redlock

#endif  // REDLOCK_FAIR_MUTEX_H_
