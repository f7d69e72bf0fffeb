// The one interface redlock-bench measures: something that takes a lock on a
// resource and releases it, used by one caller thread. The library (Client,
// MultiLock) and the hiredis baselines (baselines.h) all implement it, so the
// same cycle code times all of them. Its asynchronous counterpart,
// AsyncLocker, is implemented by the library's *Async calls and by the
// pipelined limit (pipelined_limit.h), timed by the same chain code.

#ifndef REDLOCK_BENCH_LOCKER_H_
#define REDLOCK_BENCH_LOCKER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/workload.h"
#include "redlock/client.h"

namespace redlock::bench {

class Locker {
 public:
  virtual ~Locker() = default;
  // One attempt at the lock (no retries). The codes follow docs/design.md 7.1.
  virtual absl::Status Acquire(absl::Duration ttl) = 0;
  // Releases what the last successful Acquire took.
  virtual absl::Status Release() = 0;
};

// The Locker of one of the library's lock objects (FairLock,
// ReadWriteLock, ...) on one resource: its try `Try` (one attempt), then
// Release of the lease it took.
template <typename Lock, absl::StatusOr<Lease> (Lock::*Try)(absl::Duration)>
class TryLocker final : public Locker {
 public:
  TryLocker(Client* client, std::string resource) : lock_(client, std::move(resource)) {}
  absl::Status Acquire(absl::Duration ttl) override {
    absl::StatusOr<Lease> lease = (lock_.*Try)(ttl);
    if (!lease.ok()) return lease.status();
    lease_ = *std::move(lease);
    return absl::OkStatus();
  }
  absl::Status Release() override { return lock_.Release(lease_); }

 private:
  Lock lock_;
  Lease lease_;
};

// acquire, then release when the acquire succeeded; both timed.
CycleFn LockCycle(std::unique_ptr<Locker> locker, absl::Duration ttl);

// One chain's lock, asynchronous: each call returns at once and calls `done`
// exactly once, on any thread. A chain never has two calls in flight.
class AsyncLocker {
 public:
  using Done = absl::AnyInvocable<void(absl::Status)>;
  virtual ~AsyncLocker() = default;
  virtual void AcquireAsync(absl::Duration ttl, Done done) = 0;
  virtual void ReleaseAsync(Done done) = 0;
};

// LockCycle's asynchronous form, for RunChains: acquire, then release when
// the acquire succeeded; both timed from the call to the callback.
ChainFn LockChain(std::unique_ptr<AsyncLocker> locker, absl::Duration ttl);

// Client::TryAcquireAsync + Client::ReleaseAsync of one resource. The
// client must outlive the calls in flight (destroying it cancels them).
std::unique_ptr<AsyncLocker> NewAsyncClientLocker(Client* client, std::string resource);

// The same cycle written with co_await (redlock/coro.h): a coroutine per
// cycle, resuming on the client's I/O thread. The client must outlive the
// chain's cycles.
ChainFn CoroLockChain(Client* client, std::string resource, absl::Duration ttl);

// Client::TryAcquire + Client::Release of one resource; with `extend`, an
// Extend to the same ttl right after each acquisition (timed with it). The
// client is shared by every caller and must outlive the locker.
std::unique_ptr<Locker> NewClientLocker(Client* client, std::string resource, bool extend = false);

// MultiLock::TryAcquire + Release of a set of resources.
std::unique_ptr<Locker> NewMultiLocker(Client* client, bool all_nodes,
                                       std::vector<std::string> resources);

// A contended hot resource shared by several callers of one Client, for the
// hand-off latency: the time from the holder's Release returning to the next
// waiter's Acquire(resource, ttl, wait) returning. The protocol makes every
// acquisition a hand-off to a caller blocked in the library's wait:
//   - a holder releases only once every other caller is inside Acquire (and
//     after `hold`, so their first attempts have found the lock held);
//   - after releasing, it does not contend again until someone else has taken
//     the lock (it is woken by that acquisition, not by the release, so the
//     harness never hands the lock over by itself).
// An acquisition by a caller that entered Acquire after the Release started
// is not counted as a hand-off (not_waiting()).
class HotResource {
 public:
  // One caller's lock for the hot resource, on any lock service: a blocking
  // acquire with a wait, and the release of what it took.
  class Waiter {
   public:
    virtual ~Waiter() = default;
    virtual absl::Status Acquire(const std::string& resource, absl::Duration ttl,
                                 absl::Duration wait) = 0;
    virtual absl::Status Release() = 0;
  };
  struct Config {
    std::string resource;
    absl::Duration ttl = absl::Seconds(10);
    absl::Duration wait = absl::Seconds(2);  // Acquire's wait, and every internal wait
    absl::Duration hold = absl::Microseconds(200);
  };
  // Callers share `client` (Client::Acquire with a wait, Client::Release).
  HotResource(Client* client, Config config);
  // Caller `id` uses make_waiter(id), built on its own thread's first cycle.
  HotResource(std::function<std::unique_ptr<Waiter>(int id)> make_waiter, Config config);
  ~HotResource();

  // One cycle of caller `id`: Acquire with a wait, hold, Release, then wait
  // (bounded) for the lock to pass to someone else.
  CycleFn Cycle(int id);
  // Wakes callers waiting for a hand-off; no new waits start afterwards.
  void Stop();
  // Zeroes the counters below (at the start of the measurement).
  void ResetCounters();
  // Acquisitions whose Acquire returned before the previous holder's Release
  // did (recorded as a zero hand-off).
  int64_t overlaps() const;
  // Acquisitions by callers that were not yet waiting when the Release
  // started (not recorded as hand-offs).
  int64_t not_waiting() const;

 private:
  struct State;
  const std::function<std::unique_ptr<Waiter>(int id)> make_waiter_;
  const Config config_;
  std::shared_ptr<State> state_;
};

// HotResource's waiter over `service` (a Client*, a backend's session, ...):
// its Acquire(resource, ttl, wait) returns the `Held` its Release takes.
template <typename Service, typename Held>
class WaiterOf final : public HotResource::Waiter {
 public:
  explicit WaiterOf(Service service) : service_(std::move(service)) {}
  absl::Status Acquire(const std::string& resource, absl::Duration ttl,
                       absl::Duration wait) override {
    absl::StatusOr<Held> held = service_->Acquire(resource, ttl, wait);
    if (!held.ok()) return held.status();
    held_ = *std::move(held);
    return absl::OkStatus();
  }
  absl::Status Release() override { return service_->Release(held_); }

 private:
  Service service_;
  Held held_;
};

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_LOCKER_H_
