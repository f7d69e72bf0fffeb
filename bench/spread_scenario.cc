// The `spread` scenario: nodes at different distances. Every node is
// reached through a fault proxy (testkit/fault_proxy.h) that delays the
// bytes of each direction by the node's delay, so a node's round trip is
// its loopback round trip plus twice its delay. One group per latency
// profile (the built-in ones, or --latency-profile d1,d2,...), rows:
//
//   model          the q-th smallest round trip of a PING round to every
//                  node (bench/quorum_ping.h), two rounds per cycle: what a
//                  quorum decision costs at the least. Every latency of the
//                  group is a ratio to it. Measured first and again last,
//                  merged.
//   nearest alone  the floor's lock (SET NX PX, compare-and-delete) on the
//                  nearest node only: no quorum at all.
//   library        1 and many callers sharing one Client.
//   sequential     one node after the other: pays the sum of the round trips.
//   wait-for-all   in parallel, but waits for the farthest node.
//
// node_timeout for the group is raised to twice the largest round trip (plus
// 10 ms) when the run's is smaller: a deployment across regions configures it
// above its farthest node's round trip, or that node would never count (and
// the sequential baseline would pay the timeout, not the sum).

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/faults.h"
#include "bench/quorum_ping.h"
#include "bench/report.h"
#include "bench/rows.h"
#include "bench/scenarios.h"
#include "bench/spread_profiles.h"

namespace redlock::bench {
namespace {

std::string DelayList(const std::vector<absl::Duration>& delays) {
  std::vector<std::string> parts;
  for (absl::Duration d : delays) parts.push_back(absl::FormatDuration(d));
  return absl::StrJoin(parts, ", ");
}

// The p50 of the per-node round trips, ascending.
std::vector<int64_t> SortedP50s(const std::vector<Distribution>& rtts) {
  std::vector<int64_t> out;
  for (const Distribution& d : rtts) out.push_back(d.Quantile(0.5));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<int> SpreadNs(const BenchSettings& settings) {
  return {static_cast<int>(SpreadProfilesFor(settings).front().delays.size())};
}

std::vector<std::string> SpreadVariants(const BenchSettings& settings) {
  std::vector<std::string> out;
  for (const SpreadProfile& p : SpreadProfilesFor(settings)) out.push_back(p.name);
  return out;
}

void RunSpread(Context& ctx, int n, GroupResult* g) {
  const BenchSettings& s = ctx.settings;
  const std::vector<SpreadProfile> profiles = SpreadProfilesFor(s);
  const SpreadProfile* profile = nullptr;
  for (const SpreadProfile& p : profiles) {
    if (p.name == g->variant) profile = &p;
  }
  if (profile == nullptr || static_cast<int>(profile->delays.size()) != n) {
    g->skipped = true;
    g->skip_reason = absl::StrCat("no latency profile '", g->variant, "' of ", n, " nodes");
    return;
  }
  const std::vector<absl::Duration>& delays = profile->delays;
  std::vector<int> all;
  for (int i = 0; i < n; ++i) all.push_back(i);
  absl::StatusOr<ProxyFront> front = PutBehindProxies(ctx.nodes.First(n), all, s.seed);
  if (!front.ok()) {
    ctx.harness_errors.push_back(absl::StrCat(
        "spread ", g->variant, ": starting the fault proxies: ", front.status().ToString()));
    g->skipped = true;
    g->skip_reason = absl::StrCat("the fault proxies did not start: ", front.status().ToString());
    return;
  }
  for (int i = 0; i < n; ++i) {
    if (delays[static_cast<size_t>(i)] <= absl::ZeroDuration()) continue;
    absl::Status st = front->proxies[static_cast<size_t>(i)]->SetFaultBoth(
        testkit::FaultSpec::Latency(delays[static_cast<size_t>(i)]));
    if (!st.ok()) {
      ctx.harness_errors.push_back(absl::StrCat("spread ", g->variant, ": ", st.ToString()));
      g->skipped = true;
      g->skip_reason = st.ToString();
      return;
    }
  }
  const std::vector<Endpoint>& eps = front->endpoints;
  const absl::Duration largest = *std::max_element(delays.begin(), delays.end());
  const absl::Duration node_timeout =
      std::max(s.node_timeout, 4 * largest + absl::Milliseconds(10));
  const int nearest =
      static_cast<int>(std::min_element(delays.begin(), delays.end()) - delays.begin());
  BaselineOptions options = BaselinesFor(ctx, eps);
  options.node_timeout = node_timeout;

  g->title = absl::StrCat("nodes at different distances: ", DelayList(delays),
                          " added each way (a fault proxy per node)");
  g->reference = kModel;
  AddSetting(g, "delays_each_way", DelayList(delays));
  AddSetting(g, "ttl", Dur(s.ttl));
  AddSetting(g, "node_timeout", Dur(node_timeout));
  AddSetting(g, "quorum", absl::StrCat(n / 2 + 1));

  // Rows with many cycles in the measurement; the slow baselines at least
  // a few (a far node's cycle takes hundreds of ms).
  const absl::Duration duration = s.spread_duration;
  const int64_t few = s.mode == Mode::kSmoke ? 2 : s.mode == Mode::kQuick ? 8 : 20;

  absl::StatusOr<std::unique_ptr<QuorumPing>> model = QuorumPing::Connect(options);
  auto model_row = [&]() -> RowResult {
    RowSpec spec;
    spec.impl = "model: q-th PING";
    spec.family = kModel;
    spec.duration = duration;
    spec.min_iterations = few;
    if (!model.ok()) {
      RowResult row;
      row.impl = spec.impl;
      row.family = spec.family;
      return HarnessErrorRow(ctx, std::move(row), "connecting the model", model.status());
    }
    QuorumPing* q = model->get();
    const absl::Duration ttl = s.ttl;
    spec.make = [q, ttl]() -> absl::StatusOr<std::vector<CycleFn>> {
      std::vector<CycleFn> out;
      out.push_back(LockCycle(q->NewLocker(), ttl));
      return out;
    };
    return RunRow(ctx, std::move(spec));
  };
  g->rows.push_back(model_row());

  {
    BaselineOptions one = options;
    one.nodes = {eps[static_cast<size_t>(nearest)]};
    RowSpec spec = BaselineSpec(ctx, kFloor, 1, one);
    spec.impl = "nearest node alone";
    spec.family = kNearest;
    spec.duration = duration;
    g->rows.push_back(RunRow(ctx, std::move(spec)));
  }
  for (int callers : {1, s.callers_many}) {
    LibrarySpec lib;
    lib.callers = callers;
    lib.duration = duration;
    lib.tweak = [node_timeout](Options* o) { o->node_timeout = node_timeout; };
    g->rows.push_back(LibraryRow(ctx, eps, lib));
  }
  // The same commands as the library's (SET NX PX, then the compare-and-
  // delete script, each decided at the quorum) from a client that costs
  // almost nothing: between the model and the library, it tells the
  // servers' work from the library's.
  g->rows.push_back(LimitRow(ctx, eps, 1, nullptr, duration, &options));
  for (const char* family : {kSequential, kWaitForAll}) {
    RowSpec spec = BaselineSpec(ctx, family, 1, options);
    spec.duration = duration;
    spec.min_iterations = few;
    g->rows.push_back(RunRow(ctx, std::move(spec)));
  }
  MergeRepeat(&g->rows[0], model_row());
  std::vector<Distribution> rtts;
  if (model.ok()) rtts = (*model)->NodeRoundTrips();

  // The models of the other rows. The quorum's from every node's PING
  // round trips while all are asked at once (the model row's rounds); the
  // sum (sequential) and the nearest node from each node asked alone, as
  // those rows ask them; the farthest (wait-for-all) from the rounds. Each
  // twice per cycle (acquire and release).
  if (model.ok() && rtts.size() == static_cast<size_t>(n) && rtts.front().count() > 0) {
    const std::vector<Distribution> alone =
        (*model)->RoundTripsAlone(50, std::max(absl::Milliseconds(200), duration / 4));
    std::vector<std::string> per_node;
    for (int i = 0; i < n; ++i) {
      per_node.push_back(
          absl::StrCat(FormatLatency(rtts[static_cast<size_t>(i)].Quantile(0.5)), " / ",
                       FormatLatency(alone[static_cast<size_t>(i)].Quantile(0.5)), " (+",
                       absl::FormatDuration(delays[static_cast<size_t>(i)]), ")"));
    }
    g->notes.push_back(absl::StrCat("PING round trip p50 per node, all asked at once / alone: ",
                                    absl::StrJoin(per_node, ", ")));
    const std::vector<int64_t> together = SortedP50s(rtts);
    const std::vector<int64_t> one = SortedP50s(alone);
    int64_t sum = 0;
    for (int64_t v : one) sum += v;
    const int64_t q_th = together[static_cast<size_t>(n / 2)];
    g->figures["model_sequential_p50_us"] = 2.0 * static_cast<double>(sum) / 1e3;
    g->figures["model_wait_for_all_p50_us"] = 2.0 * static_cast<double>(together.back()) / 1e3;
    g->figures["model_nearest_p50_us"] = 2.0 * static_cast<double>(one.front()) / 1e3;
    g->figures["model_quorum_of_p50s_us"] = 2.0 * static_cast<double>(q_th) / 1e3;
    g->notes.push_back(
        absl::StrCat("models per cycle (two rounds) from those p50s: the q-th nearest ",
                     FormatLatency(2 * q_th), ", the sum (sequential) ", FormatLatency(2 * sum),
                     ", the farthest (wait-for-all) ", FormatLatency(2 * together.back()),
                     ", the nearest alone ", FormatLatency(2 * one.front())));
    if (const RowResult* seq = g->Find(kSequential, "", 1); seq != nullptr && !seq->cycle.empty()) {
      g->notes.push_back(absl::StrFormat(
          "sequential acquire+release p50 %s = %.2fx the sum of the round trips",
          FormatLatency(seq->cycle.Quantile(0.5)),
          static_cast<double>(seq->cycle.Quantile(0.5)) / static_cast<double>(2 * sum)));
    }
  }
  for (auto& proxy : front->proxies) proxy->ClearFaults();
}

}  // namespace redlock::bench
