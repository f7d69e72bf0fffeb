#include "sim/case_file.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace redlock::sim {
namespace {

using json = nlohmann::ordered_json;

std::string TargetText(const chaos::TargetSel& t, bool clients) { return t.ToString(clients); }

json FaultJson(const FaultEvent& e) {
  json j;
  j["at_ms"] = e.at_ms;
  if (!e.marker.empty()) j["marker"] = e.marker;
  j["kind"] = e.fault.kind;
  if (!e.fault.nodes.empty()) j["nodes"] = TargetText(e.fault.nodes, false);
  if (!e.fault.clients.empty()) j["clients"] = TargetText(e.fault.clients, true);
  json params = json::object();
  for (const auto& [name, v] : e.fault.params) params[name] = v.ToString();
  if (!params.empty()) j["params"] = params;
  if (e.fault.until_end) {
    j["duration"] = "until_end";
  } else if (e.fault.duration_lo) {
    j["duration"] = e.fault.duration_lo->ToString();
  }
  return j;
}

absl::StatusOr<FaultEvent> ParseFault(const json& j) {
  FaultEvent e;
  if (!j.is_object() || !j.contains("kind") || !j.contains("at_ms")) {
    return absl::InvalidArgumentError("a fault needs \"kind\" and \"at_ms\"");
  }
  e.at_ms = j["at_ms"].get<int64_t>();
  if (j.contains("marker")) e.marker = j["marker"].get<std::string>();
  e.fault.kind = j["kind"].get<std::string>();
  if (j.contains("nodes")) {
    absl::StatusOr<chaos::TargetSel> t =
        chaos::TargetSel::Parse(j["nodes"].get<std::string>(), false);
    if (!t.ok()) return t.status();
    e.fault.nodes = *t;
  }
  if (j.contains("clients")) {
    absl::StatusOr<chaos::TargetSel> t =
        chaos::TargetSel::Parse(j["clients"].get<std::string>(), true);
    if (!t.ok()) return t.status();
    e.fault.clients = *t;
  }
  if (j.contains("params")) {
    for (const auto& [name, v] : j["params"].items()) {
      e.fault.params[name] = chaos::ParamText::Parse(v.get<std::string>());
    }
  }
  if (j.contains("duration")) {
    const std::string d = j["duration"].get<std::string>();
    if (d == "until_end") {
      e.fault.until_end = true;
    } else {
      absl::StatusOr<chaos::Span> s = chaos::Span::Parse(d);
      if (!s.ok()) return s.status();
      e.fault.duration_lo = *s;
      e.fault.duration_hi = *s;
    }
  }
  absl::Status v = chaos::ValidateTemplate(e.fault);
  if (!v.ok()) return v;
  return e;
}

}  // namespace

std::string WriteCase(const SimCase& c) {
  json j;
  j["seed"] = c.input.seed;
  if (!c.property.empty()) j["property"] = c.property;
  if (!c.summary.empty()) j["summary"] = c.summary;
  json config = json::object();
  for (const auto& [name, value] : ConfigFields(c.input.config)) config[name] = value;
  j["config"] = config;
  json faults = json::array();
  for (const FaultEvent& e : c.input.faults) faults.push_back(FaultJson(e));
  j["faults"] = faults;
  return j.dump(2) + "\n";
}

absl::StatusOr<SimCase> ParseCase(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("case file: not a JSON object");
  }
  SimCase c;
  if (!j.contains("seed") || !j["seed"].is_number_unsigned()) {
    return absl::InvalidArgumentError("case file: \"seed\" (an unsigned integer) is required");
  }
  c.input.seed = j["seed"].get<uint64_t>();
  if (j.contains("property")) c.property = j["property"].get<std::string>();
  if (j.contains("summary")) c.summary = j["summary"].get<std::string>();
  if (!j.contains("config") || !j["config"].is_object()) {
    return absl::InvalidArgumentError("case file: \"config\" (an object) is required");
  }
  for (const auto& [name, v] : j["config"].items()) {
    absl::Status s =
        SetConfigField(name, v.is_string() ? v.get<std::string>() : v.dump(), &c.input.config);
    if (!s.ok()) return s;
  }
  absl::Status valid = CheckConfig(c.input.config);
  if (!valid.ok()) return valid;
  if (j.contains("faults")) {
    for (const json& f : j["faults"]) {
      absl::StatusOr<FaultEvent> e = ParseFault(f);
      if (!e.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("case file: fault: ", e.status().message()));
      }
      c.input.faults.push_back(*std::move(e));
    }
  }
  return c;
}

absl::StatusOr<SimCase> ReadCaseFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<SimCase> c = ParseCase(ss.str());
  if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", c.status().message()));
  return c;
}

// ---- As a lab scenario -------------------------------------------------------------------

absl::StatusOr<chaos::Scenario> ToScenario(const SimCase& c) {
  const SimConfig& cfg = c.input.config;
  auto no = [](auto&&... why) {
    return absl::FailedPreconditionError(absl::StrCat("the lab cannot run it: ", why...));
  };
  for (const NodeConfig& n : cfg.nodes) {
    if (n.members > 0) return no("a Redis Cluster node");
    if (n.scripting != Scripting::kScripts) return no("a node that forbids scripting");
    if (n.replicas != cfg.nodes[0].replicas) return no("nodes with different replica counts");
    if (n.aof != cfg.nodes[0].aof) return no("nodes with and without persistence");
  }
  if (cfg.primitive == Primitive::kMultiLock)
    return no("MultiLock (the lab's clients lock one resource)");
  if (cfg.fencing_lost_counters > 0) return no("fencing_lost_counters");
  if (cfg.quorum != 0) return no("a quorum other than the majority");
  if (cfg.renew) return no("AutoRenew (the lab's clients extend by hand)");
  if (cfg.durability_fsync) return no("durability.fsync");
  if (cfg.fair_jumpers > 0) return no("clients that skip the fair lock's queue (a test's)");
  if (cfg.primitive == Primitive::kFair && !cfg.notifications) {
    return no("a fair lock without notifications (the lab's fair clients always listen)");
  }
  chaos::Scenario s;
  s.name = absl::StrCat("sim-", c.property.empty() ? "case" : c.property, "-", c.input.seed);
  s.config = DescribeConfig(cfg);
  s.summary = absl::StrCat("Found by redlock-sim (seed ", c.input.seed,
                           "): ", c.summary.empty() ? c.property : c.summary,
                           ". Replay in the simulator: redlock-sim --replay <its case file>.");
  s.setup.nodes = static_cast<int>(cfg.nodes.size());
  s.setup.aof = cfg.nodes[0].aof;
  s.setup.replicas = cfg.nodes[0].replicas;
  s.setup.tls =
      std::all_of(cfg.nodes.begin(), cfg.nodes.end(), [](const NodeConfig& n) { return n.tls; });
  s.setup.budget = absl::Milliseconds(cfg.duration_ms);
  bool proxies = false, links = false, netns = false;
  for (const FaultEvent& e : c.input.faults) {
    const chaos::FaultKind* k = chaos::FindFaultKind(e.fault.kind);
    if (k == nullptr) return no("an unknown fault kind ", e.fault.kind);
    const std::string& f = k->info().family;
    if (e.fault.kind == "slot_migration") return no("a slot migration");
    if (e.fault.kind == "partition") netns = true;
    if (e.fault.kind == "link_down" || e.fault.kind == "failover") links = true;
    if (f == "network" && e.fault.kind != "partition" && e.fault.kind != "link_down") {
      proxies = true;
    }
    if (f == "clock") s.setup.node_clock_shim = true;
    if (e.fault.kind == "client_clock_jump") s.setup.client_clock_shim = true;
  }
  if ((proxies ? 1 : 0) + (links ? 1 : 0) + (netns ? 1 : 0) > 1) {
    return no("faults that need different topologies (proxies, per-client links, a namespace)");
  }
  s.setup.topology = netns     ? chaos::Topology::kNamespace
                     : links   ? chaos::Topology::kPerClientProxies
                     : proxies ? chaos::Topology::kSharedProxies
                               : chaos::Topology::kDirect;
  for (int k = 0; k < cfg.clients; ++k) {
    chaos::ClientConfig cc;
    cc.name = absl::StrCat("c", k + 1);
    for (int r = 0; r < cfg.resources; ++r) {
      cc.resources.push_back(absl::StrCat(cfg.primitive == Primitive::kSemaphore ? "s" : "r", r));
    }
    if (cc.resources.empty()) cc.resources = {"r0"};
    cc.ttl_ms = cfg.ttl_ms;
    cc.use_ms = cfg.use_ms;
    cc.uses_per_lease = cfg.uses_per_lease;
    cc.guard_ms = cfg.guard_ms;
    cc.think_ms = cfg.think_ms;
    cc.pre_release_ms = cfg.pre_release_ms;
    cc.retry_ms = cfg.retry_ms;
    cc.node_timeout_ms = cfg.node_timeout_ms;
    cc.drift_factor = cfg.drift_factor;
    cc.fencing = cfg.fencing;
    cc.fencing_shared_counter = cfg.shared_counter;
    cc.durability_replicas = cfg.durability_replicas;
    cc.durability_timeout_ms = cfg.durability_timeout_ms;
    cc.release = cfg.release;
    cc.extend = cfg.extend;
    cc.wait_ms = cfg.wait_ms;
    switch (cfg.primitive) {
      case Primitive::kRwLock:
        cc.primitive = chaos::Primitive::kRwLock;
        cc.shared = k < cfg.readers;
        break;
      case Primitive::kSemaphore:
        cc.primitive = chaos::Primitive::kSemaphore;
        cc.permits = cfg.permits;
        break;
      case Primitive::kElection:
        cc.primitive = chaos::Primitive::kElection;
        break;
      case Primitive::kFair:
        cc.primitive = chaos::Primitive::kFair;
        cc.place_ttl_ms = cfg.place_ttl_ms;
        break;
      default:
        cc.primitive = chaos::Primitive::kMutex;
    }
    s.setup.clients.push_back(cc);
  }
  for (const FaultEvent& e : c.input.faults) {
    chaos::ScheduleEntry entry;
    entry.trigger.at = chaos::Span::Ms(static_cast<double>(e.at_ms));
    if (!e.marker.empty()) {
      entry.trigger.type = chaos::Trigger::Type::kOnMarker;
      entry.trigger.marker = e.marker;
      entry.trigger.times = 1;
      entry.trigger.within =
          chaos::Span::Ms(static_cast<double>(std::max<int64_t>(100, cfg.duration_ms - e.at_ms)));
    }
    entry.faults.push_back(e.fault);
    s.schedule.entries.push_back(std::move(entry));
  }
  s.expect.clean = 0;
  const int p = chaos::ParseHarnessProperty(c.property);
  if (p < 0) return no("the property ", c.property, " is the simulator's own");
  s.expect.clean = chaos::Prop(p);
  s.expect.min_grants = 1;
  absl::Status v = chaos::ValidateScenario(s);
  if (!v.ok()) return no(v.message());
  return s;
}

// ---- Shrinking -------------------------------------------------------------------------

SimCase Shrink(const SimCase& c, const std::function<bool(const RunInput&)>& still_fails,
               int max_runs, ShrinkLog* log) {
  SimCase cur = c;
  auto attempt = [&](const RunInput& candidate, const std::string& change) {
    if (log->runs >= max_runs) return false;
    if (!CheckConfig(candidate.config).ok()) return false;
    ++log->runs;
    const bool kept = still_fails(candidate);
    log->steps.push_back(absl::StrCat(kept ? "kept:   " : "undone: ", change));
    if (kept) cur.input = candidate;
    return kept;
  };
  // Faults, the last first.
  for (size_t i = cur.input.faults.size(); i-- > 0 && log->runs < max_runs;) {
    RunInput in = cur.input;
    const std::string what = chaos::DescribeTemplate(in.faults[i].fault);
    in.faults.erase(in.faults.begin() + static_cast<long>(i));
    attempt(in, absl::StrCat("dropped ", what));
  }
  // A shorter run: up to a second after the last fault ends.
  {
    int64_t last = 1000;
    for (const FaultEvent& e : cur.input.faults) {
      int64_t end = e.at_ms;
      if (e.fault.duration_lo) end += static_cast<int64_t>(e.fault.duration_lo->ms);
      last = std::max(last, end);
    }
    for (int i = 0; i < 6 && log->runs < max_runs; ++i) {
      RunInput in = cur.input;
      const int64_t shorter = std::max(last + 2000, in.config.duration_ms / 2);
      if (shorter >= in.config.duration_ms) break;
      in.config.duration_ms = shorter;
      if (!attempt(in, absl::StrCat("run of ", shorter, "ms"))) break;
    }
  }
  // Fewer clients, resources, nodes.
  for (int i = 0; i < 4 && cur.input.config.clients > 1 && log->runs < max_runs; ++i) {
    RunInput in = cur.input;
    --in.config.clients;
    in.config.readers = std::min(in.config.readers, in.config.clients);
    // Faults on the client that goes are dropped with it.
    std::vector<FaultEvent> kept;
    for (FaultEvent e : in.faults) {
      if (e.fault.clients.mode == chaos::TargetSel::Mode::kList) {
        std::vector<int> l;
        for (int k : e.fault.clients.list) {
          if (k < in.config.clients) l.push_back(k);
        }
        if (l.empty()) continue;
        e.fault.clients.list = l;
      }
      kept.push_back(std::move(e));
    }
    in.faults = std::move(kept);
    if (!attempt(in, absl::StrCat(in.config.clients, " clients"))) break;
  }
  for (int i = 0; i < 4 && cur.input.config.resources > 1 && log->runs < max_runs; ++i) {
    RunInput in = cur.input;
    --in.config.resources;
    in.config.set_size = std::min(in.config.set_size, in.config.resources);
    if (!attempt(in, absl::StrCat(in.config.resources, " resources"))) break;
  }
  for (int i = 0; i < 6 && cur.input.config.nodes.size() > 1 && log->runs < max_runs; ++i) {
    RunInput in = cur.input;
    in.config.nodes.pop_back();
    const int n = static_cast<int>(in.config.nodes.size());
    if (in.config.quorum > n || (in.config.quorum != 0 && in.config.quorum <= n / 2)) {
      in.config.quorum = 0;
    }
    in.config.fencing_lost_counters = std::min(in.config.fencing_lost_counters, n - 1);
    std::vector<FaultEvent> kept;
    for (FaultEvent e : in.faults) {
      if (e.fault.nodes.mode == chaos::TargetSel::Mode::kList) {
        std::vector<int> l;
        for (int v : e.fault.nodes.list) {
          if (v < n) l.push_back(v);
        }
        if (l.empty()) continue;
        e.fault.nodes.list = l;
      }
      kept.push_back(std::move(e));
    }
    in.faults = std::move(kept);
    if (!attempt(in, absl::StrCat(n, " nodes"))) break;
  }
  // Shorter faults.
  for (size_t i = 0; i < cur.input.faults.size() && log->runs < max_runs; ++i) {
    for (int h = 0; h < 6 && log->runs < max_runs; ++h) {
      const FaultEvent& f = cur.input.faults[i];
      if (!f.fault.duration_lo || f.fault.duration_lo->ms < 40) break;
      RunInput in = cur.input;
      chaos::FaultTemplate& g = in.faults[i].fault;
      g.duration_lo = chaos::Span::Ms(std::round(g.duration_lo->ms / 2));
      g.duration_hi = g.duration_lo;
      if (!attempt(in, absl::StrCat("halved ", chaos::DescribeTemplate(f.fault)))) break;
    }
  }
  return cur;
}

}  // namespace redlock::sim
