#include "bench/results.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/spread_profiles.h"

namespace redlock::bench {

bool RowResult::memory_flat() const {
  if (!memory_tracked || rss_start_kb < 0 || rss_mid_kb < 0 || rss_end_kb < 0) return false;
  return rss_second_half_growth_kb() <= std::max<int64_t>(512, rss_start_kb / 100) &&
         rss_growth_kb() <= std::max<int64_t>(2048, rss_start_kb / 20);
}

RowResult RowIdentity(std::string impl, std::string family, std::string variant, int callers) {
  RowResult row;
  row.impl = std::move(impl);
  row.family = std::move(family);
  row.variant = std::move(variant);
  row.callers = callers;
  return row;
}

RowResult LibraryRowIdentity(std::string impl, std::string variant, int callers) {
  return RowIdentity(std::move(impl), kLibrary, std::move(variant), callers);
}

double RowResult::cpu_us_per_cycle() const {
  if (usage_cycles <= 0) return NAN;
  return static_cast<double>(usage.user_us + usage.sys_us) / static_cast<double>(usage_cycles);
}

double RowResult::csw_per_cycle() const {
  if (usage_cycles <= 0) return NAN;
  return static_cast<double>(usage.voluntary_csw + usage.involuntary_csw) /
         static_cast<double>(usage_cycles);
}

double RowResult::allocs_per_cycle() const {
  if (usage_cycles <= 0 || usage.allocations < 0) return NAN;
  return static_cast<double>(usage.allocations) / static_cast<double>(usage_cycles);
}

double RowResult::server_cpu_us_per_cycle() const {
  if (server_cpu_us < 0 || successes <= 0) return NAN;
  return static_cast<double>(server_cpu_us) / static_cast<double>(successes);
}

const RowResult* GroupResult::Reference() const {
  for (const RowResult& r : rows) {
    if (r.family == reference && r.ran() && !r.cycle.empty()) return &r;
  }
  return nullptr;
}

const RowResult* GroupResult::Limit(int callers) const {
  const RowResult* most = nullptr;
  for (const RowResult& r : rows) {
    if (r.family != kPipelinedLimit || !r.ran() || r.throughput() <= 0) continue;
    if (r.callers == callers) return &r;
    if (most == nullptr || r.callers > most->callers) most = &r;
  }
  return most;
}

double RatioToLimit(const RowResult& row, const GroupResult& group) {
  const RowResult* limit = group.Limit(row.callers);
  if (limit == nullptr || !row.ran()) return NAN;
  return row.throughput() / limit->throughput();
}

const RowResult* GroupResult::Floor() const {
  for (const RowResult& r : rows) {
    if (r.family == kFloor && r.ran() && !r.cycle.empty()) return &r;
  }
  return nullptr;
}

const RowResult* GroupResult::Find(const std::string& family, const std::string& variant,
                                   int callers) const {
  for (const RowResult& r : rows) {
    if (r.family == family && r.variant == variant && r.callers == callers && r.ran()) return &r;
  }
  return nullptr;
}

namespace {

const GroupResult* FindGroup(const BenchResults& results, const std::string& scenario, int n) {
  for (const GroupResult& g : results.groups) {
    if (g.scenario == scenario && g.n == n && !g.skipped) return &g;
  }
  return nullptr;
}

TargetCheck NotMeasured(std::string figure, std::string target) {
  return TargetCheck{std::move(figure), std::move(target), "n/a", "n/a"};
}

}  // namespace

// The N=5 one-caller acquire+release p50 over the floor's, measured before
// the engine rewrite of issue 14: the "no regression" reference. The median
// of 14 quick runs of `--scenario healthy --n 5` at commit 769a0f5's library
// on the 2-core machine with little else running (floor 22-23 us, ratios
// 6.8-10.4; the pipelined limit with one chain measured the same). Under
// load the floor slows down more than the quorum does and the ratio falls
// (bench/README.md).
constexpr double kOneCallerN5RatioBefore = 7.7;
// Run-to-run noise allowed on top of it: 13 of those 14 runs were within it.
constexpr double kOneCallerN5Noise = 1.25;

std::vector<TargetCheck> CheckTargets(const BenchResults& results) {
  std::vector<TargetCheck> out;
  const int many = results.info.callers_many;
  const std::string note_many = many != 64 ? " (callers != 64)" : "";

  // 1. N=5, one caller, acquire+release p50 <= 1.15 x the pipelined limit
  // with one chain (the same commands from a client that costs nothing, in
  // the same group: issue 41; the older "<= 1.5 x the floor" is out of reach
  // of any client when five servers share two cores, bench/README.md), and
  // no regression against the floor ratio measured before the rewrite.
  {
    TargetCheck t =
        NotMeasured("N=5, 1 caller, acquire+release p50", "<= 1.15 x the pipelined limit x1");
    const double no_regression = kOneCallerN5RatioBefore * kOneCallerN5Noise;
    TargetCheck r = NotMeasured(
        "N=5, 1 caller, p50 / floor: no regression",
        absl::StrFormat("<= %.1f x floor (%.1f before the rewrite + %.0f%%)", no_regression,
                        kOneCallerN5RatioBefore, 100 * (kOneCallerN5Noise - 1)));
    const GroupResult* g = FindGroup(results, "healthy", 5);
    const RowResult* lib = g ? g->Find(kLibrary, "", 1) : nullptr;
    const RowResult* floor = g ? g->Floor() : nullptr;
    const RowResult* limit = g ? g->Find(kPipelinedLimit, "", 1) : nullptr;
    const auto p50 = [](const RowResult* row) {
      return static_cast<double>(std::max<int64_t>(1, row->cycle.Quantile(0.5)));
    };
    if (lib && limit && !lib->cycle.empty() && !limit->cycle.empty()) {
      const double ratio = p50(lib) / p50(limit);
      t.measured = absl::StrFormat("%.2f x limit (%.0f us vs %.0f us)", ratio, p50(lib) / 1e3,
                                   p50(limit) / 1e3);
      if (floor != nullptr && !floor->cycle.empty()) {
        absl::StrAppend(&t.measured, absl::StrFormat("; the floor: %.0f us, library %.2f x it",
                                                     p50(floor) / 1e3, p50(lib) / p50(floor)));
      }
      t.status = ratio <= 1.15 ? "met" : "missed";
    }
    if (lib && floor && !lib->cycle.empty() && !floor->cycle.empty()) {
      const double ratio = p50(lib) / p50(floor);
      r.measured = absl::StrFormat("%.2f x floor", ratio);
      r.status = ratio <= no_regression ? "met" : "missed";
    }
    out.push_back(t);
    out.push_back(r);
  }
  // 2. Many blocking callers beat what a C++ user writes without the
  // library (the sequential baseline with as many threads, each with its
  // own connections) in cycles/s and in the machine's CPU per cycle (client
  // plus servers: a library caller is woken by the library's thread, a
  // naive thread by the kernel in the server's context, so client CPU alone
  // moves the cost, not lowers it: issue 41 item 4), N=1 and N=5, with the
  // client's share beside it; and a blocking cycle costs at most 2.6
  // context switches (one sleep and one wake per call, nothing more).
  for (int n : {1, 5}) {
    TargetCheck t = NotMeasured(
        absl::StrCat("N=", n, ", ", many, " blocking callers vs naive hiredis per thread"),
        "more cycles/s and less machine CPU per cycle (client + servers)");
    TargetCheck csw =
        NotMeasured(absl::StrCat("N=", n, ", ", many, " blocking callers, context switches"),
                    "<= 2.6 per cycle");
    const GroupResult* g = FindGroup(results, "healthy", n);
    const RowResult* blocking = g ? g->Find(kLibrary, "", many) : nullptr;
    const RowResult* naive = g ? g->Find(kSequential, "", many) : nullptr;
    if (blocking && naive && naive->throughput() > 0 &&
        std::isfinite(blocking->cpu_us_per_cycle()) && std::isfinite(naive->cpu_us_per_cycle())) {
      const double rate = blocking->throughput() / naive->throughput();
      const double client = blocking->cpu_us_per_cycle() / naive->cpu_us_per_cycle();
      t.measured = absl::StrFormat("%.2f x its cycles/s (%.0f/s vs %.0f/s)", rate,
                                   blocking->throughput(), naive->throughput());
      const double lib_srv = blocking->server_cpu_us_per_cycle();
      const double naive_srv = naive->server_cpu_us_per_cycle();
      if (std::isfinite(lib_srv) && std::isfinite(naive_srv)) {
        const double lib_all = blocking->cpu_us_per_cycle() + lib_srv;
        const double naive_all = naive->cpu_us_per_cycle() + naive_srv;
        absl::StrAppend(
            &t.measured,
            absl::StrFormat(", %.2f x its machine CPU per cycle (%.1f us vs %.1f us); client "
                            "alone %.2f x (%.1f us vs %.1f us)%s",
                            lib_all / naive_all, lib_all, naive_all, client,
                            blocking->cpu_us_per_cycle(), naive->cpu_us_per_cycle(), note_many));
        t.status = rate > 1 && lib_all < naive_all ? "met" : "missed";
      } else {
        absl::StrAppend(&t.measured,
                        absl::StrFormat("; client CPU %.2f x (%.1f us vs %.1f us), the servers' "
                                        "CPU not measured (nodes not the bench's own)%s",
                                        client, blocking->cpu_us_per_cycle(),
                                        naive->cpu_us_per_cycle(), note_many));
      }
    }
    if (blocking && std::isfinite(blocking->csw_per_cycle())) {
      csw.measured =
          absl::StrFormat("%.2f (voluntary %.2f)%s", blocking->csw_per_cycle(),
                          static_cast<double>(blocking->usage.voluntary_csw) /
                              static_cast<double>(std::max<int64_t>(1, blocking->usage_cycles)),
                          note_many);
      csw.status = blocking->csw_per_cycle() <= 2.6 ? "met" : "missed";
    }
    out.push_back(t);
    out.push_back(csw);
  }
  // 3. N=5, many async chains get >= 0.9 x the pipelined limit.
  {
    TargetCheck t = NotMeasured(absl::StrCat("N=5, ", many, " async chains vs the pipelined limit"),
                                ">= 0.9 x limit cycles/s");
    const GroupResult* g = FindGroup(results, "healthy", 5);
    const RowResult* async = g ? g->Find(kLibrary, kAsync, many) : nullptr;
    const RowResult* limit = g ? g->Limit(many) : nullptr;
    if (async && limit) {
      const double ratio = async->throughput() / limit->throughput();
      t.measured = absl::StrFormat("%.2f x limit (%.0f/s vs %.0f/s)%s", ratio, async->throughput(),
                                   limit->throughput(), note_many);
      // Where the difference goes: with every chain busy, cycles/s is what
      // one cycle costs the machine, the client's share and the servers'.
      const double lib_srv = async->server_cpu_us_per_cycle();
      const double limit_srv = limit->server_cpu_us_per_cycle();
      if (std::isfinite(async->cpu_us_per_cycle()) && std::isfinite(limit->cpu_us_per_cycle()) &&
          std::isfinite(lib_srv) && std::isfinite(limit_srv)) {
        absl::StrAppend(
            &t.measured,
            absl::StrFormat(
                "; per cycle client %.1f us vs %.1f us, servers %.1f us "
                "vs %.1f us, machine %.2f x",
                async->cpu_us_per_cycle(), limit->cpu_us_per_cycle(), lib_srv, limit_srv,
                (async->cpu_us_per_cycle() + lib_srv) / (limit->cpu_us_per_cycle() + limit_srv)));
      }
      t.status = ratio >= 0.9 ? "met" : "missed";
    }
    out.push_back(t);
  }
  // 4. Client CPU per cycle of the async path with many chains: <= 10 us
  // (N=1) and <= 50 us (N=5).
  for (const auto& [n, budget] : {std::pair<int, double>{1, 10}, std::pair<int, double>{5, 50}}) {
    TargetCheck t =
        NotMeasured(absl::StrCat("N=", n, ", ", many, " async chains, client CPU per cycle"),
                    absl::StrFormat("<= %.0f us", budget));
    const GroupResult* g = FindGroup(results, "healthy", n);
    const RowResult* async = g ? g->Find(kLibrary, kAsync, many) : nullptr;
    if (async && std::isfinite(async->cpu_us_per_cycle())) {
      const double a = async->cpu_us_per_cycle();
      t.measured = absl::StrFormat("%.1f us%s", a, note_many);
      t.status = a <= budget ? "met" : "missed";
    }
    out.push_back(t);
  }
  // 4b. The co_await form costs about what the async path costs.
  for (int n : {1, 5}) {
    TargetCheck t = NotMeasured(
        absl::StrCat("N=", n, ", ", many, " co_await chains vs ", many, " async chains"),
        ">= 0.9 x cycles/s, <= 1.15 x CPU per cycle");
    const GroupResult* g = FindGroup(results, "healthy", n);
    const RowResult* async = g ? g->Find(kLibrary, kAsync, many) : nullptr;
    const RowResult* coro = g ? g->Find(kLibrary, kCoro, many) : nullptr;
    if (async && coro && async->throughput() > 0 && std::isfinite(async->cpu_us_per_cycle()) &&
        std::isfinite(coro->cpu_us_per_cycle())) {
      const double rate = coro->throughput() / async->throughput();
      const double cpu = coro->cpu_us_per_cycle() / async->cpu_us_per_cycle();
      t.measured =
          absl::StrFormat("%.2f x cycles/s, %.2f x CPU per cycle (%.1f us vs %.1f us)%s", rate, cpu,
                          coro->cpu_us_per_cycle(), async->cpu_us_per_cycle(), note_many);
      t.status = rate >= 0.9 && cpu <= 1.15 ? "met" : "missed";
    }
    out.push_back(t);
  }
  // 5. N=5, one node stopped: p50 within 1.2 x healthy, 100 % success, flat memory.
  {
    TargetCheck t =
        NotMeasured("N=5, one node SIGSTOPped", "p50 <= 1.2 x healthy, 100% success, flat memory");
    const GroupResult* g = FindGroup(results, "stopped", 5);
    const RowResult* healthy = g ? g->Find(kLibrary, "no fault", 1) : nullptr;
    const RowResult* one = g ? g->Find(kLibrary, "", 1) : nullptr;
    const RowResult* loaded = g ? g->Find(kLibrary, "", many) : nullptr;
    if (healthy && one && !healthy->cycle.empty() && !one->cycle.empty()) {
      const double ratio = static_cast<double>(one->cycle.Quantile(0.5)) /
                           static_cast<double>(std::max<int64_t>(1, healthy->cycle.Quantile(0.5)));
      double success = one->success_rate();
      if (loaded) success = std::min(success, loaded->success_rate());
      bool flat = true;
      bool tracked = false;
      for (const RowResult* r : {one, loaded}) {
        if (r && r->memory_tracked) {
          tracked = true;
          flat = flat && r->memory_flat();
        }
      }
      t.measured = absl::StrFormat("p50 %.2f x healthy, %.2f%% success, memory %s", ratio,
                                   100 * success, tracked ? (flat ? "flat" : "grew") : "n/a");
      t.status = ratio <= 1.2 && success >= 1.0 && flat ? "met" : "missed";
    }
    out.push_back(t);
  }
  // 6. Contended hot lock: hand-off p50 <= 3 x a single-node round trip.
  {
    TargetCheck t = NotMeasured("hot resource, hand-off p50 (notifications on)",
                                "<= 3 x single-node round trip");
    const GroupResult* g = nullptr;
    for (int n : {5, 3, 7, 1}) {
      if ((g = FindGroup(results, "hot", n)) != nullptr) break;
    }
    const RowResult* on = nullptr;
    if (g) {
      for (const RowResult& r : g->rows) {
        if (r.variant == "notify=on" && r.ran()) on = &r;
      }
    }
    const RowResult* floor = g ? g->Floor() : nullptr;
    if (on && floor && !on->handoff.empty() && !floor->acquire.empty()) {
      const double ratio = static_cast<double>(on->handoff.Quantile(0.5)) /
                           static_cast<double>(std::max<int64_t>(1, floor->acquire.Quantile(0.5)));
      t.figure = absl::StrCat("N=", g->n, " hot resource, hand-off p50 (notifications on)");
      const double rtt = static_cast<double>(std::max<int64_t>(1, floor->acquire.Quantile(0.5)));
      t.measured = absl::StrFormat(
          "%.1f x round trip (%.0f us; round trip %.0f us); from the Release call: %.1f x (%.0f "
          "us)",
          ratio, on->handoff.Quantile(0.5) / 1e3, rtt / 1e3,
          static_cast<double>(on->handoff_call.Quantile(0.5)) / rtt,
          on->handoff_call.Quantile(0.5) / 1e3);
      t.status = ratio <= 3 ? "met" : "missed";
    }
    out.push_back(t);
  }
  // 7. Latency spread: the library's acquire+release within 1.1 x (p50) and
  // 1.3 x (p99) of the model (the q-th nearest round trip, by PING, same
  // proxies, same group), every built-in profile; sequential pays the sum.
  {
    std::vector<std::string> seq_parts;
    bool seq_ok = true;
    bool any = false;
    for (const SpreadProfile& p : BuiltInSpreadProfiles()) {
      const GroupResult* g = nullptr;
      for (const GroupResult& x : results.groups) {
        if (x.scenario == "spread" && x.variant == p.name && !x.skipped) g = &x;
      }
      if (g == nullptr) continue;
      any = true;
      TargetCheck t =
          NotMeasured(absl::StrCat("spread ", p.name, ": library 1 caller vs the model"),
                      "acq+rel p50 <= 1.1 x model, p99 <= 1.3 x");
      const RowResult* model = g->Find(kModel, "", 1);
      const RowResult* lib = g->Find(kLibrary, "", 1);
      if (model && lib && !model->cycle.empty() && !lib->cycle.empty()) {
        auto ratio = [&](const RowResult* r, double q) {
          return static_cast<double>(r->cycle.Quantile(q)) /
                 static_cast<double>(std::max<int64_t>(1, model->cycle.Quantile(q)));
        };
        const double p50 = ratio(lib, 0.5);
        const double p99 = ratio(lib, 0.99);
        t.measured =
            absl::StrFormat("p50 %.2f x (%s vs %s), p99 %.2f x", p50,
                            absl::StrFormat("%.0f us", lib->cycle.Quantile(0.5) / 1e3),
                            absl::StrFormat("%.0f us", model->cycle.Quantile(0.5) / 1e3), p99);
        if (const RowResult* limit = g->Find(kPipelinedLimit, "", 1);
            limit != nullptr && !limit->cycle.empty()) {
          absl::StrAppend(&t.measured, absl::StrFormat("; the pipelined limit x1: p50 %.2f x",
                                                       ratio(limit, 0.5)));
        }
        t.status = p50 <= 1.1 && p99 <= 1.3 ? "met" : "missed";
      }
      out.push_back(t);
      const RowResult* seq = g->Find(kSequential, "", 1);
      auto sum = g->figures.find("model_sequential_p50_us");
      if (seq != nullptr && !seq->cycle.empty() && sum != g->figures.end() && sum->second > 0) {
        const double r = seq->cycle.Quantile(0.5) / 1e3 / sum->second;
        seq_parts.push_back(absl::StrFormat("%s %.2f x", p.name, r));
        seq_ok = seq_ok && r >= 0.9 && r <= 1.2;
      } else {
        seq_parts.push_back(absl::StrCat(p.name, " n/a"));
        seq_ok = false;
      }
    }
    if (!any) {
      out.push_back(NotMeasured("latency spread (--scenario spread), every built-in profile",
                                "library p50 <= 1.1 x model, p99 <= 1.3 x"));
    } else {
      TargetCheck t{"spread: sequential acq+rel p50 vs the sum of round trips",
                    "0.9-1.2 x the sum (nodes asked alone)", absl::StrJoin(seq_parts, ", "),
                    seq_ok ? "met" : "missed"};
      out.push_back(t);
    }
  }
  // 8. One fleet's capacity: reported (the README says when to shard).
  {
    TargetCheck t = NotMeasured("one fleet's capacity (--processes P)",
                                "reported, with the servers' CPU per cycle");
    for (const GroupResult& g : results.groups) {
      if (g.scenario != "processes" || g.skipped) continue;
      auto peak = g.figures.find("peak_cycles_per_s");
      auto node = g.figures.find("server_cpu_us_per_cycle_per_node");
      if (peak == g.figures.end() || node == g.figures.end()) continue;
      t.figure = absl::StrCat("N=", g.n, " one fleet's capacity (--processes P)");
      t.measured = absl::StrFormat(
          "peak %.0f/s (%.0f processes); servers' CPU %.1f us per cycle, %.1f us per node: one "
          "node caps the fleet at about %.0fk/s per core",
          peak->second, g.figures.at("peak_processes"), g.figures.at("server_cpu_us_per_cycle"),
          node->second, 1e3 / node->second);
      t.status = "met";
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace redlock::bench
