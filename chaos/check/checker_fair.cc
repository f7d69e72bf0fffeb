// The checker's S8, first come, first served (checker.h): over the fair
// calls of each resource, a call that began after another had its place is
// not granted while that one still waits, unless it left, was cancelled or
// lost its place; and the count of later calls that overtook each waiter,
// against the bound the guarantee gives.

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chaos/check/checker_state.h"

namespace redlock::chaos::check_internal {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// One fair call as S8 sees it.
struct FairCall {
  std::string key;  // OpKey
  const Event* invoke = nullptr;
  const Event* queued = nullptr;  // null: it never took a place
  int grant = -1;                 // into grants_
  const Event* fail = nullptr;
  int64_t granted = kNever;  // grant.t
  // From this moment on the call may have left the queue (and its
  // overtakers are excused); kNever while it is known to wait.
  int64_t excused_from = kNever;
};

}  // namespace

void Checker::CheckFirstCome() {
  const Property p = Property::kFirstCome;
  // The fair calls of each resource, in invoke order.
  std::map<std::string, std::vector<FairCall>> by_resource;
  for (const auto& [key, invoke] : fair_invokes_) {
    FairCall c;
    c.key = key;
    c.invoke = invoke;
    if (auto q = queued_.find(key); q != queued_.end()) c.queued = q->second;
    if (auto g = grant_of_op_.find(key); g != grant_of_op_.end()) {
      c.grant = g->second;
      c.granted = grants_[c.grant].info.granted;
    }
    if (auto f = fails_.find(key); f != fails_.end()) c.fail = f->second;
    if (c.grant < 0 && c.fail != nullptr) {
      if (c.fail->outcome == "place_lost" || c.fail->outcome == "cancelled") {
        c.excused_from = std::numeric_limits<int64_t>::min();
      } else if (invoke->wait_ms > 0) {
        // Its wait cannot have ended before its deadline.
        c.excused_from = invoke->t + invoke->wait_ms * 1000000;
      } else {
        c.excused_from = c.fail->t;
      }
    }
    // A fault on the process while it waited (a pause, a crash, a clock
    // jump, its links cut): from then on its heartbeat may have stopped and
    // its place lapsed, however the call ended (a waiter paused past its
    // deadline fails wait_expired when it wakes; one that re-entered is
    // granted later). Neither grant nor fail: the process died or stopped.
    const int64_t ended = c.grant >= 0 ? c.granted : c.fail != nullptr ? c.fail->t : kNever;
    for (const FaultInfo& f : faults_) {
      const bool on_it =
          f.target == invoke->process ||
          std::find(f.clients.begin(), f.clients.end(), invoke->process) != f.clients.end();
      if (on_it && f.stop.value_or(f.t) >= invoke->t && f.t < ended) {
        c.excused_from = std::min(c.excused_from, std::max(f.t, invoke->t));
      }
    }
    by_resource[invoke->resource].push_back(std::move(c));
  }
  for (auto& [resource, calls] : by_resource) {
    std::stable_sort(calls.begin(), calls.end(), [](const FairCall& a, const FairCall& b) {
      return a.invoke->t < b.invoke->t;
    });
    // Granted calls by grant time, to find who was granted while a waiter
    // waited.
    std::vector<const FairCall*> granted;
    for (const FairCall& c : calls) {
      if (c.grant >= 0) granted.push_back(&c);
    }
    std::stable_sort(granted.begin(), granted.end(),
                     [](const FairCall* a, const FairCall* b) { return a->granted < b->granted; });
    for (const FairCall& a : calls) {
      if (a.queued == nullptr) continue;  // granted without waiting, or never queued
      const int64_t waits_from = a.queued->t;
      const int64_t waits_until = a.granted;  // kNever when never granted
      // Calls that began while A took its place: the bound of (b).
      int64_t concurrent = 0;
      for (const FairCall& b : calls) {
        if (&b != &a && b.invoke->t > a.invoke->t && b.invoke->t <= waits_from) ++concurrent;
      }
      int64_t overtakes = 0;
      auto first = std::upper_bound(granted.begin(), granted.end(), waits_from,
                                    [](int64_t t, const FairCall* c) { return t < c->granted; });
      for (auto it = first; it != granted.end() && (*it)->granted < waits_until; ++it) {
        const FairCall& b = **it;
        if (&b == &a || b.invoke->t <= a.invoke->t) continue;  // not a later call
        if (b.granted >= a.excused_from) continue;             // A may have left by then
        ++overtakes;
        if (b.invoke->t <= waits_from) continue;  // began while A took its place: allowed
        if (!Count(p)) continue;
        const GrantInfo& bg = grants_[b.grant].info;
        Violation v = ViolationIn(p, resource, b.invoke->t, b.granted);
        std::string a_end;
        if (a.grant >= 0) {
          a_end = absl::StrCat("granted only at ", Rel(a.granted));
        } else if (a.fail != nullptr) {
          a_end =
              absl::StrCat("failed at ", Rel(a.fail->t),
                           a.fail->outcome.empty() ? "" : absl::StrCat(" (", a.fail->outcome, ")"));
        } else {
          a_end = "never granted or failed";
        }
        v.description =
            absl::StrCat("fair call ", Who(*b.invoke), " began at ", Rel(b.invoke->t), ", after ",
                         Who(*a.invoke), " had its place (", Rel(waits_from),
                         "), and was granted at ", Rel(b.granted), " while ", Who(*a.invoke),
                         " still waited (", a_end, ")", From(*b.invoke));
        v.grants = {bg};
        if (a.grant >= 0) v.grants.push_back(grants_[a.grant].info);
        Keep(std::move(v));
      }
      result_.counts.max_overtakes = std::max(result_.counts.max_overtakes, overtakes);
      if (overtakes > concurrent) ++result_.counts.overtaken_beyond_bound;
    }
  }
}

}  // namespace redlock::chaos::check_internal
