// chaos/backends/backend_client.h: the chaos client loop (chaos/clients/workload.h) over any
// lock service of backends/lock_service.h, so etcd, ZooKeeper and
// PostgreSQL run the same workload, write the same JSONL history and are
// judged by the same checker as the library.
//
// redlock-chaos-backend-client takes the usual client command line
// (ClientArgs); the lock service comes from the environment:
//   REDLOCK_BACKEND=etcd|zookeeper|pg-advisory|pg-unique|pg-for-update|redis|redlock
// and --nodes are its members' client endpoints. With --fencing the grant's
// fencing token (create revision, znode sequence, sequence value, the
// library's token) guards the counter through redlock/fencing.h.
//
// A grant records start = acquired_at and valid_until = the end of validity
// as the client knows it; a session-based lock (ZooKeeper, advisory, FOR
// UPDATE) holds "while the session lives", recorded as one hour after the
// grant, and the client asks TimeLeft (connected?) before each use.

#ifndef REDLOCK_CHAOS_BACKENDS_BACKEND_CLIENT_H_
#define REDLOCK_CHAOS_BACKENDS_BACKEND_CLIENT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "chaos/clients/workload.h"

namespace redlock::chaos {

inline constexpr char kBackendEnv[] = "REDLOCK_BACKEND";

// The LockBackend of REDLOCK_BACKEND for `config` (kInvalidArgument when it
// is unset or unknown; the service's own errors otherwise).
[[nodiscard]] absl::StatusOr<std::unique_ptr<LockBackend>> MakeServiceBackend(
    const ClientConfig& config);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_BACKENDS_BACKEND_CLIENT_H_
