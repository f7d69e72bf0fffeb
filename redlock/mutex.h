// redlock/mutex.h: a distributed lock as a standard TimedLockable.
//
// Usage:
//
//   redlock::Mutex mutex(client.get(), "jobs/nightly-report");
//   {
//     std::unique_lock<redlock::Mutex> lock(mutex, std::chrono::seconds(5));  // try_lock_for
//     if (!lock.owns_lock()) {
//       LOG(WARNING) << "not run: " << mutex.status();
//       return;
//     }
//     RunReport(mutex.lease().fencing_token());
//   }  // unlock(): released on the nodes
//
// Works with std::unique_lock, std::lock_guard, std::scoped_lock and
// std::try_lock. While held, the lease is renewed automatically (see
// MutexOptions::auto_renew); if the renewal finds the lease lost, status()
// says so at once (held_ok() turns false) while the object stays "locked"
// for the standard protocol: the caller must check before acting on shared
// state, or better, pass lease().fencing_token() to the protected resource.
//
// lock() blocks until the lock is held, however long that takes, and cannot
// report errors (the standard signature returns void and this library never
// throws): on a permanent error (an invalid resource or ttl, the Client
// destroyed) it aborts the process with a message. Production code should
// prefer try_lock_for / try_lock_until, which return false and leave the
// reason in status().
//
// Cancellation: MutexOptions::stop cancels a pending lock(), try_lock_for()
// or try_lock_until() from another thread. try_lock_for/until then return
// false with kCancelled in status(); lock(), which must return holding the
// lock, returns in the "lost" state instead: held_ok() is false, status() is
// kCancelled, lost() is stopped, and the unlock() that follows releases
// nothing. Nothing is left on the nodes either way.
//
// Thread-safety: like std::timed_mutex. Several threads may contend through
// one Mutex object: the distributed lock decides; status() reports the last
// call made on the object. Unlocking from a thread other than the one that
// locked is allowed for Mutex (the lock belongs to the process), and is an
// error for RecursiveMutex.
// REQUIRES: the Client outlives the Mutex.

#ifndef REDLOCK_MUTEX_H_
#define REDLOCK_MUTEX_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/lease.h"
#include "redlock/renewal.h"
#include "redlock/stop_token.h"

namespace redlock {

// How a Mutex (and RecursiveMutex, SharedMutex) holds its lock: the lease's
// ttl, its renewal, and what cancels a pending lock.
struct MutexOptions {
  // ttl of the lease on the nodes. With auto_renew, it is also how long the
  // lock outlives a crashed holder. Default: 10 s.
  absl::Duration ttl = absl::Seconds(10);
  // Keep the lease alive while held (Client::AutoRenew). Default: true.
  bool auto_renew = true;
  // Renewal policy when auto_renew is on (redlock/renewal.h): its ttl is the
  // ttl each extension sets (zero: `ttl` above), its limits, its at-risk
  // threshold and callback all apply. Without auto_renew the lease is only
  // watched (at-risk and lost by its validity). Default: extend every ttl/3,
  // no limit.
  RenewOptions renew;
  // Cancels pending lock()/try_lock_for()/try_lock_until() calls (see the
  // file comment). Default: never.
  StopToken stop;
};

namespace internal {
// Saturating conversion of any std::chrono duration to absl::Duration.
template <class Rep, class Period>
absl::Duration ToAbslDuration(const std::chrono::duration<Rep, Period>& d) {
  using Nanos = std::chrono::duration<long double, std::nano>;
  long double ns = std::chrono::duration_cast<Nanos>(d).count();
  if (ns >= static_cast<long double>(std::numeric_limits<int64_t>::max()))
    return absl::InfiniteDuration();
  if (ns <= 0) return absl::ZeroDuration();
  return absl::Nanoseconds(static_cast<int64_t>(ns));
}
}  // namespace internal

// Mutex: one distributed lock as a standard TimedLockable (see the top of this
// file).
class Mutex {
 public:
  // A mutex on `resource` (a lock name, as Client takes it); nothing is sent
  // until it is locked. REQUIRES: `client` is not null and outlives the Mutex.
  Mutex(Client* client, std::string resource, MutexOptions options = MutexOptions());
  // Releases the lock if it is held (errors are swallowed: the lease then
  // runs out at its ttl).
  ~Mutex();
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until held (see the file comment: aborts on permanent errors).
  void lock();
  // One attempt.
  bool try_lock();
  // Keeps trying (woken by release announcements, else jittered polling)
  // until held or the time has passed.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return TryLockFor(internal::ToAbslDuration(d));
  }
  // Any clock: the deadline is converted to a wait from now on that clock.
  template <class ClockT, class DurationT>
  bool try_lock_until(const std::chrono::time_point<ClockT, DurationT>& t) {
    return TryLockFor(internal::ToAbslDuration(t - ClockT::now()));
  }
  // Releases on the nodes and stops the renewal. Never throws; a failure (or
  // unlocking a Mutex that is not held) is recorded in status().
  void unlock() noexcept;

  // OK after a successful call; otherwise why the last call failed (the
  // acquire error, "not held" for a stray unlock, the release error), or the
  // renewal's loss while held.
  absl::Status status() const;
  // True while this object holds the lock, no loss has been detected and the
  // lease (as last renewed) has validity left.
  bool held_ok() const;
  // Stopped when the lock is lost while held (the renewal found it gone, or
  // its validity ran out): poll it, or pass it to work that must stop then.
  // A never-stopped token when not held.
  StopToken lost() const;
  // The current lease (its validity moves with each renewal); empty when
  // not held.
  Lease lease() const;
  // The resource it was created with.
  const std::string& resource() const { return resource_; }

 private:
  friend class FairMutex;
  // Where the lease comes from: one attempt (no wait) or a wait, with
  // options.stop; empty: the Client's TryAcquire and Acquire. FairMutex
  // gives a FairLock's.
  using AcquireFn =
      std::function<absl::StatusOr<Lease>(std::optional<absl::Duration> wait, const StopToken&)>;
  Mutex(Client* client, std::string resource, MutexOptions options, AcquireFn acquire);

  struct State;
  bool TryLockFor(absl::Duration wait);
  bool Adopt(absl::StatusOr<Lease> acquired);

  Client* const client_;
  const std::string resource_;
  const MutexOptions options_;
  const AcquireFn acquire_;
  std::shared_ptr<State> state_;
};

// Re-entrant for the owning thread, like std::recursive_timed_mutex: nested
// locks by the owner are counted locally (one lease on the nodes however
// deep), and the lock is released when the count returns to zero.
class RecursiveMutex {
 public:
  // As Mutex's constructor.
  RecursiveMutex(Client* client, std::string resource, MutexOptions options = MutexOptions())
      : mutex_(client, std::move(resource), std::move(options)) {}
  RecursiveMutex(const RecursiveMutex&) = delete;
  RecursiveMutex& operator=(const RecursiveMutex&) = delete;

  // Blocks until held, or enters again when the calling thread owns it (see
  // Mutex::lock).
  void lock();
  // One attempt, or enters again when the calling thread owns it.
  bool try_lock();
  // As Mutex::try_lock_for, or enters again at once when the calling thread
  // owns it.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return Enter([&] { return mutex_.try_lock_for(d); });
  }
  // As Mutex::try_lock_until, or enters again at once when the calling thread
  // owns it.
  template <class ClockT, class DurationT>
  bool try_lock_until(const std::chrono::time_point<ClockT, DurationT>& t) {
    return Enter([&] { return mutex_.try_lock_until(t); });
  }
  // From a thread that does not own it, or when not held: an error reported
  // in status(), never undefined behaviour.
  void unlock() noexcept;

  // As Mutex::status, for the calls made on this object.
  absl::Status status() const;
  // As Mutex::held_ok.
  bool held_ok() const { return mutex_.held_ok(); }
  // As Mutex::lost.
  StopToken lost() const { return mutex_.lost(); }
  // As Mutex::lease.
  Lease lease() const { return mutex_.lease(); }
  // Nesting depth of the owning thread (0 when not held).
  int depth() const { return depth_.load(); }

 private:
  template <class F>
  bool Enter(F&& acquire) {
    if (owner_.load() == std::this_thread::get_id()) {
      depth_.fetch_add(1);
      SetStatus(absl::OkStatus());
      return true;
    }
    if (!acquire()) {
      SetStatus(mutex_.status());
      return false;
    }
    owner_.store(std::this_thread::get_id());
    depth_.store(1);
    SetStatus(absl::OkStatus());
    return true;
  }
  void SetStatus(absl::Status s);

  Mutex mutex_;
  std::atomic<std::thread::id> owner_{};
  std::atomic<int> depth_{0};
  mutable std::mutex status_mu_;
  absl::Status status_;
};

}  // namespace redlock

#endif  // REDLOCK_MUTEX_H_
