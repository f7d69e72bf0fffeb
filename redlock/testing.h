// redlock/testing.h: a fake fleet of in-memory Redis nodes and real Clients
// over them, for testing your own code's handling of kAborted,
// kUnavailable, lost leases and fencing without a Redis server.
//
//   #include "redlock/testing.h"
//
//   absl::StatusOr<std::unique_ptr<redlock::testing::FakeFleet>> fleet =
//       redlock::testing::FakeFleet::Create(5);
//   ASSERT_TRUE(fleet.ok()) << fleet.status();
//   redlock::Client& client = (*fleet)->client();
//
//   absl::StatusOr<redlock::Lease> lease = client.Acquire("orders/42", absl::Seconds(10));
//   ASSERT_TRUE(lease.ok());
//   (void)(*fleet)->Stop(0);    // a minority down: locks are still granted
//   (void)(*fleet)->Stop(1);
//   (void)(*fleet)->Stop(2);    // a majority down: kUnavailable
//   EXPECT_TRUE(absl::IsUnavailable(client.TryAcquire("orders/7", absl::Seconds(10)).status()));
//
// The Client is the library's own (the same algorithm, scripts, retries,
// renewals and release announcements as Client::Create's); only the network
// is replaced. Each node is the deterministic simulator's node (sim/node.h):
// Redis 7.0's semantics for every command the library sends, the library's
// Lua scripts run as written in Lua 5.1, keys expiring by the node's own
// clock. The fleet runs in real time: node timeouts, ttls and waits are real
// durations, so keep them short in tests (tens of milliseconds for
// node_timeout, a second or less for ttls).
//
// Each node can be stopped (connections refused) and started again, slowed
// (its replies come late), partitioned (requests get no reply and time out
// after Options::node_timeout), restarted without its data, and have its
// clock jumped forward or backward (its keys expire by that clock, as Redis
// expires by its wall clock). Everything else about the nodes is as a real
// server's, including a node executing a request whose reply comes too late.
//
// Not simulated: replicas (Options::durability is refused), Redis Cluster
// and Sentinel (every node is one plain master), TLS, passwords, the
// circuit breaker (a stopped node refuses at once; a partitioned one times
// out every request), Options::max_in_flight_per_node, and the connection
// events of Observer::OnNode (the other observer events are the client's
// own and are reported). The names of the nodes (Options::nodes) are only
// names: nothing connects to them.
//
// Thread-safety: every method may be called from any thread, including from
// a callback of one of the fleet's clients. Each client has its own I/O
// thread, as a real one does. The fleet and its clients may be destroyed in
// any order (the nodes live until the last of them goes).

#ifndef REDLOCK_TESTING_H_
#define REDLOCK_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/options.h"

namespace redlock::testing {

// The nodes' shared state (redlock/testing/internal/fleet_world.h).
class FleetWorld;

// N in-memory Redis nodes and the Clients over them.
class FakeFleet {
 public:
  // The most nodes a fleet may have.
  static constexpr int kMaxNodes = 64;

  // Makes `nodes` nodes (1 to kMaxNodes), all started, empty, their clocks
  // at the real time, and a first client over them with `options`
  // (client()). `options.nodes` names the nodes in messages: leave it empty
  // for the names "fake-node-0:6379", "fake-node-1:6379", ..., or give one
  // endpoint per node (nothing connects to them). kInvalidArgument for a
  // node count out of range, a name list of another size, options that
  // Client::Create refuses (ValidateOptions), and Options::durability with
  // replicas (the fake nodes have none).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FakeFleet>> Create(
      int nodes, Options options = Options());

  FakeFleet(const FakeFleet&) = delete;
  FakeFleet& operator=(const FakeFleet&) = delete;
  // Destroys client() (its pending calls complete with kCancelled first, as
  // for any Client). Clients made by NewClient may outlive the fleet.
  ~FakeFleet();

  // The number of nodes.
  int size() const;
  // Node `node`'s name ("host:port" as in messages); "" when out of range.
  std::string NodeName(int node) const;

  // The first client, made by Create. Lives as long as the fleet.
  Client& client();
  // Another client over the same nodes (another process, say): its own I/O
  // thread and connections, its own tokens. `options` as for Create; its
  // nodes must be empty or name the same nodes as the fleet's. The client
  // may outlive the fleet.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Client>> NewClient(Options options);
  // Another client with the options the fleet was created with.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Client>> NewClient();

  // ---- Faults, per node (0-based; kInvalidArgument when out of range) ------
  //
  // Each takes effect at once for every client: a request in flight to a
  // node that stops fails with kUnavailable (the connection was lost); one
  // in flight to a node that is partitioned gets no reply and times out.

  // The node's process stops: every connection to it is closed and new ones
  // are refused (kUnavailable at once). Its data is kept for Start.
  absl::Status Stop(int node);
  // A stopped node starts again with its data (as with appendfsync always)
  // and an empty script cache; keys whose ttl passed meanwhile are gone.
  // No effect on a running node.
  absl::Status Start(int node);
  // The node's replies come `latency` late (from now on; zero: on time). A
  // request is executed when it reaches the node, `latency` after it was
  // sent; when that is past Options::node_timeout the client gets
  // kUnavailable ("no reply within ...") but the node still executes it.
  // kInvalidArgument for a negative or infinite latency.
  absl::Status Slow(int node, absl::Duration latency);
  // Requests to the node are lost from now on: each gets no reply and times
  // out after Options::node_timeout (kUnavailable). Release announcements
  // from it are lost too. The node keeps its data and its clock runs on.
  absl::Status Partition(int node);
  // Undoes Partition and Slow: the node answers on time again (requests
  // lost meanwhile stay lost). Does not start a stopped node.
  absl::Status Heal(int node);
  // The node's process restarts without persistence: connections are
  // closed (requests in flight fail with kUnavailable), its keys, fencing
  // counters and script cache are gone, and it accepts connections again
  // at once (a stopped node stays stopped, and starts empty).
  absl::Status RestartWithoutData(int node);
  // The node's wall clock jumps by `by` (negative: backward) and runs on
  // from there: its keys expire by it, so a jump forward past a key's ttl
  // makes the key gone at once. kInvalidArgument for an infinite jump.
  absl::Status JumpClock(int node, absl::Duration by);

  // ---- Inspection (for assertions; never seen by the clients) -------------

  // The node's live keys, sorted (fencing counters included; a lock's key
  // is Options::key_prefix + the resource).
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> Keys(int node) const;
  // The value of `key` on the node (a lock's key holds its lease's token);
  // kNotFound when the key is missing or expired.
  [[nodiscard]] absl::StatusOr<std::string> Get(int node, absl::string_view key) const;
  // How many commands the node has executed for the clients since the fleet
  // was made (a connection's handshake not counted; a request lost to a
  // partition neither). A test can wait for a call's requests to reach the
  // nodes before it injects the next fault (a majority of them: an attempt
  // stops sending once its outcome is decided, so it may never reach the
  // last node).
  [[nodiscard]] absl::StatusOr<int64_t> CommandsExecuted(int node) const;

 private:
  FakeFleet(std::shared_ptr<FleetWorld> world, Options options, std::unique_ptr<Client> client);
  absl::Status CheckNode(int node) const;

  std::shared_ptr<FleetWorld> world_;
  Options options_;
  std::unique_ptr<Client> client_;
};

}  // namespace redlock::testing

#endif  // REDLOCK_TESTING_H_
