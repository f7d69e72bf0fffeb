#include "redlock/internal/cluster_locator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/url.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

// The soonest a slot map is asked again after the last time (a MOVED
// usually comes with more: one refresh covers them).
constexpr absl::Duration kRefreshGap = absl::Milliseconds(100);

// One master of the cluster and its connection.
struct Shard {
  std::string host;
  int port = 0;
  std::string address;  // JoinHostPort(host, port)
  int index = -1;       // the engine's node for it (-1: none could be added)
  // It serves a slot in the map: its connection is kept up (reconnected
  // when lost). Read by the engine through ShardLocator::Known.
  std::atomic<bool> serving{true};
  int slots = 0;  // guarded by the cluster locator's mu_
};

class ClusterLocator;

// The locator of a connection to one master: where it is never changes (a
// master elsewhere is another Shard); its failure may mean a failover, which
// the slot map tells.
class ShardLocator final : public Locator {
 public:
  ShardLocator(ClusterLocator* cluster, std::shared_ptr<Shard> shard, std::string scheme,
               MasterTarget target)
      : cluster_(cluster),
        shard_(std::move(shard)),
        scheme_(std::move(scheme)),
        target_(std::move(target)) {}

  std::string Scheme() const override { return scheme_; }
  MasterTarget Initial() const override { return target_; }
  bool Known() const override { return shard_->serving.load(std::memory_order_acquire); }
  void MasterLost() override;

 private:
  ClusterLocator* const cluster_;
  const std::shared_ptr<Shard> shard_;
  const std::string scheme_;
  const MasterTarget target_;
};

class ClusterLocator final : public Locator {
 public:
  ClusterLocator(const Endpoint& e, LocatorEnv env)
      : endpoint_(e),
        env_(std::move(env)),
        scheme_(e.tls ? "rediss+cluster" : "redis+cluster"),
        slots_(new std::atomic<int>[kClusterSlots]) {
    for (int s = 0; s < kClusterSlots; ++s) slots_[s].store(-1, std::memory_order_relaxed);
    current_ = Target(e.cluster.seeds[0].host, e.cluster.seeds[0].port);
  }

  std::string Scheme() const override { return scheme_; }
  MasterTarget Initial() const override { return current_; }
  bool Known() const override { return true; }

  // The member asked for the map failed: the next attempt asks the next
  // seed, then the masters known, in turn.
  void MasterLost() override {
    std::vector<std::pair<std::string, int>> candidates;
    for (const SentinelAddress& s : endpoint_.cluster.seeds)
      candidates.emplace_back(s.host, s.port);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [address, shard] : shards_) {
        if (shard->slots > 0) candidates.emplace_back(shard->host, shard->port);
      }
    }
    ++attempt_;
    const auto& [host, port] = candidates[attempt_ % candidates.size()];
    current_ = Target(host, port);
    env_.host->NextAttemptAt(current_);
  }

  void AddMasterChecks(std::vector<HandshakeStep>* steps) const override {
    // The slot map, on every connection of the member asked: a cluster
    // node that is not one fails here, with what it answered.
    HandshakeStep slots;
    AppendCommand(&slots.payload, {"CLUSTER", "SLOTS"});
    auto* self = const_cast<ClusterLocator*>(this);
    slots.check = [self](const Reply& r) -> std::string {
      absl::Status st = self->Apply(r);
      if (st.ok()) return "";
      return absl::StrCat(
          st.message(),
          r.is_error() ? " (is it a cluster member? use redis:// for a plain node)" : "");
    };
    steps->push_back(std::move(slots));
  }

  void Maintain(TimePoint now) override {
    if (query_out_ || now < refresh_at_ || !env_.host->MasterConnected()) return;
    query_out_ = true;
    last_query_ = now;
    Command c;
    AppendCommand(&c.payload, {"CLUSTER", "SLOTS"});
    c.expect = kExpectArray;
    c.op = "cluster slots";
    env_.host->Query(c, [this](absl::StatusOr<Reply> r) {
      query_out_ = false;
      absl::Status st = r.ok() ? Apply(*r) : r.status();
      refresh_at_ = Clock::now() + absl::ToChronoNanoseconds(st.ok() ? kClusterRefresh
                                                                     : env_.settings.backoff_max);
      // Asked for again while this one was out (a master lost, a MOVED):
      // the answer may predate what made it wanted.
      if (again_) {
        again_ = false;
        RefreshSoon();
      }
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        map_error_ = std::string(st.message());
      }
    });
  }

  TimePoint Wake(TimePoint now) const override {
    (void)now;
    if (query_out_ || !env_.host->MasterConnected()) return TimePoint::max();
    return refresh_at_;
  }

  void Health(NodeHealth* h) const override {
    std::lock_guard<std::mutex> lock(mu_);
    bool all = h->connected && map_error_.empty() && uncovered_ == 0 && mapped_;
    for (const auto& [address, shard] : shards_) {
      if (shard->slots == 0) continue;
      ShardHealth sh;
      sh.address = address;
      sh.slots = shard->slots;
      if (shard->index >= 0) {
        env_.host->ShardState(shard->index, &sh);
      } else {
        sh.last_error = absl::StrCat("not connected: more than ", kMaxShardsPerNode,
                                     " masters in one cluster node");
      }
      all = all && sh.connected;
      h->breaker_open = h->breaker_open || sh.breaker_open;
      h->in_flight += sh.in_flight;
      if (h->last_error.empty() && !sh.last_error.empty()) {
        h->last_error = absl::StrCat("master ", address, ": ", sh.last_error);
      }
      h->shards.push_back(std::move(sh));
    }
    if (!map_error_.empty() && h->last_error.empty()) h->last_error = map_error_;
    h->connected = all;
    h->slots_uncovered = mapped_ ? uncovered_ : kClusterSlots;
  }

  bool Routes() const override { return true; }

  int Route(int slot, const std::string& asking_at) override {
    if (!asking_at.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = shards_.find(asking_at);
      return it == shards_.end() ? -1 : it->second->index;
    }
    if (slot < 0 || slot >= kClusterSlots) return -1;
    return slots_[slot].load(std::memory_order_acquire);
  }

  void Moved(int slot, const std::string& host, int port) override {
    const int to = Ensure(host, port);
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int from = slots_[slot].exchange(to, std::memory_order_acq_rel);
      if (from != to) {
        for (auto& [address, shard] : shards_) {
          if (shard->index == from && shard->slots > 0) --shard->slots;
          if (shard->index == to) ++shard->slots;
        }
        if (from < 0 && to >= 0 && uncovered_ > 0) --uncovered_;
      }
    }
    RefreshSoon();
  }

  void Asked(const std::string& host, int port) override { Ensure(host, port); }

  // A master's connection failed: a failover may have moved its slots.
  void RefreshSoon() {
    if (query_out_) {
      again_ = true;
      return;
    }
    const TimePoint soon = last_query_ + absl::ToChronoNanoseconds(kRefreshGap);
    refresh_at_ = std::min(refresh_at_, std::max(soon, Clock::now()));
  }

 private:
  MasterTarget Target(const std::string& host, int port) const {
    return MasterTarget{host, port,
                        endpoint_.tls ? TlsFor(env_, endpoint_.tls_server_name, host) : nullptr};
  }

  // The connection to the master at host:port, made if new. Poller only.
  int Ensure(const std::string& host, int port) {
    const std::string address = JoinHostPort(host, port);
    std::shared_ptr<Shard> shard;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = shards_.find(address);
      if (it != shards_.end()) {
        it->second->serving.store(true, std::memory_order_release);
        return it->second->index;
      }
      shard = std::make_shared<Shard>();
      shard->host = host;
      shard->port = port;
      shard->address = address;
      shards_.emplace(address, shard);
    }
    // Outside mu_: the engine connects it at once.
    const int index = env_.host->AddShard(
        std::make_unique<ShardLocator>(this, shard, scheme_, Target(host, port)),
        absl::StrCat(endpoint_.ToString(), " master ", address));
    std::lock_guard<std::mutex> lock(mu_);
    shard->index = index;
    return index;
  }

  // Takes a CLUSTER SLOTS reply as the map. Poller only.
  absl::Status Apply(const Reply& r) {
    absl::StatusOr<std::vector<SlotRange>> ranges = ParseClusterSlots(r, current_.host);
    if (!ranges.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      map_error_ = std::string(ranges.status().message());
      return ranges.status();
    }
    std::vector<int> table(kClusterSlots, -1);
    for (const SlotRange& range : *ranges) {
      const int index = Ensure(range.host, range.port);
      for (int s = range.first; s <= range.last; ++s) table[static_cast<size_t>(s)] = index;
    }
    std::lock_guard<std::mutex> lock(mu_);
    uncovered_ = 0;
    std::map<int, int> counts;
    for (int s = 0; s < kClusterSlots; ++s) {
      slots_[s].store(table[static_cast<size_t>(s)], std::memory_order_release);
      if (table[static_cast<size_t>(s)] < 0) {
        ++uncovered_;
      } else {
        ++counts[table[static_cast<size_t>(s)]];
      }
    }
    for (auto& [address, shard] : shards_) {
      shard->slots = shard->index >= 0 ? counts[shard->index] : 0;
      // A master with no slot left is not reconnected once its connection
      // goes (a failed master, or one emptied by resharding); ASK or MOVED
      // to it brings it back.
      shard->serving.store(shard->slots > 0, std::memory_order_release);
    }
    mapped_ = true;
    map_error_.clear();
    refresh_at_ = Clock::now() + absl::ToChronoNanoseconds(kClusterRefresh);
    return absl::OkStatus();
  }

  const Endpoint endpoint_;
  LocatorEnv env_;
  const std::string scheme_;
  // Per slot, the engine node of its master (-1: unknown, the node's own
  // connection). Written by the poller, read by any sender.
  const std::unique_ptr<std::atomic<int>[]> slots_;

  // Poller only.
  MasterTarget current_;  // the member asked for the map
  size_t attempt_ = 0;
  bool query_out_ = false;
  bool again_ = false;  // RefreshSoon while a query was out
  TimePoint refresh_at_ = TimePoint::max();
  TimePoint last_query_{};

  mutable std::mutex mu_;                                 // guards the members below
  std::map<std::string, std::shared_ptr<Shard>> shards_;  // by address
  bool mapped_ = false;
  int uncovered_ = kClusterSlots;
  std::string map_error_;
};

void ShardLocator::MasterLost() { cluster_->RefreshSoon(); }

}  // namespace

std::unique_ptr<Locator> MakeClusterLocator(const Endpoint& e, LocatorEnv env) {
  return std::make_unique<ClusterLocator>(e, std::move(env));
}

}  // namespace redlock::internal
