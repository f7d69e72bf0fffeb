#include "backends/lock_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/enum_names.h"
#include "redlock/client.h"

namespace redlock::backends {
namespace {

constexpr EnumName<Kind> kKinds[] = {
    {Kind::kRedis, "redis"},
    {Kind::kRedlock, "redlock"},
    {Kind::kEtcd, "etcd"},
    {Kind::kZooKeeper, "zookeeper"},
    {Kind::kPgAdvisory, "pg-advisory"},
    {Kind::kPgUnique, "pg-unique"},
    {Kind::kPgForUpdate, "pg-for-update"},
};

// ---- This library: redlock::Client on 1 (redis) or N (redlock) nodes ---------------

class RedisSession final : public LockSession {
 public:
  explicit RedisSession(Client* client) : client_(client) {}

  absl::StatusOr<Grant> TryAcquire(const std::string& resource, absl::Duration ttl) override {
    return FromLease(client_->TryAcquire(resource, ttl));
  }
  absl::StatusOr<Grant> Acquire(const std::string& resource, absl::Duration ttl,
                                absl::Duration wait) override {
    return FromLease(client_->Acquire(resource, ttl, wait));
  }
  absl::Status Release(const Grant& grant) override { return client_->Release(grant.lease); }
  absl::Duration TimeLeft(const Grant& grant) override { return grant.lease.TimeLeft(); }

 private:
  static absl::StatusOr<Grant> FromLease(absl::StatusOr<Lease> lease) {
    if (!lease.ok()) return lease.status();
    Grant g;
    g.resource = lease->resource();
    g.token = lease->token();
    if (lease->fencing_token() != 0) g.fencing_token = lease->fencing_token();
    g.acquired_at = lease->acquired_at();
    g.valid_until = lease->valid_until();
    g.lease = *std::move(lease);
    return g;
  }
  Client* const client_;
};

class RedisService final : public LockService {
 public:
  RedisService(Kind kind, std::unique_ptr<Client> client, int nodes)
      : kind_(kind), client_(std::move(client)), nodes_(nodes) {}
  Kind kind() const override { return kind_; }
  std::string Describe() const override {
    return absl::StrCat(
        "this library (redlock::Client) on ", nodes_,
        nodes_ == 1 ? " node: SET NX PX + compare-and-delete" : " nodes: Redlock, quorum N/2+1");
  }
  absl::StatusOr<std::unique_ptr<LockSession>> NewSession() override {
    return std::unique_ptr<LockSession>(new RedisSession(client_.get()));
  }

 private:
  const Kind kind_;
  std::unique_ptr<Client> client_;
  const int nodes_;
};

}  // namespace

absl::string_view KindName(Kind kind) { return NameOf(kKinds, kind); }

absl::StatusOr<Kind> ParseKind(absl::string_view name) {
  return ParseName(kKinds, name, "lock backend");
}

std::vector<Kind> AllKinds() { return Values(kKinds); }

ServerKind ServerOf(Kind kind) {
  switch (kind) {
    case Kind::kRedis:
    case Kind::kRedlock:
      return ServerKind::kRedis;
    case Kind::kEtcd:
      return ServerKind::kEtcd;
    case Kind::kZooKeeper:
      return ServerKind::kZooKeeper;
    case Kind::kPgAdvisory:
    case Kind::kPgUnique:
    case Kind::kPgForUpdate:
      return ServerKind::kPostgres;
  }
  return ServerKind::kRedis;
}

absl::string_view ServerName(ServerKind server) {
  static constexpr EnumName<ServerKind> kNames[] = {
      {ServerKind::kRedis, "redis"},
      {ServerKind::kEtcd, "etcd"},
      {ServerKind::kZooKeeper, "zookeeper"},
      {ServerKind::kPostgres, "postgresql"},
  };
  return NameOf(kNames, server);
}

std::string InstallLine(ServerKind server) {
  const char* packages = "redis-server";
  switch (server) {
    case ServerKind::kRedis:
      break;
    case ServerKind::kEtcd:
      packages = "etcd-server libcurl4-openssl-dev (then rebuild)";
      break;
    case ServerKind::kZooKeeper:
      packages = "zookeeper libzookeeper-mt-dev (then rebuild)";
      break;
    case ServerKind::kPostgres:
      packages = "postgresql libpq-dev (then rebuild)";
      break;
  }
  return absl::StrCat("apt-get install -y --no-install-recommends ", packages,
                      "   (or: scripts/setup.sh --backends)");
}

absl::Status ClientAvailable(Kind kind) {
  // The client library each server needs, when this build lacks it.
  const char* missing = nullptr;
  switch (ServerOf(kind)) {
    case ServerKind::kZooKeeper:
#ifndef REDLOCK_HAVE_ZOOKEEPER
      missing = "ZooKeeper C client";
#endif
      break;
    case ServerKind::kEtcd:
#ifndef REDLOCK_HAVE_LIBCURL
      missing = "libcurl";
#endif
      break;
    case ServerKind::kPostgres:
#ifndef REDLOCK_HAVE_LIBPQ
      missing = "libpq";
#endif
      break;
    case ServerKind::kRedis:
      break;
  }
  if (missing == nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("this build has no ", missing, ": ", InstallLine(ServerOf(kind))));
}

absl::Duration LockSession::TimeLeft(const Grant& grant) {
  if (grant.valid_until == std::chrono::steady_clock::time_point::max()) return absl::Hours(1);
  const auto now = std::chrono::steady_clock::now();
  if (grant.valid_until <= now) return absl::ZeroDuration();
  return absl::FromChrono(grant.valid_until - now);
}

absl::StatusOr<std::unique_ptr<LockService>> LockService::Create(ServiceOptions options) {
  if (absl::Status s = ClientAvailable(options.kind); !s.ok()) return s;
  if (options.endpoints.empty()) return absl::InvalidArgumentError("no endpoints");
  switch (ServerOf(options.kind)) {
    case ServerKind::kRedis:
      return NewRedisService(std::move(options));
    case ServerKind::kEtcd:
      return NewEtcdService(std::move(options));
    case ServerKind::kZooKeeper:
      return NewZooKeeperService(std::move(options));
    case ServerKind::kPostgres:
      return NewPostgresService(std::move(options));
  }
  return absl::InternalError("unknown kind");
}

absl::StatusOr<std::unique_ptr<LockService>> NewRedisService(ServiceOptions options) {
  Options o;
  for (const std::string& e : options.endpoints) {
    absl::StatusOr<Endpoint> ep = ParseEndpoint(e);
    if (!ep.ok()) return ep.status();
    o.nodes.push_back(*ep);
  }
  o.node_timeout = options.redis_node_timeout;
  o.key_prefix = options.key_prefix;
  o.fencing = options.fencing;
  o.release_notifications = options.release_notifications;
  o.max_attempts = 1;
  const int n = static_cast<int>(o.nodes.size());
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(o));
  if (!client.ok()) return client.status();
  return std::unique_ptr<LockService>(new RedisService(options.kind, *std::move(client), n));
}

#ifndef REDLOCK_HAVE_ZOOKEEPER
absl::StatusOr<std::unique_ptr<LockService>> NewZooKeeperService(ServiceOptions options) {
  return ClientAvailable(Kind::kZooKeeper);
}
#endif
#ifndef REDLOCK_HAVE_LIBPQ
absl::StatusOr<std::unique_ptr<LockService>> NewPostgresService(ServiceOptions options) {
  return ClientAvailable(Kind::kPgAdvisory);
}
#endif

}  // namespace redlock::backends
