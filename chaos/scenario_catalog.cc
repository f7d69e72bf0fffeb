// The scenario catalog of redlock-chaos (see chaos/README.md for the why of
// each expected verdict).

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "chaos/cleanup.h"
#include "chaos/scenarios.h"

namespace redlock::chaos {
namespace {

using absl::Milliseconds;
using absl::Seconds;

// ---- Client templates ---------------------------------------------------------------

// The general workload: two resources, short uses, one use per lease.
ClientConfig Std(int64_t ttl_ms = 1000) {
  ClientConfig c;
  c.resources = {"r0", "r1"};
  c.ttl_ms = ttl_ms;
  c.use_ms = 30;
  c.uses_per_lease = 1;
  c.guard_ms = 100;
  c.think_ms = 5;
  c.retry_ms = 20;
  c.node_timeout_ms = 50;
  return c;
}

// One hot resource and long uses: the lock is nearly always held.
ClientConfig Hot(int64_t use_ms, int64_t ttl_ms = 1000) {
  ClientConfig c = Std(ttl_ms);
  c.resources = {"r"};
  c.use_ms = use_ms;
  return c;
}

// Overlapping-partition holders: ttl 2 s, one long use, and the lease is
// held to its very end (never released early), so the other side can only
// take the lock once the lease has run out, or when a fault lets it in.
ClientConfig Holder() {
  ClientConfig c;
  c.resources = {"r"};
  c.ttl_ms = 2000;
  c.use_ms = 600;
  c.uses_per_lease = 1;
  c.guard_ms = 100;
  c.think_ms = 0;
  c.retry_ms = 15;
  c.node_timeout_ms = 50;
  c.release = false;
  c.inspect_nodes = true;
  return c;
}

std::vector<ClientConfig> Many(int n, const ClientConfig& c) {
  return std::vector<ClientConfig>(static_cast<size_t>(n), c);
}

ClientConfig Variant(ClientConfig c, ClientVariant v) {
  c.variant = v;
  return c;
}

ClientConfig Fenced(ClientConfig c) {
  c.fencing = true;
  return c;
}

struct OverlapNodes {
  bool aof = false;              // appendonly yes, appendfsync always
  bool node_clock_shim = false;  // nodes under the clock shim
};

// c1 sees {n0,n1,n2}, c2 sees {n2,n3,n4}: n2 is the only node both
// majorities share, so mutual exclusion rests on n2 alone.
ScenarioSetup Overlap(OverlapNodes nodes) {
  ScenarioSetup s;
  s.nodes = 5;
  s.aof = nodes.aof;
  s.node_clock_shim = nodes.node_clock_shim;
  s.topology = Topology::kPerClientProxies;
  s.views = {{0, 1, 2}, {2, 3, 4}};
  s.clients = {Holder(), Holder()};
  s.budget = Seconds(11);
  return s;
}

ScenarioSetup Plain(Topology t, std::vector<ClientConfig> clients,
                    absl::Duration budget = Seconds(8)) {
  ScenarioSetup s;
  s.topology = t;
  s.clients = std::move(clients);
  s.budget = budget;
  return s;
}

Expectation Found(std::vector<int> all, std::vector<int> clean = {}, int64_t min_grants = 2) {
  Expectation e;
  e.violated_all = std::move(all);
  e.clean = std::move(clean);
  e.min_grants = min_grants;
  return e;
}

Expectation FoundAny(std::vector<int> any, std::vector<int> clean = {}, int64_t min_grants = 2) {
  Expectation e;
  e.violated_any = std::move(any);
  e.clean = std::move(clean);
  e.min_grants = min_grants;
  return e;
}

// ---- Nemesis building blocks -------------------------------------------------------------

using Fault = std::function<absl::Status(Run&, const Marker&)>;
using Done = std::function<bool(Run&)>;

// Up to `tries` times: wait for a `kind` marker (from `client`, -1 any),
// wait `delay`, apply `fault`, let it play out for `settle`; stop early once
// `done` says the expected violation is in the history.
absl::Status OnMarker(Run& run, const std::string& kind, int client, int tries,
                      absl::Duration settle, absl::Duration delay, const Fault& fault,
                      const Done& done = nullptr) {
  for (int i = 0; i < tries && run.Active(); ++i) {
    int64_t seq = run.MarkerSeq();
    std::optional<Marker> m = run.WaitMarker(kind, client, run.Remaining(), seq);
    if (!m.has_value()) break;
    if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
    absl::Status s = fault(run, *m);
    if (!s.ok()) return s;
    run.Sleep(settle);
    if (done && done(run)) break;
  }
  return absl::OkStatus();
}

Done UntilAll(std::vector<int> props) {
  return [props](Run& run) {
    for (int p : props) {
      if (!run.Found(p)) return false;
    }
    return true;
  };
}

Done UntilAny(std::vector<int> props) {
  return [props](Run& run) { return run.FoundAny(props); };
}

// Pauses client k for `d` (always resumed, whatever the budget).
absl::Status PauseClientFor(Run& run, int k, absl::Duration d) {
  absl::Status s = run.PauseClient(k);
  if (!s.ok()) return absl::OkStatus();  // it may have exited: nothing to pause
  InterruptibleSleep(d);
  return run.ResumeClient(k);
}

// `count` distinct random nodes.
std::vector<int> PickNodes(Run& run, int count) {
  std::vector<int> all(static_cast<size_t>(run.num_nodes()));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), run.rng());
  all.resize(static_cast<size_t>(std::min<int>(count, run.num_nodes())));
  return all;
}

absl::Duration Ttl(Run& run) { return Milliseconds(run.ttl_ms()); }

// ---- Bodies -------------------------------------------------------------------------------

absl::Status NoFaults(Run& run) {
  run.Sleep(run.Remaining());
  return absl::OkStatus();
}

absl::Status ClockJumpWithinDrift(Run& run) {
  // Forward movements of n2's clock by 55 % of the drift allowance
  // (ttl * 0.01 + 2 ms): jumps, then a strobe between two offsets.
  absl::Duration small = DriftAllowance(run.ttl_ms(), 0.01) * 0.55;
  for (int i = 0; i < 4 && run.Active(); ++i) {
    if (!run.WaitMarker("grant", -1, run.Remaining(), run.MarkerSeq())) break;
    absl::Status s = run.nodes().ClockJump(2, small);
    if (!s.ok()) return s;
    run.Sleep(Ttl(run) + Milliseconds(300));
    s = run.nodes().ClockJump(2, -small);  // back: keys live longer, safe
    if (!s.ok()) return s;
    if (!run.WaitMarker("grant", -1, run.Remaining(), run.MarkerSeq())) break;
    absl::Duration cur = run.nodes().clock(2)->state().realtime;
    s = run.nodes().ClockStrobe(2, cur, cur + small, Milliseconds(7));
    if (!s.ok()) return s;
    run.Sleep(Ttl(run) + Milliseconds(300));
    s = run.nodes().ClockSteady(2);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status NodePause(Run& run) {
  while (run.Active()) {
    std::vector<int> victims = PickNodes(run, static_cast<int>(run.Uniform(1, 2)));
    for (int n : victims) {
      absl::Status s = run.nodes().Pause(n);
      if (!s.ok()) return s;
    }
    InterruptibleSleep(run.UniformMs(run.ttl_ms() * 11 / 10, run.ttl_ms() * 16 / 10));
    for (int n : victims) {
      absl::Status s = run.nodes().Resume(n);
      if (!s.ok()) return s;
    }
    run.Sleep(Milliseconds(300));
  }
  return absl::OkStatus();
}

// All replies slowed by 60 ms; when the lock looks free (the last grant
// was released and no other client has tried since) and client 0 starts an
// attempt, it is stopped 10 ms later (its SETs are out, the replies on their
// way) for 1.2 ttl. The library must notice the elapsed time; no-elapsed
// does not. Tries again when the paused attempt was refused anyway.
absl::Status PauseInFlight(Run& run, const Done& done) {
  for (int i = 0; i < run.num_nodes(); ++i) {
    absl::Status s = run.ProxyFault(i, Direction::kToClient, FaultSpec::Latency(Milliseconds(60)));
    if (!s.ok()) return s;
  }
  int granted = 0, expired = 0, refused = 0;
  for (int i = 0; i < 10 && run.Active(); ++i) {
    bool free = false, others = false;
    std::optional<Marker> m =
        run.WaitMarkerIf(run.MarkerSeq(), run.Remaining(), [&](const Marker& mk) {
          if (mk.kind == "release") {
            free = true;
            others = false;
          } else if (mk.kind == "grant") {
            free = false;
          } else if (mk.kind == "invoke" && mk.client != 0) {
            others = true;
          } else if (mk.kind == "invoke" && mk.client == 0) {
            return free && !others;
          }
          return false;
        });
    if (!m.has_value()) break;
    int64_t seq = run.MarkerSeq();
    absl::SleepFor(Milliseconds(10));
    absl::Status s = PauseClientFor(run, 0, Ttl(run) * 1.2);
    if (!s.ok()) return s;
    std::optional<Marker> outcome = run.WaitMarkerIf(seq, Seconds(3), [&](const Marker& mk) {
      return mk.client == 0 && mk.op == m->op && (mk.kind == "grant" || mk.kind == "fail");
    });
    if (outcome.has_value() && outcome->kind == "grant") {
      ++granted;
      run.Sleep(Milliseconds(1000));
      if (done && done(run)) break;
    } else {
      // DEADLINE_EXCEEDED: granted by a quorum, refused by the elapsed check.
      ++(outcome.has_value() && outcome->detail == "DEADLINE_EXCEEDED" ? expired : refused);
      run.Sleep(Milliseconds(100));
    }
  }
  run.Note(absl::StrCat("paused attempts: ", granted, " granted, ", expired,
                        " refused for lack of validity (DEADLINE_EXCEEDED), ", refused,
                        " refused otherwise"));
  return absl::OkStatus();
}

// Client 0 finished its last use and waits 60 ms before releasing: it is
// stopped there for 1.5 ttl, so its release arrives after the lease expired
// and (most likely) while another client holds the lock.
absl::Status PauseBeforeRelease(Run& run, const Done& done) {
  return OnMarker(
      run, "use_end", 0, 4, Milliseconds(1000), absl::ZeroDuration(),
      [](Run& r, const Marker&) { return PauseClientFor(r, 0, Ttl(r) * 1.5); }, done);
}

absl::Status ClientClockJumps(Run& run) {
  while (run.Active()) {
    int k = static_cast<int>(run.Uniform(0, static_cast<uint64_t>(run.num_clients() - 1)));
    absl::Duration wall = run.UniformMs(1000, 5000) * (run.Uniform(0, 1) ? 1 : -1);
    absl::Duration mono = run.Uniform(0, 3) == 0 ? run.UniformMs(100, 800) : absl::ZeroDuration();
    absl::Status s = run.ClientClockJump(k, wall, mono);
    if (!s.ok()) return s;
    run.Sleep(Milliseconds(400));
  }
  return absl::OkStatus();
}

// ---- Partitions (nft in a private namespace) ----

absl::Status PartitionCycle(Run& run, const std::function<PartitionSpec(Run&)>& shape) {
  while (run.Active()) {
    absl::Status s = run.partitioner()->Apply(shape(run));
    if (!s.ok()) return s;
    run.Sleep(Milliseconds(1500));
    s = run.partitioner()->Heal();
    if (!s.ok()) return s;
    run.Sleep(Milliseconds(500));
  }
  return absl::OkStatus();
}

PartitionSpec Merge(std::string name, const std::vector<PartitionSpec>& parts) {
  PartitionSpec out;
  out.name = std::move(name);
  for (const auto& p : parts) {
    out.cuts.insert(out.cuts.end(), p.cuts.begin(), p.cuts.end());
    // The parts' shapes: the name is what the nemesis log records.
    absl::StrAppend(&out.name, &p == &parts.front() ? ": " : "; ", p.name);
  }
  return out;
}

// ---- Proxy faults ----

absl::Status LatencyMinority(Run& run) {
  while (run.Active()) {
    std::vector<int> slow = PickNodes(run, 2);
    for (int n : slow) {
      absl::Status s =
          run.ProxyFaultBoth(n, FaultSpec::Latency(Milliseconds(30), Milliseconds(40)));
      if (!s.ok()) return s;
    }
    run.Sleep(Seconds(2));
    for (int n : slow) run.ProxyClear(n);
  }
  return absl::OkStatus();
}

absl::Status LatencyNearTtl(Run& run) {
  for (int n = 0; n < run.num_nodes(); ++n) {
    absl::Status s =
        run.ProxyFaultBoth(n, FaultSpec::Latency(Milliseconds(330), Milliseconds(100)));
    if (!s.ok()) return s;
  }
  run.Sleep(run.Remaining());
  return absl::OkStatus();
}

absl::Status LateDelivery(Run& run) {
  while (run.Active()) {
    std::vector<int> held = PickNodes(run, static_cast<int>(run.Uniform(1, 2)));
    uint64_t r = run.Uniform(0, 9);
    for (int n : held) {
      absl::Status s = r < 7   ? run.ProxyFault(n, Direction::kToServer, FaultSpec::Hold())
                       : r < 9 ? run.ProxyFault(n, Direction::kToClient, FaultSpec::Hold())
                               : run.ProxyFaultBoth(n, FaultSpec::Hold());
      if (!s.ok()) return s;
    }
    InterruptibleSleep(run.UniformMs(200, 1500));
    for (int n : held) run.ProxyClear(n);  // delivers what was held, in order
    run.Sleep(Milliseconds(300));
  }
  return absl::OkStatus();
}

absl::Status AckLossAndResets(Run& run) {
  for (int phase = 0; run.Active(); ++phase) {
    switch (phase % 4) {
      case 0:
      case 1: {  // ack loss on a minority, then on a majority
        std::vector<int> lost = PickNodes(run, phase % 4 == 0 ? 2 : 3);
        for (int n : lost) {
          absl::Status s = run.ProxyFault(n, Direction::kToClient, FaultSpec::BlackHole());
          if (!s.ok()) return s;
        }
        InterruptibleSleep(phase % 4 == 0 ? Milliseconds(1000) : Milliseconds(700));
        for (int n : lost) run.ProxyClear(n);
        break;
      }
      case 2:  // RST on every connection of two nodes
        for (int n : PickNodes(run, 2)) run.ProxyReset(n);
        break;
      case 3: {  // a node that resets every new connection for a while
        int n = PickNodes(run, 1)[0];
        absl::Status s = run.ProxyFault(n, Direction::kToServer, FaultSpec::Reset());
        if (!s.ok()) return s;
        InterruptibleSleep(Milliseconds(500));
        run.ProxyClear(n);
        break;
      }
    }
    run.Sleep(Milliseconds(300));
  }
  return absl::OkStatus();
}

// ---- Random mixes ----

absl::Status MixSafe(Run& run) {
  const int64_t ttl = run.ttl_ms();
  absl::Duration small = DriftAllowance(ttl, 0.01) * 0.5;
  std::vector<std::string> plan;
  while (run.Active()) {
    uint64_t pick = run.Uniform(0, 10);
    int n = PickNodes(run, 1)[0];
    absl::Status s;
    switch (pick) {
      case 0:
        s = run.nodes().RestartNow(n);  // AOF always: the keys survive
        break;
      case 1:
        s = run.nodes().RestartDelayed(n, run.UniformMs(200, 1500));
        break;
      case 2:
        s = run.nodes().Pause(n);
        if (s.ok()) {
          InterruptibleSleep(run.UniformMs(200, 1500));
          s = run.nodes().Resume(n);
        }
        break;
      case 3: {  // strobe within half the drift allowance, around the current offset
        absl::Duration cur = run.nodes().clock(n)->state().realtime;
        s = run.nodes().ClockStrobe(n, cur, cur + small, run.UniformMs(3, 20));
        if (s.ok()) {
          InterruptibleSleep(run.UniformMs(300, 1200));
          s = run.nodes().ClockSteady(n);
        }
        break;
      }
      case 4:
        s = run.nodes().ClockJump(n, -run.UniformMs(300, 3000));
        break;
      case 5:
      case 6: {
        std::vector<int> ns = PickNodes(run, static_cast<int>(run.Uniform(1, 2)));
        for (int m : ns) {
          FaultSpec spec = pick == 5 ? FaultSpec::Latency(run.UniformMs(10, 60), Milliseconds(20))
                                     : FaultSpec::BlackHole();
          s = pick == 5 ? run.ProxyFaultBoth(m, spec)
                        : run.ProxyFault(m, Direction::kToServer, spec);
          if (!s.ok()) break;
        }
        InterruptibleSleep(run.UniformMs(300, 1000));
        for (int m : ns) run.ProxyClear(m);
        break;
      }
      case 7:
        s = run.ProxyFault(n, run.Uniform(0, 1) ? Direction::kToServer : Direction::kToClient,
                           FaultSpec::Hold());
        if (s.ok()) {
          InterruptibleSleep(run.UniformMs(200, 1200));
          run.ProxyClear(n);
        }
        break;
      case 8:
        s = run.ProxyFault(n, Direction::kToClient, FaultSpec::BlackHole());
        if (s.ok()) {
          InterruptibleSleep(run.UniformMs(200, 800));
          run.ProxyClear(n);
        }
        break;
      case 9:
        run.ProxyReset(n);
        break;
      default: {  // a short client pause, well inside the guard time
        int k = static_cast<int>(run.Uniform(0, static_cast<uint64_t>(run.num_clients() - 1)));
        s = PauseClientFor(run, k, run.UniformMs(10, 60));
        break;
      }
    }
    if (!s.ok()) return s;
    plan.push_back(std::to_string(pick));
    run.Sleep(run.UniformMs(100, 400));
  }
  run.Note(absl::StrCat("mix plan (seeded): ", absl::StrJoin(plan, " ")));
  return absl::OkStatus();
}

absl::Status MixUnsafe(Run& run) {
  std::vector<std::string> plan;
  for (int i = 0; i < 12 && run.Active(); ++i) {
    uint64_t pick = run.Uniform(0, 2);
    plan.push_back(pick == 0   ? "restart-majority"
                   : pick == 1 ? "clock-jump-majority"
                               : "client-pause-cs");
    absl::Status s;
    if (pick == 2) {
      s = OnMarker(run, "use_read", -1, 1, Milliseconds(500), absl::ZeroDuration(),
                   [](Run& r, const Marker& m) { return PauseClientFor(r, m.client, Ttl(r) * 2); });
    } else {
      s = OnMarker(run, "grant", -1, 1, Ttl(run) + Milliseconds(300), Milliseconds(5),
                   [pick](Run& r, const Marker&) {
                     for (int n : PickNodes(r, 3)) {
                       absl::Status st =
                           pick == 0 ? r.nodes().RestartNow(n) : r.nodes().ClockJump(n, Ttl(r) * 3);
                       if (!st.ok()) return st;
                     }
                     return absl::OkStatus();
                   });
    }
    if (!s.ok()) return s;
    if (run.FoundAny({kS1, kS2, kS3})) break;
  }
  run.Note(absl::StrCat("mix plan (seeded): ", absl::StrJoin(plan, " ")));
  return absl::OkStatus();
}

absl::Status PartialGrants(Run& run) {
  // Normal work, then ack loss on a majority: every attempt of that second
  // is a failure whose SETs executed on all five nodes.
  run.Sleep(Seconds(2));
  std::vector<int> lost = PickNodes(run, 3);
  for (int n : lost) {
    absl::Status s = run.ProxyFault(n, Direction::kToClient, FaultSpec::BlackHole());
    if (!s.ok()) return s;
  }
  InterruptibleSleep(Seconds(1));
  for (int n : lost) run.ProxyClear(n);
  run.Sleep(Seconds(1));
  return absl::OkStatus();
}

// Kleppmann's jump: right after a grant, n2's wall clock leaps 3 ttl ahead
// (its key expires at once), until two holders overlap.
absl::Status KleppmannJump(Run& run) {
  return OnMarker(
      run, "grant", -1, 4, Ttl(run) + Milliseconds(500), absl::ZeroDuration(),
      [](Run& r, const Marker&) { return r.nodes().ClockJump(2, Ttl(r) * 3); }, UntilAll({kS1}));
}

// The same scenario on TLS nodes (rediss://): the fault proxies and the nft
// partitions act on the TCP connections under TLS, the nodes restart with
// their certificates, and the verdict must be the same.
void AddTlsVariant(std::vector<Scenario>* c, const std::string& name) {
  auto it = std::find_if(c->begin(), c->end(), [&](const Scenario& s) { return s.name == name; });
  if (it == c->end()) return;
  Scenario t = *it;
  t.name = name + "-tls";
  t.config = "TLS nodes; " + t.config;
  t.summary = absl::StrCat("As ", name, ", with every node on a TLS port only: same verdict.");
  t.quick = false;
  t.setup.tls = true;
  c->push_back(std::move(t));
}

// ---- Replicated nodes (chaos/replication.h) ----

// Holders for failover scenarios: the lease is held to its end, long enough
// (ttl 8 s) to outlast a Sentinel failover (2-4 s with a one second
// down-after: Sentinel pings once a second, then waits for the promoted
// replica's next INFO) and the clients' reconnection. The node timeout
// leaves room for the replicas' acknowledgement on a busy machine.
ClientConfig FailoverHolder(int64_t ttl_ms = 8000) {
  ClientConfig c = Holder();
  c.ttl_ms = ttl_ms;
  c.node_timeout_ms = 200;
  return c;
}

// Short leases, released after each use: both sides of a split grant often.
ClientConfig SplitWorker() {
  ClientConfig c = Hot(50, 2000);
  c.node_timeout_ms = 200;
  return c;
}

// The durability vote on: one replica must confirm every grant.
ClientConfig Durable(ClientConfig c) {
  c.durability_replicas = 1;
  c.durability_timeout_ms = 100;
  return c;
}

// Every node a master with one replica, Sentinel watching; clients reach the
// nodes through proxies of their own, which follow failovers.
// Clean, with a lower bar for "something was tested": holders keep an 8 s
// lease to its end, so a run makes only a few grants.
Expectation CleanFew() {
  Expectation e = ExpectClean();
  e.min_grants = 2;
  return e;
}

ScenarioSetup Replicated(int nodes, std::vector<ClientConfig> clients, absl::Duration budget,
                         int stalled = 0) {
  ScenarioSetup s;
  s.nodes = nodes;
  s.replicas = 1;
  s.sentinel = true;
  s.stalled = stalled;
  s.topology = Topology::kPerClientProxies;
  s.clients = std::move(clients);
  s.budget = budget;
  return s;
}

std::vector<int> AllClients(Run& run) {
  std::vector<int> all(static_cast<size_t>(run.num_clients()));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

std::string NodeNames(const std::vector<int>& nodes) {
  std::vector<std::string> names;
  for (int n : nodes) names.push_back(absl::StrCat("n", n));
  return absl::StrJoin(names, ",");
}

// The masters of `nodes` die with their replication links cut (whatever the
// links held is lost), Sentinel promotes their replicas, every client follows,
// and the old masters come back, empty, as replicas of the new ones (so the
// new masters can confirm writes again).
absl::Status FailOver(Run& run, const std::vector<int>& nodes) {
  ReplicatedNodes& rep = *run.replication();
  for (int n : nodes) {
    rep.CutLink(n);
    absl::Status s = run.nodes().Kill(n);
    if (!s.ok()) return s;
  }
  for (int n : nodes) {
    absl::StatusOr<std::string> now = rep.AwaitSentinelFailover(n, Seconds(20));
    if (!now.ok()) return now.status();
  }
  for (int n : nodes) {
    absl::Status s = run.FollowMaster(n, AllClients(run));
    if (!s.ok()) return s;
  }
  for (int n : nodes) {
    absl::Status s = rep.RejoinAsReplica(n);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Sleeps up to `max`, stopping early once `done` holds (checked every 250 ms).
void WatchFor(Run& run, absl::Duration max, const Done& done) {
  const absl::Time end = absl::Now() + max;
  for (int i = 0; i < 400 && run.Active() && absl::Now() < end; ++i) {
    run.Sleep(std::min(Milliseconds(250), end - absl::Now()));
    if (done && done(run)) break;
  }
}

// The failover case. Replication has been stalled on the first
// setup().stalled nodes since before the clients started; at the first grant
// their masters die and their replicas (which never got the grant's keys)
// are promoted. The other client then tries the lock. With the durability
// vote no grant can count a stalled node: when none comes within a second
// and a half, replication is released, and the masters die right after the
// next (confirmed) grant instead.
absl::Status LoseAfterGrant(Run& run, const Done& done) {
  ReplicatedNodes& rep = *run.replication();
  std::vector<int> targets(static_cast<size_t>(run.setup().stalled));
  std::iota(targets.begin(), targets.end(), 0);
  auto grant_after = [&run](int64_t seq, absl::Duration timeout) {
    return run.WaitMarker("grant", -1, timeout, seq);
  };
  // From the very first marker: the stall predates every attempt.
  std::optional<Marker> grant = grant_after(0, Milliseconds(1500));
  if (!grant.has_value()) {
    run.Note(absl::StrCat("no grant while replication was stalled on ", NodeNames(targets),
                          ": released, the masters die after the next grant"));
    const int64_t seq = run.MarkerSeq();
    for (int n : targets) rep.Resume(n);
    grant = grant_after(seq, Seconds(3));
  }
  if (grant.has_value()) {
    run.Note(absl::StrCat(Run::ClientName(grant->client), "'s grant ", grant->op, ", then ",
                          NodeNames(targets), " failed over"));
  } else {
    run.Note("no grant to lose: the failover went ahead anyway");
  }
  absl::Status s = FailOver(run, targets);
  if (!s.ok()) return s;
  // Long enough for the other client to try throughout the lease.
  WatchFor(run, Ttl(run), done);
  return absl::OkStatus();
}

// A split brain: node 0's master is cut from its replica, from Sentinel and
// from c2, but still serves c1; Sentinel promotes the replica and c2 follows.
absl::Status SplitBrainFailover(Run& run, const Done& done) {
  ReplicatedNodes& rep = *run.replication();
  run.Sleep(Milliseconds(800));
  rep.Isolate(0, {Run::ClientName(1)});
  run.link(1, 0)->Down();
  absl::StatusOr<std::string> now = rep.AwaitSentinelFailover(0, Seconds(20));
  if (!now.ok()) return now.status();
  absl::Status s = run.FollowMaster(0, {1});
  if (!s.ok()) return s;
  WatchFor(run, Seconds(4), done);
  return absl::OkStatus();
}

void AddReplicated(std::vector<Scenario>& c) {
  const std::string one = "1 master + 1 replica, Sentinel";
  c.push_back(
      {.name = "single-master-failover",
       .config = one + ": master killed after a grant",
       .summary =
           "The case every article on Redis locks starts from: one master with an asynchronous "
           "replica, watched by Sentinel. Replication lags (held on its link); right after a "
           "grant the master is killed, Sentinel promotes the replica, which never got the key, "
           "and the clients follow it. The other client takes the lock the first still holds. "
           "Violation expected.",
       .quick = true,
       .expect = Found({kS1}),
       .setup = Replicated(1, Many(2, FailoverHolder()), Seconds(14), 1),
       .body = [](Run& run) { return LoseAfterGrant(run, UntilAll({kS1})); }});
  c.push_back(
      {.name = "single-master-failover-durable",
       .config = "as single-master-failover, durability vote (WAIT 1)",
       .summary =
           "The same failover with the durability vote: while replication lags, no grant can be "
           "confirmed (the node votes no and removes its key); once it catches up, the next "
           "grant is on the replica before it counts, so the promoted replica still holds it and "
           "the other client is refused. Clean.",
       .expect = CleanFew(),
       .setup = Replicated(1, Many(2, Durable(FailoverHolder())), Seconds(15), 1),
       .body = [](Run& run) { return LoseAfterGrant(run, nullptr); }});
  c.push_back(
      {.name = "split-brain",
       .config = one + ": old master cut from replica+Sentinel",
       .summary =
           "A split brain: the master is partitioned from its replica, from Sentinel and from c2, "
           "but c1 still reaches it. Sentinel promotes the replica and c2 follows: two masters "
           "for one node, both granting. When the partition heals, Sentinel turns the old master "
           "into a replica and its writes are gone. Violation expected.",
       .quick = true,
       .expect = Found({kS1}),
       .setup = Replicated(1, Many(2, SplitWorker()), Seconds(10)),
       .body = [](Run& run) { return SplitBrainFailover(run, UntilAll({kS1})); }});
  c.push_back(
      {.name = "split-brain-durable",
       .config = "as split-brain, durability vote (WAIT 1)",
       .summary =
           "The same split with the durability vote: the isolated old master gets no replica "
           "acknowledgement, and the promoted replica has no replica of its own until the old "
           "master rejoins, so neither side can grant during the split. Clean (and unavailable "
           "while split: the price).",
       .expect = ExpectClean(),
       .setup = Replicated(1, Many(2, Durable(SplitWorker())), Seconds(10)),
       .body = [](Run& run) { return SplitBrainFailover(run, nullptr); }});

  // The same failover with clients that find the master themselves
  // (redis+sentinel://, the library's Sentinel discovery): nothing re-points
  // them; the library follows Sentinel's +switch-master.
  auto discovering = [](ScenarioSetup s) {
    s.topology = Topology::kSentinelDiscovery;
    return s;
  };
  c.push_back(
      {.name = "sentinel-discovery-failover",
       .config = "as single-master-failover, clients on redis+sentinel://",
       .summary =
           "single-master-failover with clients that know only the Sentinel and the master's "
           "name: the library asks the Sentinel where the master is and follows the failover "
           "itself. Following it faithfully does not make it safe: the promoted replica never "
           "got the key, and the other client takes the lock the first still holds. Violation "
           "expected.",
       .expect = Found({kS1}),
       .setup = discovering(Replicated(1, Many(2, FailoverHolder()), Seconds(14), 1)),
       .body = [](Run& run) { return LoseAfterGrant(run, UntilAll({kS1})); }});
  c.push_back(
      {.name = "sentinel-discovery-failover-durable",
       .config = "as sentinel-discovery-failover, durability vote (WAIT 1)",
       .summary = "The same with the durability vote: a grant counts only once the "
                  "replica has it, so the master the library follows after the "
                  "failover still holds the lock. Clean.",
       .expect = CleanFew(),
       .setup = discovering(Replicated(1, Many(2, Durable(FailoverHolder())), Seconds(15), 1)),
       .body = [](Run& run) { return LoseAfterGrant(run, nullptr); }});

  const std::string five = "N=5, each master + replica, Sentinel";
  struct Variant {
    std::string suffix;
    int failed;
    bool durable;
    bool fencing;
    Expectation expect;
    std::string what;
  };
  const std::vector<Variant> variants = {
      {"", 1, false, false, CleanFew(),
       "one node fails over without the key: within the quorum margin, the other holders' keys "
       "on four nodes keep the lock. Clean."},
      {"-majority", 3, false, false, Found({kS1}),
       "three nodes fail over without the key: a majority forgot it, the other client gets "
       "those three. Redlock's independence assumption broken by replication. Violation "
       "expected."},
      {"-durable", 1, true, false, CleanFew(),
       "one node fails over, durability vote on: the stalled node could not confirm, so it "
       "did not count. Clean."},
      {"-majority-durable", 3, true, false, CleanFew(),
       "three nodes fail over, durability vote on: no grant can be confirmed while their "
       "replication stalls; the next grant after it catches up is on the replicas before it "
       "counts, and they keep it through the failover. Clean."},
      {"-fenced", 3, false, true, Found({kS1, kS4}),
       "three nodes fail over with fencing on: the counters are replicated asynchronously too, "
       "so the promoted replicas' counters lack the holder's token and the next holder's token "
       "repeats or goes back. Fencing tokens are not monotonic across such a failover: S1 and "
       "S4 expected."},
      {"-fenced-durable", 3, true, true, CleanFew(),
       "the same with the durability vote: a commit counts only once the replica has the "
       "counter, so the promoted replicas' counters include every confirmed token. Tokens stay "
       "monotonic. Clean."},
  };
  for (const Variant& v : variants) {
    ClientConfig holder = FailoverHolder();
    if (v.durable) holder = Durable(holder);
    if (v.fencing) holder = Fenced(holder);
    const int failed = v.failed;
    const Done done = v.expect.violated_all.empty() ? Done() : UntilAll(v.expect.violated_all);
    c.push_back(
        {.name = "redlock-replicated-failover" + v.suffix,
         .config = absl::StrCat(five, ": ", failed, failed == 1 ? " node fails" : " nodes fail",
                                " over", v.durable ? ", vote" : "", v.fencing ? ", fencing" : ""),
         .summary = absl::StrCat("Redlock over replicated nodes: ", v.what),
         .expect = v.expect,
         .setup = Replicated(5, Many(2, holder), Seconds(15), failed),
         .body = [done](Run& run) { return LoseAfterGrant(run, done); }});
  }
}

std::vector<Scenario> Build() {
  std::vector<Scenario> c;

  // ---- Baseline ----
  c.push_back({.name = "no-faults",
               .config = "N=5 direct, 3 clients x 2 resources, fencing",
               .summary =
                   "No fault at all: the baseline. Every property holds; availability is the "
                   "contention-only figure.",
               .quick = true,
               .expect = ExpectClean(),
               .setup = Plain(Topology::kDirect, Many(3, Fenced(Std())), Seconds(5)),
               .body = NoFaults});

  // ---- Node clocks (Kleppmann vs antirez) ----
  c.push_back({.name = "kleppmann-clock-jump",
               .config = "views {n0,n1,n2}|{n2,n3,n4}, n2 clock +3 ttl",
               .summary =
                   "Kleppmann's counter-example: c1 holds the lock on n0,n1,n2; n2's wall clock "
                   "jumps forward past the key's expiry; c2 (who cannot reach n0,n1) now gets "
                   "n2,n3,n4. Two holders: Redlock assumes bounded clock drift, and a jump breaks "
                   "the assumption. A violation is expected and must be found.",
               .quick = true,
               .expect = Found({kS1}),
               .setup = Overlap({.node_clock_shim = true}),
               .body = KleppmannJump});
  {
    ScenarioSetup f = Overlap({.node_clock_shim = true});
    for (auto& cl : f.clients) cl = Fenced(cl);
    c.push_back(
        {.name = "kleppmann-clock-jump-fenced",
         .config = "as kleppmann-clock-jump, fencing tokens",
         .summary =
             "The same clock jump with fencing: the two holders still overlap (S1), but c2's "
             "round 1 reads n2's counter after c1 confirmed its token there, so c2's token is "
             "higher; its fenced read raises the fence and c1's late write is refused. No "
             "lost update (S3), no equal or stale token accepted (S4).",
         .quick = true,
         .expect = Found({kS1}, {kS3, kS4, kS5}),
         .setup = f,
         .body = KleppmannJump});
  }
  c.push_back({.name = "clock-jump-within-drift",
               .config = "views {n0,n1,n2}|{n2,n3,n4}, n2 +-0.55 drift",
               .summary =
                   "Same overlapping views, but n2's clock only moves forward by 55 % of the drift "
                   "allowance (ttl*0.01+2ms), by jumps and by a strobe. The validity already "
                   "subtracts that much, so the lease ends before n2's key: clean (antirez's "
                   "argument: bounded drift is what Redlock assumes).",
               .quick = false,
               .expect = ExpectClean(),
               .setup = Overlap({.node_clock_shim = true}),
               .body = ClockJumpWithinDrift});
  c.push_back(
      {.name = "clock-jump-beyond-drift",
       .config = "views {n0,n1,n2}|{n2,n3,n4}, n2 +4 drift",
       .summary =
           "The sharp edge of the previous scenario: n2 jumps forward by four times the drift "
           "allowance (88 ms of a 2 s ttl) right after a grant. The other side gets in a few "
           "tens of milliseconds before the holder's validity ends: a small overlap the "
           "checker must still find.",
       .quick = false,
       .expect = Found({kS1}),
       .setup = Overlap({.node_clock_shim = true}),
       .body = [](Run& run) {
         return OnMarker(
             run, "grant", -1, 4, Ttl(run) + Milliseconds(500), absl::ZeroDuration(),
             [](Run& r, const Marker&) {
               return r.nodes().ClockJump(2, DriftAllowance(r.ttl_ms(), 0.01) * 4);
             },
             UntilAll({kS1}));
       }});
  c.push_back({.name = "clock-jump-backward",
               .config = "views {n0,n1,n2}|{n2,n3,n4}, n2 clock -1.5 ttl",
               .summary =
                   "n2's clock jumps back while a lease is held: its key lives longer, which only "
                   "delays the next holder (availability), never lets two in: clean.",
               .quick = false,
               .expect = ExpectClean(),
               .setup = Overlap({.node_clock_shim = true}),
               .body = [](Run& run) {
                 return OnMarker(
                     run, "grant", -1, 3, Ttl(run) * 2, absl::ZeroDuration(),
                     [](Run& r, const Marker&) { return r.nodes().ClockJump(2, -Ttl(r) * 1.5); });
               }});

  // ---- Restarts ----
  c.push_back(
      {.name = "restart-no-persistence",
       .config = "views {n0,n1,n2}|{n2,n3,n4}, kill -9 n2 + restart",
       .summary = "Kleppmann's restart case: c1 holds on n0,n1,n2; n2 is killed and restarted at "
                  "once without persistence, forgetting the key; c2 gets n2,n3,n4. Violation "
                  "expected.",
       .quick = true,
       .expect = Found({kS1}),
       .setup = Overlap({}),
       .body = [](Run& run) {
         return OnMarker(
             run, "grant", -1, 4, Ttl(run) + Milliseconds(500), absl::ZeroDuration(),
             [](Run& r, const Marker&) { return r.nodes().RestartNow(2); }, UntilAll({kS1}));
       }});
  {
    ScenarioSetup s = Overlap({.aof = true});
    c.push_back(
        {.name = "restart-aof-always",
         .config = "views overlap, AOF always, kill -9 n2 + restart",
         .summary =
             "The same kill and immediate restart with appendonly yes + appendfsync always: "
             "Redis fsyncs the SET before it replies, so the restarted n2 still holds the key "
             "(with its absolute expiry): clean.",
         .quick = true,
         .expect = ExpectClean(),
         .setup = s,
         .body = [](Run& run) {
           return OnMarker(run, "grant", -1, 4, Ttl(run) + Milliseconds(500), absl::ZeroDuration(),
                           [](Run& r, const Marker&) { return r.nodes().RestartNow(2); });
         }});
  }
  c.push_back(
      {.name = "restart-delayed",
       .config = "views overlap, no persistence, n2 down 1.25 ttl",
       .summary = "antirez's answer to the restart case: a node that restarts empty only after a "
                  "ttl cannot help a second client while the first lease is still valid: clean.",
       .quick = false,
       .expect = ExpectClean(),
       .setup = Overlap({}),
       .body = [](Run& run) {
         return OnMarker(
             run, "grant", -1, 3, Milliseconds(500), absl::ZeroDuration(),
             [](Run& r, const Marker&) { return r.nodes().RestartDelayed(2, Ttl(r) * 1.25); });
       }});
  c.push_back({.name = "restart-amnesia",
               .config = "views overlap, AOF, n2 loses its AOF tail",
               .summary =
                   "Power loss: AOF is on, but n2 restarts with the tail of its log (from the "
                   "holder's SET on) cut off, as a disk that had not flushed would. The key is "
                   "forgotten like without persistence: violation expected.",
               .quick = false,
               .expect = Found({kS1}),
               .setup = Overlap({.aof = true}),
               .body = [](Run& run) {
                 return OnMarker(
                     run, "grant", -1, 4, Ttl(run) + Milliseconds(500), absl::ZeroDuration(),
                     [](Run& r, const Marker& m) {
                       AmnesiaSpec spec;
                       spec.mode = AmnesiaSpec::Mode::kSinceLastWriteOfKey;
                       spec.key = m.resource;
                       absl::Status s = r.nodes().RestartAmnesia(2, spec);
                       if (absl::IsNotFound(s)) {
                         r.Note(absl::StrCat("amnesia: ", s.ToString()));
                         return absl::OkStatus();
                       }
                       return s;
                     },
                     UntilAll({kS1}));
               }});

  // ---- Pauses ----
  c.push_back({.name = "node-pause",
               .config = "N=5 direct, SIGSTOP 1-2 nodes for 1.1-1.6 ttl",
               .summary =
                   "Nodes frozen longer than the ttl: requests wait in their sockets and run late "
                   "(SET, then the release queued behind it on the same connection); keys expire "
                   "by the wall clock meanwhile. Clean.",
               .quick = false,
               .expect = ExpectClean(),
               .setup = Plain(Topology::kDirect, Many(3, Std())),
               .body = NodePause});
  {
    ScenarioSetup s = Plain(Topology::kSharedProxies, Many(3, Hot(200)), Seconds(12));
    for (auto& cl : s.clients) {
      cl.node_timeout_ms = 200;
      cl.think_ms = 50;
      cl.retry_ms = 150;  // the others back off, so c1 (retrying at once) wins free locks
    }
    s.clients[0].retry_ms = 5;
    // c1's node deadline outlasts the pause, so the late replies count as
    // grants and the elapsed-time check is what must refuse the lease.
    s.clients[0].node_timeout_ms = 1500;
    c.push_back(
        {.name = "client-pause-in-flight",
         .config = "proxies +60ms replies; c1 stopped mid-acquire",
         .summary = "c1 is stopped (SIGSTOP) 10 ms into an attempt made while the lock looked "
                    "free, its replies in flight, for 1.2 ttl. When it resumes the replies say OK, "
                    "but the attempt took longer than the "
                    "ttl: the library's elapsed-time check refuses the lease. Clean.",
         .quick = false,
         .expect = ExpectClean(),
         .setup = s,
         .body = [](Run& run) { return PauseInFlight(run, nullptr); }});
    ScenarioSetup b = s;
    b.clients[0] = Variant(b.clients[0], ClientVariant::kNoElapsedCheck);
    c.push_back({.name = "broken-no-elapsed",
                 .config = "as client-pause-in-flight, c1 = no-elapsed",
                 .summary =
                     "The same pause with a client that computes validity as ttl - drift without "
                     "subtracting the elapsed time: it believes it holds a lock whose keys expired "
                     "while it was stopped. Must be caught.",
                 .quick = true,
                 .expect = FoundAny({kS1, kS3}),
                 .setup = b,
                 .body = [](Run& run) {
                   return PauseInFlight(run, UntilAny({kS1, kS3}));
                 }});
  }
  {
    ScenarioSetup s = Plain(Topology::kDirect, Many(3, Hot(100)));
    c.push_back(
        {.name = "client-pause-in-cs",
         .config = "3 clients, 1 resource, pause holder 2 ttl after read",
         .summary =
             "Kleppmann's GC pause: a holder is stopped between reading the counter and "
             "writing it back, for twice the ttl. Its lease expires, another client takes the "
             "lock and increments, the paused one writes a stale value. No lock service can "
             "prevent this without fencing: S1 and S3 violations expected.",
         .quick = true,
         .expect = Found({kS1, kS3}),
         .setup = s,
         .body = [](Run& run) {
           return OnMarker(
               run, "use_read", -1, 3, Milliseconds(800), absl::ZeroDuration(),
               [](Run& r, const Marker& m) { return PauseClientFor(r, m.client, Ttl(r) * 2); },
               UntilAll({kS1, kS3}));
         }});
    ScenarioSetup f = s;
    for (auto& cl : f.clients) cl = Fenced(cl);
    c.push_back(
        {.name = "client-pause-in-cs-fenced",
         .config = "as client-pause-in-cs, fencing tokens",
         .summary =
             "The same pause, with fencing: the newer holder's fenced read raises the fence, "
             "so the paused holder's late write is refused (accepted=false). The hold "
             "intervals still overlap (S1), but no update is lost (S3) and the store never "
             "accepts a stale token (S4).",
         .quick = true,
         .expect = Found({kS1}, {kS3, kS4, kS5}),
         .setup = f,
         .body = [](Run& run) {
           return OnMarker(
               run, "use_read", -1, 3, Milliseconds(800), absl::ZeroDuration(),
               [](Run& r, const Marker& m) { return PauseClientFor(r, m.client, Ttl(r) * 2); },
               UntilAll({kS1}));
         }});
  }
  {
    ScenarioSetup s = Plain(Topology::kDirect, Many(3, Hot(300)));
    s.clients[0].pre_release_ms = 60;
    c.push_back(
        {.name = "client-pause-before-release",
         .config = "c1 stopped 1.5 ttl before its release",
         .summary =
             "c1 is stopped after its last use, before it releases; the release arrives after "
             "the lease expired and another client took the lock. The compare-and-delete "
             "release leaves the new holder's key alone: clean.",
         .quick = false,
         .expect = ExpectClean(),
         .setup = s,
         .body = [](Run& run) { return PauseBeforeRelease(run, nullptr); }});
    ScenarioSetup b = s;
    b.clients[0] = Variant(b.clients[0], ClientVariant::kPlainDelRelease);
    c.push_back(
        {.name = "broken-plain-del",
         .config = "as client-pause-before-release, c1 = plain-del",
         .summary =
             "The same late release from a client that releases with DEL: it deletes the new "
             "holder's key and a third client gets in. Must be caught.",
         .quick = true,
         .expect = FoundAny({kS1, kS3}),
         .setup = b,
         .body = [](Run& run) {
           return PauseBeforeRelease(run, UntilAny({kS1, kS3}));
         }});
  }

  // ---- Client clocks ----
  {
    ScenarioSetup s = Plain(Topology::kDirect, Many(3, Std()));
    s.client_clock_shim = true;
    c.push_back(
        {.name = "client-clock-jump",
         .config = "clients under the shim: wall +-1-5 s, mono +",
         .summary =
             "The clients' wall clocks jump back and forth by seconds (and their monotonic "
             "clocks forward now and then). The library measures leases on the steady clock, "
             "so wall jumps change nothing and monotonic jumps forward only shorten leases: "
             "clean.",
         .quick = false,
         .expect = ExpectClean(),
         .setup = s,
         .body = ClientClockJumps});
    ScenarioSetup b = Plain(Topology::kDirect, Many(3, Hot(150)));
    b.client_clock_shim = true;
    b.clients[0] = Variant(b.clients[0], ClientVariant::kWallClock);
    b.clients[0].uses_per_lease = 12;
    c.push_back({.name = "broken-wall-clock",
                 .config = "c1 = wall-clock, its wall clock -3 s after a grant",
                 .summary =
                     "c1 measures validity on system_clock and uses the lock as long as it thinks "
                     "time is left; its wall clock jumps back 3 s right after a grant, so it keeps "
                     "using the lock well past the real end of its lease. Must be caught.",
                 .quick = true,
                 .expect = FoundAny({kS1, kS2}),
                 .setup = b,
                 .body = [](Run& run) {
                   return OnMarker(
                       run, "grant", 0, 4, Ttl(run) * 2.5, absl::ZeroDuration(),
                       [](Run& r, const Marker&) { return r.ClientClockJump(0, -Seconds(3)); },
                       UntilAny({kS1, kS2}));
                 }});
  }

  // ---- Partitions (root) ----
  auto part = [&](std::string name, std::string config, std::string summary, bool quick,
                  std::function<PartitionSpec(Run&)> shape) {
    c.push_back({.name = std::move(name),
                 .config = std::move(config),
                 .summary = std::move(summary),
                 .quick = quick,
                 .needs_root = true,
                 .expect = ExpectClean(),
                 .setup = Plain(Topology::kNamespace, Many(3, Std())),
                 .body = [shape](Run& run) { return PartitionCycle(run, shape); }});
  };
  part("partition-isolate-node", "netns, nft: one node cut from every client",
       "One node at a time is unreachable (both directions) for 1.5 s, then healed. A majority "
       "remains: clean, with little availability loss.",
       false,
       [](Run& r) { return IsolateNode(PickNodes(r, 1)[0], r.num_nodes(), r.num_clients()); });
  part("partition-majority-minority", "netns, nft: 3 nodes+2 clients | 2 nodes+1 client",
       "A split brain: two clients with three nodes on one side, one client with two nodes on "
       "the other. Only the majority side can lock: clean.",
       true, [](Run& r) {
         std::vector<int> a = PickNodes(r, 3);
         std::vector<int> clients = {0, 1, 2};
         std::shuffle(clients.begin(), clients.end(), r.rng());
         clients.resize(2);
         return SplitBrain(a, clients, r.num_nodes(), r.num_clients());
       });
  part("partition-per-client", "netns, nft: each client sees 3 random nodes",
       "Per-client views that overlap (c1 sees {n0,n1,n2}, c2 {n1,n3,n4}, ...): any two majorities "
       "share a node, and without clock faults that node keeps them apart: clean.",
       false, [](Run& r) {
         std::vector<std::vector<int>> views;
         for (int k = 0; k < r.num_clients(); ++k) views.push_back(PickNodes(r, 3));
         return FromViews(views, r.num_nodes());
       });
  part("partition-one-way", "netns, nft: replies lost / requests lost, per client",
       "One direction only: a client's requests reach three nodes but their replies are "
       "dropped (the nodes execute, the client times out and releases), another client's "
       "requests to two nodes are dropped. Clean, and no key of a failed attempt is left.",
       false, [](Run& r) {
         int a = static_cast<int>(r.Uniform(0, 2));
         int b = (a + 1 + static_cast<int>(r.Uniform(0, 1))) % 3;
         return Merge("one-way", {CutClient(a, PickNodes(r, 3), CutDirection::kFromNode),
                                  CutClient(b, PickNodes(r, 2), CutDirection::kToNode)});
       });

  // ---- Proxy faults ----
  c.push_back({.name = "latency-minority",
               .config = "proxies: 2 nodes +30ms+-40ms (timeout 50ms)",
               .summary = "Two slow nodes whose replies often miss the 50 ms node deadline: the "
                          "attempt is decided by the fast majority without waiting. Clean.",
               .quick = false,
               .expect = ExpectClean(),
               .setup = Plain(Topology::kSharedProxies, Many(3, Std())),
               .body = LatencyMinority});
  {
    ClientConfig slow = Std();
    slow.node_timeout_ms = 900;
    slow.use_ms = 20;
    slow.guard_ms = 50;
    c.push_back(
        {.name = "latency-near-ttl",
         .config = "proxies: all +330-430ms each way, ttl 1s",
         .summary =
             "Every round trip takes 660-860 ms of a 1 s ttl: validity is what is left after "
             "the elapsed time and drift, often too little to use (DEADLINE_EXCEEDED or no "
             "use), never negative time wrongly believed. Clean.",
         .quick = false,
         .expect = ExpectClean(),
         .setup = Plain(Topology::kSharedProxies, Many(3, slow), Seconds(10)),
         .body = LatencyNearTtl});
  }
  c.push_back({.name = "late-delivery-hold",
               .config = "proxies: hold-then-release SETs/replies 0.2-1.5 s",
               .summary =
                   "Bytes to (or from) one or two nodes are held and delivered late: SETs that run "
                   "after their attempt gave up, replies that arrive after the deadline, releases "
                   "that trail their SETs on the same connection. Clean, no leftover key.",
               .quick = false,
               .expect = ExpectClean(),
               .setup = Plain(Topology::kSharedProxies, Many(3, Std())),
               .body = LateDelivery});
  c.push_back({.name = "ack-loss-and-resets",
               .config = "proxies: replies black-holed (minority, majority), RST",
               .summary =
                   "The nodes execute but the replies vanish (ack loss) on a minority, then a "
                   "majority; connections are reset. Failed attempts must still release every "
                   "node, including those whose acks were lost: clean, and S5 clean.",
               .quick = true,
               .expect = ExpectClean(),
               .setup = Plain(Topology::kSharedProxies, Many(3, Std())),
               .body = AckLossAndResets});
  {
    ScenarioSetup b =
        Plain(Topology::kSharedProxies,
              Many(3, Variant(Hot(30, 6000), ClientVariant::kNoPartialRelease)), Seconds(5));
    b.quiet = Milliseconds(500);
    c.push_back(
        {.name = "broken-no-partial-release",
         .config = "as ack-loss (majority), clients = no-partial-release",
         .summary = "Ack loss on a majority with clients that do not release the partial grants of "
                    "a failed attempt: the keys stay on all five nodes until their 6 s ttl, nobody "
                    "can lock meanwhile, and they are still there after the run (S5). Must be "
                    "caught.",
         .quick = true,
         .expect = Found({kS5}, {kS1, kS2, kS3, kS4}),
         .setup = b,
         .body = PartialGrants});
  }

  // ---- Replicated nodes (master + replica, Sentinel) ----
  AddReplicated(c);

  // ---- Random mixes ----
  {
    ScenarioSetup s = Plain(Topology::kSharedProxies, Many(3, Fenced(Std())), Seconds(12));
    s.aof = true;
    s.node_clock_shim = true;
    c.push_back(
        {.name = "mix-safe",
         .config = "seeded mix: AOF restarts, pauses, small clocks, proxy faults",
         .summary = "A seeded random sequence of faults that the Redlock model tolerates: kill -9 "
                    "with AOF always, delayed restarts, node pauses, clock strobes within half the "
                    "drift, backward jumps, latency, black holes, holds, ack loss, resets, short "
                    "client pauses. Clean.",
         .quick = true,
         .expect = ExpectClean(),
         .setup = s,
         .body = MixSafe});
  }
  {
    ScenarioSetup s = Plain(Topology::kSharedProxies, Many(3, Hot(100)), Seconds(12));
    s.node_clock_shim = true;
    c.push_back(
        {.name = "mix-unsafe",
         .config = "seeded mix: majority restarts (no AOF), big jumps, GC pauses",
         .summary =
             "A seeded random sequence of faults outside the model: a majority restarted "
             "without persistence, a majority's clocks jumping 3 ttl forward, a holder paused "
             "inside its critical section. Violations expected.",
         .quick = false,
         .expect = FoundAny({kS1, kS2, kS3}),
         .setup = s,
         .body = MixUnsafe});
  }
  // ---- TLS nodes ----
  for (const char* name :
       {"restart-no-persistence", "restart-aof-always", "partition-majority-minority"}) {
    AddTlsVariant(&c, name);
  }
  return c;
}

}  // namespace

const std::vector<Scenario>& Catalog() {
  static const std::vector<Scenario>* catalog = new std::vector<Scenario>(Build());
  return *catalog;
}

}  // namespace redlock::chaos
