// sim/world.h: one deterministic simulated run of the real client.
//
// A run is a configuration (sim/config.h), a fault schedule and a seed. One
// seeded scheduler on one thread orders every event by (true time,
// sequence): messages on simulated connections, the nodes' execution
// (sim/node.h), replication, every client's timers on its own drifting
// clock, the workload's steps and the faults. Several internal::ClientImpl
// run in the process, each over a SimTransport (sim/transport.h), each
// driven by a worker that loops as the chaos lab's client does (acquire,
// use a store, release) through the asynchronous forms of the primitive
// drawn. The world writes the lab's history (chaos/history/history.h) with
// the true time, runs the lab's checker on it, checks what only the
// simulator can see (the nodes' truth), and judges every violation against
// the faults it injected exactly as the explorer does (documented safe).
//
//   RunInput in;
//   in.seed = 7;
//   in.config = DrawConfig(7);
//   in.faults = DrawFaults(in.config, 7);
//   RunOutput out = RunSimulation(in);
//   if (!out.findings.empty()) ...
//
// The same input gives the same output, byte for byte: the history, the
// trace, the violations.

#ifndef REDLOCK_SIM_WORLD_H_
#define REDLOCK_SIM_WORLD_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "chaos/check/checker.h"
#include "chaos/faults/fault_kind.h"
#include "sim/config.h"

namespace redlock::sim {

// One scheduled fault, every value concrete.
struct FaultEvent {
  int64_t at_ms = 0;
  // Empty: at `at_ms`. Else the first marker of this kind ("grant",
  // "use_read", "use_end", "invoke", "release", "extend") of any client
  // after `at_ms`; a client fault then acts on that client.
  std::string marker;
  chaos::FaultTemplate fault;
};

// The fault kinds the simulator implements (a subset of the lab's registry,
// plus the sim-only ones), and for each the reason when a configuration
// cannot have it ("" when it can).
std::vector<const chaos::FaultKind*> SimFaultKinds();
std::string SimUnsupported(const chaos::FaultKind& kind, const SimConfig& config);

// A random schedule over the run, as the explorer's GenerateSchedule draws
// one (waves of 1-3 faults, each kind with its registry weight, parameters
// from their explore ranges, one in three on a marker), from `seed`.
std::vector<FaultEvent> DrawFaults(const SimConfig& config, uint64_t seed);

struct RunInput {
  uint64_t seed = 1;
  SimConfig config;
  std::vector<FaultEvent> faults;
  // Format the history as text (RunOutput::history). Off, a run is a few
  // percent faster; the checker reads the events either way.
  bool history = true;
};

// A violation of a property the simulator checks itself (S5, L1, and the
// simulator's own: D1, H1, L2, L3, L4, L5; sim/README.md).
struct SimViolation {
  std::string property;
  std::string description;
  int64_t t = 0;  // true time, ns from the run's start
  std::vector<std::string> processes;
  int node = -1;  // the node (voter) it is about, when one
};

// A fault as it was injected, and what it may break (the lab's MayViolate).
struct InjectedFault {
  std::string kind;
  std::string description;     // "pause n1 for 300ms"
  int64_t begin = 0, end = 0;  // true time
  chaos::PropertySet may_violate = 0;
  chaos::PropertySet may_violate_idle = 0;
  std::vector<std::string> scope;  // client faults: the clients
  std::vector<int> nodes;          // the nodes it acts on
  bool tolerated = false;          // the lab's Tolerated: the run must ride it out
  bool data_lost = false;          // a node forgot what it held (no persistence, no vote)
};

struct RunOutput {
  std::string history;  // JSON Lines (chaos/history/history.h), with RunInput::history
  chaos::CheckResult check;
  std::vector<SimViolation> sim_violations;
  std::vector<InjectedFault> injected;
  // Properties violated that no injected fault explains, by name ("S1",
  // "S9", "H1", ...): the findings.
  std::set<std::string> findings;
  // Every property violated (explained or not), by name, with a count.
  std::map<std::string, int64_t> violated;
  int64_t invokes = 0;
  int64_t grants = 0;
  int64_t events = 0;
  std::string error;  // the simulator itself failed (a finding of its own)
};

// Where node commands go with --trace: one JSON object per command,
// {"conn":N,"now_ms":..,"argv":[..],"reply":..}.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void Line(const std::string& json) = 0;
};

RunOutput RunSimulation(const RunInput& input, TraceSink* trace = nullptr);

// The names of every property the simulator judges, in report order.
const std::vector<std::string>& PropertyNames();

}  // namespace redlock::sim

#endif  // REDLOCK_SIM_WORLD_H_
