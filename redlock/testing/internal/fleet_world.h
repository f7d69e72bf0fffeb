// The fake fleet's nodes (redlock/testing.h): the simulator's nodes
// (sim/node.h), what the test did to each (stopped, partitioned, slowed,
// its clock moved), and the transports of the clients over them.
//
// One mutex guards every node and every node's state: a node runs one
// command at a time, whichever client's I/O thread sends it. Lock order:
// the world's mutex before a transport's.

#ifndef REDLOCK_TESTING_INTERNAL_FLEET_WORLD_H_
#define REDLOCK_TESTING_INTERNAL_FLEET_WORLD_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "redlock/internal/reply.h"
#include "sim/node.h"

namespace redlock::testing {

class FleetTransport;

class FleetWorld {
 public:
  explicit FleetWorld(std::vector<std::string> names);
  ~FleetWorld();
  FleetWorld(const FleetWorld&) = delete;
  FleetWorld& operator=(const FleetWorld&) = delete;

  int size() const { return static_cast<int>(nodes_.size()); }
  const std::string& name(int node) const { return nodes_[static_cast<size_t>(node)].name; }

  // ---- Faults (FakeFleet's; `node` in range) ---------------------------------
  void Stop(int node);
  void Start(int node);
  void Slow(int node, absl::Duration latency);
  void Partition(int node);
  void Heal(int node);
  void RestartWithoutData(int node);
  void JumpClock(int node, absl::Duration by);

  // ---- Inspection -------------------------------------------------------------
  std::vector<std::string> Keys(int node);
  std::optional<std::string> Get(int node, const std::string& key);
  int64_t CommandsExecuted(int node);

  // ---- For the transports ---------------------------------------------------
  // A transport receives publications and hears of closed connections from
  // Register until Unregister.
  void Register(FleetTransport* transport);
  void Unregister(FleetTransport* transport);

  // How a request to a node goes now. `generation` changes whenever the
  // node's connections are closed (Stop, RestartWithoutData): a connection
  // belongs to one generation.
  struct Route {
    bool stopped = false;
    bool partitioned = false;
    absl::Duration latency;
    uint64_t generation = 0;
  };
  // REQUIRES: mu() held.
  Route RouteLocked(int node) const;
  std::mutex& mu() const { return mu_; }

  enum class Outcome {
    kRan,   // executed: `replies` has one reply per command
    kGone,  // the connection of `generation` was closed (the node stopped or restarted)
    kLost,  // the node is partitioned: the request never reached it
  };
  // Executes `commands` on `node` for a connection of `generation` whose
  // state is `session`, at the node's time, after the connection's
  // handshake (the SCRIPT LOAD of every library script) when `handshake`.
  // Publications go to every registered transport.
  Outcome Execute(int node, uint64_t generation, bool handshake, sim::Session& session,
                  const std::vector<sim::Argv>& commands, std::vector<internal::Reply>* replies);

 private:
  struct NodeState {
    std::string name;
    std::unique_ptr<sim::Node> node;
    bool stopped = false;
    bool partitioned = false;
    absl::Duration latency;
    int64_t clock_offset_ms = 0;
    uint64_t generation = 1;
    int restarts = 0;
    int64_t executed = 0;  // the clients' commands (not the handshakes')
  };
  // The node's wall clock in milliseconds: the real time, moved by JumpClock.
  int64_t NowMsLocked(const NodeState& n) const;
  // Closes every connection to the node: transports fail what is in flight.
  void CloseConnectionsLocked(int node, const std::string& why);
  void RestartLocked(NodeState& n, bool keep_data);

  mutable std::mutex mu_;
  std::vector<NodeState> nodes_;
  std::vector<FleetTransport*> transports_;
  const int64_t base_unix_ms_;
  const std::chrono::steady_clock::time_point base_;
};

// Splits a RESP payload (commands written back to back, as the library's
// Command holds them) into argument vectors. False when it is not a
// sequence of arrays of bulk strings.
bool SplitCommands(const std::string& payload, std::vector<sim::Argv>* out);

}  // namespace redlock::testing

#endif  // REDLOCK_TESTING_INTERNAL_FLEET_WORLD_H_
