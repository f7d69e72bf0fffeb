// backends/lock_service.h: one small interface over the lock services that
// the distributed-lock literature compares, so that the bench
// (`redlock-bench --scenario backends`) and the chaos harness
// (`redlock-chaos --group backends`) run the same workload against each.
//
//   backends::ServiceOptions o;
//   o.kind = backends::Kind::kEtcd;
//   o.endpoints = cluster->endpoints();           // backends/servers.h
//   auto service = backends::LockService::Create(o);
//   auto session = (*service)->NewSession();      // one per caller thread
//   absl::StatusOr<backends::Grant> g = (*session)->TryAcquire("orders/42", absl::Seconds(10));
//   if (absl::IsAborted(g.status())) { /* held by someone else */ }
//   ...
//   (void)(*session)->Release(*g);
//
// The recipes (each the one its literature describes; see backends/README.md):
//
//   redis, redlock   this library: redlock::Client on 1 or N nodes (SET NX PX,
//                    compare-and-delete); fencing with Options::fencing.
//   etcd             the v3 `concurrency` Mutex recipe through the HTTP/JSON
//                    gateway: a lease per session (kept alive lazily), the key
//                    <prefix><resource>/<lease hex> put if absent in one txn
//                    that also reads the owner (lowest create revision); the
//                    blocking form is the server's lock service (/v3/lock/lock,
//                    the same recipe run by the server). Fencing token: the
//                    key's create revision.
//   zookeeper        the ephemeral-sequential recipe: create
//                    /redlock/<resource>/lock-<seq>, the lowest sequence holds,
//                    a waiter watches only its predecessor (no herd). Fencing
//                    token: the sequence number (per parent, increasing).
//   pg-advisory      pg_try_advisory_lock / pg_advisory_unlock on the session.
//   pg-unique        INSERT into a table with a unique key (taking over a row
//                    whose expires_at has passed), DELETE to release.
//   pg-for-update    SELECT ... FOR UPDATE NOWAIT on a pre-inserted row inside
//                    a transaction held open; COMMIT releases.
//   PostgreSQL fencing tokens (when ServiceOptions::fencing): nextval() of a
//   sequence taken while the lock is held.
//
// Codes follow docs/design.md 7.1: kAborted held elsewhere, kUnavailable the
// service did not answer, kDeadlineExceeded a wait ran out, kInternal an
// unexpected reply, kFailedPrecondition a client library missing from this
// build.
//
// Thread-safety: a LockService is thread-safe (NewSession from any thread);
// a LockSession belongs to one thread at a time.

#ifndef REDLOCK_BACKENDS_LOCK_SERVICE_H_
#define REDLOCK_BACKENDS_LOCK_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/lease.h"

namespace redlock::backends {

enum class Kind { kRedis, kRedlock, kEtcd, kZooKeeper, kPgAdvisory, kPgUnique, kPgForUpdate };

// "redis", "redlock", "etcd", "zookeeper", "pg-advisory", "pg-unique", "pg-for-update".
absl::string_view KindName(Kind kind);
[[nodiscard]] absl::StatusOr<Kind> ParseKind(absl::string_view name);
std::vector<Kind> AllKinds();

// The servers a kind needs (backends/servers.h starts them).
enum class ServerKind { kRedis, kEtcd, kZooKeeper, kPostgres };
ServerKind ServerOf(Kind kind);
absl::string_view ServerName(ServerKind server);  // "redis", "etcd", "zookeeper", "postgresql"

// The Debian packages a kind needs at run time (servers) and at build time
// (client libraries), as one `apt-get install` line.
std::string InstallLine(ServerKind server);

// OK when this build has the client library for `kind` (ZooKeeper's C client
// and libpq are optional at build time); else kFailedPrecondition naming the
// package.
absl::Status ClientAvailable(Kind kind);

// One successful acquisition.
struct Grant {
  std::string resource;
  // What identifies this holding: the Redis token, the etcd key, the znode
  // path, the table row's owner; for pg-advisory the session's backend pid.
  std::string token;
  std::optional<uint64_t> fencing_token;
  // When the successful attempt began, and the end of validity as the client
  // knows it: ttl-based recipes (redis, redlock, etcd's lease, pg-unique's
  // expires_at) end at acquired_at + ttl - drift; session-based ones
  // (zookeeper, pg-advisory, pg-for-update) at time_point::max(): they hold
  // while the session lives (LockSession::TimeLeft asks it).
  std::chrono::steady_clock::time_point acquired_at;
  std::chrono::steady_clock::time_point valid_until;
  redlock::Lease lease;  // redis, redlock
};

class LockSession {
 public:
  virtual ~LockSession() = default;
  // One attempt, no waiting: kAborted when someone else holds it.
  [[nodiscard]] virtual absl::StatusOr<Grant> TryAcquire(const std::string& resource,
                                                         absl::Duration ttl) = 0;
  // Waits up to `wait` (the recipe's own wake-up: release notifications,
  // etcd's lock service, a ZooKeeper watch on the predecessor; polling for
  // the table recipes). kDeadlineExceeded when the wait ran out.
  [[nodiscard]] virtual absl::StatusOr<Grant> Acquire(const std::string& resource,
                                                      absl::Duration ttl, absl::Duration wait) = 0;
  // Releasing an expired or lost grant is OK (nothing to do).
  [[nodiscard]] virtual absl::Status Release(const Grant& grant) = 0;
  // What the client believes is left: valid_until - now for ttl-based
  // recipes; for session-based ones an hour while the session looks alive
  // (connected), zero once it is known lost.
  virtual absl::Duration TimeLeft(const Grant& grant);
};

struct ServiceOptions {
  Kind kind = Kind::kRedis;
  // host:port of every member: Redis nodes, etcd client URLs, ZooKeeper
  // servers, the PostgreSQL server.
  std::vector<std::string> endpoints;
  // Prefix of every key, path or table key ("rb:<run>:" in the bench).
  std::string key_prefix;
  // One request (etcd HTTP, PostgreSQL statement); Redis: node_timeout.
  absl::Duration request_timeout = absl::Seconds(2);
  absl::Duration redis_node_timeout = absl::Milliseconds(50);
  // ZooKeeper's session timeout and etcd's session lease TTL (rounded up to
  // whole seconds, at least 2 s). Default: 10 s.
  absl::Duration session_timeout = absl::Seconds(10);
  // Fencing tokens where they cost something (redlock, redis, PostgreSQL);
  // etcd and ZooKeeper always give theirs (they are free).
  bool fencing = false;
  // Redis: release notifications (Client::Acquire with a wait).
  bool release_notifications = true;
  // PostgreSQL: user and database.
  std::string pg_user = "redlock";
  std::string pg_database = "postgres";
};

class LockService {
 public:
  // kFailedPrecondition when the client library is missing from this build,
  // kUnavailable when the service cannot be reached or set up.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LockService>> Create(ServiceOptions options);
  virtual ~LockService() = default;

  virtual Kind kind() const = 0;
  // One line: the recipe and how it is reached.
  virtual std::string Describe() const = 0;
  // A session of its own (connection, lease, ZooKeeper watches); sessions of
  // one service may share a connection where the client library is
  // thread-safe (the Redis library's Client, ZooKeeper's handle).
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<LockSession>> NewSession() = 0;
};

// Factories, one per family (lock_service.cc dispatches).
absl::StatusOr<std::unique_ptr<LockService>> NewRedisService(ServiceOptions options);
absl::StatusOr<std::unique_ptr<LockService>> NewEtcdService(ServiceOptions options);
absl::StatusOr<std::unique_ptr<LockService>> NewZooKeeperService(ServiceOptions options);
absl::StatusOr<std::unique_ptr<LockService>> NewPostgresService(ServiceOptions options);

}  // namespace redlock::backends

#endif  // REDLOCK_BACKENDS_LOCK_SERVICE_H_
