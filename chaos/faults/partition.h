// chaos/faults/partition.h: network partitions with nft rules inside a private
// network namespace (root only).
//
// Topology. The harness creates a network namespace of its own
// ("redlock-chaos-<pid>-<n>", `ip netns add`), brings its `lo` up and runs
// the whole scenario in it: the scenario thread enters it with setns(2), so
// the nodes, the data server and the client processes it forks live there
// too. Nodes bind distinct loopback addresses (127.0.0.11, .12, ...). Nothing
// leaves the namespace; every address is in 127.0.0.0/8.
//
// Telling clients apart. All traffic is on `lo` and the library does not bind
// a source address, so every client connects from 127.0.0.1. Clients are
// instead distinguished by uid: client k runs as uid kClientUidBase + k. One
// nft chain at the "mangle" priority of the output hook copies the uid of a
// client's socket into the connection's conntrack mark (k + 1), so the
// replies a node sends back on that connection, which belong to a root-owned
// socket, can be matched too:
//
//   client -> node   meta skuid <uid of k> ip daddr <node> tcp dport <port> drop
//   node -> client   ct mark <k+1> ip saddr <node> tcp sport <port> drop
//
// A cut of one direction installs one of the two rules; a full cut both. The
// harness's own connections (uid 0, mark 0) are never cut.
//
// Cleanup. The rules live in one nft table of the namespace; Heal() flushes
// the cut chain, the Partitioner's destructor deletes the table, and
// NetNamespace's destructor leaves the namespace and deletes it (which would
// remove any leftover rule with it). Both are registered with chaos/base/cleanup.h
// so a signal also removes them.
//
// The rule builder is pure (text in, text out) and unit-tested without
// applying anything.

#ifndef REDLOCK_CHAOS_FAULTS_PARTITION_H_
#define REDLOCK_CHAOS_FAULTS_PARTITION_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chaos/history/history.h"
#include "chaos/history/nemesis.h"

namespace redlock::chaos {

// Client k of a partition scenario runs as uid kClientUidBase + k (no passwd
// entry needed; inside the private namespace the uids cannot clash).
inline constexpr int kClientUidBase = 61001;

enum class CutDirection {
  kBoth,      // nothing passes
  kToNode,    // requests are dropped (the client's packets)
  kFromNode,  // replies are dropped (the node's packets): the node executes, the client never hears
};

absl::string_view CutDirectionName(CutDirection d);

// One cut link between client `client` and node `node` (indexes).
struct LinkCut {
  int client = 0;
  int node = 0;
  CutDirection direction = CutDirection::kBoth;
};

struct PartitionSpec {
  std::string name;  // the shape, e.g. "isolate n2"
  std::vector<LinkCut> cuts;
  // "c1-x-n0 c1-x-n1 c2->x-n3" (x: both, >x: to node only, x<: from node only).
  std::string Describe() const;
  // The nodes and clients of the cut links (what the partition acts on).
  FaultSite Site() const;
};

// ---- Shapes ----------------------------------------------------------------

// Node `node` unreachable from every client.
PartitionSpec IsolateNode(int node, int nodes, int clients);
// Two sides: the clients of `side_a_clients` reach only `side_a_nodes`, the
// other clients only the other nodes.
PartitionSpec SplitBrain(const std::vector<int>& side_a_nodes,
                         const std::vector<int>& side_a_clients, int nodes, int clients);
// Client k reaches exactly views[k] (overlapping views allowed).
PartitionSpec FromViews(const std::vector<std::vector<int>>& views, int nodes);
// Client `client` cut from `nodes`, in one or both directions.
PartitionSpec CutClient(int client, const std::vector<int>& nodes, CutDirection direction);

// ---- Rule builder ------------------------------------------------------------

struct NetEndpoint {
  std::string host;  // 127.0.0.0/8
  int port = 0;
};

struct RuleContext {
  std::string table;               // nft table (family ip), e.g. "redlock_chaos_123_1"
  std::vector<int> client_uids;    // uid of client k
  std::vector<NetEndpoint> nodes;  // address of node i
};

// The table with its mark chain (uid -> conntrack mark) and an empty cut chain.
[[nodiscard]] absl::StatusOr<std::string> BuildNftSetup(const RuleContext& ctx);
// Replaces the cut chain's rules with those of `spec`.
[[nodiscard]] absl::StatusOr<std::string> BuildNftCut(const RuleContext& ctx,
                                                      const PartitionSpec& spec);
// Empties the cut chain.
std::string BuildNftHeal(const RuleContext& ctx);
// Deletes the table.
std::string BuildNftTeardown(const RuleContext& ctx);

// ---- Namespace and rules -----------------------------------------------------

// OK when partitions can run here (root, and the `tools` answer their
// version flag); otherwise kFailedPrecondition with the reason (the scenario
// is reported as skipped), or under CI (CI=true) kNotFound: there a scenario
// that cannot run is a failure.
absl::Status PartitionSupport(const std::vector<std::pair<std::string, std::string>>& tools = {
                                  {"ip", "-V"}, {"nft", "-v"}});

// "<prefix>-<pid>-<n>", unique in this host while this process lives.
std::string UniqueName(absl::string_view prefix);

class NetNamespace {
 public:
  // `ip netns add name`, `ip -n name link set lo up`; registered for cleanup.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<NetNamespace>> Create(std::string name);
  // Leaves (if the creating thread entered) and deletes the namespace.
  ~NetNamespace();
  NetNamespace(const NetNamespace&) = delete;
  NetNamespace& operator=(const NetNamespace&) = delete;

  const std::string& name() const { return name_; }

  // setns(2) of the calling thread into the namespace; the thread's previous
  // namespace is remembered for Leave(). Children forked and threads created
  // by this thread afterwards inherit it.
  [[nodiscard]] absl::Status Enter();
  [[nodiscard]] absl::Status Leave();

  // `ip netns exec <name> nft -f /dev/stdin` with `script`.
  [[nodiscard]] absl::Status RunNft(const std::string& script) const;

 private:
  explicit NetNamespace(std::string name) : name_(std::move(name)) {}
  std::string name_;
  int saved_fd_ = -1;
};

class Partitioner {
 public:
  // Installs the table (BuildNftSetup) in `ns`.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Partitioner>> Create(const NetNamespace* ns,
                                                                           RuleContext ctx,
                                                                           HistoryWriter* history);
  // Heals and deletes the table.
  ~Partitioner();
  Partitioner(const Partitioner&) = delete;
  Partitioner& operator=(const Partitioner&) = delete;

  // Replaces the current cuts with `spec`'s; nemesis "partition" start (and
  // stop of the previous one).
  [[nodiscard]] absl::Status Apply(const PartitionSpec& spec);
  // Removes every cut; nemesis "partition" stop.
  [[nodiscard]] absl::Status Heal();
  bool active() const { return active_; }
  const RuleContext& context() const { return ctx_; }

 private:
  Partitioner(const NetNamespace* ns, RuleContext ctx, HistoryWriter* history)
      : ns_(ns), ctx_(std::move(ctx)), log_(history) {}
  void StopActive();

  const NetNamespace* ns_;
  RuleContext ctx_;
  NemesisLog log_;
  bool active_ = false;
};

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_FAULTS_PARTITION_H_
