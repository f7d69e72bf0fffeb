// sim/config.h: one simulated run's configuration, drawn from its seed.
//
// Every dimension the library documents is drawn with a stated weight
// (sim/README.md "What a run draws"): the nodes and their kinds, the options
// that change the algorithm (redlock/options.h), the primitive and its
// parameters, and the workload. A configuration that Client::Create would
// refuse (ValidateOptions) is never drawn. A configuration is a flat list of
// named fields, so that `--config k=v,...` can force any of them, a case
// file (JSON) can carry all of them, and the shrinker can lower them.
//
//   SimConfig c = DrawConfig(seed);
//   absl::Status s = ApplyOverrides("nodes=5,clients=3,primitive=mutex", &c);
//   std::string line = DescribeConfig(c);   // "N=5 [plain,noperm+aof,...] mutex ..."

#ifndef REDLOCK_SIM_CONFIG_H_
#define REDLOCK_SIM_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "redlock/options.h"
#include "sim/random.h"

namespace redlock::sim {

// How a node runs scripts.
enum class Scripting {
  kScripts,  // EVALSHA as usual
  kNoPerm,   // an ACL user without @scripting: NOPERM (the script-free path)
  kLualess,  // a server without Lua: EVAL unknown (the script-free path)
};

// One node of the client's list (a voter).
struct NodeConfig {
  Scripting scripting = Scripting::kScripts;
  // Reached over TLS in the client's options (rediss://). At this level the
  // transport is the same as plain TCP: only the options differ.
  bool tls = false;
  // Persistence with appendfsync always: a restart keeps the data.
  bool aof = false;
  // Asynchronous replicas of the master (0: an independent master). A node
  // with replicas is the "Sentinel-managed" kind, modelled by its effect: a
  // failover promotes the most up-to-date replica (what it had not received
  // is lost) and the client's next connection reaches it.
  int replicas = 0;
  // > 0: a Redis Cluster of this many masters, as one voter (slots split
  // evenly); each master has `replicas` replicas.
  int members = 0;
};

enum class Primitive { kMutex, kMultiLock, kRwLock, kSemaphore, kElection, kFair };
const char* PrimitiveName(Primitive p);

struct SimConfig {
  // ---- The nodes ----
  std::vector<NodeConfig> nodes;

  // ---- Options that change the algorithm (redlock/options.h) ----
  int quorum = 0;
  int64_t node_timeout_ms = 50;
  double drift_factor = 0.01;
  int64_t drift_floor_ms = 2;
  bool fencing = false;
  int fencing_lost_counters = 0;
  bool shared_counter = false;  // fencing_counters = kShared
  int durability_replicas = 0;
  int64_t durability_timeout_ms = 20;
  bool durability_fsync = false;
  bool notifications = true;
  int max_attempts = 3;
  int64_t retry_delay_ms = 200;
  int64_t retry_jitter_ms = 100;
  int64_t wait_poll_max_ms = 250;
  int64_t breaker_probe_ms = 100;
  int64_t backoff_min_ms = 10;
  int64_t backoff_max_ms = 1000;
  int64_t connect_timeout_ms = 1000;
  // "" or a hash tag for every key ("{locks}:"), as the README suggests for
  // a Redis Cluster node.
  std::string key_prefix;

  // ---- The primitive ----
  Primitive primitive = Primitive::kMutex;
  bool all_nodes = false;  // MultiLock: every node must grant
  int set_size = 2;        // MultiLock: resources per acquisition
  int permits = 2;         // Semaphore: K
  int readers = 1;         // ReadWriteLock: the first `readers` clients read
  // FairLock: FairOptions::place_ttl in ms (0: the library's default, 2 s).
  int64_t place_ttl_ms = 0;

  // ---- The workload (as the chaos lab's client loop) ----
  int clients = 3;
  int resources = 2;
  int64_t ttl_ms = 1000;
  int64_t use_ms = 30;
  int uses_per_lease = 2;
  int64_t guard_ms = 100;
  int64_t think_ms = 5;
  int64_t pre_release_ms = 0;
  int64_t retry_ms = 20;
  int64_t wait_ms = 0;        // > 0: acquire with a wait (woken by announcements)
  bool retries = false;       // without a wait: Acquire (max_attempts) instead of TryAcquire
  bool extend = false;        // extend before a use when less than half is left
  bool renew = false;         // AutoRenew while held
  bool watch_only = false;    // with renew: RenewOptions::extend false (the at-risk watch)
  bool release = true;        // false: let each lease lapse
  bool fenced_store = false;  // the store refuses a token lower than its fence

  // ---- Clocks, network, replication ----
  int64_t clock_ppm = 100;      // each clock's rate within +-this
  int64_t latency_us_lo = 100;  // one way, per message
  int64_t latency_us_hi = 2000;
  int64_t replication_lag_us_lo = 200;
  int64_t replication_lag_us_hi = 5000;

  // ---- The run ----
  int64_t duration_ms = 20000;

  // ---- A known-bad node, for the test that the simulator catches one ----
  // The first `lying_nodes` nodes answer OK to every SET, NX or not (they
  // overwrite a held key). Never drawn; 0 in every drawn configuration.
  int lying_nodes = 0;
  // ---- A known-bad client, for the test that S8 catches one ----
  // With the fair lock, the first `fair_jumpers` clients skip the queue:
  // their calls are recorded as fair calls with a wait, but acquire through
  // the plain mutex (Client::AcquireAsync), which ignores the places. Never
  // drawn; 0 in every drawn configuration.
  int fair_jumpers = 0;
};

// The fair lock's place ttl in ms (FairOptions::place_ttl; 0: the default).
int64_t PlaceTtlMs(const SimConfig& c);

// The client Options of a configuration (endpoints named after the nodes:
// "sim-n0:6379"; a cluster node "redis+cluster://c1m0:7000+c1m1:7001").
Options ToOptions(const SimConfig& c);

// Draws a configuration from `seed` (sim/README.md gives the weights).
// Always one that ValidateOptions accepts.
SimConfig DrawConfig(uint64_t seed);

// Checks a configuration: its options (ValidateOptions) and what the
// simulator needs (1-7 nodes, 1-8 clients, ...). kInvalidArgument naming the
// field.
absl::Status CheckConfig(const SimConfig& c);

// Every field as name -> value text, in a fixed order.
std::vector<std::pair<std::string, std::string>> ConfigFields(const SimConfig& c);
// Sets one field from its text. kInvalidArgument for an unknown name or a
// bad value.
absl::Status SetConfigField(const std::string& name, const std::string& value, SimConfig* c);
// "k=v,k=v" (values may not contain commas, except `nodes`, whose value is
// a '/'-separated list). Applies each in order.
absl::Status ApplyOverrides(const std::string& text, SimConfig* c);

// The `nodes` field: "plain/noperm+aof/replicas2/cluster3+aof" ...
std::string NodesText(const std::vector<NodeConfig>& nodes);
absl::StatusOr<std::vector<NodeConfig>> ParseNodes(const std::string& text);

// One line for the report: "N=5 [plain,plain,noperm,...] mutex fencing f=1 ...".
std::string DescribeConfig(const SimConfig& c);

// The dimensions counted in the report ("nodes", "primitive", "fencing",
// ...) and this configuration's value of each.
std::vector<std::pair<std::string, std::string>> ConfigDimensions(const SimConfig& c);

// The fenced acquisitions' F (algorithm.h's FencedQuorum) and the nodes a
// grant needs: the quorum, F, or every node (all-nodes mode).
int RequiredNodes(const SimConfig& c);
// The nodes an unfenced grant or an extension needs: the quorum, or every
// node (all-nodes mode).
int PlainQuorum(const SimConfig& c);

}  // namespace redlock::sim

#endif  // REDLOCK_SIM_CONFIG_H_
