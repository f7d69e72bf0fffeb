// The scenarios on healthy nodes: `healthy` (the library, the pipelined limit
// and the baselines, 1 and many callers) and `sweep` (blocking callers vs
// async chains vs the limit at each count of --sweep_callers).

#include <vector>

#include "absl/strings/str_join.h"
#include "bench/rows.h"
#include "bench/scenarios.h"

namespace redlock::bench {

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
    if (callers > 1) {
      g->rows.push_back(LibraryRow(ctx, eps, AsyncSpec(callers)));
      g->rows.push_back(LibraryRow(ctx, eps, CoroSpec(callers)));
      OnOffNote(g, kAsync, kCoro, callers, "with co_await");
    }
    g->rows.push_back(LimitRow(ctx, eps, callers));
    if (callers > 1) {
      // What a C++ user writes without this library: each thread its own
      // blocking hiredis connection to every node, Redlock node after node.
      // The blocking callers' anchor (a target).
      RowSpec naive = BaselineSpec(ctx, kSequential, callers, BaselinesFor(ctx, eps));
      naive.impl = kNaiveImpl;
      g->rows.push_back(RunRow(ctx, std::move(naive)));
      // The library in the naive row's layout: each thread its own Client
      // (own connections, own I/O thread), beside the shared client above.
      LibrarySpec own = lib;
      own.impl = "library: Client/thread";
      own.variant = kClientPerThread;
      own.client_per_caller = true;
      g->rows.push_back(LibraryRow(ctx, eps, own));
    } else {
      g->rows.push_back(BaselineRow(ctx, kSequential, eps, callers));
    }
    g->rows.push_back(BaselineRow(ctx, kWaitForAll, eps, callers));
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

}  // namespace redlock::bench
