// Writing a Scenario as a scenario file (chaos/README.md "Scenario files"):
// what the explorer's shrunk findings are saved as. ParseScenario reads it
// back to the same Scenario (chaos_scenario_file_test).

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "chaos/scenarios/scenario_file.h"

namespace redlock::chaos {
namespace {

// ---- Writing -------------------------------------------------------------------

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

std::string PropList(PropertySet set) {
  if (set == kAllProperties) return "all";
  std::vector<std::string> names;
  for (int p = 0; p < kNumHarnessProperties; ++p) {
    if (set & Prop(p)) names.push_back(HarnessPropertyName(p));
  }
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

std::string Ms(int64_t ms) { return Span::Ms(static_cast<double>(ms)).ToString(); }

void WriteFault(const FaultTemplate& t, const std::string& indent, bool first_dash,
                std::string* out) {
  absl::StrAppend(out, first_dash ? indent.substr(0, indent.size() - 2) + "- " : indent,
                  "fault: ", t.kind, "\n");
  if (!t.nodes.empty()) absl::StrAppend(out, indent, "nodes: ", t.nodes.ToString(false), "\n");
  if (!t.clients.empty()) absl::StrAppend(out, indent, "clients: ", t.clients.ToString(true), "\n");
  for (const auto& [name, v] : t.params)
    absl::StrAppend(out, indent, name, ": ", Quote(v.ToString()), "\n");
  if (t.until_end) {
    absl::StrAppend(out, indent, "for: run\n");
  } else if (t.duration_lo) {
    std::string d = t.duration_lo->ToString();
    if (t.duration_hi && !(*t.duration_hi == *t.duration_lo)) {
      absl::StrAppend(&d, "..", t.duration_hi->ToString());
    }
    absl::StrAppend(out, indent, "for: ", d, "\n");
  }
}

}  // namespace

std::string WriteScenario(const Scenario& s) {
  std::string out;
  absl::StrAppend(&out, "name: ", s.name, "\n");
  if (!s.config.empty()) absl::StrAppend(&out, "config: ", Quote(s.config), "\n");
  if (!s.summary.empty()) absl::StrAppend(&out, "summary: ", Quote(s.summary), "\n");
  if (s.quick) out += "quick: true\n";
  out += "expect:\n";
  if (s.expect.clean) absl::StrAppend(&out, "  clean: ", PropList(s.expect.clean), "\n");
  if (s.expect.violated_all)
    absl::StrAppend(&out, "  found: ", PropList(s.expect.violated_all), "\n");
  if (s.expect.violated_any) {
    absl::StrAppend(&out, "  found_any: ", PropList(s.expect.violated_any), "\n");
  }
  absl::StrAppend(&out, "  min_grants: ", s.expect.min_grants, "\n");
  const ScenarioSetup& u = s.setup;
  const ScenarioSetup d;
  out += "setup:\n";
  absl::StrAppend(&out, "  topology: ", TopologyName(u.topology), "\n");
  absl::StrAppend(&out, "  nodes: ", u.nodes, "\n");
  if (u.aof) out += "  aof: true\n";
  if (u.node_clock_shim) out += "  node_clock_shim: true\n";
  if (u.client_clock_shim) out += "  client_clock_shim: true\n";
  if (u.netns) out += "  netns: true\n";
  if (u.tls) out += "  tls: true\n";
  if (u.replicas) absl::StrAppend(&out, "  replicas: ", u.replicas, "\n");
  if (u.sentinels) absl::StrAppend(&out, "  sentinels: ", u.sentinels, "\n");
  if (u.stalled) absl::StrAppend(&out, "  stalled: ", u.stalled, "\n");
  if (!u.views.empty()) {
    std::vector<std::string> views;
    for (const auto& v : u.views) views.push_back(absl::StrCat("[", absl::StrJoin(v, ", "), "]"));
    absl::StrAppend(&out, "  views: [", absl::StrJoin(views, ", "), "]\n");
  }
  absl::StrAppend(&out, "  duration: ", Ms(absl::ToInt64Milliseconds(u.budget)), "\n");
  if (u.quiet >= absl::ZeroDuration()) {
    absl::StrAppend(&out, "  quiet: ", Ms(absl::ToInt64Milliseconds(u.quiet)), "\n");
  }
  out += "clients:\n";
  // Runs of equal clients are written once with a count.
  const ClientConfig def;
  for (size_t i = 0; i < u.clients.size();) {
    size_t j = i + 1;
    const std::string args = absl::StrJoin(ClientArgs(u.clients[i]), " ");
    while (j < u.clients.size() && absl::StrJoin(ClientArgs(u.clients[j]), " ") == args) ++j;
    const ClientConfig& c = u.clients[i];
    std::vector<std::string> fields;
    if (j - i > 1) fields.push_back(absl::StrCat("count: ", j - i));
    if (c.variant != def.variant)
      fields.push_back(absl::StrCat("client: ", VariantName(c.variant)));
    if (c.client != def.client) fields.push_back(absl::StrCat("client: ", Quote(c.client)));
    fields.push_back(absl::StrCat("resources: [", absl::StrJoin(c.resources, ", "), "]"));
    fields.push_back(absl::StrCat("ttl: ", Ms(c.ttl_ms)));
    fields.push_back(absl::StrCat("use: ", Ms(c.use_ms)));
    if (c.uses_per_lease != def.uses_per_lease) {
      fields.push_back(absl::StrCat("uses_per_lease: ", c.uses_per_lease));
    }
    fields.push_back(absl::StrCat("guard: ", Ms(c.guard_ms)));
    fields.push_back(absl::StrCat("think: ", Ms(c.think_ms)));
    if (c.pre_release_ms) fields.push_back(absl::StrCat("pre_release: ", Ms(c.pre_release_ms)));
    fields.push_back(absl::StrCat("retry: ", Ms(c.retry_ms)));
    fields.push_back(absl::StrCat("node_timeout: ", Ms(c.node_timeout_ms)));
    if (c.drift_factor != def.drift_factor) {
      fields.push_back(absl::StrCat("drift_factor: ", c.drift_factor));
    }
    if (c.drift_floor_ms != def.drift_floor_ms) {
      fields.push_back(absl::StrCat("drift_floor: ", Ms(c.drift_floor_ms)));
    }
    if (c.fencing) fields.push_back("fencing: true");
    if (c.fencing_shared_counter) fields.push_back("fencing_shared_counter: true");
    if (c.durability_replicas) {
      fields.push_back(absl::StrCat("durability: ", c.durability_replicas));
      fields.push_back(absl::StrCat("durability_timeout: ", Ms(c.durability_timeout_ms)));
    }
    if (!c.release) fields.push_back("release: false");
    if (c.inspect_nodes) fields.push_back("inspect_nodes: true");
    if (c.extend) fields.push_back("extend: true");
    if (c.primitive != def.primitive) {
      fields.push_back(absl::StrCat("primitive: ", PrimitiveName(c.primitive)));
    }
    if (c.shared) fields.push_back("shared: true");
    if (c.primitive == Primitive::kSemaphore)
      fields.push_back(absl::StrCat("permits: ", c.permits));
    if (c.wait_ms > 0) fields.push_back(absl::StrCat("wait: ", Ms(c.wait_ms)));
    if (c.place_ttl_ms > 0) fields.push_back(absl::StrCat("place_ttl: ", Ms(c.place_ttl_ms)));
    for (size_t k = 0; k < fields.size(); ++k) {
      absl::StrAppend(&out, k == 0 ? "  - " : "    ", fields[k], "\n");
    }
    i = j;
  }
  if (!s.schedule.empty()) out += "schedule:\n";
  for (const ScheduleEntry& e : s.schedule.entries) {
    const Trigger& t = e.trigger;
    std::vector<std::string> fields;
    switch (t.type) {
      case Trigger::Type::kAt:
        fields.push_back(absl::StrCat("at: ", t.at.ToString()));
        break;
      case Trigger::Type::kRepeat:
        fields.push_back(t.at == Span() ? "repeat: true"
                                        : absl::StrCat("repeat: {from: ", t.at.ToString(), "}"));
        break;
      case Trigger::Type::kOnMarker:
        fields.push_back(absl::StrCat("on: ", t.marker));
        if (t.client >= 0) fields.push_back(absl::StrCat("client: c", t.client + 1));
        if (t.lock_free) fields.push_back("lock_free: true");
        if (t.since_start) fields.push_back("since_start: true");
        if (t.within) fields.push_back(absl::StrCat("within: ", t.within->ToString()));
        if (!t.otherwise_heal.empty() || t.retry_within || t.always) {
          std::vector<std::string> o;
          if (!t.otherwise_heal.empty()) {
            o.push_back(absl::StrCat("heal: [", absl::StrJoin(t.otherwise_heal, ", "), "]"));
          }
          if (t.retry_within) o.push_back(absl::StrCat("within: ", t.retry_within->ToString()));
          if (t.always) o.push_back("always: true");
          fields.push_back(absl::StrCat("otherwise: {", absl::StrJoin(o, ", "), "}"));
        }
        if (!(t.delay == Span())) fields.push_back(absl::StrCat("delay: ", t.delay.ToString()));
        break;
    }
    if (t.type != Trigger::Type::kAt) {
      if (t.times) fields.push_back(absl::StrCat("times: ", t.times));
      if (!(t.settle == Span())) fields.push_back(absl::StrCat("settle: ", t.settle.ToString()));
      if (t.type == Trigger::Type::kRepeat && !(t.gap_lo == Span() && t.gap_hi == Span())) {
        fields.push_back(
            absl::StrCat("gap: ", t.gap_lo.ToString(),
                         t.gap_hi == t.gap_lo ? "" : absl::StrCat("..", t.gap_hi.ToString())));
      }
      if (t.until) {
        fields.push_back(absl::StrCat(t.until_any ? "until_any: " : "until: ", PropList(t.until)));
      }
    }
    if (t.after >= 0) fields.push_back(absl::StrCat("after: ", t.after + 1));
    if (e.pick == ScheduleEntry::Pick::kOne) fields.push_back("pick: one");
    if (e.pick == ScheduleEntry::Pick::kCycle) fields.push_back("pick: cycle");
    for (size_t k = 0; k < fields.size(); ++k) {
      absl::StrAppend(&out, k == 0 ? "  - " : "    ", fields[k], "\n");
    }
    if (e.faults.size() == 1 && e.pick == ScheduleEntry::Pick::kAll) {
      WriteFault(e.faults[0], "    ", false, &out);
    } else {
      out += "    faults:\n";
      for (const FaultTemplate& f : e.faults) WriteFault(f, "        ", true, &out);
    }
  }
  return out;
}

}  // namespace redlock::chaos
