// A Redis Cluster as one node: redis+cluster:// (plain) and rediss+cluster://
// (every member over TLS). The URL names seeds, any members of the cluster;
// the locator (cluster_locator.cc) learns the slot map from them and routes
// each command to the master of its keys' slot.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/cluster_locator.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/scheme.h"

namespace redlock::internal {
namespace {

// Seeds one cluster node may list (the first answers; the others are tried
// in turn when it does not).
constexpr size_t kMaxSeeds = 64;

class Cluster final : public EndpointScheme {
 public:
  std::vector<std::string> UrlSchemes() const override {
    return {"redis+cluster", "rediss+cluster"};
  }
  bool Owns(const Endpoint& e) const override { return e.uses_cluster(); }

  // [[user]:password@]host:port[+host:port...]
  absl::Status Parse(const UrlParts& url, Endpoint* e) const override {
    e->tls = url.scheme == "rediss+cluster";
    if (!url.path.empty()) {
      return BadEndpoint(url.text,
                         "a cluster has one database and no master name: nothing may follow "
                         "the seeds (redis+cluster://host:port+host:port)");
    }
    e->host.clear();
    return ParseAddresses(url.text, url.hosts, 6379, &e->cluster.seeds);
  }

  std::string Check(const Endpoint& e) const override {
    if (e.uses_sentinel() || !e.sentinel.sentinels.empty()) {
      return "a cluster node is found through its seeds, not through Sentinels";
    }
    if (e.cluster.seeds.size() > kMaxSeeds) {
      return absl::StrCat(e.cluster.seeds.size(), " seeds: at most ", kMaxSeeds,
                          " per cluster node are supported");
    }
    if (e.db != 0) return "a cluster has only database 0";
    return CheckAddresses(e.cluster.seeds, "a seed");
  }

  std::string Name(const Endpoint& e) const override {
    return absl::StrCat("cluster:", JoinAddresses(e.cluster.seeds));
  }
  std::string Key(const Endpoint& e) const override { return absl::AsciiStrToLower(Name(e)); }

  std::unique_ptr<Locator> MakeLocator(const Endpoint& e, LocatorEnv env) const override {
    return MakeClusterLocator(e, std::move(env));
  }

  bool RoutesByKey() const override { return true; }

  // The keys of one call must share a hash slot: one master runs it.
  std::string KeysProblem(const Endpoint& e, const std::vector<std::string>& keys) const override {
    if (keys.empty()) return "";
    const int slot = KeySlot(keys[0]);
    for (size_t i = 1; i < keys.size(); ++i) {
      if (KeySlot(keys[i]) == slot) continue;
      const std::string why = absl::StrCat(
          "node ", Name(e),
          " is a Redis Cluster, where the keys of one call must share a hash slot; give the "
          "resources a common hash tag (\"{order42}:a\", \"{order42}:b\"; README \"A Redis "
          "Cluster as a node\")");
      // A key kept beside a lock key (its fencing counter, the
      // reader-writer lock's sets, the fair lock's queue) shares its slot only through a hash tag.
      if (absl::StartsWith(keys[i], keys[0])) {
        return absl::StrCat("the key \"", keys[0], "\" and the keys kept beside it (\"", keys[i],
                            "\": its fencing counter, the reader-writer lock's sets, the fair "
                            "lock's queue) would land in different hash slots: ",
                            why);
      }
      return absl::StrCat("the keys \"", keys[0], "\" and \"", keys[i],
                          "\" are in different hash slots: ", why);
    }
    return "";
  }
};

}  // namespace

const EndpointScheme& ClusterScheme() {
  static const Cluster* const scheme = new Cluster();
  return *scheme;
}

}  // namespace redlock::internal
