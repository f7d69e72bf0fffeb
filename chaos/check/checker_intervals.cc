// The checker's interval properties: S1 (no two holders of distinct tokens
// overlap; readers share), S2 (no use ends past its holder's validity) and
// S3 (no two accepted writes read one value; the final counter adds up). The
// token properties are in checker_tokens.cc.

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chaos/check/checker_state.h"

namespace redlock::chaos::check_internal {

void Checker::ReportOverlap(int a, int b) {
  const GrantInfo& ga = grants_[a].info;
  const GrantInfo& gb = grants_[b].info;
  Violation v = ViolationIn(Property::kMutualExclusion, ga.resource,
                            std::max(ga.granted, gb.granted), std::min(ga.hold_end, gb.hold_end));
  v.description = absl::StrCat("hold intervals of ", HoldText(ga), " and ", HoldText(gb),
                               " overlap for ", Ms(v.t, v.t_end));
  v.grants = {ga, gb};
  Keep(std::move(v));
}

bool Checker::Overlap(const GrantInfo& a, const GrantInfo& b) {
  return a.granted < b.hold_end && b.granted < a.hold_end;
}

void Checker::CheckMutualExclusion() {
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

void Checker::CheckValidity() {
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
    Violation v = ViolationIn(p, info.resource, until, u.end);
    v.description = absl::StrCat(
        "use by ", Who(u), " [", Rel(u.begin), ", ", Rel(u.end), "] ends ", Ms(until, u.end),
        grant.extensions.empty() ? " after its grant's valid_until "
                                 : " after its valid_until (extended) ",
        Rel(until), u.accepted ? ", write accepted" : ", write rejected", From(u));
    v.grants = {info};
    Keep(std::move(v));
  }
}

std::vector<GrantInfo> Checker::GrantsOf(std::initializer_list<size_t> use_indexes) const {
  std::vector<GrantInfo> out;
  for (size_t i : use_indexes) {
    if (use_grant_[i] >= 0) out.push_back(grants_[use_grant_[i]].info);
  }
  return out;
}

std::string Checker::UseText(size_t i) const {
  const Event& u = *uses_[i];
  return absl::StrCat(Who(u), " [", Rel(u.begin), ", ", Rel(u.end), "]", From(u));
}

void Checker::CheckHarm() {
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
    Violation v = ViolationIn(p, resource, result_.first_t, final_event->t);
    if (delta < n) {
      v.description =
          absl::StrCat("final counter ", final_event->counter, " - initial ", final_event->initial,
                       " = ", Num(delta), " but ", n, " writes were accepted: ", Num(n - delta),
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

void Checker::ReportSameRead(const std::string& resource, size_t a, size_t b) {
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

}  // namespace redlock::chaos::check_internal
