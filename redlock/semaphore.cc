#include "redlock/semaphore.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/family_api.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/semaphore_op.h"

namespace redlock {

using internal::ClientImpl;

Semaphore::Semaphore(Client* client, std::string resource, int permits)
    : client_(client), resource_(std::move(resource)), permits_(permits) {}

std::string Semaphore::PermitResource(int slot) const {
  return internal::PermitResource(resource_, slot);
}

absl::Status Semaphore::Check(absl::Duration wait) const {
  if (permits_ < 1 || permits_ > kMaxPermits) {
    return absl::InvalidArgumentError(absl::StrCat("semaphore \"", resource_,
                                                   "\": permits must be in [1, ", kMaxPermits,
                                                   "], not ", permits_));
  }
  if (resource_.empty()) return absl::InvalidArgumentError("semaphore: empty resource name");
  if (wait < absl::ZeroDuration()) return absl::InvalidArgumentError("wait must be >= 0");
  // The longest permit name stands for all of them.
  return internal::CheckResource(PermitResource(permits_ - 1), client_->options());
}

void Semaphore::Start(absl::Duration ttl, std::optional<absl::Duration> wait, const StopToken& stop,
                      PermitCallback done) {
  ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) {
    done(internal::NotACreatedClient("Semaphore"));
    return;
  }
  absl::Status st = Check(wait.value_or(absl::ZeroDuration()));
  absl::StatusOr<internal::LockTtl> checked = internal::CheckTtl(ttl, impl->options());
  if (!st.ok() || !checked.ok()) {
    done(!st.ok() ? st : checked.status());
    return;
  }
  internal::SemaphoreRequest request;
  request.resource = resource_;
  request.permits = permits_;
  request.ttl = *checked;
  request.quorum = impl->context().quorum();
  request.stop = stop;
  if (wait.has_value() && *wait > absl::ZeroDuration()) request.wait = wait;
  internal::StartSemaphoreAcquire(
      &impl->context(), std::move(request),
      [done = std::move(done)](absl::StatusOr<std::pair<Lease, int>> r) mutable {
        if (!r.ok()) {
          done(r.status());
        } else {
          done(Permit(std::move(r->first), r->second));
        }
      });
}

absl::StatusOr<Permit> Semaphore::TryAcquire(absl::Duration ttl) {
  ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) return internal::NotACreatedClient("Semaphore");
  return impl->Block<absl::StatusOr<Permit>>(
      [&](PermitCallback cb) { Start(ttl, std::nullopt, StopToken(), std::move(cb)); });
}

absl::StatusOr<Permit> Semaphore::Acquire(absl::Duration ttl, absl::Duration wait,
                                          const StopToken& stop) {
  ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) return internal::NotACreatedClient("Semaphore");
  return impl->Block<absl::StatusOr<Permit>>(
      [&](PermitCallback cb) { Start(ttl, wait, stop, std::move(cb)); });
}

void Semaphore::AcquireAsync(absl::Duration ttl, absl::Duration wait, const StopToken& stop,
                             PermitCallback done) {
  ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) {
    done(internal::NotACreatedClient("Semaphore"));
    return;
  }
  Start(ttl, wait, stop, impl->ToUser(std::move(done)));
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
  ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) return internal::NotACreatedClient("Semaphore");
  absl::Status st = Check(absl::ZeroDuration());
  if (!st.ok()) return st;
  std::vector<std::string> argv = {"MGET"};
  for (int i = 0; i < permits_; ++i) argv.push_back(impl->context().Key(PermitResource(i)));
  internal::Command command;
  internal::AppendArrayHeader(&command.payload, argv.size());
  for (const auto& a : argv) internal::AppendBulk(&command.payload, a);
  command.expect = internal::kExpectArray;
  command.op = "inspect";
  absl::StatusOr<std::vector<absl::StatusOr<internal::Reply>>> replies =
      internal::SendToAllAndWait(*impl, command);
  if (!replies.ok()) return replies.status();
  int answered = 0;
  std::vector<std::map<std::string, int>> holders(static_cast<size_t>(permits_));
  for (const auto& r : *replies) {
    if (!r.ok() || r->type != internal::Reply::Type::kArray ||
        r->elements.size() != static_cast<size_t>(permits_)) {
      continue;
    }
    ++answered;
    for (int i = 0; i < permits_; ++i) {
      const internal::Reply& v = r->elements[static_cast<size_t>(i)];
      if (v.type == internal::Reply::Type::kString) ++holders[static_cast<size_t>(i)][v.str];
    }
  }
  const int quorum = impl->context().quorum();
  if (answered < quorum) {
    return absl::UnavailableError(absl::StrCat("semaphore \"", resource_, "\": ", answered, " of ",
                                               replies->size(), " nodes answered (quorum ", quorum,
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
