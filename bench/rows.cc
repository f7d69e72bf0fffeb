#include "bench/rows.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/pipelined_limit.h"
#include "bench/report.h"
#include "redlock/client.h"

namespace redlock::bench {

std::string CallersLabel(int callers) { return absl::StrCat("x", callers); }

RowResult HarnessErrorRow(Context& ctx, RowResult row, const std::string& what,
                          const absl::Status& status) {
  row.harness_error = absl::StrCat(what, ": ", status.ToString());
  ctx.harness_errors.push_back(
      absl::StrCat(row.impl, " ", CallersLabel(row.callers), ": ", row.harness_error));
  return row;
}

RowResult RunRow(Context& ctx, RowSpec spec) {
  RowResult row = RowIdentity(spec.impl, spec.family, spec.variant, spec.callers);
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
  if (spec.min_iterations > 0) limits.min_iterations = spec.min_iterations;

  absl::Status fault_on = absl::OkStatus();
  bool fault_applied = false;
  RunHooks hooks;
  hooks.before_warmup = [&] {
    if (spec.fault == nullptr) return;
    fault_on = spec.fault->on();
    fault_applied = true;  // switch off even after a partial failure
  };
  // The servers' CPU over the measurement (every node of the run: they
  // share the machine with the client), from the bench's own fleet only
  // (INFO on --nodes would add commands to the measurement).
  const bool servers = ctx.nodes.fleet() != nullptr;
  int64_t servers_start = -1;
  int64_t servers_stop = -1;
  hooks.at_measure_start = [&] {
    if (servers) servers_start = ctx.nodes.ServersCpuUs(ctx.nodes.size());
    if (spec.at_start) spec.at_start();
  };
  if (spec.at_mid) hooks.at_measure_mid = [&] { spec.at_mid(); };
  hooks.at_measure_stop = [&] {
    if (spec.at_stop) spec.at_stop();
    if (servers) servers_stop = ctx.nodes.ServersCpuUs(ctx.nodes.size());
  };

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
  if (servers_start >= 0 && servers_stop >= servers_start) {
    row.server_cpu_us = servers_stop - servers_start;
  }
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

RowSpec BaselineSpec(Context& ctx, const std::string& family, int callers,
                     const BaselineOptions& options) {
  RowSpec spec;
  spec.impl = family;
  spec.family = family;
  spec.callers = callers;
  const std::string key = ctx.RowKey();
  const absl::Duration ttl = ctx.settings.ttl;
  spec.make = [family, callers, options, key, ttl]() -> absl::StatusOr<std::vector<CycleFn>> {
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
  return spec;
}

RowResult BaselineRow(Context& ctx, const std::string& family, const std::vector<Endpoint>& eps,
                      int callers, const Fault* fault) {
  RowSpec spec = BaselineSpec(ctx, family, callers, BaselinesFor(ctx, eps));
  spec.fault = fault;
  spec.track_memory = fault != nullptr;
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

Options ClientOptions(const Context& ctx, const std::vector<Endpoint>& eps) {
  Options o;
  o.nodes = eps;
  o.node_timeout = ctx.settings.node_timeout;
  return o;
}

namespace {

std::string DescribeHealth(const NodeHealth& h) {
  return absl::StrCat(h.node, ": ", h.connected ? "connected" : "not connected",
                      h.breaker_open ? ", breaker open" : ", breaker closed", ", ", h.in_flight,
                      " commands in flight");
}

}  // namespace

RowResult LibraryRow(Context& ctx, const std::vector<Endpoint>& eps, const LibrarySpec& ls) {
  Options options = ClientOptions(ctx, eps);
  if (ls.tweak) ls.tweak(&options);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  if (!client.ok()) {
    return HarnessErrorRow(ctx, RowIdentity(ls.impl, ls.family, ls.variant, ls.callers),
                           "Client::Create", client.status());
  }
  Client* c = client->get();
  // ls.client_per_caller: the callers' own clients, alive for the row.
  std::vector<std::unique_ptr<Client>> own_clients;
  RowSpec spec;
  static_cast<RowBasics&>(spec) = ls;
  const std::string key = ctx.RowKey();
  const absl::Duration ttl = ctx.settings.ttl;
  if (ls.async) {
    spec.make_chains = [&, c, key, ttl]() -> absl::StatusOr<std::vector<ChainFn>> {
      std::vector<ChainFn> out;
      for (int i = 0; i < ls.callers; ++i) {
        std::string resource = absl::StrCat(key, ":t", i);
        out.push_back(ls.coro ? CoroLockChain(c, std::move(resource), ttl)
                              : LockChain(NewAsyncClientLocker(c, std::move(resource)), ttl));
      }
      return out;
    };
  } else {
    spec.make = [&, c, key, ttl]() -> absl::StatusOr<std::vector<CycleFn>> {
      std::vector<CycleFn> out;
      for (int i = 0; i < ls.callers; ++i) {
        std::string resource = absl::StrCat(key, ":t", i);
        std::unique_ptr<Locker> locker;
        if (ls.kind == LibraryKind::kSingle && ls.client_per_caller) {
          absl::StatusOr<std::unique_ptr<Client>> own = Client::Create(options);
          if (!own.ok()) {
            return absl::Status(own.status().code(), absl::StrCat("Client::Create for caller ", i,
                                                                  ": ", own.status().message()));
          }
          locker = NewClientLocker(own->get(), resource);
          own_clients.push_back(*std::move(own));
        } else if (ls.kind == LibraryKind::kSingle) {
          locker = NewClientLocker(c, resource);
        } else if (ls.kind == LibraryKind::kSingleExtend) {
          locker = NewClientLocker(c, resource, /*extend=*/true);
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
    // Nodes the callers' client holds for unhealthy at the end of a row
    // without a fault (e.g. a breaker opened by plain overload): the shared
    // client, or with ls.client_per_caller each caller's own.
    spec.after = [c, &own_clients](RowResult* row) {
      auto note = [row](const Client& client, const std::string& whose) {
        for (const NodeHealth& h : client.Health()) {
          if (h.breaker_open || !h.connected || !h.last_error.empty()) {
            row->notes.push_back(absl::StrCat("at the end, ", whose, " saw ", DescribeHealth(h),
                                              "; last error: ", h.last_error));
          }
        }
      };
      if (own_clients.empty()) note(*c, "the client");
      for (size_t i = 0; i < own_clients.size(); ++i) {
        note(*own_clients[i], absl::StrCat("caller ", i, "'s client"));
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

LibrarySpec CoroSpec(int callers) {
  LibrarySpec lib = AsyncSpec(callers);
  lib.impl = "library co_await";
  lib.variant = kCoro;
  lib.coro = true;
  return lib;
}

RowResult LimitRow(Context& ctx, const std::vector<Endpoint>& eps, int callers, const Fault* fault,
                   absl::Duration duration, const BaselineOptions* options) {
  RowSpec spec;
  spec.impl = "pipelined limit";
  spec.family = kPipelinedLimit;
  spec.callers = callers;
  spec.fault = fault;
  spec.duration = duration;
  absl::StatusOr<std::unique_ptr<PipelinedLimit>> limit =
      PipelinedLimit::Start(options != nullptr ? *options : BaselinesFor(ctx, eps));
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

void AddSetting(GroupResult* g, std::string key, std::string value) {
  g->settings.emplace_back(std::move(key), std::move(value));
}

std::string Dur(absl::Duration d) { return absl::FormatDuration(d); }

void CommonSettings(const Context& ctx, GroupResult* g) {
  AddSetting(g, "ttl", Dur(ctx.settings.ttl));
  AddSetting(g, "node_timeout", Dur(ctx.settings.node_timeout));
  AddSetting(g, "quorum", absl::StrCat(g->n / 2 + 1));
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

void MergeRepeat(RowResult* first, const RowResult& again) {
  if (!again.ran()) return;
  const int64_t first_p50 = first->cycle.Quantile(0.5);
  first->acquire.Merge(again.acquire);
  first->cycle.Merge(again.cycle);
  first->attempts += again.attempts;
  first->successes += again.successes;
  first->measured_s += again.measured_s;
  first->warmup_cycles += again.warmup_cycles;
  first->acquire_errors.Merge(again.acquire_errors);
  first->release_errors.Merge(again.release_errors);
  first->peak_rss_kb = std::max(first->peak_rss_kb, again.peak_rss_kb);
  first->usage.user_us += again.usage.user_us;
  first->usage.sys_us += again.usage.sys_us;
  first->usage.voluntary_csw += again.usage.voluntary_csw;
  first->usage.involuntary_csw += again.usage.involuntary_csw;
  first->usage.allocations = first->usage.allocations >= 0 && again.usage.allocations >= 0
                                 ? first->usage.allocations + again.usage.allocations
                                 : -1;
  first->usage_cycles += again.usage_cycles;
  first->notes.push_back(
      absl::StrFormat("measured at the start and at the end of the group (p50 %s and %s), merged",
                      FormatLatency(first_p50), FormatLatency(again.cycle.Quantile(0.5))));
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

}  // namespace redlock::bench
