#include "testkit/cluster.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace redlock::testkit {
namespace {

constexpr int kSlots = 16384;

// Polls `probe` every 20 ms until it returns OK or `timeout` passed; the
// last error otherwise.
template <typename F>
absl::Status Until(absl::Duration timeout, F probe) {
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  absl::Status st = probe();
  while (!st.ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    st = probe();
  }
  return st;
}

absl::Status Ok(const absl::StatusOr<RedisValue>& v, absl::string_view what) {
  if (!v.ok()) return v.status();
  if (v->is_error()) return absl::InternalError(absl::StrCat(what, ": ", v->str));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(ClusterOptions options) {
  if (options.masters < 1 || options.replicas_per_master < 0) {
    return absl::InvalidArgumentError("a cluster needs a master and no negative replica count");
  }
  FleetOptions f;
  f.nodes = options.masters * (1 + options.replicas_per_master);
  f.cluster = true;
  f.cluster_node_timeout = options.node_timeout;
  absl::StatusOr<std::unique_ptr<Fleet>> fleet = Fleet::Start(std::move(f));
  if (!fleet.ok()) return fleet.status();
  std::unique_ptr<Cluster> c(new Cluster(options, *std::move(fleet)));
  absl::Status st = c->Build();
  if (!st.ok()) return st;
  return c;
}

absl::StatusOr<std::string> Cluster::Id(int member) const {
  absl::StatusOr<RedisValue> id = fleet_->Command(member, {"CLUSTER", "MYID"});
  if (!id.ok()) return id.status();
  if (id->is_error() || id->str.empty()) {
    return absl::InternalError(absl::StrCat("CLUSTER MYID: ", id->str));
  }
  return id->str;
}

absl::Status Cluster::Build() {
  const int members = fleet_->size();
  for (int i = 0; i < members; ++i) {
    absl::StatusOr<std::string> id = Id(i);
    if (!id.ok()) return id.status();
    ids_.push_back(*id);
  }
  // Each master an equal share of the slots.
  for (int m = 0; m < options_.masters; ++m) {
    const int first = kSlots * m / options_.masters;
    const int last = kSlots * (m + 1) / options_.masters - 1;
    absl::Status st = Ok(fleet_->Command(m, {"CLUSTER", "ADDSLOTSRANGE", std::to_string(first),
                                             std::to_string(last)}),
                         "CLUSTER ADDSLOTSRANGE");
    if (!st.ok()) return st;
  }
  // Everyone meets member 0 (gossip does the rest).
  for (int i = 1; i < members; ++i) {
    // With the bus port: it is not port + 10000 here (--cluster-port).
    absl::Status st =
        Ok(fleet_->Command(i, {"CLUSTER", "MEET", fleet_->host(0), std::to_string(fleet_->port(0)),
                               std::to_string(fleet_->cluster_port(0))}),
           "CLUSTER MEET");
    if (!st.ok()) return st;
  }
  // Replicas follow their masters, once they know them.
  for (int m = 0; m < options_.masters; ++m) {
    for (int r = 0; r < options_.replicas_per_master; ++r) {
      const int member = options_.masters + m * options_.replicas_per_master + r;
      absl::Status st = Until(options_.ready_timeout, [&] {
        return Ok(fleet_->Command(member, {"CLUSTER", "REPLICATE", ids_[static_cast<size_t>(m)]}),
                  "CLUSTER REPLICATE");
      });
      if (!st.ok()) return st;
    }
  }
  absl::Status st = WaitHealthy(options_.ready_timeout);
  if (!st.ok()) return st;
  // Every replica in sync with its master: one that never synced is not
  // promoted when its master fails.
  for (int r = options_.masters; r < members; ++r) {
    st = Until(options_.ready_timeout, [&]() -> absl::Status {
      absl::StatusOr<RedisValue> info = fleet_->Command(r, {"INFO", "replication"});
      if (!info.ok()) return info.status();
      if (!absl::StrContains(info->str, "master_link_status:up")) {
        return absl::UnavailableError(absl::StrCat("replica member ", r, " is not in sync"));
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  }
  // Every member agrees on who serves slot 0 and the last slot.
  return Until(options_.ready_timeout, [&]() -> absl::Status {
    for (int i = 0; i < members; ++i) {
      absl::StatusOr<int> a = MasterOf(0, i);
      absl::StatusOr<int> b = MasterOf(kSlots - 1, i);
      if (!a.ok()) return a.status();
      if (!b.ok()) return b.status();
      if (*a != 0 || *b != options_.masters - 1) {
        return absl::UnavailableError(absl::StrCat("member ", i, " does not see the slot map yet"));
      }
    }
    return absl::OkStatus();
  });
}

Endpoint Cluster::endpoint() const {
  Endpoint e;
  e.host.clear();
  for (int m = 0; m < options_.masters; ++m) {
    e.cluster.seeds.push_back(SentinelAddress{fleet_->host(m), fleet_->port(m)});
  }
  return e;
}

std::string Cluster::url() const {
  std::vector<std::string> seeds;
  for (int m = 0; m < options_.masters; ++m) seeds.push_back(fleet_->address(m));
  return absl::StrCat("redis+cluster://", absl::StrJoin(seeds, "+"));
}

absl::StatusOr<int> Cluster::MasterOf(int slot, int ask) const {
  // Ask the first member that answers when none is named.
  absl::StatusOr<RedisValue> v = absl::UnavailableError("no member answered");
  for (int i = ask >= 0 ? ask : 0; i < fleet_->size(); ++i) {
    if (fleet_->pid(i) < 0) continue;
    v = fleet_->Command(i, {"CLUSTER", "SLOTS"}, absl::Seconds(2));
    if (v.ok() || ask >= 0) break;
  }
  if (!v.ok()) return v.status();
  for (const RedisValue& e : v->elements) {
    if (e.elements.size() < 3 || e.elements[0].integer > slot || e.elements[1].integer < slot) {
      continue;
    }
    const int port = static_cast<int>(e.elements[2].elements[1].integer);
    for (int i = 0; i < fleet_->size(); ++i) {
      if (fleet_->port(i) == port) return i;
    }
  }
  return absl::NotFoundError(absl::StrCat("no master serves slot ", slot));
}

absl::Status Cluster::BeginMigration(int slot, int from, int to) {
  const std::string s = std::to_string(slot);
  absl::Status st = Ok(
      fleet_->Command(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", ids_[static_cast<size_t>(from)]}),
      "CLUSTER SETSLOT IMPORTING");
  if (!st.ok()) return st;
  return Ok(
      fleet_->Command(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", ids_[static_cast<size_t>(to)]}),
      "CLUSTER SETSLOT MIGRATING");
}

absl::Status Cluster::FinishMigration(int slot, int from, int to) {
  const std::string s = std::to_string(slot);
  for (int round = 0; round < 1000; ++round) {
    absl::StatusOr<RedisValue> keys = fleet_->Command(from, {"CLUSTER", "GETKEYSINSLOT", s, "100"});
    absl::Status st = Ok(keys, "CLUSTER GETKEYSINSLOT");
    if (!st.ok()) return st;
    if (keys->elements.empty()) break;
    std::vector<std::string> migrate = {
        "MIGRATE", fleet_->host(to), std::to_string(fleet_->port(to)), "", "0", "5000", "KEYS"};
    for (const RedisValue& k : keys->elements) migrate.push_back(k.str);
    st = Ok(fleet_->Command(from, migrate), "MIGRATE");
    if (!st.ok()) return st;
  }
  // The new owner first, then the old one, then the other masters.
  std::vector<int> order = {to, from};
  for (int m = 0; m < fleet_->size(); ++m) {
    if (m != to && m != from && fleet_->pid(m) >= 0) order.push_back(m);
  }
  for (int m : order) {
    absl::StatusOr<RedisValue> v =
        fleet_->Command(m, {"CLUSTER", "SETSLOT", s, "NODE", ids_[static_cast<size_t>(to)]});
    // A replica refuses SETSLOT: it learns from its master.
    if (!v.ok()) return v.status();
    if (v->is_error() && m == to) return absl::InternalError("CLUSTER SETSLOT NODE: " + v->str);
  }
  return Until(options_.ready_timeout, [&]() -> absl::Status {
    absl::StatusOr<int> owner = MasterOf(slot, from);
    if (!owner.ok()) return owner.status();
    if (*owner != to) return absl::UnavailableError("the slot map has not moved yet");
    return absl::OkStatus();
  });
}

absl::Status Cluster::MigrateSlot(int slot, int from, int to) {
  absl::Status st = BeginMigration(slot, from, to);
  if (!st.ok()) return st;
  return FinishMigration(slot, from, to);
}

absl::StatusOr<int> Cluster::KillMaster(int master, absl::Duration timeout) {
  const int slot = kSlots * master / options_.masters;  // one of its slots
  absl::StatusOr<int> owner = MasterOf(slot);
  if (!owner.ok()) return owner.status();
  if (*owner != master) {
    return absl::FailedPreconditionError(
        absl::StrCat("member ", master, " does not serve slot ", slot));
  }
  absl::Status st = fleet_->Kill(master);
  if (!st.ok()) return st;
  int promoted = -1;
  st = Until(timeout, [&]() -> absl::Status {
    absl::StatusOr<int> now = MasterOf(slot);
    if (!now.ok()) return now.status();
    if (*now == master) {
      // What the others see, for the message.
      std::string nodes;
      for (int i = 0; i < fleet_->size() && nodes.empty(); ++i) {
        if (fleet_->pid(i) < 0) continue;
        absl::StatusOr<RedisValue> v = fleet_->Command(i, {"CLUSTER", "NODES"}, absl::Seconds(2));
        if (v.ok()) nodes = v->str;
      }
      return absl::UnavailableError(absl::StrCat("not failed over yet; CLUSTER NODES:\n", nodes));
    }
    promoted = *now;
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  st = WaitHealthy(timeout);
  if (!st.ok()) return st;
  return promoted;
}

absl::Status Cluster::WaitHealthy(absl::Duration timeout) const {
  return Until(timeout, [&]() -> absl::Status {
    for (int i = 0; i < fleet_->size(); ++i) {
      if (fleet_->pid(i) < 0) continue;
      absl::StatusOr<RedisValue> info = fleet_->Command(i, {"CLUSTER", "INFO"}, absl::Seconds(2));
      if (!info.ok()) return info.status();
      if (!absl::StrContains(info->str, "cluster_state:ok")) {
        return absl::UnavailableError(absl::StrCat("member ", i, " is not ok: ", info->str));
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace redlock::testkit
