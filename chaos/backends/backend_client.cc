#include "chaos/backends/backend_client.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/lock_service.h"
#include "chaos/history/history.h"

namespace redlock::chaos {
namespace {

class ServiceBackend final : public LockBackend {
 public:
  ServiceBackend(const ClientConfig& config, std::unique_ptr<backends::LockService> service,
                 std::unique_ptr<backends::LockSession> session)
      : config_(config), service_(std::move(service)), session_(std::move(session)) {}

  absl::StatusOr<HeldLock> Acquire(const std::string& resource, int64_t ttl_ms) override {
    absl::StatusOr<backends::Grant> g = session_->TryAcquire(resource, absl::Milliseconds(ttl_ms));
    if (!g.ok()) return g.status();
    HeldLock h;
    h.resource = resource;
    h.token = g->token;
    h.start_raw = RawFromSteady(g->acquired_at);
    h.valid_until_raw = g->valid_until == std::chrono::steady_clock::time_point::max()
                            ? RawMonotonicNanos() + int64_t{3600} * 1000000000
                            : RawFromSteady(g->valid_until);
    h.drift_ms =
        static_cast<int64_t>(std::ceil(absl::ToDoubleMilliseconds(DriftOf(config_, ttl_ms))));
    if (config_.fencing) h.fencing_token = g->fencing_token;
    grants_[h.token] = *std::move(g);
    return h;
  }

  absl::Duration TimeLeft(const HeldLock& lock) override {
    auto it = grants_.find(lock.token);
    return it == grants_.end() ? absl::ZeroDuration() : session_->TimeLeft(it->second);
  }

  absl::Status Release(const HeldLock& lock) override {
    auto it = grants_.find(lock.token);
    if (it == grants_.end()) return absl::OkStatus();
    absl::Status s = session_->Release(it->second);
    grants_.erase(it);
    return s;
  }

 private:
  const ClientConfig config_;
  std::unique_ptr<backends::LockService> service_;
  std::unique_ptr<backends::LockSession> session_;
  std::map<std::string, backends::Grant> grants_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LockBackend>> MakeServiceBackend(const ClientConfig& config) {
  const char* name = getenv(kBackendEnv);
  if (name == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(kBackendEnv, " is not set"));
  }
  absl::StatusOr<backends::Kind> kind = backends::ParseKind(name);
  if (!kind.ok()) return kind.status();
  backends::ServiceOptions o;
  o.kind = *kind;
  o.endpoints = config.nodes;
  o.key_prefix = "chaos:";
  o.fencing = config.fencing;
  o.redis_node_timeout = absl::Milliseconds(config.node_timeout_ms);
  o.request_timeout = absl::Seconds(1);
  // The session (ZooKeeper) or lease (etcd) lasts as long as a lock's ttl.
  o.session_timeout = absl::Milliseconds(config.ttl_ms);
  o.release_notifications = false;
  absl::StatusOr<std::unique_ptr<backends::LockService>> service =
      backends::LockService::Create(std::move(o));
  if (!service.ok()) return service.status();
  absl::StatusOr<std::unique_ptr<backends::LockSession>> session = (*service)->NewSession();
  if (!session.ok()) return session.status();
  return std::unique_ptr<LockBackend>(
      new ServiceBackend(config, *std::move(service), *std::move(session)));
}

}  // namespace redlock::chaos
