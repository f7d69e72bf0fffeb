// chaos/faults/supervisor.h: the node supervisor of the chaos harness.
//
// A NodeSupervisor owns a Fleet (testkit/fleet.h, the one fixture that
// starts real redis-server processes) and performs the node faults of the
// fault model (docs/design.md 8.1), logging every action as a nemesis event
// in the history:
//
//   kill -9                 Kill(i)                    nemesis "kill" start
//   start again             StartNode(i)               nemesis "kill" stop
//   kill -9 + start at once RestartNow(i)              "restart" instant
//   kill -9, wait, start    RestartDelayed(i, d)       "kill" start/stop
//   power loss              RestartAmnesia(i, spec)    "amnesia" instant:
//                           kill -9, cut the tail of the AOF (or drop the
//                           data dir), start again
//   SIGSTOP / SIGCONT       Pause(i) / Resume(i)       "pause" start/stop
//   clock faults            ClockJump, ClockSet,       "clock_jump" instant,
//                           ClockStrobe, ClockSteady   "clock_strobe" start/stop
//
// Persistence is a fleet-wide choice (SupervisorOptions::aof: appendonly yes,
// appendfsync always). Clock faults need SupervisorOptions::clock_shim: every
// node is then started with LD_PRELOAD of the clock shim and a control file
// of its own (testkit/clock_control.h), so one node's clock moves alone; the
// offset survives restarts (the file stays).
//
// Thread-safety: call from one thread, the one that started the supervisor
// (the fleet's nodes die with the thread that forked them).

#ifndef REDLOCK_CHAOS_FAULTS_SUPERVISOR_H_
#define REDLOCK_CHAOS_FAULTS_SUPERVISOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chaos/history/history.h"
#include "chaos/history/nemesis.h"
#include "testkit/clock_control.h"
#include "testkit/fleet.h"

namespace redlock::chaos {

// The test kit's fault equipment, as the harness names it.
using testkit::ClockControl;
using testkit::ClockState;

// ---- AOF surgery (amnesia) --------------------------------------------------

// One top-level unit of an AOF file: a command, or a MULTI ... EXEC block
// (kept whole, as Redis replays it atomically).
struct AofUnit {
  int64_t offset = 0;  // first byte in the file
  int64_t length = 0;  // bytes
  // Every command of the unit, each as its arguments.
  std::vector<std::vector<std::string>> commands;
};

// Parses RESP command arrays ("*N\r\n$len\r\narg\r\n...") into units. A torn
// last command (a crash mid-write) is not returned: `*complete_bytes` (if not
// null) is where the last whole unit ends. kInvalidArgument on bytes that are
// not RESP arrays of bulk strings.
[[nodiscard]] absl::StatusOr<std::vector<AofUnit>> ParseAofUnits(absl::string_view data,
                                                                 int64_t* complete_bytes = nullptr);

// What to forget. Exactly one mode.
struct AmnesiaSpec {
  enum class Mode {
    // Drop the last unit that writes `key` (SET/DEL/... with key as first
    // argument, inside a MULTI block too) and everything after it: the node
    // lost the tail of its log since that write.
    kSinceLastWriteOfKey,
    // Drop the last `drop_units` units.
    kLastUnits,
    // Remove the whole data directory content (RDB, AOF): the node restarts
    // empty, as if its disk were replaced.
    kDropDataDir,
  };
  Mode mode = Mode::kSinceLastWriteOfKey;
  std::string key;
  int drop_units = 1;
};

struct AofTruncation {
  std::string file;  // the incr AOF that was cut ("" for kDropDataDir)
  int64_t old_size = 0;
  int64_t new_size = 0;
  int dropped_units = 0;
  std::string Describe() const;
};

// Applies `spec` to the node directory `node_dir` of a stopped node: finds
// the last incr file named in appendonlydir/<name>.manifest (Redis 7
// multi-part AOF) and truncates it at a unit boundary. kNotFound when there
// is no AOF or the key was never written in the incr file.
[[nodiscard]] absl::StatusOr<AofTruncation> TruncateAofTail(const std::string& node_dir,
                                                            const AmnesiaSpec& spec);

// ---- The supervisor ----------------------------------------------------------

struct SupervisorOptions {
  int nodes = 5;
  // appendonly yes + appendfsync always on every node.
  bool aof = false;
  // Start every node under the clock shim with its own control file in
  // `clock_dir` (required then).
  bool clock_shim = false;
  std::string clock_dir;
  // Bind address per node (default 127.0.0.1).
  std::vector<std::string> hosts;
  std::vector<std::string> extra_args;
  // TLS ports only, with the fleet's throw-away certificates.
  bool tls = false;
  // Where nemesis events go (may be null: nothing is logged).
  HistoryWriter* history = nullptr;
};

class NodeSupervisor {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<NodeSupervisor>> Start(
      SupervisorOptions options);
  ~NodeSupervisor();
  NodeSupervisor(const NodeSupervisor&) = delete;
  NodeSupervisor& operator=(const NodeSupervisor&) = delete;

  testkit::Fleet& fleet() { return *fleet_; }
  int size() const { return fleet_->size(); }
  // "n0", "n1", ... (the target of nemesis events).
  static std::string NodeName(int i);

  bool running(int i) const;
  bool paused(int i) const;

  [[nodiscard]] absl::Status Kill(int i);
  [[nodiscard]] absl::Status StartNode(int i);
  [[nodiscard]] absl::Status RestartNow(int i);
  // Kill, sleep `down` (interruptible), start.
  [[nodiscard]] absl::Status RestartDelayed(int i, absl::Duration down);
  [[nodiscard]] absl::Status RestartAmnesia(int i, const AmnesiaSpec& spec);
  [[nodiscard]] absl::Status Pause(int i);
  [[nodiscard]] absl::Status Resume(int i);

  // Clock faults (FailedPrecondition without clock_shim).
  [[nodiscard]] absl::Status ClockJump(int i, absl::Duration by);
  [[nodiscard]] absl::Status ClockStrobe(int i, absl::Duration a, absl::Duration b,
                                         absl::Duration period);
  // Ends a strobe by fixing the offset at `a` (no-op when not strobing).
  [[nodiscard]] absl::Status ClockSteady(int i);
  ClockControl* clock(int i);

  // Resumes paused nodes, starts killed ones and ends strobes. Clock offsets
  // are left as they are: undoing a jump is a jump too.
  [[nodiscard]] absl::Status HealAll();

  // Records a fault of node `i` (no-op without a history).
  void Log(absl::string_view fault, int i, absl::string_view detail, FaultPhase phase);

 private:
  NodeSupervisor(SupervisorOptions options)
      : options_(std::move(options)), log_(options_.history) {}
  // A paused node is continued (SIGCONT), and its pause ends in the
  // history, before what is done to it next.
  void ResumeIfPaused(int i);
  // SIGKILL, reaped; the node counts as killed.
  absl::Status KillProcess(int i);

  // When `done` (an action on node i) succeeded: node i's `state` set to
  // `value` and the fault logged. Returns `done`.
  absl::Status Record(absl::Status done, std::vector<bool>& state, int i, bool value,
                      absl::string_view fault, absl::string_view detail, FaultPhase phase);

  SupervisorOptions options_;
  NemesisLog log_;
  std::vector<std::unique_ptr<ClockControl>> clocks_;
  std::unique_ptr<testkit::Fleet> fleet_;
  std::vector<bool> killed_;
  std::vector<bool> paused_;
};

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_FAULTS_SUPERVISOR_H_
