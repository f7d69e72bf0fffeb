// A Client that wraps another and forwards every call (a decorator that
// counts, logs or traces, say), the set operations and the lock family's
// entry point included. MultiLock (multilock_test.cc) and the lock family
// (family_test.cc) must work over it: they use nothing but the public
// surface of a Client.

#ifndef REDLOCK_TESTS_INTEGRATION_FORWARDING_CLIENT_H_
#define REDLOCK_TESTS_INTEGRATION_FORWARDING_CLIENT_H_

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "redlock/client.h"

namespace redlock::testkit {

class ForwardingClient : public Client {
 public:
  explicit ForwardingClient(std::unique_ptr<Client> inner) : inner_(std::move(inner)) {}
  using Client::Acquire;
  using Client::AcquireAsync;
  absl::StatusOr<Lease> TryAcquire(absl::string_view r, absl::Duration ttl) override {
    return inner_->TryAcquire(r, ttl);
  }
  absl::StatusOr<Lease> Acquire(absl::string_view r, absl::Duration ttl) override {
    return inner_->Acquire(r, ttl);
  }
  absl::StatusOr<Lease> Acquire(absl::string_view r, absl::Duration ttl, absl::Duration wait,
                                const StopToken& stop) override {
    return inner_->Acquire(r, ttl, wait, stop);
  }
  absl::StatusOr<Lease> Extend(const Lease& l, absl::Duration ttl) override {
    return inner_->Extend(l, ttl);
  }
  absl::Status Release(const Lease& l) override { return inner_->Release(l); }
  void TryAcquireAsync(absl::string_view r, absl::Duration ttl, LeaseCallback done) override {
    inner_->TryAcquireAsync(r, ttl, std::move(done));
  }
  void AcquireAsync(absl::string_view r, absl::Duration ttl, LeaseCallback done) override {
    inner_->AcquireAsync(r, ttl, std::move(done));
  }
  void AcquireAsync(absl::string_view r, absl::Duration ttl, absl::Duration wait,
                    const StopToken& stop, LeaseCallback done) override {
    inner_->AcquireAsync(r, ttl, wait, stop, std::move(done));
  }
  void ExtendAsync(const Lease& l, absl::Duration ttl, LeaseCallback done) override {
    inner_->ExtendAsync(l, ttl, std::move(done));
  }
  void ReleaseAsync(const Lease& l, StatusCallback done) override {
    inner_->ReleaseAsync(l, std::move(done));
  }
  absl::StatusOr<std::unique_ptr<Renewal>> AutoRenew(
      const Lease& l, RenewOptions o, absl::AnyInvocable<void(absl::Status)> on_lost) override {
    return inner_->AutoRenew(l, std::move(o), std::move(on_lost));
  }
  absl::StatusOr<std::vector<NodeView>> Inspect(absl::string_view r) override {
    return inner_->Inspect(r);
  }
  std::vector<NodeHealth> Health() const override { return inner_->Health(); }
  const Options& options() const override { return inner_->options(); }

  // The set operations: forwarded unless forward_sets(false).
  absl::StatusOr<std::vector<Lease>> AcquireSet(SetRequest request) override {
    ++sets_;
    return forward_sets_ ? inner_->AcquireSet(std::move(request))
                         : Client::AcquireSet(std::move(request));
  }
  void AcquireSetAsync(SetRequest request, LeasesCallback done) override {
    ++sets_;
    inner_->AcquireSetAsync(std::move(request), std::move(done));
  }
  absl::StatusOr<std::vector<Lease>> ExtendSet(std::vector<Lease> leases, absl::Duration ttl,
                                               int quorum) override {
    ++sets_;
    return inner_->ExtendSet(std::move(leases), ttl, quorum);
  }
  absl::Status ReleaseSet(std::vector<Lease> leases, int quorum) override {
    ++sets_;
    return inner_->ReleaseSet(std::move(leases), quorum);
  }
  absl::StatusOr<std::unique_ptr<Renewal>> AutoRenewSet(
      std::vector<Lease> leases, int quorum, RenewOptions o,
      absl::AnyInvocable<void(absl::Status)> on_lost) override {
    ++sets_;
    return inner_->AutoRenewSet(std::move(leases), quorum, std::move(o), std::move(on_lost));
  }

  // The lock family: forwarded unless forward_family(false).
  void AcquireFamilyAsync(FamilyRequest request, FamilyCallback done) override {
    ++family_;
    if (!forward_family_) return Client::AcquireFamilyAsync(std::move(request), std::move(done));
    inner_->AcquireFamilyAsync(std::move(request), std::move(done));
  }
  absl::StatusOr<FamilyGrant> AcquireFamily(FamilyRequest request) override {
    ++family_;
    return forward_family_ ? inner_->AcquireFamily(std::move(request))
                           : Client::AcquireFamily(std::move(request));
  }
  absl::StatusOr<std::vector<FamilyNodeView>> InspectFamily(FamilyRequest request) override {
    ++family_;
    return forward_family_ ? inner_->InspectFamily(std::move(request))
                           : Client::InspectFamily(std::move(request));
  }

  void forward_sets(bool on) { forward_sets_ = on; }
  void forward_family(bool on) { forward_family_ = on; }
  int sets() const { return sets_.load(); }
  int family() const { return family_.load(); }

 private:
  std::unique_ptr<Client> inner_;
  std::atomic<bool> forward_sets_{true};
  std::atomic<bool> forward_family_{true};
  std::atomic<int> sets_{0};
  std::atomic<int> family_{0};
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTS_INTEGRATION_FORWARDING_CLIENT_H_
