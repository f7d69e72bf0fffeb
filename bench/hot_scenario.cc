// The `hot` scenario: one contended resource, callers of one client taking
// turns; the hand-off latency with release notifications on and off.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/rows.h"
#include "bench/scenarios.h"
#include "redlock/client.h"
#include "redlock/internal/algorithm.h"
#include "testkit/redis.h"

namespace redlock::bench {

namespace {

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

RowResult HotLibraryRow(Context& ctx, const std::vector<Endpoint>& eps, bool notifications) {
  const BenchSettings& s = ctx.settings;
  const std::string variant = notifications ? "notify=on" : "notify=off";
  const std::string impl = absl::StrCat("library ", variant);
  Options options = ClientOptions(ctx, eps);
  options.release_notifications = notifications;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  if (!client.ok()) {
    return HarnessErrorRow(ctx, LibraryRowIdentity(impl, variant, s.hot_waiters), "Client::Create",
                           client.status());
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

}  // namespace

void RunHot(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = absl::StrCat("one hot resource, ", ctx.settings.hot_waiters,
                          " callers of one client taking turns");
  CommonSettings(ctx, g);
  AddSetting(g, "hold", Dur(ctx.settings.hot_hold));
  AddSetting(g, "wait", Dur(ctx.settings.hot_wait));
  g->rows.push_back(FloorRow(ctx, eps));
  g->rows.push_back(HotLibraryRow(ctx, eps, true));
  g->rows.push_back(HotLibraryRow(ctx, eps, false));
  g->notes.push_back(
      "handoff = from the holder's Release returning to the next waiter's "
      "Acquire(resource, ttl, wait) returning (0 when the waiter was first); from-call = from "
      "the holder calling Release to the same point; acq+wait = the waiter's whole Acquire. "
      "Ratios are to the floor's acquire (one single-node round trip)");
}

}  // namespace redlock::bench
