// chaos/history/nemesis.h: how every fault of a chaos run is recorded.
//
// A fault is one or two nemesis events in the run's history
// (chaos/history/history.h): its kind (any name: "clock_jump", "kill", "partition",
// "failover", ...), where it acts (a FaultSite: nodes and clients), a label
// saying what a reader needs to know ("+6s (offset now 6s)", "kill -9 (no
// persistence)"), and when: an instant, or a start and a stop. The checker
// (chaos/check/checker.h) lists the faults active at each violation; the timeline
// (chaos/plot/plot.h) draws every fault as a labelled band on the lanes of its
// site, whatever its kind, so a new kind of fault needs no code there.
//
// The node supervisor, the partitioner and the scenario runner record their
// faults through this log; a scenario body records its own with
// Run::nemesis():
//
//   NemesisLog& log = run.nemesis();
//   log.Instant("failover", {.nodes = {0, 1}}, "n1 promoted, n0 demoted");
//   {
//     ScopedFault lag = log.Scoped("replica_lag", {.nodes = {1}}, "replication paused");
//     ...                                           // stopped when `lag` goes
//   }
//   log.Start("latency", {.nodes = {2}}, "+30ms", "n2:to-server");
//   ...
//   log.Stop("latency", "n2:to-server", "cleared");
//
// A start and its stop are matched by kind and key (the first unmatched
// start of that kind and key is closed first); the key defaults to the
// site's name ("n2", "c1", "n0,n1,c2").
//
// Thread-safety: thread-safe (HistoryWriter writes each event atomically).

#ifndef REDLOCK_CHAOS_HISTORY_NEMESIS_H_
#define REDLOCK_CHAOS_HISTORY_NEMESIS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "chaos/history/history.h"

namespace redlock::chaos {

// What a fault acts on. Either may be empty; a fault with neither is drawn
// on a lane of its own.
struct FaultSite {
  std::vector<int> nodes;            // node indexes (n0 = 0)
  std::vector<std::string> clients;  // client names ("c1", ...)

  // "n0,n2,c1"; "" for an empty site.
  std::string Name() const;
};

class ScopedFault;

// How the history names a fault kind's colour: set once by the harness
// (chaos/faults/fault_kind.h's FaultKindColor), so that every nemesis event
// carries its kind's colour and a history drawn later (redlock-check --plot)
// looks the same. Null (the default): no colour is written.
using FaultColorLookup = std::string (*)(absl::string_view kind);
void SetFaultColorLookup(FaultColorLookup lookup);

class NemesisLog {
 public:
  // Records into `history` (not owned; may be null: nothing is recorded).
  explicit NemesisLog(HistoryWriter* history) : history_(history) {}

  // A fault that happens at once (a clock jump, a restart, a reset).
  void Instant(absl::string_view kind, const FaultSite& site, absl::string_view label);

  // A fault that lasts until Stop(kind, key). `key` "" is site.Name().
  void Start(absl::string_view kind, const FaultSite& site, absl::string_view label,
             absl::string_view key = "");
  // `label`: how it ended ("SIGCONT", "cleared"); may be empty.
  void Stop(absl::string_view kind, absl::string_view key, absl::string_view label = "");

  // Start now, Stop when the returned object is destroyed (or Stop()ped).
  [[nodiscard]] ScopedFault Scoped(absl::string_view kind, const FaultSite& site,
                                   absl::string_view label);

 private:
  void Write(absl::string_view kind, absl::string_view key, const FaultSite& site,
             absl::string_view label, FaultPhase phase);

  HistoryWriter* history_;
};

// A lasting fault that records its stop when it goes out of scope.
class ScopedFault {
 public:
  ScopedFault(ScopedFault&& other) noexcept;
  ScopedFault& operator=(ScopedFault&&) = delete;
  ScopedFault(const ScopedFault&) = delete;
  ScopedFault& operator=(const ScopedFault&) = delete;
  ~ScopedFault() { Stop(); }

  // Records the stop now (once; later calls do nothing).
  void Stop(absl::string_view label = "");

 private:
  friend class NemesisLog;
  ScopedFault(NemesisLog* log, std::string kind, std::string key)
      : log_(log), kind_(std::move(kind)), key_(std::move(key)) {}

  NemesisLog* log_;
  std::string kind_;
  std::string key_;
};

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_HISTORY_NEMESIS_H_
