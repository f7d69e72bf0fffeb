#include "bench/plots.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/backends_scenario.h"
#include "common/svg.h"

namespace redlock::bench {
namespace {

using svg::FormatMicros;
using svg::LineChart;
using svg::Series;

constexpr char kColorLibrary[] = "#1f77b4";
constexpr char kColorSequential[] = "#d62728";
constexpr char kColorWaitForAll[] = "#ff7f0e";
constexpr char kColorFloor[] = "#7f7f7f";
constexpr char kColorAsync[] = "#2ca02c";
constexpr char kColorLimit[] = "#9467bd";

// The throughput rows of the sweep and of throughput_vs_n.
struct Impl {
  const char* family;
  const char* variant;
  const char* label;
  const char* color;
};
constexpr Impl kThroughputImpls[] = {
    {kLibrary, "", "library (blocking)", kColorLibrary},
    {kLibrary, kAsync, "library async", kColorAsync},
    {kPipelinedLimit, "", "pipelined limit", kColorLimit},
};

const char* ColorOf(const std::string& family) {
  if (family == kLibrary) return kColorLibrary;
  if (family == kSequential) return kColorSequential;
  if (family == kWaitForAll) return kColorWaitForAll;
  return kColorFloor;
}

std::vector<const GroupResult*> Groups(const BenchResults& r, const std::string& scenario) {
  std::vector<const GroupResult*> out;
  for (const GroupResult& g : r.groups) {
    if (g.scenario == scenario && !g.skipped) out.push_back(&g);
  }
  std::sort(out.begin(), out.end(),
            [](const GroupResult* a, const GroupResult* b) { return a->n < b->n; });
  return out;
}

double Us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

std::string Subtitle(const BenchResults& r) {
  // "Redis server v=7.0.15 sha=..." -> "redis-server 7.0.15", and
  // "Valkey server v=9.1.2 ..." -> "valkey-server 9.1.2"
  std::string redis = r.info.versions.redis_server;
  const size_t v = redis.find("v=");
  if (v != std::string::npos) {
    const std::string kind = absl::StartsWith(redis, "Valkey") ? "valkey-server " : "redis-server ";
    redis = absl::StrCat(kind, redis.substr(v + 2, redis.find(' ', v) - v - 2));
  }
  return absl::StrCat(r.info.machine.cpu_model, ", ", r.info.machine.cores_online, " cores; ",
                      redis, "; hiredis ", r.info.versions.hiredis, "; ", r.info.mode,
                      " run, seed ", r.info.seed);
}

bool LatencyVsN(const BenchResults& r, LineChart* chart) {
  std::vector<const GroupResult*> groups = Groups(r, "healthy");
  if (groups.empty()) return false;
  chart->title = "acquire+release latency vs N (1 caller, healthy nodes)";
  chart->subtitle = Subtitle(r);
  chart->x.label = "N (nodes)";
  chart->y.label = "latency (solid p50, dashed p99)";
  chart->y.format = FormatMicros;
  std::set<double> ns;
  for (const char* family : {kLibrary, kSequential, kWaitForAll, kFloor}) {
    for (bool p99 : {false, true}) {
      Series s;
      s.name = absl::StrCat(family, p99 ? " p99" : " p50");
      s.color = ColorOf(family);
      s.dashed = p99;
      for (const GroupResult* g : groups) {
        const RowResult* row = std::string(family) == kFloor ? g->Floor() : g->Find(family, "", 1);
        if (row == nullptr || row->cycle.empty()) continue;
        s.points.emplace_back(g->n, Us(row->cycle.Quantile(p99 ? 0.99 : 0.5)));
        ns.insert(g->n);
      }
      if (!s.points.empty()) chart->series.push_back(std::move(s));
    }
  }
  chart->x.ticks.assign(ns.begin(), ns.end());
  return !chart->series.empty();
}

bool ThroughputVsN(const BenchResults& r, LineChart* chart) {
  std::vector<const GroupResult*> groups = Groups(r, "healthy");
  if (groups.empty()) return false;
  const int many = r.info.callers_many;
  chart->title = absl::StrCat("throughput vs N (", many, " callers, healthy nodes)");
  chart->subtitle = Subtitle(r);
  chart->x.label = "N (nodes)";
  chart->y.label = "acquire+release cycles per second";
  std::set<double> ns;
  std::vector<Impl> impls(std::begin(kThroughputImpls), std::end(kThroughputImpls));
  impls.push_back({kSequential, "", kSequential, kColorSequential});
  impls.push_back({kWaitForAll, "", kWaitForAll, kColorWaitForAll});
  for (const Impl& impl : impls) {
    Series s;
    s.name = impl.label;
    s.color = impl.color;
    s.dashed = std::string(impl.family) == kPipelinedLimit;
    for (const GroupResult* g : groups) {
      const RowResult* row = g->Find(impl.family, impl.variant, many);
      if (row == nullptr) continue;
      s.points.emplace_back(g->n, row->throughput());
      ns.insert(g->n);
    }
    if (!s.points.empty()) chart->series.push_back(std::move(s));
  }
  chart->x.ticks.assign(ns.begin(), ns.end());
  return !chart->series.empty();
}

// A figure of the sweep vs callers (log x): one series per implementation
// and N (N=1 solid, other N dashed).
bool SweepChart(const BenchResults& r, LineChart* chart, const std::string& what,
                const std::function<double(const RowResult&)>& value) {
  std::vector<const GroupResult*> groups = Groups(r, "sweep");
  if (groups.empty()) return false;
  chart->subtitle = Subtitle(r);
  chart->x.label = "callers (blocking threads, or async chains), log scale";
  chart->x.log = true;
  chart->y.label = what;
  std::set<double> callers;
  for (const GroupResult* g : groups) {
    for (const Impl& impl : kThroughputImpls) {
      Series s;
      s.name = absl::StrCat(impl.label, ", N=", g->n);
      s.color = impl.color;
      s.dashed = g != groups.front();
      for (const RowResult& row : g->rows) {
        if (row.family != impl.family || row.variant != impl.variant || !row.ran()) continue;
        const double v = value(row);
        if (!std::isfinite(v)) continue;
        s.points.emplace_back(row.callers, v);
        callers.insert(row.callers);
      }
      if (!s.points.empty()) chart->series.push_back(std::move(s));
    }
  }
  chart->x.ticks.assign(callers.begin(), callers.end());
  return !chart->series.empty();
}

Series CdfSeries(const std::string& name, const std::string& color, const Distribution& d,
                 bool dashed = false) {
  Series s;
  s.name = name;
  s.color = color;
  s.dashed = dashed;
  s.markers = false;
  // Log axes start at 1us: anything faster (a zero hand-off) is drawn there.
  for (const auto& [ns, frac] : d.Cdf(200)) s.points.emplace_back(std::max(1.0, Us(ns)), frac);
  return s;
}

bool LatencyCdf(const BenchResults& r, LineChart* chart, std::string* file) {
  // The N with the most fault scenarios measured, preferring 5.
  std::map<int, int> score;
  for (const GroupResult& g : r.groups) {
    if (g.skipped) continue;
    if (g.scenario == "healthy" || g.scenario == "stopped" || g.scenario == "slow1" ||
        g.scenario == "slow2" || g.scenario == "slow-near-timeout") {
      score[g.n] += 2;
      if (g.n == 5) score[g.n] += 1;
    }
  }
  if (score.empty()) return false;
  const int n = std::max_element(score.begin(), score.end(), [](const auto& a, const auto& b) {
                  return a.second < b.second;
                })->first;
  *file = absl::StrCat("latency_cdf_n", n, ".svg");
  chart->title = absl::StrCat("library acquire+release latency CDF, N=", n, ", 1 caller");
  chart->subtitle = Subtitle(r);
  chart->x.label = "acquire+release latency (log scale)";
  chart->x.log = true;
  chart->x.format = FormatMicros;
  chart->y.label = "fraction of cycles";
  chart->y.min = 0;
  chart->y.max = 1;
  struct Pick {
    const char* scenario;
    const char* label;
    const char* color;
    bool dashed;
  };
  const Pick picks[] = {
      {"healthy", "healthy", kColorLibrary, false},
      {"stopped", "one node stopped", kColorSequential, false},
      {"slow1", "one slow node", kColorWaitForAll, false},
      {"slow2", "two slow nodes", "#2ca02c", false},
      {"slow-near-timeout", "slow node near node_timeout", "#9467bd", true},
  };
  for (const Pick& p : picks) {
    for (const GroupResult& g : r.groups) {
      if (g.scenario != p.scenario || g.n != n || g.skipped) continue;
      const RowResult* row = g.Find(kLibrary, "", 1);
      if (row != nullptr && !row->cycle.empty()) {
        chart->series.push_back(CdfSeries(p.label, p.color, row->cycle, p.dashed));
      }
      if (std::string(p.scenario) == "healthy" && g.Floor() != nullptr) {
        chart->series.push_back(CdfSeries("floor (healthy)", kColorFloor, g.Floor()->cycle, true));
      }
    }
  }
  return !chart->series.empty();
}

bool HandoffCdf(const BenchResults& r, LineChart* chart) {
  for (const GroupResult* g : Groups(r, "hot")) {
    for (const RowResult& row : g->rows) {
      if (!row.ran() || row.handoff.empty()) continue;
      const bool on = row.variant == "notify=on";
      const char* color = on ? kColorLibrary : kColorSequential;
      chart->series.push_back(
          CdfSeries(absl::StrCat(row.impl, ", from Release return"), color, row.handoff));
      chart->series.push_back(
          CdfSeries(absl::StrCat(row.impl, ", from Release call"), color, row.handoff_call, true));
      chart->title = absl::StrCat("hand-off latency CDF on one hot resource, N=", g->n);
    }
    if (!chart->series.empty()) break;
  }
  if (chart->series.empty()) return false;
  chart->subtitle = Subtitle(r);
  chart->x.label = "holder's Release -> next waiter's Acquire returned (log scale; < 1us at 1us)";
  chart->x.log = true;
  chart->x.min = 1;
  chart->x.format = FormatMicros;
  chart->y.label = "fraction of hand-offs";
  chart->y.min = 0;
  chart->y.max = 1;
  return true;
}

// spread: acquire+release p50 per latency profile (x: the profiles in run
// order), every row beside the model (dashed).
bool SpreadChart(const BenchResults& r, LineChart* chart) {
  std::vector<const GroupResult*> groups;
  for (const GroupResult& g : r.groups) {
    if (g.scenario == "spread" && !g.skipped) groups.push_back(&g);
  }
  if (groups.empty()) return false;
  const int many = r.info.callers_many;
  chart->title = "acquire+release p50 per placement of the nodes, beside the model";
  chart->subtitle = Subtitle(r);
  chart->x.label = "latency profile (delay added each way per node)";
  chart->y.label = "acquire+release p50 (log scale)";
  chart->y.log = true;
  chart->y.format = FormatMicros;
  std::vector<std::string> names;
  for (const GroupResult* g : groups) names.push_back(g->variant);
  chart->x.format = [names](double x) {
    const long i = std::lround(x) - 1;
    return i >= 0 && i < static_cast<long>(names.size()) ? names[static_cast<size_t>(i)]
                                                         : std::string();
  };
  for (size_t i = 0; i < groups.size(); ++i) chart->x.ticks.push_back(static_cast<double>(i + 1));
  chart->x.min = 0.5;
  chart->x.max = static_cast<double>(groups.size()) + 0.5;
  struct Pick {
    const char* family;
    int callers;
    const char* label;
    const char* color;
    bool dashed;
  };
  const std::string many_label = absl::StrCat("library, ", many, " callers");
  const Pick picks[] = {
      {kModel, 1, "model: q-th nearest round trip (PING)", "#000000", true},
      {kLibrary, 1, "library, 1 caller", kColorLibrary, false},
      {kLibrary, many, many_label.c_str(), "#aec7e8", false},
      {kPipelinedLimit, 1, "pipelined limit, 1 chain", kColorLimit, true},
      {kNearest, 1, "nearest node alone (no quorum)", kColorFloor, false},
      {kWaitForAll, 1, "wait-for-all", kColorWaitForAll, false},
      {kSequential, 1, "sequential", kColorSequential, false},
  };
  for (const Pick& p : picks) {
    Series s;
    s.name = p.label;
    s.color = p.color;
    s.dashed = p.dashed;
    for (size_t i = 0; i < groups.size(); ++i) {
      const RowResult* row = groups[i]->Find(p.family, "", p.callers);
      if (row == nullptr || row->cycle.empty()) continue;
      s.points.emplace_back(static_cast<double>(i + 1), Us(row->cycle.Quantile(0.5)));
    }
    if (!s.points.empty()) chart->series.push_back(std::move(s));
  }
  return !chart->series.empty();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> RenderPlots(const BenchResults& results) {
  std::vector<std::pair<std::string, std::string>> out;
  {
    LineChart c;
    if (LatencyVsN(results, &c)) out.emplace_back("latency_vs_n.svg", svg::RenderLineChart(c));
  }
  {
    LineChart c;
    if (ThroughputVsN(results, &c))
      out.emplace_back("throughput_vs_n.svg", svg::RenderLineChart(c));
  }
  {
    LineChart c;
    c.title = "callers sweep: cycles/s vs callers (healthy nodes)";
    if (SweepChart(results, &c, "acquire+release cycles per second",
                   [](const RowResult& row) { return row.throughput(); })) {
      out.emplace_back("callers_sweep.svg", svg::RenderLineChart(c));
    }
  }
  {
    LineChart c;
    c.title = "callers sweep: client CPU per cycle vs callers (healthy nodes)";
    if (SweepChart(results, &c, "user+sys CPU per cycle",
                   [](const RowResult& row) { return row.cpu_us_per_cycle(); })) {
      c.y.format = FormatMicros;
      c.y.log = true;  // blocking callers at 256 cost 10-100 x the async path
      out.emplace_back("callers_sweep_cpu.svg", svg::RenderLineChart(c));
    }
  }
  {
    LineChart c;
    std::string file;
    if (LatencyCdf(results, &c, &file)) out.emplace_back(file, svg::RenderLineChart(c));
  }
  {
    LineChart c;
    if (HandoffCdf(results, &c)) out.emplace_back("handoff_cdf.svg", svg::RenderLineChart(c));
  }
  {
    LineChart c;
    if (SpreadChart(results, &c)) out.emplace_back("spread_p50.svg", svg::RenderLineChart(c));
  }
  for (auto& plot : RenderBackendPlots(results)) out.push_back(std::move(plot));
  return out;
}

absl::Status WritePlots(const BenchResults& results, const std::string& dir,
                        std::vector<std::string>* written) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  for (const auto& [name, svg] : RenderPlots(results)) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << svg;
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
    written->push_back(path);
  }
  return absl::OkStatus();
}

}  // namespace redlock::bench
