#include "sim/config.h"

#include <algorithm>
#include <functional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/fair_op.h"

namespace redlock::sim {
namespace {

// A field: its name, how it is written and how it is read back.
struct Field {
  const char* name;
  std::function<std::string(const SimConfig&)> get;
  std::function<bool(const std::string&, SimConfig&)> set;
};

template <typename T>
Field IntField(const char* name, T SimConfig::*m) {
  return {name, [m](const SimConfig& c) { return absl::StrCat(c.*m); },
          [m](const std::string& v, SimConfig& c) {
            int64_t x = 0;
            if (!absl::SimpleAtoi(v, &x)) return false;
            c.*m = static_cast<T>(x);
            return true;
          }};
}

Field BoolField(const char* name, bool SimConfig::*m) {
  return {name, [m](const SimConfig& c) { return std::string(c.*m ? "true" : "false"); },
          [m](const std::string& v, SimConfig& c) {
            if (v != "true" && v != "false" && v != "1" && v != "0") return false;
            c.*m = v == "true" || v == "1";
            return true;
          }};
}

const char* kPrimitiveNames[] = {"mutex", "multilock", "rwlock", "semaphore", "election", "fair"};
constexpr int kPrimitives = 6;

const std::vector<Field>& Fields() {
  static const std::vector<Field>* fields = new std::vector<Field>{
      {"nodes", [](const SimConfig& c) { return NodesText(c.nodes); },
       [](const std::string& v, SimConfig& c) {
         absl::StatusOr<std::vector<NodeConfig>> n = ParseNodes(v);
         if (!n.ok()) return false;
         c.nodes = *std::move(n);
         return true;
       }},
      IntField("quorum", &SimConfig::quorum),
      IntField("node_timeout_ms", &SimConfig::node_timeout_ms),
      {"drift_factor", [](const SimConfig& c) { return absl::StrCat(c.drift_factor); },
       [](const std::string& v, SimConfig& c) { return absl::SimpleAtod(v, &c.drift_factor); }},
      IntField("drift_floor_ms", &SimConfig::drift_floor_ms),
      BoolField("fencing", &SimConfig::fencing),
      IntField("fencing_lost_counters", &SimConfig::fencing_lost_counters),
      BoolField("shared_counter", &SimConfig::shared_counter),
      IntField("durability_replicas", &SimConfig::durability_replicas),
      IntField("durability_timeout_ms", &SimConfig::durability_timeout_ms),
      BoolField("durability_fsync", &SimConfig::durability_fsync),
      BoolField("notifications", &SimConfig::notifications),
      IntField("max_attempts", &SimConfig::max_attempts),
      IntField("retry_delay_ms", &SimConfig::retry_delay_ms),
      IntField("retry_jitter_ms", &SimConfig::retry_jitter_ms),
      IntField("wait_poll_max_ms", &SimConfig::wait_poll_max_ms),
      IntField("breaker_probe_ms", &SimConfig::breaker_probe_ms),
      IntField("backoff_min_ms", &SimConfig::backoff_min_ms),
      IntField("backoff_max_ms", &SimConfig::backoff_max_ms),
      IntField("connect_timeout_ms", &SimConfig::connect_timeout_ms),
      {"key_prefix", [](const SimConfig& c) { return c.key_prefix; },
       [](const std::string& v, SimConfig& c) {
         c.key_prefix = v;
         return true;
       }},
      {"primitive", [](const SimConfig& c) { return std::string(PrimitiveName(c.primitive)); },
       [](const std::string& v, SimConfig& c) {
         for (int i = 0; i < kPrimitives; ++i) {
           if (v == kPrimitiveNames[i]) {
             c.primitive = static_cast<Primitive>(i);
             return true;
           }
         }
         return false;
       }},
      BoolField("all_nodes", &SimConfig::all_nodes),
      IntField("set_size", &SimConfig::set_size),
      IntField("permits", &SimConfig::permits),
      IntField("readers", &SimConfig::readers),
      IntField("place_ttl_ms", &SimConfig::place_ttl_ms),
      IntField("clients", &SimConfig::clients),
      IntField("resources", &SimConfig::resources),
      IntField("ttl_ms", &SimConfig::ttl_ms),
      IntField("use_ms", &SimConfig::use_ms),
      IntField("uses_per_lease", &SimConfig::uses_per_lease),
      IntField("guard_ms", &SimConfig::guard_ms),
      IntField("think_ms", &SimConfig::think_ms),
      IntField("pre_release_ms", &SimConfig::pre_release_ms),
      IntField("retry_ms", &SimConfig::retry_ms),
      IntField("wait_ms", &SimConfig::wait_ms),
      BoolField("retries", &SimConfig::retries),
      BoolField("extend", &SimConfig::extend),
      BoolField("renew", &SimConfig::renew),
      BoolField("watch_only", &SimConfig::watch_only),
      BoolField("release", &SimConfig::release),
      BoolField("fenced_store", &SimConfig::fenced_store),
      IntField("clock_ppm", &SimConfig::clock_ppm),
      IntField("latency_us_lo", &SimConfig::latency_us_lo),
      IntField("latency_us_hi", &SimConfig::latency_us_hi),
      IntField("replication_lag_us_lo", &SimConfig::replication_lag_us_lo),
      IntField("replication_lag_us_hi", &SimConfig::replication_lag_us_hi),
      IntField("duration_ms", &SimConfig::duration_ms),
      IntField("lying_nodes", &SimConfig::lying_nodes),
      IntField("fair_jumpers", &SimConfig::fair_jumpers),
  };
  return *fields;
}

std::string NodeText(const NodeConfig& n) {
  std::string out = n.members > 0 ? absl::StrCat("cluster", n.members) : "plain";
  if (n.scripting == Scripting::kNoPerm) out = n.members > 0 ? out + "+noperm" : "noperm";
  if (n.scripting == Scripting::kLualess) out = n.members > 0 ? out + "+lualess" : "lualess";
  if (n.replicas > 0) absl::StrAppend(&out, "+replicas", n.replicas);
  if (n.tls) out += "+tls";
  if (n.aof) out += "+aof";
  return out;
}

}  // namespace

const char* PrimitiveName(Primitive p) { return kPrimitiveNames[static_cast<int>(p)]; }

std::string NodesText(const std::vector<NodeConfig>& nodes) {
  std::vector<std::string> parts;
  for (const NodeConfig& n : nodes) parts.push_back(NodeText(n));
  return absl::StrJoin(parts, "/");
}

absl::StatusOr<std::vector<NodeConfig>> ParseNodes(const std::string& text) {
  std::vector<NodeConfig> out;
  for (absl::string_view item : absl::StrSplit(text, '/', absl::SkipEmpty())) {
    NodeConfig n;
    for (absl::string_view part : absl::StrSplit(item, '+')) {
      int64_t k = 0;
      if (part == "plain") {
      } else if (part == "noperm") {
        n.scripting = Scripting::kNoPerm;
      } else if (part == "lualess") {
        n.scripting = Scripting::kLualess;
      } else if (part == "tls") {
        n.tls = true;
      } else if (part == "aof") {
        n.aof = true;
      } else if (absl::ConsumePrefix(&part, "replicas") && absl::SimpleAtoi(part, &k) && k >= 0 &&
                 k <= 4) {
        n.replicas = static_cast<int>(k);
      } else if (absl::ConsumePrefix(&part, "cluster") && absl::SimpleAtoi(part, &k) && k >= 1 &&
                 k <= 8) {
        n.members = static_cast<int>(k);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("nodes: \"", item, "\": unknown part \"", part,
                         "\" (plain, noperm, lualess, tls, aof, replicasK, clusterK)"));
      }
    }
    out.push_back(n);
  }
  if (out.empty()) return absl::InvalidArgumentError("nodes: empty list");
  return out;
}

std::vector<std::pair<std::string, std::string>> ConfigFields(const SimConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Field& f : Fields()) out.emplace_back(f.name, f.get(c));
  return out;
}

absl::Status SetConfigField(const std::string& name, const std::string& value, SimConfig* c) {
  for (const Field& f : Fields()) {
    if (name != f.name) continue;
    if (!f.set(value, *c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("config: bad value \"", value, "\" for ", name));
    }
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (const Field& f : Fields()) names.push_back(f.name);
  return absl::InvalidArgumentError(absl::StrCat("config: unknown field \"", name,
                                                 "\" (known: ", absl::StrJoin(names, ", "), ")"));
}

absl::Status ApplyOverrides(const std::string& text, SimConfig* c) {
  std::set<std::string> given;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("config: \"", item, "\" is not k=v"));
    }
    absl::Status s = SetConfigField(kv[0], kv[1], c);
    if (!s.ok()) return s;
    given.insert(kv[0]);
  }
  // What was drawn for the fields not given follows what was given (a drawn
  // quorum of 5 does not fit three forced nodes).
  auto drawn = [&](const char* name) { return given.count(name) == 0; };
  const int n = static_cast<int>(c->nodes.size());
  if (drawn("quorum") && (c->quorum > n || (c->quorum != 0 && c->quorum <= n / 2))) c->quorum = 0;
  if (drawn("fencing_lost_counters")) {
    c->fencing_lost_counters = c->fencing ? std::min(c->fencing_lost_counters, n - 1) : 0;
  }
  if (drawn("shared_counter") && !c->fencing) c->shared_counter = false;
  const bool cluster =
      std::any_of(c->nodes.begin(), c->nodes.end(), [](const NodeConfig& x) { return x.members; });
  if (cluster && drawn("shared_counter")) c->shared_counter = false;
  if (cluster && drawn("key_prefix")) c->key_prefix = "{locks}:";
  int min_replicas = 4;
  bool all_aof = true;
  for (const NodeConfig& x : c->nodes) {
    min_replicas = std::min(min_replicas, x.replicas);
    all_aof = all_aof && x.aof;
  }
  if (drawn("durability_replicas") && c->durability_replicas > min_replicas) {
    c->durability_replicas = 0;
  }
  if (drawn("durability_timeout_ms") && c->durability_replicas > 0 &&
      (c->durability_timeout_ms <= 0 || c->durability_timeout_ms >= c->node_timeout_ms)) {
    c->durability_timeout_ms = std::max<int64_t>(1, c->node_timeout_ms / 4);
  }
  if (drawn("replication_lag_us_hi") && c->durability_replicas > 0) {
    // As DrawConfig: replicas keep up within the durability timeout.
    c->replication_lag_us_hi =
        std::min(c->replication_lag_us_hi, c->durability_timeout_ms * 1000 / 3);
    if (drawn("replication_lag_us_lo")) {
      c->replication_lag_us_lo = std::min(c->replication_lag_us_lo, c->replication_lag_us_hi);
    }
  }
  if (drawn("durability_fsync") && (c->durability_replicas == 0 || !all_aof)) {
    c->durability_fsync = false;
  }
  if (drawn("readers")) c->readers = std::min(c->readers, c->clients);
  if (drawn("set_size")) {
    c->set_size = std::max(1, std::min(c->set_size, c->resources));
    // A MultiLock drawn as another primitive: sets of two where it can.
    if (c->primitive == Primitive::kMultiLock && c->set_size < 2)
      c->set_size = std::min(2, c->resources);
  }
  if (drawn("fenced_store")) {
    c->fenced_store = c->fencing || c->primitive == Primitive::kElection;
  }
  if (drawn("all_nodes") && c->primitive != Primitive::kMultiLock) c->all_nodes = false;
  if (c->primitive == Primitive::kFair) {
    // A fair lock forced on a configuration drawn without a wait waits
    // (DrawConfig's rule: a place needs a wait): 2 ttl, within 100-2000 ms.
    if (drawn("wait_ms") && c->wait_ms == 0) {
      c->wait_ms = std::clamp<int64_t>(2 * c->ttl_ms, 100, 2000);
    }
    if (drawn("retries")) c->retries = false;
  }
  const int64_t place_floor = std::max<int64_t>(30, 3 * c->node_timeout_ms);
  if (drawn("place_ttl_ms") && c->place_ttl_ms != 0 && c->place_ttl_ms < place_floor) {
    c->place_ttl_ms = place_floor;
  }
  return absl::OkStatus();
}

Options ToOptions(const SimConfig& c) {
  Options o;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const NodeConfig& n = c.nodes[i];
    Endpoint ep;
    if (n.members > 0) {
      for (int m = 0; m < n.members; ++m) {
        ep.cluster.seeds.push_back(SentinelAddress{absl::StrCat("c", i, "m", m), 7000 + m});
      }
    } else {
      ep.host = absl::StrCat("sim-n", i);
      ep.port = 6379;
    }
    ep.tls = n.tls;
    o.nodes.push_back(ep);
  }
  if (std::any_of(c.nodes.begin(), c.nodes.end(), [](const NodeConfig& n) { return n.tls; })) {
    o.tls.verify_peer = true;  // the transport is simulated: nothing is loaded
  }
  o.quorum = c.quorum;
  o.node_timeout = absl::Milliseconds(c.node_timeout_ms);
  o.clock_drift_factor = c.drift_factor;
  o.clock_drift_floor = absl::Milliseconds(c.drift_floor_ms);
  o.max_attempts = c.max_attempts;
  o.retry_delay = absl::Milliseconds(c.retry_delay_ms);
  o.retry_jitter = absl::Milliseconds(c.retry_jitter_ms);
  o.release_notifications = c.notifications;
  o.wait_poll_max = absl::Milliseconds(c.wait_poll_max_ms);
  o.key_prefix = c.key_prefix;
  o.fencing = c.fencing;
  o.fencing_lost_counters = c.fencing_lost_counters;
  if (c.shared_counter) o.fencing_counters = Options::FencingCounters::kShared;
  o.durability.replicas = c.durability_replicas;
  o.durability.timeout = absl::Milliseconds(c.durability_timeout_ms);
  o.durability.fsync = c.durability_fsync;
  o.connect_timeout = absl::Milliseconds(c.connect_timeout_ms);
  o.reconnect_backoff_min = absl::Milliseconds(c.backoff_min_ms);
  o.reconnect_backoff_max = absl::Milliseconds(c.backoff_max_ms);
  o.breaker_probe_interval = absl::Milliseconds(c.breaker_probe_ms);
  o.wait_for_connections = false;
  return o;
}

absl::Status CheckConfig(const SimConfig& c) {
  const int n = static_cast<int>(c.nodes.size());
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", parts...));
  };
  if (n < 1 || n > 7) return bad("nodes: 1 to 7 (", n, ")");
  for (const NodeConfig& node : c.nodes) {
    if (node.members > 0 && node.scripting != Scripting::kScripts) {
      return bad("nodes: a cluster node must allow scripting (the client refuses otherwise)");
    }
    if (c.durability_replicas > node.replicas) {
      return bad("durability_replicas ", c.durability_replicas, " but a node has only ",
                 node.replicas, " replicas (it could never confirm)");
    }
    if (c.durability_fsync && !node.aof) {
      return bad("durability_fsync needs every node with aof (WAITAOF's numlocal)");
    }
  }
  if (c.clients < 1 || c.clients > 8) return bad("clients: 1 to 8");
  if (c.lying_nodes < 0 || c.lying_nodes > n) return bad("lying_nodes: 0 to the nodes");
  if (c.resources < 1 || c.resources > 8) return bad("resources: 1 to 8");
  if (c.primitive == Primitive::kMultiLock && (c.set_size < 1 || c.set_size > c.resources)) {
    return bad("set_size: 1 to resources");
  }
  if (c.primitive == Primitive::kSemaphore && (c.permits < 1 || c.permits > 16)) {
    return bad("permits: 1 to 16");
  }
  if (c.place_ttl_ms != 0) {
    // FairOptions::place_ttl's bounds (CheckPlaceTtl, fair_op.cc).
    const int64_t floor = std::max<int64_t>(30, 3 * c.node_timeout_ms);
    if (c.place_ttl_ms < floor || c.place_ttl_ms > (int64_t{1} << 40)) {
      return bad("place_ttl_ms: 0 (the default) or ", floor,
                 " (30 ms and 3 node timeouts) to 2^40");
    }
  }
  if (c.fair_jumpers < 0 || c.fair_jumpers > c.clients ||
      (c.fair_jumpers > 0 && c.primitive != Primitive::kFair)) {
    return bad("fair_jumpers: 0 to the clients, with primitive fair");
  }
  if (c.ttl_ms < 10 || c.use_ms < 0 || c.uses_per_lease < 0 || c.guard_ms < 0 || c.think_ms < 0 ||
      c.retry_ms < 1 || c.wait_ms < 0 || c.pre_release_ms < 0) {
    return bad("workload durations out of range");
  }
  if (c.duration_ms < 100 || c.duration_ms > 3600000) return bad("duration_ms: 100 to 3600000");
  if (c.latency_us_lo < 0 || c.latency_us_hi < c.latency_us_lo || c.replication_lag_us_lo < 0 ||
      c.replication_lag_us_hi < c.replication_lag_us_lo || c.clock_ppm < 0 ||
      c.clock_ppm > 100000) {
    return bad("network, replication or clock ranges out of order");
  }
  absl::Status s = ValidateOptions(ToOptions(c));
  if (!s.ok()) return s;
  // A ttl the library would refuse makes no run.
  const double drift =
      static_cast<double>(c.ttl_ms) * c.drift_factor + static_cast<double>(c.drift_floor_ms);
  if (static_cast<double>(c.ttl_ms) <= drift) return bad("ttl_ms is not above its drift allowance");
  return absl::OkStatus();
}

int64_t PlaceTtlMs(const SimConfig& c) {
  return c.place_ttl_ms > 0 ? c.place_ttl_ms
                            : absl::ToInt64Milliseconds(internal::kDefaultPlaceTtl);
}

int PlainQuorum(const SimConfig& c) {
  const int n = static_cast<int>(c.nodes.size());
  if (c.primitive == Primitive::kMultiLock && c.all_nodes) return n;
  return c.quorum > 0 ? c.quorum : n / 2 + 1;
}

int RequiredNodes(const SimConfig& c) {
  const int n = static_cast<int>(c.nodes.size());
  if (c.primitive == Primitive::kMultiLock && c.all_nodes) return n;
  const int quorum = PlainQuorum(c);
  const bool fenced = c.fencing || c.primitive == Primitive::kElection;
  return fenced ? internal::FencedQuorum(n, quorum, c.fencing_lost_counters) : quorum;
}

SimConfig DrawConfig(uint64_t seed) {
  Rng rng(SubSeed(seed, 1));
  for (int tries = 0; tries < 1000; ++tries) {
    SimConfig c;
    // The nodes.
    const int n = 1 + static_cast<int>(rng.Weighted({5, 5, 35, 10, 30, 5, 10}));
    const bool replicated = rng.Chance(0.3);
    for (int i = 0; i < n; ++i) {
      NodeConfig node;
      if (rng.Chance(0.1)) node.members = 2 + static_cast<int>(rng.Int(0, 1));
      if (node.members == 0) {
        const size_t s = rng.Weighted({80, 12, 8});
        node.scripting = static_cast<Scripting>(s);
      }
      node.tls = rng.Chance(0.15);
      node.aof = rng.Chance(0.5);
      if (replicated) node.replicas = 1 + static_cast<int>(rng.Int(0, 1));
      c.nodes.push_back(node);
    }
    // The options.
    if (rng.Chance(0.2)) c.quorum = static_cast<int>(rng.Int(n / 2 + 1, n));
    const int64_t timeouts[] = {20, 50, 100, 200};
    c.node_timeout_ms = timeouts[rng.Weighted({15, 50, 25, 10})];
    const double drifts[] = {0.01, 0.005, 0.02, 0.05};
    c.drift_factor = drifts[rng.Weighted({70, 10, 10, 10})];
    c.fencing = rng.Chance(0.5);
    if (c.fencing) {
      c.fencing_lost_counters = std::min(n - 1, static_cast<int>(rng.Weighted({60, 30, 10})));
      c.shared_counter = rng.Chance(0.25);
    }
    if (replicated && rng.Chance(0.6)) {
      int min_replicas = 4;
      for (const NodeConfig& node : c.nodes) min_replicas = std::min(min_replicas, node.replicas);
      c.durability_replicas = static_cast<int>(rng.Int(1, min_replicas));
      c.durability_timeout_ms = std::max<int64_t>(1, c.node_timeout_ms * rng.Int(1, 4) / 10);
      c.durability_fsync = rng.Chance(0.2);
      if (c.durability_fsync) {
        for (NodeConfig& node : c.nodes) node.aof = true;
      }
    }
    c.notifications = rng.Chance(0.7);
    c.max_attempts = static_cast<int>(rng.Int(1, 4));
    c.retry_delay_ms = rng.Int(20, 200);
    c.retry_jitter_ms = rng.Int(0, c.retry_delay_ms / 2);
    c.wait_poll_max_ms = rng.Int(50, 300);
    c.breaker_probe_ms = rng.Int(50, 200);
    c.backoff_min_ms = rng.Int(5, 50);
    c.backoff_max_ms = rng.Int(200, 1000);
    c.connect_timeout_ms = rng.Int(200, 1000);
    // The primitive.
    c.primitive = static_cast<Primitive>(rng.Weighted({30, 15, 15, 15, 15, 10}));
    c.all_nodes = c.primitive == Primitive::kMultiLock && rng.Chance(0.3);
    c.permits = static_cast<int>(rng.Int(1, 4));
    {
      // FairOptions::place_ttl (read by the fair lock only, drawn for every
      // configuration as `permits` is, so that a forced fair lock has one):
      // the default (2 s), or from its floor (30 ms and 3 node timeouts) up.
      const int64_t floor = std::max<int64_t>(30, 3 * c.node_timeout_ms);
      const size_t p = rng.Weighted({40, 40, 20});
      c.place_ttl_ms = p == 0   ? 0
                       : p == 1 ? rng.Int(floor, std::max<int64_t>(floor, 1000))
                                : rng.Int(std::max<int64_t>(floor, 1000), 5000);
    }
    // The workload.
    c.clients = 1 + static_cast<int>(rng.Weighted({10, 25, 40, 25}));
    c.resources = 1 + static_cast<int>(rng.Weighted({40, 40, 20}));
    c.set_size = static_cast<int>(rng.Int(std::min(2, c.resources), c.resources));
    c.readers = static_cast<int>(rng.Int(0, c.clients));
    const int64_t ttls[] = {300, 1000, 2000, 3000};
    c.ttl_ms = ttls[rng.Weighted({20, 40, 25, 15})];
    c.use_ms = rng.Int(5, 60);
    c.uses_per_lease = static_cast<int>(rng.Int(1, 3));
    c.guard_ms = rng.Int(2 * c.node_timeout_ms, std::max<int64_t>(2 * c.node_timeout_ms, 120));
    c.think_ms = rng.Int(2, 40);
    c.pre_release_ms = rng.Chance(0.5) ? rng.Int(0, 40) : 0;
    c.retry_ms = rng.Int(20, 100);
    c.wait_ms = rng.Chance(0.5) ? rng.Int(100, 2000) : 0;
    c.retries = c.wait_ms == 0 && rng.Chance(0.3);
    c.extend = rng.Chance(0.3);
    c.renew = rng.Chance(0.2);
    c.watch_only = c.renew && rng.Chance(0.3);
    c.release = rng.Chance(0.9);
    // Whoever gets fencing tokens fences the store with them (as the chaos
    // lab's clients do): MayViolate's "fencing" means both.
    c.fenced_store = c.fencing || c.primitive == Primitive::kElection;
    // A cluster node: keys of one call share a slot only with a hash tag
    // (the README's suggested "{locks}:" prefix).
    const bool cluster =
        std::any_of(c.nodes.begin(), c.nodes.end(), [](const NodeConfig& x) { return x.members; });
    if (cluster && c.shared_counter) c.shared_counter = false;  // refused by ValidateOptions
    if (cluster) c.key_prefix = "{locks}:";
    // Clocks and the network.
    const int64_t ppms[] = {10, 100, 1000};
    c.clock_ppm = ppms[rng.Weighted({30, 50, 20})];
    c.latency_us_lo = rng.Int(50, 500);
    c.latency_us_hi = c.latency_us_lo + rng.Int(0, 3000);
    c.replication_lag_us_lo = rng.Int(100, 1000);
    c.replication_lag_us_hi = c.replication_lag_us_lo + rng.Int(0, 10000);
    if (c.durability_replicas > 0) {
      // A fleet run with the durability vote has replicas that keep up
      // within its timeout (else no grant is ever confirmed: a
      // misconfiguration, not a fault); a replication_stall makes them lag.
      c.replication_lag_us_hi =
          std::min(c.replication_lag_us_hi, c.durability_timeout_ms * 1000 / 3);
      c.replication_lag_us_lo = std::min(c.replication_lag_us_lo, c.replication_lag_us_hi);
    }
    if (c.primitive == Primitive::kFair) {
      // A fair call takes a place only with a wait (a zero wait is
      // TryAcquire: the lock only when nobody waits, never a place), so the
      // fair lock always waits; `retries` has no meaning with a wait.
      if (c.wait_ms == 0) c.wait_ms = rng.Int(100, 2000);
      c.retries = false;
    }
    if (CheckConfig(c).ok()) return c;
  }
  return SimConfig{.nodes = std::vector<NodeConfig>(5)};
}

std::string DescribeConfig(const SimConfig& c) {
  std::string out = absl::StrCat("N=", c.nodes.size(), " [", NodesText(c.nodes), "] ",
                                 PrimitiveName(c.primitive));
  if (c.primitive == Primitive::kMultiLock) {
    absl::StrAppend(&out, c.all_nodes ? " all-nodes" : " quorum", " set=", c.set_size);
  }
  if (c.primitive == Primitive::kSemaphore) absl::StrAppend(&out, " K=", c.permits);
  if (c.primitive == Primitive::kRwLock) absl::StrAppend(&out, " readers=", c.readers);
  if (c.primitive == Primitive::kFair) {
    absl::StrAppend(&out, " place_ttl=", PlaceTtlMs(c), "ms");
    if (c.fair_jumpers) absl::StrAppend(&out, " jumpers=", c.fair_jumpers);
  }
  if (c.quorum) absl::StrAppend(&out, " quorum=", c.quorum);
  if (c.fencing) {
    absl::StrAppend(&out, " fencing f=", c.fencing_lost_counters,
                    c.shared_counter ? " shared-counter" : "");
  }
  if (c.durability_replicas) {
    absl::StrAppend(&out, " durability K=", c.durability_replicas,
                    c.durability_fsync ? " fsync" : "");
  }
  absl::StrAppend(&out, " clients=", c.clients, " resources=", c.resources, " ttl=", c.ttl_ms,
                  "ms timeout=", c.node_timeout_ms, "ms");
  if (c.wait_ms) absl::StrAppend(&out, " wait=", c.wait_ms, "ms");
  if (c.extend) out += " extend";
  if (c.renew) out += c.watch_only ? " watch" : " renew";
  if (!c.notifications) out += " no-notifications";
  if (c.fenced_store) out += " fenced-store";
  return out;
}

std::vector<std::pair<std::string, std::string>> ConfigDimensions(const SimConfig& c) {
  std::vector<std::pair<std::string, std::string>> d;
  d.emplace_back("nodes", absl::StrCat(c.nodes.size()));
  for (const NodeConfig& n : c.nodes) {
    std::string kind = n.members > 0                        ? "cluster"
                       : n.scripting == Scripting::kNoPerm  ? "noperm"
                       : n.scripting == Scripting::kLualess ? "lualess"
                       : n.tls                              ? "tls"
                                                            : "plain";
    d.emplace_back("node kind", kind);
  }
  d.emplace_back("replicated", c.nodes[0].replicas > 0 ? "yes" : "no");
  d.emplace_back("primitive", c.primitive == Primitive::kMultiLock
                                  ? (c.all_nodes ? "multilock all-nodes" : "multilock quorum")
                                  : PrimitiveName(c.primitive));
  if (c.primitive == Primitive::kFair) {
    d.emplace_back("place ttl", c.place_ttl_ms == 0     ? "default (2 s)"
                                : c.place_ttl_ms < 1000 ? "< 1 s"
                                                        : ">= 1 s");
  }
  d.emplace_back("fencing", !c.fencing                ? "off"
                            : c.shared_counter        ? "shared"
                            : c.fencing_lost_counters ? absl::StrCat("f=", c.fencing_lost_counters)
                                                      : "per resource");
  d.emplace_back("durability",
                 c.durability_replicas == 0 ? "off" : (c.durability_fsync ? "WAITAOF" : "WAIT"));
  d.emplace_back("notifications", c.notifications ? "on" : "off");
  d.emplace_back("renewal",
                 c.renew ? (c.watch_only ? "watch" : "renew") : (c.extend ? "extend" : "none"));
  d.emplace_back("wait", c.wait_ms > 0 ? "yes" : (c.retries ? "retries" : "one attempt"));
  d.emplace_back("clients", absl::StrCat(c.clients));
  d.emplace_back("fenced store", c.fenced_store ? "yes" : "no");
  return d;
}

}  // namespace redlock::sim
