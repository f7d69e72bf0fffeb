#include "redlock/fair_mutex.h"

#include <utility>

#include "redlock/internal/family_node_views.h"
#include "redlock/internal/lease_factory.h"

namespace redlock {

FairLock::FairLock(Client* client, std::string resource, FairOptions options)
    : LeaseCalls(client), resource_(std::move(resource)), options_(std::move(options)) {}

Client::FamilyRequest FairLock::Request(absl::Duration ttl, std::optional<absl::Duration> wait,
                                        const StopToken& stop) const {
  Client::FamilyRequest r =
      Client::FamilyRequest::Of(Client::FamilyRequest::Kind::kFair, resource_, ttl, wait, stop);
  r.place_ttl = options_.place_ttl;
  return r;
}

Lease FairLock::ForToken(std::string token) const {
  return internal::LeaseFactory::Make(resource_, std::move(token), absl::ZeroDuration(),
                                      Lease::TimePoint{}, nullptr, Lease::TimePoint{}, 0, 0,
                                      internal::LeaseKind::kFair);
}

absl::StatusOr<Lease> FairLock::TryAcquire(absl::Duration ttl) {
  return LeaseOf(Request(ttl, std::nullopt, StopToken()));
}

absl::StatusOr<Lease> FairLock::Acquire(absl::Duration ttl, absl::Duration wait,
                                        const StopToken& stop) {
  return LeaseOf(Request(ttl, wait, stop));
}

void FairLock::AcquireAsync(absl::Duration ttl, absl::Duration wait, const StopToken& stop,
                            Client::LeaseCallback done) {
  LeaseOfAsync(Request(ttl, wait, stop), std::move(done));
}

absl::StatusOr<std::vector<FairNodeView>> FairLock::Inspect() {
  return internal::FamilyViewsAs<FairNodeView>(
      client_->InspectFamily(Request(absl::ZeroDuration(), std::nullopt, StopToken())),
      [](FamilyNodeView& v, FairNodeView& f) {
        f.holder = std::move(v.holder);
        f.holder_ttl_left = v.holder_ttl_left;
        f.waiting = v.waiting;
        f.queue = std::move(v.queue);
      });
}

FairMutex::FairMutex(Client* client, std::string resource, MutexOptions options, FairOptions fair)
    : fair_(std::make_shared<FairLock>(client, resource, std::move(fair))),
      mutex_(client, std::move(resource), options,
             [fair = fair_, ttl = options.ttl](std::optional<absl::Duration> wait,
                                               const StopToken& stop) {
               if (!wait.has_value()) return fair->TryAcquire(ttl);
               return fair->Acquire(ttl, *wait, stop);
             }) {}

}  // namespace redlock
