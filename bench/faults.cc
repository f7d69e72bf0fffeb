#include "bench/faults.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace redlock::bench {
namespace {

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

}  // namespace

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

absl::StatusOr<ProxyFront> PutBehindProxies(std::vector<Endpoint> eps,
                                            const std::vector<int>& which, uint64_t seed) {
  ProxyFront front;
  front.endpoints = std::move(eps);
  for (int i : which) {
    Endpoint& ep = front.endpoints.at(static_cast<size_t>(i));
    testkit::ProxyOptions po;
    po.upstream_host = ep.host;
    po.upstream_port = static_cast<uint16_t>(ep.port);
    po.seed = seed + static_cast<uint64_t>(i) + 1;
    absl::StatusOr<std::unique_ptr<testkit::FaultProxy>> proxy = testkit::FaultProxy::Start(po);
    if (!proxy.ok()) return proxy.status();
    front.upstreams.push_back(ep.ToString());
    ep.host = "127.0.0.1";
    ep.port = (*proxy)->listen_port();
    front.proxies.push_back(*std::move(proxy));
  }
  return front;
}

}  // namespace redlock::bench
