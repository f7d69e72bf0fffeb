// chaos/backends/backend_scenarios.h: the same client workload and checker as
// redlock-chaos, run against each lock service of backends/lock_service.h
// (this library's Redlock, etcd, ZooKeeper, PostgreSQL's three recipes)
// under the same four faults:
//
//   client-pause    a holder SIGSTOPped for 2.5 ttl right after it read the
//                   counter (a GC pause past its lease or session)
//   member-restart  kill -9 and immediate restart of the leader (etcd,
//                   ZooKeeper), of node n2 (Redlock), of the database
//   partition       the leader (n0 for Redlock, the database) cut from every
//                   other process for 2 ttl (root: nft in a private network
//                   namespace, members told apart by uid)
//   clock-jump      the leader's wall and monotonic clocks jump +3 ttl (the
//                   clock shim, LD_PRELOAD; a server the shim does not reach
//                   is reported as SKIP with the reason, not as clean)
//
// Clients are redlock-chaos-backend-client processes (chaos/backends/backend_client.h),
// 3 per run on one resource, fencing on, writing the usual JSONL history;
// the checker (chaos/check/checker.h) judges S1-S4 (S5, leftover Redis keys, is the
// Redis harness's own and is not checked here). The verdicts expected are
// the ones the runs showed (backends/README.md explains each).
//
// Thread-safety: RunBackendScenario runs one scenario at a time, on a thread
// of its own (servers and clients die with the thread that forked them).

#ifndef REDLOCK_CHAOS_BACKENDS_BACKEND_SCENARIOS_H_
#define REDLOCK_CHAOS_BACKENDS_BACKEND_SCENARIOS_H_

#include <string>
#include <vector>

#include "backends/lock_service.h"
#include "chaos/run/scenario.h"

namespace redlock::chaos {

enum class BackendFault { kNone, kClientPause, kMemberRestart, kPartition, kClockJump };
absl::string_view BackendFaultName(BackendFault fault);  // "no-faults", "client-pause", ...

struct BackendScenario {
  std::string name;  // "<backend>-<fault>", e.g. "etcd-client-pause"
  backends::Kind kind = backends::Kind::kEtcd;
  BackendFault fault = BackendFault::kNone;
  std::string config;  // one line for the table
  std::string why;     // why the expected verdict
  Expectation expect;
};

// Every backend x every fault (and no-faults), in table order.
const std::vector<BackendScenario>& BackendCatalog();
const BackendScenario* FindBackendScenario(absl::string_view name);

// RunOptions::client_binary: redlock-chaos-backend-client ("" = next to this
// executable). A backend whose server or client library is missing is
// skipped (a failure under CI=true); a fault that needs root without it too.
ScenarioResult RunBackendScenario(const BackendScenario& scenario, const RunOptions& options);
std::string DefaultBackendClientBinary();

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_BACKENDS_BACKEND_SCENARIOS_H_
