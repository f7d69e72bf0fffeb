// chaos/run/schedule.h: a scenario's fault schedule, and the loop that plays
// it against a live run.
//
// A schedule is a list of entries; every entry runs alongside the others (so
// faults overlap) and is one of three triggers for one or more faults
// (chaos/faults/fault_kind.h):
//
//   at T         once, T after the start of the run's body
//   repeat       from T on: inject, heal after the fault's duration, pause
//                `gap`, again; `times` bounds it (0: until the run ends)
//   on MARKER    wait for a client's marker (grant, use_read, ...), wait
//                `delay`, inject, heal, let it play out for `settle`, and try
//                again up to `times`; `until` stops it once the listed
//                properties are found in the history so far
//
// An entry's faults are injected together (`pick: all`), one of them at
// random each time (`pick: one`) or in turn (`pick: cycle`).
//
// Everything happens on the scenario thread (the one that forked the nodes:
// a node restarted from another thread would die with it), as a
// discrete-event loop: due injections and heals, then new markers, then a
// bounded wait for whichever comes first.
//
// Thread-safety: a ScheduleRunner is used by the scenario thread only.

#ifndef REDLOCK_CHAOS_RUN_SCHEDULE_H_
#define REDLOCK_CHAOS_RUN_SCHEDULE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "chaos/faults/fault_kind.h"

namespace redlock::chaos {

struct Trigger {
  enum class Type { kAt, kRepeat, kOnMarker };
  Type type = Type::kAt;
  // kAt: when; kRepeat: the first injection; kOnMarker: when to start waiting.
  Span at;
  // kRepeat: the pause between a heal and the next injection (drawn in
  // [gap_lo, gap_hi]).
  Span gap_lo, gap_hi;
  // kRepeat, kOnMarker: how many injections at most (0: repeat until the
  // end; for kOnMarker 0 means 1).
  int times = 0;

  // kOnMarker: which marker ("grant", "use_read", "use_end", "invoke",
  // "extend", "release", "fail", "queued": a fair call's place is taken)
  // of which client (-1: any).
  std::string marker;
  int client = -1;
  // Only when the lock looks free: the last grant seen was released and no
  // other client invoked since (an attempt with nobody in the way).
  bool lock_free = false;
  // Markers from the very start of the run count (the default: only those
  // after the entry began waiting).
  bool since_start = false;
  // Wait at most this long for the marker (default: until the run ends).
  std::optional<Span> within;
  // When no marker came `within`: heal these kinds, then wait `retry_within`
  // once more; `always`: inject anyway when none came then either.
  std::vector<std::string> otherwise_heal;
  std::optional<Span> retry_within;
  bool always = false;
  Span delay;   // marker -> injection
  Span settle;  // after the heal (or the instant) before the next try
  // Stop once these properties are all (until_any: any) in the history.
  PropertySet until = 0;
  bool until_any = false;
  // Begin (start counting `at`, start waiting for markers) only once the
  // entry of this index (an earlier one) has fired: chains of faults in
  // order. -1: from the start of the run.
  int after = -1;
};

struct ScheduleEntry {
  enum class Pick { kAll, kOne, kCycle };
  Trigger trigger;
  std::vector<FaultTemplate> faults;
  Pick pick = Pick::kAll;
  int line = 0;  // where it was read (0: not from a file)
};

struct Schedule {
  std::vector<ScheduleEntry> entries;
  bool empty() const { return entries.empty(); }
};

// Checks every entry: triggers complete, every fault valid for its kind
// (ValidateTemplate) and supported by `shape` (CheckSupported). The message
// names the entry ("entry 2 (line 31): ...").
absl::Status ValidateSchedule(const Schedule& schedule, const RunShape& shape);

// One line per entry, for --list and reports.
std::string DescribeSchedule(const Schedule& schedule);

class Run;

// Plays `schedule` until the run's budget ends (Run::Active()). Every
// injection goes through Run::Inject (which logs it, counts it and keeps it
// for the final heal). Returns the first harness error (a fault that could
// not be injected), after which nothing more is injected.
absl::Status PlaySchedule(Run& run, const Schedule& schedule);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_RUN_SCHEDULE_H_
