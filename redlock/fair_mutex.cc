#include "redlock/fair_mutex.h"

#include <utility>

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
  absl::StatusOr<std::vector<FamilyNodeView>> views =
      client_->InspectFamily(Request(absl::ZeroDuration(), std::nullopt, StopToken()));
  if (!views.ok()) return views.status();
  std::vector<FairNodeView> out;
  out.reserve(views->size());
  for (FamilyNodeView& v : *views) {
    FairNodeView f;
    f.node = std::move(v.node);
    f.status = std::move(v.status);
    f.holder = std::move(v.holder);
    f.holder_ttl_left = v.holder_ttl_left;
    f.waiting = v.waiting;
    f.queue = std::move(v.queue);
    out.push_back(std::move(f));
  }
  return out;
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
