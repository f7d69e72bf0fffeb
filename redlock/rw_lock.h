// redlock/rw_lock.h: a reader-writer lock on N independent Redis masters.
//
// Many readers (shared leases) or one writer (an exclusive lease), with the
// mutex's guarantees: each acquisition goes to every node at once with its
// own deadline, needs the client's quorum, has validity = ttl - elapsed -
// drift, removes what a failed attempt set, retries or waits (woken by
// release announcements), is cancellable, and with Options::fencing carries
// a fencing token.
//
//   redlock::ReadWriteLock rw(client.get(), "catalog");
//   absl::StatusOr<redlock::Lease> r = rw.AcquireShared(absl::Seconds(10), absl::Seconds(2));
//   if (r.ok()) { ServeFromCatalog(); (void)rw.Release(*r); }
//
//   absl::StatusOr<redlock::Lease> w = rw.AcquireExclusive(absl::Seconds(10), absl::Seconds(5));
//   if (w.ok()) { RebuildCatalog(w->fencing_token()); (void)rw.Release(*w); }
//
// Policy: writer preference. A writer that has to wait (AcquireExclusive
// with a wait) records its intent on the nodes it reaches; while a quorum
// of nodes carries an intent, no new reader gets in, so the readers already
// in finish and the writer goes next: a stream of readers cannot starve a
// waiting writer (it waits at most for the readers that held when it
// started waiting). The intent lapses on its own when its writer is gone
// (2 * Options::wait_poll_max + 2 * node_timeout after its last attempt)
// and is withdrawn when the writer's call ends. In exchange, a stream of
// writers can starve readers. TryAcquireExclusive (one attempt) never
// records an intent.
//
// Leases: a writer's lease is a plain lease on the resource's lock key (the
// key a Client or Mutex lock of the same name uses: a plain lock excludes
// readers and writers, but it does not see readers, so do not mix plain
// locks and this lock on one name). A reader's lease has shared() true.
// Both extend, release and renew through this class or the Client itself
// (Client::Extend, Release, AutoRenew know a shared lease).
//
// Fencing (Options::fencing): writers and readers share one counter. A
// writer's fencing_token() is the next odd number above what its quorum
// read (strictly increasing across writers, above every earlier reader); a
// reader's is the least even number not below it and never 0 (strictly
// above every earlier writer, shared by readers holding at the same time;
// its own round 2 writes it to a quorum). Pass either to the protected
// store, whose fence rises on reads too (FencedReadScript, fencing.h): a
// writer paused past its lease is refused once a later reader has read, and
// a stale reader once a later writer has written. After a writer's failed
// attempt left a raised counter on some nodes, an overlapping reader may
// carry a higher token than another; the store then refuses the lower
// one's reads.
//
// Keys on each node, for lock key W (Options::key_prefix + resource): W
// (the writer's token), W:rw:readers (a sorted set of reader tokens by
// expiry on the node's clock), W:rw:wait (waiting writers' intents), and
// with fencing W:fence. Readers' entries expire by the node's clock like
// keys do, so clock jumps and restarts without persistence affect readers
// exactly as they affect the mutex (chaos/README.md, "Safety in brief").
//
// Thread-safety: a ReadWriteLock is a thin, stateless wrapper; share it.
// REQUIRES: the Client outlives it. Any Client that takes the lock family's
// calls works (Client::AcquireFamily: one made by Client::Create, or one
// that wraps such a client and forwards them); another answers
// kUnimplemented.

#ifndef REDLOCK_RW_LOCK_H_
#define REDLOCK_RW_LOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/lease.h"
#include "redlock/mutex.h"
#include "redlock/renewal.h"
#include "redlock/stop_token.h"

namespace redlock {

// One node's view of a reader-writer lock (ReadWriteLock::Inspect).
struct ReadWriteNodeView {
  // The node, "host:port".
  std::string node;
  absl::Status status;  // why the node could not be read
  std::string writer;   // the writer's token, "" when none
  // The writer's remaining ttl, when there is one.
  absl::Duration writer_ttl_left = absl::ZeroDuration();
  int readers = 0;          // live reader entries
  int waiting_writers = 0;  // live writer intents
  // The fencing counter stored on this node (0 without fencing).
  uint64_t fence_counter = 0;
};

// ReadWriteLock: shared leases for readers, an exclusive lease for one
// writer, writer preference (see the top of this file).
class ReadWriteLock : public LeaseCalls {
 public:
  // A reader-writer lock on `resource` (a lock name, as Client takes it).
  // REQUIRES: `client` is not null, outlives it, and was made by
  // Client::Create.
  ReadWriteLock(Client* client, std::string resource);

  // ---- Readers ----
  // One attempt. kAborted while a writer holds or waits (writer preference).
  [[nodiscard]] absl::StatusOr<Lease> TryAcquireShared(absl::Duration ttl);
  // Until held, `wait` passed (kDeadlineExceeded) or `stop` (kCancelled);
  // woken when the writer releases or withdraws. `wait` may be infinite.
  [[nodiscard]] absl::StatusOr<Lease> AcquireShared(absl::Duration ttl, absl::Duration wait,
                                                    const StopToken& stop = StopToken());
  // AcquireShared, asynchronously: `done` runs once, on the client's I/O
  // thread.
  void AcquireSharedAsync(absl::Duration ttl, absl::Duration wait, const StopToken& stop,
                          Client::LeaseCallback done);

  // ---- Writers ----
  // One attempt, no intent recorded. kAborted while readers or a writer hold.
  [[nodiscard]] absl::StatusOr<Lease> TryAcquireExclusive(absl::Duration ttl);
  // Until held, `wait` passed or `stop`, with writer preference (see the
  // file comment); woken when the last reader or the writer releases.
  [[nodiscard]] absl::StatusOr<Lease> AcquireExclusive(absl::Duration ttl, absl::Duration wait,
                                                       const StopToken& stop = StopToken());
  // AcquireExclusive, asynchronously: `done` runs once, on the client's I/O
  // thread.
  void AcquireExclusiveAsync(absl::Duration ttl, absl::Duration wait, const StopToken& stop,
                             Client::LeaseCallback done);

  // ---- Either kind ----
  // Extend, Release and AutoRenew (LeaseCalls) work on a reader's and a
  // writer's lease; releasing the last reader, or a writer, announces it to
  // waiters.

  // Every node's view of the lock (read-only).
  [[nodiscard]] absl::StatusOr<std::vector<ReadWriteNodeView>> Inspect();

  // The resource it was created with.
  const std::string& resource() const { return resource_; }

 private:
  // The reader's (shared) or the writer's request to the Client
  // (Client::AcquireFamily), and its blocking and asynchronous calls.
  Client::FamilyRequest Request(bool shared, absl::Duration ttl, std::optional<absl::Duration> wait,
                                const StopToken& stop) const;
  absl::StatusOr<Lease> Blocking(bool shared, absl::Duration ttl,
                                 std::optional<absl::Duration> wait, const StopToken& stop);
  void Async(bool shared, absl::Duration ttl, absl::Duration wait, const StopToken& stop,
             Client::LeaseCallback done);

  const std::string resource_;
};

// A std::shared_mutex-style adapter (SharedTimedLockable): lock/try_lock/
// try_lock_for/try_lock_until/unlock for the writer, lock_shared/
// try_lock_shared/try_lock_shared_for/try_lock_shared_until/unlock_shared
// for readers; usable with std::unique_lock, std::shared_lock,
// std::lock_guard and std::scoped_lock.
//
//   redlock::SharedMutex catalog(client.get(), "catalog");
//   {
//     std::shared_lock<redlock::SharedMutex> read(catalog, std::chrono::seconds(2));
//     if (read.owns_lock()) Serve();
//   }
//   {
//     std::unique_lock<redlock::SharedMutex> write(catalog, std::chrono::seconds(5));
//     if (write.owns_lock()) Rebuild(catalog.lease().fencing_token());
//   }
//
// Each thread's shared lock is its own reader lease (unlock_shared releases
// the calling thread's; a thread holds at most one, as with
// std::shared_mutex). Leases are renewed while held (MutexOptions), and a
// loss shows in held_ok()/lost() (the writer) and shared_held_ok()/
// shared_lost() (the calling thread's reader), as for redlock::Mutex.
// lock() and lock_shared() block until held and abort the process on an
// error waiting cannot fix (see redlock/mutex.h); prefer the timed forms.
// MutexOptions::stop cancels pending calls (a cancelled lock()/lock_shared()
// returns in the lost state).
// REQUIRES: the Client outlives the SharedMutex.
class SharedMutex {
 public:
  // A shared mutex on `resource` (a lock name, as Client takes it); nothing is
  // sent until it is locked. REQUIRES: `client` is not null and outlives it.
  SharedMutex(Client* client, std::string resource, MutexOptions options = MutexOptions());
  // Releases whatever this object still holds.
  ~SharedMutex();
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  // The writer's side, as Mutex's: blocks until held (aborts on an error
  // waiting cannot fix; see redlock/mutex.h).
  void lock();
  // The writer's side: one attempt.
  bool try_lock();
  // The writer's side: until held or the time has passed, with writer
  // preference.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return LockFor(false, internal::ToAbslDuration(d));
  }
  // The writer's side: any clock, converted to a wait from now on that clock.
  template <class ClockT, class DurationT>
  bool try_lock_until(const std::chrono::time_point<ClockT, DurationT>& t) {
    return LockFor(false, internal::ToAbslDuration(t - ClockT::now()));
  }
  // Releases the writer's lease and stops its renewal; a failure is recorded
  // in status().
  void unlock() noexcept;

  // The calling thread's reader lease: blocks until held (aborts on an error
  // waiting cannot fix; see redlock/mutex.h).
  void lock_shared();
  // A reader lease for the calling thread: one attempt.
  bool try_lock_shared();
  // A reader lease for the calling thread: until held or the time has passed.
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    return LockFor(true, internal::ToAbslDuration(d));
  }
  // A reader lease for the calling thread: any clock, converted to a wait
  // from now on that clock.
  template <class ClockT, class DurationT>
  bool try_lock_shared_until(const std::chrono::time_point<ClockT, DurationT>& t) {
    return LockFor(true, internal::ToAbslDuration(t - ClockT::now()));
  }
  // Releases the calling thread's reader lease and stops its renewal; a
  // failure (or no lease held by this thread) is recorded in status().
  void unlock_shared() noexcept;

  // Why the last call on this object failed (OK after a success).
  absl::Status status() const;
  // The writer's lock (this object's): held, not lost, validity left.
  bool held_ok() const;
  // Stopped when the writer's lock is lost while held (as Mutex::lost).
  StopToken lost() const;
  // The writer's lease as last renewed; empty when not held.
  Lease lease() const;
  // The calling thread's reader lease: held, not lost, validity left.
  bool shared_held_ok() const;
  // Stopped when the calling thread's reader lease is lost while held.
  StopToken shared_lost() const;
  // The calling thread's reader lease as last renewed; empty when none.
  Lease shared_lease() const;

  // The ReadWriteLock underneath (for Inspect, or leases by hand).
  ReadWriteLock& rw_lock() { return rw_; }

 private:
  struct Hold;
  bool LockFor(bool shared, absl::Duration wait);
  void LockBlocking(bool shared);
  bool Adopt(bool shared, absl::StatusOr<Lease> acquired);
  void Unlock(bool shared) noexcept;
  std::shared_ptr<Hold> Find(bool shared) const;
  // held_ok(), lost(), lease() and their shared_ forms.
  bool HeldOk(bool shared) const;
  StopToken Lost(bool shared) const;
  Lease LeaseOf(bool shared) const;
  void SetStatus(absl::Status s) const;

  // status(): shared with the renewals' lost callbacks.
  struct StatusCell {
    void Set(absl::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      status = std::move(s);
    }
    absl::Status Get() const {
      std::lock_guard<std::mutex> lock(mu);
      return status;
    }
    mutable std::mutex mu;
    absl::Status status;
  };

  Client* const client_;
  ReadWriteLock rw_;
  const MutexOptions options_;
  const std::shared_ptr<StatusCell> status_ = std::make_shared<StatusCell>();
  mutable std::mutex mu_;
  std::shared_ptr<Hold> writer_;                              // guarded by mu_
  std::map<std::thread::id, std::shared_ptr<Hold>> readers_;  // guarded by mu_
};

}  // namespace redlock

#endif  // REDLOCK_RW_LOCK_H_
