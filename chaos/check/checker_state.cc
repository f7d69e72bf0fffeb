// The checker's state (checker_state.h): the history sorted, classified and
// deduplicated, the faults paired into spans, uses, extensions and releases
// matched to their grants, each grant's hold, and the helpers every property
// check shares (messages, counting, the sweep over grants by start).

#include "chaos/check/checker_state.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace redlock::chaos::check_internal {
namespace {

constexpr absl::string_view kSep = "\x1f";

std::string OpKey(const Event& e) { return absl::StrCat(e.process, kSep, e.op); }

// Two copies of one event (a retried write of a log line) share this key.
std::string DedupKey(const Event& e) {
  switch (e.type) {
    case EventType::kInvoke:
    case EventType::kFail:
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

}  // namespace

Checker::Checker(const std::vector<Event>& history, const CheckOptions& options)
    : options_(options) {
  events_.reserve(history.size());
  for (const Event& e : history) events_.push_back(&e);
  std::stable_sort(events_.begin(), events_.end(),
                   [](const Event* a, const Event* b) { return a->t < b->t; });
}

CheckResult Checker::Run() {
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
  CheckStaleWriteSeen();
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

// Differences are taken in double: hostile histories may hold any int64.
std::string Checker::Rel(int64_t t) const {
  return absl::StrFormat("%+.6fs",
                         (static_cast<double>(t) - static_cast<double>(result_.first_t)) / 1e9);
}

// b - a, in milliseconds.
std::string Checker::Ms(int64_t a, int64_t b) {
  return absl::StrFormat("%.3f ms", (static_cast<double>(b) - static_cast<double>(a)) / 1e6);
}

std::string Checker::From(const Event& e) {
  return e.source.empty() ? std::string() : absl::StrCat(" (", e.source, ")");
}

std::string Checker::Where(const Event& e) {
  return e.source.empty() ? std::string() : absl::StrCat(e.source, ": ");
}

void Checker::Warn(std::string message) {
  ++result_.warning_count;
  if (static_cast<int64_t>(result_.warnings.size()) < options_.max_warnings) {
    result_.warnings.push_back(std::move(message));
  }
}

// Counts a violation and tells whether it should be kept (built).
bool Checker::Count(Property p, int64_t n) {
  result_.violation_counts[static_cast<int>(p)] += n;
  return Room(p);
}

bool Checker::Room(Property p) const {
  return kept_[static_cast<int>(p)] < options_.max_violations_per_property;
}

void Checker::Keep(Violation v) {
  v.faults = ActiveFaults(v.t, std::max(v.t, v.t_end));
  ++kept_[static_cast<int>(v.property)];
  result_.violations.push_back(std::move(v));
}

void Checker::Classify() {
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
        grants_.push_back(std::move(g));
        break;
      }
      case EventType::kFail:
        ++result_.counts.fails;
        resources[e->resource] = true;
        resolved.insert(OpKey(*e));
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

void Checker::BuildFaults() {
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
std::vector<FaultInfo> Checker::ActiveFaults(int64_t from, int64_t to) const {
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

// The grant a use or release refers to: by token, then process, then op.
int Checker::FindGrant(const Event& e) const {
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

void Checker::MatchUsesAndReleases() {
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

void Checker::ComputeHolds() {
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

std::string Checker::HoldText(const GrantInfo& g) const {
  return absl::StrCat(Who(g), " [", Rel(g.granted), ", ", Rel(g.hold_end), "]");
}

// Grants by resource, in resource order (deterministic reports).
std::map<std::string, std::vector<int>> Checker::GrantsByResource() const {
  std::map<std::string, std::vector<int>> out;
  for (size_t i = 0; i < grants_.size(); ++i) {
    out[grants_[i].info.resource].push_back(static_cast<int>(i));
  }
  return out;
}

// Walks the grants `ids` in the order they began (stable), calling
// on_grant(i, active, same_token) for each: `active` holds the grants that
// began at or before grant i and end after it begins, `same_token` how
// many of them carry grant i's token.
void Checker::SweepByStart(std::vector<int> ids,
                           absl::FunctionRef<void(int, const ActiveGrants&, int)> on_grant) {
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
    on_grant(i, heap, active_per_token_[grants_[i].token_id]);
    heap.emplace_back(gi.hold_end, i);
    std::push_heap(heap.begin(), heap.end(), later);
    ++active_per_token_[grants_[i].token_id];
  }
  // Leave the per-token counts clean for the next walk.
  for (const Entry& e : heap) --active_per_token_[grants_[e.second].token_id];
}

}  // namespace redlock::chaos::check_internal
