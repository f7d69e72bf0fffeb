// The Client implementation: the Redlock state machines over a Transport.

#ifndef REDLOCK_INTERNAL_CLIENT_IMPL_H_
#define REDLOCK_INTERNAL_CLIENT_IMPL_H_

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "redlock/client.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/transport.h"

namespace redlock::internal {

class Engine;

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

 private:
  std::optional<T> value_;
};

// How many attempts an acquisition makes.
struct RetryPolicy {
  int max_attempts = 1;
  // Set for Acquire(..., wait): attempts continue until this point.
  std::optional<Clock::TimePoint> deadline;
  absl::Duration wait = absl::ZeroDuration();
};

class ClientImpl final : public Client {
 public:
  // `engine` is the transport when it is the real engine (for Health), else
  // null. `clock` must outlive the client.
  ClientImpl(Options options, std::unique_ptr<Transport> transport, const Clock* clock,
             Engine* engine);
  ~ClientImpl() override;

  absl::StatusOr<Lease> TryAcquire(absl::string_view resource, absl::Duration ttl) override;
  absl::StatusOr<Lease> Acquire(absl::string_view resource, absl::Duration ttl) override;
  absl::StatusOr<Lease> Acquire(absl::string_view resource, absl::Duration ttl,
                                absl::Duration wait) override;
  absl::StatusOr<Lease> Extend(const Lease& lease, absl::Duration ttl) override;
  absl::Status Release(const Lease& lease) override;

  void TryAcquireAsync(absl::string_view resource, absl::Duration ttl, LeaseCallback done) override;
  void AcquireAsync(absl::string_view resource, absl::Duration ttl, LeaseCallback done) override;
  void AcquireAsync(absl::string_view resource, absl::Duration ttl, absl::Duration wait,
                    LeaseCallback done) override;
  void ExtendAsync(const Lease& lease, absl::Duration ttl, LeaseCallback done) override;
  void ReleaseAsync(const Lease& lease, StatusCallback done) override;

  void TryAcquireSetAsync(std::vector<std::string> resources, absl::Duration ttl, int quorum,
                          LeasesCallback done) override;
  void ExtendSetAsync(std::vector<Lease> leases, absl::Duration ttl, int quorum,
                      LeasesCallback done) override;
  void ReleaseSetAsync(std::vector<Lease> leases, int quorum, StatusCallback done) override;
  absl::StatusOr<std::vector<Lease>> TryAcquireSet(std::vector<std::string> resources,
                                                   absl::Duration ttl, int quorum) override;
  absl::StatusOr<std::vector<Lease>> ExtendSet(std::vector<Lease> leases, absl::Duration ttl,
                                               int quorum) override;
  absl::Status ReleaseSet(std::vector<Lease> leases, int quorum) override;

  absl::StatusOr<std::unique_ptr<Renewal>> AutoRenew(
      const Lease& lease, RenewOptions options,
      absl::AnyInvocable<void(absl::Status)> on_lost) override;
  std::unique_ptr<ReleaseWatch> WatchReleases(std::vector<std::string> resources) override;

  absl::StatusOr<std::vector<NodeView>> Inspect(absl::string_view resource) override;
  std::vector<NodeHealth> Health() const override;
  const Options& options() const override { return options_; }

  // Used by the operations.
  Transport& transport() { return *transport_; }
  const Clock& clock() const { return *clock_; }
  int quorum() const { return quorum_; }
  std::string Key(absl::string_view resource) const;
  absl::Duration RetryDelay();

  // Starts an acquisition of `resources` (checked, deduplicated by the
  // caller); `done` gets one lease per resource.
  void StartAcquire(std::vector<std::string> resources, absl::Duration ttl, int quorum,
                    RetryPolicy policy, LeasesCallback done);

  // The operations, with callbacks that run wherever the operation
  // completes (a polling caller or the I/O thread). The public *Async
  // methods wrap user callbacks with ToUser().
  void AcquireInternal(absl::string_view resource, absl::Duration ttl,
                       std::optional<absl::Duration> wait, LeaseCallback done);
  void AcquireSetInternal(std::vector<std::string> resources, absl::Duration ttl, int quorum,
                          LeasesCallback done);
  void ExtendSetInternal(std::vector<Lease> leases, absl::Duration ttl, int quorum,
                         LeasesCallback done);
  void ReleaseSetInternal(std::vector<Lease> leases, int quorum, StatusCallback done);
  template <typename T>
  absl::AnyInvocable<void(T)> ToUser(absl::AnyInvocable<void(T)> done);
  // A watch whose WaitAsync callbacks run where the announcement is
  // processed (internal) or on the I/O thread (for users).
  std::unique_ptr<ReleaseWatch> MakeWatch(std::vector<std::string> resources, bool for_user);

  // Release watches (client_impl.cc).
  struct WatchState;
  void RegisterWatch(const std::shared_ptr<WatchState>& w);
  void UnregisterWatch(WatchState* w);
  // Auto-renewals (client_impl.cc).
  struct RenewState;

 private:
  void OnReleaseMessage(const std::string& channel, const std::string& token);
  void StopRenewals(const std::string& token);

  template <typename T, typename StartFn>
  T Block(StartFn start);
  absl::Status CheckQuorum(int quorum) const;

  const Options options_;
  const int quorum_;
  std::unique_ptr<Transport> transport_;
  const Clock* clock_;
  Engine* engine_;

  std::mutex watch_mu_;
  // Per channel, the watches in registration order (oldest first).
  std::map<std::string, std::list<std::weak_ptr<WatchState>>> watchers_;
  // Per channel, the token of the last release delivered (one release is
  // announced by up to N nodes; only the first announcement counts).
  std::map<std::string, std::string> last_release_;

  std::mutex renew_mu_;
  std::multimap<std::string, std::weak_ptr<RenewState>> renewals_;  // by token
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_CLIENT_IMPL_H_
