#include "chaos/check/checker.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chaos/check/checker_state.h"
#include "common/enum_names.h"
#include "nlohmann/json.hpp"

namespace redlock::chaos {
namespace {

using check_internal::Checker;

// ---- Report formatting
// -----------------------------------------------------------

std::string RelTime(const CheckResult& r, int64_t t) {
  return absl::StrFormat("%+.6fs", (static_cast<double>(t) - static_cast<double>(r.first_t)) / 1e9);
}

std::string FaultText(const CheckResult& r, const FaultInfo& f) {
  std::string out = absl::StrCat(f.fault, " ", f.target);
  if (!f.detail.empty()) absl::StrAppend(&out, " \"", f.detail, "\"");
  if (f.phase == FaultPhase::kInstant) {
    absl::StrAppend(&out, " at ", RelTime(r, f.t));
  } else {
    absl::StrAppend(&out, " from ", RelTime(r, f.t), " to ",
                    f.stop.has_value() ? RelTime(r, *f.stop) : "the end");
  }
  return out;
}

std::string GrantText(const CheckResult& r, const GrantInfo& g) {
  std::string out = absl::StrCat(g.process, " op ", g.op, " token ", g.token, " nodes [",
                                 absl::StrJoin(g.nodes, ","), "] attempt ", RelTime(r, g.start),
                                 " hold [", RelTime(r, g.granted), ", ", RelTime(r, g.hold_end),
                                 "] valid_until ", RelTime(r, g.valid_until));
  if (g.released.has_value()) {
    absl::StrAppend(&out, " released ", RelTime(r, *g.released));
  }
  if (g.fencing_token.has_value()) {
    absl::StrAppend(&out, g.leader() ? " term " : " fencing ", *g.fencing_token);
  }
  if (!g.mode.empty() && !g.leader()) {
    absl::StrAppend(&out, " ", g.mode, g.slot >= 0 ? absl::StrCat(" ", g.slot) : "");
  }
  if (!g.source.empty()) absl::StrAppend(&out, " (", g.source, ")");
  return out;
}

// The value, or null when it has none.
template <typename T>
nlohmann::ordered_json OrNull(const std::optional<T>& v) {
  return v.has_value() ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json GrantJson(const GrantInfo& g) {
  nlohmann::ordered_json j;
  j["process"] = g.process;
  j["op"] = g.op;
  j["resource"] = g.resource;
  j["token"] = g.token;
  j["nodes"] = g.nodes;
  j["start"] = g.start;
  j["granted"] = g.granted;
  j["valid_until"] = g.valid_until;
  j["hold_end"] = g.hold_end;
  j["released"] = OrNull(g.released);
  j["fencing_token"] = OrNull(g.fencing_token);
  j["uses"] = g.uses;
  if (!g.mode.empty()) j["mode"] = g.mode;
  if (g.permits != 0) j["permits"] = g.permits;
  if (g.slot >= 0) j["slot"] = g.slot;
  if (!g.source.empty()) j["source"] = g.source;
  return j;
}

nlohmann::ordered_json FaultJson(const FaultInfo& f) {
  nlohmann::ordered_json j;
  j["fault"] = f.fault;
  j["target"] = f.target;
  j["detail"] = f.detail;
  j["phase"] = std::string(FaultPhaseName(f.phase));
  j["t"] = f.t;
  j["stop"] = OrNull(f.stop);
  return j;
}

std::string Verdict(const CheckResult& r, Property p) {
  if (r.count(p) > 0) return "FAIL";
  if (p == Property::kFencing && r.counts.fenced_grants == 0) return "n/a";
  if (p == Property::kAtMostK && r.counts.slot_grants == 0) return "n/a";
  if (p == Property::kLeaderTerms && r.counts.leader_grants == 0) return "n/a";
  if (p == Property::kStaleWriteSeen && r.counts.fenced_grants == 0) return "n/a";
  if (p == Property::kFirstCome && r.counts.fair_calls == 0) return "n/a";
  return "ok";
}

std::string Checked(const CheckResult& r, Property p) {
  const CheckCounts& c = r.counts;
  switch (p) {
    case Property::kMutualExclusion:
      return absl::StrCat(c.grants, " grants");
    case Property::kValidity:
      return absl::StrCat(c.uses, " uses");
    case Property::kHarm:
      return absl::StrCat(c.accepted_writes, " writes, ", c.finals, " finals");
    case Property::kFencing:
      return absl::StrCat(c.fenced_grants, " fenced grants");
    case Property::kAtMostK:
      return absl::StrCat(c.slot_grants, " permit grants");
    case Property::kLeaderTerms:
      return absl::StrCat(c.leader_grants, " leader grants");
    case Property::kStaleWriteSeen:
      return absl::StrCat(c.accepted_writes, " writes");
    case Property::kFirstCome:
      return absl::StrCat(c.fair_queued, " of ", c.fair_calls, " fair calls queued");
  }
  return "";
}

constexpr EnumName<Property> kPropertyNames[] = {
    {Property::kMutualExclusion, "S1"},
    {Property::kValidity, "S2"},
    {Property::kHarm, "S3"},
    {Property::kFencing, "S4"},
    {Property::kAtMostK, "S6"},
    {Property::kLeaderTerms, "S7"},
    {Property::kStaleWriteSeen, "S9"},
    {Property::kFirstCome, "S8"},
};

constexpr EnumName<Property> kPropertyTitles[] = {
    {Property::kMutualExclusion, "mutual exclusion"},
    {Property::kValidity, "validity"},
    {Property::kHarm, "harm (lost updates)"},
    {Property::kFencing, "fencing"},
    {Property::kAtMostK, "at most K holders"},
    {Property::kLeaderTerms, "leader terms"},
    {Property::kStaleWriteSeen, "stale write seen"},
    {Property::kFirstCome, "first come, first served"},
};

}  // namespace

absl::string_view PropertyName(Property p) { return NameOf(kPropertyNames, p, "S?"); }

absl::string_view PropertyTitle(Property p) { return NameOf(kPropertyTitles, p); }

int64_t CheckResult::total_violations() const {
  int64_t n = 0;
  for (int64_t c : violation_counts) n += c;
  return n;
}

CheckResult Check(const std::vector<Event>& history, const CheckOptions& options) {
  return Checker(history, options).Run();
}

std::string FormatReport(const CheckResult& r) {
  const CheckCounts& c = r.counts;
  std::string out = absl::StrFormat(
      "history: %d events (%d duplicates dropped), %d resources, span %.3f s\n"
      "  acquires: %d invoked, %d granted (%d fenced), %d failed, "
      "%d indeterminate\n"
      "  uses: %d (%d writes accepted, %d rejected), releases: %d, "
      "faults: %d, finals: %d\n\n",
      c.events, c.duplicates, c.resources,
      (static_cast<double>(r.last_t) - static_cast<double>(r.first_t)) / 1e9, c.invokes, c.grants,
      c.fenced_grants, c.fails, c.indeterminate, c.uses, c.accepted_writes, c.rejected_writes,
      c.releases, c.nemesis, c.finals);
  if (c.shared_grants + c.slot_grants + c.leader_grants > 0) {
    absl::StrAppendFormat(&out,
                          "lock family: %d shared grants, %d permit grants, %d leader grants, "
                          "%d read-only uses\n\n",
                          c.shared_grants, c.slot_grants, c.leader_grants, c.read_uses);
  }
  if (c.fair_calls > 0) {
    absl::StrAppendFormat(&out,
                          "fair lock: %d calls, %d took a place, at most %d overtakes of one "
                          "waiter, %d waiters overtaken beyond the bound\n\n",
                          c.fair_calls, c.fair_queued, c.max_overtakes, c.overtaken_beyond_bound);
  }
  absl::StrAppendFormat(&out, "%-4s  %-20s  %-24s  %10s  %s\n", "prop", "property", "checked",
                        "violations", "verdict");
  for (int i = 0; i < kNumProperties; ++i) {
    const Property p = static_cast<Property>(i);
    absl::StrAppendFormat(&out, "%-4s  %-20s  %-24s  %10d  %s\n", PropertyName(p), PropertyTitle(p),
                          Checked(r, p), r.count(p), Verdict(r, p));
  }
  if (c.lost_updates > 0) {
    absl::StrAppend(&out, "lost updates (same value read twice): ", c.lost_updates, "\n");
  }
  absl::StrAppend(&out, "verdict: ", r.ok() ? "PASS" : "FAIL", " (", r.total_violations(),
                  " violations, ", r.warning_count, " warnings)\n");
  if (r.warning_count > 0) {
    absl::StrAppend(&out, "\nwarnings (malformed history, ", r.warnings.size(), " of ",
                    r.warning_count, " shown):\n");
    for (const std::string& w : r.warnings) absl::StrAppend(&out, "  ", w, "\n");
  }
  if (!r.violations.empty()) {
    absl::StrAppend(&out, "\nviolations (", r.violations.size(), " of ", r.total_violations(),
                    " shown):\n");
    for (const Violation& v : r.violations) {
      absl::StrAppend(&out, "[", PropertyName(v.property), "] resource \"", v.resource, "\" ",
                      RelTime(r, v.t), " .. ", RelTime(r, v.t_end), ": ", v.description, "\n");
      for (const GrantInfo& g : v.grants) {
        absl::StrAppend(&out, "     grant  ", GrantText(r, g), "\n");
      }
      if (v.faults.empty()) {
        absl::StrAppend(&out, "     faults none\n");
      }
      for (const FaultInfo& f : v.faults) {
        absl::StrAppend(&out, "     fault  ", FaultText(r, f), "\n");
      }
    }
  }
  return out;
}

std::string FormatReportJson(const CheckResult& r) {
  using OJ = nlohmann::ordered_json;
  const CheckCounts& c = r.counts;
  OJ j;
  j["ok"] = r.ok();
  j["first_t"] = r.first_t;
  j["last_t"] = r.last_t;
  OJ counts;
  counts["events"] = c.events;
  counts["duplicates"] = c.duplicates;
  counts["invokes"] = c.invokes;
  counts["grants"] = c.grants;
  counts["fenced_grants"] = c.fenced_grants;
  counts["fails"] = c.fails;
  counts["indeterminate"] = c.indeterminate;
  counts["uses"] = c.uses;
  counts["accepted_writes"] = c.accepted_writes;
  counts["rejected_writes"] = c.rejected_writes;
  counts["releases"] = c.releases;
  counts["nemesis"] = c.nemesis;
  counts["finals"] = c.finals;
  counts["unknown"] = c.unknown;
  counts["resources"] = c.resources;
  counts["lost_updates"] = c.lost_updates;
  counts["shared_grants"] = c.shared_grants;
  counts["slot_grants"] = c.slot_grants;
  counts["leader_grants"] = c.leader_grants;
  counts["fair_calls"] = c.fair_calls;
  counts["fair_queued"] = c.fair_queued;
  counts["max_overtakes"] = c.max_overtakes;
  counts["overtaken_beyond_bound"] = c.overtaken_beyond_bound;
  counts["read_uses"] = c.read_uses;
  j["counts"] = std::move(counts);
  OJ by_property = OJ::object();
  for (int i = 0; i < kNumProperties; ++i) {
    const Property p = static_cast<Property>(i);
    OJ entry;
    entry["title"] = std::string(PropertyTitle(p));
    entry["violations"] = r.count(p);
    entry["verdict"] = Verdict(r, p);
    by_property[std::string(PropertyName(p))] = std::move(entry);
  }
  j["properties"] = std::move(by_property);
  OJ violations = OJ::array();
  for (const Violation& v : r.violations) {
    OJ jv;
    jv["property"] = std::string(PropertyName(v.property));
    jv["resource"] = v.resource;
    jv["t"] = v.t;
    jv["t_end"] = v.t_end;
    jv["description"] = v.description;
    OJ grants = OJ::array();
    for (const GrantInfo& g : v.grants) grants.push_back(GrantJson(g));
    jv["grants"] = std::move(grants);
    OJ faults = OJ::array();
    for (const FaultInfo& f : v.faults) faults.push_back(FaultJson(f));
    jv["faults"] = std::move(faults);
    violations.push_back(std::move(jv));
  }
  j["violations"] = std::move(violations);
  j["warning_count"] = r.warning_count;
  j["warnings"] = r.warnings;
  std::string out = j.dump(2, ' ', false, OJ::error_handler_t::replace);
  out.push_back('\n');
  return out;
}

}  // namespace redlock::chaos
