// The checker's state (chaos/check/checker.cc): the history classified,
// the grants and their holds (checker_state.cc), the checks of S1-S3 over
// them (checker_intervals.cc), of S4, S6, S7 (checker_tokens.cc) and of S8
// (checker_fair.cc).
// Internal to the checker.

#ifndef REDLOCK_CHAOS_CHECK_CHECKER_STATE_H_
#define REDLOCK_CHAOS_CHECK_CHECKER_STATE_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "chaos/check/checker.h"

namespace redlock::chaos::check_internal {

struct Grant {
  GrantInfo info;
  int token_id = 0;
  int64_t last_use_end = std::numeric_limits<int64_t>::min();
  // Successful extensions: (when it started, the new valid_until), in
  // history order.
  std::vector<std::pair<int64_t, int64_t>> extensions;
  // The validity as the grant first had it (info.valid_until becomes the
  // latest extension's).
  int64_t granted_until = 0;
};

// A violation of `p` on `resource` in [t, t_end]; the caller describes it.
inline Violation ViolationIn(Property p, const std::string& resource, int64_t t, int64_t t_end) {
  Violation v;
  v.property = p;
  v.resource = resource;
  v.t = t;
  v.t_end = t_end;
  return v;
}

// Everything derived from the history, shared by the property checks. One
// per Check(); not thread-safe.
class Checker {
 public:
  Checker(const std::vector<Event>& history, const CheckOptions& options);

  // Every pass in order, then the result (violations sorted by property,
  // resource, time). Call once.
  CheckResult Run();

 private:
  // (hold_end, grant): a min-heap by hold_end that may be walked.
  using ActiveGrants = std::vector<std::pair<int64_t, int>>;

  // ---- Helpers (checker_state.cc) ----------------------------------------------

  // t as seconds since the first event. Differences are taken in double:
  // hostile histories may hold any int64.
  std::string Rel(int64_t t) const;
  // b - a, in milliseconds.
  static std::string Ms(int64_t a, int64_t b);
  static std::string Num(long double x) { return absl::StrFormat("%.0Lf", x); }
  // " (file:line)" and "file:line: " of an event read from a file, else "".
  static std::string From(const Event& e);
  static std::string Where(const Event& e);
  static std::string Who(const GrantInfo& g) { return absl::StrCat(g.process, " op ", g.op); }
  static std::string Who(const Event& e) { return absl::StrCat(e.process, " op ", e.op); }
  std::string HoldText(const GrantInfo& g) const;

  void Warn(std::string message);
  // Counts a violation and tells whether it should be kept (built).
  bool Count(Property p, int64_t n = 1);
  bool Room(Property p) const;
  // Keeps a built violation, with the faults active during it.
  void Keep(Violation v);

  // ---- The passes over the history (checker_state.cc) -----------------------

  // Pass 1: counts, deduplicates and sorts the events by type; the grants.
  void Classify();
  // Nemesis events paired into spans (start with its stop) and instants.
  void BuildFaults();
  // Faults active at some time in [from, to]; faults_ is sorted by t.
  std::vector<FaultInfo> ActiveFaults(int64_t from, int64_t to) const;
  // The grant a use, extension or release refers to: by token, then
  // process, then op; -1 for none.
  int FindGrant(const Event& e) const;
  void MatchUsesAndReleases();
  // Each grant's hold: until the later of its last use's end and the
  // earlier of its release and its validity end.
  void ComputeHolds();
  // Grants by resource, in resource order (deterministic reports).
  std::map<std::string, std::vector<int>> GrantsByResource() const;
  // Walks the grants `ids` in the order they began (stable), calling
  // on_grant(i, active, same_token) for each: `active` holds the grants that
  // began at or before grant i and end after it begins, `same_token` how
  // many of them carry grant i's token.
  void SweepByStart(std::vector<int> ids,
                    absl::FunctionRef<void(int, const ActiveGrants&, int)> on_grant);

  // ---- S1, S2, S3 (checker_intervals.cc) ---------------------------------------

  void CheckMutualExclusion();
  void ReportOverlap(int a, int b);
  static bool Overlap(const GrantInfo& a, const GrantInfo& b);
  void CheckValidity();
  void CheckHarm();
  void ReportSameRead(const std::string& resource, size_t a, size_t b);
  std::vector<GrantInfo> GrantsOf(std::initializer_list<size_t> use_indexes) const;
  std::string UseText(size_t i) const;

  // ---- S4, S6, S7 (checker_tokens.cc) ------------------------------------------

  void CheckIncreasing(Property p, const std::string& resource, const std::vector<int>& ids,
                       absl::string_view what);
  void CheckAtMostK();
  void CheckLeaderTerms();
  void CheckStaleWriteSeen();
  void CheckFencing();

  // ---- S8 (checker_fair.cc) ----------------------------------------------------

  void CheckFirstCome();

  const CheckOptions options_;
  std::vector<const Event*> events_;
  CheckResult result_;
  std::array<int64_t, kNumProperties> kept_{};

  std::vector<Grant> grants_;
  int num_tokens_ = 0;
  std::vector<int> active_per_token_;  // SweepByStart's, zero between walks
  absl::flat_hash_map<std::string, std::vector<int>> by_token_;
  std::vector<const Event*> uses_;
  std::vector<int> use_grant_;
  std::vector<const Event*> releases_;
  std::vector<const Event*> extends_;
  std::vector<const Event*> nemesis_;
  std::map<std::string, const Event*> finals_;
  std::vector<FaultInfo> faults_;
  // By OpKey: fair invokes, queued events, fails, the op's grant (first of each).
  std::map<std::string, const Event*> fair_invokes_;
  absl::flat_hash_map<std::string, const Event*> queued_;
  absl::flat_hash_map<std::string, const Event*> fails_;
  absl::flat_hash_map<std::string, int> grant_of_op_;
};

}  // namespace redlock::chaos::check_internal

#endif  // REDLOCK_CHAOS_CHECK_CHECKER_STATE_H_
