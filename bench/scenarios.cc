#include "bench/scenarios.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/backends_scenario.h"
#include "bench/baselines.h"
#include "bench/locker.h"
#include "bench/pipelined_limit.h"
#include "bench/report.h"
#include "bench/rows.h"
#include "bench/workload.h"
#include "testkit/fault_proxy.h"
#include "redlock/client.h"
#include "redlock/internal/algorithm.h"
#include "redlock/metrics.h"
#include "testkit/replication.h"

namespace redlock::bench {

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kSmoke:
      return "smoke";
    case Mode::kQuick:
      return "quick";
    case Mode::kFull:
      return "full";
  }
  return "?";
}

// ---- NodeSet, Progress, Context -------------------------------------------------

NodeSet::NodeSet(std::unique_ptr<testkit::Fleet> fleet)
    : fleet_(std::move(fleet)), nodes_(fleet_->endpoints()) {}
NodeSet::NodeSet(std::vector<Endpoint> nodes) : nodes_(std::move(nodes)) {}
NodeSet::~NodeSet() = default;

std::vector<Endpoint> NodeSet::First(int n) const {
  return std::vector<Endpoint>(nodes_.begin(), nodes_.begin() + std::min(n, size()));
}

Progress::Progress(int total_groups)
    : total_(total_groups), tty_(isatty(STDERR_FILENO) == 1), start_ns_(NowNs()) {}

Progress::~Progress() { Done(); }

void Progress::Group(int index, const std::string& label) {
  index_ = index;
  group_ = label;
  Print("");
}

void Progress::Row(const std::string& label) { Print(label); }

void Progress::Print(const std::string& text) {
  const int64_t secs = (NowNs() - start_ns_) / 1'000'000'000;
  std::string line = absl::StrFormat("[%2d/%d %d:%02d] %s%s%s", index_, total_, secs / 60,
                                     secs % 60, group_, text.empty() ? "" : ": ", text);
  if (tty_) {
    fprintf(stderr, "\r\033[K%s", line.c_str());
    dirty_ = true;
  } else {
    fprintf(stderr, "%s\n", line.c_str());
  }
  fflush(stderr);
}

void Progress::Done() {
  if (tty_ && dirty_) {
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
  }
  dirty_ = false;
}

std::string Context::RowKey() { return absl::StrCat("rb:", settings.run_id, ":", ++next_row); }

std::string CallersLabel(int callers) { return absl::StrCat("x", callers); }

RowResult HarnessErrorRow(Context& ctx, RowResult row, const std::string& what,
                          const absl::Status& status) {
  row.harness_error = absl::StrCat(what, ": ", status.ToString());
  ctx.harness_errors.push_back(
      absl::StrCat(row.impl, " ", CallersLabel(row.callers), ": ", row.harness_error));
  return row;
}

RowResult RunRow(Context& ctx, RowSpec spec) {
  RowResult row;
  row.impl = spec.impl;
  row.family = spec.family;
  row.variant = spec.variant;
  row.callers = spec.callers;
  ctx.progress.Row(absl::StrCat(spec.impl, " ", CallersLabel(spec.callers)));

  absl::StatusOr<std::vector<CycleFn>> callers;
  absl::StatusOr<std::vector<ChainFn>> chains;
  if (spec.make_chains) {
    chains = spec.make_chains();
    if (!chains.ok()) return HarnessErrorRow(ctx, std::move(row), "setup", chains.status());
  } else {
    callers = spec.make();
    if (!callers.ok()) return HarnessErrorRow(ctx, std::move(row), "setup", callers.status());
  }

  const BenchSettings& s = ctx.settings;
  RunLimits limits;
  limits.warmup = spec.warmup > absl::ZeroDuration() ? spec.warmup : s.warmup;
  limits.warmup_iterations = std::max<int64_t>(1, s.iterations);
  limits.duration = spec.duration > absl::ZeroDuration() ? spec.duration : s.duration;
  limits.iterations = s.iterations;
  limits.grace = s.hot_wait * 4 + s.node_timeout * 8 + absl::Seconds(2);

  absl::Status fault_on = absl::OkStatus();
  bool fault_applied = false;
  RunHooks hooks;
  hooks.before_warmup = [&] {
    if (spec.fault == nullptr) return;
    fault_on = spec.fault->on();
    fault_applied = true;  // switch off even after a partial failure
  };
  if (spec.at_start) hooks.at_measure_start = [&] { spec.at_start(); };
  if (spec.at_mid) hooks.at_measure_mid = [&] { spec.at_mid(); };
  if (spec.at_stop) hooks.at_measure_stop = [&] { spec.at_stop(); };

  RunOutput out = spec.make_chains ? RunChains(*std::move(chains), limits, std::move(hooks))
                                   : RunWorkload(*std::move(callers), limits, std::move(hooks));

  row.acquire = Distribution(out.acquire);
  row.cycle = Distribution(out.cycle);
  row.handoff = Distribution(out.handoff);
  row.handoff_call = Distribution(out.handoff_call);
  row.attempts = out.attempts;
  row.successes = out.successes;
  row.measured_s = absl::ToDoubleSeconds(out.measured);
  row.warmup_cycles = out.warmup_cycles;
  row.hit_iteration_cap = out.hit_iteration_cap;
  row.acquire_errors = out.acquire_errors;
  row.release_errors = out.release_errors;
  row.peak_rss_kb = out.peak_rss_kb;
  row.peak_is_per_run = out.peak_is_per_run;
  row.usage = out.usage;
  row.usage_cycles = out.usage_cycles;
  if (out.attempts > out.successes && out.first_failure_ns >= 0) {
    row.notes.push_back(
        absl::StrFormat("the %d failed cycles ended between %s and %s into the %.2fs measurement",
                        out.attempts - out.successes, FormatLatency(out.first_failure_ns),
                        FormatLatency(out.last_failure_ns), absl::ToDoubleSeconds(out.measured)));
  }
  if (out.chains_left_running > 0) {
    row.notes.push_back(
        absl::StrCat(out.chains_left_running, " chains were still in a cycle when the row ended"));
  }
  if (spec.track_memory) {
    row.memory_tracked = true;
    row.rss_start_kb = out.rss_start_kb;
    row.rss_mid_kb = out.rss_mid_kb;
    row.rss_end_kb = out.rss_end_kb;
  }
  if (spec.after) spec.after(&row);
  if (fault_applied) {
    absl::Status off = spec.fault->off();
    if (!off.ok()) return HarnessErrorRow(ctx, std::move(row), "switching the fault off", off);
  }
  if (!fault_on.ok())
    return HarnessErrorRow(ctx, std::move(row), "switching the fault on", fault_on);
  return row;
}

BaselineOptions BaselinesFor(const Context& ctx, std::vector<Endpoint> eps) {
  BaselineOptions o;
  o.nodes = std::move(eps);
  o.node_timeout = ctx.settings.node_timeout;
  return o;
}

// floor, sequential or wait-for-all.
RowResult BaselineRow(Context& ctx, const std::string& family, const std::vector<Endpoint>& eps,
                      int callers, const Fault* fault = nullptr) {
  RowSpec spec;
  spec.impl = family;
  spec.family = family;
  spec.callers = callers;
  spec.fault = fault;
  spec.track_memory = fault != nullptr;
  const BaselineOptions options = BaselinesFor(ctx, eps);
  const std::string key = ctx.RowKey();
  const absl::Duration ttl = ctx.settings.ttl;
  spec.make = [&, options, key, ttl]() -> absl::StatusOr<std::vector<CycleFn>> {
    std::vector<CycleFn> out;
    for (int i = 0; i < callers; ++i) {
      std::string resource = absl::StrCat(key, ":t", i);
      absl::StatusOr<std::unique_ptr<Locker>> locker =
          family == kFloor        ? NewFloorLocker(options, std::move(resource))
          : family == kSequential ? NewSequentialLocker(options, std::move(resource))
                                  : NewWaitForAllLocker(options, std::move(resource));
      if (!locker.ok()) return locker.status();
      out.push_back(LockCycle(*std::move(locker), ttl));
    }
    return out;
  };
  return RunRow(ctx, std::move(spec));
}

RowSpec HotRow(const BenchSettings& s, HotResource* hot, std::string impl, std::string family,
               std::string variant) {
  RowSpec spec;
  spec.impl = std::move(impl);
  spec.family = std::move(family);
  spec.variant = std::move(variant);
  spec.callers = s.hot_waiters;
  spec.duration = s.hot_duration;
  const int waiters = s.hot_waiters;
  spec.make = [hot, waiters]() -> absl::StatusOr<std::vector<CycleFn>> {
    std::vector<CycleFn> out;
    for (int i = 0; i < waiters; ++i) out.push_back(hot->Cycle(i));
    return out;
  };
  spec.at_start = [hot] { hot->ResetCounters(); };
  spec.at_stop = [hot] { hot->Stop(); };
  return spec;
}

RowResult FloorRow(Context& ctx, const std::vector<Endpoint>& eps) {
  return BaselineRow(ctx, kFloor, {eps.at(0)}, 1);
}

namespace {

Options ClientOptions(const Context& ctx, const std::vector<Endpoint>& eps) {
  Options o;
  o.nodes = eps;
  o.node_timeout = ctx.settings.node_timeout;
  return o;
}

std::string DescribeHealth(const NodeHealth& h) {
  return absl::StrCat(h.node, ": ", h.connected ? "connected" : "not connected",
                      h.breaker_open ? ", breaker open" : ", breaker closed", ", ", h.in_flight,
                      " commands in flight");
}

enum class LibraryKind { kSingle, kMultiQuorum, kMultiAllNodes };

struct LibrarySpec {
  std::string impl = kLibrary;
  std::string family = kLibrary;
  std::string variant;
  int callers = 1;
  LibraryKind kind = LibraryKind::kSingle;
  bool async = false;  // C chains on TryAcquireAsync/ReleaseAsync (kSingle only)
  std::function<void(Options*)> tweak;
  const Fault* fault = nullptr;
  bool track_memory = false;
  absl::Duration duration = absl::ZeroDuration();
  absl::Duration warmup = absl::ZeroDuration();
  int watch_node = -1;      // report this node's health as the client saw it
  std::string watch_label;  // how to name it ("the stopped node", ...)
};

RowResult LibraryRow(Context& ctx, const std::vector<Endpoint>& eps, const LibrarySpec& ls) {
  Options options = ClientOptions(ctx, eps);
  if (ls.tweak) ls.tweak(&options);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  if (!client.ok()) {
    RowResult row;
    row.impl = ls.impl;
    row.family = ls.family;
    row.variant = ls.variant;
    row.callers = ls.callers;
    return HarnessErrorRow(ctx, std::move(row), "Client::Create", client.status());
  }
  Client* c = client->get();
  RowSpec spec;
  spec.impl = ls.impl;
  spec.family = ls.family;
  spec.variant = ls.variant;
  spec.callers = ls.callers;
  spec.fault = ls.fault;
  spec.track_memory = ls.track_memory;
  spec.duration = ls.duration;
  spec.warmup = ls.warmup;
  const std::string key = ctx.RowKey();
  const absl::Duration ttl = ctx.settings.ttl;
  if (ls.async) {
    spec.make_chains = [&, c, key, ttl]() -> absl::StatusOr<std::vector<ChainFn>> {
      std::vector<ChainFn> out;
      for (int i = 0; i < ls.callers; ++i) {
        out.push_back(LockChain(NewAsyncClientLocker(c, absl::StrCat(key, ":t", i)), ttl));
      }
      return out;
    };
  } else {
    spec.make = [&, c, key, ttl]() -> absl::StatusOr<std::vector<CycleFn>> {
      std::vector<CycleFn> out;
      for (int i = 0; i < ls.callers; ++i) {
        std::string resource = absl::StrCat(key, ":t", i);
        std::unique_ptr<Locker> locker;
        if (ls.kind == LibraryKind::kSingle) {
          locker = NewClientLocker(c, resource);
        } else {
          locker = NewMultiLocker(c, ls.kind == LibraryKind::kMultiAllNodes,
                                  {resource + ":a", resource + ":b", resource + ":c"});
        }
        out.push_back(LockCycle(std::move(locker), ttl));
      }
      return out;
    };
  }
  size_t in_flight_at_start = 0;
  if (ls.watch_node < 0) {
    // Nodes the client holds for unhealthy at the end of a row without a
    // fault (e.g. a breaker opened by plain overload).
    spec.after = [c](RowResult* row) {
      for (const NodeHealth& h : c->Health()) {
        if (h.breaker_open || !h.connected || !h.last_error.empty()) {
          row->notes.push_back(absl::StrCat("at the end, the client saw ", DescribeHealth(h),
                                            "; last error: ", h.last_error));
        }
      }
    };
  }
  if (ls.watch_node >= 0) {
    spec.at_start = [c, node = ls.watch_node, &in_flight_at_start] {
      std::vector<NodeHealth> health = c->Health();
      if (node < static_cast<int>(health.size())) {
        in_flight_at_start = health[static_cast<size_t>(node)].in_flight;
      }
    };
    spec.after = [c, node = ls.watch_node, label = ls.watch_label,
                  &in_flight_at_start](RowResult* row) {
      std::vector<NodeHealth> health = c->Health();
      if (node < static_cast<int>(health.size())) {
        row->notes.push_back(absl::StrCat("at the end of the fault, the client saw ", label, " ",
                                          DescribeHealth(health[static_cast<size_t>(node)]), " (",
                                          in_flight_at_start, " when the measurement started)"));
      }
    };
  }
  return RunRow(ctx, std::move(spec));
}

LibrarySpec AsyncSpec(int callers) {
  LibrarySpec lib;
  lib.impl = "library async";
  lib.variant = kAsync;
  lib.callers = callers;
  lib.async = true;
  return lib;
}

// The pipelined limit (pipelined_limit.h) with `callers` chains.
RowResult LimitRow(Context& ctx, const std::vector<Endpoint>& eps, int callers,
                   const Fault* fault = nullptr, absl::Duration duration = absl::ZeroDuration()) {
  RowSpec spec;
  spec.impl = "pipelined limit";
  spec.family = kPipelinedLimit;
  spec.callers = callers;
  spec.fault = fault;
  spec.duration = duration;
  absl::StatusOr<std::unique_ptr<PipelinedLimit>> limit =
      PipelinedLimit::Start(BaselinesFor(ctx, eps));
  if (!limit.ok()) {
    RowResult row;
    row.impl = spec.impl;
    row.family = spec.family;
    row.callers = callers;
    return HarnessErrorRow(ctx, std::move(row), "connecting the pipelined limit", limit.status());
  }
  PipelinedLimit* l = limit->get();
  const std::string key = ctx.RowKey();
  const absl::Duration ttl = ctx.settings.ttl;
  spec.make_chains = [l, key, ttl, callers]() -> absl::StatusOr<std::vector<ChainFn>> {
    std::vector<ChainFn> out;
    for (int i = 0; i < callers; ++i) {
      out.push_back(LockChain(l->NewLocker(absl::StrCat(key, ":t", i)), ttl));
    }
    return out;
  };
  PipelinedLimit::Counters before;
  spec.at_start = [l, &before] { before = l->counters(); };
  spec.after = [l, &before](RowResult* row) {
    const PipelinedLimit::Counters now = l->counters();
    const int64_t commands = now.commands - before.commands;
    const int64_t writes = now.writes - before.writes;
    if (writes > 0) {
      row->notes.push_back(absl::StrFormat("%.1f commands per write(2) on average (%d commands)",
                                           static_cast<double>(commands) / writes, commands));
    }
  };
  return RunRow(ctx, std::move(spec));
}

// ---- Faults -------------------------------------------------------------------------

absl::Status WaitAnswering(testkit::Fleet* fleet, int node) {
  absl::Status last;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<testkit::RedisValue> pong =
        fleet->Command(node, {"PING"}, absl::Milliseconds(200));
    if (pong.ok() && pong->type != testkit::RedisValue::Type::kError) return absl::OkStatus();
    last = pong.ok() ? absl::UnavailableError(pong->str) : pong.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::UnavailableError(
      absl::StrCat("node ", node, " did not answer after SIGCONT: ", last.ToString()));
}

Fault StopFault(testkit::Fleet* fleet, int node) {
  Fault f;
  f.description = absl::StrCat("node ", node, " (", fleet->address(node), ") SIGSTOPped");
  f.on = [fleet, node] { return fleet->Stop(node); };
  f.off = [fleet, node] {
    absl::Status st = fleet->Continue(node);
    if (!st.ok()) return st;
    return WaitAnswering(fleet, node);
  };
  return f;
}

// ---- Scenarios ------------------------------------------------------------------------

void AddSetting(GroupResult* g, std::string key, std::string value) {
  g->settings.emplace_back(std::move(key), std::move(value));
}

std::string Dur(absl::Duration d) { return absl::FormatDuration(d); }

void CommonSettings(const Context& ctx, GroupResult* g) {
  AddSetting(g, "ttl", Dur(ctx.settings.ttl));
  AddSetting(g, "node_timeout", Dur(ctx.settings.node_timeout));
  AddSetting(g, "quorum", absl::StrCat(g->n / 2 + 1));
}

void RunHealthy(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "all nodes healthy";
  CommonSettings(ctx, g);
  const int many = ctx.settings.callers_many;
  g->rows.push_back(FloorRow(ctx, eps));
  for (int callers : {1, many}) {
    LibrarySpec lib;
    lib.callers = callers;
    g->rows.push_back(LibraryRow(ctx, eps, lib));
    // Measured next to the blocking row: their ratios are targets. With one
    // caller the limit is the least a quorum round trip costs on this machine.
    if (callers > 1) g->rows.push_back(LibraryRow(ctx, eps, AsyncSpec(callers)));
    g->rows.push_back(LimitRow(ctx, eps, callers));
    g->rows.push_back(BaselineRow(ctx, kSequential, eps, callers));
    g->rows.push_back(BaselineRow(ctx, kWaitForAll, eps, callers));
  }
}

void RunStopped(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  testkit::Fleet* fleet = ctx.nodes.fleet();
  const int stopped = n - 1;
  const Fault fault = StopFault(fleet, stopped);
  g->title = fault.description + " during each row, continued after";
  CommonSettings(ctx, g);
  AddSetting(g, "stopped_node", eps[static_cast<size_t>(stopped)].ToString());
  g->rows.push_back(FloorRow(ctx, eps));
  {
    LibrarySpec ref;
    ref.impl = "library, no fault";
    ref.variant = "no fault";
    g->rows.push_back(LibraryRow(ctx, eps, ref));
  }
  for (int callers : {1, ctx.settings.callers_many}) {
    LibrarySpec lib;
    lib.callers = callers;
    lib.fault = &fault;
    lib.track_memory = true;
    lib.watch_node = stopped;
    lib.watch_label = "the stopped node";
    // Long enough under the fault for the client to reach its steady state
    // (breaker open, in-flight cap) before memory is sampled.
    lib.warmup = ctx.settings.memory_warmup;
    if (callers > 1) lib.duration = ctx.settings.memory_duration;
    g->rows.push_back(LibraryRow(ctx, eps, lib));
  }
  {
    // Short rows: the throughput under the fault, not the memory's steady state.
    LibrarySpec async = AsyncSpec(ctx.settings.callers_many);
    async.fault = &fault;
    async.watch_node = stopped;
    async.watch_label = "the stopped node";
    g->rows.push_back(LibraryRow(ctx, eps, async));
    g->rows.push_back(LimitRow(ctx, eps, ctx.settings.callers_many, &fault));
  }
  g->rows.push_back(BaselineRow(ctx, kSequential, eps, 1, &fault));
  g->rows.push_back(BaselineRow(ctx, kWaitForAll, eps, 1, &fault));
}

void RunSlow(Context& ctx, int n, GroupResult* g, int slow_count, absl::Duration latency,
             absl::Duration jitter) {
  std::vector<Endpoint> eps = ctx.nodes.First(n);
  const std::vector<Endpoint> direct = eps;
  std::vector<std::unique_ptr<testkit::FaultProxy>> proxies;
  std::vector<std::string> slow_names;
  for (int i = n - slow_count; i < n; ++i) {
    testkit::ProxyOptions po;
    po.upstream_host = eps[static_cast<size_t>(i)].host;
    po.upstream_port = static_cast<uint16_t>(eps[static_cast<size_t>(i)].port);
    po.seed = ctx.settings.seed + static_cast<uint64_t>(i) + 1;
    absl::StatusOr<std::unique_ptr<testkit::FaultProxy>> proxy = testkit::FaultProxy::Start(po);
    if (!proxy.ok()) {
      ctx.harness_errors.push_back(absl::StrCat(
          g->scenario, " N=", n, ": starting the fault proxy: ", proxy.status().ToString()));
      g->skipped = true;
      g->skip_reason = absl::StrCat("the fault proxy did not start: ", proxy.status().ToString());
      return;
    }
    slow_names.push_back(eps[static_cast<size_t>(i)].ToString());
    eps[static_cast<size_t>(i)].host = "127.0.0.1";
    eps[static_cast<size_t>(i)].port = (*proxy)->listen_port();
    proxies.push_back(*std::move(proxy));
  }
  const testkit::FaultSpec spec = testkit::FaultSpec::Latency(latency, jitter);
  Fault fault;
  fault.description = absl::StrCat(
      slow_count, slow_count == 1 ? " node" : " nodes", " (", absl::StrJoin(slow_names, ", "),
      ") behind the fault proxy with ", spec.ToString(), " on replies");
  fault.on = [&proxies, spec]() -> absl::Status {
    for (auto& p : proxies) {
      absl::Status st = p->SetFault(testkit::Direction::kToClient, spec);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  };
  fault.off = [&proxies]() -> absl::Status {
    for (auto& p : proxies) p->ClearFaults();
    return absl::OkStatus();
  };
  g->title = fault.description;
  CommonSettings(ctx, g);
  AddSetting(g, "slow_nodes", absl::StrJoin(slow_names, ","));
  AddSetting(g, "latency", Dur(latency));
  AddSetting(g, "jitter", Dur(jitter));
  g->rows.push_back(FloorRow(ctx, direct));
  for (int callers : {1, ctx.settings.callers_many}) {
    LibrarySpec lib;
    lib.callers = callers;
    lib.fault = &fault;
    lib.watch_node = n - 1;
    lib.watch_label = "the last slow node (through its proxy)";
    g->rows.push_back(LibraryRow(ctx, eps, lib));
  }
  g->rows.push_back(BaselineRow(ctx, kSequential, eps, 1, &fault));
  g->rows.push_back(BaselineRow(ctx, kWaitForAll, eps, 1, &fault));
  g->notes.push_back("the floor talks to node 0 directly; the slow nodes are always the last ones");
}

void RunSlow1(Context& ctx, int n, GroupResult* g) {
  RunSlow(ctx, n, g, 1, ctx.settings.slow_latency, absl::ZeroDuration());
}
void RunSlow2(Context& ctx, int n, GroupResult* g) {
  RunSlow(ctx, n, g, 2, ctx.settings.slow_latency, absl::ZeroDuration());
}
void RunSlowNear(Context& ctx, int n, GroupResult* g) {
  RunSlow(ctx, n, g, 1, ctx.settings.slow_near_latency, ctx.settings.slow_near_jitter);
}

// Samples, on the first node, who listens for release notifications.
struct SubscriberProbe {
  Endpoint node;
  std::string channel;
  int64_t max_channel_subscribers = -1;
  int64_t max_patterns = -1;
  std::string error;
  void Sample() {
    absl::StatusOr<testkit::RedisValue> numsub =
        testkit::RunCommand(node, {"PUBSUB", "NUMSUB", channel}, absl::Milliseconds(500));
    absl::StatusOr<testkit::RedisValue> numpat =
        testkit::RunCommand(node, {"PUBSUB", "NUMPAT"}, absl::Milliseconds(500));
    if (!numsub.ok() || !numpat.ok()) {
      error = (!numsub.ok() ? numsub.status() : numpat.status()).ToString();
      return;
    }
    if (numsub->type == testkit::RedisValue::Type::kArray && numsub->elements.size() == 2) {
      max_channel_subscribers =
          std::max<int64_t>(max_channel_subscribers, numsub->elements[1].integer);
    }
    if (numpat->type == testkit::RedisValue::Type::kInteger) {
      max_patterns = std::max<int64_t>(max_patterns, numpat->integer);
    }
  }
  std::string Describe() const {
    if (!error.empty()) return absl::StrCat("could not sample subscribers: ", error);
    return absl::StrCat("subscribers seen on ", node.ToString(),
                        " while callers waited: ", std::max<int64_t>(0, max_channel_subscribers),
                        " on ", channel, ", ", std::max<int64_t>(0, max_patterns),
                        " pattern subscriptions");
  }
  bool SawAny() const { return max_channel_subscribers > 0 || max_patterns > 0; }
};

RowResult HotRow(Context& ctx, const std::vector<Endpoint>& eps, bool notifications) {
  const BenchSettings& s = ctx.settings;
  const std::string variant = notifications ? "notify=on" : "notify=off";
  const std::string impl = absl::StrCat("library ", variant);
  Options options = ClientOptions(ctx, eps);
  options.release_notifications = notifications;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  if (!client.ok()) {
    RowResult row;
    row.impl = impl;
    row.family = kLibrary;
    row.variant = variant;
    row.callers = s.hot_waiters;
    return HarnessErrorRow(ctx, std::move(row), "Client::Create", client.status());
  }
  HotResource::Config hc;
  hc.resource = ctx.RowKey() + ":hot";
  hc.ttl = s.ttl;
  hc.wait = s.hot_wait;
  hc.hold = s.hot_hold;
  HotResource hot(client->get(), hc);
  SubscriberProbe probe;
  probe.node = eps[0];
  probe.channel = absl::StrCat(internal::kReleaseChannelPrefix, hc.resource);

  RowSpec spec = HotRow(s, &hot, impl, kLibrary, variant);
  spec.at_mid = [&] { probe.Sample(); };
  spec.at_stop = [&] {
    probe.Sample();
    hot.Stop();
  };
  spec.after = [&](RowResult* row) {
    row->notes.push_back(absl::StrCat(row->handoff.count(), " hand-offs between ", s.hot_waiters,
                                      " callers; hold ", Dur(s.hot_hold), ", wait ",
                                      Dur(s.hot_wait)));
    if (hot.not_waiting() > 0) {
      row->notes.push_back(absl::StrCat(hot.not_waiting(),
                                        " acquisitions by callers not yet waiting when the "
                                        "Release started (not hand-offs, not recorded)"));
    }
    if (hot.overlaps() > 0) {
      row->notes.push_back(absl::StrCat(hot.overlaps(),
                                        " of the hand-offs completed before the holder's "
                                        "Release returned (counted as 0; see 'from-call')"));
    }
    row->notes.push_back(probe.Describe());
    if (notifications && probe.error.empty() && !probe.SawAny()) {
      row->notes.push_back(
          "no release-notification subscriber was seen: notifications look inactive in this "
          "build, and the wait falls back to polling");
    }
  };
  return RunRow(ctx, std::move(spec));
}

void RunHot(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = absl::StrCat("one hot resource, ", ctx.settings.hot_waiters,
                          " callers of one client taking turns");
  CommonSettings(ctx, g);
  AddSetting(g, "hold", Dur(ctx.settings.hot_hold));
  AddSetting(g, "wait", Dur(ctx.settings.hot_wait));
  g->rows.push_back(FloorRow(ctx, eps));
  g->rows.push_back(HotRow(ctx, eps, true));
  g->rows.push_back(HotRow(ctx, eps, false));
  g->notes.push_back(
      "handoff = from the holder's Release returning to the next waiter's "
      "Acquire(resource, ttl, wait) returning (0 when the waiter was first); from-call = from "
      "the holder calling Release to the same point; acq+wait = the waiter's whole Acquire. "
      "Ratios are to the floor's acquire (one single-node round trip)");
}

void DeleteKeys(Context& ctx, const std::vector<Endpoint>& eps,
                const std::vector<std::string>& keys) {
  for (const Endpoint& ep : eps) {
    for (size_t i = 0; i < keys.size(); i += 64) {
      std::vector<std::string> cmd = {"DEL"};
      for (size_t j = i; j < std::min(keys.size(), i + 64); ++j) cmd.push_back(keys[j]);
      absl::StatusOr<testkit::RedisValue> r = testkit::RunCommand(ep, cmd);
      if (!r.ok()) {
        ctx.harness_errors.push_back(
            absl::StrCat("cleanup on ", ep.ToString(), ": ", r.status().ToString()));
        break;
      }
    }
  }
}

void RunFencing(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "all nodes healthy; Options::fencing on vs off";
  CommonSettings(ctx, g);
  g->rows.push_back(FloorRow(ctx, eps));
  for (int callers : {1, ctx.settings.callers_many}) {
    LibrarySpec plain;
    plain.callers = callers;
    g->rows.push_back(LibraryRow(ctx, eps, plain));
    LibrarySpec fenced;
    fenced.impl = "library fencing";
    fenced.variant = "fencing";
    fenced.callers = callers;
    fenced.tweak = [](Options* o) { o->fencing = true; };
    const int before = ctx.next_row;
    g->rows.push_back(LibraryRow(ctx, eps, fenced));
    // The counters have no ttl: remove the ones this row created.
    std::vector<std::string> keys;
    for (int row = before + 1; row <= ctx.next_row; ++row) {
      for (int i = 0; i < callers; ++i) {
        keys.push_back(
            absl::StrCat("rb:", ctx.settings.run_id, ":", row, ":t", i, internal::kFenceSuffix));
      }
    }
    DeleteKeys(ctx, eps, keys);
  }
}

void RunMultiLock(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "all nodes healthy; MultiLock over 3 resources";
  CommonSettings(ctx, g);
  g->rows.push_back(FloorRow(ctx, eps));
  for (int callers : {1, ctx.settings.callers_many}) {
    LibrarySpec single;
    single.callers = callers;
    g->rows.push_back(LibraryRow(ctx, eps, single));
    LibrarySpec quorum;
    quorum.impl = "multilock quorum x3";
    quorum.family = kMultiLock;
    quorum.variant = "quorum";
    quorum.callers = callers;
    quorum.kind = LibraryKind::kMultiQuorum;
    g->rows.push_back(LibraryRow(ctx, eps, quorum));
    LibrarySpec all = quorum;
    all.impl = "multilock all-nodes x3";
    all.variant = "all-nodes";
    all.kind = LibraryKind::kMultiAllNodes;
    g->rows.push_back(LibraryRow(ctx, eps, all));
  }
}

void RunSweep(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "all nodes healthy; callers sweep: blocking callers vs async chains vs the limit";
  CommonSettings(ctx, g);
  AddSetting(g, "callers", absl::StrJoin(ctx.settings.sweep_callers, ","));
  g->rows.push_back(FloorRow(ctx, eps));
  const absl::Duration duration = ctx.settings.sweep_duration;
  for (int callers : ctx.settings.sweep_callers) {
    LibrarySpec lib;
    lib.callers = callers;
    lib.duration = duration;
    g->rows.push_back(LibraryRow(ctx, eps, lib));
    LibrarySpec async = AsyncSpec(callers);
    async.duration = duration;
    g->rows.push_back(LibraryRow(ctx, eps, async));
    g->rows.push_back(LimitRow(ctx, eps, callers, nullptr, duration));
  }
}

// A note comparing the library row of `on_variant` with that of `off_variant`
// (same callers): acquire+release p50, throughput and client CPU per cycle.
void OnOffNote(GroupResult* g, const std::string& off_variant, const std::string& on_variant,
               int callers, absl::string_view with) {
  const RowResult* a = g->Find(kLibrary, off_variant, callers);
  const RowResult* b = g->Find(kLibrary, on_variant, callers);
  if (a == nullptr || b == nullptr || !a->ran() || !b->ran() || a->cycle.Quantile(0.5) <= 0) {
    return;
  }
  std::string note = absl::StrFormat(
      "%s%s: acquire+release p50 %s %s, %s without: %.2fx; throughput %.2fx", CallersLabel(callers),
      absl::StrContains(b->variant, kAsync) ? " (async)" : "",
      FormatLatency(b->cycle.Quantile(0.5)), std::string(with),
      FormatLatency(a->cycle.Quantile(0.5)),
      static_cast<double>(b->cycle.Quantile(0.5)) / static_cast<double>(a->cycle.Quantile(0.5)),
      a->throughput() > 0 ? b->throughput() / a->throughput() : 0.0);
  const double cpu_a = a->cpu_us_per_cycle();
  const double cpu_b = b->cpu_us_per_cycle();
  if (cpu_a > 0 && cpu_b > 0) {
    absl::StrAppend(&note, absl::StrFormat("; CPU per cycle %.1f us vs %.1f us: %.2fx", cpu_b,
                                           cpu_a, cpu_b / cpu_a));
  }
  g->notes.push_back(std::move(note));
}

// The library with and without a MetricsCollector as its Options::observer:
// blocking callers (1 and many) and async chains (many).
void RunObserver(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "all nodes healthy; Options::observer off vs a MetricsCollector";
  CommonSettings(ctx, g);
  g->rows.push_back(FloorRow(ctx, eps));
  struct Pair {
    LibrarySpec off;
    std::string on_variant;
  };
  std::vector<Pair> pairs;
  for (int callers : {1, ctx.settings.callers_many}) {
    LibrarySpec plain;
    plain.callers = callers;
    pairs.push_back({plain, "metrics"});
  }
  pairs.push_back({AsyncSpec(ctx.settings.callers_many), "async metrics"});
  for (const Pair& p : pairs) {
    g->rows.push_back(LibraryRow(ctx, eps, p.off));
    auto collector = std::make_shared<MetricsCollector>();
    LibrarySpec on = p.off;
    on.impl = absl::StrCat(p.off.impl, " + metrics");
    on.variant = p.on_variant;
    on.tweak = [collector](Options* o) { o->observer = collector; };
    g->rows.push_back(LibraryRow(ctx, eps, on));
    RowResult& row = g->rows.back();
    // The collector saw the row's work (warm-up included).
    const int64_t counted = collector->acquisitions(Outcome::Kind::kSucceeded);
    row.notes.push_back(absl::StrCat("the collector counted ", counted,
                                     " successful acquisitions (warm-up included)"));
    if (row.ran() && row.successes > 0 && counted == 0) {
      row.harness_error = "the collector attached to this row received no acquisition";
    }
    OnOffNote(g, p.off.variant, p.on_variant, p.off.callers, "with the collector");
  }
}

// Every node gets one asynchronous replica for the group (the bench's nodes
// are the masters); the library with Options::durability off and on, and on
// with one node's replica stopped (that node cannot confirm).
void RunDurability(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  testkit::ReplicaOptions ro;
  for (const Endpoint& ep : eps) ro.upstreams.push_back(ep.ToString());
  absl::StatusOr<std::unique_ptr<testkit::Replicas>> replicas = testkit::Replicas::Start(ro);
  if (!replicas.ok()) {
    ctx.harness_errors.push_back(
        absl::StrCat(g->scenario, " N=", n, ": starting replicas: ", replicas.status().ToString()));
    g->skipped = true;
    g->skip_reason = absl::StrCat("no replicas: ", replicas.status().ToString());
    return;
  }
  const absl::Duration wait = std::min(ctx.settings.node_timeout / 2, absl::Milliseconds(20));
  auto durable = [wait](Options* o) {
    o->durability.replicas = 1;
    o->durability.timeout = wait;
  };
  g->title = "every node a master with one replica; Options::durability off vs on (WAIT 1)";
  CommonSettings(ctx, g);
  AddSetting(g, "replicas", "1 per node");
  AddSetting(g, "durability.timeout", Dur(wait));
  g->rows.push_back(FloorRow(ctx, eps));
  for (int callers : {1, ctx.settings.callers_many}) {
    LibrarySpec plain;
    plain.callers = callers;
    g->rows.push_back(LibraryRow(ctx, eps, plain));
    LibrarySpec on;
    on.impl = "library durability";
    on.variant = "durability";
    on.callers = callers;
    on.tweak = durable;
    g->rows.push_back(LibraryRow(ctx, eps, on));
    OnOffNote(g, "", "durability", callers, "with the vote");
  }
  const Fault stopped = StopFault(&(*replicas)->fleet(), (*replicas)->index(n - 1, 0));
  LibrarySpec lame;
  lame.impl = "library durability, one replica stopped";
  lame.variant = "durability, replica stopped";
  lame.tweak = durable;
  lame.fault = &stopped;
  g->rows.push_back(LibraryRow(ctx, eps, lame));
  g->notes.push_back(absl::StrCat(
      "the stopped replica's master answers every WAIT after ", Dur(wait),
      " and votes no; the quorum is decided by the other nodes (the stopped replica is ",
      eps[static_cast<size_t>(n - 1)].ToString(), "'s)"));
}

}  // namespace

RowResult MeasureFloor(Context& ctx, const std::vector<Endpoint>& nodes) {
  return FloorRow(ctx, nodes);
}

RowResult MeasureRow(Context& ctx, RowResult identity,
                     std::function<absl::StatusOr<std::vector<CycleFn>>()> make) {
  RowSpec spec;
  spec.impl = identity.impl;
  spec.family = identity.family;
  spec.variant = identity.variant;
  spec.callers = identity.callers;
  spec.make = std::move(make);
  return RunRow(ctx, std::move(spec));
}

const std::vector<Scenario>& AllScenarios() {
  static const std::vector<Scenario>* const kScenarios = new std::vector<Scenario>{
      {"healthy",
       "every node healthy: library, sequential and wait-for-all, 1 and many callers",
       false,
       1,
       {1, 3},
       {1, 3, 5},
       {1, 3, 5, 7},
       RunHealthy},
      {"sweep",
       "callers sweep (--sweep_callers): library blocking vs async vs the pipelined limit",
       false,
       1,
       {3},
       {1, 5},
       {1, 5},
       RunSweep},
      {"stopped",
       "the last node SIGSTOPped (Fleet::Stop) during each row, continued after",
       true,
       3,
       {3},
       {3, 5},
       {3, 5, 7},
       RunStopped},
      {"slow1",
       "one node behind the fault proxy with --slow_latency added to its replies",
       true,
       2,
       {3},
       {3, 5},
       {3, 5, 7},
       RunSlow1},
      {"slow2",
       "two nodes behind the fault proxy with --slow_latency added to their replies",
       true,
       3,
       {3},
       {5},
       {3, 5, 7},
       RunSlow2},
      {"slow-near-timeout",
       "one node whose added latency straddles node_timeout (--slow_near_latency + "
       "--slow_near_jitter)",
       true,
       2,
       {3},
       {5},
       {3, 5, 7},
       RunSlowNear},
      {"hot",
       "one contended resource: hand-off latency, release notifications on vs off (polling)",
       false,
       1,
       {3},
       {5},
       {3, 5},
       RunHot},
      {"fencing",
       "Options::fencing on vs off, 1 and many callers",
       false,
       1,
       {3},
       {5},
       {1, 3, 5, 7},
       RunFencing},
      {"multilock",
       "MultiLock over 3 resources, quorum and all-nodes modes",
       false,
       1,
       {3},
       {5},
       {3, 5, 7},
       RunMultiLock},
      {"tls",
       "TLS nodes (rediss://) vs plain ones: 1 and many callers, and connecting",
       true,
       1,
       {3},
       {5},
       {5},
       RunTls},
      {"backends",
       "Redis (this library, 1 and N nodes) vs etcd vs ZooKeeper vs PostgreSQL: latency, "
       "throughput, hand-off, one member stopped (servers started here; only when named)",
       true,
       1,
       {3},
       {5},
       {5},
       RunBackends,
       true},
      {"observer",
       "Options::observer off vs a MetricsCollector attached: 1 and many callers, async chains",
       false,
       1,
       {3},
       {5},
       {1, 5},
       RunObserver},
      {"family",
       "the lock family beside the mutex: 64 readers on one resource, the semaphore at K = 1, "
       "4, 16 against the hot mutex, reader-writer hand-offs, election takeover after SIGKILL "
       "and SIGSTOP of a `redlock elect` leader (only when named)",
       false,
       1,
       {3},
       {5},
       {5},
       RunFamily,
       true},
      {"semaphore-availability",
       "semaphore designs: the nodes down each survives (permits with a majority each vs "
       "counting holders on more than N*K/(K+1) nodes), K = 1, 4, 16 (only when named)",
       true,
       3,
       {3},
       {3, 5, 7},
       {3, 5, 7},
       RunSemaphoreAvailability,
       true},
      {"durability",
       "every node a master with one replica (started for the group): Options::durability off "
       "vs on, and on with one replica stopped",
       true,
       3,
       {3},
       {5},
       {3, 5, 7},
       RunDurability},
  };
  return *kScenarios;
}

const Scenario* FindScenario(const std::string& name) {
  for (const Scenario& s : AllScenarios()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::vector<int> NsFor(const Scenario& scenario, const BenchSettings& settings) {
  if (!settings.ns.empty()) return settings.ns;
  switch (settings.mode) {
    case Mode::kSmoke:
      return scenario.smoke_ns;
    case Mode::kQuick:
      return scenario.quick_ns;
    case Mode::kFull:
      return scenario.full_ns;
  }
  return scenario.quick_ns;
}

GroupResult RunGroup(const Scenario& scenario, int n, Context& ctx) {
  GroupResult g;
  g.scenario = scenario.name;
  g.n = n;
  if (n < scenario.min_n) {
    g.skipped = true;
    g.skip_reason = absl::StrCat("needs N >= ", scenario.min_n);
  } else if (n > ctx.nodes.size()) {
    g.skipped = true;
    g.skip_reason = absl::StrCat("needs ", n, " nodes, ", ctx.nodes.size(), " available");
  } else if (scenario.needs_fleet && ctx.nodes.fleet() == nullptr) {
    g.skipped = true;
    g.skip_reason =
        "needs nodes started by redlock-bench (it stops nodes or puts a proxy in front of "
        "them), and --nodes was given";
  }
  if (g.skipped) {
    g.title = scenario.description;
    return g;
  }
  scenario.run(ctx, n, &g);
  // The floor again at the end of the group, merged with the first: the
  // ratios then compare with the floor over the whole group's time span,
  // not only its first second, on a machine whose speed drifts.
  if (!g.skipped && !g.rows.empty() && g.rows[0].family == kFloor && g.rows[0].ran()) {
    RowResult again = FloorRow(ctx, ctx.nodes.First(1));
    RowResult& floor = g.rows[0];
    if (again.ran()) {
      const int64_t first_p50 = floor.cycle.Quantile(0.5);
      floor.acquire.Merge(again.acquire);
      floor.cycle.Merge(again.cycle);
      floor.attempts += again.attempts;
      floor.successes += again.successes;
      floor.measured_s += again.measured_s;
      floor.warmup_cycles += again.warmup_cycles;
      floor.acquire_errors.Merge(again.acquire_errors);
      floor.release_errors.Merge(again.release_errors);
      floor.peak_rss_kb = std::max(floor.peak_rss_kb, again.peak_rss_kb);
      floor.notes.push_back(
          absl::StrFormat("measured at the start and at the end of the group (p50 %s and %s), "
                          "merged",
                          FormatLatency(first_p50), FormatLatency(again.cycle.Quantile(0.5))));
    }
  }
  return g;
}

}  // namespace redlock::bench
