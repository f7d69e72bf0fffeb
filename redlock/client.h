// redlock/client.h: locks on N independent Redis masters (the Redlock
// algorithm).
//
// Usage:
//
//   redlock::Options options;
//   options.nodes = *redlock::ParseEndpointList("127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003");
//   absl::StatusOr<std::unique_ptr<redlock::Client>> client = redlock::Client::Create(options);
//   if (!client.ok()) return client.status();
//
//   absl::StatusOr<redlock::Lease> lease = (*client)->Acquire("orders/42", absl::Seconds(10));
//   if (absl::IsAborted(lease.status())) { /* someone else holds it */ }
//   if (!lease.ok()) return lease.status();
//   ... work that must finish before lease->valid_until() ...
//   (void)(*client)->Release(*lease);
//
// Thread-safety: a Client is safe to use from any number of threads at once.
// All of them share one connection per node; their commands are pipelined on
// it. Share one Client per process and per set of nodes.
//
// Callbacks of the *Async methods (and AutoRenew's on_lost and on_at_risk)
// run on the client's I/O thread, one at a time, never inside a call made on
// another thread. They must not block; calling a blocking
// method of the same client from a callback returns kFailedPrecondition
// instead of deadlocking. A thread blocked in a synchronous call polls the
// nodes itself meanwhile (no thread hand-off on the fast path). A callback
// never runs nested in another: one whose call completes at once (bad
// input, a client shutting down) runs after the current callback returns.
// When the client is destroyed, every operation still pending completes
// with kCancelled before the destructor returns, and so do the calls that
// callbacks start meanwhile, their callbacks included; no callback runs
// afterwards. (A callback that starts a new call on every kCancelled would
// never let the destructor finish: such a chain is followed for 10000
// rounds, then its remaining callbacks are dropped, with a message on
// stderr.)
//
// Errors (absl::StatusCode; docs/design.md 7.1):
//   kInvalidArgument     bad resource name or ttl; nothing was sent.
//   kUnavailable         fewer than a quorum of nodes answered (I/O error,
//                        timeout, refused connection, authentication failure,
//                        node marked down by the circuit breaker).
//   kAborted             the resource is held by someone else: nodes refused,
//                        and the unavailable ones alone would not have
//                        prevented the quorum (with a majority quorum: a
//                        quorum answered). Retrying later may succeed.
//   kDeadlineExceeded    a quorum granted but no validity was left (the round
//                        took longer than ttl minus the drift allowance), or a
//                        wait deadline passed.
//   kFailedPrecondition  Extend found that the lease is lost (enough nodes
//                        refused that a quorum can no longer hold our
//                        token); or a blocking call made from a callback of
//                        this client.
//   kInternal            unexpected replies or script errors from a quorum.
//   kCancelled           the call's StopToken was stopped, or the client was
//                        destroyed while the call was pending.
// Messages name the operation, the resource, the tally and the first node
// errors, e.g.
//   acquire "orders/42": 2 of 5 nodes granted (quorum 3); 127.0.0.1:7003:
//   connection refused; 127.0.0.1:7004: no reply within 50ms

#ifndef REDLOCK_CLIENT_H_
#define REDLOCK_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/lease.h"
#include "redlock/node_status.h"
#include "redlock/options.h"
#include "redlock/renewal.h"
#include "redlock/stop_token.h"

namespace redlock {

// Client: the lock on N independent Redis masters (see the top of this file for
// its use, its threading contract and its error codes). Made by Create; one per
// process and per set of nodes, shared by every thread.
class Client {
 public:
  // The completion of an asynchronous acquire or extend: the lease, or why not.
  // Runs once, on the client's I/O thread; must not block.
  using LeaseCallback = absl::AnyInvocable<void(absl::StatusOr<Lease>)>;
  // The completion of an asynchronous release. Runs once, on the client's I/O
  // thread; must not block.
  using StatusCallback = absl::AnyInvocable<void(absl::Status)>;

  // Validates `options` (see ValidateOptions) and starts the client: one I/O
  // thread and one connection per node. Unreachable nodes do not fail
  // Create; they are retried in the background with backoff. Two entries
  // that are one server are refused (Options::nodes).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Client>> Create(Options options);

  Client() = default;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  virtual ~Client() = default;

  // One attempt (docs/design.md 5.2-5.4): sends the lock to every node at
  // once, each with its own Options::node_timeout, and decides as soon as a
  // quorum has granted or can no longer grant. Validity = ttl - elapsed - drift, which
  // must be positive. After a failed attempt the keys that were set are
  // removed from every node.
  //
  // REQUIRES: resource is 1..kMaxResourceLength bytes; ttl is a whole number
  // of milliseconds (finer parts are truncated), larger than the drift
  // allowance (ttl * clock_drift_factor + clock_drift_floor), at most 2^40 ms.
  [[nodiscard]] virtual absl::StatusOr<Lease> TryAcquire(absl::string_view resource,
                                                         absl::Duration ttl) = 0;

  // Up to Options::max_attempts attempts with a random pause
  // (retry_delay +/- retry_jitter) between them. Returns the last attempt's
  // error when all fail.
  [[nodiscard]] virtual absl::StatusOr<Lease> Acquire(absl::string_view resource,
                                                      absl::Duration ttl) = 0;

  // Keeps trying until it holds the lock or `wait` has passed (then
  // kDeadlineExceeded, naming the last attempt's error). `wait` may be
  // absl::InfiniteDuration(): until held, stopped or the client goes.
  // Between attempts it waits for release announcements from the nodes or,
  // failing that, a jittered poll interval; it never busy-polls. When `stop`
  // is stopped, the call is decided at that moment and returns kCancelled at
  // once (the client completes it on its own threads, also when the caller
  // is the one polling the nodes); what an attempt in flight set is released
  // when its replies arrive (no key is left behind). A stop that comes after
  // a quorum granted does not undo the acquisition: the call returns the
  // lease, and the caller releases it as any other. (The lock is validly
  // held; the stop and the grant race, so the caller cannot tell a stop just
  // before the decision from one just after the return anyway, and it must
  // handle a lease it no longer wants in the second case already. Releasing
  // it here instead would report kCancelled for a lock that was held, and a
  // release that fails would leave a key nobody knows about.)
  [[nodiscard]] virtual absl::StatusOr<Lease> Acquire(absl::string_view resource,
                                                      absl::Duration ttl, absl::Duration wait,
                                                      const StopToken& stop) = 0;
  // The above with a StopToken that is never stopped: until held or `wait` has
  // passed.
  [[nodiscard]] absl::StatusOr<Lease> Acquire(absl::string_view resource, absl::Duration ttl,
                                              absl::Duration wait) {
    return Acquire(resource, ttl, wait, StopToken());
  }

  // Sets the keys' ttl to `ttl` again on every node that still holds
  // lease.token() (never re-creates a missing key). Succeeds with a quorum
  // and a positive validity measured from the extend's own start, returning
  // the lease with its new validity. kFailedPrecondition: the lease is lost
  // (so many nodes no longer hold the token that a quorum cannot).
  // kUnavailable when no quorum confirmed but the nodes that did not answer
  // might still make one with those that did: the lease may still be held.
  // Releasing the returned lease (or the original) reaches every node the
  // acquisition's SET may have reached, also those the extension missed.
  [[nodiscard]] virtual absl::StatusOr<Lease> Extend(const Lease& lease, absl::Duration ttl) = 0;

  // Deletes the key on every node where it still holds lease.token(), and
  // announces the release to blocked waiters. Stops the lease's renewals.
  // Idempotent: releasing an expired, already released or foreign lease is
  // OK. kUnavailable when fewer than a quorum of nodes confirmed (the lock
  // lingers until its ttl).
  [[nodiscard]] virtual absl::Status Release(const Lease& lease) = 0;

  // Asynchronous forms of the calls above; `done` runs exactly once.
  virtual void TryAcquireAsync(absl::string_view resource, absl::Duration ttl,
                               LeaseCallback done) = 0;
  // Acquire (up to Options::max_attempts attempts), asynchronously.
  virtual void AcquireAsync(absl::string_view resource, absl::Duration ttl, LeaseCallback done) = 0;
  // Acquire with a wait and a StopToken, asynchronously: `done` gets kCancelled
  // at once when `stop` is stopped first.
  virtual void AcquireAsync(absl::string_view resource, absl::Duration ttl, absl::Duration wait,
                            const StopToken& stop, LeaseCallback done) = 0;
  // The above with a StopToken that is never stopped.
  void AcquireAsync(absl::string_view resource, absl::Duration ttl, absl::Duration wait,
                    LeaseCallback done) {
    AcquireAsync(resource, ttl, wait, StopToken(), std::move(done));
  }
  // Extend, asynchronously.
  virtual void ExtendAsync(const Lease& lease, absl::Duration ttl, LeaseCallback done) = 0;
  // Release, asynchronously.
  virtual void ReleaseAsync(const Lease& lease, StatusCallback done) = 0;

  // ---- Lifecycle ----------------------------------------------------------

  // Keeps `lease` alive while the holder works (a watchdog, redlock/renewal.h):
  // extends it every ttl * interval_fraction, never re-creating a missing
  // key. Calls options.on_at_risk when an extension failed (or none is
  // made) and the validity runs low; a failed extension that does not show
  // the lease lost (nodes unreachable) is retried. On the first result that
  // shows the lease lost (kFailedPrecondition from the extension, or the
  // validity running out before an extension succeeds) it stops, stops the
  // handle's lost() token and calls `on_lost` once, on the client's I/O
  // thread.
  // Release(lease) stops it (without calling on_lost), and so do the
  // handle's Stop() and destructor and the client's destruction; the
  // client's destruction also stops lost() of the renewals still active
  // (their leases are no longer renewed). All
  // renewals share the client's I/O thread and timers: no thread per lease.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Renewal>> AutoRenew(
      const Lease& lease, RenewOptions options, absl::AnyInvocable<void(absl::Status)> on_lost) = 0;

  // ---- Sets of resources ----------------------------------------------------

  // One acquisition of several resources on the same nodes, all or nothing:
  // what MultiLock (multilock/multi_lock.h, the API to use) is built on. A
  // Client that wraps another forwards these, and MultiLock then works over
  // it; a Client that does not take sets answers kUnimplemented.
  struct SetRequest {
    // Distinct resources, each as TryAcquire takes one.
    std::vector<std::string> resources;
    // The ttl of every key, as TryAcquire takes it.
    absl::Duration ttl;
    // The nodes that must grant: 0 is the client's quorum, N every node.
    int quorum = 0;
    // Without `wait`: this many attempts (unset: Options::max_attempts), and
    // none after one that failed for unavailable nodes when
    // `fail_fast_unavailable` (every node must grant: such a node fails
    // every attempt until it is back).
    std::optional<int> max_attempts;
    // See max_attempts.
    bool fail_fast_unavailable = false;
    // With one: until held, or this long (may be infinite), as Acquire with
    // a wait.
    std::optional<absl::Duration> wait;
    // Cancels the call, as Acquire's StopToken does.
    StopToken stop;
  };
  // The completion of AcquireSetAsync: one lease per resource, or why not.
  using LeasesCallback = absl::AnyInvocable<void(absl::StatusOr<std::vector<Lease>>)>;

  // One lease per resource, in the order given. `done` runs on the client's
  // I/O thread.
  [[nodiscard]] virtual absl::StatusOr<std::vector<Lease>> AcquireSet(SetRequest request);
  // AcquireSet, asynchronously; `done` runs exactly once.
  virtual void AcquireSetAsync(SetRequest request, LeasesCallback done);
  // Extend and Release of every lease of a set (`quorum` as in SetRequest).
  [[nodiscard]] virtual absl::StatusOr<std::vector<Lease>> ExtendSet(std::vector<Lease> leases,
                                                                     absl::Duration ttl,
                                                                     int quorum);
  // Release of every lease of a set (`quorum` as in SetRequest).
  [[nodiscard]] virtual absl::Status ReleaseSet(std::vector<Lease> leases, int quorum);
  // AutoRenew of every lease of a set: an extension needs every key.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Renewal>> AutoRenewSet(
      std::vector<Lease> leases, int quorum, RenewOptions options,
      absl::AnyInvocable<void(absl::Status)> on_lost);

  // ---- The lock family's entry point --------------------------------------
  //
  // What ReadWriteLock, Semaphore, Election and FairLock (rw_lock.h,
  // semaphore.h, election.h, fair_mutex.h) ask of a Client: one acquisition of a primitive, with
  // the mutex's guarantees (quorum, per-node deadlines, validity after elapsed time and drift,
  // cleanup, retries, waits woken by releases, cancellation, fencing, the durability vote), and a
  // read of its state on every node. They use nothing else of the implementation, so they work over
  // any Client that provides these two; a Client that wraps another forwards them (as the set calls
  // above), and the default answers kUnimplemented.
  //
  // One acquisition (or inspection) the lock family asks for.
  struct FamilyRequest {
    // Which primitive, and which of its leases.
    enum class Kind {
      kReader,  // a shared lease of the reader-writer lock on `resource`
      kWriter,  // its exclusive lease (with a wait: writer preference)
      kPermit,  // one of the `permits` permits of the semaphore `resource`
      kLeader,  // the election `resource`: fencing always (the term), its
                // own counter, `identity` carried in the lease's token
      kFair,    // the fair lock `resource`: with a wait, a place in its queue
                // first, and the lock when the place is the first; without,
                // the lock only while nobody waits (docs/design.md 5.17)
    };
    Kind kind = Kind::kWriter;           // which primitive and lease
    std::string resource;                // the primitive's resource name
    absl::Duration ttl;                  // InspectFamily ignores it
    std::optional<absl::Duration> wait;  // none or zero: one attempt
    StopToken stop;                      // cancels the acquisition (kCancelled)
    int permits = 0;                     // kPermit: K, 1 to 1024
    std::string identity;                // kLeader: any bytes, at most 256
    // kFair: how long a waiter's place outlives its last confirmed
    // heartbeat (a dead or paused waiter holds up the queue that long at
    // most); zero: 2 s. At least 30 ms and 3 x Options::node_timeout, at
    // most 2^40 ms.
    absl::Duration place_ttl = absl::ZeroDuration();
    // kFair: called once the waiter's place is on a quorum of nodes (a
    // waiter that began taking its place after this moment is served after
    // this one), on the client's transport thread; must not block. Not
    // called when the lock is granted without a place (nobody waited).
    std::function<void()> on_queued;

    // A request of `kind` on `resource`, the other fields at their defaults.
    static FamilyRequest Of(Kind kind, std::string resource, absl::Duration ttl,
                            std::optional<absl::Duration> wait, StopToken stop) {
      FamilyRequest r;
      r.kind = kind;
      r.resource = std::move(resource);
      r.ttl = ttl;
      r.wait = wait;
      r.stop = std::move(stop);
      return r;
    }
  };
  // What a family acquisition grants.
  struct FamilyGrant {
    Lease lease;    // the lease, released and extended like any other
    int slot = -1;  // kPermit: which permit (0-based)
  };
  // Receives a family acquisition's result, on the client's I/O thread.
  using FamilyCallback = absl::AnyInvocable<void(absl::StatusOr<FamilyGrant>)>;

  // One acquisition of `request`. `done` runs on the client's I/O thread.
  // kInvalidArgument for a bad request (nothing sent); otherwise the codes
  // of Acquire.
  virtual void AcquireFamilyAsync(FamilyRequest request, FamilyCallback done);
  // The same, blocking until the result.
  [[nodiscard]] virtual absl::StatusOr<FamilyGrant> AcquireFamily(FamilyRequest request);
  // Every node's view of the primitive of `request` (kind and resource, and
  // permits for a semaphore).
  [[nodiscard]] virtual absl::StatusOr<std::vector<FamilyNodeView>> InspectFamily(
      FamilyRequest request);

  // ---- Introspection ------------------------------------------------------

  // Asks every node whether it holds `resource`, with which token and how
  // much ttl is left (and the fencing counter). Read-only.
  [[nodiscard]] virtual absl::StatusOr<std::vector<NodeView>> Inspect(
      absl::string_view resource) = 0;

  // The client's view of each node: its connection and breaker, whether its
  // replicas lag (Options::durability), the releases waiting to be sent to
  // it again (node_status.h).
  virtual std::vector<NodeHealth> Health() const = 0;

  // The options the client was created with.
  virtual const Options& options() const = 0;
};

// The Client's calls on a lease, which the lock family's types (FairLock,
// ReadWriteLock) offer as their own: whichever call took a lease, these
// work on it, and what a release announces or frees is the lease's.
class LeaseCalls {
 public:
  // Client::Extend.
  [[nodiscard]] absl::StatusOr<Lease> Extend(const Lease& lease, absl::Duration ttl) {
    return client_->Extend(lease, ttl);
  }
  // Client::Release: a fair holder's place is taken out and the next waiter
  // woken; the last reader's or a writer's release is announced to waiters.
  [[nodiscard]] absl::Status Release(const Lease& lease) { return client_->Release(lease); }
  // Client::AutoRenew: renews the lease until released or lost.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Renewal>> AutoRenew(
      const Lease& lease, RenewOptions options, absl::AnyInvocable<void(absl::Status)> on_lost) {
    return client_->AutoRenew(lease, std::move(options), std::move(on_lost));
  }

 protected:
  // REQUIRES: `client` is not null and outlives the object.
  explicit LeaseCalls(Client* client) : client_(client) {}
  ~LeaseCalls() = default;
  // Copies share the client; the client pointer is fixed for good.
  LeaseCalls(const LeaseCalls&) = default;
  LeaseCalls& operator=(const LeaseCalls&) = delete;

  // A family acquisition's lease (Client::AcquireFamily).
  absl::StatusOr<Lease> LeaseOf(Client::FamilyRequest request);
  // The same, asynchronously (Client::AcquireFamilyAsync).
  void LeaseOfAsync(Client::FamilyRequest request, Client::LeaseCallback done);

  Client* const client_;  // the client the calls go to
};

}  // namespace redlock

#endif  // REDLOCK_CLIENT_H_
