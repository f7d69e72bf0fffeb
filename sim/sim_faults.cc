// The fault kinds in the simulated world: the lab's kinds
// (chaos/faults/fault_kind.h) that the world can have, each with its
// effect here, and the sim-only slot_migration. Names, parameters, what a
// kind may break (MayViolate) and whether a configuration must ride it out
// (Tolerated) are the registry's: one description for both.

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chaos/faults/fault_draw.h"
#include "redlock/internal/cluster_slots.h"
#include "sim/world_internal.h"

namespace redlock::sim {
namespace {

using chaos::FaultKind;
using chaos::FaultTemplate;
using chaos::Span;

constexpr const char* kNotInSim[][2] = {
    {"amnesia", "the simulated node keeps no AOF whose tail could be cut"},
    {"slice", "the simulated network delivers whole messages, never slices of bytes"},
    {"split_brain",
     "no Sentinels are simulated (a Sentinel-managed node is modelled by its "
     "failover's effect)"},
    {"replica_clock_offset", "replicas share their master's clock in the simulation"},
    {"stale_sentinel", "no Sentinels are simulated"},
};

chaos::RunShape ShapeFor(const SimConfig& c, const std::vector<int>& voters) {
  chaos::RunShape s;
  s.nodes = static_cast<int>(c.nodes.size());
  s.clients = c.clients;
  s.topology = chaos::Topology::kSharedProxies;
  bool all_aof = true;
  int replicas = 0;
  for (size_t v = 0; v < c.nodes.size(); ++v) {
    replicas = std::max(replicas, c.nodes[v].replicas);
    const bool target = voters.empty() || std::find(voters.begin(), voters.end(),
                                                    static_cast<int>(v)) != voters.end();
    if (target) all_aof = all_aof && c.nodes[v].aof;
  }
  s.aof = all_aof;
  s.node_clock_shim = true;
  s.client_clock_shim = true;
  s.replicas = replicas;
  s.fencing = c.fencing;
  s.durability = c.durability_replicas > 0;
  s.extends = c.extend || c.renew;
  s.permits = c.primitive == Primitive::kSemaphore;
  s.leaders = c.primitive == Primitive::kElection;
  s.scale.ttl_ms = c.ttl_ms;
  s.scale.drift_factor = c.drift_factor;
  s.node_timeout = absl::Milliseconds(c.node_timeout_ms);
  s.guard = absl::Milliseconds(c.guard_ms);
  return s;
}

bool HasCluster(const SimConfig& c) {
  return std::any_of(c.nodes.begin(), c.nodes.end(), [](const NodeConfig& n) { return n.members; });
}

bool Replicated(const SimConfig& c) {
  return std::all_of(c.nodes.begin(), c.nodes.end(),
                     [](const NodeConfig& n) { return n.replicas > 0; });
}

uint64_t Draw(Rng& rng, uint64_t lo, uint64_t hi) {
  return static_cast<uint64_t>(rng.Int(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
}

}  // namespace

std::vector<const FaultKind*> SimFaultKinds() {
  std::vector<const FaultKind*> out;
  for (const FaultKind* k : chaos::AllFaultKinds()) {
    bool excluded = false;
    for (const auto& [name, why] : kNotInSim) excluded = excluded || k->name() == name;
    if (!excluded) out.push_back(k);
  }
  return out;
}

std::string SimUnsupported(const FaultKind& kind, const SimConfig& config) {
  const std::string& name = kind.name();
  for (const auto& [n, why] : kNotInSim) {
    if (name == n) return why;
  }
  if ((name == "restart" || name == "kill") && Replicated(config)) {
    return "acts on independent masters (use failover on replicated nodes)";
  }
  if ((name == "replication_stall" || name == "failover") && !Replicated(config)) {
    return "needs replicated nodes";
  }
  if (name == "slot_migration" && !HasCluster(config)) return "needs a Redis Cluster node";
  if (name == "partition" && config.clients < 1) return "needs clients";
  return "";
}

std::vector<FaultEvent> DrawFaults(const SimConfig& config, uint64_t seed) {
  Rng rng(SubSeed(seed, 2));
  std::mt19937_64 resolve(SubSeed(seed, 6));
  std::vector<const FaultKind*> kinds;
  for (const FaultKind* k : SimFaultKinds()) {
    if (k->info().explore_weight > 0 && SimUnsupported(*k, config).empty()) kinds.push_back(k);
  }
  std::vector<FaultEvent> out;
  if (kinds.empty()) return out;
  const int total = chaos::TotalExploreWeight(kinds);
  chaos::SpanScale scale;
  scale.ttl_ms = config.ttl_ms;
  scale.drift_factor = config.drift_factor;
  // The last quarter of a run (at least 3 s) is left without faults: what
  // the faults did must be over by then (recovery, L1; nodes asked again,
  // L2), and the run's end checks (S5, L5) see a healed world.
  const int64_t budget_ms = config.duration_ms - std::max<int64_t>(3000, config.duration_ms / 4);
  const int n = static_cast<int>(config.nodes.size());
  std::vector<int> cluster_voters;
  for (int v = 0; v < n; ++v) {
    if (config.nodes[static_cast<size_t>(v)].members > 0) cluster_voters.push_back(v);
  }
  // Waves of 1-3 faults starting within 300 ms of each other, then a pause
  // of 0.3-1.5 s after the wave's last heal (the explorer's generator).
  int64_t t = static_cast<int64_t>(Draw(rng, 200, 800));
  std::set<int> failed_over;
  for (int wave = 0; wave < 1000 && t < budget_ms - 1000; ++wave) {
    const int count = static_cast<int>(Draw(rng, 1, 3));
    int64_t wave_end = t;
    for (int i = 0; i < count; ++i) {
      const chaos::KindInfo& info =
          chaos::PickByWeight(kinds,
                              static_cast<int>(Draw(rng, 0, static_cast<uint64_t>(total - 1))))
              ->info();
      FaultTemplate tmpl = chaos::ExploreTemplate(info);
      if (info.name == "slot_migration") {
        tmpl.nodes = chaos::TargetSel::List(
            {cluster_voters[static_cast<size_t>(Draw(rng, 0, cluster_voters.size() - 1))]});
      }
      const int64_t start = t + static_cast<int64_t>(Draw(rng, 0, 300));
      absl::StatusOr<chaos::FaultInstance> f =
          chaos::ResolveTemplate(tmpl, n, config.clients, scale, -1, resolve);
      if (!f.ok() || chaos::FailsOverAgain(*f, &failed_over)) continue;
      if (info.lasting) {
        wave_end = std::max(wave_end, chaos::EndBeforeBudget(start, budget_ms, &*f));
      } else {
        wave_end = std::max(wave_end, start);
      }
      FaultEvent e;
      e.at_ms = start;
      if (Draw(rng, 0, 2) == 0) {
        static const char* kMarkers[] = {"grant",  "use_read", "use_end",
                                         "invoke", "release",  "extend"};
        const size_t m = (config.extend || config.renew) ? 6 : 5;
        e.marker = kMarkers[Draw(rng, 0, m - 1)];
      }
      e.fault = chaos::ConcreteTemplate(*f);
      if (!e.marker.empty() && info.takes_clients && !info.takes_nodes) {
        e.fault.clients = chaos::TargetSel{chaos::TargetSel::Mode::kMarker, {}, 1, 1};
      }
      out.push_back(std::move(e));
    }
    t = wave_end + static_cast<int64_t>(Draw(rng, 300, 1500));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const FaultEvent& a, const FaultEvent& b) { return a.at_ms < b.at_ms; });
  return out;
}

// ---- In the world ----------------------------------------------------------------------

void World::ScheduleFaults() {
  // A fault waiting for a marker waits until the quiet tail at most.
  const int64_t tail_start = config_.duration_ms - std::max<int64_t>(3000, config_.duration_ms / 4);
  Schedule(tail_start * 1000000, [this] { waiting_markers_.clear(); });
  for (size_t i = 0; i < input_.faults.size(); ++i) {
    const FaultEvent* e = &input_.faults[i];
    Schedule(e->at_ms * 1000000, [this, i, e] {
      if (finishing_) return;
      if (e->marker.empty()) {
        Inject(*e, -1);
      } else {
        waiting_markers_.emplace_back(i, e);
      }
    });
  }
}

void World::OnMarker(int client, const std::string& kind) {
  if (waiting_markers_.empty() || finishing_) return;
  for (size_t i = 0; i < waiting_markers_.size(); ++i) {
    if (waiting_markers_[i].second->marker != kind) continue;
    const FaultEvent* e = waiting_markers_[i].second;
    waiting_markers_.erase(waiting_markers_.begin() + static_cast<long>(i));
    Inject(*e, client);
    return;
  }
}

namespace {

// The proxy faults that act on one direction of a node's links (0: to the
// server, 1: to the client) in one way, whatever their parameters.
struct OneWay {
  const char* name;
  int dir;
  ActiveFault::Effect effect;
  const char* label;
  bool reset;  // open connections are reset when it begins
};

const OneWay* OneWayOf(const std::string& name) {
  using E = ActiveFault::Effect;
  static constexpr OneWay kOneWay[] = {
      {"blackhole", 0, E::kDrop, "requests dropped", false},
      {"ack_loss", 1, E::kDrop, "replies dropped", false},
      {"refuse", 0, E::kRefuse, "connections reset and refused", true},
      {"reset_after_reply", 1, E::kResetAfterReply, "reset after each reply", false},
  };
  for (const OneWay& w : kOneWay) {
    if (name == w.name) return &w;
  }
  return nullptr;
}

}  // namespace

void World::Inject(const FaultEvent& e, int marker_client) {
  const FaultKind* kind = chaos::FindFaultKind(e.fault.kind);
  if (kind == nullptr || !SimUnsupported(*kind, config_).empty()) return;
  chaos::SpanScale scale;
  scale.ttl_ms = config_.ttl_ms;
  scale.drift_factor = config_.drift_factor;
  std::mt19937_64 draws(rng_.Next());
  absl::StatusOr<chaos::FaultInstance> resolved = chaos::ResolveTemplate(
      e.fault, static_cast<int>(voters_.size()), config_.clients, scale, marker_client, draws);
  if (!resolved.ok()) return;
  ActiveFault af;
  af.id = next_fault_++;
  af.kind = kind;
  af.instance = *std::move(resolved);
  chaos::FaultInstance& f = af.instance;
  af.voters = f.nodes;
  af.clients = f.clients;
  const std::string& name = kind->name();
  // A client fault may break what a holder's pause breaks when a target
  // client holds a lease as it begins (the explorer decides the same from
  // the history's holds, which the markers can lag).
  bool holding = false;
  for (int k : f.clients) holding = holding || workers_[static_cast<size_t>(k)].hold.has_value();
  using E = ActiveFault::Effect;
  auto members_of = [this](const std::vector<int>& voters) {
    std::vector<int> out;
    for (int v : voters) {
      for (int m : voters_[static_cast<size_t>(v)].members) out.push_back(m);
    }
    return out;
  };
  auto direction = [&](const std::string& d) {
    af.dir[0] = d != "to-client";
    af.dir[1] = d != "to-server";
  };
  std::string label;
  bool data_lost = false;
  if (name == "restart") {
    for (int m : members_of(f.nodes)) {
      if (!members_[static_cast<size_t>(m)].up) continue;
      const bool keep =
          voters_[static_cast<size_t>(members_[static_cast<size_t>(m)].voter)].config.aof;
      KillMember(m);
      StartMember(m, keep);
      data_lost = data_lost || !keep;
    }
    label = "kill -9 and start";
  } else if (name == "kill") {
    for (int m : members_of(f.nodes)) KillMember(m);
    for (int v : f.nodes) data_lost = data_lost || !voters_[static_cast<size_t>(v)].config.aof;
    label = "kill -9";
  } else if (name == "pause") {
    for (int m : members_of(f.nodes)) {
      if (members_[static_cast<size_t>(m)].up) members_[static_cast<size_t>(m)].paused = true;
    }
    label = "SIGSTOP";
  } else if (name == "clock_jump") {
    const int64_t by = absl::ToInt64Nanoseconds(f.span("by"));
    for (int m : members_of(f.nodes)) members_[static_cast<size_t>(m)].clock.Jump(now_, by);
    label = absl::StrCat("by ", absl::FormatDuration(f.span("by")));
  } else if (name == "clock_strobe") {
    const int64_t amp = absl::ToInt64Nanoseconds(f.span("amplitude"));
    const int64_t period = std::max<int64_t>(1000000, absl::ToInt64Nanoseconds(f.span("period")));
    // Flips between the offset and offset + amplitude every period.
    af.strobe_amplitude = amp;
    af.strobe_period = period;
    const uint64_t id = af.id;
    Schedule(now_, [this, id] { StrobeFlip(id, true); });
    label = absl::StrCat("amplitude ", absl::FormatDuration(f.span("amplitude")));
  } else if (name == "latency") {
    direction(f.choice("direction"));
    af.effect = E::kLatency;
    af.latency_lo = absl::ToInt64Nanoseconds(f.span("latency"));
    af.latency_hi = af.latency_lo + absl::ToInt64Nanoseconds(f.span("jitter"));
    label = absl::StrCat("+", absl::FormatDuration(f.span("latency")));
  } else if (name == "slow_replies") {
    af.dir[1] = true;
    af.effect = E::kLatency;
    const double t = static_cast<double>(config_.node_timeout_ms) * 1e6 * f.number("fraction");
    af.latency_lo = static_cast<int64_t>(t * 0.9);
    af.latency_hi = static_cast<int64_t>(t * 1.1);
    label = absl::StrCat(f.number("fraction"), " x node timeout");
  } else if (const OneWay* w = OneWayOf(name); w != nullptr) {
    af.dir[w->dir] = true;
    af.effect = w->effect;
    label = w->label;
    if (w->reset) {
      for (int m : members_of(f.nodes)) ResetMember(m, "Connection reset by peer", false);
    }
  } else if (name == "hold") {
    direction(f.choice("direction"));
    af.effect = E::kHold;
    label = "held";
  } else if (name == "reset") {
    for (int m : members_of(f.nodes)) ResetMember(m, "Connection reset by peer", false);
    label = "RST on every open connection";
  } else if (name == "link_down") {
    af.dir[0] = true;
    af.effect = E::kRefuse;
    for (int k : f.clients) {
      for (int v : f.nodes) af.links.insert({k, v});
    }
    for (auto& [id, c] : conns_) {
      const int v = members_[static_cast<size_t>(c.member)].voter;
      if (c.node_open && af.links.count({c.client, v}) > 0)
        ResetConn(c, "Connection reset by peer", true);
    }
    label = "links closed";
  } else if (name == "partition") {
    const std::string& shape = f.choice("shape");
    af.effect = E::kHold;
    af.dir[0] = af.dir[1] = true;
    const int n = static_cast<int>(voters_.size());
    if (shape == "isolate") {
      for (int k = 0; k < config_.clients; ++k) {
        for (int v : f.nodes) af.links.insert({k, v});
      }
    } else if (shape == "split") {
      for (int k = 0; k < config_.clients; ++k) {
        const bool ka = std::find(f.clients.begin(), f.clients.end(), k) != f.clients.end();
        for (int v = 0; v < n; ++v) {
          const bool va = std::find(f.nodes.begin(), f.nodes.end(), v) != f.nodes.end();
          if (ka != va) af.links.insert({k, v});
        }
      }
    } else if (shape == "views") {
      for (int k = 0; k < config_.clients; ++k) {
        std::vector<int> all(static_cast<size_t>(n));
        std::iota(all.begin(), all.end(), 0);
        for (int i = 0; i < n; ++i) {
          std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(rng_.Int(i, n - 1))]);
        }
        for (int i = n / 2 + 1; i < n; ++i) af.links.insert({k, all[static_cast<size_t>(i)]});
      }
    } else {  // one-way
      af.dir[0] = f.choice("direction") == "to-server";
      af.dir[1] = !af.dir[0];
      for (int k : f.clients) {
        for (int v : f.nodes) af.links.insert({k, v});
      }
    }
    if (af.links.empty()) af.effect = E::kNone;
    label = shape;
  } else if (name == "replication_stall") {
    for (int m : members_of(f.nodes)) {
      Member& mm = members_[static_cast<size_t>(m)];
      std::fill(mm.stalled.begin(), mm.stalled.end(), true);
    }
    label = "replication held";
  } else if (name == "failover") {
    for (int m : members_of(f.nodes)) {
      Member& mm = members_[static_cast<size_t>(m)];
      if (mm.stalled.empty()) continue;
      // The most up-to-date replica is promoted (as Sentinel chooses).
      int best = 0;
      for (int r = 1; r < static_cast<int>(mm.stalled.size()); ++r) {
        if (mm.node->replica_offset(r) > mm.node->replica_offset(best)) best = r;
      }
      ResetMember(m, "Connection reset by peer", false);
      mm.node->Failover(best);
      ++mm.generation;
      std::fill(mm.replicate_at.begin(), mm.replicate_at.end(), now_);
      std::vector<std::string> keys;
      for (const auto& [mk, holdings] : holdings_) {
        if (mk.first == m) keys.push_back(mk.second);
      }
      ObserveKeys(m, keys, false, -1);
    }
    data_lost = config_.durability_replicas == 0;
    label = "replica promoted";
  } else if (name == "script_flush") {
    for (int m : members_of(f.nodes)) {
      Member& mm = members_[static_cast<size_t>(m)];
      if (mm.up && !mm.paused) mm.node->FlushScripts();
    }
    label = "SCRIPT FLUSH";
  } else if (name == "client_kill") {
    for (int m : members_of(f.nodes)) {
      if (members_[static_cast<size_t>(m)].up) ResetMember(m, "Connection reset by peer", true);
    }
    label = "CLIENT KILL TYPE normal";
  } else if (name == "client_pause") {
    for (int k : f.clients) PauseClient(k);
    label = "SIGSTOP";
  } else if (name == "client_clock_jump") {
    const int64_t by = absl::ToInt64Nanoseconds(f.span("monotonic"));
    for (int k : f.clients) {
      ClientCtx& c = clients_[static_cast<size_t>(k)];
      c.clock.Jump(now_, by);
      c.wake_at = INT64_MAX;
      ++c.wake_gen;
      RearmWake(k);
    }
    label = absl::StrCat("monotonic +", absl::FormatDuration(f.span("monotonic")));
  } else if (name == "slot_migration") {
    for (int v : f.nodes) {
      Voter& voter = voters_[static_cast<size_t>(v)];
      if (voter.config.members < 2) continue;
      const int slot = internal::KeySlot(config_.key_prefix + ResourceName(0));
      const int from = voter.slot_owner[static_cast<size_t>(slot)];
      int to = voter.members[0];
      for (int m : voter.members) {
        if (m != from) to = m;
      }
      Member& src = members_[static_cast<size_t>(from)];
      Member& dst = members_[static_cast<size_t>(to)];
      src.node->BeginMigration(slot, absl::StrCat(dst.host, ":", dst.port));
      dst.node->BeginImport(slot);
      const uint64_t id = af.id;
      const int64_t step = absl::ToInt64Nanoseconds(f.span("step"));
      Schedule(now_ + step, [this, id] { MigrateStep(id); });
      af.slot = slot;
      af.slot_voter = v;
      af.from = from;
      af.to = to;
      break;  // one migration per fault
    }
    label = "slot migrating";
  }
  if (data_lost) {
    for (int v : f.nodes) forgot_voters_.insert(v);
  }
  if (name == "restart" || name == "kill" || name == "failover") {
    data_faults_.emplace_back(now_, now_);
  }
  // What the history and the judge know of it.
  const chaos::RunShape shape = ShapeFor(config_, f.nodes);
  // Tokens without a fenced store (only when forced by --config): what
  // either reading of "fencing" allows.
  chaos::RunShape unfenced = shape;
  unfenced.fencing = false;
  const bool both = config_.fencing && !config_.fenced_store;
  InjectedFault inj;
  inj.kind = name;
  inj.description = chaos::DescribeTemplate(chaos::ConcreteTemplate(f));
  inj.begin = now_;
  inj.end = now_;
  chaos::FaultInstance in_use = f;
  in_use.in_use = true;
  chaos::FaultInstance idle = f;
  idle.in_use = false;
  inj.may_violate_idle = kind->MayViolate(shape, idle) |
                         (both ? kind->MayViolate(unfenced, idle) : chaos::PropertySet{0});
  inj.may_violate = holding
                        ? kind->MayViolate(shape, in_use) |
                              (both ? kind->MayViolate(unfenced, in_use) : chaos::PropertySet{0})
                        : inj.may_violate_idle;
  inj.tolerated = kind->Tolerated(shape, f);
  inj.nodes = f.nodes;
  inj.data_lost = data_lost;
  for (int k : f.clients) inj.scope.push_back(clients_[static_cast<size_t>(k)].name);
  af.injected_index = out_.injected.size();
  out_.injected.push_back(inj);
  Record(
      NemesisEvent(*kind, f, label,
                   kind->info().lasting ? chaos::FaultPhase::kStart : chaos::FaultPhase::kInstant));
  if (!kind->info().lasting) return;
  const uint64_t id = af.id;
  const absl::Duration d = f.duration;
  active_.emplace(id, std::move(af));
  if (d != absl::InfiniteDuration()) {
    Schedule(now_ + absl::ToInt64Nanoseconds(d), [this, id] { Heal(id); });
  }
}

void World::StrobeFlip(uint64_t id, bool up) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  const ActiveFault& af = it->second;
  for (int v : af.voters) {
    for (int m : voters_[static_cast<size_t>(v)].members) {
      Member& mm = members_[static_cast<size_t>(m)];
      mm.clock.Jump(now_, up ? af.strobe_amplitude : -af.strobe_amplitude);
      mm.strobe_by = up ? af.strobe_amplitude : 0;
    }
  }
  Schedule(now_ + af.strobe_period, [this, id, up] { StrobeFlip(id, !up); });
}

// Keys a migration moved: gone from one master, there on the other (no
// client wrote them: H2 and L6 see a move, not a creation).
void World::ObserveMovedKeys(int from, int to) {
  const std::vector<std::string> keys(lock_keys_.begin(), lock_keys_.end());
  ObserveKeys(from, keys, false, -1);
  ObserveKeys(to, keys, false, -1);
}

void World::MigrateStep(uint64_t id) {
  auto it = active_.find(id);
  if (it == active_.end() || it->second.slot < 0) return;
  const ActiveFault& af = it->second;
  data_faults_.emplace_back(now_, now_);  // keys move between masters: D1 not judged
  const int moved = members_[static_cast<size_t>(af.from)].node->MoveKeys(
      af.slot, *members_[static_cast<size_t>(af.to)].node,
      static_cast<int>(af.instance.integer("keys")), NodeMs(af.from));
  if (moved > 0) {  // both sides wrote: their replicas follow
    AfterWrite(af.from);
    AfterWrite(af.to);
    ObserveMovedKeys(af.from, af.to);
  }
  const int64_t step = absl::ToInt64Nanoseconds(af.instance.span("step"));
  Schedule(now_ + std::max<int64_t>(step, 1000000), [this, id] { MigrateStep(id); });
}

void World::Heal(uint64_t id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  ActiveFault af = std::move(it->second);
  active_.erase(it);
  const chaos::FaultInstance& f = af.instance;
  const std::string& name = af.kind->name();
  auto members_of = [this](const std::vector<int>& voters) {
    std::vector<int> out;
    for (int v : voters) {
      for (int m : voters_[static_cast<size_t>(v)].members) out.push_back(m);
    }
    return out;
  };
  if (name == "kill") {
    data_faults_.emplace_back(now_, now_);
    for (int m : members_of(f.nodes)) {
      if (!members_[static_cast<size_t>(m)].up) {
        StartMember(
            m, voters_[static_cast<size_t>(members_[static_cast<size_t>(m)].voter)].config.aof);
      }
    }
  } else if (name == "pause") {
    for (int m : members_of(f.nodes)) ResumeMember(m);
  } else if (name == "clock_strobe") {
    for (int m : members_of(f.nodes)) {
      Member& mm = members_[static_cast<size_t>(m)];
      if (mm.strobe_by != 0) mm.clock.Jump(now_, -mm.strobe_by);
      mm.strobe_by = 0;
    }
  } else if (name == "replication_stall") {
    for (int m : members_of(f.nodes)) {
      Member& mm = members_[static_cast<size_t>(m)];
      std::fill(mm.stalled.begin(), mm.stalled.end(), false);
      for (size_t r = 0; r < mm.stalled.size(); ++r) ScheduleReplication(m, static_cast<int>(r));
    }
  } else if (name == "client_pause") {
    for (int k : f.clients) ResumeClient(k);
  } else if (name == "slot_migration") {
    const int slot = af.slot, from = af.from, to = af.to, v = af.slot_voter;
    if (slot >= 0) {
      data_faults_.emplace_back(now_, now_);
      if (members_[static_cast<size_t>(from)].node->MoveKeys(
              slot, *members_[static_cast<size_t>(to)].node, 1 << 30, NodeMs(from)) > 0) {
        AfterWrite(from);
        AfterWrite(to);
        ObserveMovedKeys(from, to);
      }
      members_[static_cast<size_t>(from)].node->EndMigration(slot);
      members_[static_cast<size_t>(to)].node->EndImport(slot);
      voters_[static_cast<size_t>(v)].slot_owner[static_cast<size_t>(slot)] = to;
      SyncClusterPeers(v);  // the third master learns the new owner too
    }
  }
  out_.injected[af.injected_index].end = now_;
  last_heal_ = std::max(last_heal_, now_);
  Record(NemesisEvent(*af.kind, f, "healed", chaos::FaultPhase::kStop));
  ReleaseHeld();
}

}  // namespace redlock::sim
