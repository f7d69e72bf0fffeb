// chaos/check/checker.h: proves or refutes the safety properties of a history.
//
// The checker reads a merged history (chaos/history/history.h) and checks, per
// resource, the properties S1-S4, S6 and S7 of docs/design.md 8.3. It is a pure function
// of the events: no clock, no I/O, deterministic output.
//
//   absl::StatusOr<std::vector<redlock::chaos::Event>> history =
//       redlock::chaos::ReadHistory(paths);
//   if (!history.ok()) return history.status();
//   redlock::chaos::CheckResult result =
//       redlock::chaos::Check(*history, redlock::chaos::CheckOptions());
//   std::cout << redlock::chaos::FormatReport(result);
//   return result.ok() ? 0 : 1;
//
// Definitions (all times are raw-clock nanoseconds, per resource):
//
//   Grants are identified by their token; uses and releases name their grant
//   by token (ties between grants reusing a token are broken by process, then
//   op). A grant's hold interval is [grant.t, hold_end] with
//     hold_end = max(end of its last use, min(valid_until, release.t))
//   where the min is only valid_until when the grant was never released (the
//   earliest release counts, whatever its `ok`). A client that keeps using the
//   lock past its validity (paused, slow) thereby extends its hold. A
//   successful extend event moves the grant's valid_until to its own (the
//   latest one counts for the hold).
//
//   S1 mutual exclusion: two grants with distinct tokens whose hold intervals
//      overlap (a.begin < b.end and b.begin < a.end: touching is not
//      overlapping). Each pair is reported once. O(n log n + pairs).
//   S2 validity: a use whose end is past the valid_until its holder had when
//      the use began (the grant's, or the latest successful extension that
//      started before the use).
//   S3 harm: the accepted writes of the read-modify-write counter lose no
//      update: every pair of accepted uses that read the same value is a
//      violation (a value read by k accepted uses is k-1 lost updates), and
//      when a `final` event exists, final.counter - final.initial must equal
//      the number of accepted uses. Uses without a grant still count here.
//   S4 fencing, over grants and uses that carry a fencing token:
//      (a) two grants with distinct tokens and equal fencing tokens;
//      (b) a grant B whose attempt started (B.start) after grant A was
//          granted (A.t) with B.fencing_token < A.fencing_token (equal
//          tokens are reported once, by (a)); B is reported against the A
//          with the highest fencing token;
//      (c) accepted fenced uses ordered by end (stable): a token lower than
//          one accepted before it, i.e. the store accepted a stale token,
//          when the lower token's write was sent (write_at) after the
//          higher one's write was done (its end): otherwise the order of
//          the two writes is not known.
//
// The lock family (grant.mode, history.h) changes what each promise is:
//   exclusive (or no mode)  as above.
//   shared    a reader: S1 holds between a reader and any writer, not
//             between readers. Its fencing token is above the last
//             writer's and shared with overlapping readers, so in S4 (a)
//             only two readers may share a token, and in (b) any grant
//             after A needs at least A's token ((a) judges equal ones).
//   slot      a semaphore's permit: not in S1; instead
//   S6 at most K: at no instant do more than `permits` grants of distinct
//      tokens hold a resource (counted when a grant begins while K others
//      hold). S4 (a) and (b) compare fencing tokens per permit (slot).
//   leader    an elected leader: S1 as exclusive (at most one leader), and
//   S7 leader terms: the fencing token is the term; (a) two leaders with
//      distinct tokens and the same term, (b) a leader whose campaign
//      started after another was granted with a lower term. Leader grants
//      are judged by S7 instead of S4 (a) and (b); S4 (c) holds for all.
//   S9 stale write seen: an accepted fenced write sent after its writer's
//      validity (at the use's start) had ended, after a later grant (granted
//      after that validity ended) had already read the store through the
//      fence, and whose value that later holder then read: the fence let a
//      deposed writer change what a newer holder had seen (issue 36 item 2:
//      a reader carrying the last writer's token). Judged over fenced uses
//      only; a stale write before the newer holder first touched the store
//      is the fence's documented limit, not a violation.
//   S3 counts write uses only (readers and permit holders only read:
//   use.write false).
//   fair      a fair lock's holder: exclusive for S1-S4, and its calls
//             (invoke mode "fair") are judged by
//   S8 first come, first served. A fair call's enqueue runs from its invoke
//      to its "queued" event (a call granted without a place has none: it
//      never waited); it waits from "queued" to its grant (or its end).
//      (a) a fair call B that began after call A had its place (B.invoke.t
//          > A.queued.t) is granted (B's grant.t) while A still waits: not
//          granted, and not excused. A is excused when its call ended with
//          outcome "place_lost" (its place expired or was removed: the
//          history does not say when, so every overtake during its wait is
//          excused) or "cancelled" (likewise); when it failed otherwise, at
//          and after the earliest moment it can have left the queue (invoke.t
//          + wait_ms, or without wait_ms its fail.t); and however it
//          ended (neither grant nor fail included), from the first fault
//          on its process while it waited (a nemesis event naming it as
//          target or client) on: a paused or cut-off waiter's heartbeat
//          stops and its place may lapse (it may wake past its deadline
//          and fail wait_expired). Each pair is reported once.
//      The bound it gives: a waiter A is overtaken (a later-invoked fair
//      call granted while A waits, A not excused) only by calls that began
//      while A was taking its place (invoke in (A.invoke.t, A.queued.t]):
//      at most one per other client thread. The counts report the most
//      overtakes of one waiter (max_overtakes) and how many waiters were
//      overtaken by more calls than began while they took their places
//      (overtaken_beyond_bound: those with an (a) violation).
//
// Faults: each violation lists the nemesis faults active during its interval
// [t, t_end]: "start" events at or before t_end whose matching "stop" (the
// first unmatched start of the same fault+target is closed first) is after t
// or absent, and "instant" events within [t - fault_window, t_end]. With
// t == t_end this is "the faults active at t".
//
// Run events (the harness's description of the run) are ignored.
//
// Robustness: the checker never fails on a history. Exact duplicate events
// are dropped, a use or release without its grant, a stop without a start,
// an unknown event type, a use whose token, resource or fencing token differs
// from its grant's, all become warnings (malformed history), not errors.

#ifndef REDLOCK_CHAOS_CHECK_CHECKER_H_
#define REDLOCK_CHAOS_CHECK_CHECKER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chaos/history/history.h"

namespace redlock::chaos {

enum class Property {
  kMutualExclusion = 0,  // S1
  kValidity = 1,         // S2
  kHarm = 2,             // S3
  kFencing = 3,          // S4
  kAtMostK = 4,          // S6 (S5 is the harness's leftover-key scan)
  kLeaderTerms = 5,      // S7
  kFirstCome = 6,        // S8
  kStaleWriteSeen = 7,   // S9
};
inline constexpr int kNumProperties = 8;

// "S1".."S4", "S6", "S7", "S8", "S9".
absl::string_view PropertyName(Property p);
// One line: "mutual exclusion", "validity", "harm (lost updates)", "fencing",
// "at most K holders", "leader terms", "first come, first served", "stale
// write seen".
absl::string_view PropertyTitle(Property p);

struct CheckOptions {
  // How long before a violation an "instant" fault (a clock jump, a kill, a
  // restart) is still listed as active at it.
  // Default: 30 seconds.
  absl::Duration fault_window = absl::Seconds(30);

  // At most this many violations of each property are kept in
  // CheckResult::violations (with grants and faults); all are counted.
  // Default: 1000.
  int64_t max_violations_per_property = 1000;

  // At most this many warnings are kept; all are counted.
  // Default: 1000.
  int64_t max_warnings = 1000;
};

// A grant as the checker sees it.
struct GrantInfo {
  std::string process;
  int64_t op = 0;
  std::string resource;
  std::string token;
  std::vector<int> nodes;  // the quorum that granted
  int64_t start = 0;       // the successful attempt began
  int64_t granted = 0;     // grant.t: the hold begins
  int64_t valid_until = 0;
  int64_t hold_end = 0;
  std::optional<int64_t> released;  // t of the earliest release, if any
  std::optional<uint64_t> fencing_token;
  int64_t uses = 0;
  std::string source;  // "file:line" of the grant event, if read from a file
  std::string mode;    // "" (exclusive), "exclusive", "shared", "slot", "leader", "fair"
  int64_t permits = 0;
  int64_t slot = -1;
  bool shared() const { return mode == "shared"; }
  bool slot_mode() const { return mode == "slot"; }
  bool leader() const { return mode == "leader"; }
};

// A nemesis fault listed at a violation.
struct FaultInfo {
  std::string fault;
  std::string target;
  std::string detail;
  FaultPhase phase = FaultPhase::kInstant;  // kStart or kInstant
  int64_t t = 0;                            // start (or the instant)
  std::optional<int64_t> stop;              // t of the matching stop
  std::vector<int> nodes;                   // what it acts on, as recorded
  std::vector<std::string> clients;
  std::string color;  // as recorded (may be empty)
};

struct Violation {
  Property property = Property::kMutualExclusion;
  std::string resource;
  // The interval the violation happened in: S1 the overlap, S2 [valid_until,
  // use end], S3 the overlap of the two uses (or the whole run for a final
  // mismatch), S4 the later grant's attempt / the stale use.
  int64_t t = 0;
  int64_t t_end = 0;
  std::string description;
  std::vector<GrantInfo> grants;  // the grants involved (0, 1 or 2; K+1 for S6)
  std::vector<FaultInfo> faults;  // the faults active in [t, t_end]
};

struct CheckCounts {
  int64_t events = 0;
  int64_t duplicates = 0;  // exact duplicate events dropped
  int64_t invokes = 0;
  int64_t grants = 0;
  int64_t fenced_grants = 0;
  int64_t fails = 0;
  int64_t indeterminate = 0;  // invokes with neither grant nor fail
  int64_t uses = 0;
  int64_t accepted_writes = 0;
  int64_t rejected_writes = 0;
  int64_t releases = 0;
  int64_t extends = 0;
  int64_t nemesis = 0;
  int64_t finals = 0;
  int64_t unknown = 0;  // events of an unknown type
  int64_t resources = 0;
  int64_t lost_updates = 0;  // S3: sum over read values of (uses - 1)
  // The lock family's grants by mode.
  int64_t shared_grants = 0;
  int64_t slot_grants = 0;
  int64_t leader_grants = 0;
  int64_t read_uses = 0;  // uses that only read (use.write false)
  // S8: fair calls (invoke mode "fair"), those that took a place (a queued
  // event), the most overtakes of one waiter, and the waiters overtaken
  // beyond the bound (see S8).
  int64_t fair_calls = 0;
  int64_t fair_queued = 0;
  int64_t max_overtakes = 0;
  int64_t overtaken_beyond_bound = 0;
};

struct CheckResult {
  CheckCounts counts;
  // Violations of each property, indexed by Property (all counted, whether
  // or not kept in `violations`).
  std::array<int64_t, kNumProperties> violation_counts{};
  // Ordered by property, then resource, then t.
  std::vector<Violation> violations;
  // Every grant with its hold interval, in history order, and every nemesis
  // fault (a start with its stop, or an instant), in history order: what a
  // timeline of the run draws (chaos/plot/plot.h).
  std::vector<GrantInfo> grants;
  std::vector<FaultInfo> faults;
  // Malformed-history findings, "file:line: message" when known.
  std::vector<std::string> warnings;
  int64_t warning_count = 0;
  // The span of the history (0 when empty); reports print times relative to
  // first_t.
  int64_t first_t = 0;
  int64_t last_t = 0;

  int64_t count(Property p) const { return violation_counts[static_cast<int>(p)]; }
  int64_t total_violations() const;
  // True when no property is violated (warnings do not count).
  bool ok() const { return total_violations() == 0; }
};

// Checks `history` (any order: it is sorted by t, stably, first).
[[nodiscard]] CheckResult Check(const std::vector<Event>& history,
                                const CheckOptions& options = CheckOptions());

// A human-readable report: the counts, a verdict table (property, checked,
// violations, verdict), the warnings and every kept violation with its grants
// and faults. Times are seconds relative to first_t.
std::string FormatReport(const CheckResult& result);

// The same as one JSON document (times in raw nanoseconds), '\n' terminated.
std::string FormatReportJson(const CheckResult& result);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_CHECK_CHECKER_H_
