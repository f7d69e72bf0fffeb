// bench/backends_scenario.h: `redlock-bench --scenario backends`, the
// library against etcd, ZooKeeper and PostgreSQL on one machine, one
// workload, the same faults (backends/README.md).
//
// One group; for every backend (backends/lock_service.h: redis, redlock,
// etcd, zookeeper, pg-advisory, pg-unique, pg-for-update) four rows:
//
//   x1       uncontended acquire+release, one caller (TryAcquire + Release)
//   xC       throughput with C callers (--callers), each its own session
//   hot      hand-off on one hot resource, --hot_waiters callers blocking in
//            the recipe's own wait (LockSession::Acquire with a wait)
//   stopped  one caller while one member is SIGSTOPped for the whole row:
//            Redlock's last node, the Raft/Zab leader of etcd and
//            ZooKeeper, the one Redis node, the database itself
//
// Servers are started here (backends/servers.h) and stopped after their
// rows; a backend whose packages are missing is reported as skipped with
// the install line, never as a harness error.

#ifndef REDLOCK_BENCH_BACKENDS_SCENARIO_H_
#define REDLOCK_BENCH_BACKENDS_SCENARIO_H_

#include <string>
#include <utility>
#include <vector>

#include "bench/results.h"
#include "bench/scenarios.h"

namespace redlock::bench {

// backends_latency_cdf.svg and backends_handoff_cdf.svg, when the run has
// the backends group.
std::vector<std::pair<std::string, std::string>> RenderBackendPlots(const BenchResults& results);

// The comparison as a Markdown table (one line per backend), from the
// backends group; "" when the run has none.
std::string BackendsMarkdown(const BenchResults& results);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_BACKENDS_SCENARIO_H_
