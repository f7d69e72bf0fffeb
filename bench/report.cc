#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace redlock::bench {

std::string FormatLatency(int64_t ns) {
  const double us = static_cast<double>(ns) / 1e3;
  if (us < 100) return absl::StrFormat("%.1fus", us);
  if (us < 1000) return absl::StrFormat("%.0fus", us);
  const double ms = us / 1e3;
  if (ms < 10) return absl::StrFormat("%.2fms", ms);
  if (ms < 100) return absl::StrFormat("%.1fms", ms);
  if (ms < 1000) return absl::StrFormat("%.0fms", ms);
  return absl::StrFormat("%.2fs", ms / 1e3);
}

std::string FormatRatio(double ratio) {
  if (!std::isfinite(ratio)) return "x-";
  // Thresholds below the powers of ten so that rounding never adds a digit.
  if (ratio < 9.995) return absl::StrFormat("x%.2f", ratio);
  if (ratio < 99.95) return absl::StrFormat("x%.1f", ratio);
  return absl::StrFormat("x%.0f", ratio);
}

std::string FormatRate(double per_second) {
  if (per_second < 1000) return absl::StrFormat("%.0f/s", per_second);
  if (per_second < 100000) return absl::StrFormat("%.1fk/s", per_second / 1e3);
  return absl::StrFormat("%.0fk/s", per_second / 1e3);
}

std::string FormatCpu(double us) {
  if (!std::isfinite(us)) return "-";
  return FormatLatency(std::llround(us * 1e3));
}

std::string FormatCsw(double per_cycle) {
  if (!std::isfinite(per_cycle)) return "-";
  if (per_cycle < 100) return absl::StrFormat("%.2f", per_cycle);
  return absl::StrFormat("%.0f", per_cycle);
}

std::string FormatKb(int64_t kb) {
  if (kb < 0) return "-";
  if (kb < 1024) return absl::StrFormat("%dKiB", kb);
  return absl::StrFormat("%.1fMiB", static_cast<double>(kb) / 1024);
}

namespace {

// operator new calls per cycle: one decimal, so that a single allocation
// per cycle more or less shows.
std::string FormatAllocs(double per_cycle) {
  if (!std::isfinite(per_cycle)) return "-";
  if (per_cycle < 1000) return absl::StrFormat("%.1f", per_cycle);
  return absl::StrFormat("%.0f", per_cycle);
}

std::string Pad(const std::string& s, size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

double Ratio(int64_t value, int64_t floor) {
  if (floor <= 0) return NAN;
  return static_cast<double>(value) / static_cast<double>(floor);
}

// One latency line: the five figures, each with its ratio to the floor's.
std::string LatencyCells(const Distribution& d, const Distribution* floor) {
  if (d.empty()) return Pad("(no samples)", 5 * 14);
  const Percentiles p = d.Summary();
  Percentiles f;
  if (floor != nullptr && !floor->empty()) f = floor->Summary();
  std::string out;
  const int64_t values[] = {p.p50, p.p90, p.p99, p.p999, p.max};
  const int64_t floors[] = {f.p50, f.p90, f.p99, f.p999, f.max};
  for (int i = 0; i < 5; ++i) {
    std::string cell = Pad(FormatLatency(values[i]), 6, true);
    if (floor != nullptr)
      absl::StrAppend(&cell, " ", Pad(FormatRatio(Ratio(values[i], floors[i])), 5));
    absl::StrAppend(&out, Pad(cell, 14));
  }
  return out;
}

std::string ErrorText(const char* what, const ErrorCounts& e) {
  std::vector<std::string> parts;
  for (const auto& [code, n] : e.counts()) {
    std::string part = absl::StrCat(what, " ", code, " x", n);
    auto it = e.first_messages().find(code);
    if (it != e.first_messages().end() && !it->second.empty()) {
      std::string msg = it->second.size() > 300 ? it->second.substr(0, 297) + "..." : it->second;
      absl::StrAppend(&part, " (first: ", msg, ")");
    }
    parts.push_back(part);
  }
  return absl::StrJoin(parts, "; ");
}

// When a code has more than one cause: one line per cause, most frequent
// first (at most 4).
std::string CauseLines(const std::string& indent, const char* what, const ErrorCounts& e) {
  std::string out;
  for (const auto& [code, causes] : e.causes()) {
    if (causes.size() < 2) continue;
    std::vector<std::pair<int64_t, std::string>> sorted;
    for (const auto& [cause, n] : causes) sorted.emplace_back(n, cause);
    std::sort(sorted.rbegin(), sorted.rend());
    for (size_t i = 0; i < sorted.size() && i < 4; ++i) {
      std::string cause = sorted[i].second;
      if (cause.size() > 200) cause = cause.substr(0, 197) + "...";
      absl::StrAppend(&out, indent, "  ", what, " ", code, " x", sorted[i].first, ": ", cause,
                      "\n");
    }
  }
  return out;
}

constexpr size_t kImplWidth = 24;

}  // namespace

std::string RenderHeader(const RunInfo& info) {
  std::string out;
  absl::StrAppend(&out, "redlock-bench (", info.mode, " run), seed ", info.seed, ", started ",
                  info.started_at, "\n");
  const MachineInfo& m = info.machine;
  absl::StrAppend(&out, "machine:  ", m.cpu_model, ", ", m.cores_online, " cores (", m.cores_usable,
                  " usable), ", m.kernel, ", ", FormatKb(m.mem_total_kb), " RAM\n");
  const VersionInfo& v = info.versions;
  absl::StrAppend(&out, "versions: ", v.redis_server, "; hiredis ", v.hiredis, "; ", v.compiler,
                  "; redlock ", v.redlock, "\n");
  absl::StrAppend(&out, "build:    ", v.build_type,
                  v.sanitizer.empty() ? "" : absl::StrCat(", sanitizer ", v.sanitizer),
                  v.assertions ? ", assertions on" : ", NDEBUG", "\n");
  for (const std::string& w : info.build_warnings) absl::StrAppend(&out, "WARNING:  ", w, "\n");
  absl::StrAppend(
      &out, "nodes:    ", info.own_fleet ? "own fleet of redis-server processes: " : "--nodes: ",
      info.nodes, "\n");
  std::vector<std::string> settings;
  for (const auto& [k, val] : info.settings) settings.push_back(absl::StrCat(k, " ", val));
  absl::StrAppend(&out, "settings: ", absl::StrJoin(settings, ", "), "\n");
  absl::StrAppend(&out,
                  "Latencies are p50 p90 p99 p99.9 max, each followed by its ratio to the "
                  "floor's (one node, one caller, plain hiredis) measured in the same group.\n"
                  "xlimit: cycles/s over the pipelined limit's (raw pipelined client, same "
                  "commands) in the same group. CPU/cyc: user+sys of this process per cycle; "
                  "csw/cyc: its context switches per cycle (getrusage over the measurement); "
                  "allocs/cyc: operator new calls per cycle, every thread of this process, "
                  "over the same window; "
                  "srvCPU/cyc: the servers' user+sys per cycle (own fleet only).\n");
  return out;
}

std::string RenderGroup(const GroupResult& g) {
  std::string out;
  std::vector<std::string> settings;
  for (const auto& [k, v] : g.settings) settings.push_back(absl::StrCat(k, " ", v));
  absl::StrAppend(&out, "\n== ", g.scenario, "  N=", g.n, "  ",
                  g.variant.empty() ? "" : absl::StrCat("[", g.variant, "]  "), g.title);
  if (!settings.empty()) absl::StrAppend(&out, "  (", absl::StrJoin(settings, ", "), ")");
  absl::StrAppend(&out, "\n");
  if (g.skipped) {
    absl::StrAppend(&out, "   skipped: ", g.skip_reason, "\n");
    return out;
  }
  const RowResult* floor = g.Reference();
  if (g.reference != kFloor) {
    absl::StrAppend(&out, "   (ratios in this group are to the ", g.reference, " row)\n");
  }
  absl::StrAppend(&out, "   ", Pad("impl", kImplWidth), Pad("C", 4, true), "  ", Pad("op", 10));
  for (const char* h : {"p50", "p90", "p99", "p99.9", "max"}) {
    absl::StrAppend(&out, Pad(h, 6, true), Pad("", 8));
  }
  absl::StrAppend(&out, Pad("cycles/s", 9, true), Pad("xlimit", 7, true), Pad("ok%", 8, true),
                  Pad("peak RSS", 10, true), Pad("CPU/cyc", 9, true), Pad("csw/cyc", 8, true),
                  Pad("allocs/cyc", 11, true), Pad("srvCPU/cyc", 11, true), "\n");
  for (const RowResult& r : g.rows) {
    const std::string lead =
        absl::StrCat("   ", Pad(r.impl, kImplWidth), Pad(absl::StrCat(r.callers), 4, true), "  ");
    const std::string cont(lead.size(), ' ');
    if (r.skipped) {
      absl::StrAppend(&out, lead, "skipped: ", r.skip_reason, "\n");
      continue;
    }
    if (!r.harness_error.empty()) {
      absl::StrAppend(&out, lead, "HARNESS ERROR: ", r.harness_error, "\n");
      continue;
    }
    const double to_limit = RatioToLimit(r, g);
    const std::string tail = absl::StrCat(
        Pad(FormatRate(r.throughput()), 9, true),
        Pad(std::isfinite(to_limit) ? FormatRatio(to_limit) : "-", 7, true),
        Pad(absl::StrFormat("%.2f", 100 * r.success_rate()), 8, true),
        Pad(FormatKb(r.peak_rss_kb), 10, true), Pad(FormatCpu(r.cpu_us_per_cycle()), 9, true),
        Pad(FormatCsw(r.csw_per_cycle()), 8, true),
        Pad(FormatAllocs(r.allocs_per_cycle()), 11, true),
        Pad(FormatCpu(r.server_cpu_us_per_cycle()), 11, true));
    bool first = true;
    auto line = [&](const char* op, const Distribution& d, const Distribution* f) {
      absl::StrAppend(&out, first ? lead : cont, Pad(op, 10), LatencyCells(d, f));
      if (first) absl::StrAppend(&out, tail);
      absl::StrAppend(&out, "\n");
      first = false;
    };
    const Distribution* facq = floor ? &floor->acquire : nullptr;
    const Distribution* fcyc = floor ? &floor->cycle : nullptr;
    if (!r.handoff.empty() || r.variant == "notify=on" || r.variant == "notify=off") {
      line("handoff", r.handoff, facq);
      line("from-call", r.handoff_call, facq);
      line("acq+wait", r.acquire, facq);
    } else {
      line("acquire", r.acquire, facq);
      line("acq+rel", r.cycle, fcyc);
    }
    if (r.attempts == 0) absl::StrAppend(&out, cont, "no cycle completed in the measurement\n");
    if (!r.acquire_errors.empty()) {
      absl::StrAppend(&out, cont, "errors: ", ErrorText("acquire", r.acquire_errors), "\n");
      absl::StrAppend(&out, CauseLines(cont, "acquire", r.acquire_errors));
    }
    if (!r.release_errors.empty()) {
      absl::StrAppend(&out, cont, "errors: ", ErrorText("release", r.release_errors), "\n");
      absl::StrAppend(&out, CauseLines(cont, "release", r.release_errors));
    }
    if (r.memory_tracked) {
      absl::StrAppend(
          &out, cont,
          absl::StrFormat("memory under the fault: VmRSS %s -> %s -> %s over %.1fs (%+d KiB, %+d "
                          "KiB in the second half): %s\n",
                          FormatKb(r.rss_start_kb), FormatKb(r.rss_mid_kb), FormatKb(r.rss_end_kb),
                          r.measured_s, r.rss_growth_kb(), r.rss_second_half_growth_kb(),
                          r.memory_flat() ? "flat" : "GREW"));
    }
    for (const std::string& note : r.notes) absl::StrAppend(&out, cont, "note: ", note, "\n");
  }
  for (const std::string& note : g.notes) absl::StrAppend(&out, "   note: ", note, "\n");
  return out;
}

std::string RenderSummary(const BenchResults& results) {
  std::string out = "\n== targets (docs/design.md 9.3; informative, never the exit code)\n";
  for (const TargetCheck& t : CheckTargets(results)) {
    absl::StrAppend(&out, "   ", Pad(t.status, 8), Pad(t.figure, 56), " target ", Pad(t.target, 44),
                    " measured ", t.measured, "\n");
  }
  if (!results.harness_errors.empty()) {
    absl::StrAppend(&out, "\nHARNESS ERRORS (", results.harness_errors.size(), "):\n");
    for (const std::string& e : results.harness_errors) absl::StrAppend(&out, "   ", e, "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("\nwall time %.1fs\n", results.wall_seconds));
  return out;
}

// ---- JSON -------------------------------------------------------------------------

namespace {

using Json = nlohmann::ordered_json;

double Us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

Json LatencyJson(const Distribution& d, const Distribution* floor, bool with_cdf) {
  Json j;
  const Percentiles p = d.Summary();
  j["count"] = p.count;
  j["mean_us"] = p.mean / 1e3;
  j["min_us"] = Us(p.min);
  j["p50_us"] = Us(p.p50);
  j["p90_us"] = Us(p.p90);
  j["p99_us"] = Us(p.p99);
  j["p999_us"] = Us(p.p999);
  j["max_us"] = Us(p.max);
  if (floor != nullptr && !floor->empty() && !d.empty()) {
    const Percentiles f = floor->Summary();
    Json r;
    r["p50"] = Ratio(p.p50, f.p50);
    r["p90"] = Ratio(p.p90, f.p90);
    r["p99"] = Ratio(p.p99, f.p99);
    r["p999"] = Ratio(p.p999, f.p999);
    r["max"] = Ratio(p.max, f.max);
    j["ratio_to_floor"] = r;
  }
  if (with_cdf) {
    Json cdf = Json::array();
    for (const auto& [ns, frac] : d.Cdf(100)) cdf.push_back(Json::array({Us(ns), frac}));
    j["cdf"] = cdf;
  }
  return j;
}

// A JSON object of (name, value) pairs: a map, or a list of pairs (a later
// pair of the same name wins).
template <typename Pairs>
Json ObjectOf(const Pairs& pairs) {
  Json j = Json::object();
  for (const auto& [name, value] : pairs) j[name] = value;
  return j;
}

Json CausesJson(const ErrorCounts& e) {
  Json j = Json::object();
  for (const auto& [code, causes] : e.causes()) j[code] = ObjectOf(causes);
  return j;
}

Json RowJson(const RowResult& r, const GroupResult& group) {
  const RowResult* floor = group.Reference();
  Json j;
  j["impl"] = r.impl;
  j["family"] = r.family;
  j["variant"] = r.variant;
  j["callers"] = r.callers;
  j["skipped"] = r.skipped;
  if (r.skipped) j["skip_reason"] = r.skip_reason;
  if (!r.harness_error.empty()) j["harness_error"] = r.harness_error;
  if (!r.ran()) return j;
  j["attempts"] = r.attempts;
  j["successes"] = r.successes;
  j["success_rate"] = r.success_rate();
  j["measured_s"] = r.measured_s;
  j["throughput_per_s"] = r.throughput();
  if (const RowResult* limit = group.Limit(r.callers)) {
    j["throughput_ratio_to_limit"] = RatioToLimit(r, group);
    j["limit_callers"] = limit->callers;
  } else {
    j["throughput_ratio_to_limit"] = nullptr;
  }
  j["client_cpu"] = {{"user_s", r.usage.user_us / 1e6},
                     {"sys_s", r.usage.sys_us / 1e6},
                     {"voluntary_csw", r.usage.voluntary_csw},
                     {"involuntary_csw", r.usage.involuntary_csw},
                     {"cycles", r.usage_cycles},
                     {"cpu_us_per_cycle", r.cpu_us_per_cycle()},
                     {"csw_per_cycle", r.csw_per_cycle()},
                     {"allocations", r.usage.allocations >= 0 ? Json(r.usage.allocations) : Json()},
                     {"allocs_per_cycle", r.allocs_per_cycle()}};
  if (r.processes > 0) j["processes"] = r.processes;
  j["server_cpu_us_per_cycle"] = r.server_cpu_us_per_cycle();
  j["warmup_cycles"] = r.warmup_cycles;
  j["hit_iteration_cap"] = r.hit_iteration_cap;
  j["acquire"] = LatencyJson(r.acquire, floor ? &floor->acquire : nullptr, false);
  j["acquire_release"] = LatencyJson(r.cycle, floor ? &floor->cycle : nullptr, true);
  if (!r.handoff.empty()) {
    j["handoff"] = LatencyJson(r.handoff, floor ? &floor->acquire : nullptr, true);
    j["handoff_from_release_call"] =
        LatencyJson(r.handoff_call, floor ? &floor->acquire : nullptr, true);
  }
  j["errors"] = {{"acquire", ObjectOf(r.acquire_errors.counts())},
                 {"release", ObjectOf(r.release_errors.counts())}};
  j["first_errors"] = {{"acquire", ObjectOf(r.acquire_errors.first_messages())},
                       {"release", ObjectOf(r.release_errors.first_messages())}};
  j["error_causes"] = {{"acquire", CausesJson(r.acquire_errors)},
                       {"release", CausesJson(r.release_errors)}};
  Json mem;
  mem["peak_rss_kib"] = r.peak_rss_kb;
  mem["peak_is_per_row"] = r.peak_is_per_run;
  if (r.memory_tracked) {
    mem["rss_start_kib"] = r.rss_start_kb;
    mem["rss_mid_kib"] = r.rss_mid_kb;
    mem["rss_end_kib"] = r.rss_end_kb;
    mem["growth_kib"] = r.rss_growth_kb();
    mem["flat"] = r.memory_flat();
  }
  j["memory"] = mem;
  j["notes"] = r.notes;
  return j;
}

}  // namespace

std::string RenderJson(const BenchResults& results) {
  Json root;
  const RunInfo& info = results.info;
  root["tool"] = "redlock-bench";
  root["schema_version"] = 1;
  root["mode"] = info.mode;
  root["seed"] = info.seed;
  root["started_at"] = info.started_at;
  root["wall_seconds"] = results.wall_seconds;
  root["machine"] = {{"cpu_model", info.machine.cpu_model},
                     {"cores_online", info.machine.cores_online},
                     {"cores_usable", info.machine.cores_usable},
                     {"kernel", info.machine.kernel},
                     {"mem_total_kib", info.machine.mem_total_kb}};
  root["versions"] = {{"redis_server", info.versions.redis_server},
                      {"hiredis", info.versions.hiredis},
                      {"compiler", info.versions.compiler},
                      {"build_type", info.versions.build_type},
                      {"sanitizer", info.versions.sanitizer},
                      {"assertions", info.versions.assertions},
                      {"redlock", info.versions.redlock}};
  root["build_warnings"] = info.build_warnings;
  root["nodes"] = {{"own_fleet", info.own_fleet}, {"list", info.nodes}};
  root["settings"] = ObjectOf(info.settings);
  Json groups = Json::array();
  for (const GroupResult& g : results.groups) {
    Json jg;
    jg["scenario"] = g.scenario;
    jg["n"] = g.n;
    jg["variant"] = g.variant;
    jg["ratio_to"] = g.reference;
    jg["title"] = g.title;
    jg["settings"] = ObjectOf(g.settings);
    jg["skipped"] = g.skipped;
    if (g.skipped) jg["skip_reason"] = g.skip_reason;
    Json rows = Json::array();
    for (const RowResult& r : g.rows) rows.push_back(RowJson(r, g));
    jg["rows"] = rows;
    jg["notes"] = g.notes;
    jg["figures"] = ObjectOf(g.figures);
    groups.push_back(jg);
  }
  root["groups"] = groups;
  Json targets = Json::array();
  for (const TargetCheck& t : CheckTargets(results)) {
    targets.push_back({{"figure", t.figure},
                       {"target", t.target},
                       {"measured", t.measured},
                       {"status", t.status}});
  }
  root["targets"] = targets;
  root["harness_errors"] = results.harness_errors;
  // NaN (a ratio without a floor) is not JSON: dump() writes null for it.
  // Messages come from servers: replace invalid UTF-8 instead of throwing.
  return root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace redlock::bench
