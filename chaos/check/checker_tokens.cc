// The checker's token properties: S4 (fencing tokens increase, the fenced
// store accepts only increasing ones), S6 (at most K permit holders), S7
// (leader terms strictly increase).

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chaos/check/checker_state.h"

namespace redlock::chaos::check_internal {

// ---- Increasing tokens (S4 (a) and (b), S7)
// ---------------------------------------------------------

// `ids`: grants of one resource (and permit) that carry a token, each
// judged against the others: (a) equal tokens of distinct grants (but
// between readers, which share one); (b) a grant whose attempt started
// after another was granted, with a lower token.
void Checker::CheckIncreasing(Property p, const std::string& resource, const std::vector<int>& ids,
                              absl::string_view what) {
  // (a) equal tokens.
  std::vector<int> by_ft = ids;
  std::stable_sort(by_ft.begin(), by_ft.end(), [this](int a, int b) {
    const GrantInfo& ga = grants_[a].info;
    const GrantInfo& gb = grants_[b].info;
    if (*ga.fencing_token != *gb.fencing_token) {
      return *ga.fencing_token < *gb.fencing_token;
    }
    return ga.granted < gb.granted;
  });
  size_t begin = 0;
  while (begin < by_ft.size()) {
    const uint64_t ft = *grants_[by_ft[begin]].info.fencing_token;
    size_t end = begin + 1;
    while (end < by_ft.size() && *grants_[by_ft[end]].info.fencing_token == ft) {
      ++end;
    }
    // Only readers may share a token, with each other: a reader is above the
    // last writer and a writer above every reader before it (WriterFence,
    // ReaderFence in redlock/internal/algorithm.h).
    std::vector<int> group(by_ft.begin() + static_cast<long>(begin),
                           by_ft.begin() + static_cast<long>(end));
    int64_t pairs = 0;
    for (size_t a = 0; a < group.size(); ++a) {
      for (size_t b = a + 1; b < group.size(); ++b) {
        const GrantInfo& ga = grants_[group[a]].info;
        const GrantInfo& gb = grants_[group[b]].info;
        if ((ga.shared() && gb.shared()) ||
            grants_[group[a]].token_id == grants_[group[b]].token_id) {
          continue;
        }
        ++pairs;
        if (!Room(p)) continue;
        Count(p);
        --pairs;
        Violation v = ViolationIn(p, resource, gb.granted, gb.granted);
        v.description =
            absl::StrCat("grants ", Who(ga), ga.shared() ? " (a reader)" : "", " (",
                         Rel(ga.granted), ") and ", Who(gb), gb.shared() ? " (a reader)" : "", " (",
                         Rel(gb.granted), ") carry the same ", what, " ", ft);
        v.grants = {ga, gb};
        Keep(std::move(v));
      }
    }
    if (pairs > 0) Count(p, pairs);
    begin = end;
  }

  // (b) a later attempt got a lower token.
  std::vector<int> by_granted = ids;
  std::stable_sort(by_granted.begin(), by_granted.end(), [this](int a, int b) {
    return grants_[a].info.granted < grants_[b].info.granted;
  });
  std::vector<int> by_start = ids;
  std::stable_sort(by_start.begin(), by_start.end(),
                   [this](int a, int b) { return grants_[a].info.start < grants_[b].info.start; });
  size_t next = 0;
  int best = -1;  // the highest token granted so far (a reader among equals)
  for (int b : by_start) {
    const GrantInfo& gb = grants_[b].info;
    while (next < by_granted.size() && grants_[by_granted[next]].info.granted < gb.start) {
      const int a = by_granted[next++];
      const uint64_t fa = *grants_[a].info.fencing_token;
      if (best < 0 || fa > *grants_[best].info.fencing_token ||
          (fa == *grants_[best].info.fencing_token && grants_[a].info.shared())) {
        best = a;
      }
    }
    if (best < 0) continue;
    const GrantInfo& ga = grants_[best].info;
    // Equal tokens are (a)'s.
    if (*gb.fencing_token >= *ga.fencing_token) continue;
    if (!Count(p)) continue;
    Violation v = ViolationIn(p, resource, gb.start, std::max(gb.start, gb.granted));
    v.description = absl::StrCat(
        "grant ", Who(gb), " attempted at ", Rel(gb.start), " got ", what, " ", *gb.fencing_token,
        *gb.fencing_token == *ga.fencing_token ? ", not higher than " : ", lower than ",
        *ga.fencing_token, " granted earlier to ", Who(ga), ga.shared() ? " (a reader)" : "",
        " at ", Rel(ga.granted));
    v.grants = {ga, gb};
    Keep(std::move(v));
  }
}

// ---- S6
// -----------------------------------------------------------------------

void Checker::CheckAtMostK() {
  const Property p = Property::kAtMostK;
  for (auto& [resource, all_ids] : GrantsByResource()) {
    std::vector<int> ids;
    for (int i : all_ids) {
      if (grants_[i].info.slot_mode()) ids.push_back(i);
    }
    if (ids.empty()) continue;
    SweepByStart(std::move(ids), [&](int i, const ActiveGrants& heap, int same_token) {
      const GrantInfo& gi = grants_[i].info;
      const int64_t k = std::max<int64_t>(1, gi.permits);
      const int64_t others = static_cast<int64_t>(heap.size()) - same_token;
      if (others < k || gi.hold_end <= gi.granted || !Count(p) || !Room(p)) return;
      Violation v;
      v.property = p;
      v.resource = resource;
      v.t = gi.granted;
      int64_t until = gi.hold_end;
      std::vector<int> holders;
      for (const auto& e : heap) {
        if (grants_[e.second].token_id == grants_[i].token_id) continue;
        holders.push_back(e.second);
      }
      std::sort(holders.begin(), holders.end(),
                [this](int a, int b) { return grants_[a].info.granted < grants_[b].info.granted; });
      std::vector<std::string> who;
      for (int h : holders) {
        until = std::min(until, grants_[h].info.hold_end);
        v.grants.push_back(grants_[h].info);
        who.push_back(HoldText(grants_[h].info));
      }
      v.grants.push_back(gi);
      v.t_end = std::max(v.t, until);
      v.description =
          absl::StrCat(others + 1, " holders of a semaphore of ", k, " permits: ", HoldText(gi),
                       " began while ", absl::StrJoin(who, ", "), " held");
      Keep(std::move(v));
    });
  }
}

// ---- S7
// -----------------------------------------------------------------------

void Checker::CheckLeaderTerms() {
  for (auto& [resource, all_ids] : GrantsByResource()) {
    std::vector<int> ids;
    for (int i : all_ids) {
      const GrantInfo& g = grants_[i].info;
      if (g.leader() && g.fencing_token.has_value()) ids.push_back(i);
    }
    if (!ids.empty()) CheckIncreasing(Property::kLeaderTerms, resource, ids, "term");
  }
}

// ---- S4
// -----------------------------------------------------------------------

void Checker::CheckFencing() {
  // Leaders are judged by S7; a semaphore's tokens are per permit.
  std::map<std::pair<std::string, int64_t>, std::vector<int>> groups;
  for (auto& [resource, all_ids] : GrantsByResource()) {
    for (int i : all_ids) {
      const GrantInfo& g = grants_[i].info;
      if (!g.fencing_token.has_value() || g.leader()) continue;
      groups[{resource, g.slot_mode() ? g.slot : -1}].push_back(i);
    }
  }
  for (const auto& [key, ids] : groups) {
    CheckIncreasing(Property::kFencing, key.first, ids, "fencing token");
  }

  // (c) the store accepted a stale token.
  const Property p = Property::kFencing;
  std::map<std::string, std::vector<size_t>> fenced;
  for (size_t i = 0; i < uses_.size(); ++i) {
    if (uses_[i]->accepted && uses_[i]->fencing_token.has_value()) {
      fenced[uses_[i]->resource].push_back(i);
    }
  }
  for (auto& [resource, ids] : fenced) {
    std::stable_sort(ids.begin(), ids.end(),
                     [this](size_t a, size_t b) { return uses_[a]->end < uses_[b]->end; });
    int64_t best = -1;
    for (size_t i : ids) {
      const Event& u = *uses_[i];
      // Only a write sent after the higher token's write was done is
      // surely later (a client stopped between its write and its record
      // has an `end` later than the write).
      const int64_t sent = u.write_at != 0 ? u.write_at : u.end;
      if (best >= 0 && *u.fencing_token < *uses_[best]->fencing_token && sent > uses_[best]->end) {
        if (!Count(p)) continue;
        const Event& w = *uses_[best];
        Violation v = ViolationIn(p, resource, u.begin, u.end);
        v.description =
            absl::StrCat("the store accepted fencing token ", *u.fencing_token, " from ",
                         UseText(i), " after it had accepted ", *w.fencing_token, " from ",
                         UseText(static_cast<size_t>(best)));
        v.grants = GrantsOf({static_cast<size_t>(best), i});
        Keep(std::move(v));
        continue;
      }
      if (best < 0 || *u.fencing_token > *uses_[best]->fencing_token) {
        best = static_cast<int64_t>(i);
      }
    }
  }
}

}  // namespace redlock::chaos::check_internal

namespace redlock::chaos::check_internal {

// ---- S9: a stale fenced write, seen by a newer holder
// ----------------------------------------------------------

void Checker::CheckStaleWriteSeen() {
  const Property p = Property::kStaleWriteSeen;
  // Fenced uses by resource (their indexes), in history order.
  std::map<std::string, std::vector<size_t>> fenced;
  for (size_t i = 0; i < uses_.size(); ++i) {
    if (uses_[i]->fencing_token.has_value() && use_grant_[i] >= 0) {
      fenced[uses_[i]->resource].push_back(i);
    }
  }
  for (const auto& [resource, ids] : fenced) {
    for (size_t w : ids) {
      const Event& write = *uses_[w];
      if (!write.write || !write.accepted) continue;
      const Grant& writer = grants_[use_grant_[w]];
      // The validity the writer had when its use began (as S2 reads it).
      int64_t until = writer.granted_until;
      for (const auto& [t, x] : writer.extensions) {
        if (t <= write.begin) until = std::max(until, x);
      }
      const int64_t sent = write.write_at != 0 ? write.write_at : write.end;
      if (sent <= until) continue;
      // A later holder that read through the fence before the write was
      // sent, and read its value afterwards.
      for (size_t r : ids) {
        const Event& before = *uses_[r];
        const int g = use_grant_[r];
        if (g == use_grant_[w] || grants_[g].token_id == writer.token_id) continue;
        const GrantInfo& later = grants_[g].info;
        if (later.slot_mode() || later.granted <= until || before.end > sent) continue;
        const Event* seen = nullptr;
        for (size_t s : ids) {
          const Event& after = *uses_[s];
          if (use_grant_[s] == g && after.begin >= write.end && after.read == write.wrote &&
              after.read >= 0) {
            seen = &after;
            break;
          }
        }
        if (seen == nullptr) continue;
        if (!Count(p)) break;
        Violation v = ViolationIn(p, resource, sent, std::max(sent, seen->end));
        v.description = absl::StrCat(
            "write by ", Who(write), " with fencing token ", *write.fencing_token, " sent ",
            Rel(sent), ", ", Ms(until, sent), " after its validity ended (", Rel(until),
            "), accepted although ", Who(before), " (granted ", Rel(later.granted),
            ", fencing token ", *before.fencing_token, ") had read the store through the fence ",
            Rel(before.end), "; ", Who(*seen), " then read its value ", write.wrote, From(write));
        v.grants = {writer.info, later};
        Keep(std::move(v));
        break;
      }
    }
  }
}

}  // namespace redlock::chaos::check_internal
