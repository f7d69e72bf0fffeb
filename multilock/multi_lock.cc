#include "multilock/multi_lock.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace redlock {
namespace {

const std::string& Empty() {
  static const std::string* empty = new std::string();
  return *empty;
}

absl::StatusOr<MultiLease> ToMultiLease(absl::StatusOr<std::vector<Lease>> leases) {
  if (!leases.ok()) return leases.status();
  return MultiLease(*std::move(leases));
}

}  // namespace

std::vector<std::string> MultiLease::resources() const {
  std::vector<std::string> out;
  out.reserve(leases_.size());
  for (const Lease& l : leases_) out.push_back(l.resource());
  return out;
}

const std::string& MultiLease::token() const {
  return leases_.empty() ? Empty() : leases_.front().token();
}

uint64_t MultiLease::fencing_token(absl::string_view resource) const {
  for (const Lease& l : leases_) {
    if (l.resource() == resource) return l.fencing_token();
  }
  return 0;
}

Lease::TimePoint MultiLease::valid_until() const {
  return leases_.empty() ? Lease::TimePoint() : leases_.front().valid_until();
}

absl::Duration MultiLease::TimeLeft() const {
  return leases_.empty() ? absl::ZeroDuration() : leases_.front().TimeLeft();
}

int MultiLease::nodes_granted() const {
  return leases_.empty() ? 0 : leases_.front().nodes_granted();
}

absl::StatusOr<std::vector<std::string>> MultiLock::Canonical(std::vector<std::string> resources) {
  if (resources.empty()) return absl::InvalidArgumentError("multilock: no resources");
  std::sort(resources.begin(), resources.end());
  resources.erase(std::unique(resources.begin(), resources.end()), resources.end());
  if (resources.size() > kMaxResources) {
    return absl::InvalidArgumentError(absl::StrCat("multilock: ", resources.size(),
                                                   " resources; at most ", kMaxResources,
                                                   " may be locked at once"));
  }
  for (const auto& r : resources) {
    if (r.empty()) return absl::InvalidArgumentError("multilock: empty resource name");
    if (r.size() > kMaxResourceLength) {
      return absl::InvalidArgumentError(absl::StrCat("multilock: resource name of ", r.size(),
                                                     " bytes is longer than the maximum of ",
                                                     kMaxResourceLength));
    }
  }
  return resources;
}

int MultiLock::RequiredNodes() const {
  return mode_ == Mode::kAllNodes ? static_cast<int>(client_->options().nodes.size()) : 0;
}

Client::SetRequest MultiLock::Request(std::vector<std::string> canonical,
                                      absl::Duration ttl) const {
  Client::SetRequest request;
  request.resources = std::move(canonical);
  request.ttl = ttl;
  request.quorum = RequiredNodes();
  return request;
}

absl::StatusOr<MultiLease> MultiLock::TryAcquire(std::vector<std::string> resources,
                                                 absl::Duration ttl) {
  absl::StatusOr<std::vector<std::string>> canonical = Canonical(std::move(resources));
  if (!canonical.ok()) return canonical.status();
  Client::SetRequest request = Request(*std::move(canonical), ttl);
  request.max_attempts = 1;
  return ToMultiLease(client_->AcquireSet(std::move(request)));
}

absl::StatusOr<MultiLease> MultiLock::Acquire(std::vector<std::string> resources,
                                              absl::Duration ttl) {
  absl::StatusOr<std::vector<std::string>> canonical = Canonical(std::move(resources));
  if (!canonical.ok()) return canonical.status();
  Client::SetRequest request = Request(*std::move(canonical), ttl);
  request.fail_fast_unavailable = mode_ == Mode::kAllNodes;
  return ToMultiLease(client_->AcquireSet(std::move(request)));
}

absl::StatusOr<MultiLease> MultiLock::Acquire(std::vector<std::string> resources,
                                              absl::Duration ttl, absl::Duration wait,
                                              const StopToken& stop) {
  absl::StatusOr<std::vector<std::string>> canonical = Canonical(std::move(resources));
  if (!canonical.ok()) return canonical.status();
  Client::SetRequest request = Request(*std::move(canonical), ttl);
  request.wait = wait;
  request.stop = stop;
  return ToMultiLease(client_->AcquireSet(std::move(request)));
}

void MultiLock::AcquireAsync(std::vector<std::string> resources, absl::Duration ttl,
                             absl::Duration wait, const StopToken& stop,
                             absl::AnyInvocable<void(absl::StatusOr<MultiLease>)> done) {
  absl::StatusOr<std::vector<std::string>> canonical = Canonical(std::move(resources));
  if (!canonical.ok()) {
    done(canonical.status());
    return;
  }
  Client::SetRequest request = Request(*std::move(canonical), ttl);
  request.wait = wait;
  request.stop = stop;
  client_->AcquireSetAsync(std::move(request),
                           [done = std::move(done)](absl::StatusOr<std::vector<Lease>> r) mutable {
                             done(ToMultiLease(std::move(r)));
                           });
}

absl::StatusOr<MultiLease> MultiLock::Extend(const MultiLease& lease, absl::Duration ttl) {
  if (!lease.has_value()) return absl::InvalidArgumentError("multilock: empty lease");
  return ToMultiLease(client_->ExtendSet(lease.leases(), ttl, RequiredNodes()));
}

absl::Status MultiLock::Release(const MultiLease& lease) {
  if (!lease.has_value()) return absl::InvalidArgumentError("multilock: empty lease");
  return client_->ReleaseSet(lease.leases(), RequiredNodes());
}

absl::StatusOr<std::unique_ptr<Renewal>> MultiLock::AutoRenew(
    const MultiLease& lease, RenewOptions options, absl::AnyInvocable<void(absl::Status)> on_lost) {
  if (!lease.has_value()) return absl::InvalidArgumentError("multilock: empty lease");
  return client_->AutoRenewSet(lease.leases(), RequiredNodes(), std::move(options),
                               std::move(on_lost));
}

}  // namespace redlock
