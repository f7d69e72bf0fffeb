#include "bench/fair_scenario.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/alloc_count.h"
#include "bench/locker.h"
#include "bench/processes_scenario.h"
#include "bench/report.h"
#include "bench/rows.h"
#include "bench/scenarios.h"
#include "bench/workload.h"
#include "redlock/client.h"
#include "redlock/fair_mutex.h"
#include "redlock/observer.h"
#include "testkit/process.h"

namespace redlock::bench {
namespace {

using Json = nlohmann::json;

// FairLock::TryAcquire + Release of one resource: the lock only when it is
// free and nobody waits (one attempt, as the mutex's TryAcquire).
using FairLocker = TryLocker<FairLock, &FairLock::TryAcquire>;

// One caller, one key: the mutex's cycle and the fair lock's.
RowResult OneCallerRow(Context& ctx, const std::vector<Endpoint>& eps, bool fair,
                       std::unique_ptr<Client>* keep) {
  RowResult identity = LibraryRowIdentity(fair ? "fair lock" : "library", fair ? "fair" : "", 1);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(ClientOptions(ctx, eps));
  if (!client.ok())
    return HarnessErrorRow(ctx, std::move(identity), "Client::Create", client.status());
  Client* c = client->get();
  *keep = *std::move(client);
  const std::string key = ctx.RowKey();
  const absl::Duration ttl = ctx.settings.ttl;
  return MeasureRow(ctx, std::move(identity),
                    [c, key, ttl, fair]() -> absl::StatusOr<std::vector<CycleFn>> {
                      std::vector<CycleFn> out;
                      if (fair) {
                        out.push_back(LockCycle(std::make_unique<FairLocker>(c, key), ttl));
                      } else {
                        out.push_back(LockCycle(NewClientLocker(c, key), ttl));
                      }
                      return out;
                    });
}

// Every acquisition's attempts (the Outcome the library builds when an
// observer is set).
class AttemptCount final : public Observer {
 public:
  void OnAcquire(const AcquireEvent& event) override {
    attempts_.fetch_add(event.outcome.attempts, std::memory_order_relaxed);
  }
  int64_t attempts() const { return attempts_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> attempts_{0};
};

// The hot rows: `processes` worker processes of `threads` threads each, all
// on one resource, the fair lock or the mutex.
RowResult HotProcessesRow(Context& ctx, const std::vector<Endpoint>& eps, bool fair) {
  const BenchSettings& s = ctx.settings;
  const int processes = s.fair_processes;
  const int threads = s.fair_threads;
  RowResult row = LibraryRowIdentity(
      absl::StrCat(fair ? "fair lock" : "mutex", " hot, ", processes, "x", threads),
      fair ? "fair hot" : "contended", processes * threads);
  row.processes = processes;
  ctx.progress.Row(row.impl);
  std::vector<std::string> names;
  for (const Endpoint& ep : eps) names.push_back(ep.ToString());
  const std::string resource = ctx.RowKey() + ":hot";
  std::vector<std::vector<std::string>> argvs;
  for (int i = 0; i < processes; ++i) {
    argvs.push_back({"redlock-bench", "--fair_worker",
                     absl::StrCat("--fair_worker_fair=", fair ? "true" : "false"),
                     absl::StrCat("--nodes=", absl::StrJoin(names, ",")),
                     absl::StrCat("--process_worker_key=", resource),
                     absl::StrCat("--callers=", threads),
                     absl::StrCat("--warmup=", absl::FormatDuration(s.warmup)),
                     absl::StrCat("--duration=", absl::FormatDuration(s.fair_duration)),
                     absl::StrCat("--ttl=", absl::FormatDuration(s.ttl)),
                     absl::StrCat("--node_timeout=", absl::FormatDuration(s.node_timeout)),
                     absl::StrCat("--hot_hold=", absl::FormatDuration(s.hot_hold)),
                     absl::StrCat("--hot_wait=", absl::FormatDuration(s.fair_wait))});
  }
  WorkerProcesses workers;
  if (absl::Status st = workers.Start(s.self_exe, std::move(argvs)); !st.ok()) {
    return HarnessErrorRow(ctx, std::move(row), "starting the workers", st);
  }
  workers.Go();  // go: every worker's read returns at once
  const ServersCpuWindow window =
      WatchServersCpu(ctx.nodes, static_cast<int>(eps.size()), s.warmup, s.fair_duration);

  LatencyHistogram waits;
  std::vector<std::pair<int64_t, int64_t>> holds;  // (granted, released), every process
  int64_t attempts = 0, queued = 0, failures = 0, attempt_calls = 0, attempt_queued = 0;
  double measured = 0;
  std::vector<int64_t> per_process;
  std::vector<int64_t> per_thread;
  row.usage.allocations = 0;  // the workers' sum (-1 once one does not count)
  for (size_t i = 0; i < workers.size(); ++i) {
    const absl::Duration wait = s.fair_duration + s.fair_wait + absl::Seconds(20);
    absl::StatusOr<Json> result = workers.Result(i, wait);
    if (!result.ok()) {
      return HarnessErrorRow(ctx, std::move(row), absl::StrCat("worker ", i), result.status());
    }
    const Json& j = *result;
    waits.Merge(HistogramFromJson(j.at("waits")));
    for (const Json& h : j.at("holds"))
      holds.emplace_back(h.at(0).get<int64_t>(), h.at(1).get<int64_t>());
    attempts += j.at("attempts").get<int64_t>();
    attempt_calls += j.at("attempt_calls").get<int64_t>();
    attempt_queued += j.at("attempt_queued").get<int64_t>();
    queued += j.at("queued").get<int64_t>();
    failures += j.at("failures").get<int64_t>();
    measured += j.at("measured_s").get<double>();
    per_process.push_back(j.at("grants").get<int64_t>());
    for (const Json& t : j.at("per_thread")) per_thread.push_back(t.get<int64_t>());
    row.usage.user_us += j.at("user_us").get<int64_t>();
    row.usage.sys_us += j.at("sys_us").get<int64_t>();
    row.usage.voluntary_csw += j.at("vcsw").get<int64_t>();
    row.usage.involuntary_csw += j.at("icsw").get<int64_t>();
    AddAllocations(&row.usage, j.value("allocs", int64_t{-1}));
    if (const std::string errors = j.value("errors", ""); !errors.empty()) {
      row.notes.push_back(absl::StrCat("worker ", i, ": ", errors));
    }
  }
  // The hand-off: from one holder's Release returning to the next grant
  // (one clock: CLOCK_MONOTONIC, shared by the processes of one host).
  std::sort(holds.begin(), holds.end());
  LatencyHistogram handoff;
  int64_t overlaps = 0;
  for (size_t i = 1; i < holds.size(); ++i) {
    // A grant that came before the previous Release returned (its release
    // had reached the nodes) is a hand-off of 0.
    const int64_t gap = holds[i].first - holds[i - 1].second;
    if (gap < 0) ++overlaps;
    handoff.Record(std::max<int64_t>(0, gap));
  }
  const int64_t grants = static_cast<int64_t>(holds.size());
  row.acquire = Distribution(waits);
  row.handoff = Distribution(handoff);
  row.handoff_call = Distribution(handoff);
  row.successes = grants;
  row.attempts = grants + failures;
  row.usage_cycles = grants;
  row.measured_s = measured / static_cast<double>(std::max<size_t>(1, workers.size()));
  SetServersCpu(window, row);
  // Attempts per call over the calls whose Outcomes the counter read
  // (WorkerMain: those that ended between its two readings).
  const double per_call =
      attempt_calls > 0 ? static_cast<double>(attempts) / static_cast<double>(attempt_calls) : 0;
  row.notes.push_back(
      absl::StrFormat("%.2f attempts per call (%d attempts by the %d calls that "
                      "ended while they were counted; %d grants measured)",
                      per_call, attempts, attempt_calls, grants));
  if (fair && attempt_calls > 0) {
    // Every call's first attempt is its probe, a queued call's second its
    // place (once, without faults): the rest were made when woken.
    const int64_t woken = attempts - attempt_calls - attempt_queued;
    row.notes.push_back(absl::StrFormat(
        "%d of %d calls took a place (%d of those counted); woken attempts (after the probe and "
        "the place): %.2f per call",
        queued, grants, attempt_queued,
        static_cast<double>(woken) / static_cast<double>(attempt_calls)));
  }
  if (waits.count() > 0) {
    const Distribution w(waits);
    const int64_t p10 = w.Quantile(0.1);
    row.notes.push_back(absl::StrFormat(
        "waiting time: p10 %s, p50 %s, p90 %s, p99 %s, max %s; p90/p10 %.2f", FormatLatency(p10),
        FormatLatency(w.Quantile(0.5)), FormatLatency(w.Quantile(0.9)),
        FormatLatency(w.Quantile(0.99)), FormatLatency(w.max()),
        p10 > 0 ? static_cast<double>(w.Quantile(0.9)) / static_cast<double>(p10) : 0.0));
  }
  if (!per_process.empty()) {
    const auto [lo, hi] = std::minmax_element(per_process.begin(), per_process.end());
    row.notes.push_back(absl::StrCat("grants per process: ", absl::StrJoin(per_process, ", "),
                                     " (min ", *lo, ", max ", *hi, ")"));
  }
  if (!per_thread.empty()) {
    std::sort(per_thread.begin(), per_thread.end());
    row.notes.push_back(absl::StrCat(
        "grants per thread (", per_thread.size(), " threads): min ", per_thread.front(),
        ", median ", per_thread[per_thread.size() / 2], ", max ", per_thread.back()));
  }
  if (overlaps > 0) {
    row.notes.push_back(absl::StrCat(overlaps,
                                     " grants came before the previous holder's Release returned "
                                     "(its release had reached the nodes): hand-offs of 0"));
  }
  if (failures > 0) row.notes.push_back(absl::StrCat(failures, " calls failed (see errors)"));
  return row;
}

}  // namespace

void RunFair(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  const BenchSettings& s = ctx.settings;
  g->title = absl::StrCat("the fair lock beside the mutex: one caller; one hot resource, ",
                          s.fair_processes, " processes x ", s.fair_threads, " waiting threads");
  CommonSettings(ctx, g);
  AddSetting(g, "hold", Dur(s.hot_hold));
  AddSetting(g, "wait", Dur(s.fair_wait));
  AddSetting(g, "hot duration", Dur(s.fair_duration));
  AddSetting(g, "server_cpu", ctx.nodes.fleet() != nullptr ? "/proc/<pid>/stat" : "INFO cpu");
  g->rows.push_back(FloorRow(ctx, eps));
  std::unique_ptr<Client> mutex_client, fair_client;
  g->rows.push_back(OneCallerRow(ctx, eps, false, &mutex_client));
  g->rows.push_back(OneCallerRow(ctx, eps, true, &fair_client));
  mutex_client.reset();
  fair_client.reset();
  g->rows.push_back(HotProcessesRow(ctx, eps, false));
  g->rows.push_back(HotProcessesRow(ctx, eps, true));
  const RowResult* lib = g->Find(kLibrary, "", 1);
  const RowResult* fair1 = g->Find(kLibrary, "fair", 1);
  if (lib != nullptr && fair1 != nullptr && lib->ran() && fair1->ran() &&
      lib->cycle.Quantile(0.5) > 0) {
    g->notes.push_back(absl::StrFormat(
        "one caller: the fair lock's acquire+release p50 is %.2fx the mutex's, its CPU per "
        "cycle %.2fx (its try is one script per node, the mutex's a SET)",
        static_cast<double>(fair1->cycle.Quantile(0.5)) /
            static_cast<double>(lib->cycle.Quantile(0.5)),
        fair1->cpu_us_per_cycle() / lib->cpu_us_per_cycle()));
  }
  g->notes.push_back(
      "hot rows: every thread loops Acquire(wait) + hold + Release on one resource; acquire = "
      "the waiting time of a call (from its call to its grant); handoff = from one holder's "
      "Release returning to the next grant, across processes; attempts per call from each "
      "call's Outcome (an observer in every worker), over the calls that ended while the "
      "count ran; the servers' CPU per grant");
}

int RunFairWorker(const FairWorkerArgs& args) {
  auto fail = [](const std::string& why) { return WorkerFail("redlock-bench fair worker", why); };
  absl::StatusOr<std::vector<Endpoint>> nodes = ParseEndpointList(args.nodes);
  if (!nodes.ok()) return fail(nodes.status().ToString());
  auto counter = std::make_shared<AttemptCount>();
  Options options;
  options.nodes = *std::move(nodes);
  options.node_timeout = args.node_timeout;
  options.observer = counter;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  if (!client.ok()) return fail(client.status().ToString());
  if (args.fair) {
    // A first waiting call opens the client's subscriber connections, which
    // stay open: without it the first waiters' announcements could come
    // before their SUBSCRIBE reached the nodes (the connection still
    // connecting), and they would wait for a heartbeat (place_ttl / 3).
    FairLock warm((*client).get(), absl::StrCat(args.resource, ":warm:", getpid()));
    absl::StatusOr<Lease> lease = warm.Acquire(args.ttl, args.wait);
    if (!lease.ok()) return fail(absl::StrCat("warm-up: ", lease.status().ToString()));
    if (absl::Status s = warm.Release(*lease); !s.ok()) return fail(s.ToString());
  }
  WorkerReadyThenWaitForGo();
  std::mutex mu;
  LatencyHistogram waits;
  std::vector<std::pair<int64_t, int64_t>> holds;
  std::vector<std::string> errors;
  std::atomic<int64_t> queued{0}, failures{0};
  const int64_t measure_from = NowNs() + absl::ToInt64Nanoseconds(args.warmup);
  const int64_t end = measure_from + absl::ToInt64Nanoseconds(args.duration);
  // The attempts (every call's, from its Outcome) and this process's usage
  // over the measurement: taken by the first thread that passes each end.
  std::once_flag started, stopped;
  int64_t attempts_start = 0, attempts_end = 0;
  int64_t latched_start = 0, latched_end = 0;  // when the counter was read
  ProcessUsage usage_start, usage_end;
  auto latch = [&](std::once_flag& once, int64_t* attempts, ProcessUsage* usage) {
    std::call_once(once, [&] {
      // The allocation count is open from the first latch to the second.
      const bool start = &once == &started;
      if (start) OpenAllocationCount();
      *attempts = counter->attempts();
      (start ? latched_start : latched_end) = NowNs();
      *usage = CurrentProcessUsage();
      if (!start) CloseAllocationCount();
    });
  };
  // Every call's end (its grant or failure) and whether it took a place:
  // the counter's attempts between its two readings are those of the calls
  // that ended between them (an Outcome is counted as its call returns),
  // whenever they began. Counted against the measured grants instead (calls
  // that began in the window), the calls waiting when it opened added their
  // three attempts each without a grant: 64 x 3 over about 700 grants was
  // the "0.32 beyond one" of round four.
  struct Ended {
    int64_t at;
    bool placed;
  };
  std::vector<Ended> ended;
  std::vector<int64_t> per_thread(static_cast<size_t>(args.threads), 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < args.threads; ++t) {
    threads.emplace_back([&, t] {
      for (;;) {
        const int64_t call = NowNs();
        if (call >= end) break;
        if (call >= measure_from) latch(started, &attempts_start, &usage_start);
        std::atomic<bool> placed{false};
        absl::StatusOr<Lease> lease;
        if (args.fair) {
          Client::FamilyRequest r;
          r.kind = Client::FamilyRequest::Kind::kFair;
          r.resource = args.resource;
          r.ttl = args.ttl;
          r.wait = args.wait;
          r.on_queued = [&placed] { placed = true; };
          absl::StatusOr<Client::FamilyGrant> g = (*client)->AcquireFamily(std::move(r));
          lease = g.ok() ? absl::StatusOr<Lease>(g->lease) : absl::StatusOr<Lease>(g.status());
        } else {
          lease = (*client)->Acquire(args.resource, args.ttl, args.wait);
        }
        const int64_t granted = NowNs();
        const bool measured = call >= measure_from && granted <= end;
        {
          std::lock_guard<std::mutex> lock(mu);
          ended.push_back({granted, placed.load()});
        }
        if (!lease.ok()) {
          if (measured) {
            ++failures;
            std::lock_guard<std::mutex> lock(mu);
            if (errors.size() < 3) errors.push_back(lease.status().ToString());
          }
          continue;
        }
        if (args.hold > absl::ZeroDuration()) absl::SleepFor(args.hold);
        absl::Status released = (*client)->Release(*lease);
        const int64_t done = NowNs();
        if (done >= end) latch(stopped, &attempts_end, &usage_end);
        if (!measured) continue;
        if (placed) ++queued;
        std::lock_guard<std::mutex> lock(mu);
        ++per_thread[static_cast<size_t>(t)];
        waits.Record(granted - call);
        holds.emplace_back(granted, done);
        if (!released.ok() && errors.size() < 3) errors.push_back(released.ToString());
      }
    });
  }
  for (auto& t : threads) t.join();
  latch(started, &attempts_start, &usage_start);
  latch(stopped, &attempts_end, &usage_end);
  const ProcessUsage usage = UsageDelta(usage_end, usage_start);
  int64_t counted_calls = 0, counted_queued = 0;
  for (const Ended& e : ended) {
    if (e.at > latched_start && e.at <= latched_end) {
      ++counted_calls;
      if (e.placed) ++counted_queued;
    }
  }
  Json holds_json = Json::array();
  for (const auto& [a, b] : holds) holds_json.push_back(Json::array({a, b}));
  Json j{{"grants", static_cast<int64_t>(holds.size())},
         {"attempts", attempts_end - attempts_start},
         {"attempt_calls", counted_calls},
         {"attempt_queued", counted_queued},
         {"queued", queued.load()},
         {"failures", failures.load()},
         {"measured_s", absl::ToDoubleSeconds(args.duration)},
         {"user_us", usage.user_us},
         {"sys_us", usage.sys_us},
         {"vcsw", usage.voluntary_csw},
         {"icsw", usage.involuntary_csw},
         {"allocs", usage.allocations},
         {"waits", HistogramJson(waits)},
         {"holds", holds_json},
         {"per_thread", per_thread},
         {"errors", absl::StrJoin(errors, "; ")}};
  printf("%s\n", j.dump().c_str());
  fflush(stdout);
  return 0;
}

}  // namespace redlock::bench
