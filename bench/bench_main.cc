// redlock-bench: quorum latency and throughput of the redlock library, healthy
// and under faults, side by side with baselines measured in the same run.
// See bench/README.md.
//
//   redlock-bench --quick                  # the README run, about a minute
//   redlock-bench --full --json out.json --plot plots/
//   redlock-bench --scenario stopped --n 5
//   redlock-bench --nodes 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
//   redlock-bench --smoke                  # every scenario briefly (CI)
//
// Exit status: 0 when the harness ran every row (slow figures are not
// errors), 1 on harness errors (a fleet that does not start, a client that
// cannot be created, an output file that cannot be written), 2 on bad usage.

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/backends_scenario.h"
#include "bench/fair_scenario.h"
#include "bench/plots.h"
#include "bench/processes_scenario.h"
#include "bench/report.h"
#include "bench/results.h"
#include "bench/scenarios.h"
#include "bench/spread_profiles.h"
#include "bench/system_info.h"
#include "bench/workload.h"
#include "common/flags.h"
#include "redlock/options.h"
#include "testkit/fleet.h"
#include "testkit/servers.h"

ABSL_FLAG(bool, quick, false, "The default run: N in {1,3,5}, the main scenarios, about a minute.");
ABSL_FLAG(bool, full, false, "Every scenario at N in {1,3,5,7} with longer measurements.");
ABSL_FLAG(bool, smoke, false,
          "Every scenario for a few hundred milliseconds (CI): exercises every code path.");
ABSL_FLAG(bool, list, false, "List the scenarios and exit.");
ABSL_FLAG(std::string, scenario, "",
          "Run only these scenarios (comma-separated names, see --list).");
ABSL_FLAG(std::string, nodes, "",
          "Use these nodes (host:port,...) instead of starting a fleet; scenarios that stop nodes "
          "or add proxies are then skipped.");
ABSL_FLAG(std::string, n, "",
          "Numbers of nodes to run at (e.g. 3,5); default depends on the mode.");
ABSL_FLAG(uint64_t, seed, 0,
          "Seed of the fault proxy's jitter and of the run id in key names; 0 picks one from the "
          "clock (always printed). Lock tokens are always random.");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "Measurement time per row (0: the mode's default: smoke 60ms, quick 400ms, full 3s; the "
          "sweep's rows 60ms, 250ms, 2s).");
ABSL_FLAG(absl::Duration, warmup, absl::ZeroDuration(),
          "Warm-up per row (0: the mode's default: smoke 15ms, quick 150ms, full 500ms).");
ABSL_FLAG(int64_t, iterations, 0,
          "At most this many measured cycles per row, all callers together (0: no cap beyond "
          "1000000).");
ABSL_FLAG(int, callers, 0,
          "The 'many callers' count: threads sharing one Client, and async chains (0: 64; smoke "
          "8).");
ABSL_FLAG(std::string, sweep_callers, "",
          "The sweep scenario's caller counts, comma-separated (default 1,8,64,256; smoke 1,8).");
ABSL_FLAG(absl::Duration, ttl, absl::Seconds(10), "Lock ttl.");
ABSL_FLAG(absl::Duration, node_timeout, absl::Milliseconds(50),
          "Options::node_timeout, and the baselines' per-node timeout.");
ABSL_FLAG(absl::Duration, slow_latency, absl::Milliseconds(2),
          "Latency the fault proxy adds to a slow node's replies (slow1, slow2).");
ABSL_FLAG(absl::Duration, slow_near_latency, absl::Milliseconds(45),
          "slow-near-timeout: fixed latency (keep it near --node_timeout).");
ABSL_FLAG(absl::Duration, slow_near_jitter, absl::Milliseconds(10),
          "slow-near-timeout: uniform extra latency in [0, jitter].");
ABSL_FLAG(int, hot_waiters, 0, "hot: callers taking turns on the resource (0: 8; smoke 4).");
ABSL_FLAG(absl::Duration, hot_hold, absl::Microseconds(200), "hot: how long a holder holds.");
ABSL_FLAG(absl::Duration, hot_wait, absl::Seconds(2),
          "hot: the wait of Acquire(resource, ttl, wait).");
ABSL_FLAG(std::string, latency_profile, "",
          "spread: your own placement, one delay per node added each way (milliseconds, or "
          "durations: 0.1,0.1,1,40,40 or 100us,2ms,...), instead of the built-in profiles; N is "
          "the number of delays. Also --latency-profile.");
ABSL_FLAG(std::string, processes, "",
          "processes: the numbers of client processes to run side by side, each with its own "
          "Client (default 1,2,4,8); given alone, it selects the processes scenario.");
ABSL_FLAG(bool, process_worker, false,
          "Internal (the processes scenario): run as one of its client processes.");
ABSL_FLAG(std::string, process_worker_key, "", "Internal: the worker's resource prefix.");
ABSL_FLAG(int, fair_processes, 0,
          "fair: the hot rows' worker processes (0: 8; smoke 2), each with --fair_threads "
          "waiting threads.");
ABSL_FLAG(int, fair_threads, 0, "fair: waiting threads per worker process (0: 8; smoke 2).");
ABSL_FLAG(absl::Duration, fair_wait, absl::Seconds(30),
          "fair: the wait of every hot call's Acquire (a waiter may queue behind all the others).");
ABSL_FLAG(bool, fair_worker, false, "Internal (the fair scenario): run as one of its processes.");
ABSL_FLAG(bool, fair_worker_fair, true,
          "Internal: the fair worker takes the fair lock (else the mutex).");
ABSL_FLAG(std::string, json, "", "Write the results as JSON to this file ('-' for stdout).");
ABSL_FLAG(std::string, plot, "", "Write SVG charts into this directory.");
ABSL_FLAG(std::string, server, "",
          "The server the fleet runs, by name: redis-7.0 (Debian's, the default), valkey-8.0, "
          "valkey-9.1, redis-8.0 (scripts/servers.sh installs them); default $REDLOCK_SERVER.");
ABSL_FLAG(std::string, redis_server, "",
          "The server binary the fleet starts, in place of the --server's (a path, or a name "
          "looked up on the PATH).");

namespace redlock::bench {
namespace {

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted.store(true); }

void InstallSignals() {
  // hiredis writes without MSG_NOSIGNAL: a node closing a connection must
  // not kill the harness.
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sa.sa_flags = SA_RESETHAND;  // a second Ctrl-C kills at once
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int UsageError(const std::string& message) {
  fprintf(stderr, "redlock-bench: %s\n", message.c_str());
  return 2;
}

void ListScenarios() {
  printf("%-20s %-10s %-10s %-12s %s\n", "scenario", "smoke N", "quick N", "full N", "what");
  for (const Scenario& s : AllScenarios()) {
    printf("%-20s %-10s %-10s %-12s %s%s\n", s.name.c_str(), absl::StrJoin(s.smoke_ns, ",").c_str(),
           absl::StrJoin(s.quick_ns, ",").c_str(), absl::StrJoin(s.full_ns, ",").c_str(),
           s.description.c_str(), s.needs_fleet ? " [own fleet only]" : "");
  }
}

// Checks what --smoke renders without being asked to write it.
void CheckRenderings(const BenchResults& results, std::vector<std::string>* errors) {
  const std::string json = RenderJson(results);
  if (!nlohmann::json::accept(json)) errors->push_back("smoke: the JSON output does not parse");
  const auto plots = RenderPlots(results);
  bool healthy_ran = false;
  for (const GroupResult& g : results.groups)
    healthy_ran = healthy_ran || (g.scenario == "healthy" && !g.skipped);
  if (healthy_ran && plots.empty()) errors->push_back("smoke: no chart was rendered");
  // Healthy nodes: every row must have completed cycles (a new client or
  // runner that silently does nothing would otherwise pass).
  for (const GroupResult& g : results.groups) {
    if (g.skipped || (g.scenario != "healthy" && g.scenario != "sweep")) continue;
    for (const RowResult& r : g.rows) {
      if (r.ran() && r.successes == 0) {
        errors->push_back(absl::StrCat("smoke: ", g.scenario, " N=", g.n, ": ", r.impl, " x",
                                       r.callers, " completed no cycle"));
      }
    }
  }
  for (const auto& [name, svg] : plots) {
    const bool ok = svg.rfind("<?xml", 0) == 0 && svg.find("<svg") != std::string::npos &&
                    svg.size() > 7 && svg.compare(svg.size() - 7, 7, "</svg>\n") == 0;
    if (!ok) errors->push_back(absl::StrCat("smoke: chart ", name, " is malformed"));
  }
}

// "1,8,64" into *out (replaced): counts in 1..max, at least one.
absl::Status ParseCounts(absl::string_view text, int max, std::vector<int>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int c = 0;
    if (!absl::SimpleAtoi(part, &c) || c < 1 || c > max) {
      return absl::InvalidArgumentError(absl::StrCat("'", part, "' is not a count in 1..", max));
    }
    out->push_back(c);
  }
  if (out->empty()) return absl::InvalidArgumentError("no count given");
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  // Flag names are written with underscores; dashes work too
  // (--latency-profile is --latency_profile).
  const flags::Parsed args = flags::ParseOrExit(
      argc, argv, "redlock-bench",
      "usage: redlock-bench [--quick|--full|--smoke] [--scenario NAME] [--nodes host:port,...] "
      "[--json FILE|-] [--plot DIR]\nSee bench/README.md.",
      {.files = {"bench/bench_main.cc"},
       .dashes = false,
       .value_names = {
           {"json", "FILE"}, {"plot", "DIR"}, {"redis_server", "PATH"}, {"server", "NAME"}}});
  if (const std::string* extra = args.FirstArgument()) {
    return UsageError(absl::StrCat("unexpected argument '", *extra, "'"));
  }
  // --server is the test kit's REDLOCK_SERVER, so every fleet of this run
  // (and of its worker processes) starts that server.
  if (const std::string server = absl::GetFlag(FLAGS_server); !server.empty()) {
    setenv(testkit::kServerEnv, server.c_str(), 1);
  }
  if (absl::StatusOr<testkit::ServerBuild> sb =
          testkit::LocateServer(testkit::SelectedServerName());
      !sb.ok()) {
    return UsageError(std::string(sb.status().message()));
  }
  if (absl::GetFlag(FLAGS_process_worker)) {
    ProcessWorkerArgs w;
    w.nodes = absl::GetFlag(FLAGS_nodes);
    w.key = absl::GetFlag(FLAGS_process_worker_key);
    if (absl::GetFlag(FLAGS_callers) > 0) w.chains = absl::GetFlag(FLAGS_callers);
    w.warmup = absl::GetFlag(FLAGS_warmup);
    w.duration = absl::GetFlag(FLAGS_duration);
    w.ttl = absl::GetFlag(FLAGS_ttl);
    w.node_timeout = absl::GetFlag(FLAGS_node_timeout);
    if (absl::GetFlag(FLAGS_iterations) > 0) w.iterations = absl::GetFlag(FLAGS_iterations);
    signal(SIGPIPE, SIG_IGN);
    return RunProcessWorker(w);
  }
  if (absl::GetFlag(FLAGS_fair_worker)) {
    FairWorkerArgs w;
    w.nodes = absl::GetFlag(FLAGS_nodes);
    w.resource = absl::GetFlag(FLAGS_process_worker_key);
    w.fair = absl::GetFlag(FLAGS_fair_worker_fair);
    if (absl::GetFlag(FLAGS_callers) > 0) w.threads = absl::GetFlag(FLAGS_callers);
    w.warmup = absl::GetFlag(FLAGS_warmup);
    w.duration = absl::GetFlag(FLAGS_duration);
    w.ttl = absl::GetFlag(FLAGS_ttl);
    w.node_timeout = absl::GetFlag(FLAGS_node_timeout);
    w.hold = absl::GetFlag(FLAGS_hot_hold);
    w.wait = absl::GetFlag(FLAGS_hot_wait);
    signal(SIGPIPE, SIG_IGN);
    return RunFairWorker(w);
  }
  if (absl::GetFlag(FLAGS_list)) {
    ListScenarios();
    return 0;
  }
  const int modes =
      absl::GetFlag(FLAGS_quick) + absl::GetFlag(FLAGS_full) + absl::GetFlag(FLAGS_smoke);
  if (modes > 1) return UsageError("--quick, --full and --smoke exclude each other");

  BenchSettings s;
  s.mode = absl::GetFlag(FLAGS_smoke)  ? Mode::kSmoke
           : absl::GetFlag(FLAGS_full) ? Mode::kFull
                                       : Mode::kQuick;
  switch (s.mode) {
    case Mode::kSmoke:
      s.warmup = absl::Milliseconds(15);
      s.duration = absl::Milliseconds(60);
      s.memory_duration = absl::Milliseconds(150);
      s.memory_warmup = absl::Milliseconds(50);
      s.hot_duration = absl::Milliseconds(150);
      s.stopped_duration = absl::Milliseconds(300);
      s.callers_many = 8;
      s.sweep_callers = {1, 8};
      s.sweep_duration = s.duration;
      s.spread_duration = absl::Milliseconds(100);
      s.processes = {1, 2};
      s.processes_duration = absl::Milliseconds(300);
      s.hot_waiters = 4;
      s.fair_processes = 2;
      s.fair_threads = 2;
      s.fair_duration = absl::Milliseconds(300);
      break;
    case Mode::kQuick:
      s.warmup = absl::Milliseconds(150);
      s.duration = absl::Milliseconds(400);
      s.memory_duration = absl::Milliseconds(1500);
      s.hot_duration = absl::Seconds(1);
      s.sweep_duration = absl::Milliseconds(250);
      break;
    case Mode::kFull:
      s.warmup = absl::Milliseconds(500);
      s.duration = absl::Seconds(3);
      s.memory_duration = absl::Seconds(6);
      s.memory_warmup = absl::Seconds(2);
      s.hot_duration = absl::Seconds(3);
      s.stopped_duration = absl::Seconds(10);
      s.sweep_duration = absl::Seconds(2);
      s.spread_duration = absl::Seconds(3);
      s.processes_duration = absl::Seconds(3);
      s.fair_duration = absl::Seconds(10);
      break;
  }
  if (absl::GetFlag(FLAGS_duration) > absl::ZeroDuration()) {
    s.duration = absl::GetFlag(FLAGS_duration);
    s.memory_duration = std::max(s.memory_duration, s.duration);
    s.hot_duration = std::max(s.hot_duration, s.duration);
    s.sweep_duration = s.duration;
    s.spread_duration = s.duration;
    s.processes_duration = s.duration;
    s.fair_duration = s.duration;
  }
  if (absl::GetFlag(FLAGS_fair_processes) > 0)
    s.fair_processes = absl::GetFlag(FLAGS_fair_processes);
  if (absl::GetFlag(FLAGS_fair_threads) > 0) s.fair_threads = absl::GetFlag(FLAGS_fair_threads);
  s.fair_wait = absl::GetFlag(FLAGS_fair_wait);
  if (s.fair_processes > 64 || s.fair_threads > 256) {
    return UsageError("--fair_processes is at most 64, --fair_threads at most 256");
  }
  if (absl::GetFlag(FLAGS_warmup) > absl::ZeroDuration()) s.warmup = absl::GetFlag(FLAGS_warmup);
  if (absl::GetFlag(FLAGS_iterations) > 0) s.iterations = absl::GetFlag(FLAGS_iterations);
  if (absl::GetFlag(FLAGS_callers) > 0) s.callers_many = absl::GetFlag(FLAGS_callers);
  if (absl::GetFlag(FLAGS_hot_waiters) > 0) s.hot_waiters = absl::GetFlag(FLAGS_hot_waiters);
  s.ttl = absl::GetFlag(FLAGS_ttl);
  s.node_timeout = absl::GetFlag(FLAGS_node_timeout);
  s.slow_latency = absl::GetFlag(FLAGS_slow_latency);
  s.slow_near_latency = absl::GetFlag(FLAGS_slow_near_latency);
  s.slow_near_jitter = absl::GetFlag(FLAGS_slow_near_jitter);
  s.hot_hold = absl::GetFlag(FLAGS_hot_hold);
  s.hot_wait = absl::GetFlag(FLAGS_hot_wait);
  if (s.callers_many < 2 || s.callers_many > 1024)
    return UsageError("--callers must be in 2..1024");
  if (s.hot_waiters < 2 || s.hot_waiters > 256)
    return UsageError("--hot_waiters must be in 2..256");
  if (s.duration > absl::Hours(1) || s.warmup > absl::Hours(1)) {
    return UsageError("--duration and --warmup are capped at 1h");
  }
  if (s.ttl < absl::Milliseconds(100)) return UsageError("--ttl must be at least 100ms");
  if (s.node_timeout <= absl::ZeroDuration()) return UsageError("--node_timeout must be positive");
  if (!absl::GetFlag(FLAGS_sweep_callers).empty()) {
    absl::Status st = ParseCounts(absl::GetFlag(FLAGS_sweep_callers), 1024, &s.sweep_callers);
    if (!st.ok()) return UsageError(absl::StrCat("--sweep_callers: ", st.message()));
  }
  if (absl::Status st = ParseCounts(absl::GetFlag(FLAGS_n), 15, &s.ns);
      !st.ok() && !absl::GetFlag(FLAGS_n).empty()) {
    return UsageError(absl::StrCat("--n: ", st.message()));
  }
  if (!absl::GetFlag(FLAGS_latency_profile).empty()) {
    absl::StatusOr<std::vector<absl::Duration>> profile =
        ParseLatencyProfile(absl::GetFlag(FLAGS_latency_profile));
    if (!profile.ok())
      return UsageError(absl::StrCat("--latency-profile: ", profile.status().message()));
    s.latency_profile = *std::move(profile);
  }
  if (!absl::GetFlag(FLAGS_processes).empty()) {
    absl::Status st = ParseCounts(absl::GetFlag(FLAGS_processes), 64, &s.processes);
    if (!st.ok()) return UsageError(absl::StrCat("--processes: ", st.message()));
  }
  s.self_exe = "/proc/self/exe";
  s.seed = absl::GetFlag(FLAGS_seed);
  if (s.seed == 0) s.seed = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) % 1000000007u + 1;
  s.run_id = absl::StrFormat("%x%04x", getpid(), s.seed & 0xffff);

  std::vector<const Scenario*> scenarios;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_scenario), ',', absl::SkipEmpty())) {
    const Scenario* sc = FindScenario(std::string(name));
    if (sc == nullptr) {
      std::vector<std::string> names;
      for (const Scenario& x : AllScenarios()) names.push_back(x.name);
      return UsageError(
          absl::StrCat("unknown scenario '", name, "' (", absl::StrJoin(names, ", "), ")"));
    }
    scenarios.push_back(sc);
  }
  if (scenarios.empty() && !absl::GetFlag(FLAGS_processes).empty()) {
    scenarios.push_back(FindScenario("processes"));
  }
  if (scenarios.empty()) {
    for (const Scenario& x : AllScenarios()) {
      if (!x.explicit_only) scenarios.push_back(&x);
    }
  }
  struct Planned {
    const Scenario* scenario;
    int n;
    std::string variant;
  };
  std::vector<Planned> plan;
  int max_n = 1;
  for (const Scenario* sc : scenarios) {
    for (int n : NsFor(*sc, s)) {
      for (const std::string& variant : VariantsFor(*sc, s)) plan.push_back({sc, n, variant});
      max_n = std::max(max_n, n);
    }
  }

  const std::string json_path = absl::GetFlag(FLAGS_json);
  const std::string plot_dir = absl::GetFlag(FLAGS_plot);
  FILE* out = json_path == "-" ? stderr : stdout;  // stdout stays pure JSON with --json -

  InstallSignals();
  const int64_t start_ns = NowNs();
  BenchResults results;
  RunInfo& info = results.info;
  info.mode = ModeName(s.mode);
  info.seed = s.seed;
  info.started_at = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  info.machine = GetMachineInfo();
  std::string server_binary = absl::GetFlag(FLAGS_redis_server);
  if (server_binary.empty()) {
    absl::StatusOr<testkit::ServerBuild> sb = testkit::LocateServer(testkit::SelectedServerName());
    server_binary = sb.ok() ? sb->server : "redis-server";
  }
  info.versions = GetVersionInfo(server_binary);
  info.build_warnings = BuildWarnings(info.versions);
  info.callers_many = s.callers_many;
  info.settings = {
      {"ttl", absl::FormatDuration(s.ttl)},
      {"node_timeout", absl::FormatDuration(s.node_timeout)},
      {"warmup", absl::FormatDuration(s.warmup)},
      {"duration", absl::FormatDuration(s.duration)},
      {"sweep_duration", absl::FormatDuration(s.sweep_duration)},
      {"memory_duration", absl::FormatDuration(s.memory_duration)},
      {"memory_warmup", absl::FormatDuration(s.memory_warmup)},
      {"hot_duration", absl::FormatDuration(s.hot_duration)},
      {"iterations_cap", absl::StrCat(s.iterations)},
      {"callers", absl::StrCat("1 and ", s.callers_many)},
      {"sweep_callers", absl::StrJoin(s.sweep_callers, ",")},
      {"slow_latency", absl::FormatDuration(s.slow_latency)},
      {"slow_near", absl::StrCat(absl::FormatDuration(s.slow_near_latency), "+U[0,",
                                 absl::FormatDuration(s.slow_near_jitter), "]")},
      {"hot", absl::StrCat(s.hot_waiters, " callers, hold ", absl::FormatDuration(s.hot_hold),
                           ", wait ", absl::FormatDuration(s.hot_wait))},
  };

  std::unique_ptr<NodeSet> nodes;
  const std::string nodes_flag = absl::GetFlag(FLAGS_nodes);
  if (!nodes_flag.empty()) {
    absl::StatusOr<std::vector<Endpoint>> eps = ParseEndpointList(nodes_flag);
    if (!eps.ok()) return UsageError(absl::StrCat("--nodes: ", eps.status().message()));
    info.own_fleet = false;
    std::vector<std::string> names;
    for (const Endpoint& ep : *eps) names.push_back(ep.ToString());
    info.nodes = absl::StrJoin(names, ",");
    nodes = std::make_unique<NodeSet>(*std::move(eps));
  } else {
    testkit::FleetOptions fo;
    fo.nodes = max_n;
    fo.redis_server = absl::GetFlag(FLAGS_redis_server);
    fo.enable_debug = false;
    absl::StatusOr<std::unique_ptr<testkit::Fleet>> fleet = testkit::Fleet::Start(fo);
    if (!fleet.ok()) {
      fprintf(stderr, "redlock-bench: cannot start %d %s processes: %s\n", max_n,
              testkit::SelectedServerName().c_str(), fleet.status().ToString().c_str());
      return 1;
    }
    info.nodes = (*fleet)->NodeList();
    nodes = std::make_unique<NodeSet>(*std::move(fleet));
  }

  fputs(RenderHeader(info).c_str(), out);
  fflush(out);

  {
    Progress progress(static_cast<int>(plan.size()));
    Context ctx{s, *nodes, progress, results.harness_errors};
    for (size_t i = 0; i < plan.size(); ++i) {
      if (g_interrupted.load()) {
        results.harness_errors.push_back("interrupted: the remaining groups were not run");
        break;
      }
      const Planned& p = plan[i];
      progress.Group(static_cast<int>(i) + 1,
                     absl::StrCat(p.scenario->name, " N=", p.n,
                                  p.variant.empty() ? "" : absl::StrCat(" ", p.variant)));
      GroupResult g = RunGroup(*p.scenario, p.n, p.variant, ctx);
      progress.Done();
      fputs(RenderGroup(g).c_str(), out);
      fflush(out);
      results.groups.push_back(std::move(g));
    }
  }
  nodes.reset();  // stops the fleet
  results.wall_seconds = static_cast<double>(NowNs() - start_ns) / 1e9;

  if (s.mode == Mode::kSmoke) CheckRenderings(results, &results.harness_errors);
  if (!plot_dir.empty()) {
    std::vector<std::string> written;
    absl::Status st = WritePlots(results, plot_dir, &written);
    if (!st.ok()) results.harness_errors.push_back(absl::StrCat("--plot: ", st.ToString()));
    for (const std::string& w : written) fprintf(out, "wrote %s\n", w.c_str());
  }
  if (std::string md = BackendsMarkdown(results); !md.empty()) {
    fprintf(out, "\n== backends, as Markdown (bench/backends_scenario.h)\n%s", md.c_str());
  }
  fputs(RenderSummary(results).c_str(), out);
  fflush(out);
  if (!json_path.empty()) {
    const std::string json = RenderJson(results);
    if (json_path == "-") {
      fputs(json.c_str(), stdout);
      fflush(stdout);
    } else {
      std::ofstream f(json_path, std::ios::binary | std::ios::trunc);
      f << json;
      f.close();
      if (!f) {
        fprintf(stderr, "redlock-bench: cannot write %s\n", json_path.c_str());
        return 1;
      }
      fprintf(out, "wrote %s\n", json_path.c_str());
    }
  }
  return results.harness_errors.empty() ? 0 : 1;
}

}  // namespace
}  // namespace redlock::bench

int main(int argc, char** argv) { return redlock::bench::Main(argc, argv); }
