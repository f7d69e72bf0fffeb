// redlock/semaphore.h: at most K holders at once, on N independent Redis
// masters.
//
//   redlock::Semaphore imports(client.get(), "imports", /*permits=*/4);
//   absl::StatusOr<redlock::Permit> p = imports.Acquire(absl::Seconds(30), absl::Seconds(10));
//   if (!p.ok()) return p.status();        // kDeadlineExceeded: 4 imports ran all along
//   auto renewal = imports.AutoRenew(*p, {}, [](absl::Status why) { /* stop the import */ });
//   RunImport(p->slot(), p->fencing_token());
//   (void)imports.Release(*p);
//
// How: the K permits are K lock keys "<resource>:permit:0" ..
// "<resource>:permit:<K-1>", each taken with the ordinary Redlock quorum
// (a majority by default), so each permit has at most one holder and the
// semaphore at most K. One attempt is one round trip: every node takes the
// first free permit in an order the client draws at random, and the attempt
// succeeds when a quorum of nodes took the same one (nodes in the same
// state do); the others' picks are removed at once. Why not count holders
// per node and grant on a majority: with N=5 and K=2, three clients can
// each get 3 of 5 nodes while no node counts more than 2 (the chaos
// harness's broken "majority-count" client shows it). Counting on more
// than N*K/(K+1) nodes is safe, but it needs every node for K >= 4 at
// N=5: one node down stops it. Permits keep the mutex's availability for
// every K (a minority of nodes may be down). Details and measurements:
// docs/guide/lock-family.md, "Semaphore".
//
// Each permit is a lease with the mutex's guarantees (validity, drift,
// per-node deadlines, cleanup of failed attempts, retries, the wait woken
// by release announcements of any permit, cancellation, the durability
// vote) and its own renewal and release; a Permit's lease() is a plain
// Lease, so Client::Extend/Release/AutoRenew and `redlock status
// <resource>:permit:<i>` work on it too. With Options::fencing, a permit's
// fencing_token() strictly increases across successive holders of that
// permit (one counter per permit: compare tokens per slot()).
//
// K is part of the semaphore's identity: every user of a resource must
// give the same K (one asking for more permits could take permits the
// others do not know of).
//
// Thread-safety: a Semaphore is a thin, stateless wrapper; share it.
// REQUIRES: the Client outlives it; it takes the lock family's calls
// (Client::AcquireFamily: made by Client::Create, or forwarding to one).

#ifndef REDLOCK_SEMAPHORE_H_
#define REDLOCK_SEMAPHORE_H_

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
#include "redlock/renewal.h"
#include "redlock/stop_token.h"

namespace redlock {

// A held permit. A copy names the same permit.
class Permit {
 public:
  Permit() = default;
  // The permit of slot `slot` held by `lease` (what Semaphore's calls make).
  Permit(Lease lease, int slot) : lease_(std::move(lease)), slot_(slot) {}

  // The permit's lease: resource "<semaphore>:permit:<slot>".
  const Lease& lease() const { return lease_; }
  // Which of the K permits (0-based).
  int slot() const { return slot_; }
  // The permit's own fencing token (with Options::fencing; 0 otherwise):
  // it increases across successive holders of this slot.
  uint64_t fencing_token() const { return lease_.fencing_token(); }
  // The lease's valid_until(): the permit is held until then.
  Lease::TimePoint valid_until() const { return lease_.valid_until(); }
  // The lease's TimeLeft().
  absl::Duration TimeLeft() const { return lease_.TimeLeft(); }
  // True for a permit returned by a successful call.
  bool has_value() const { return lease_.has_value(); }
  // has_value().
  explicit operator bool() const { return has_value(); }

 private:
  Lease lease_;
  int slot_ = -1;
};

// Semaphore: at most K holders of one resource at once, as K permits (see
// the top of this file). A thin wrapper: share it.
class Semaphore {
 public:
  // The completion of AcquireAsync: a permit, or why not. Runs once, on the
  // client's I/O thread.
  using PermitCallback = absl::AnyInvocable<void(absl::StatusOr<Permit>)>;

  // At most this many permits (each attempt's script looks at all of them).
  static constexpr int kMaxPermits = 1024;

  // REQUIRES: 1 <= permits <= kMaxPermits (else every call is kInvalidArgument).
  Semaphore(Client* client, std::string resource, int permits);

  // One attempt. kAborted: all K permits are held (or the nodes disagree on
  // which is free; a later attempt may succeed).
  [[nodiscard]] absl::StatusOr<Permit> TryAcquire(absl::Duration ttl);
  // Until a permit is held, `wait` passed (kDeadlineExceeded) or `stop`
  // (kCancelled); woken by the release of any permit. `wait` may be infinite.
  [[nodiscard]] absl::StatusOr<Permit> Acquire(absl::Duration ttl, absl::Duration wait,
                                               const StopToken& stop = StopToken());
  // Acquire, asynchronously.
  void AcquireAsync(absl::Duration ttl, absl::Duration wait, const StopToken& stop,
                    PermitCallback done);

  // The Client's calls on the permit's lease.
  [[nodiscard]] absl::StatusOr<Permit> Extend(const Permit& permit, absl::Duration ttl);
  // Client::Release of the permit's lease: the permit is free again, and
  // waiters are woken.
  [[nodiscard]] absl::Status Release(const Permit& permit);
  // Client::AutoRenew of the permit's lease.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Renewal>> AutoRenew(
      const Permit& permit, RenewOptions options, absl::AnyInvocable<void(absl::Status)> on_lost);

  // How many permits a quorum of nodes holds now (each permit's keys are
  // read on every node; read-only): the permits certainly taken.
  [[nodiscard]] absl::StatusOr<int> Held();

  // The resource it was created with.
  const std::string& resource() const { return resource_; }
  // K, the number of permits.
  int permits() const { return permits_; }
  // The resource name of permit `slot`: "<resource>:permit:<slot>".
  std::string PermitResource(int slot) const;

 private:
  // The request to the Client (Client::AcquireFamily, InspectFamily).
  Client::FamilyRequest Request(absl::Duration ttl, std::optional<absl::Duration> wait,
                                const StopToken& stop) const;
  absl::StatusOr<Permit> Blocking(absl::Duration ttl, std::optional<absl::Duration> wait,
                                  const StopToken& stop);

  Client* const client_;
  const std::string resource_;
  const int permits_;
};

}  // namespace redlock

#endif  // REDLOCK_SEMAPHORE_H_
