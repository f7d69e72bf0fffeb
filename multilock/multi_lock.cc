#include "multilock/multi_lock.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace redlock {
namespace {

const std::string& Empty() {
  static const std::string* empty = new std::string();
  return *empty;
}

// Runs an async call and waits for its result (the release watch has no
// blocking form).
template <typename T, typename Start>
T Wait(Start start) {
  std::promise<T> promise;
  std::future<T> future = promise.get_future();
  start([&promise](T value) { promise.set_value(std::move(value)); });
  return future.get();
}

absl::Duration Jittered(const Options& o, std::minstd_rand& rng) {
  int64_t jitter = absl::ToInt64Nanoseconds(o.retry_jitter);
  int64_t d = absl::ToInt64Nanoseconds(o.retry_delay);
  if (jitter > 0) d += std::uniform_int_distribution<int64_t>(-jitter, jitter)(rng);
  return absl::Nanoseconds(std::max<int64_t>(d, 0));
}

}  // namespace

std::vector<std::string> MultiLease::resources() const {
  std::vector<std::string> out;
  out.reserve(leases_.size());
  for (const Lease& l : leases_) out.push_back(l.resource());
  return out;
}

const std::string& MultiLease::token(absl::string_view resource) const {
  for (const Lease& l : leases_) {
    if (l.resource() == resource) return l.token();
  }
  return Empty();
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

std::string MultiLock::KnownDownNodes() const {
  if (mode_ != Mode::kAllNodes) return "";
  std::vector<std::string> down;
  for (const NodeHealth& h : client_->Health()) {
    if (h.breaker_open) down.push_back(absl::StrCat(h.node, " (", h.last_error, ")"));
  }
  return absl::StrJoin(down, ", ");
}

absl::StatusOr<MultiLease> MultiLock::Attempt(const std::vector<std::string>& resources,
                                              absl::Duration ttl) {
  absl::StatusOr<std::vector<Lease>> leases =
      client_->TryAcquireSet(resources, ttl, RequiredNodes());
  if (!leases.ok()) return leases.status();
  return MultiLease(*std::move(leases));
}

absl::StatusOr<MultiLease> MultiLock::TryAcquire(std::vector<std::string> resources,
                                                 absl::Duration ttl) {
  absl::StatusOr<std::vector<std::string>> canonical = Canonical(std::move(resources));
  if (!canonical.ok()) return canonical.status();
  return Attempt(*canonical, ttl);
}

absl::StatusOr<MultiLease> MultiLock::Acquire(std::vector<std::string> resources,
                                              absl::Duration ttl) {
  absl::StatusOr<std::vector<std::string>> canonical = Canonical(std::move(resources));
  if (!canonical.ok()) return canonical.status();
  std::minstd_rand rng(std::random_device{}());
  const Options& o = client_->options();
  absl::StatusOr<MultiLease> last = absl::UnknownError("no attempt");
  for (int attempt = 1; attempt <= o.max_attempts; ++attempt) {
    last = Attempt(*canonical, ttl);
    if (last.ok() || absl::IsInvalidArgument(last.status()) || absl::IsCancelled(last.status())) {
      return last;
    }
    std::string down = KnownDownNodes();
    if (!down.empty()) {
      return absl::Status(
          last.status().code(),
          absl::StrCat(last.status().message(),
                       "; all-nodes mode needs every node, and these are down: ", down));
    }
    if (attempt < o.max_attempts) {
      std::this_thread::sleep_for(absl::ToChronoNanoseconds(Jittered(o, rng)));
    }
  }
  return last;
}

absl::StatusOr<MultiLease> MultiLock::Acquire(std::vector<std::string> resources,
                                              absl::Duration ttl, absl::Duration wait) {
  if (wait < absl::ZeroDuration() || wait == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("multilock: wait must be >= 0 and finite");
  }
  absl::StatusOr<std::vector<std::string>> canonical = Canonical(std::move(resources));
  if (!canonical.ok()) return canonical.status();
  std::minstd_rand rng(std::random_device{}());
  const Options& o = client_->options();
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(wait);
  // Watch before the first attempt, so a release between a failed attempt
  // and the wait is not missed (same mechanism as Client::Acquire).
  std::unique_ptr<ReleaseWatch> watch;
  if (o.release_notifications) watch = client_->WatchReleases(*canonical);
  absl::Duration pause = std::max(o.retry_delay / 4, absl::Milliseconds(1));
  for (int attempts = 1;; ++attempts) {
    absl::StatusOr<MultiLease> last = Attempt(*canonical, ttl);
    if (last.ok() || absl::IsInvalidArgument(last.status()) || absl::IsCancelled(last.status())) {
      return last;
    }
    absl::Duration left = absl::FromChrono(deadline - std::chrono::steady_clock::now());
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "multilock: not held after waiting ", absl::FormatDuration(wait), " (", attempts,
          attempts == 1 ? " attempt" : " attempts", "); last attempt: ", last.status().message()));
    }
    // Growing, jittered polling pauses capped at wait_poll_max, cut short by
    // a release announcement.
    absl::Duration sleep =
        std::min(left, pause * std::uniform_real_distribution<double>(0.5, 1.5)(rng));
    pause = std::min(pause * 2, o.wait_poll_max);
    if (watch != nullptr) {
      (void)Wait<absl::Status>(
          [&](Client::StatusCallback cb) { watch->WaitAsync(sleep, std::move(cb)); });
    } else {
      std::this_thread::sleep_for(absl::ToChronoNanoseconds(sleep));
    }
  }
}

absl::StatusOr<MultiLease> MultiLock::Extend(const MultiLease& lease, absl::Duration ttl) {
  if (!lease.has_value()) return absl::InvalidArgumentError("multilock: empty lease");
  absl::StatusOr<std::vector<Lease>> leases =
      client_->ExtendSet(lease.leases(), ttl, RequiredNodes());
  if (!leases.ok()) return leases.status();
  return MultiLease(*std::move(leases));
}

absl::Status MultiLock::Release(const MultiLease& lease) {
  if (!lease.has_value()) return absl::InvalidArgumentError("multilock: empty lease");
  return client_->ReleaseSet(lease.leases(), RequiredNodes());
}

}  // namespace redlock
