// redlock/renewal.h: keeping a lease alive while its holder works
// (Client::AutoRenew), and knowing when it is at risk or lost.
//
//   redlock::RenewOptions renew;
//   renew.on_at_risk = [](const redlock::Lease& l, const absl::Status& why) {
//     LOG(WARNING) << l.resource() << " at risk: " << why;  // stop taking new work
//   };
//   auto renewal = client->AutoRenew(*lease, renew, [](absl::Status why) {
//     LOG(ERROR) << "lost: " << why;
//   });
//   redlock::StopToken lost = (*renewal)->lost();
//   while (!lost.stop_requested() && HasWork()) DoOneItem();
//
// Thread-safety: a Renewal may be used from any thread. Callbacks run on the
// client's I/O thread, one at a time, and must not block.

#ifndef REDLOCK_RENEWAL_H_
#define REDLOCK_RENEWAL_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "redlock/lease.h"
#include "redlock/stop_token.h"

namespace redlock {

// Extension policy of Client::AutoRenew.
struct RenewOptions {
  // The ttl every extension sets. Zero: the lease's own ttl. Default: zero.
  absl::Duration ttl = absl::ZeroDuration();

  // Extend when this fraction of the ttl has passed since the lease was
  // acquired or last extended. In (0, 1). Default: 1/3, so two extensions
  // can fail before the lease runs out.
  double interval_fraction = 1.0 / 3.0;

  // Bounded renewal (the Redlock spec asks for a limit on reacquisition).
  // At most this many extensions; 0 means no limit. Default: 0.
  int max_renewals = 0;
  // No extension that would hold the lock past the first acquisition plus
  // this. Default: no limit.
  absl::Duration max_hold = absl::InfiniteDuration();
  // Past either limit, renewal stops: the lease runs out at its validity,
  // at-risk fires `at_risk` before that, and the loss is reported then.

  // False: never extend, only watch (at-risk and lost by the validity), for
  // a lease its holder does not want renewed. Default: true.
  bool extend = true;

  // The lease is "at risk" when less than this validity is left and nothing
  // is expected to renew it: the last extension failed (none succeeded
  // since), or the lease is not extended (`extend` false, or renewal stopped
  // at a limit). The loss is likely but not certain yet; stop starting work.
  // A healthy extension (due, or on its way) is no risk: at-risk fires when
  // it fails, not while it is in flight, and a watched lease is at risk
  // exactly `at_risk` before its validity ends. Zero: one renewal period
  // (ttl * interval_fraction). Default: zero.
  absl::Duration at_risk = absl::ZeroDuration();
  // Called each time the lease becomes at risk (again after a successful
  // extension cleared it), with the lease and why. Optional.
  std::function<void(const Lease& lease, const absl::Status& why)> on_at_risk;
};

// A running auto-renewal (see Client::AutoRenew). Destroying the handle stops
// the renewal; the lease itself stays until its ttl runs out or Release.
// The handle may outlive the Client; it is inert afterwards.
class Renewal {
 public:
  virtual ~Renewal() = default;
  // Stops renewing (idempotent). Does not release the lease; lost() is not
  // stopped by it.
  virtual void Stop() = 0;
  // The lease as last extended (its valid_until moves forward); the first
  // lease of a MultiLease's set.
  virtual Lease lease() const = 0;
  // Every lease of the set (one for a plain lease).
  virtual std::vector<Lease> leases() const = 0;
  // True until stopped, lost, or the client is destroyed.
  virtual bool active() const = 0;
  // True from the at-risk notification until an extension succeeds.
  virtual bool at_risk() const = 0;
  // Stopped when the lease is lost, at the moment on_lost is called: poll it,
  // register a StopCallback, or pass it to another cancellable call. Also
  // stopped when the client is destroyed while the renewal is active (the
  // lease is no longer renewed and will run out; on_lost is not called,
  // status() says kCancelled), before the client's destructor returns, on
  // its I/O thread.
  virtual StopToken lost() const = 0;
  // Why the renewal ended: OK while active or after Stop()/Release, the
  // loss otherwise (kFailedPrecondition: a quorum no longer holds the token;
  // kDeadlineExceeded: the validity ran out before an extension succeeded,
  // or after a limit of RenewOptions); kCancelled when the client was
  // destroyed while it was active.
  virtual absl::Status status() const = 0;
  // Extensions made so far.
  virtual int renewals() const = 0;
};

}  // namespace redlock

#endif  // REDLOCK_RENEWAL_H_
