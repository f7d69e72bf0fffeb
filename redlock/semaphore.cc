#include "redlock/semaphore.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace redlock {

Semaphore::Semaphore(Client* client, std::string resource, int permits)
    : client_(client), resource_(std::move(resource)), permits_(permits) {}

std::string Semaphore::PermitResource(int slot) const {
  return absl::StrCat(resource_, ":permit:", slot);
}

Client::FamilyRequest Semaphore::Request(absl::Duration ttl, std::optional<absl::Duration> wait,
                                         const StopToken& stop) const {
  Client::FamilyRequest r =
      Client::FamilyRequest::Of(Client::FamilyRequest::Kind::kPermit, resource_, ttl, wait, stop);
  r.permits = permits_;
  return r;
}

absl::StatusOr<Permit> Semaphore::Blocking(absl::Duration ttl, std::optional<absl::Duration> wait,
                                           const StopToken& stop) {
  absl::StatusOr<Client::FamilyGrant> g = client_->AcquireFamily(Request(ttl, wait, stop));
  if (!g.ok()) return g.status();
  return Permit(std::move(g->lease), g->slot);
}

absl::StatusOr<Permit> Semaphore::TryAcquire(absl::Duration ttl) {
  return Blocking(ttl, std::nullopt, StopToken());
}

absl::StatusOr<Permit> Semaphore::Acquire(absl::Duration ttl, absl::Duration wait,
                                          const StopToken& stop) {
  return Blocking(ttl, wait, stop);
}

void Semaphore::AcquireAsync(absl::Duration ttl, absl::Duration wait, const StopToken& stop,
                             PermitCallback done) {
  client_->AcquireFamilyAsync(
      Request(ttl, wait, stop),
      [done = std::move(done)](absl::StatusOr<Client::FamilyGrant> g) mutable {
        if (!g.ok()) {
          done(g.status());
        } else {
          done(Permit(std::move(g->lease), g->slot));
        }
      });
}

absl::StatusOr<Permit> Semaphore::Extend(const Permit& permit, absl::Duration ttl) {
  absl::StatusOr<Lease> l = client_->Extend(permit.lease(), ttl);
  if (!l.ok()) return l.status();
  return Permit(*std::move(l), permit.slot());
}

absl::Status Semaphore::Release(const Permit& permit) { return client_->Release(permit.lease()); }

absl::StatusOr<std::unique_ptr<Renewal>> Semaphore::AutoRenew(
    const Permit& permit, RenewOptions options, absl::AnyInvocable<void(absl::Status)> on_lost) {
  return client_->AutoRenew(permit.lease(), std::move(options), std::move(on_lost));
}

absl::StatusOr<int> Semaphore::Held() {
  absl::StatusOr<std::vector<FamilyNodeView>> views =
      client_->InspectFamily(Request(absl::ZeroDuration(), std::nullopt, StopToken()));
  if (!views.ok()) return views.status();
  int answered = 0;
  std::vector<std::map<std::string, int>> holders(static_cast<size_t>(permits_));
  for (const FamilyNodeView& v : *views) {
    if (!v.status.ok() || v.permits.size() != static_cast<size_t>(permits_)) continue;
    ++answered;
    for (int i = 0; i < permits_; ++i) {
      const std::string& token = v.permits[static_cast<size_t>(i)];
      if (!token.empty()) ++holders[static_cast<size_t>(i)][token];
    }
  }
  const int quorum = EffectiveQuorum(client_->options());
  if (answered < quorum) {
    return absl::UnavailableError(absl::StrCat("semaphore \"", resource_, "\": ", answered, " of ",
                                               views->size(), " nodes answered (quorum ", quorum,
                                               ")"));
  }
  int held = 0;
  for (const auto& by_token : holders) {
    for (const auto& [token, count] : by_token) {
      if (count >= quorum) {
        ++held;
        break;
      }
    }
  }
  return held;
}

}  // namespace redlock
