// chaos/faults/replication.h: replicated nodes for the chaos harness. Each lock
// node is run as a master with asynchronous replicas, optionally watched by
// Debian's redis-sentinel, and its faults are the ones that make such a
// deployment lose a lock:
//
//   replication delayed     Stall(i) / Resume(i)       "replication_stall" start/stop:
//                           master -> replica bytes held on the replication link
//   replication link cut    CutLink(i)                 "replication_cut" instant: the
//                           link goes down, whatever it held is lost
//   master isolated         Isolate(i) / Rejoin(i)     "partition" start/stop: the
//                           master cut from its replicas and from Sentinel
//   replica promoted        Promote(i)                 "failover" instant: the harness
//                           runs REPLICAOF NO ONE
//                           AwaitSentinelFailover(i)   "failover" instant: Sentinel did it
//   old master back         RejoinAsReplica(i)         "rejoin" instant: restarted empty as
//                           a replica of the new master
//
// Killing the master is the node supervisor's (NodeSupervisor::Kill, a
// "kill" event): the masters are the supervisor's nodes, so every other node
// fault works on them as before. After a failover, node i is its promoted
// replica: MasterAddress(i) says where clients must go, and the runner
// re-points the clients' proxies there (as a Sentinel-aware client would).
//
// Topology of node i (all on 127.0.0.1):
//
//   replicas --REPLICAOF--> [replication link proxy] --> master (supervisor node i)
//   Sentinel --monitors---> [Sentinel link proxy]    --> master
//
// Sentinel monitors each master through a proxy of its own, so a partition
// can cut the master from Sentinel without cutting it from the clients; the
// replicas replicate through another, so replication can be delayed without
// Sentinel noticing. Sentinel's failover-timeout is long (60 s) so that it
// never "fixes" the replicas' different upstream address during a run.
//
// Start hands over a deployment in the state every run assumes: each master
// confirms a write with all its replicas (WAIT), and every Sentinel names the
// master it was given. The Sentinels judge a master down only after
// sentinel_down_after once setup is over: during setup (discovering the
// replicas and each other, they rewrite and fsync their config files) they
// allow a minute, so that a stall there (a slow disk, a loaded machine) can
// no longer fail a master over before the run begins, unknown to the
// harness. That left the clients on a master without a replica (every
// durable grant refused, WAIT 0) and was what split-brain-durable's "only 0
// grants" for some runs came from.
//
// Thread-safety: call from the scenario thread only.

#ifndef REDLOCK_CHAOS_FAULTS_REPLICATION_H_
#define REDLOCK_CHAOS_FAULTS_REPLICATION_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chaos/faults/partition.h"
#include "chaos/faults/supervisor.h"
#include "chaos/history/nemesis.h"
#include "testkit/fault_proxy.h"
#include "testkit/redis.h"
#include "testkit/replication.h"

namespace redlock::chaos {

// The test kit's fault equipment, as the harness names it.
using testkit::ClockControl;
using testkit::Direction;
using testkit::DirectionName;
using testkit::FaultProxy;
using testkit::FaultSpec;
using testkit::ProxyOptions;

struct ReplicationOptions {
  int replicas = 1;  // per node
  // Start this many Sentinels monitoring every master (name "n<i>", quorum:
  // a majority of them). 0: none.
  int sentinels = 0;
  // When >= 0, Sentinel s runs as uid sentinel_uid_base + s, and `netns` is
  // the namespace it runs in: CutSentinel then drops its traffic with nft
  // rules on its uid. Without them CutSentinel fails.
  int sentinel_uid_base = -1;
  // Every replica under the clock shim, with a control file of its own in
  // `dir` (replica_clock_offset moves one replica's wall clock).
  bool clock_shim = false;
  const NetNamespace* netns = nullptr;
  absl::Duration sentinel_down_after = absl::Seconds(1);
  // Sentinel's config and log (kept with the run's histories).
  std::string dir;
  // Called once the Sentinels watch every master (replicas linked, peers
  // known), before the readiness check and before sentinel_down_after
  // applies: a test stalls a node there.
  std::function<void()> during_setup;
};

class ReplicatedNodes {
 public:
  // Starts the replicas of every node of `masters` (waiting for their first
  // sync) and, with options.sentinel, the Sentinel (waiting until it sees
  // every replica linked). `masters` and `log` must outlive this object.
  static absl::StatusOr<std::unique_ptr<ReplicatedNodes>> Start(NodeSupervisor* masters,
                                                                ReplicationOptions options,
                                                                NemesisLog* log);

  ~ReplicatedNodes();
  int size() const { return static_cast<int>(nodes_.size()); }
  int sentinels() const { return static_cast<int>(sentinels_.size()); }
  const testkit::Sentinel& sentinel(int s) const { return *sentinels_[static_cast<size_t>(s)]; }
  // "host:port" by which the Sentinels know node i's original master (its
  // Sentinel link proxy).
  std::string WatchedAddress(int i) const;
  // Nodes whose Sentinels (the first that answers and is not cut off) name
  // another master than the harness's, with what they say: a failover no
  // fault asked for. Empty without Sentinels.
  std::vector<std::string> UnexpectedFailovers() const;
  // "host:port+host:port..." of the Sentinels ("" without one), as
  // redis+sentinel:// writes them; they name node i's master "n<i>".
  std::string SentinelAddresses() const;
  // "host:port" of node i's current master (its promoted replica after a
  // failover).
  const std::string& MasterAddress(int i) const;
  bool failed_over(int i) const { return nodes_[static_cast<size_t>(i)].failed_over; }
  // One command on node i's current master.
  absl::StatusOr<testkit::RedisValue> Command(int i, const std::vector<std::string>& args,
                                              absl::Duration timeout = absl::Seconds(2)) const;

  [[nodiscard]] absl::Status Stall(int i);
  void Resume(int i);
  void CutLink(int i);
  // `others`: clients cut from the master too (they are logged on the
  // partition's site; the runner cuts their links).
  void Isolate(int i, const std::vector<std::string>& others);
  [[nodiscard]] absl::Status Rejoin(int i);
  // The first replica of node i becomes its master (REPLICAOF NO ONE).
  [[nodiscard]] absl::StatusOr<std::string> Promote(int i);
  // Waits until Sentinel reports a new master for node i (its promoted
  // replica) and returns its address.
  [[nodiscard]] absl::StatusOr<std::string> AwaitSentinelFailover(int i, absl::Duration timeout);
  // After a failover: node i's old master (killed) is started again, empty,
  // as a replica of the new master ("rejoin" instant), which lets the new
  // master confirm writes again. Sentinel would do the same once it sees the
  // old master back; the harness does it at once.
  [[nodiscard]] absl::Status RejoinAsReplica(int i);

  // Node i's first replica's clock (null without ReplicationOptions::clock_shim).
  ClockControl* replica_clock(int i);

  // Sentinel s cut off from the nodes and the other Sentinels (nft rules on
  // its uid: it can still answer clients on its port, but it starts no
  // connection and nobody else's reaches it); "stale_sentinel" start/stop.
  [[nodiscard]] absl::Status CutSentinel(int s);
  [[nodiscard]] absl::Status RestoreSentinel(int s);

  // Ends stalls, isolations and Sentinel cuts (links up again). Failovers
  // stay.
  void HealAll();

 private:
  struct Node {
    std::string master;  // current master address
    std::string original;
    std::unique_ptr<FaultProxy> link;      // replication link
    std::unique_ptr<FaultProxy> sentinel;  // Sentinel's link to the master
    bool stalled = false;
    bool isolated = false;
    bool failed_over = false;
  };

  ReplicatedNodes(NodeSupervisor* masters, NemesisLog* log) : masters_(masters), log_(log) {}
  // Each master confirms a write with its replicas, and every Sentinel names
  // it; then the Sentinels get sentinel_down_after (class comment).
  absl::Status FinishSetup();
  absl::Status ApplySentinelCuts();
  uintptr_t this_id() const { return reinterpret_cast<uintptr_t>(this) % 100000; }
  void Failed(int i, const std::string& address, const std::string& how);

  NodeSupervisor* masters_;
  NemesisLog* log_;
  std::vector<Node> nodes_;
  std::unique_ptr<testkit::Replicas> replicas_;
  std::vector<std::unique_ptr<testkit::Sentinel>> sentinels_;
  ReplicationOptions options_;
  std::string nft_table_;  // the Sentinel cut rules, once created
  std::vector<bool> cut_;  // per Sentinel
  std::vector<std::unique_ptr<ClockControl>> replica_clocks_;  // by replica fleet index
};

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_FAULTS_REPLICATION_H_
