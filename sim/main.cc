// redlock-sim: runs the real client in the deterministic simulated world
// over configurations and fault schedules drawn from seeds, checks every
// run, shrinks every finding to a small case file that --replay runs
// again exactly (and, where the lab can have it, a scenario file for
// redlock-chaos --file). sim/README.md.
//
//   redlock-sim --runs 1000 --seed 1
//   redlock-sim --minutes 2 --seed 7 --config nodes=plain/plain/plain,primitive=rwlock
//   redlock-sim --replay sim-findings/S9-1234.json --history h.jsonl --trace t.jsonl

#include <errno.h>
#include <malloc.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
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
ABSL_FLAG(int, jobs, 1,
          "Processes that make runs at once (the table is the same as with one; "
          "shrinking stays in this process).");

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
  int jobs = 1;
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

// What the table needs of one run (a child process sends it back with --jobs).
struct RunSummary {
  double cpu = 0;
  int64_t invokes = 0, grants = 0, events = 0;
  bool error = false;
  std::vector<std::string> fault_kinds;
  std::map<std::string, int64_t> violated;
  std::set<std::string> findings;
};

RunSummary Summarize(const RunOutput& out, double cpu) {
  RunSummary s;
  s.cpu = cpu;
  s.invokes = out.invokes;
  s.grants = out.grants;
  s.events = out.events;
  s.error = !out.error.empty();
  for (const InjectedFault& x : out.injected) s.fault_kinds.push_back(x.kind);
  for (const auto& [p, n] : out.violated) s.violated[p] = n;
  s.findings.insert(out.findings.begin(), out.findings.end());
  return s;
}

// One line: "index cpu invokes grants events error<TAB>kinds<TAB>p=n,...<TAB>findings".
std::string SummaryLine(size_t index, const RunSummary& s) {
  std::vector<std::string> violated;
  for (const auto& [p, n] : s.violated) violated.push_back(absl::StrCat(p, "=", n));
  return absl::StrCat(index, " ", absl::StrFormat("%.9f", s.cpu), " ", s.invokes, " ", s.grants,
                      " ", s.events, " ", s.error ? 1 : 0, "\t", absl::StrJoin(s.fault_kinds, ","),
                      "\t", absl::StrJoin(violated, ","), "\t", absl::StrJoin(s.findings, ","),
                      "\n");
}

bool ParseSummaryLine(absl::string_view line, size_t* index, RunSummary* s) {
  std::vector<std::string> parts = absl::StrSplit(line, '\t');
  if (parts.size() != 4) return false;
  std::vector<std::string> nums = absl::StrSplit(parts[0], ' ');
  int error = 0;
  if (nums.size() != 6 || !absl::SimpleAtoi(nums[0], index) ||
      !absl::SimpleAtod(nums[1], &s->cpu) || !absl::SimpleAtoi(nums[2], &s->invokes) ||
      !absl::SimpleAtoi(nums[3], &s->grants) || !absl::SimpleAtoi(nums[4], &s->events) ||
      !absl::SimpleAtoi(nums[5], &error)) {
    return false;
  }
  s->error = error != 0;
  for (absl::string_view k : absl::StrSplit(parts[1], ',', absl::SkipEmpty())) {
    s->fault_kinds.emplace_back(k);
  }
  for (absl::string_view pn : absl::StrSplit(parts[2], ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(pn, '=');
    int64_t n = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &n)) return false;
    s->violated[kv[0]] = n;
  }
  for (absl::string_view p : absl::StrSplit(parts[3], ',', absl::SkipEmpty())) {
    s->findings.emplace(p);
  }
  return true;
}

// Runs `batch` in `jobs` child processes (run k in child k % jobs) and
// returns the summaries in the batch's order; empty when a child failed
// (the caller then runs the batch itself).
std::vector<RunSummary> RunInChildren(const std::vector<RunInput>& batch, int jobs) {
  fflush(stdout);
  fflush(stderr);
  struct Child {
    pid_t pid = -1;
    int fd = -1;
    std::string text;
  };
  std::vector<Child> children;
  for (int j = 0; j < jobs && j < static_cast<int>(batch.size()); ++j) {
    int fds[2];
    if (pipe(fds) != 0) break;
    const pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      break;
    }
    if (pid == 0) {
      close(fds[0]);
      for (size_t k = static_cast<size_t>(j); k < batch.size(); k += static_cast<size_t>(jobs)) {
        const double cpu0 = CpuSeconds();
        RunInput in = batch[k];
        in.history = false;
        const RunOutput out = RunSimulation(in);
        const std::string line = SummaryLine(k, Summarize(out, CpuSeconds() - cpu0));
        size_t at = 0;
        while (at < line.size()) {
          const ssize_t w = write(fds[1], line.data() + at, line.size() - at);
          if (w <= 0) _exit(3);
          at += static_cast<size_t>(w);
        }
      }
      close(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    children.push_back(Child{pid, fds[0], ""});
  }
  bool ok = children.size() == static_cast<size_t>(std::min<size_t>(jobs, batch.size()));
  for (Child& c : children) {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(c.fd, buf, sizeof(buf));
      if (n > 0) {
        c.text.append(buf, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        break;
      }
    }
    close(c.fd);
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) return {};
  std::vector<RunSummary> out(batch.size());
  std::vector<bool> seen(batch.size(), false);
  for (const Child& c : children) {
    for (absl::string_view line : absl::StrSplit(c.text, '\n', absl::SkipEmpty())) {
      size_t index = 0;
      RunSummary s;
      if (!ParseSummaryLine(line, &index, &s) || index >= batch.size() || seen[index]) return {};
      seen[index] = true;
      out[index] = std::move(s);
    }
  }
  for (bool b : seen) {
    if (!b) return {};
  }
  return out;
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
  // The next run's input: 1, or 0 when no seed matched --where, 2 for a bad
  // --config.
  auto next_input = [&](RunInput* in) {
    for (int64_t tries = 0; tries <= kMaxSkipsPerRun; ++tries) {
      in->seed = next_seed++;
      in->config = DrawConfig(in->seed);
      if (!f.config.empty()) {
        absl::Status s = ApplyOverrides(f.config, &in->config);
        if (s.ok()) s = CheckConfig(in->config);
        if (!s.ok()) {
          fprintf(stderr, "redlock-sim: --config: %s\n", std::string(s.message()).c_str());
          return 2;
        }
      }
      if (Matches(*where, in->config)) {
        in->faults = DrawFaults(in->config, in->seed);
        in->history = !f.history.empty() && runs == 1;
        return 1;
      }
      ++skipped;
    }
    fprintf(stderr, "redlock-sim: --where %s: no configuration matched in %lld seeds\n",
            f.where.c_str(), static_cast<long long>(kMaxSkipsPerRun + 1));
    return 0;
  };
  bool stop = false, exhausted = false;
  while (!stop && !exhausted && done < runs && Clock::now() < deadline) {
    // A batch: one run, or with --jobs a few per process, run in parallel
    // and then taken in seed order exactly as one by one.
    std::vector<RunInput> batch;
    const int want = f.jobs > 1 ? std::min(runs - done, f.jobs * 16) : 1;
    while (static_cast<int>(batch.size()) < want) {
      RunInput in;
      const int r = next_input(&in);
      if (r == 2) return 2;
      if (r == 0) {
        exhausted = true;
        break;
      }
      batch.push_back(std::move(in));
    }
    std::vector<RunSummary> sums;
    std::vector<std::optional<RunOutput>> outs(batch.size());
    if (f.jobs > 1 && batch.size() > 1) sums = RunInChildren(batch, f.jobs);
    if (sums.size() != batch.size()) {
      sums.clear();
      for (size_t k = 0; k < batch.size(); ++k) {
        const double cpu0 = CpuSeconds();
        outs[k] = RunSimulation(batch[k], trace.get());
        sums.push_back(Summarize(*outs[k], CpuSeconds() - cpu0));
      }
    }
    for (size_t k = 0; k < batch.size() && !stop; ++k) {
      const RunInput& in = batch[k];
      const RunSummary& sum = sums[k];
      last_seed = in.seed;
      run_cpu += sum.cpu;
      const int i = done;
      ++done;
      sim_seconds += static_cast<double>(in.config.duration_ms) / 1000;
      invokes += sum.invokes;
      grants += sum.grants;
      events += sum.events;
      errors += sum.error ? 1 : 0;
      for (const auto& [dim, value] : ConfigDimensions(in.config)) ++dims[dim][value];
      for (const std::string& kind : sum.fault_kinds) ++faults[kind];
      for (const auto& [p, n] : sum.violated) ++runs_with[p];
      for (const std::string& p : sum.findings) ++runs_finding[p];
      if (!sum.findings.empty() && !outs[k].has_value()) outs[k] = RunSimulation(in);
      if (!f.history.empty() && runs == 1 && outs[k].has_value()) {
        WriteFile(f.history, outs[k]->history);
      }
      if (f.verbose) {
        printf("run %d seed %llu: %lld grants, %zu faults%s%s\n", i + 1,
               static_cast<unsigned long long>(in.seed), static_cast<long long>(sum.grants),
               sum.fault_kinds.size(), sum.findings.empty() ? "" : "  FINDING ",
               absl::StrJoin(sum.findings, ",").c_str());
        fflush(stdout);
      }
      const RunOutput empty;
      const RunOutput& out = outs[k].has_value() ? *outs[k] : empty;
      stop = f.stop_at_finding && !sum.findings.empty();
      for (const std::string& p : sum.findings) {
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
    }
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
                                                   {"max_findings", "N"},
                                                   {"jobs", "J"}}});
  if (const std::string* extra = args.FirstArgument()) {
    return redlock::sim::Usage(absl::StrCat("unexpected argument \"", *extra, "\"").c_str());
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
  f.jobs = absl::GetFlag(FLAGS_jobs);
  if (f.jobs < 1 || f.jobs > 64) return redlock::sim::Usage("bad --jobs: 1 to 64");
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
