// The verdict table, its JSON form and the index page (chaos/run/report.h).

#include "chaos/run/report.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/svg.h"

namespace redlock::chaos {
namespace {

std::string Shorten(std::string s, size_t n) {
  if (s.size() <= n) return s;
  s.resize(n - 3);
  return s + "...";
}

}  // namespace

std::string FormatTable(const std::vector<ScenarioResult>& results, int properties) {
  // The scenario column fits the longest name (28 at least).
  int w = 28;
  for (const ScenarioResult& r : results) w = std::max(w, static_cast<int>(r.name.size()));
  std::string out = absl::StrFormat("%-*s %-46s %6s", w, "scenario", "configuration", "ops");
  for (int p = 0; p < properties; ++p)
    absl::StrAppend(&out, absl::StrFormat(" %4s", HarnessPropertyName(p)));
  absl::StrAppend(&out, absl::StrFormat(" %6s  %-26s %s\n", "avail", "expected", "verdict"));
  out += std::string(static_cast<size_t>(97 + 5 * properties + w), '-') + "\n";
  for (const ScenarioResult& r : results) {
    std::string verdict = r.skipped ? "SKIP" : r.ok ? "OK" : "FAIL";
    absl::StrAppend(&out, absl::StrFormat("%-*s %-46s %6s", w, r.name, Shorten(r.config, 46),
                                          r.skipped ? "-" : absl::StrCat(r.counts.invokes)));
    for (int p = 0; p < properties; ++p) {
      absl::StrAppend(
          &out, absl::StrFormat(
                    " %4s", r.skipped ? "-" : absl::StrCat(r.violations[static_cast<size_t>(p)])));
    }
    absl::StrAppend(
        &out, absl::StrFormat(" %6s  %-26s %s%s\n",
                              r.skipped ? "-" : absl::StrFormat("%.1f%%", 100.0 * r.availability),
                              Shorten(r.expect.Describe(), 26), verdict,
                              r.skipped ? absl::StrCat(" (", r.skip_reason, ")") : ""));
  }
  return out;
}

std::string FormatJson(const std::vector<ScenarioResult>& results, uint64_t seed,
                       absl::Duration total) {
  nlohmann::json doc;
  doc["seed"] = seed;
  doc["seconds"] = absl::ToDoubleSeconds(total);
  nlohmann::json arr = nlohmann::json::array();
  bool all_ok = true;
  for (const ScenarioResult& r : results) {
    nlohmann::json j;
    j["scenario"] = r.name;
    j["configuration"] = r.config;
    j["expected"] = r.expect.Describe();
    j["verdict"] = r.skipped ? "SKIP" : r.ok ? "OK" : "FAIL";
    if (r.skipped) j["skip_reason"] = r.skip_reason;
    if (!r.why.empty()) j["why"] = r.why;
    if (!r.error.empty()) j["error"] = r.error;
    j["operations"] = r.counts.invokes;
    j["grants"] = r.counts.grants;
    j["fails"] = r.counts.fails;
    j["uses"] = r.counts.uses;
    j["rejected_writes"] = r.counts.rejected_writes;
    j["nemesis_events"] = r.counts.nemesis;
    j["availability"] = r.availability;
    nlohmann::json viol;
    for (int p = 0; p < kNumHarnessProperties; ++p)
      viol[HarnessPropertyName(p)] = r.violations[static_cast<size_t>(p)];
    j["violations"] = viol;
    j["examples"] = r.examples;
    j["notes"] = r.notes;
    j["seconds"] = absl::ToDoubleSeconds(r.elapsed);
    if (!r.kept_dir.empty()) j["history_dir"] = r.kept_dir;
    all_ok = all_ok && r.ok;
    arr.push_back(std::move(j));
  }
  doc["scenarios"] = std::move(arr);
  doc["ok"] = all_ok;
  return doc.dump(2) + "\n";
}

std::string FormatIndexHtml(const std::vector<ScenarioResult>& results, uint64_t seed,
                            absl::Duration total) {
  auto esc = [](absl::string_view text) { return svg::XmlEscape(text); };
  bool all_ok = true;
  for (const ScenarioResult& r : results) all_ok = all_ok && r.ok;
  std::string out =
      absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
                   "<title>redlock-chaos, seed ", seed, "</title>\n</head>\n<body>\n",
                   "<h1>redlock-chaos: ", results.size(), " scenarios, seed ", seed, "</h1>\n<p>",
                   all_ok ? "Every verdict as expected" : "<b>Some verdicts not as expected</b>",
                   absl::StrFormat(", in %.1f s. ", absl::ToDoubleSeconds(total)),
                   "Each picture: a lane per client (holds, failed attempts), a lane per node (the "
                   "faults), the violations marked across the lanes; hover for details.</p>\n");
  absl::StrAppend(&out,
                  "<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\">\n<tr><th>scenario"
                  "</th><th>configuration</th><th>expected</th><th>verdict</th>");
  for (int p = 0; p < kNumHarnessProperties; ++p) {
    absl::StrAppend(&out, "<th>", HarnessPropertyName(p), "</th>");
  }
  out += "</tr>\n";
  auto verdict = [](const ScenarioResult& r) -> std::string {
    if (r.skipped) return "SKIP";
    return r.ok ? "<b style=\"color:#2ca02c\">OK</b>" : "<b style=\"color:#d62728\">FAIL</b>";
  };
  for (const ScenarioResult& r : results) {
    absl::StrAppend(&out, "<tr><td><a href=\"#", esc(r.name), "\">", esc(r.name), "</a></td><td>",
                    esc(r.config), "</td><td>", esc(r.expect.Describe()), "</td><td>", verdict(r),
                    "</td>");
    for (int p = 0; p < kNumHarnessProperties; ++p) {
      absl::StrAppend(&out, "<td>", r.skipped ? "-" : absl::StrCat(r.violations[p]), "</td>");
    }
    out += "</tr>\n";
  }
  out += "</table>\n";
  for (const ScenarioResult& r : results) {
    absl::StrAppend(&out, "<h2 id=\"", esc(r.name), "\">", esc(r.name), ": ", verdict(r),
                    "</h2>\n<p>", esc(r.config), "; expected: ", esc(r.expect.Describe()));
    if (!r.why.empty()) absl::StrAppend(&out, "<br>why: ", esc(r.why));
    if (r.skipped) absl::StrAppend(&out, "<br>skipped: ", esc(r.skip_reason));
    out += "</p>\n";
    if (!r.plot_path.empty()) {
      const std::string file = std::filesystem::path(r.plot_path).filename().string();
      absl::StrAppend(&out, "<p><a href=\"", esc(file), "\"><img src=\"", esc(file),
                      "\" alt=\"timeline of ", esc(r.name), "\" width=\"100%\"></a></p>\n");
    } else if (!r.skipped) {
      out += "<p>no picture (the run left no history)</p>\n";
    }
  }
  out += "</body>\n</html>\n";
  return out;
}

std::string FormatList(const std::vector<Scenario>& scenarios) {
  std::string out;
  for (const Scenario& s : scenarios) {
    absl::StrAppend(&out, s.name, s.quick ? "  [quick]" : "", s.needs_root() ? "  [root]" : "",
                    "\n  config:   ", s.config, "\n  expected: ", s.expect.Describe(), "\n  ",
                    s.summary, "\n");
    if (!s.schedule.empty()) {
      std::string sched = DescribeSchedule(s.schedule);
      absl::StrAppend(&out, "  schedule: ", absl::StrReplaceAll(sched, {{"\n", "\n            "}}),
                      "\n");
    }
    if (!s.file.empty()) absl::StrAppend(&out, "  file:     ", s.file, "\n");
    out += "\n";
  }
  return out;
}

std::string FormatComparison(const std::vector<std::string>& clients,
                             const std::vector<std::vector<ScenarioResult>>& results) {
  std::string out = "| scenario |";
  for (const std::string& c : clients) absl::StrAppend(&out, " ", c, " |");
  out += "\n| --- |";
  for (size_t i = 0; i < clients.size(); ++i) out += " --- |";
  out += "\n";
  const size_t rows = results.empty() ? 0 : results[0].size();
  for (size_t r = 0; r < rows; ++r) {
    absl::StrAppend(&out, "| `", results[0][r].name, "` |");
    for (size_t c = 0; c < clients.size(); ++c) {
      const ScenarioResult& x = results[c][r];
      std::string cell;
      if (x.skipped) {
        cell = absl::StrCat("skipped (", x.skip_reason, ")");
      } else if (!x.error.empty()) {
        cell = "error";
      } else {
        std::vector<std::string> v;
        for (int p = 0; p < kNumHarnessProperties; ++p) {
          if (x.violations[static_cast<size_t>(p)] > 0) {
            v.push_back(absl::StrCat("**", HarnessPropertyName(p), "** ",
                                     x.violations[static_cast<size_t>(p)]));
          }
        }
        cell = v.empty() ? "clean" : absl::StrJoin(v, ", ");
      }
      absl::StrAppend(&out, " ", cell, " |");
    }
    out += "\n";
  }
  return out;
}

std::string FormatKinds() {
  std::string out;
  std::string family;
  for (const FaultKind* k : AllFaultKinds()) {
    const KindInfo& i = k->info();
    if (i.family != family) {
      family = i.family;
      absl::StrAppend(&out, family == i.family && out.empty() ? "" : "\n", "== ", family, "\n");
    }
    std::vector<std::string> targets;
    if (i.takes_nodes) targets.push_back(absl::StrCat("nodes (default ", i.nodes_default, ")"));
    if (i.takes_clients)
      targets.push_back(absl::StrCat("clients (default ", i.clients_default, ")"));
    absl::StrAppend(&out, i.name, i.lasting ? "  [lasting" : "  [instant",
                    i.lasting && !i.explore_duration.empty()
                        ? absl::StrCat(", explored for ", i.explore_duration)
                        : "",
                    i.explore_weight > 0 ? absl::StrCat(", explore weight ", i.explore_weight)
                                         : ", not explored",
                    "]\n  ", i.summary, "\n");
    if (!targets.empty()) absl::StrAppend(&out, "  acts on: ", absl::StrJoin(targets, ", "), "\n");
    for (const ParamSpec& p : i.params) {
      absl::StrAppend(&out, "  ", p.name, " = ",
                      p.default_value.empty() ? "(required)" : p.default_value,
                      p.explore.empty() ? "" : absl::StrCat("  (explored: ", p.explore, ")"),
                      p.help.empty() ? "" : absl::StrCat("  ", p.help), "\n");
    }
  }
  return out;
}

}  // namespace redlock::chaos
