#include "chaos/explore/explore.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chaos/base/cleanup.h"
#include "chaos/faults/fault_draw.h"
#include "chaos/faults/partition.h"
#include "chaos/plot/plot.h"
#include "chaos/run/schedule.h"
#include "chaos/scenarios/scenario_file.h"
#include "testkit/replication.h"

namespace redlock::chaos {
namespace {

uint64_t Draw(std::mt19937_64& rng, uint64_t lo, uint64_t hi) {
  if (hi <= lo) return lo;
  return lo + rng() % (hi - lo + 1);
}

// The presets run their nodes with AOF always and draw clock jumps mostly
// within the drift allowance: faults outside the documented model (a node
// forgetting a lock, a clock leaping past a lease) explain any violation of
// mutual exclusion, so a run full of them can find nothing; the catalog
// shows those cases one by one.
//
// The workload of an explored run: one hot resource and a second one, short
// uses, a short pause before each release (where a stalled release would
// hurt a client that releases carelessly), leases long enough that a
// failed attempt's keys outlive the quiet tail.
//
// In the direct and proxied presets the first client holds each lease
// until its own reckoning of the validity says stop (LongHolder), as code
// that does a long job under one lease does: a client that overrates its
// validity (an acquisition's elapsed time not subtracted, validity measured
// on a clock that jumps) then uses a lease that has run out, where the
// short users, done within 100 ms of a 2 s lease, never come near its end.
// The other pauses (guard, think, retry) and the node timeout are
// ClientConfig's.
ClientConfig Worker(int64_t ttl_ms) {
  ClientConfig c;
  c.resources = {"r0", "r1"};
  c.ttl_ms = ttl_ms;
  c.use_ms = 30;
  c.uses_per_lease = 2;
  c.pre_release_ms = 30;
  return c;
}

// Uses of 30 ms, as many as the lease's validity allows (a use needs its
// duration plus the guard left).
ClientConfig LongHolder(ClientConfig c) {
  c.uses_per_lease = 100;
  return c;
}

// A client of the presets with one master and its replica: uses of 100 ms,
// `uses` per lease, and 200 ms for a node's answer.
ClientConfig ReplicatedWorker(int uses) {
  ClientConfig c = Worker(2000);
  c.use_ms = 100;
  c.uses_per_lease = uses;
  c.node_timeout_ms = 200;
  return c;
}

// `name` as the client under test: a broken variant or an external client.
void SetClientUnderTest(std::vector<ClientConfig>& clients, const std::string& name) {
  if (name.empty() || name == "library") return;
  absl::StatusOr<ClientVariant> v = ParseVariant(name);
  for (ClientConfig& c : clients) {
    if (v.ok()) {
      c.variant = *v;
    } else {
      // An external client: fencing and the durability vote are this
      // library's.
      c.client = name;
      c.fencing = false;
      c.durability_replicas = 0;
    }
  }
}

struct Preset {
  std::string name;
  std::string description;
  bool root = false;
  std::function<Scenario()> make;
};

const std::vector<Preset>& Presets() {
  static const std::vector<Preset>* presets = new std::vector<Preset>{
      {"direct", "N=5, clients reach the nodes directly; node and client clocks shimmed", false,
       [] {
         Scenario s;
         s.setup.topology = Topology::kDirect;
         s.setup.aof = true;
         s.setup.node_clock_shim = true;
         s.setup.client_clock_shim = true;
         s.setup.clients = std::vector<ClientConfig>(3, Worker(2000));
         s.setup.clients[0] = LongHolder(s.setup.clients[0]);
         return s;
       }},
      {"proxied", "N=5 behind one fault proxy each (latency, black holes, holds, resets)", false,
       [] {
         Scenario s;
         s.setup.topology = Topology::kSharedProxies;
         s.setup.aof = true;
         s.setup.node_clock_shim = true;
         s.setup.clients = std::vector<ClientConfig>(3, Worker(2000));
         for (ClientConfig& c : s.setup.clients) c.extend = true;
         s.setup.clients[0] = LongHolder(s.setup.clients[0]);
         return s;
       }},
      {"overlap", "N=5, per-client links, views {n0,n1,n2}|{n2,n3,n4} (n2 alone keeps them apart)",
       false,
       [] {
         Scenario s;
         s.setup.topology = Topology::kPerClientProxies;
         s.setup.views = {{0, 1, 2}, {2, 3, 4}};
         s.setup.aof = true;
         s.setup.node_clock_shim = true;
         s.setup.clients = std::vector<ClientConfig>(2, Worker(2000));
         return s;
       }},
      {"namespace", "N=5 in a private network namespace, nft partitions (root)", true,
       [] {
         Scenario s;
         s.setup.topology = Topology::kNamespace;
         s.setup.aof = true;
         s.setup.clients = std::vector<ClientConfig>(3, Worker(2000));
         return s;
       }},
      {"replicated",
       "one master with one replica, per-client links re-pointed on failover; clients hold "
       "for a while, extend, fence and use the durability vote (WAIT 1)",
       false,
       [] {
         Scenario s;
         s.setup.topology = Topology::kPerClientProxies;
         s.setup.nodes = 1;
         s.setup.replicas = 1;
         ClientConfig c = ReplicatedWorker(15);
         c.extend = true;
         c.fencing = true;
         c.durability_replicas = 1;
         c.durability_timeout_ms = 100;
         s.setup.clients = std::vector<ClientConfig>(2, c);
         return s;
       }},
      {"sentinel",
       "N=1, a master with one replica watched by 3 Sentinels, clients on redis+sentinel:// in "
       "a private namespace (root)",
       true,
       [] {
         Scenario s;
         s.setup.topology = Topology::kSentinelDiscovery;
         s.setup.netns = true;
         s.setup.nodes = 1;
         s.setup.replicas = 1;
         s.setup.sentinels = 3;
         ClientConfig c = ReplicatedWorker(5);
         s.setup.clients = std::vector<ClientConfig>(2, c);
         return s;
       }},
  };
  return *presets;
}

// Whether a violation of `property` by `processes` during [t, t_end] (raw
// clock; 0: the run as a whole) is explained by the faults of `r`: a fault
// that may break that property, acting on the whole run or on one of the
// violation's processes, and acting at the time: between its start and one
// lease (plus a second) after its end, since a forgotten key or a stale
// clock matters only while the lease it concerns lasts. A violation without
// processes or time (a final counter short, S5, L1) is explained by any fault
// that may break its property.
bool Explained(const ScenarioResult& r, int property, const std::vector<std::string>& processes,
               int64_t t = 0, int64_t t_end = 0) {
  const int64_t reach = (r.max_ttl_ms + 1000) * 1000000;
  for (const ScenarioResult::InjectedFault& f : r.injected_faults) {
    // A client's fault breaks what it may only if its client held the lock
    // when it began (the history says, to the nanosecond).
    bool holding = f.scope.empty();
    for (const ScenarioResult::Hold& h : r.holds) {
      if (holding) break;
      holding = std::find(f.scope.begin(), f.scope.end(), h.process) != f.scope.end() &&
                h.from <= f.begin_raw && f.begin_raw <= h.to;
    }
    if (!((holding ? f.may_violate : f.may_violate_idle) & Prop(property))) continue;
    if (t != 0 && (f.begin_raw > t_end || f.end_raw + reach < t)) continue;
    if (f.scope.empty() || processes.empty()) return true;
    for (const std::string& c : f.scope) {
      if (std::find(processes.begin(), processes.end(), c) != processes.end()) return true;
    }
  }
  return false;
}

}  // namespace

PropertySet Unexplained(const ScenarioResult& r) {
  PropertySet out = 0;
  for (const ScenarioResult::ViolationRef& v : r.violation_refs) {
    if (!Explained(r, v.property, v.processes, v.t, v.t_end)) out |= Prop(v.property);
  }
  for (int p : {kS5, kL1}) {
    if (r.violations[static_cast<size_t>(p)] > 0 && !Explained(r, p, {})) out |= Prop(p);
  }
  return out;
}

namespace {

std::string Seconds(absl::Duration d) { return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d)); }

}  // namespace

std::vector<std::string> TopologyPresets() {
  std::vector<std::string> out;
  for (const Preset& p : Presets()) out.push_back(p.name);
  return out;
}

absl::StatusOr<Scenario> TopologyPreset(const std::string& name, absl::Duration budget,
                                        const std::string& client) {
  for (const Preset& p : Presets()) {
    if (p.name != name) continue;
    Scenario s = p.make();
    s.name = absl::StrCat("explore-", name);
    s.config = p.description;
    s.setup.budget = budget;
    // A short quiet tail: a failed attempt's keys left behind are still
    // there when S5 looks.
    s.setup.quiet = absl::Milliseconds(200);
    SetClientUnderTest(s.setup.clients, client);
    return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no topology \"", name, "\"; known: ", absl::StrJoin(TopologyPresets(), ", ")));
}

std::vector<const FaultKind*> ExplorableKinds(const RunShape& shape) {
  std::vector<const FaultKind*> out;
  for (const FaultKind* k : AllFaultKinds()) {
    if (k->info().explore_weight > 0 && k->Unsupported(shape).empty()) out.push_back(k);
  }
  return out;
}

Schedule GenerateSchedule(const RunShape& shape, absl::Duration budget, std::mt19937_64& rng,
                          const std::vector<std::string>& only) {
  std::vector<const FaultKind*> kinds;
  for (const FaultKind* k : ExplorableKinds(shape)) {
    if (only.empty() || std::find(only.begin(), only.end(), k->name()) != only.end()) {
      kinds.push_back(k);
    }
  }
  Schedule out;
  if (kinds.empty()) return out;
  const int total_weight = TotalExploreWeight(kinds);
  const SpanScale scale = shape.scale;
  const int64_t budget_ms = absl::ToInt64Milliseconds(budget);
  // Waves: 1-3 faults starting within 300 ms of each other, then a pause of
  // 0.3-1.5 s after the wave's last heal, until the budget's last second.
  int64_t t = static_cast<int64_t>(Draw(rng, 200, 800));
  std::set<int> failed_over;  // a node fails over at most once per run
  for (int wave = 0; wave < 100 && t < budget_ms - 1000; ++wave) {
    const int n = static_cast<int>(Draw(rng, 1, 3));
    int64_t wave_end = t;
    for (int i = 0; i < n; ++i) {
      const KindInfo& info =
          PickByWeight(kinds,
                       static_cast<int>(Draw(rng, 0, static_cast<uint64_t>(total_weight - 1))))
              ->info();
      const FaultTemplate tmpl = ExploreTemplate(info);
      const int64_t start = t + static_cast<int64_t>(Draw(rng, 0, 300));
      absl::StatusOr<FaultInstance> f =
          ResolveTemplate(tmpl, shape.nodes, shape.clients, scale, -1, rng);
      if (!f.ok() || FailsOverAgain(*f, &failed_over)) continue;
      // One lasting fault in eight lasts the run: the recovery check
      // (L1) then judges the run with them in place when the configuration
      // must tolerate them (one stale Sentinel, a minority of nodes down),
      // and after their heal otherwise.
      if (info.lasting && Draw(rng, 0, 7) == 0) {
        f->duration = absl::InfiniteDuration();
        wave_end = std::max(wave_end, start);
      } else if (info.lasting) {
        // Otherwise it ends before the budget does.
        wave_end = std::max(wave_end, EndBeforeBudget(start, budget_ms, &*f));
      } else {
        wave_end = std::max(wave_end, start);
      }
      ScheduleEntry e;
      e.trigger.type = Trigger::Type::kAt;
      e.trigger.at = Span::Ms(static_cast<double>(start));
      // One fault in three waits for the next marker of some client from
      // its time on (a grant, a read, the end of a use, an attempt, an
      // extension, a release): faults land inside the clients' operations,
      // not only between them.
      if (Draw(rng, 0, 2) == 0) {
        std::vector<const char*> markers = {"grant", "use_read", "use_end", "invoke", "release"};
        if (shape.extends) markers.push_back("extend");
        e.trigger.type = Trigger::Type::kOnMarker;
        e.trigger.marker = markers[Draw(rng, 0, markers.size() - 1)];
        e.trigger.times = 1;
        e.trigger.within = Span::Ms(static_cast<double>(std::max<int64_t>(100, budget_ms - start)));
      }
      FaultTemplate concrete = ConcreteTemplate(*f);
      // A client's fault triggered by a marker acts on that marker's client.
      if (e.trigger.type == Trigger::Type::kOnMarker && info.takes_clients && !info.takes_nodes) {
        concrete.clients = TargetSel{TargetSel::Mode::kMarker, {}, 1, 1};
      }
      e.faults.push_back(std::move(concrete));
      out.entries.push_back(std::move(e));
    }
    t = wave_end + static_cast<int64_t>(Draw(rng, 300, 1500));
  }
  std::stable_sort(out.entries.begin(), out.entries.end(),
                   [](const ScheduleEntry& a, const ScheduleEntry& b) {
                     return a.trigger.at.ms < b.trigger.at.ms;
                   });
  return out;
}

PropertySet DocumentedSafe(PropertySet may_violate) { return kAllProperties & ~may_violate; }

Schedule Shrink(const Schedule& schedule, const std::function<bool(const Schedule&)>& still_fails,
                int max_runs, std::vector<ShrinkStep>* log) {
  Schedule cur = schedule;
  int runs = 0;
  auto attempt = [&](const Schedule& candidate, const std::string& change) {
    if (runs >= max_runs) return false;
    ++runs;
    bool kept = still_fails(candidate);
    if (log != nullptr) log->push_back({change, kept});
    if (kept) cur = candidate;
    return kept;
  };
  // Drop entries, the last first (later faults are less likely to be the
  // cause than earlier ones they follow).
  for (size_t i = cur.entries.size(); i-- > 0 && runs < max_runs;) {
    if (cur.entries.size() <= 1) break;
    Schedule c = cur;
    const std::string what = absl::StrCat("dropped ", DescribeTemplate(c.entries[i].faults[0]),
                                          " at ", c.entries[i].trigger.at.ToString());
    c.entries.erase(c.entries.begin() + static_cast<ptrdiff_t>(i));
    attempt(c, what);
  }
  // Halve lasting faults' durations, each as long as the violation stays.
  for (size_t i = 0; i < cur.entries.size() && runs < max_runs; ++i) {
    for (int halvings = 0; halvings < 10 && runs < max_runs; ++halvings) {
      const FaultTemplate& f = cur.entries[i].faults[0];
      if (!f.duration_lo || f.duration_lo->ms < 100) break;
      Schedule c = cur;
      FaultTemplate& g = c.entries[i].faults[0];
      g.duration_lo = Span::Ms(std::round(g.duration_lo->ms / 2));
      g.duration_hi = g.duration_lo;
      if (!attempt(c, absl::StrCat("halved ", DescribeTemplate(f)))) break;
    }
  }
  return cur;
}

absl::StatusOr<ExploreReport> Explore(const ExploreOptions& options) {
  std::vector<std::string> topologies = options.topologies;
  if (topologies.empty()) {
    const bool root = geteuid() == 0 && PartitionSupport().ok();
    const bool sentinel = testkit::CheckRedisSentinelAvailable().ok();
    for (const Preset& p : Presets()) {
      if (p.root && !root) continue;
      if (p.name == "sentinel" && !sentinel) continue;
      topologies.push_back(p.name);
    }
  }
  for (const std::string& t : topologies) {
    absl::StatusOr<Scenario> s = TopologyPreset(t, options.duration, options.client);
    if (!s.ok()) return s.status();
    absl::Status v = ValidateScenario(*s);
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(t, ": ", v.message()));
  }
  for (const std::string& k : options.kinds) {
    if (FindFaultKind(k) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--kinds: no fault kind \"", k, "\""));
    }
  }
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  ExploreReport report;
  const absl::Time t0 = absl::Now();
  for (int i = 0; i < options.runs && !Interrupted(); ++i) {
    ExploreRun run;
    run.index = i + 1;
    run.seed = options.seed + static_cast<uint64_t>(i);
    run.topology = topologies[static_cast<size_t>(i) % topologies.size()];
    absl::StatusOr<Scenario> sc = TopologyPreset(run.topology, options.duration, options.client);
    if (!sc.ok()) return sc.status();
    run.scenario = *std::move(sc);
    run.scenario.name = absl::StrCat("explore-", run.topology, "-", run.seed);
    std::mt19937_64 rng(run.seed);
    run.scenario.schedule =
        GenerateSchedule(ShapeOf(run.scenario.setup), options.duration, rng, options.kinds);
    // Every property is judged (L1 too): the verdict column says whether a
    // run broke one its faults do not explain.
    run.scenario.expect.clean = 0;
    run.scenario.expect.min_grants = 0;
    run.scenario.expect.violated_all = 0;
    run.scenario.expect.clean = Prop(kL1);  // measured (the runner waits for a grant)
    RunOptions ro = options.run;
    ro.seed = run.seed;
    progress(absl::StrFormat("[%d/%d] %s seed %d: %d faults", run.index, options.runs, run.topology,
                             run.seed, run.scenario.schedule.entries.size()));
    run.result = RunScenario(run.scenario, ro);
    PropertySet may = 0;
    for (const auto& f : run.result.injected_faults) {
      if (f.scope.empty()) may |= f.may_violate;
    }
    run.must_keep = DocumentedSafe(may);
    run.violated = run.result.skipped ? 0 : Unexplained(run.result);
    std::string counts;
    for (int p = 0; p < kNumHarnessProperties; ++p) {
      absl::StrAppend(&counts, p ? "/" : "", run.result.violations[static_cast<size_t>(p)]);
    }
    progress(absl::StrCat("    ",
                          run.result.skipped         ? "SKIP " + run.result.skip_reason
                          : run.result.error.empty() ? ""
                                                     : "ERROR ",
                          run.result.error, " S1-S5,L1,S6-S9 ", counts,
                          run.violated
                              ? absl::StrCat("  FINDING: ", DescribeProperties(run.violated),
                                             " not explained by the faults")
                              : ""));
    if (run.violated != 0 && options.shrink_runs > 0) {
      const PropertySet target = run.violated;
      auto still_fails = [&](const Schedule& candidate) {
        Scenario s = run.scenario;
        s.schedule = candidate;
        ScenarioResult r = RunScenario(s, ro);
        const bool again = (Unexplained(r) & target) != 0;
        progress(absl::StrFormat("    shrink: %d entries -> %s", candidate.entries.size(),
                                 again ? "still violated" : "clean"));
        return again;
      };
      // First the schedule as it was, up to twice: dropping faults from a
      // schedule whose violation depends on timing alone would spend every
      // rerun on noise.
      bool reproducible = false;
      int tries = 0;
      for (; tries < 2 && tries < options.shrink_runs && !reproducible; ++tries) {
        reproducible = still_fails(run.scenario.schedule);
        run.shrink_log.push_back({"the schedule as generated", reproducible});
      }
      run.shrunk = reproducible ? Shrink(run.scenario.schedule, still_fails,
                                         options.shrink_runs - tries, &run.shrink_log)
                                : run.scenario.schedule;
      Scenario out = run.scenario;
      out.schedule = run.shrunk;
      out.name = absl::StrCat("finding-", run.topology, "-", run.seed);
      const size_t reproduced =
          static_cast<size_t>(std::count_if(run.shrink_log.begin(), run.shrink_log.end(),
                                            [](const ShrinkStep& step) { return step.kept; }));
      const std::string shrunk =
          reproduced > 0 || run.shrink_log.empty()
              ? absl::StrCat("shrunk from ", run.scenario.schedule.entries.size(), " to ",
                             run.shrunk.entries.size(), " faults (", reproduced, " of ",
                             run.shrink_log.size(), " reruns reproduced it)")
              : absl::StrCat("not shrunk: none of ", run.shrink_log.size(),
                             " reruns reproduced it (it depends on timing: replay it a few "
                             "times)");
      out.summary =
          absl::StrCat("Found by redlock-chaos --explore (run seed ", run.seed, ", topology ",
                       run.topology, "), ", shrunk, ": ", DescribeProperties(target),
                       " violated although the faults do not explain it. Replay: "
                       "redlock-chaos --file <this file> --seed ",
                       run.seed, ".");
      out.expect.clean = target;
      out.expect.min_grants = 1;
      std::error_code ec;
      std::filesystem::create_directories(options.out_dir, ec);
      run.finding_file = absl::StrCat(options.out_dir, "/", out.name, ".yaml");
      absl::Status w = WriteTextFile(run.finding_file, WriteScenario(out));
      if (!w.ok()) {
        progress(absl::StrCat("    cannot write ", run.finding_file, ": ", w.message()));
        run.finding_file.clear();
      } else {
        progress(absl::StrCat("    shrunk schedule written to ", run.finding_file));
      }
    }
    report.runs.push_back(std::move(run));
  }
  report.elapsed = absl::Now() - t0;
  return report;
}

std::string FormatExploreReport(const ExploreReport& report) {
  std::string out;
  std::map<std::string, int> injected;
  std::array<int64_t, kNumHarnessProperties> runs_with{}, findings{};
  int errors = 0, skipped = 0;
  for (const ExploreRun& r : report.runs) {
    for (const auto& [k, n] : r.result.injected) injected[k] += n;
    for (int p = 0; p < kNumHarnessProperties; ++p) {
      if (r.result.violations[static_cast<size_t>(p)] > 0) ++runs_with[static_cast<size_t>(p)];
      if (r.violated & Prop(p)) ++findings[static_cast<size_t>(p)];
    }
    errors += !r.result.error.empty();
    skipped += r.result.skipped;
  }
  absl::StrAppend(&out, "runs: ", report.runs.size(), " (", skipped, " skipped, ", errors,
                  " harness errors) in ", Seconds(report.elapsed), "\n\n");
  absl::StrAppend(&out, "run  seed        topology    faults  S1  S2  S3  S4  S5  L1  verdict\n");
  for (const ExploreRun& r : report.runs) {
    absl::StrAppend(&out, absl::StrFormat("%3d  %-10d  %-10s  %6d", r.index, r.seed, r.topology,
                                          r.result.injected_faults.size()));
    for (int p = 0; p < kNumHarnessProperties; ++p) {
      absl::StrAppend(&out, absl::StrFormat("  %2d", r.result.violations[static_cast<size_t>(p)]));
    }
    std::string verdict = r.result.skipped          ? "SKIP"
                          : !r.result.error.empty() ? "ERROR"
                          : r.violated ? absl::StrCat("FINDING ", DescribeProperties(r.violated))
                                       : "ok";
    absl::StrAppend(&out, "  ", verdict, "\n");
  }
  out += "\nfaults injected, by kind:\n";
  for (const auto& [k, n] : injected) absl::StrAppend(&out, absl::StrFormat("  %-20s %d\n", k, n));
  out +=
      "\nviolations, by property: runs with one (of which findings: not explained by the "
      "faults the run injected)\n";
  for (int p = 0; p < kNumHarnessProperties; ++p) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-3s %4d runs (%d findings)\n", HarnessPropertyName(p),
                              runs_with[static_cast<size_t>(p)], findings[static_cast<size_t>(p)]));
  }
  for (const ExploreRun& r : report.runs) {
    if (r.violated == 0 && r.result.error.empty()) continue;
    absl::StrAppend(&out, "\n", r.violated ? "FINDING" : "ERROR", " in run ", r.index, " (seed ",
                    r.seed, ", topology ", r.topology, ")",
                    r.violated ? absl::StrCat(": ", DescribeProperties(r.violated)) : "", "\n");
    if (!r.result.error.empty()) absl::StrAppend(&out, "  error: ", r.result.error, "\n");
    for (const auto& v : r.result.violation_refs) {
      if (!(r.violated & Prop(v.property))) continue;
      absl::StrAppend(&out, "  ", HarnessPropertyName(v.property), " (",
                      absl::StrJoin(v.processes, ","), "): ", v.description, "\n");
      break;
    }
    out += "  schedule:\n";
    for (const auto& f : r.result.injected_faults) {
      absl::StrAppend(&out, "    ", Seconds(f.at), " ", DescribeTemplate(f.fault), "\n");
    }
    if (!r.finding_file.empty()) {
      absl::StrAppend(&out, "  shrunk to ", r.shrunk.entries.size(), " of ",
                      r.scenario.schedule.entries.size(), " faults: ", r.finding_file, "\n");
      for (const ShrinkStep& s : r.shrink_log) {
        absl::StrAppend(&out, "    ", s.kept ? "kept   " : "undone ", s.change, "\n");
      }
      absl::StrAppend(&out, "  replay: redlock-chaos --file ", r.finding_file, " --seed ", r.seed,
                      "\n");
    }
  }
  return out;
}

}  // namespace redlock::chaos
