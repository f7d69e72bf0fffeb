// The checker's state (chaos/check/checker.cc): the history classified,
// the grants and their holds, and the checks of S1-S3 over them; the token
// checks (S4, S6, S7) are in checker_tokens.cc. Internal to the checker.

#ifndef REDLOCK_CHAOS_CHECK_CHECKER_STATE_H_
#define REDLOCK_CHAOS_CHECK_CHECKER_STATE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chaos/check/checker.h"
#include "nlohmann/json.hpp"

namespace redlock::chaos::check_internal {

constexpr absl::string_view kSep = "\x1f";

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

// Everything derived from the history, shared by the property checks.
class Checker {
 public:
  Checker(const std::vector<Event>& history, const CheckOptions& options) : options_(options) {
    events_.reserve(history.size());
    for (const Event& e : history) events_.push_back(&e);
    std::stable_sort(events_.begin(), events_.end(),
                     [](const Event* a, const Event* b) { return a->t < b->t; });
  }

  CheckResult Run() {
    result_.counts.events = static_cast<int64_t>(events_.size());
    if (!events_.empty()) {
      result_.first_t = events_.front()->t;
      result_.last_t = events_.back()->t;
    }
    Classify();
    BuildFaults();
    MatchUsesAndReleases();
    ComputeHolds();
    CheckMutualExclusion();
    CheckValidity();
    CheckHarm();
    CheckFencing();
    CheckAtMostK();
    CheckLeaderTerms();
    CheckFirstCome();
    for (const Grant& g : grants_) result_.grants.push_back(g.info);
    result_.faults = faults_;
    std::stable_sort(result_.violations.begin(), result_.violations.end(),
                     [](const Violation& a, const Violation& b) {
                       if (a.property != b.property) {
                         return a.property < b.property;
                       }
                       if (a.resource != b.resource) {
                         return a.resource < b.resource;
                       }
                       return a.t < b.t;
                     });
    return std::move(result_);
  }

 private:
  // ---- Helpers
  // ----------------------------------------------------------------

  // Differences are taken in double: hostile histories may hold any int64.
  std::string Rel(int64_t t) const {
    return absl::StrFormat("%+.6fs",
                           (static_cast<double>(t) - static_cast<double>(result_.first_t)) / 1e9);
  }

  // b - a, in milliseconds.
  static std::string Ms(int64_t a, int64_t b) {
    return absl::StrFormat("%.3f ms", (static_cast<double>(b) - static_cast<double>(a)) / 1e6);
  }

  static std::string Num(long double x) { return absl::StrFormat("%.0Lf", x); }

  static std::string From(const Event& e) {
    return e.source.empty() ? std::string() : absl::StrCat(" (", e.source, ")");
  }

  static std::string Where(const Event& e) {
    return e.source.empty() ? std::string() : absl::StrCat(e.source, ": ");
  }

  static std::string Who(const GrantInfo& g) { return absl::StrCat(g.process, " op ", g.op); }

  static std::string Who(const Event& e) { return absl::StrCat(e.process, " op ", e.op); }

  void Warn(std::string message) {
    ++result_.warning_count;
    if (static_cast<int64_t>(result_.warnings.size()) < options_.max_warnings) {
      result_.warnings.push_back(std::move(message));
    }
  }

  // Counts a violation and tells whether it should be kept (built).
  bool Count(Property p, int64_t n = 1) {
    result_.violation_counts[static_cast<int>(p)] += n;
    return Room(p);
  }

  bool Room(Property p) const {
    return kept_[static_cast<int>(p)] < options_.max_violations_per_property;
  }

  void Keep(Violation v) {
    v.faults = ActiveFaults(v.t, std::max(v.t, v.t_end));
    ++kept_[static_cast<int>(v.property)];
    result_.violations.push_back(std::move(v));
  }

  static std::string DedupKey(const Event& e) {
    switch (e.type) {
      case EventType::kInvoke:
      case EventType::kFail:
      case EventType::kQueued:
        return absl::StrCat(EventTypeName(e.type), kSep, e.process, kSep, e.op, kSep, e.resource,
                            kSep, e.t);
      case EventType::kGrant:
        // The same grant logged twice (even at another t) is one grant.
        return absl::StrCat("grant", kSep, e.process, kSep, e.op, kSep, e.token);
      case EventType::kUse:
        return absl::StrCat("use", kSep, e.process, kSep, e.op, kSep, e.token, kSep, e.begin, kSep,
                            e.end, kSep, e.read, kSep, e.wrote, kSep, e.accepted);
      case EventType::kRelease:
        return absl::StrCat("release", kSep, e.process, kSep, e.op, kSep, e.token, kSep, e.t, kSep,
                            e.end);
      case EventType::kExtend:
        return absl::StrCat("extend", kSep, e.process, kSep, e.op, kSep, e.token, kSep, e.t, kSep,
                            e.valid_until, kSep, e.ok);
      case EventType::kNemesis:
        return absl::StrCat("nemesis", kSep, e.t, kSep, e.fault, kSep, e.target, kSep,
                            FaultPhaseName(e.phase), kSep, e.detail);
      case EventType::kFinal:
        return absl::StrCat("final", kSep, e.t, kSep, e.resource, kSep, e.counter, kSep, e.initial);
      case EventType::kRun:
      case EventType::kUnknown:
        return std::string();
    }
    return std::string();
  }

  static std::string OpKey(const Event& e) { return absl::StrCat(e.process, kSep, e.op); }

  // ---- Pass 1: classify and deduplicate
  // --------------------------------------

  void Classify() {
    absl::flat_hash_set<std::string> seen;
    absl::flat_hash_set<std::string> invoked;
    absl::flat_hash_set<std::string> resolved;
    std::vector<std::string> invoke_order;
    std::map<std::string, int64_t> unknown_types;
    absl::flat_hash_map<std::string, int> token_ids;
    std::map<std::string, bool> resources;

    for (const Event* e : events_) {
      if (e->type == EventType::kRun) continue;
      if (e->type == EventType::kUnknown) {
        ++result_.counts.unknown;
        ++unknown_types[e->type_name];
        continue;
      }
      if (!seen.insert(DedupKey(*e)).second) {
        ++result_.counts.duplicates;
        Warn(absl::StrCat(Where(*e), "duplicate ", EventTypeName(e->type), " event dropped",
                          e->process.empty() ? std::string() : absl::StrCat(" (", Who(*e), ")")));
        continue;
      }
      switch (e->type) {
        case EventType::kInvoke:
          ++result_.counts.invokes;
          resources[e->resource] = true;
          if (invoked.insert(OpKey(*e)).second) invoke_order.push_back(OpKey(*e));
          if (e->mode == "fair" && fair_invokes_.try_emplace(OpKey(*e), e).second) {
            ++result_.counts.fair_calls;
          }
          break;
        case EventType::kQueued:
          if (queued_.try_emplace(OpKey(*e), e).second) ++result_.counts.fair_queued;
          break;
        case EventType::kGrant: {
          ++result_.counts.grants;
          resources[e->resource] = true;
          resolved.insert(OpKey(*e));
          Grant g;
          g.info.process = e->process;
          g.info.op = e->op;
          g.info.resource = e->resource;
          g.info.token = e->token;
          g.info.nodes = e->nodes;
          g.info.start = e->start;
          g.info.granted = e->t;
          g.info.valid_until = e->valid_until;
          g.granted_until = e->valid_until;
          g.info.fencing_token = e->fencing_token;
          g.info.source = e->source;
          g.info.mode = e->mode;
          g.info.permits = e->permits;
          g.info.slot = e->slot;
          if (e->fencing_token.has_value()) ++result_.counts.fenced_grants;
          if (g.info.shared()) ++result_.counts.shared_grants;
          if (g.info.slot_mode()) ++result_.counts.slot_grants;
          if (g.info.leader()) ++result_.counts.leader_grants;
          auto [it, inserted] = token_ids.try_emplace(e->token, static_cast<int>(token_ids.size()));
          g.token_id = it->second;
          if (!inserted) {
            Warn(absl::StrCat(Where(*e), "grant ", Who(*e), " reuses token ", e->token,
                              " of an earlier grant"));
          }
          by_token_[e->token].push_back(static_cast<int>(grants_.size()));
          grant_of_op_.try_emplace(OpKey(*e), static_cast<int>(grants_.size()));
          grants_.push_back(std::move(g));
          break;
        }
        case EventType::kFail:
          ++result_.counts.fails;
          resources[e->resource] = true;
          resolved.insert(OpKey(*e));
          fails_.try_emplace(OpKey(*e), e);
          break;
        case EventType::kUse:
          ++result_.counts.uses;
          resources[e->resource] = true;
          if (!e->write) ++result_.counts.read_uses;
          if (e->accepted) {
            ++result_.counts.accepted_writes;
          } else {
            ++result_.counts.rejected_writes;
          }
          uses_.push_back(e);
          break;
        case EventType::kRelease:
          ++result_.counts.releases;
          releases_.push_back(e);
          break;
        case EventType::kExtend:
          ++result_.counts.extends;
          extends_.push_back(e);
          break;
        case EventType::kNemesis:
          ++result_.counts.nemesis;
          nemesis_.push_back(e);
          break;
        case EventType::kFinal: {
          ++result_.counts.finals;
          resources[e->resource] = true;
          auto [it, inserted] = finals_.try_emplace(e->resource, e);
          if (!inserted) {
            if (it->second->counter != e->counter || it->second->initial != e->initial) {
              Warn(absl::StrCat(Where(*e), "conflicting final for resource \"", e->resource,
                                "\": counter ", e->counter, " replaces ", it->second->counter));
            }
            it->second = e;  // the latest final wins
          }
          break;
        }
        case EventType::kRun:
        case EventType::kUnknown:
          break;
      }
    }
    num_tokens_ = static_cast<int>(token_ids.size());
    result_.counts.resources = static_cast<int64_t>(resources.size());
    for (const std::string& key : invoke_order) {
      if (!resolved.contains(key)) ++result_.counts.indeterminate;
    }
    for (const auto& [name, n] : unknown_types) {
      Warn(absl::StrCat(n, " event(s) of unknown type \"", name, "\" ignored"));
    }
  }

  // ---- Faults
  // -------------------------------------------------------------------

  void BuildFaults() {
    std::map<std::pair<std::string, std::string>, std::deque<size_t>> open;
    for (const Event* e : nemesis_) {
      FaultInfo span;
      span.fault = e->fault;
      span.target = e->target;
      span.detail = e->detail;
      span.phase = e->phase;
      span.t = e->t;
      span.nodes = e->nodes;
      span.clients = e->clients;
      span.color = e->color;
      switch (e->phase) {
        case FaultPhase::kInstant:
          faults_.push_back(std::move(span));
          break;
        case FaultPhase::kStart:
          open[{e->fault, e->target}].push_back(faults_.size());
          faults_.push_back(std::move(span));
          break;
        case FaultPhase::kStop: {
          auto it = open.find({e->fault, e->target});
          if (it == open.end() || it->second.empty()) {
            Warn(absl::StrCat(Where(*e), "nemesis stop of ", e->fault, " ", e->target,
                              " without a start"));
            break;
          }
          faults_[it->second.front()].stop = e->t;
          it->second.pop_front();
          break;
        }
      }
    }
  }

  // Faults active at some time in [from, to]; faults_ is sorted by t.
  std::vector<FaultInfo> ActiveFaults(int64_t from, int64_t to) const {
    std::vector<FaultInfo> out;
    const int64_t window = std::max<int64_t>(0, absl::ToInt64Nanoseconds(options_.fault_window));
    const int64_t instant_from =
        from < std::numeric_limits<int64_t>::min() + window ? from : from - window;
    for (const FaultInfo& f : faults_) {
      if (f.t > to) break;
      if (f.phase == FaultPhase::kStart) {
        if (!f.stop.has_value() || *f.stop > from) out.push_back(f);
      } else if (f.t >= instant_from) {
        out.push_back(f);
      }
    }
    return out;
  }

  // ---- Uses and releases
  // ----------------------------------------------------------

  // The grant a use or release refers to: by token, then process, then op.
  int FindGrant(const Event& e) const {
    auto it = by_token_.find(e.token);
    if (it == by_token_.end()) return -1;
    const std::vector<int>& candidates = it->second;
    if (candidates.size() == 1) return candidates.front();
    int same_process = -1;
    for (int g : candidates) {
      const GrantInfo& info = grants_[g].info;
      if (info.process == e.process && info.op == e.op) return g;
      if (same_process < 0 && info.process == e.process) same_process = g;
    }
    return same_process >= 0 ? same_process : candidates.front();
  }

  void MatchUsesAndReleases() {
    use_grant_.assign(uses_.size(), -1);
    for (size_t i = 0; i < uses_.size(); ++i) {
      const Event& u = *uses_[i];
      if (u.end < u.begin) {
        Warn(absl::StrCat(Where(u), "use by ", Who(u), " ends before it begins"));
      }
      if (u.write && u.read != std::numeric_limits<int64_t>::max() && u.wrote != u.read + 1) {
        Warn(absl::StrCat(Where(u), "use by ", Who(u), " read ", u.read, " but wrote ", u.wrote,
                          " (expected read + 1)"));
      }
      const int g = FindGrant(u);
      if (g < 0) {
        Warn(absl::StrCat(Where(u), "use by ", Who(u), " without a grant (token ", u.token, ")"));
        continue;
      }
      use_grant_[i] = g;
      Grant& grant = grants_[g];
      grant.last_use_end = std::max(grant.last_use_end, u.end);
      ++grant.info.uses;
      if (u.resource != grant.info.resource) {
        Warn(absl::StrCat(Where(u), "use by ", Who(u), " names resource \"", u.resource,
                          "\" but its grant is for \"", grant.info.resource, "\""));
      }
      if (u.begin < grant.info.granted) {
        Warn(absl::StrCat(Where(u), "use by ", Who(u), " begins before its grant was logged"));
      }
      if (u.fencing_token.has_value() && u.fencing_token != grant.info.fencing_token) {
        Warn(absl::StrCat(Where(u), "use by ", Who(u), " carries fencing token ", *u.fencing_token,
                          " but its grant has ",
                          grant.info.fencing_token.has_value()
                              ? absl::StrCat(*grant.info.fencing_token)
                              : std::string("none")));
      }
    }
    for (const Event* x : extends_) {
      const int g = FindGrant(*x);
      if (g < 0) {
        Warn(absl::StrCat(Where(*x), "extend by ", Who(*x), " without a grant (token ", x->token,
                          ")"));
        continue;
      }
      if (!x->ok) continue;
      Grant& grant = grants_[g];
      grant.extensions.push_back({x->t, x->valid_until});
      // The hold lasts until the latest validity the holder was given.
      grant.info.valid_until = std::max(grant.info.valid_until, x->valid_until);
    }
    for (const Event* r : releases_) {
      const int g = FindGrant(*r);
      if (g < 0) {
        Warn(absl::StrCat(Where(*r), "release by ", Who(*r), " without a grant (token ", r->token,
                          ")"));
        continue;
      }
      GrantInfo& info = grants_[g].info;
      if (!info.released.has_value() || r->t < *info.released) {
        info.released = r->t;
      }
    }
  }

  void ComputeHolds() {
    for (Grant& g : grants_) {
      GrantInfo& info = g.info;
      int64_t end = info.valid_until;
      if (info.released.has_value()) end = std::min(end, *info.released);
      end = std::max(end, g.last_use_end);
      if (end < info.granted) {
        Warn(absl::StrCat(info.source.empty() ? "" : info.source + ": ", "grant ", Who(info),
                          " ends (valid_until/release) before it was logged"));
        end = info.granted;
      }
      info.hold_end = end;
    }
  }

  std::string HoldText(const GrantInfo& g) const {
    return absl::StrCat(Who(g), " [", Rel(g.granted), ", ", Rel(g.hold_end), "]");
  }

  // Grants by resource, in resource order (deterministic reports).
  std::map<std::string, std::vector<int>> GrantsByResource() const {
    std::map<std::string, std::vector<int>> out;
    for (size_t i = 0; i < grants_.size(); ++i) {
      out[grants_[i].info.resource].push_back(static_cast<int>(i));
    }
    return out;
  }

  // ---- S1
  // -----------------------------------------------------------------------

  void ReportOverlap(int a, int b) {
    const GrantInfo& ga = grants_[a].info;
    const GrantInfo& gb = grants_[b].info;
    Violation v;
    v.property = Property::kMutualExclusion;
    v.resource = ga.resource;
    v.t = std::max(ga.granted, gb.granted);
    v.t_end = std::min(ga.hold_end, gb.hold_end);
    v.description = absl::StrCat("hold intervals of ", HoldText(ga), " and ", HoldText(gb),
                                 " overlap for ", Ms(v.t, v.t_end));
    v.grants = {ga, gb};
    Keep(std::move(v));
  }

  static bool Overlap(const GrantInfo& a, const GrantInfo& b) {
    return a.granted < b.hold_end && b.granted < a.hold_end;
  }

  // (hold_end, grant): a min-heap by hold_end that may be walked.
  using ActiveGrants = std::vector<std::pair<int64_t, int>>;

  // Walks the grants `ids` in the order they began (stable), calling
  // on_grant(i, active, same_token) for each: `active` holds the grants that
  // began at or before grant i and end after it begins, `same_token` how
  // many of them carry grant i's token.
  template <typename Fn>
  void SweepByStart(std::vector<int> ids, Fn on_grant) {
    using Entry = ActiveGrants::value_type;
    const auto later = std::greater<Entry>();
    active_per_token_.resize(static_cast<size_t>(num_tokens_), 0);
    std::stable_sort(ids.begin(), ids.end(), [this](int a, int b) {
      return grants_[a].info.granted < grants_[b].info.granted;
    });
    ActiveGrants heap;
    for (int i : ids) {
      const GrantInfo& gi = grants_[i].info;
      while (!heap.empty() && heap.front().first <= gi.granted) {
        --active_per_token_[grants_[heap.front().second].token_id];
        std::pop_heap(heap.begin(), heap.end(), later);
        heap.pop_back();
      }
      on_grant(i, static_cast<const ActiveGrants&>(heap), active_per_token_[grants_[i].token_id]);
      heap.emplace_back(gi.hold_end, i);
      std::push_heap(heap.begin(), heap.end(), later);
      ++active_per_token_[grants_[i].token_id];
    }
    // Leave the per-token counts clean for the next walk.
    for (const Entry& e : heap) --active_per_token_[grants_[e.second].token_id];
  }

  void CheckMutualExclusion() {
    const Property p = Property::kMutualExclusion;
    for (auto& [resource, all_ids] : GrantsByResource()) {
      // A semaphore's permits are judged by S6; readers may share.
      std::vector<int> ids;
      bool readers = false;
      for (int i : all_ids) {
        if (grants_[i].info.slot_mode()) continue;
        readers = readers || grants_[i].info.shared();
        ids.push_back(i);
      }
      SweepByStart(std::move(ids), [&](int i, const ActiveGrants& heap, int same_token) {
        const GrantInfo& gi = grants_[i].info;
        // Every grant in `heap` began at or before gi and ends after gi
        // begins: it overlaps gi unless it shares gi's token, or gi is
        // empty and both begin at the same instant (walked to be exact).
        const bool empty = gi.hold_end <= gi.granted;
        if (!heap.empty() && (empty || readers || Room(p))) {
          std::vector<int> others;
          for (const auto& e : heap) {
            const Grant& other = grants_[e.second];
            if (other.token_id == grants_[i].token_id) continue;
            if (other.info.shared() && gi.shared()) continue;  // readers share
            if (!Overlap(other.info, gi)) continue;
            others.push_back(e.second);
          }
          std::sort(others.begin(), others.end(), [this](int a, int b) {
            const GrantInfo& ga = grants_[a].info;
            const GrantInfo& gb = grants_[b].info;
            return ga.granted != gb.granted ? ga.granted < gb.granted : a < b;
          });
          for (int o : others) {
            if (Count(p) && Room(p)) ReportOverlap(o, i);
          }
        } else if (!heap.empty()) {
          const int64_t n = static_cast<int64_t>(heap.size()) - same_token;
          if (n > 0) Count(p, n);
        }
      });
    }
  }

  // ---- S2
  // -----------------------------------------------------------------------

  void CheckValidity() {
    const Property p = Property::kValidity;
    for (size_t i = 0; i < uses_.size(); ++i) {
      const int g = use_grant_[i];
      if (g < 0) continue;
      const Event& u = *uses_[i];
      const Grant& grant = grants_[g];
      const GrantInfo& info = grant.info;
      // The validity the holder had when the use began: the grant's, or the
      // latest extension started before the use.
      int64_t until = grant.granted_until;
      for (const auto& [t, x] : grant.extensions) {
        if (t <= u.begin) until = std::max(until, x);
      }
      if (u.end <= until) continue;
      if (!Count(p)) continue;
      Violation v;
      v.property = p;
      v.resource = info.resource;
      v.t = until;
      v.t_end = u.end;
      v.description = absl::StrCat(
          "use by ", Who(u), " [", Rel(u.begin), ", ", Rel(u.end), "] ends ", Ms(until, u.end),
          grant.extensions.empty() ? " after its grant's valid_until "
                                   : " after its valid_until (extended) ",
          Rel(until), u.accepted ? ", write accepted" : ", write rejected", From(u));
      v.grants = {info};
      Keep(std::move(v));
    }
  }

  // ---- S3
  // -----------------------------------------------------------------------

  std::vector<GrantInfo> GrantsOf(std::initializer_list<size_t> use_indexes) const {
    std::vector<GrantInfo> out;
    for (size_t i : use_indexes) {
      if (use_grant_[i] >= 0) out.push_back(grants_[use_grant_[i]].info);
    }
    return out;
  }

  std::string UseText(size_t i) const {
    const Event& u = *uses_[i];
    return absl::StrCat(Who(u), " [", Rel(u.begin), ", ", Rel(u.end), "]", From(u));
  }

  void CheckHarm() {
    const Property p = Property::kHarm;
    std::map<std::string, std::vector<size_t>> accepted;
    for (size_t i = 0; i < uses_.size(); ++i) {
      if (uses_[i]->accepted && uses_[i]->write) accepted[uses_[i]->resource].push_back(i);
    }
    for (auto& [resource, ids] : accepted) {
      std::stable_sort(ids.begin(), ids.end(), [this](size_t a, size_t b) {
        if (uses_[a]->read != uses_[b]->read) {
          return uses_[a]->read < uses_[b]->read;
        }
        return uses_[a]->end < uses_[b]->end;
      });
      size_t begin = 0;
      while (begin < ids.size()) {
        size_t end = begin + 1;
        while (end < ids.size() && uses_[ids[end]]->read == uses_[ids[begin]]->read) {
          ++end;
        }
        const int64_t k = static_cast<int64_t>(end - begin);
        if (k > 1) {
          result_.counts.lost_updates += k - 1;
          const int64_t pairs = k * (k - 1) / 2;
          int64_t kept = 0;
          for (size_t a = begin; a < end && Room(p); ++a) {
            for (size_t b = a + 1; b < end && Room(p); ++b) {
              ++kept;
              Count(p);
              ReportSameRead(resource, ids[a], ids[b]);
            }
          }
          if (pairs > kept) Count(p, pairs - kept);
        }
        begin = end;
      }
    }
    for (const auto& [resource, final_event] : finals_) {
      auto it = accepted.find(resource);
      const int64_t n = it == accepted.end() ? 0 : static_cast<int64_t>(it->second.size());
      // long double holds any difference of two int64 exactly.
      const long double delta = static_cast<long double>(final_event->counter) -
                                static_cast<long double>(final_event->initial);
      if (delta == static_cast<long double>(n)) continue;
      if (!Count(p)) continue;
      Violation v;
      v.property = p;
      v.resource = resource;
      v.t = result_.first_t;
      v.t_end = final_event->t;
      if (delta < n) {
        v.description = absl::StrCat("final counter ", final_event->counter, " - initial ",
                                     final_event->initial, " = ", Num(delta), " but ", n,
                                     " writes were accepted: ", Num(n - delta),
                                     " acknowledged update(s) lost", From(*final_event));
      } else {
        v.description = absl::StrCat(
            "final counter ", final_event->counter, " - initial ", final_event->initial, " = ",
            Num(delta), " but only ", n, " writes were accepted: ", Num(delta - n),
            " increment(s) missing from the history (a writer killed between "
            "its write and its log line?)",
            From(*final_event));
      }
      Keep(std::move(v));
    }
  }

  void ReportSameRead(const std::string& resource, size_t a, size_t b) {
    Violation v;
    v.property = Property::kHarm;
    v.resource = resource;
    const Event& ua = *uses_[a];
    const Event& ub = *uses_[b];
    v.t = std::max(ua.begin, ub.begin);
    v.t_end = std::max(v.t, std::min(ua.end, ub.end));
    v.description = absl::StrCat("accepted uses ", UseText(a), " and ", UseText(b), " both read ",
                                 ua.read, ": one update lost");
    v.grants = GrantsOf({a, b});
    Keep(std::move(v));
  }

  // ---- Tokens (checker_tokens.cc) -------------------------------------------------

  void CheckIncreasing(Property p, const std::string& resource, const std::vector<int>& ids,
                       absl::string_view what);
  void CheckAtMostK();
  void CheckLeaderTerms();
  void CheckFencing();
  // S8 (checker_fair.cc).
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
