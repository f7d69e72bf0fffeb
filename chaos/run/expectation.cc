// Expectations, verdicts, the S5 rule and the shape of a scenario.

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chaos/run/scenario.h"

namespace redlock::chaos {
namespace {

std::string Props(PropertySet set, absl::string_view sep) {
  std::vector<std::string> names;
  for (int p = 0; p < kNumHarnessProperties; ++p) {
    if (set & Prop(p)) names.push_back(HarnessPropertyName(p));
  }
  return absl::StrJoin(names, sep);
}

std::string Shorten(std::string s, size_t n) {
  if (s.size() <= n) return s;
  s.resize(n - 3);
  return s + "...";
}

constexpr PropertySet kSafety =
    Prop(kS1) | Prop(kS2) | Prop(kS3) | Prop(kS4) | Prop(kS5) | Prop(kS6) | Prop(kS7) | Prop(kS9);

}  // namespace

std::string Expectation::Describe() const {
  std::vector<std::string> parts;
  if (violated_all) parts.push_back(absl::StrCat(Props(violated_all, "+"), " found"));
  if (violated_any) parts.push_back(absl::StrCat(Props(violated_any, "|"), " found"));
  if ((clean & kSafety) == kSafety && !violated_all && !violated_any) {
    parts.push_back((clean & Prop(kL1)) ? "clean, L1 clean" : "clean");
  } else if (clean) {
    parts.push_back(absl::StrCat(Props(clean, ","), " clean"));
  }
  return absl::StrJoin(parts, "; ");
}

Expectation ExpectClean() {
  Expectation e;
  e.clean = kSafety;
  return e;
}

bool JudgeExpectation(const Expectation& e, const Violations& v, int64_t grants, std::string* why) {
  std::vector<std::string> problems;
  for (int p = 0; p < kNumHarnessProperties; ++p) {
    if ((e.clean & Prop(p)) && v[static_cast<size_t>(p)] > 0) {
      problems.push_back(
          absl::StrCat(HarnessPropertyName(p), " violated in a configuration documented as safe"));
    }
    if ((e.violated_all & Prop(p)) && v[static_cast<size_t>(p)] == 0) {
      problems.push_back(absl::StrCat(
          HarnessPropertyName(p), " expected but not found (checker too weak or fault missed)"));
    }
  }
  if (e.violated_any) {
    bool any = false;
    for (int p = 0; p < kNumHarnessProperties; ++p) {
      any = any || ((e.violated_any & Prop(p)) && v[static_cast<size_t>(p)] > 0);
    }
    if (!any) {
      problems.push_back(absl::StrCat("none of ", Props(e.violated_any, ","),
                                      " found (checker too weak or fault missed)"));
    }
  }
  if (grants < e.min_grants) {
    problems.push_back(absl::StrCat("only ", grants, " grants (at least ", e.min_grants,
                                    " needed to test anything)"));
  }
  if (why != nullptr) *why = absl::StrJoin(problems, "; ");
  return problems.empty();
}

std::vector<LeftoverKey> FailedAttemptLeftovers(const std::vector<KeyState>& keys,
                                                const std::vector<std::string>& grant_tokens) {
  std::set<std::string> tokens(grant_tokens.begin(), grant_tokens.end());
  std::vector<LeftoverKey> out;
  for (const KeyState& k : keys) {
    if (k.pttl_ms == -2) continue;  // missing
    if (tokens.count(k.value)) continue;
    out.push_back(
        {k, absl::StrCat("n", k.node, " still holds \"", k.key, "\" = ", Shorten(k.value, 16),
                         " (no grant has this token: a failed attempt's key left behind; pttl ",
                         k.pttl_ms, " ms)")});
  }
  return out;
}

RunShape ShapeOf(const ScenarioSetup& setup) {
  RunShape s;
  s.nodes = setup.nodes;
  s.clients = static_cast<int>(setup.clients.size());
  s.topology = setup.topology;
  s.netns = setup.netns || setup.topology == Topology::kNamespace;
  s.partial_views = !setup.views.empty();
  s.aof = setup.aof;
  s.node_clock_shim = setup.node_clock_shim;
  s.client_clock_shim = setup.client_clock_shim;
  s.tls = setup.tls;
  s.replicas = setup.replicas;
  s.sentinels = setup.sentinels;
  s.fencing = !setup.clients.empty();
  s.durability = !setup.clients.empty();
  for (const ClientConfig& c : setup.clients) {
    s.fencing = s.fencing && c.fencing;
    s.durability = s.durability && c.durability_replicas > 0;
    s.extends = s.extends || c.extend;
    s.permits = s.permits || c.primitive == Primitive::kSemaphore;
    s.leaders = s.leaders || c.primitive == Primitive::kElection;
    s.external_client = s.external_client || c.client != "library";
  }
  if (!setup.clients.empty()) {
    const ClientConfig& c = setup.clients[0];
    s.scale = {
        .ttl_ms = c.ttl_ms, .drift_factor = c.drift_factor, .drift_floor_ms = c.drift_floor_ms};
    s.node_timeout = absl::Milliseconds(c.node_timeout_ms);
    s.guard = absl::Milliseconds(c.guard_ms);
  }
  return s;
}

absl::Status ValidateScenario(const Scenario& sc) {
  const ScenarioSetup& u = sc.setup;
  auto bad = [](absl::string_view why) { return absl::InvalidArgumentError(why); };
  if (u.clients.empty()) return bad("at least one client");
  if (u.replicas > 0 && u.topology != Topology::kPerClientProxies &&
      u.topology != Topology::kSentinelDiscovery) {
    return bad(
        "replicated nodes (replicas) need topology per-client-proxies or sentinel-discovery");
  }
  if (u.topology == Topology::kSentinelDiscovery && (u.replicas == 0 || u.sentinels == 0)) {
    return bad("sentinel-discovery needs replicas and sentinels");
  }
  if (u.sentinels > 0 && u.replicas == 0)
    return bad("sentinels watch replicated nodes: set replicas");
  if (u.stalled > 0 && u.replicas == 0) return bad("stalled needs replicas");
  if (!u.views.empty() && u.topology != Topology::kPerClientProxies) {
    return bad("views need topology per-client-proxies");
  }
  if (u.views.size() > u.clients.size()) return bad("more views than clients");
  if (u.tls && u.replicas > 0) return bad("TLS nodes with replicas are not supported yet");
  if (u.budget <= absl::ZeroDuration()) return bad("duration must be positive");
  return ValidateSchedule(sc.schedule, ShapeOf(u));
}

std::string ProgressLine(const ScenarioResult& r) {
  std::string counts;
  for (int p = 0; p < kNumHarnessProperties; ++p) {
    absl::StrAppend(&counts, p > 0 ? "/" : "", r.violations[static_cast<size_t>(p)]);
  }
  return absl::StrFormat("%s (%.1fs, %d ops, S1-S5,L1,S6,S7,S9 %s)%s%s",
                         r.skipped ? "SKIP"
                         : r.ok    ? "OK"
                                   : "FAIL",
                         absl::ToDoubleSeconds(r.elapsed), r.counts.invokes, counts,
                         r.why.empty() ? "" : ": ", r.why);
}

}  // namespace redlock::chaos
