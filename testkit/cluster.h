// A throw-away Redis Cluster on loopback, for tests and the bench: a fleet
// (fleet.h) of cluster-mode redis-server processes joined into one cluster,
// M masters each serving an equal share of the 16384 slots, R replicas per
// master.
//
//   absl::StatusOr<std::unique_ptr<Cluster>> c = Cluster::Start({.masters = 3});
//   options.nodes = {(*c)->endpoint()};        // redis+cluster://seeds
//   (*c)->MigrateSlot(slot, 0, 1);             // every key of the slot moves
//   (*c)->KillMaster(0);                       // its replica takes over
//
// The cluster is built with CLUSTER ADDSLOTSRANGE, MEET and REPLICATE (what
// redis-cli --cluster create does), then waited for until every member says
// cluster_state:ok and agrees on the slot map.
//
// Thread-safety: as Fleet; the topology calls are for one test thread.

#ifndef REDLOCK_TESTKIT_CLUSTER_H_
#define REDLOCK_TESTKIT_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/options.h"
#include "testkit/fleet.h"

namespace redlock::testkit {

struct ClusterOptions {
  int masters = 3;
  int replicas_per_master = 1;
  // How long a silent master has before its replica is promoted.
  absl::Duration node_timeout = absl::Seconds(1);
  // How long Start waits for the cluster to agree.
  absl::Duration ready_timeout = absl::Seconds(30);
};

class Cluster {
 public:
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(ClusterOptions options = {});

  // The member processes: masters first (0..masters-1), then the replicas
  // (master i's r-th replica is masters + i * replicas_per_master + r).
  Fleet& fleet() { return *fleet_; }
  int masters() const { return options_.masters; }

  // redis+cluster:// with every master as a seed.
  Endpoint endpoint() const;
  // The same as a URL ("redis+cluster://127.0.0.1:p1+127.0.0.1:p2...").
  std::string url() const;

  // The member serving `slot` now, as member `ask` (any member) sees it.
  absl::StatusOr<int> MasterOf(int slot, int ask = -1) const;
  // Starts moving `slot` from member `from` to member `to` (IMPORTING and
  // MIGRATING): keys not moved yet are still read at `from`, new ones go to
  // `to` (ASK).
  absl::Status BeginMigration(int slot, int from, int to);
  // Moves every key of the slot (MIGRATE) and gives the slot to `to` on
  // every master (MOVED from then on).
  absl::Status FinishMigration(int slot, int from, int to);
  absl::Status MigrateSlot(int slot, int from, int to);
  // SIGKILLs master member `master` and waits until one of its replicas
  // serves its slots (cluster_state:ok again on the others). Returns that
  // replica's member index.
  absl::StatusOr<int> KillMaster(int master, absl::Duration timeout = absl::Seconds(30));
  // Waits until every running member says cluster_state:ok.
  absl::Status WaitHealthy(absl::Duration timeout) const;

 private:
  Cluster(ClusterOptions options, std::unique_ptr<Fleet> fleet)
      : options_(options), fleet_(std::move(fleet)) {}
  absl::StatusOr<std::string> Id(int member) const;
  absl::Status Build();

  ClusterOptions options_;
  std::unique_ptr<Fleet> fleet_;
  std::vector<std::string> ids_;  // per member: its node id
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_CLUSTER_H_
