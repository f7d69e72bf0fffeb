// The Client facade: checks each call's input, starts the operation
// (acquire_op, keys_op, renewal) and adapts its completion to the caller,
// blocking (Block) or asynchronous (ToUser: on the I/O thread).

#ifndef REDLOCK_INTERNAL_CLIENT_IMPL_H_
#define REDLOCK_INTERNAL_CLIENT_IMPL_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redlock/client.h"
#include "redlock/internal/acquire_op.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/context.h"
#include "redlock/internal/keys_op.h"
#include "redlock/internal/server_commands.h"
#include "redlock/internal/sync_waiter.h"
#include "redlock/internal/transport.h"

namespace redlock::internal {

// A one-shot result slot a blocked caller waits on. Shared with the
// completing thread, so it outlives whichever side finishes last.
template <typename T>
class Waiter final : public SyncWaiter {
 public:
  void Set(T value) {
    value_.emplace(std::move(value));
    SetReady();
  }
  T Take() { return std::move(*value_); }

  // A waiter for the next blocking call of this thread: the one its last
  // call gave back (Recycle), else a new one.
  static std::shared_ptr<Waiter> Get() {
    std::shared_ptr<Waiter>& spare = Spare();
    if (spare != nullptr) return std::move(spare);
    return std::make_shared<Waiter>();
  }
  // Keeps `waiter`, taken (Take), for the thread's next call, if nothing
  // else holds it any more (a copy can only be made from a holder: with
  // none left, none can appear); otherwise lets it go.
  static void Recycle(std::shared_ptr<Waiter> waiter) {
    if (waiter.use_count() != 1) return;
    waiter->value_.reset();
    waiter->Rearm();
    Spare() = std::move(waiter);
  }

 private:
  static std::shared_ptr<Waiter>& Spare() {
    thread_local std::shared_ptr<Waiter> spare;
    return spare;
  }
  std::optional<T> value_;
};

class ClientImpl final : public Client {
 public:
  // `clock` must outlive the client.
  // `modes`: which nodes forbid scripting, as the engine's handshakes find
  // (scriptless.h; null: none).
  // `blocking`: what synchronous calls wait on (the engine, which is also
  // `transport`); null for a transport no caller can wait on (unit tests'
  // fake nodes): a blocking call that is not decided at once then fails
  // with kFailedPrecondition.
  // `commands`: which script-free commands each node has, as the
  // handshakes find (server_commands.h; null: not read).
  ClientImpl(Options options, std::unique_ptr<Transport> transport, const Clock* clock,
             std::shared_ptr<ScriptingModes> modes = nullptr, Blocking* blocking = nullptr,
             std::shared_ptr<ServerCommands> commands = nullptr);
  ~ClientImpl() override;

  using Client::Acquire;
  using Client::AcquireAsync;

  absl::StatusOr<Lease> TryAcquire(absl::string_view resource, absl::Duration ttl) override;
  absl::StatusOr<Lease> Acquire(absl::string_view resource, absl::Duration ttl) override;
  absl::StatusOr<Lease> Acquire(absl::string_view resource, absl::Duration ttl, absl::Duration wait,
                                const StopToken& stop) override;
  absl::StatusOr<Lease> Extend(const Lease& lease, absl::Duration ttl) override;
  absl::Status Release(const Lease& lease) override;

  void TryAcquireAsync(absl::string_view resource, absl::Duration ttl, LeaseCallback done) override;
  void AcquireAsync(absl::string_view resource, absl::Duration ttl, LeaseCallback done) override;
  void AcquireAsync(absl::string_view resource, absl::Duration ttl, absl::Duration wait,
                    const StopToken& stop, LeaseCallback done) override;
  void ExtendAsync(const Lease& lease, absl::Duration ttl, LeaseCallback done) override;
  void ReleaseAsync(const Lease& lease, StatusCallback done) override;

  absl::StatusOr<std::unique_ptr<Renewal>> AutoRenew(
      const Lease& lease, RenewOptions options,
      absl::AnyInvocable<void(absl::Status)> on_lost) override;

  // The lock family (family_ops.h).
  void AcquireFamilyAsync(FamilyRequest request, FamilyCallback done) override;
  absl::StatusOr<FamilyGrant> AcquireFamily(FamilyRequest request) override;
  absl::StatusOr<std::vector<FamilyNodeView>> InspectFamily(FamilyRequest request) override;

  absl::StatusOr<std::vector<NodeView>> Inspect(absl::string_view resource) override;
  std::vector<NodeHealth> Health() const override;
  const Options& options() const override { return ctx_.options(); }

  // Sets of resources (what MultiLock uses).
  absl::StatusOr<std::vector<Lease>> AcquireSet(SetRequest request) override;
  void AcquireSetAsync(SetRequest request, LeasesCallback done) override;
  absl::StatusOr<std::vector<Lease>> ExtendSet(std::vector<Lease> leases, absl::Duration ttl,
                                               int quorum) override;
  absl::Status ReleaseSet(std::vector<Lease> leases, int quorum) override;
  absl::StatusOr<std::unique_ptr<Renewal>> AutoRenewSet(
      std::vector<Lease> leases, int quorum, RenewOptions options,
      absl::AnyInvocable<void(absl::Status)> on_lost) override;

  // The operations behind every acquisition, extension and release: `done`
  // runs where the operation completes; blocking callers wrap it with Block,
  // asynchronous ones with ToUser. `shape`: the lock family's scripts
  // (lock_shape.h; null: a plain lock).
  void StartSet(SetRequest request, std::shared_ptr<const AcquireShape> shape, LeasesCallback done);
  void StartExtendSet(std::vector<Lease> leases, absl::Duration ttl, int quorum,
                      LeasesCallback done);
  void StartReleaseSet(std::vector<Lease> leases, int quorum, StatusCallback done);
  // StartReleaseSet of `lease` alone with the client's quorum, without a
  // list or a copy of the lease.
  void StartReleaseOne(const Lease& lease, StatusCallback done);

  // Runs `start` with a callback and blocks until it completes (the caller
  // polls the nodes meanwhile). kFailedPrecondition from a callback of this
  // client, where blocking would deadlock.
  template <typename T, typename StartFn>
  T Block(StartFn start);
  // Wraps a callback so that it runs on the I/O thread.
  template <typename T>
  absl::AnyInvocable<void(T)> ToUser(absl::AnyInvocable<void(T)> done);

  // What the operations share, for the lock family's operations
  // (family_ops.h).
  OpContext& context() { return ctx_; }

 private:
  absl::Status CheckQuorum(int quorum) const;
  // StartSet's checks: the acquisition's request, or why there is none.
  absl::StatusOr<AcquireRequest> CheckSet(SetRequest call,
                                          std::shared_ptr<const AcquireShape> shape);
  void AcquireOne(absl::string_view resource, absl::Duration ttl, std::optional<int> attempts,
                  std::optional<absl::Duration> wait, const StopToken& stop, LeaseCallback done);

  OpContext ctx_;
  Blocking* const blocking_;
  const std::shared_ptr<ServerCommands> commands_;
};

template <typename T, typename StartFn>
T ClientImpl::Block(StartFn start) {
  if (ctx_.transport().InTransportThread()) {
    return absl::FailedPreconditionError(
        "a blocking redlock call was made from a callback of the same client; use the *Async "
        "form there");
  }
  // What the call sends and arms is polled here, not by the I/O thread.
  SyncCallScope sync_call;
  // Recycled per thread: no allocation per call once warm.
  std::shared_ptr<Waiter<T>> waiter = Waiter<T>::Get();
  start([waiter](T value) { waiter->Set(std::move(value)); });
  if (blocking_ != nullptr) {
    blocking_->AwaitSync(waiter);
  } else if (!waiter->ready()) {
    return absl::FailedPreconditionError(
        "this client's transport cannot be waited on: use the *Async forms");
  }
  T value = waiter->Take();
  Waiter<T>::Recycle(std::move(waiter));
  return value;
}

template <typename T>
absl::AnyInvocable<void(T)> ClientImpl::ToUser(absl::AnyInvocable<void(T)> done) {
  // One allocation per call: the callback and the slot of its value
  // together, held by one pointer in the wrapper and then in the task
  // (each inline in AnyInvocable).
  struct Handoff {
    absl::AnyInvocable<void(T)> done;
    std::optional<T> value;
  };
  Transport* t = &ctx_.transport();
  return [t, handoff = std::make_unique<Handoff>(Handoff{std::move(done), std::nullopt})](
             T value) mutable {
    handoff->value.emplace(std::move(value));
    t->DeliverToUser(
        [handoff = std::move(handoff)]() mutable { handoff->done(*std::move(handoff->value)); });
  };
}

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_CLIENT_IMPL_H_
