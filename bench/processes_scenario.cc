#include "bench/processes_scenario.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/locker.h"
#include "bench/report.h"
#include "bench/rows.h"
#include "bench/scenarios.h"
#include "bench/workload.h"
#include "redlock/client.h"
#include "testkit/process.h"
#include "testkit/redis.h"

namespace redlock::bench {

nlohmann::json HistogramJson(const LatencyHistogram& h) {
  const LatencyHistogram::Parts p = h.ToParts();
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& [i, n] : p.buckets) buckets.push_back(nlohmann::json::array({i, n}));
  return nlohmann::json{{"b", buckets}, {"min", p.min}, {"max", p.max}, {"sum", p.sum}};
}

LatencyHistogram HistogramFromJson(const nlohmann::json& j) {
  LatencyHistogram::Parts p;
  for (const nlohmann::json& b : j.at("b"))
    p.buckets.emplace_back(b.at(0).get<int>(), b.at(1).get<uint64_t>());
  p.min = j.at("min").get<int64_t>();
  p.max = j.at("max").get<int64_t>();
  p.sum = j.at("sum").get<double>();
  return LatencyHistogram::FromParts(p);
}

WorkerProcesses::~WorkerProcesses() {
  for (int& fd : go_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

absl::Status WorkerProcesses::Start(const std::string& self_exe,
                                    std::vector<std::vector<std::string>> argvs) {
  if (pipe2(go_, O_CLOEXEC) != 0) {
    go_[0] = go_[1] = -1;
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  absl::Status failed;
  for (std::vector<std::string>& argv : argvs) {
    testkit::ProcessOptions o;
    o.executable = self_exe;
    o.argv = std::move(argv);
    o.stdout_to = testkit::Stream::kPipe;
    o.stderr_to = testkit::Stream::kInherit;
    o.pass_fd = go_[0];
    absl::StatusOr<std::unique_ptr<testkit::Process>> p = testkit::Process::Start(std::move(o));
    if (!p.ok()) {
      failed = p.status();
      break;
    }
    workers_.push_back(*std::move(p));
  }
  close(go_[0]);
  go_[0] = -1;
  for (size_t i = 0; i < workers_.size() && failed.ok(); ++i) {
    std::optional<std::string> line = workers_[i]->ReadLine(absl::Seconds(20));
    if (!line.has_value() || *line != "ready") {
      failed = absl::UnavailableError(
          absl::StrCat("worker ", i, " did not get ready: ", line.value_or("(nothing)")));
    }
  }
  return failed;
}

void WorkerProcesses::Go() {
  if (go_[1] >= 0) close(go_[1]);
  go_[1] = -1;
}

absl::StatusOr<nlohmann::json> WorkerProcesses::Result(size_t i, absl::Duration wait) {
  std::optional<std::string> line = workers_[i]->ReadLine(wait);
  nlohmann::json j =
      line.has_value() ? nlohmann::json::parse(*line, nullptr, false) : nlohmann::json();
  if (!j.is_object() || j.contains("error")) {
    return absl::InternalError(j.is_object() ? j.value("error", "") : line.value_or("no result"));
  }
  workers_[i]->Wait(absl::Seconds(5));
  return j;
}

ServersCpuWindow WatchServersCpu(const NodeSet& nodes, int n, absl::Duration warmup,
                                 absl::Duration duration) {
  ServersCpuWindow w;
  std::this_thread::sleep_for(absl::ToChronoNanoseconds(warmup));
  w.cpu_start = nodes.ServersCpuUs(n);
  const int64_t start_ns = NowNs();
  std::this_thread::sleep_for(absl::ToChronoNanoseconds(duration));
  w.cpu_stop = nodes.ServersCpuUs(n);
  w.seconds = static_cast<double>(NowNs() - start_ns) / 1e9;
  return w;
}

void SetServersCpu(const ServersCpuWindow& w, RowResult& row) {
  if (w.cpu_start >= 0 && w.cpu_stop >= w.cpu_start && w.seconds > 0) {
    row.server_cpu_us =
        std::llround(static_cast<double>(w.cpu_stop - w.cpu_start) / w.seconds * row.measured_s);
  }
}

void WorkerReadyThenWaitForGo() {
  printf("ready\n");
  fflush(stdout);
  char c;
  while (read(3, &c, 1) < 0 && errno == EINTR) {
  }
}

int WorkerFail(const char* who, const std::string& why) {
  fprintf(stderr, "%s: %s\n", who, why.c_str());
  printf("%s\n", nlohmann::json{{"error", why}}.dump().c_str());
  fflush(stdout);
  return 1;
}

namespace {

using Json = nlohmann::json;

// P workers side by side: one row.
RowResult ProcessesRow(Context& ctx, const std::vector<Endpoint>& eps, int processes) {
  const BenchSettings& s = ctx.settings;
  RowResult row = LibraryRowIdentity(
      absl::StrCat("library async, ", processes, processes == 1 ? " process" : " processes"),
      absl::StrCat("processes=", processes), processes * s.callers_many);
  row.processes = processes;
  ctx.progress.Row(row.impl);

  std::vector<std::string> names;
  for (const Endpoint& ep : eps) names.push_back(ep.ToString());
  const std::string key = ctx.RowKey();
  std::vector<std::vector<std::string>> argvs;
  for (int i = 0; i < processes; ++i) {
    argvs.push_back({"redlock-bench", "--process_worker",
                     absl::StrCat("--nodes=", absl::StrJoin(names, ",")),
                     absl::StrCat("--process_worker_key=", key, ":p", i),
                     absl::StrCat("--callers=", s.callers_many),
                     absl::StrCat("--warmup=", absl::FormatDuration(s.warmup)),
                     absl::StrCat("--duration=", absl::FormatDuration(s.processes_duration)),
                     absl::StrCat("--ttl=", absl::FormatDuration(s.ttl)),
                     absl::StrCat("--node_timeout=", absl::FormatDuration(s.node_timeout)),
                     absl::StrCat("--iterations=", s.iterations)});
  }
  WorkerProcesses workers;
  if (absl::Status st = workers.Start(s.self_exe, std::move(argvs)); !st.ok()) {
    return HarnessErrorRow(ctx, std::move(row), "starting the workers", st);
  }
  // Go: every worker's read of the pipe returns at once.
  workers.Go();
  const ServersCpuWindow window =
      WatchServersCpu(ctx.nodes, static_cast<int>(eps.size()), s.warmup, s.processes_duration);

  LatencyHistogram acquire;
  LatencyHistogram cycle;
  double measured = 0;
  std::vector<std::string> rates;
  row.usage.allocations = 0;  // the workers' sum (-1 once one does not count)
  for (size_t i = 0; i < workers.size(); ++i) {
    const absl::Duration wait = s.processes_duration + s.node_timeout * 8 + absl::Seconds(10);
    absl::StatusOr<Json> result = workers.Result(i, wait);
    if (!result.ok()) {
      return HarnessErrorRow(ctx, std::move(row), absl::StrCat("worker ", i), result.status());
    }
    const Json& j = *result;
    acquire.Merge(HistogramFromJson(j.at("acquire")));
    cycle.Merge(HistogramFromJson(j.at("cycle")));
    row.attempts += j.at("attempts").get<int64_t>();
    row.successes += j.at("successes").get<int64_t>();
    const double m = j.at("measured_s").get<double>();
    measured += m;
    row.usage.user_us += j.at("user_us").get<int64_t>();
    row.usage.sys_us += j.at("sys_us").get<int64_t>();
    row.usage.voluntary_csw += j.at("vcsw").get<int64_t>();
    row.usage.involuntary_csw += j.at("icsw").get<int64_t>();
    AddAllocations(&row.usage, j.value("allocs", int64_t{-1}));
    row.usage_cycles += j.at("usage_cycles").get<int64_t>();
    if (m > 0) rates.push_back(FormatRate(j.at("successes").get<double>() / m));
    if (const std::string errors = j.value("errors", ""); !errors.empty()) {
      row.notes.push_back(absl::StrCat("worker ", i, ": ", errors));
    }
  }
  row.acquire = Distribution(acquire);
  row.cycle = Distribution(cycle);
  // The processes measured side by side: the aggregate rate is the sum of
  // theirs, i.e. all successes over their mean measurement time.
  row.measured_s = measured / static_cast<double>(processes);
  // Per cycle, it divides by the cycles of the workers' measured time.
  SetServersCpu(window, row);
  row.notes.push_back(absl::StrCat("cycles/s per process: ", absl::StrJoin(rates, ", ")));
  return row;
}

}  // namespace

void RunProcesses(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = absl::StrCat("P client processes, each with its own Client and ",
                          ctx.settings.callers_many, " async chains, against one fleet");
  CommonSettings(ctx, g);
  AddSetting(g, "processes", absl::StrJoin(ctx.settings.processes, ","));
  AddSetting(g, "duration", Dur(ctx.settings.processes_duration));
  AddSetting(g, "server_cpu", ctx.nodes.fleet() != nullptr ? "/proc/<pid>/stat" : "INFO cpu");
  g->rows.push_back(FloorRow(ctx, eps));
  for (int p : ctx.settings.processes) g->rows.push_back(ProcessesRow(ctx, eps, p));
  const RowResult* one = nullptr;
  for (const RowResult& r : g->rows) {
    if (r.processes == 1 && r.ran()) one = &r;
  }
  for (const RowResult& r : g->rows) {
    if (r.processes <= 1 || !r.ran() || one == nullptr || one->throughput() <= 0) continue;
    g->notes.push_back(
        absl::StrFormat("%d processes: %.2fx the cycles/s of 1; the servers' CPU per cycle %.2fx",
                        r.processes, r.throughput() / one->throughput(),
                        r.server_cpu_us_per_cycle() / one->server_cpu_us_per_cycle()));
  }
  const RowResult* best = nullptr;
  for (const RowResult& r : g->rows) {
    if (r.processes > 0 && r.ran() && (best == nullptr || r.throughput() > best->throughput())) {
      best = &r;
    }
  }
  if (best != nullptr && std::isfinite(best->server_cpu_us_per_cycle())) {
    const double per_node = best->server_cpu_us_per_cycle() / n;
    g->figures["peak_cycles_per_s"] = best->throughput();
    g->figures["peak_processes"] = best->processes;
    g->figures["server_cpu_us_per_cycle"] = best->server_cpu_us_per_cycle();
    g->figures["server_cpu_us_per_cycle_per_node"] = per_node;
    g->notes.push_back(absl::StrFormat(
        "peak %s with %d processes; the servers spend %s per cycle, %s on each node: every lock "
        "touches every node, so one node with a core of its own caps the fleet at about %s "
        "whatever the number of clients (here the %d servers and the clients share the "
        "machine's cores); shard resources across fleets to grow past it",
        FormatRate(best->throughput()), best->processes, FormatCpu(best->server_cpu_us_per_cycle()),
        FormatCpu(per_node), FormatRate(1e6 / per_node), n));
  }
}

int RunProcessWorker(const ProcessWorkerArgs& args) {
  auto fail = [](const std::string& why) { return WorkerFail("redlock-bench worker", why); };
  absl::StatusOr<std::vector<Endpoint>> nodes = ParseEndpointList(args.nodes);
  if (!nodes.ok()) return fail(nodes.status().ToString());
  Options options;
  options.nodes = *std::move(nodes);
  options.node_timeout = args.node_timeout;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  if (!client.ok()) return fail(client.status().ToString());
  std::vector<ChainFn> chains;
  for (int i = 0; i < args.chains; ++i) {
    chains.push_back(
        LockChain(NewAsyncClientLocker(client->get(), absl::StrCat(args.key, ":t", i)), args.ttl));
  }
  WorkerReadyThenWaitForGo();
  RunLimits limits;
  limits.warmup = args.warmup;
  limits.duration = args.duration;
  limits.iterations = args.iterations;
  limits.warmup_iterations = args.iterations;
  limits.grace = args.node_timeout * 8 + absl::Seconds(2);
  RunOutput out = RunChains(std::move(chains), limits, {});
  std::vector<std::string> errors;
  for (const ErrorCounts* e : {&out.acquire_errors, &out.release_errors}) {
    for (const auto& [code, count] : e->counts()) {
      auto first = e->first_messages().find(code);
      errors.push_back(absl::StrCat(
          e == &out.acquire_errors ? "acquire " : "release ", code, " x", count,
          first != e->first_messages().end() ? absl::StrCat(" (first: ", first->second, ")") : ""));
    }
  }
  Json j{{"attempts", out.attempts},
         {"successes", out.successes},
         {"measured_s", absl::ToDoubleSeconds(out.measured)},
         {"user_us", out.usage.user_us},
         {"sys_us", out.usage.sys_us},
         {"vcsw", out.usage.voluntary_csw},
         {"icsw", out.usage.involuntary_csw},
         {"allocs", out.usage.allocations},
         {"usage_cycles", out.usage_cycles},
         {"acquire", HistogramJson(out.acquire)},
         {"cycle", HistogramJson(out.cycle)},
         {"errors", absl::StrJoin(errors, "; ")}};
  printf("%s\n", j.dump().c_str());
  fflush(stdout);
  return 0;
}

}  // namespace redlock::bench
