#include "redlock/internal/set_api.h"

#include <utility>

#include "redlock/internal/client_impl.h"

namespace redlock::internal {
namespace {

ClientImpl* Impl(Client& client) { return dynamic_cast<ClientImpl*>(&client); }

absl::Status NotOurs() {
  return absl::FailedPreconditionError("not a client made by redlock::Client::Create");
}

AcquireCall ToCall(SetAcquire request) {
  AcquireCall call;
  call.resources = std::move(request.resources);
  call.ttl = request.ttl;
  call.quorum = request.quorum;
  call.max_attempts = request.max_attempts;
  call.wait = request.wait;
  call.stop = std::move(request.stop);
  call.fail_fast_unavailable = request.fail_fast_unavailable;
  return call;
}

}  // namespace

absl::StatusOr<std::vector<Lease>> AcquireSet(Client& client, SetAcquire request) {
  ClientImpl* impl = Impl(client);
  if (impl == nullptr) return NotOurs();
  return impl->Block<absl::StatusOr<std::vector<Lease>>>(
      [&](LeasesCallback done) { impl->AcquireSet(ToCall(std::move(request)), std::move(done)); });
}

void AcquireSetAsync(Client& client, SetAcquire request,
                     absl::AnyInvocable<void(absl::StatusOr<std::vector<Lease>>)> done) {
  ClientImpl* impl = Impl(client);
  if (impl == nullptr) {
    done(NotOurs());
    return;
  }
  impl->AcquireSet(ToCall(std::move(request)), impl->ToUser(std::move(done)));
}

absl::StatusOr<std::vector<Lease>> ExtendSet(Client& client, std::vector<Lease> leases,
                                             absl::Duration ttl, int quorum) {
  ClientImpl* impl = Impl(client);
  if (impl == nullptr) return NotOurs();
  return impl->Block<absl::StatusOr<std::vector<Lease>>>([&](LeasesCallback done) {
    impl->ExtendSet(std::move(leases), ttl, quorum, std::move(done));
  });
}

absl::Status ReleaseSet(Client& client, std::vector<Lease> leases, int quorum) {
  ClientImpl* impl = Impl(client);
  if (impl == nullptr) return NotOurs();
  return impl->Block<absl::Status>(
      [&](StatusCallback done) { impl->ReleaseSet(std::move(leases), quorum, std::move(done)); });
}

absl::StatusOr<std::unique_ptr<Renewal>> AutoRenewSet(
    Client& client, std::vector<Lease> leases, int quorum, RenewOptions options,
    absl::AnyInvocable<void(absl::Status)> on_lost) {
  ClientImpl* impl = Impl(client);
  if (impl == nullptr) return NotOurs();
  return impl->AutoRenewSet(std::move(leases), quorum, std::move(options), std::move(on_lost));
}

}  // namespace redlock::internal
