// redlock-sim: runs the real client in the deterministic simulated world
// over configurations and fault schedules drawn from seeds, checks every
// run, shrinks every finding to a small case file that --replay runs
// again exactly (and, where the lab can have it, a scenario file for
// redlock-chaos --file). sim/README.md.
//
//   redlock-sim --runs 1000 --seed 1
//   redlock-sim --minutes 2 --seed 7 --config nodes=plain/plain/plain,primitive=rwlock
//   redlock-sim --replay sim-findings/S9-1234.json --history h.jsonl --trace t.jsonl

#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "chaos/scenarios/scenario_file.h"
#include "common/flags.h"
#include "sim/case_file.h"
#include "sim/world.h"

ABSL_FLAG(int, runs, 0, "Runs to make (seeds S, S+1, ...); with --minutes: at most this many.");
ABSL_FLAG(uint64_t, seed, 1, "The first run's seed.");
ABSL_FLAG(double, minutes, 0, "Stop starting runs after this many minutes of wall time.");
ABSL_FLAG(std::string, config, "",
          "Force configuration fields, k=v,... (sim/README.md lists them).");
ABSL_FLAG(std::string, replay, "", "Run a case file again and say whether its property recurs.");
ABSL_FLAG(std::string, out, "sim-findings", "Where shrunk cases and scenario files go.");
ABSL_FLAG(std::string, trace, "",
          "Write the nodes' commands and replies as JSON Lines (with --replay or one run).");
ABSL_FLAG(std::string, history, "", "Write the run's history (with --replay or one run).");
ABSL_FLAG(std::string, where, "",
          "Run only configurations with these values of the report's dimensions, "
          "dim=v|v,... (primitive=semaphore,node_kind=cluster); --runs counts those.");
ABSL_FLAG(int, shrink_runs, 40, "Reruns spent shrinking each finding.");
ABSL_FLAG(int, max_findings, 8, "Findings shrunk per command (the rest are listed).");
ABSL_FLAG(bool, stop_at_finding, false,
          "Start no run after the first run with a finding (scripts/mutants.sh's budget).");
ABSL_FLAG(bool, verbose, false, "A line per run.");

namespace redlock::sim {
namespace {

constexpr char kUsage[] =
    "usage: redlock-sim --runs K [--seed S] [--minutes M] [--config k=v,...] [--out DIR]\n"
    "       redlock-sim --replay CASE.json [--history FILE] [--trace FILE]\n"
    "Runs the real client in the simulated world over configurations and faults\n"
    "drawn from seeds (sim/README.md). Exit status: 0 no finding, 1 a finding,\n"
    "2 bad flags.";

struct Flags {
  int runs = 0;
  uint64_t seed = 1;
  double minutes = 0;
  std::string config;
  std::string where;
  std::string replay;
  std::string out = "sim-findings";
  std::string trace;
  std::string history;
  int shrink_runs = 40;
  int max_findings = 8;  // shrunk per command run
  bool stop_at_finding = false;
  bool verbose = false;
};

int Usage(const char* why) {
  fprintf(stderr, "redlock-sim: %s (see --help)\n", why);
  return 2;
}

class FileTrace final : public TraceSink {
 public:
  explicit FileTrace(const std::string& path) : out_(path) {}
  bool ok() const { return static_cast<bool>(out_); }
  void Line(const std::string& json) override { out_ << json << '\n'; }

 private:
  std::ofstream out_;
};

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

// The first violation of `property` in a run, described.
std::string FirstViolation(const RunOutput& out, const std::string& property) {
  for (const chaos::Violation& v : out.check.violations) {
    if (chaos::HarnessPropertyName(chaos::HarnessIndex(v.property)) == property) {
      return absl::StrCat("[", property, "] resource ", v.resource, ": ", v.description);
    }
  }
  for (const SimViolation& v : out.sim_violations) {
    if (v.property == property) return absl::StrCat("[", property, "] ", v.description);
  }
  return absl::StrCat("[", property, "]");
}

void PrintRun(const RunInput& in, const RunOutput& out) {
  printf("seed %llu: %s\n", static_cast<unsigned long long>(in.seed),
         DescribeConfig(in.config).c_str());
  printf("  %lld invokes, %lld grants, %lld events, %zu faults injected\n",
         static_cast<long long>(out.invokes), static_cast<long long>(out.grants),
         static_cast<long long>(out.events), out.injected.size());
  for (const InjectedFault& f : out.injected) {
    printf("    %8.3fs..%.3fs %s%s%s\n", static_cast<double>(f.begin) / 1e9,
           static_cast<double>(f.end) / 1e9, f.description.c_str(),
           f.may_violate
               ? absl::StrCat(" (may break ", chaos::DescribeProperties(f.may_violate), ")").c_str()
               : "",
           f.tolerated ? " (tolerated)" : "");
  }
  if (!out.error.empty()) printf("  ERROR: %s\n", out.error.c_str());
  for (const auto& [p, n] : out.violated) {
    printf("  %s violated %lld times%s\n", p.c_str(), static_cast<long long>(n),
           out.findings.count(p) ? " (FINDING: no injected fault explains it)" : " (explained)");
    printf("    %s\n", FirstViolation(out, p).c_str());
  }
  if (out.violated.empty()) printf("  every property held\n");
}

int Replay(const Flags& f) {
  absl::StatusOr<SimCase> c = ReadCaseFile(f.replay);
  if (!c.ok()) {
    fprintf(stderr, "redlock-sim: %s\n", std::string(c.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<FileTrace> trace;
  if (!f.trace.empty()) trace = std::make_unique<FileTrace>(f.trace);
  RunOutput out = RunSimulation(c->input, trace.get());
  if (!f.history.empty() && !WriteFile(f.history, out.history)) {
    fprintf(stderr, "redlock-sim: cannot write %s\n", f.history.c_str());
  }
  PrintRun(c->input, out);
  if (!c->property.empty()) {
    printf("case property %s: %s\n", c->property.c_str(),
           out.findings.count(c->property) ? "reproduced" : "NOT reproduced");
  }
  return out.findings.empty() ? 0 : 1;
}

struct Finding {
  uint64_t seed = 0;
  std::string property;
  std::string description;
  std::string config;
  std::string case_file;
  std::string scenario_file;
  std::string scenario_note;
  ShrinkLog log;
  size_t faults_before = 0, faults_after = 0;
  bool replayed = false;
};

// --where: runs only in configurations with these values of the report's
// dimensions ("primitive=semaphore,fencing=f=1|f=2"; a dimension's name with
// '_' for its spaces: node_kind=cluster). A clause matches when the
// configuration has the dimension with one of the values (node kinds: any
// node).
using Where = std::vector<std::pair<std::string, std::set<std::string>>>;
constexpr int64_t kMaxSkipsPerRun = 100000;

absl::StatusOr<Where> ParseWhere(const std::string& text) {
  Where out;
  std::set<std::string> known;
  for (const auto& [dim, value] : ConfigDimensions(DrawConfig(1))) known.insert(dim);
  known.insert("node kind");
  for (absl::string_view clause : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(clause, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[1].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", clause, "\" is not dimension=value"));
    }
    std::string dim = kv[0];
    std::replace(dim.begin(), dim.end(), '_', ' ');
    if (known.count(dim) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown dimension \"", kv[0], "\" (known: ",
                       absl::StrJoin(known, ", ",
                                     [](std::string* o, const std::string& d) {
                                       std::string x = d;
                                       std::replace(x.begin(), x.end(), ' ', '_');
                                       o->append(x);
                                     }),
                       ")"));
    }
    std::set<std::string> values;
    for (absl::string_view v : absl::StrSplit(kv[1], '|')) values.emplace(v);
    out.emplace_back(std::move(dim), std::move(values));
  }
  return out;
}

bool Matches(const Where& where, const SimConfig& c) {
  const std::vector<std::pair<std::string, std::string>> dims = ConfigDimensions(c);
  for (const auto& [dim, values] : where) {
    bool any = false;
    for (const auto& [d, v] : dims) any = any || (d == dim && values.count(v) > 0);
    if (!any) return false;
  }
  return true;
}

// CPU time of this process, seconds (the machine's other load does not count).
double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int Explore(const Flags& f) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto deadline =
      f.minutes > 0 ? t0 + std::chrono::milliseconds(static_cast<int64_t>(f.minutes * 60000))
                    : Clock::time_point::max();
  const int runs = f.runs > 0 ? f.runs : (f.minutes > 0 ? 1 << 30 : 1);
  std::map<std::string, std::map<std::string, int>> dims;
  std::map<std::string, int> faults;
  std::map<std::string, int> runs_with, runs_finding;
  std::vector<Finding> findings;
  // Findings beyond max_findings, by property: their seeds.
  std::map<std::string, std::vector<uint64_t>> unshrunk;
  int done = 0, errors = 0;
  int64_t invokes = 0, grants = 0, events = 0;
  std::unique_ptr<FileTrace> trace;
  if (!f.trace.empty()) trace = std::make_unique<FileTrace>(f.trace);
  double sim_seconds = 0;
  double run_cpu = 0;  // CPU seconds of the runs themselves (not of shrinking)
  absl::StatusOr<Where> where = ParseWhere(f.where);
  if (!where.ok()) {
    fprintf(stderr, "redlock-sim: --where: %s\n", std::string(where.status().message()).c_str());
    return 2;
  }
  // With --where, seeds whose configuration does not match are passed over
  // (at most kMaxSkipsPerRun per run made).
  uint64_t next_seed = f.seed, last_seed = f.seed;
  int64_t skipped = 0;
  for (int i = 0; i < runs && Clock::now() < deadline; ++i) {
    RunInput in;
    bool matched = false;
    for (int64_t tries = 0; tries <= kMaxSkipsPerRun && !matched; ++tries) {
      in.seed = next_seed++;
      in.config = DrawConfig(in.seed);
      if (!f.config.empty()) {
        absl::Status s = ApplyOverrides(f.config, &in.config);
        if (s.ok()) s = CheckConfig(in.config);
        if (!s.ok()) {
          fprintf(stderr, "redlock-sim: --config: %s\n", std::string(s.message()).c_str());
          return 2;
        }
      }
      matched = Matches(*where, in.config);
      if (!matched) ++skipped;
    }
    if (!matched) {
      fprintf(stderr, "redlock-sim: --where %s: no configuration matched in %lld seeds\n",
              f.where.c_str(), static_cast<long long>(kMaxSkipsPerRun + 1));
      break;
    }
    last_seed = in.seed;
    in.faults = DrawFaults(in.config, in.seed);
    in.history = !f.history.empty() && runs == 1;
    const double cpu0 = CpuSeconds();
    RunOutput out = RunSimulation(in, trace.get());
    run_cpu += CpuSeconds() - cpu0;
    ++done;
    sim_seconds += static_cast<double>(in.config.duration_ms) / 1000;
    invokes += out.invokes;
    grants += out.grants;
    events += out.events;
    errors += out.error.empty() ? 0 : 1;
    for (const auto& [dim, value] : ConfigDimensions(in.config)) ++dims[dim][value];
    for (const InjectedFault& x : out.injected) ++faults[x.kind];
    for (const auto& [p, n] : out.violated) ++runs_with[p];
    for (const std::string& p : out.findings) ++runs_finding[p];
    if (!f.history.empty() && runs == 1) WriteFile(f.history, out.history);
    if (f.verbose) {
      printf("run %d seed %llu: %lld grants, %zu faults%s%s\n", i + 1,
             static_cast<unsigned long long>(in.seed), static_cast<long long>(out.grants),
             out.injected.size(), out.findings.empty() ? "" : "  FINDING ",
             absl::StrJoin(out.findings, ",").c_str());
      fflush(stdout);
    }
    const bool stop = f.stop_at_finding && !out.findings.empty();
    for (const std::string& p : out.findings) {
      if (static_cast<int>(findings.size()) >= f.max_findings) {
        unshrunk[p].push_back(in.seed);
        continue;
      }
      Finding x;
      x.seed = in.seed;
      x.property = p;
      x.description = FirstViolation(out, p);
      SimCase c;
      c.input = in;
      c.property = p;
      c.summary = x.description;
      x.faults_before = in.faults.size();
      SimCase shrunk = Shrink(
          c,
          [&](const RunInput& candidate) {
            RunInput quick = candidate;
            quick.history = false;
            return RunSimulation(quick).findings.count(p) > 0;
          },
          f.shrink_runs, &x.log);
      RunOutput again = RunSimulation(shrunk.input);
      x.replayed = again.findings.count(p) > 0;
      if (x.replayed) shrunk.summary = FirstViolation(again, p);
      x.faults_after = shrunk.input.faults.size();
      x.config = DescribeConfig(shrunk.input.config);
      std::error_code ec;
      std::filesystem::create_directories(f.out, ec);
      x.case_file = absl::StrCat(f.out, "/", p, "-", in.seed, ".json");
      if (!WriteFile(x.case_file, WriteCase(shrunk))) x.case_file += " (could not be written)";
      absl::StatusOr<chaos::Scenario> scenario = ToScenario(shrunk);
      if (scenario.ok()) {
        x.scenario_file = absl::StrCat(f.out, "/", p, "-", in.seed, ".yaml");
        if (!WriteFile(x.scenario_file, chaos::WriteScenario(*scenario))) x.scenario_file.clear();
      } else {
        x.scenario_note = std::string(scenario.status().message());
      }
      findings.push_back(std::move(x));
    }
    if (stop) break;
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  // The table.
  printf(
      "runs: %d (seeds %llu..%llu%s), %d simulator errors, %.1f s wall, %.1f runs/s "
      "(%.0f runs/min), %.0f s simulated\n",
      done, static_cast<unsigned long long>(f.seed), static_cast<unsigned long long>(last_seed),
      skipped > 0 ? absl::StrCat("; ", skipped, " passed over by --where ", f.where).c_str() : "",
      errors, wall, done / std::max(wall, 1e-9), 60 * done / std::max(wall, 1e-9), sim_seconds);
  printf("       %.1f s CPU in the runs (%.0f runs per CPU-minute; shrinking not counted)\n",
         run_cpu, 60 * done / std::max(run_cpu, 1e-9));
  printf("       %lld invokes, %lld grants, %lld events\n\n", static_cast<long long>(invokes),
         static_cast<long long>(grants), static_cast<long long>(events));
  printf("configurations drawn, per dimension (runs; node kinds per node):\n");
  for (const auto& [dim, values] : dims) {
    std::vector<std::string> parts;
    for (const auto& [v, n] : values) parts.push_back(absl::StrCat(v, " ", n));
    printf("  %-14s %s\n", dim.c_str(), absl::StrJoin(parts, ", ").c_str());
  }
  printf("\nfaults injected, by kind:\n");
  for (const auto& [k, n] : faults) printf("  %-20s %d\n", k.c_str(), n);
  printf(
      "\nviolations, by property: runs with one (of which findings: not explained by the "
      "faults the run injected)\n");
  for (const std::string& p : PropertyNames()) {
    printf("  %-3s %6d runs (%d findings)\n", p.c_str(), runs_with[p], runs_finding[p]);
  }
  if (runs_finding.count("ERROR")) printf("  ERROR %d runs\n", runs_finding["ERROR"]);
  for (const Finding& x : findings) {
    printf("\nFINDING %s, seed %llu: %s\n", x.property.c_str(),
           static_cast<unsigned long long>(x.seed), x.description.c_str());
    printf("  shrunk from %zu to %zu faults in %d reruns (%s): %s\n", x.faults_before,
           x.faults_after, x.log.runs, x.replayed ? "replays" : "DOES NOT REPLAY",
           x.config.c_str());
    printf("  case: %s   (redlock-sim --replay %s)\n", x.case_file.c_str(), x.case_file.c_str());
    if (!x.scenario_file.empty()) {
      printf("  lab scenario: %s   (redlock-chaos --file %s)\n", x.scenario_file.c_str(),
             x.scenario_file.c_str());
    } else {
      printf("  no lab scenario: %s\n", x.scenario_note.c_str());
    }
  }
  for (const auto& [p, seeds] : unshrunk) {
    // The first seeds, to replay one with --runs 1 --seed S.
    std::vector<uint64_t> first(seeds.begin(), seeds.begin() + std::min<size_t>(seeds.size(), 20));
    printf("\n%zu more runs with finding %s (not shrunk: --max-findings %d), seeds %s%s\n",
           seeds.size(), p.c_str(), f.max_findings, absl::StrJoin(first, " ").c_str(),
           seeds.size() > first.size() ? " ..." : "");
  }
  int any = 0;
  for (const auto& [p, n] : runs_finding) any += n;
  return any == 0 ? 0 : 1;
}

}  // namespace
}  // namespace redlock::sim

int main(int argc, char** argv) {
  // Runs allocate and free a few megabytes each: keep them instead of
  // handing them back to the kernel (and faulting them in again) every run.
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  const redlock::flags::Parsed args =
      redlock::flags::ParseOrExit(argc, argv, "redlock-sim", redlock::sim::kUsage,
                                  {.files = {"sim/main.cc"},
                                   .value_names = {{"runs", "K"},
                                                   {"seed", "S"},
                                                   {"minutes", "M"},
                                                   {"config", "k=v,..."},
                                                   {"where", "dim=v|v,..."},
                                                   {"replay", "CASE.json"},
                                                   {"out", "DIR"},
                                                   {"trace", "FILE"},
                                                   {"history", "FILE"},
                                                   {"shrink_runs", "N"},
                                                   {"max_findings", "N"}}});
  if (!args.positional.empty() || !args.tail.empty()) {
    return redlock::sim::Usage(
        absl::StrCat("unexpected argument \"",
                     args.positional.empty() ? args.tail[0] : args.positional[0], "\"")
            .c_str());
  }
  redlock::sim::Flags f;
  f.runs = absl::GetFlag(FLAGS_runs);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.minutes = absl::GetFlag(FLAGS_minutes);
  f.config = absl::GetFlag(FLAGS_config);
  f.where = absl::GetFlag(FLAGS_where);
  f.replay = absl::GetFlag(FLAGS_replay);
  f.out = absl::GetFlag(FLAGS_out);
  f.trace = absl::GetFlag(FLAGS_trace);
  f.history = absl::GetFlag(FLAGS_history);
  f.shrink_runs = absl::GetFlag(FLAGS_shrink_runs);
  f.max_findings = absl::GetFlag(FLAGS_max_findings);
  f.stop_at_finding = absl::GetFlag(FLAGS_stop_at_finding);
  f.verbose = absl::GetFlag(FLAGS_verbose);
  if (args.Given("runs") && f.runs < 1) return redlock::sim::Usage("bad --runs: at least 1");
  if (args.Given("minutes") && !(f.minutes > 0)) {
    return redlock::sim::Usage("bad --minutes: more than 0");
  }
  if (f.shrink_runs < 0) return redlock::sim::Usage("bad --shrink-runs: 0 or more");
  if (f.max_findings < 0) return redlock::sim::Usage("bad --max-findings: 0 or more");
  if (!f.replay.empty()) return redlock::sim::Replay(f);
  if (f.runs == 0 && f.minutes == 0) return redlock::sim::Usage("--runs or --minutes is required");
  return redlock::sim::Explore(f);
}
