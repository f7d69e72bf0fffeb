// The scenarios with a faulty node: `stopped` (the last node SIGSTOPped
// during each row) and the slow ones (`slow1`, `slow2`, `slow-near-timeout`:
// nodes behind the fault proxy with latency added to their replies).

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/faults.h"
#include "bench/rows.h"
#include "bench/scenarios.h"
#include "testkit/fault_proxy.h"

namespace redlock::bench {

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

namespace {

void RunSlow(Context& ctx, int n, GroupResult* g, int slow_count, absl::Duration latency,
             absl::Duration jitter) {
  const std::vector<Endpoint> direct = ctx.nodes.First(n);
  std::vector<int> slow;
  for (int i = n - slow_count; i < n; ++i) slow.push_back(i);
  absl::StatusOr<ProxyFront> front = PutBehindProxies(direct, slow, ctx.settings.seed);
  if (!front.ok()) {
    ctx.harness_errors.push_back(absl::StrCat(
        g->scenario, " N=", n, ": starting the fault proxy: ", front.status().ToString()));
    g->skipped = true;
    g->skip_reason = absl::StrCat("the fault proxy did not start: ", front.status().ToString());
    return;
  }
  const std::vector<Endpoint>& eps = front->endpoints;
  const std::vector<std::string>& slow_names = front->upstreams;
  std::vector<std::unique_ptr<testkit::FaultProxy>>& proxies = front->proxies;
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

}  // namespace

void RunSlow1(Context& ctx, int n, GroupResult* g) {
  RunSlow(ctx, n, g, 1, ctx.settings.slow_latency, absl::ZeroDuration());
}
void RunSlow2(Context& ctx, int n, GroupResult* g) {
  RunSlow(ctx, n, g, 2, ctx.settings.slow_latency, absl::ZeroDuration());
}
void RunSlowNear(Context& ctx, int n, GroupResult* g) {
  RunSlow(ctx, n, g, 1, ctx.settings.slow_near_latency, ctx.settings.slow_near_jitter);
}

}  // namespace redlock::bench
