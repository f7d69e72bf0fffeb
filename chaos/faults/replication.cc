#include "chaos/faults/replication.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chaos/base/cleanup.h"
#include "testkit/files.h"

namespace redlock::chaos {
namespace {

// How long the Sentinels take to judge a master down during setup (class
// comment in replication.h); sentinel_down_after applies once it is over.
constexpr absl::Duration kSetupDownAfter = absl::Seconds(60);

// The key of the readiness check's write (deleted after it).
constexpr char kReadyKey[] = "redlock-chaos:replication-ready";

std::string Name(int i) { return NodeSupervisor::NodeName(i); }
std::string StallKey(int i) { return absl::StrCat(Name(i), ":replication"); }
std::string IsolationKey(int i) { return absl::StrCat(Name(i), ":isolated"); }

absl::StatusOr<std::unique_ptr<FaultProxy>> ProxyTo(const testkit::Fleet& fleet, int i) {
  ProxyOptions po;
  po.upstream_host = fleet.host(i);
  po.upstream_port = static_cast<uint16_t>(fleet.port(i));
  return FaultProxy::Start(po);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicatedNodes>> ReplicatedNodes::Start(NodeSupervisor* masters,
                                                                        ReplicationOptions options,
                                                                        NemesisLog* log) {
  std::unique_ptr<ReplicatedNodes> r(new ReplicatedNodes(masters, log));
  r->options_ = options;
  const testkit::Fleet& fleet = masters->fleet();
  testkit::ReplicaOptions ro;
  ro.per_group = options.replicas;
  // A promoted replica serves its own replicas' sync at once.
  ro.extra_args = {"--repl-diskless-sync-delay", "0"};
  // A majority of the Sentinels must agree that a master is down.
  const int quorum = options.sentinels / 2 + 1;
  testkit::SentinelOptions so;
  so.down_after = std::max(kSetupDownAfter, options.sentinel_down_after);
  r->nodes_.resize(static_cast<size_t>(fleet.size()));
  for (int i = 0; i < fleet.size(); ++i) {
    Node& n = r->nodes_[static_cast<size_t>(i)];
    n.master = n.original = fleet.address(i);
    absl::StatusOr<std::unique_ptr<FaultProxy>> link = ProxyTo(fleet, i);
    if (!link.ok()) return link.status();
    n.link = *std::move(link);
    ro.upstreams.push_back(n.link->listen_address());
    if (options.sentinels > 0) {
      absl::StatusOr<std::unique_ptr<FaultProxy>> watch = ProxyTo(fleet, i);
      if (!watch.ok()) return watch.status();
      n.sentinel = *std::move(watch);
      so.masters.push_back({Name(i), n.sentinel->listen_address(), quorum});
    }
  }
  if (options.clock_shim) {
    for (int k = 0; k < fleet.size() * options.replicas; ++k) {
      absl::StatusOr<std::unique_ptr<ClockControl>> c =
          ClockControl::Create(absl::StrCat(options.dir, "/replica-", k, ".clock"));
      if (!c.ok()) return c.status();
      ro.node_env.push_back((*c)->ProcessEnv());
      r->replica_clocks_.push_back(*std::move(c));
    }
  }
  absl::StatusOr<std::unique_ptr<testkit::Replicas>> replicas = testkit::Replicas::Start(ro);
  if (!replicas.ok()) return replicas.status();
  r->replicas_ = *std::move(replicas);
  for (int s = 0; s < options.sentinels; ++s) {
    testkit::SentinelOptions one = so;
    one.dir = options.sentinels == 1 ? options.dir : absl::StrCat(options.dir, "/sentinel-", s);
    if (options.sentinels > 1) std::filesystem::create_directories(one.dir);
    if (options.sentinel_uid_base >= 0) one.uid = options.sentinel_uid_base + s;
    absl::StatusOr<std::unique_ptr<testkit::Sentinel>> sentinel = testkit::Sentinel::Start(one);
    if (!sentinel.ok()) return sentinel.status();
    r->sentinels_.push_back(*std::move(sentinel));
  }
  r->cut_.assign(static_cast<size_t>(options.sentinels), false);
  for (const auto& sentinel : r->sentinels_) {
    for (int i = 0; i < r->size(); ++i) {
      absl::Status st = sentinel->WaitReplicas(Name(i), options.replicas, absl::Seconds(20));
      // The Sentinels find each other through the masters' hello channel.
      if (st.ok() && options.sentinels > 1) {
        st = sentinel->WaitPeers(Name(i), options.sentinels - 1, absl::Seconds(20));
      }
      if (!st.ok()) return st;
    }
  }
  if (options.during_setup) options.during_setup();
  absl::Status ready = r->FinishSetup();
  if (!ready.ok()) return ready;
  return r;
}

absl::Status ReplicatedNodes::FinishSetup() {
  // Every Sentinel still names the master it was given: none failed it over
  // during setup.
  for (const auto& sentinel : sentinels_) {
    for (int i = 0; i < size(); ++i) {
      absl::StatusOr<std::string> named = sentinel->MasterAddress(Name(i));
      if (!named.ok()) return named.status();
      if (*named != WatchedAddress(i)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Sentinel ", sentinel->address(), " failed ", Name(i), " over during setup: it names ",
            *named, ", not ", WatchedAddress(i),
            "; its log ends: ", absl::StrJoin(testkit::LastLines(sentinel->log_path(), 6), " | ")));
      }
    }
  }
  const int want = options_.replicas;
  for (int i = 0; i < size(); ++i) {
    // A write on the master confirmed by every replica: the replication
    // link is up and acknowledging (what the clients' durability vote
    // needs; a replica's master_link_status:up says less). One connection,
    // so that WAIT waits for this SET.
    testkit::RedisConnection conn(masters_->fleet().endpoint(i));
    absl::Status st = conn.Connect(absl::Seconds(2), absl::Seconds(5));
    if (!st.ok()) return st;
    std::string last = "not asked";
    bool confirmed = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    for (int attempt = 0;
         attempt < 100 && !confirmed && std::chrono::steady_clock::now() < deadline; ++attempt) {
      absl::StatusOr<testkit::RedisValue> set =
          conn.Command({"SET", kReadyKey, std::to_string(attempt)});
      absl::StatusOr<testkit::RedisValue> wait =
          set.ok() ? conn.Command({"WAIT", std::to_string(want), "500"}) : set;
      if (!wait.ok()) return wait.status();
      if (wait->type == testkit::RedisValue::Type::kInteger && wait->integer >= want) {
        confirmed = true;
      } else {
        last = wait->type == testkit::RedisValue::Type::kInteger
                   ? absl::StrCat(wait->integer, " of ", want, " replicas confirmed it")
                   : wait->str;
      }
    }
    absl::StatusOr<testkit::RedisValue> del = conn.Command({"DEL", kReadyKey});
    (void)del;
    if (!confirmed) {
      return absl::DeadlineExceededError(
          absl::StrCat(Name(i), "'s master ", nodes_[static_cast<size_t>(i)].original,
                       ": a write was not confirmed by its replicas within 15s (WAIT): ", last));
    }
  }
  // The run begins: the scenario's down-after from now on.
  for (const auto& sentinel : sentinels_) {
    for (int i = 0; i < size(); ++i) {
      absl::Status st = sentinel->SetDownAfter(Name(i), options_.sentinel_down_after);
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

std::string ReplicatedNodes::WatchedAddress(int i) const {
  const Node& n = nodes_[static_cast<size_t>(i)];
  return n.sentinel != nullptr ? n.sentinel->listen_address() : n.original;
}

std::vector<std::string> ReplicatedNodes::UnexpectedFailovers() const {
  std::vector<std::string> out;
  for (int s = 0; s < sentinels(); ++s) {
    if (cut_[static_cast<size_t>(s)]) continue;
    for (int i = 0; i < size(); ++i) {
      if (failed_over(i)) continue;
      absl::StatusOr<std::string> named =
          sentinels_[static_cast<size_t>(s)]->MasterAddress(Name(i));
      if (named.ok() && *named != WatchedAddress(i)) {
        out.push_back(absl::StrCat(
            Name(i), ": the Sentinels name ", *named,
            " as its master, but no failover fault "
            "promoted it (the clients were left on ",
            MasterAddress(i),
            "): a master killed or paused longer than the Sentinels' down-after, or a false "
            "down on a loaded machine"));
      }
    }
    break;  // the first Sentinel that is not cut off speaks for them
  }
  return out;
}

ReplicatedNodes::~ReplicatedNodes() {
  if (!nft_table_.empty() && options_.netns != nullptr) {
    absl::Status s = options_.netns->RunNft(absl::StrCat("delete table ip ", nft_table_, "\n"));
    (void)s;
  }
}

ClockControl* ReplicatedNodes::replica_clock(int i) {
  const size_t k = static_cast<size_t>(replicas_->index(i, 0));
  return k < replica_clocks_.size() ? replica_clocks_[k].get() : nullptr;
}

std::string ReplicatedNodes::SentinelAddresses() const {
  std::vector<std::string> out;
  for (const auto& s : sentinels_) out.push_back(s->address());
  return absl::StrJoin(out, "+");
}

absl::Status ReplicatedNodes::CutSentinel(int s) {
  if (s < 0 || s >= sentinels()) return absl::InvalidArgumentError("no such Sentinel");
  if (options_.netns == nullptr || options_.sentinel_uid_base < 0) {
    return absl::FailedPreconditionError(
        "cutting a Sentinel off needs the run in a network namespace (netns: true)");
  }
  if (cut_[static_cast<size_t>(s)]) return absl::OkStatus();
  if (nft_table_.empty()) {
    const std::string table = absl::StrCat("redlock_sentinels_", getpid(), "_", this_id());
    absl::Status st = options_.netns->RunNft(
        absl::StrCat("table ip ", table,
                     " {\n  chain out {\n    type filter hook output priority 0; policy "
                     "accept;\n  }\n}\n"));
    if (!st.ok()) return st;
    nft_table_ = table;
  }
  cut_[static_cast<size_t>(s)] = true;
  absl::Status st = ApplySentinelCuts();
  if (!st.ok()) return st;
  log_->Start("stale_sentinel", {},
              absl::StrCat("Sentinel ", s, " (", sentinels_[static_cast<size_t>(s)]->address(),
                           ") cut off from the nodes and the other Sentinels; it still answers "
                           "clients"),
              absl::StrCat("sentinel-", s));
  return absl::OkStatus();
}

absl::Status ReplicatedNodes::RestoreSentinel(int s) {
  if (s < 0 || s >= sentinels() || !cut_[static_cast<size_t>(s)]) return absl::OkStatus();
  cut_[static_cast<size_t>(s)] = false;
  absl::Status st = ApplySentinelCuts();
  log_->Stop("stale_sentinel", absl::StrCat("sentinel-", s), "reconnected");
  return st;
}

// Two rules per cut Sentinel: whatever its uid sends, but from its own port
// (its answers to clients), is dropped, so it opens no connection to the
// nodes or to the other Sentinels; and the other Sentinels' connections to
// it are dropped too (a Sentinel accepts hello messages, which carry the new
// master after a failover, by PUBLISH on its own port). It learns nothing
// new; clients still reach it.
absl::Status ReplicatedNodes::ApplySentinelCuts() {
  std::string script = absl::StrCat("flush chain ip ", nft_table_, " out\n");
  for (int s = 0; s < sentinels(); ++s) {
    if (!cut_[static_cast<size_t>(s)]) continue;
    const int port = sentinels_[static_cast<size_t>(s)]->port();
    absl::StrAppend(&script, "add rule ip ", nft_table_, " out meta skuid ",
                    options_.sentinel_uid_base + s, " tcp sport != ", port, " drop\n");
    std::vector<std::string> others;
    for (int j = 0; j < sentinels(); ++j) {
      if (j != s) others.push_back(absl::StrCat(options_.sentinel_uid_base + j));
    }
    if (!others.empty()) {
      absl::StrAppend(&script, "add rule ip ", nft_table_, " out meta skuid { ",
                      absl::StrJoin(others, ", "), " } tcp dport ", port, " drop\n");
    }
  }
  return options_.netns->RunNft(script);
}

const std::string& ReplicatedNodes::MasterAddress(int i) const {
  return nodes_[static_cast<size_t>(i)].master;
}

absl::StatusOr<testkit::RedisValue> ReplicatedNodes::Command(int i,
                                                             const std::vector<std::string>& args,
                                                             absl::Duration timeout) const {
  absl::StatusOr<Endpoint> ep = testkit::EndpointOf(MasterAddress(i));
  if (!ep.ok()) return ep.status();
  return testkit::RunCommand(*ep, args, timeout);
}

absl::Status ReplicatedNodes::Stall(int i) {
  Node& n = nodes_[static_cast<size_t>(i)];
  if (n.stalled) return absl::OkStatus();
  absl::Status st = n.link->SetFault(Direction::kToClient, FaultSpec::Hold());
  if (!st.ok()) return st;
  n.stalled = true;
  log_->Start("replication_stall", {.nodes = {i}},
              "replication held: the replica does not get the master's writes", StallKey(i));
  return absl::OkStatus();
}

void ReplicatedNodes::Resume(int i) {
  Node& n = nodes_[static_cast<size_t>(i)];
  if (!n.stalled) return;
  n.link->ClearFaults();  // delivers what was held, in order
  n.stalled = false;
  log_->Stop("replication_stall", StallKey(i), "released: the replica catches up");
}

void ReplicatedNodes::CutLink(int i) {
  Node& n = nodes_[static_cast<size_t>(i)];
  n.link->Down();  // what it held is discarded
  if (n.stalled) {
    n.stalled = false;
    n.link->ClearFaults();
    log_->Stop("replication_stall", StallKey(i), "link cut: the held writes are lost");
  }
  log_->Instant("replication_cut", {.nodes = {i}},
                "replication link down: what the replica had not received is lost");
}

void ReplicatedNodes::Isolate(int i, const std::vector<std::string>& others) {
  Node& n = nodes_[static_cast<size_t>(i)];
  if (n.isolated) return;
  n.link->Down();
  if (n.sentinel != nullptr) n.sentinel->Down();
  n.isolated = true;
  log_->Start(
      "partition", {.nodes = {i}, .clients = others},
      absl::StrCat(Name(i), "'s master cut from its replica and Sentinel",
                   others.empty() ? "" : absl::StrCat(" and from ", absl::StrJoin(others, ",")),
                   "; it still serves the other clients"),
      IsolationKey(i));
}

absl::Status ReplicatedNodes::Rejoin(int i) {
  Node& n = nodes_[static_cast<size_t>(i)];
  if (!n.isolated) return absl::OkStatus();
  absl::Status st = n.link->Up();
  if (st.ok() && n.sentinel != nullptr) st = n.sentinel->Up();
  n.isolated = false;
  log_->Stop("partition", IsolationKey(i), "healed");
  return st;
}

void ReplicatedNodes::Failed(int i, const std::string& address, const std::string& how) {
  Node& n = nodes_[static_cast<size_t>(i)];
  n.master = address;
  n.failed_over = true;
  log_->Instant("failover", {.nodes = {i}},
                absl::StrCat(Name(i), "'s replica ", address, " ", how));
}

absl::StatusOr<std::string> ReplicatedNodes::Promote(int i) {
  absl::Status st = replicas_->Promote(i, 0);
  if (!st.ok()) return st;
  const std::string address = replicas_->address(i, 0);
  Failed(i, address, "promoted by the harness (REPLICAOF NO ONE)");
  return address;
}

absl::StatusOr<std::string> ReplicatedNodes::AwaitSentinelFailover(int i, absl::Duration timeout) {
  // Ask a Sentinel that is not cut off (a cut one never sees the failover).
  const testkit::Sentinel* sentinel = nullptr;
  for (int s = 0; s < sentinels() && sentinel == nullptr; ++s) {
    if (!cut_[static_cast<size_t>(s)]) sentinel = sentinels_[static_cast<size_t>(s)].get();
  }
  if (sentinel == nullptr) return absl::FailedPreconditionError("no Sentinel to ask");
  Node& n = nodes_[static_cast<size_t>(i)];
  auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> now =
      sentinel->AwaitFailover(Name(i), n.sentinel->listen_address(), timeout);
  if (!now.ok()) return now.status();
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  Failed(i, *now, absl::StrCat("promoted by Sentinel (seen after ", ms, " ms)"));
  return now;
}

absl::Status ReplicatedNodes::RejoinAsReplica(int i) {
  Node& n = nodes_[static_cast<size_t>(i)];
  if (!n.failed_over)
    return absl::FailedPreconditionError(absl::StrCat(Name(i), " did not fail over"));
  if (!masters_->running(i)) {
    absl::Status st = masters_->StartNode(i);
    if (!st.ok()) return st;
  }
  // Through the replication link proxy, pointed at the new master, so that
  // replication_stall holds the new replication too.
  absl::StatusOr<Endpoint> ep = testkit::EndpointOf(n.master);
  if (!ep.ok()) return ep.status();
  absl::Status up = n.link->Retarget(ep->host, static_cast<uint16_t>(ep->port));
  if (up.ok()) up = n.link->Up();
  if (!up.ok()) return up;
  absl::StatusOr<Endpoint> via = testkit::EndpointOf(n.link->listen_address());
  if (!via.ok()) return via.status();
  absl::StatusOr<testkit::RedisValue> r = masters_->fleet().Command(
      i, {"REPLICAOF", via->host, std::to_string(via->port)}, absl::Seconds(2));
  if (!r.ok()) return r.status();
  if (r->is_error())
    return absl::UnavailableError(absl::StrCat("REPLICAOF on ", n.original, ": ", r->str));
  log_->Instant("rejoin", {.nodes = {i}},
                absl::StrCat(Name(i), "'s old master ", n.original,
                             " back, empty, as a replica of ", n.master));
  return absl::OkStatus();
}

void ReplicatedNodes::HealAll() {
  for (int s = 0; s < sentinels(); ++s) {
    absl::Status st = RestoreSentinel(s);
    (void)st;
  }
  for (int i = 0; i < size(); ++i) {
    Resume(i);
    absl::Status st = Rejoin(i);
    (void)st;
    st = nodes_[static_cast<size_t>(i)].link->Up();
    (void)st;
  }
}

}  // namespace redlock::chaos
