// The end of a run and its properties: the lab's checker on the history,
// the scans of the nodes (S5), recovery (L1), what only the simulator can
// see (D1 durable grants, H1 held means held, L2 nodes asked again, L3
// TRYAGAIN retried, L4 calls end, L5 memory bounded), and the judging of
// each violation against the faults injected (documented safe), as the
// explorer judges (chaos/explore/explore.h: Unexplained).

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chaos/run/scenario.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/fair_scripts.h"
#include "sim/world_internal.h"

namespace redlock::sim {
namespace {

int64_t Ms(int64_t ms) { return ms * 1000000; }

bool CounterAtLeast(const std::string& value, uint64_t want) {
  uint64_t v = 0;
  return absl::SimpleAtoi(value, &v) && v >= want;
}

// The kinds that lose a node's data (its keys and fencing counters).
bool Forgets(const std::string& kind) {
  return kind == "restart" || kind == "kill" || kind == "failover";
}

}  // namespace

const std::vector<std::string>& PropertyNames() {
  static const std::vector<std::string>* names =
      new std::vector<std::string>{"S1", "S2", "S3", "S4", "S5", "L1", "S6", "S7", "S8", "S9",
                                   "D1", "H1", "H2", "H3", "V1", "L2", "L3", "L4", "L5", "L6"};
  return *names;
}

void World::Violation(const std::string& property, const std::string& description,
                      std::vector<std::string> processes) {
  SimViolation v;
  v.property = property;
  v.description = description;
  v.t = now_;
  v.processes = std::move(processes);
  out_.sim_violations.push_back(std::move(v));
}

// ---- Checked as the run goes ----------------------------------------------------------------

void World::CheckDurableGrant(int client, const Hold& h) {
  const int k = config_.durability_replicas;
  if (k == 0 || h.mode == "shared") return;
  const Worker& w = workers_[static_cast<size_t>(client)];
  // A failover or restart during the attempt may legitimately take away
  // what was confirmed before it: not judged.
  for (const auto& [begin, end] : data_faults_) {
    if (end >= w.invoked_at) return;
  }
  const bool fenced = config_.fencing || config_.primitive == Primitive::kElection;
  std::vector<std::string> keys;
  for (const std::string& r : h.resources) {
    std::string key = config_.key_prefix + r;
    if (config_.primitive == Primitive::kSemaphore) absl::StrAppend(&key, ":permit:", h.slot);
    keys.push_back(key);
  }
  int durable = 0;
  std::vector<std::string> why;
  for (size_t v = 0; v < voters_.size(); ++v) {
    bool all = true;
    std::string reason = "no write of the token";
    for (size_t i = 0; i < keys.size() && all; ++i) {
      bool found = false;
      for (int m : voters_[v].members) {
        const Member& mm = members_[static_cast<size_t>(m)];
        auto it = holdings_.find({m, keys[i]});
        if (it == holdings_.end()) continue;
        for (const KeyHolding& kh : it->second) {
          if (kh.token != h.token || kh.generation != mm.generation || kh.offset == 0) continue;
          const int acked = config_.durability_fsync ? mm.node->FsyncedReplicas(kh.offset)
                                                     : mm.node->AckedReplicas(kh.offset);
          if (acked < k) {
            reason = absl::StrCat("its write (offset ", kh.offset, ") on ", acked,
                                  " replicas, the master at ", mm.node->master_offset());
            continue;
          }
          if (fenced && i < h.fencing.size() && h.fencing[i].has_value()) {
            // An election's term is its own counter, even with a shared
            // one (LeaderShape::own_counters, family_ops.cc).
            const bool shared = config_.shared_counter && config_.primitive != Primitive::kElection;
            const std::string ck = shared ? config_.key_prefix + ":fence" : keys[i] + ":fence";
            auto c = counters_.find({m, ck});
            bool committed = false;
            if (c != counters_.end()) {
              for (const auto& [offset, value] : c->second) {
                if (!CounterAtLeast(value, *h.fencing[i])) continue;
                const int ca = config_.durability_fsync ? mm.node->FsyncedReplicas(offset)
                                                        : mm.node->AckedReplicas(offset);
                committed = ca >= k;
                break;
              }
            }
            if (!committed) {
              reason = absl::StrCat("its write replicated, but no counter >= ", *h.fencing[i],
                                    " replicated");
              continue;
            }
          }
          found = true;
        }
      }
      all = found;
    }
    if (all) {
      ++durable;
    } else {
      why.push_back(absl::StrCat("n", v, ": ", reason));
    }
  }
  const int needed = RequiredNodes(config_);
  if (durable < needed) {
    Violation("D1",
              absl::StrCat(clients_[static_cast<size_t>(client)].name, " granted ",
                           absl::StrJoin(h.resources, ","), " (token ", h.token.substr(0, 8),
                           "...) while only ", durable, " nodes' replicas had its write",
                           fenced ? " and its fencing commit" : "", " (", needed,
                           " needed with durability.replicas ", k, "; not on ",
                           absl::StrJoin(why, ","), ")"),
              {clients_[static_cast<size_t>(client)].name});
  }
}

bool World::ScriptsOnly() const {
  return config_.primitive == Primitive::kRwLock || config_.primitive == Primitive::kSemaphore ||
         config_.primitive == Primitive::kElection || config_.primitive == Primitive::kFair;
}

int World::ScriptingVoters() const {
  int n = 0;
  for (const Voter& v : voters_) n += v.config.scripting == Scripting::kScripts ? 1 : 0;
  return n;
}

void World::CheckRefusedNodes(int client, const absl::Status& status) {
  // The fair lock refuses nodes that forbid scripting (its scripts have no
  // script-free form), naming the node. Where too few nodes allow scripting
  // for a grant, every fair call must fail so, not be granted, and not fail
  // for another reason. Judged on calls no fault touched (a fault can keep
  // the refusing node from answering at all).
  if (config_.primitive != Primitive::kFair || client < config_.fair_jumpers) return;
  if (ScriptingVoters() >= RequiredNodes(config_)) return;
  const Worker& w = workers_[static_cast<size_t>(client)];
  const ClientCtx& c = clients_[static_cast<size_t>(client)];
  if (status.ok()) {
    Violation("H1",
              absl::StrCat(c.name, ": fair lock of ", absl::StrJoin(w.invoked_resources, ","),
                           " granted while only ", ScriptingVoters(), " of ", voters_.size(),
                           " nodes allow scripting (a grant needs ", RequiredNodes(config_), ")"),
              {c.name});
    return;
  }
  // A fault's effects outlast it (a node marked down until a probe, a
  // connection waiting out its backoff): judged from the window after the
  // last fault healed that L2 waits too.
  if (!active_.empty()) return;
  int64_t healed = 0;
  for (const InjectedFault& f : out_.injected) healed = std::max(healed, f.end);
  if (!out_.injected.empty() && w.invoked_at < healed + SettleWindow()) return;
  if (absl::StrContains(status.message(), "forbids scripting")) return;
  Violation(
      "H1",
      absl::StrCat(c.name, ": fair lock of ", absl::StrJoin(w.invoked_resources, ","),
                   " failed without naming a node that forbids scripting, while only ",
                   ScriptingVoters(), " of ", voters_.size(), " nodes allow it (a grant needs ",
                   RequiredNodes(config_), "): ", status.ToString().substr(0, 300)),
      {c.name});
}

void World::CheckHeldRefusal(int client, const std::string& code) {
  (void)code;
  if (config_.primitive != Primitive::kMutex && config_.primitive != Primitive::kMultiLock &&
      config_.primitive != Primitive::kElection) {
    return;
  }
  const Worker& w = workers_[static_cast<size_t>(client)];
  const std::vector<std::string> keys = LockKeys(w.invoked_resources);
  for (const auto& [mk, list] : holdings_) {
    if (std::find(keys.begin(), keys.end(), mk.second) == keys.end()) continue;
    for (const KeyHolding& kh : list) {
      if (kh.from > now_ || kh.to < w.invoked_at) continue;
      // Anyone's but the refused attempt's own: another client's, or an
      // earlier attempt's of the same call whose cleanup had not run yet.
      if (kh.token.substr(0, 40) != w.last_token) return;
    }
  }
  Violation("H1",
            absl::StrCat(clients_[static_cast<size_t>(client)].name, ": acquire of ",
                         absl::StrJoin(w.invoked_resources, ","),
                         " refused as held by another client, while no node held ",
                         keys.size() == 1 ? "its key" : "any of its keys",
                         " for anyone else during the call (",
                         absl::StrFormat("%.3fs..%.3fs", static_cast<double>(w.invoked_at) / 1e9,
                                         static_cast<double>(now_) / 1e9),
                         ")"),
            {clients_[static_cast<size_t>(client)].name});
}

// ---- The end of a run ------------------------------------------------------------------------

void World::Finish() {
  for (Worker& w : workers_) w.stopped = true;
  waiting_markers_.clear();
  // Every fault still acting is healed (in the order injected).
  std::vector<uint64_t> ids;
  for (const auto& [id, f] : active_) ids.push_back(id);
  for (uint64_t id : ids) Heal(id);
  // The workers finish what they were doing (release what they hold).
  const int64_t bound =
      now_ + Ms(config_.wait_ms + config_.wait_poll_max_ms +
                config_.max_attempts * (config_.retry_delay_ms + config_.retry_jitter_ms) +
                2 * config_.ttl_ms + 10000);
  while (now_ < bound) {
    bool busy = false;
    for (const Worker& w : workers_) busy = busy || !w.idle || w.hold.has_value();
    if (!busy) break;
    RunUntil(now_ + Ms(100));
  }
  finishing_ = true;
  const int64_t end = now_;
  // A quiet tail: every key set before now has expired, or been removed, a
  // ttl later (with the clocks' rates and a margin).
  // The fair lock's places last their place ttl past the last heartbeat
  // (a holder that lets its lease lapse keeps its place that long).
  const int64_t lasting = config_.primitive == Primitive::kFair
                              ? std::max(config_.ttl_ms, PlaceTtlMs(config_))
                              : config_.ttl_ms;
  RunUntil(end + Ms(lasting) * (1000000 + 2 * config_.clock_ppm) / 1000000 + Ms(1000));
  ScanKeys();
  CheckCleanup();
  CheckValidityBacked();
  CheckLiveness();
  CheckAskedAgain();
  CheckRecovery();
  // L3: TRYAGAIN answers never followed by the command again.
  for (const auto& [key, when] : tryagain_) {
    const int client = std::get<0>(key);
    if (when.second >= workload_end_) continue;
    Violation("L3",
              absl::StrCat(clients_[static_cast<size_t>(client)].name, ": n", std::get<1>(key),
                           " answered TRYAGAIN (a slot in migration) at ", when.first / 1000000,
                           "ms and the command was not sent again within "
                           "its node timeout (",
                           config_.node_timeout_ms, "ms): ", std::get<2>(key).substr(0, 120)),
              {clients_[static_cast<size_t>(client)].name});
    out_.sim_violations.back().t = when.first;  // when the TRYAGAIN came
    out_.sim_violations.back().node = std::get<1>(key);
  }
  // The store's final counters (S3).
  for (int i = 0; i < config_.resources; ++i) {
    chaos::Event e;
    e.type = chaos::EventType::kFinal;
    e.type_name = "final";
    e.t = now_;
    e.resource = ResourceName(i);
    e.counter = store_[e.resource].value;
    e.initial = 0;
    Record(e);
  }
  // The clients go (their destructors complete what is left, cancelled).
  for (ClientCtx& c : clients_) {
    c.timed.clear();
    c.deferred.clear();
    c.alive = false;
    const int previous = current_client_;
    current_client_ = -1;
    c.client.reset();
    current_client_ = previous;
    c.transport = nullptr;
  }
  out_.check = chaos::Check(events_log_);
  JudgeAll();
  if (input_.history) {
    for (const chaos::Event& e : events_log_) out_.history += chaos::FormatEventLine(e);
  }
  out_.events = events_;
}

void World::ScanKeys() {
  for (size_t m = 0; m < members_.size(); ++m) {
    Member& mm = members_[m];
    if (!mm.up) continue;
    const int64_t ms = NodeMs(static_cast<int>(m));
    for (const std::string& key : mm.node->Keys(ms)) {
      if (config_.primitive == Primitive::kFair &&
          absl::EndsWith(key, internal::kFairExpirySuffix) &&
          lock_keys_.count(key.substr(0, key.size() - internal::kFairExpirySuffix.size())) > 0) {
        // A fair lock's places, by their expiry on the node's clock (as the
        // lab's scan reads them: chaos/run/leftovers.cc): none may be live.
        Session session;
        Result r =
            mm.node->Execute(session, {"ZRANGEBYSCORE", key, absl::StrCat("(", ms), "+inf"}, ms);
        if (r.reply.type != Reply::Type::kArray || r.reply.elements.empty()) continue;
        Violation("S5", absl::StrCat(mm.node->config().name, ": ", key, " still holds ",
                                     r.reply.elements.size(), " live place(s) (",
                                     r.reply.elements[0].str.substr(0, 8),
                                     "...) a place ttl after the run's end"));
        continue;
      }
      if (lock_keys_.count(key) == 0) continue;
      std::optional<std::string> v = mm.node->Get(key, ms);
      if (!v.has_value()) continue;
      const bool granted = all_grant_tokens_.count(*v) > 0;
      Violation("S5", absl::StrCat(mm.node->config().name, ": lock key ", key, " still holds ",
                                   granted ? "a granted token"
                                           : "a token no grant had (a failed "
                                             "attempt's key never removed)",
                                   " (", v->substr(0, 8), "...) a ttl after the run's end"));
    }
  }
}

bool World::AnyFaultBetween(int64_t from, int64_t to) const {
  for (const InjectedFault& f : out_.injected) {
    if (f.begin <= to && f.end >= from) return true;
  }
  return false;
}

std::map<int, int64_t> World::DesyncedSince() const {
  std::map<int, int64_t> out;
  for (const auto& [id, cn] : conns_) {
    if (!cn.dropped) continue;
    auto [it, fresh] = out.try_emplace(cn.client, cn.dropped_at);
    if (!fresh) it->second = std::min(it->second, cn.dropped_at);
  }
  return out;
}

// L6: a key that an attempt set and no grant ever had (a failed attempt's,
// or the part of a split vote that lost) is removed by the attempt's
// cleanup, not left to expire with its ttl: unless a fault acted anywhere
// from a second before it was set until a ttl and a second after (a lost
// connection, a stopped node or client may keep the cleanup from arriving
// in time), or it was set after the workload's end, or after one of its
// client's connections lost a message in the middle (its replies may pair
// with the wrong requests until it is replaced, and a node whose answer
// never comes holds the attempt, and its cleanup, up: as L5 below).
void World::CheckCleanup() {
  const int64_t reach = Ms(config_.ttl_ms + 1000);
  const std::map<int, int64_t> desynced_from = DesyncedSince();
  // A key holds the lease's token, or (an election's) its first 40 digits.
  std::set<std::string> granted;
  for (const std::string& t : all_grant_tokens_) granted.insert(t.substr(0, 40));
  for (const auto& [mk, list] : holdings_) {
    for (const KeyHolding& h : list) {
      if (h.deleted || h.client < 0 || h.from >= workload_end_) continue;
      auto d = desynced_from.find(h.client);
      if (d != desynced_from.end() && h.from >= d->second) continue;
      if (granted.count(h.token.substr(0, 40)) > 0) continue;
      if (AnyFaultBetween(h.from - Ms(1000), h.from + reach)) continue;
      const Member& m = members_[static_cast<size_t>(mk.first)];
      Violation("L6",
                absl::StrCat(m.node->config().name, ": lock key ", mk.second, " set at ",
                             absl::StrFormat("%.3fs", static_cast<double>(h.from) / 1e9), " by ",
                             clients_[static_cast<size_t>(h.client)].name, " for a token (",
                             h.token.substr(0, 8),
                             "...) no grant had, and never removed: it expired with its ttl"),
                {clients_[static_cast<size_t>(h.client)].name});
      out_.sim_violations.back().t = h.from;
    }
  }
}

// V1 and H3, from the nodes' truth, for the primitives whose lease is one
// plain key per resource on each node (mutex, MultiLock, election).
//
// V1 a lease's validity is backed by its keys: every key of its token that
//    expired rather than being removed (released, overwritten) lived, on its
//    node's clock, at least until the lease's last valid_until (or its
//    release, if earlier). The drift allowance is there for this: clock
//    rates within the drift factor cannot make a key expire first.
// H3 an extension reported done was done: when a lease's extension (by hand
//    or by its renewal) succeeds, at least a quorum of nodes held a key of
//    its token at the start of that extension.
// V1 is not judged for a lease with a fault acting from a second before its
// acquisition to a second after its end (a stopped client, a cut link or a
// node that lost its data, and clock jumps, whose past readings the world
// does not keep). No fault lets an extension succeed without the keys, so
// H3 is judged whatever happened, except that a node whose clock jumped since
// counts as holding the key, and a client whose clock jumped is not judged
// (its extensions' times are read on that clock). A node's clock is read
// at a past time only when it has not jumped since.
void World::CheckValidityBacked() {
  if (config_.primitive != Primitive::kMutex && config_.primitive != Primitive::kMultiLock &&
      config_.primitive != Primitive::kElection) {
    return;
  }
  const int n = static_cast<int>(config_.nodes.size());
  const int quorum = PlainQuorum(config_);
  struct Lease {
    const chaos::Event* grant = nullptr;
    int64_t end = INT64_MAX;  // its release (the earliest)
    int64_t valid_until = 0;  // the last one, extensions included
    std::vector<const chaos::Event*> extends;
  };
  std::map<std::pair<std::string, std::string>, Lease> leases;  // (token, resource)
  for (const chaos::Event& e : events_log_) {
    const auto key = std::make_pair(e.token, e.resource);
    if (e.type == chaos::EventType::kGrant) {
      Lease& l = leases[key];
      l.grant = &e;
      l.valid_until = e.valid_until;
    } else if (e.type == chaos::EventType::kExtend && e.ok) {
      auto it = leases.find(key);
      if (it == leases.end()) continue;
      it->second.valid_until = std::max(it->second.valid_until, e.valid_until);
      it->second.extends.push_back(&e);
    } else if (e.type == chaos::EventType::kRelease) {
      auto it = leases.find(key);
      if (it != leases.end()) it->second.end = std::min(it->second.end, e.t);
    }
  }
  // The world keeps a clock's present reading only: per member, the last
  // time its clock jumped (a strobe's, until it healed), and the clients
  // whose clock jumped.
  std::map<int, int64_t> clock_jumped;
  std::set<std::string> client_clock_jumped;
  for (const InjectedFault& f : out_.injected) {
    if (f.kind == "clock_jump" || f.kind == "clock_strobe") {
      for (int v : f.nodes) {
        for (int m : voters_[static_cast<size_t>(v)].members) {
          int64_t& last = clock_jumped[m];
          last = std::max(last, f.end);
        }
      }
    } else if (f.kind == "client_clock_jump") {
      client_clock_jumped.insert(f.scope.begin(), f.scope.end());
    }
  }
  auto node_ms_at = [this](int member, int64_t t) {
    return members_[static_cast<size_t>(member)].clock.At(t) / 1000000;
  };
  for (const auto& [key, l] : leases) {
    if (l.grant == nullptr || l.grant->start >= workload_end_) continue;
    const int64_t until = std::min(l.valid_until, l.end);
    const bool fault = AnyFaultBetween(l.grant->start - Ms(1000), until + Ms(1000));
    const std::string token = key.first.substr(0, 40);
    const std::vector<std::string> keys = LockKeys({key.second});
    const std::string& process = l.grant->process;
    // The holdings of this lease's token, per member.
    std::vector<std::pair<int, const KeyHolding*>> held;
    for (const std::string& k : keys) {
      for (size_t m = 0; m < members_.size(); ++m) {
        auto it = holdings_.find({static_cast<int>(m), k});
        if (it == holdings_.end()) continue;
        for (const KeyHolding& h : it->second) {
          if (h.token.substr(0, 40) == token) held.emplace_back(static_cast<int>(m), &h);
        }
      }
    }
    for (const auto& [m, h] : held) {
      if (fault) break;
      if (h->deleted || h->expire_ms < 0 || h->from > l.grant->t) continue;
      auto jumped = clock_jumped.find(m);
      if (jumped != clock_jumped.end() && jumped->second >= until) continue;
      const int64_t at = node_ms_at(m, until);
      if (h->expire_ms + 1 < at) {
        Violation("V1",
                  absl::StrCat(members_[static_cast<size_t>(m)].node->config().name, ": ", process,
                               "'s key of ", key.second, " (token ", token.substr(0, 8),
                               "...) expired at ", h->expire_ms % 100000, " on the node's clock, ",
                               at - h->expire_ms, "ms before the lease's validity ended (",
                               absl::StrFormat("%.3fs", static_cast<double>(until) / 1e9), ")"),
                  {process});
        out_.sim_violations.back().t = until;
        break;
      }
    }
    if (client_clock_jumped.count(process) > 0) continue;
    for (const chaos::Event* x : l.extends) {
      std::set<int> voters;
      // A key written up to a node timeout after the extension began may
      // have been extended (a late SET of the acquisition).
      const int64_t until_x = x->t + Ms(config_.node_timeout_ms);
      for (const auto& [m, h] : held) {
        auto jumped = clock_jumped.find(m);
        const bool unknown = jumped != clock_jumped.end() && jumped->second >= x->t;
        const bool alive = h->from <= until_x && h->to > x->t &&
                           (h->expire_ms < 0 || unknown || h->expire_ms >= node_ms_at(m, x->t));
        if (alive) voters.insert(members_[static_cast<size_t>(m)].voter);
      }
      if (static_cast<int>(voters.size()) < quorum) {
        Violation(
            "H3",
            absl::StrCat(process, ": an extension of ", key.second, " (token ", token.substr(0, 8),
                         "...) from ", absl::StrFormat("%.3fs", static_cast<double>(x->t) / 1e9),
                         " succeeded while ", voters.size(), " of ", n,
                         " nodes held its key (quorum ", quorum, ")"),
            {process});
        out_.sim_violations.back().t = x->t;
        break;
      }
    }
  }
}

void World::CheckLiveness() {
  const std::map<int, int64_t> desynced = DesyncedSince();
  for (const Worker& w : workers_) {
    const ClientCtx& c = clients_[static_cast<size_t>(w.client)];
    if (w.call.has_value()) {
      Violation("L4",
                absl::StrCat(c.name, ": ", w.call->what, " started at ", w.call->start / 1000000,
                             "ms never completed"),
                {c.name});
    }
    if (!c.alive || c.transport == nullptr) continue;
    // A connection that lost a message in the middle (blackhole, ack_loss:
    // the lab's proxy faults) may pair replies with the wrong requests for
    // as long as it lives: its node answers garbage, which the model
    // tolerates on a minority; what the client keeps retrying then is not
    // judged here.
    if (desynced.count(w.client) > 0) continue;
    const size_t requests = c.transport->pending_requests();
    const size_t timers = c.transport->pending_timers();
    const size_t subscriptions = c.transport->subscriptions();
    size_t cleanups = 0, transactions = 0;
    for (const NodeHealth& h : c.client->Health()) {
      cleanups += h.cleanups_pending;
      transactions += h.transactions_waiting;
    }
    if (requests > 0 || subscriptions > 0 || timers > 8 || cleanups > 0 || transactions > 0) {
      std::string conns;
      for (const auto& [id, cn] : conns_) {
        if (cn.client != w.client || !cn.client_open) continue;
        absl::StrAppend(&conns, " conn ", id, " to ", members_[static_cast<size_t>(cn.member)].host,
                        cn.node_open ? "" : " (closed by the node)", " held ", cn.held[0].size(),
                        "/", cn.held[1].size(), " inbox ", cn.inbox.size(),
                        cn.blocked ? " blocked" : "", ";");
      }
      Violation(
          "L5",
          absl::StrCat(c.name, ": a ttl after the run's end, still ", requests,
                       " requests in flight, ", timers, " timers, ", subscriptions,
                       " subscriptions, ", cleanups, " releases waiting to be sent again, ",
                       transactions, " transactions waiting (nothing is left to do)",
                       requests > 0 ? absl::StrCat(": ", c.transport->Describe(), ";", conns) : ""),
          {c.name});
    }
  }
}

int64_t World::SettleWindow() const {
  return std::max<int64_t>(Ms(3000), 2 * Ms(config_.backoff_max_ms) +
                                         4 * std::max(Ms(config_.breaker_probe_ms),
                                                      4 * Ms(config_.durability_timeout_ms)));
}

void World::CheckAskedAgain() {
  int64_t healed = 0;
  for (const InjectedFault& f : out_.injected) healed = std::max(healed, f.end);
  const int64_t from = healed + SettleWindow();
  if (workload_end_ - from < Ms(2000)) return;
  const bool family = ScriptsOnly();
  auto in_window = [&](const std::vector<int64_t>& times) {
    return std::count_if(times.begin(), times.end(),
                         [&](int64_t t) { return t >= from && t < workload_end_; });
  };
  for (int c = 0; c < config_.clients; ++c) {
    if (in_window(invokes_[c]) < 3) continue;
    std::vector<int> never;
    int asked = 0;
    for (size_t v = 0; v < voters_.size(); ++v) {
      if (family && voters_[v].config.scripting != Scripting::kScripts) continue;
      if (in_window(asked_[{c, static_cast<int>(v)}]) > 0) {
        ++asked;
      } else {
        never.push_back(static_cast<int>(v));
      }
    }
    if (asked == 0 || never.empty()) continue;
    std::vector<std::string> names;
    for (int v : never) names.push_back(absl::StrCat("n", v));
    Violation("L2",
              absl::StrCat(clients_[static_cast<size_t>(c)].name, " never asked ",
                           absl::StrJoin(names, ","), " for a lock in the ",
                           (workload_end_ - from) / 1000000,
                           "ms after the faults healed (and a window for reconnecting and "
                           "probing), while it asked the other nodes"),
              {clients_[static_cast<size_t>(c)].name});
  }
}

void World::CheckRecovery() {
  // Nodes the primitive can never use (the lock family's scripts have no
  // script-free form) and the nodes a grant needs: the slack for faults
  // the configuration must ride out.
  const int unusable = ScriptsOnly() ? static_cast<int>(voters_.size()) - ScriptingVoters() : 0;
  const int n = static_cast<int>(voters_.size());
  const int slack = n - RequiredNodes(config_) - unusable;
  if (slack < 0) return;  // this configuration offers no availability at all
  // A fair lock's dead or paused waiter holds up the queue for its place
  // ttl and a heartbeat at most (fair_mutex.h): that long more.
  const int64_t window =
      2 * Ms(config_.ttl_ms) + Ms(2000) +
      (config_.primitive == Primitive::kFair ? Ms(PlaceTtlMs(config_)) * 4 / 3 : 0);
  struct Span {
    int64_t begin, end;
  };
  std::vector<Span> hard;  // faults the configuration need not ride out
  for (const InjectedFault& f : out_.injected) {
    const bool tolerated = f.tolerated && static_cast<int>(f.nodes.size()) <= slack;
    if (!tolerated) hard.push_back({f.begin, f.end});
  }
  std::vector<int64_t> ends;
  for (const Span& s : hard) ends.push_back(s.end);
  ends.push_back(Ms(100));  // the start of the run
  for (int64_t e : ends) {
    const int64_t until = e + window;
    if (until > workload_end_) continue;
    bool other = false;
    for (const Span& s : hard) other = other || (s.end > e && s.begin < until);
    if (other) continue;
    const bool granted = std::any_of(grant_times_.begin(), grant_times_.end(),
                                     [&](int64_t t) { return t >= e && t <= until; });
    if (!granted) {
      Violation("L1", absl::StrCat("no client was granted anything between ", e / 1000000,
                                   "ms and ", until / 1000000, "ms (2 ttl + 2 s",
                                   config_.primitive == Primitive::kFair ? " + 4/3 place ttl" : "",
                                   " after the faults it need not ride out)"));
    }
  }
}

// L3's explanations: a fault that stops the client or the node, or resets
// or cuts the connection between them, or moves the client's clock past the
// retry's deadline (a monotonic jump), while the TRYAGAIN's retry window
// was open (from a node timeout before the answer to two after it). The
// library retries on the connection the command went on and within the
// node's deadline; a paused client's deadline passes while it sleeps, and a
// reset or cut connection fails the request as an unavailable vote, as
// documented. A fault on other nodes or other clients explains nothing
// (but a partition's, whose shape decides the pairs it cuts).
bool World::RetryCutShort(const SimViolation& v) const {
  static const char* const kKinds[] = {
      "client_pause", "client_clock_jump", "pause",     "reset",     "reset_after_reply",
      "refuse",       "client_kill",       "partition", "link_down", "kill",
      "restart",      "ack_loss",          "failover"};
  const int64_t timeout = Ms(config_.node_timeout_ms);
  for (const InjectedFault& f : out_.injected) {
    if (std::find_if(std::begin(kKinds), std::end(kKinds),
                     [&](const char* k) { return f.kind == k; }) == std::end(kKinds)) {
      continue;
    }
    // A partition's shape decides which pairs it cuts (a split cuts the
    // listed clients from the other nodes): any pair may be among them.
    const bool any_pair = f.kind == "partition";
    if (!any_pair && v.node >= 0 && !f.nodes.empty() &&
        std::find(f.nodes.begin(), f.nodes.end(), v.node) == f.nodes.end()) {
      continue;
    }
    if (!any_pair && !f.scope.empty() && !v.processes.empty() &&
        std::find(f.scope.begin(), f.scope.end(), v.processes.front()) == f.scope.end()) {
      continue;
    }
    if (f.begin <= v.t + 2 * timeout && f.end >= v.t - timeout) return true;
  }
  return false;
}

void World::JudgeAll() {
  const int64_t reach =
      Ms(std::max(config_.ttl_ms,
                  config_.primitive == Primitive::kFair ? PlaceTtlMs(config_) : int64_t{0}) +
         1000);
  // Counters lost on at most fencing_lost_counters nodes break no fencing
  // promise (F of algorithm.h): those faults do not explain S4, S7 or S9.
  const bool counters_survive =
      static_cast<int>(forgot_voters_.size()) <= config_.fencing_lost_counters &&
      config_.fencing_lost_counters > 0;
  auto explained = [&](int property, const std::vector<std::string>& processes, int64_t t,
                       int64_t t_end) {
    for (const InjectedFault& f : out_.injected) {
      chaos::PropertySet may = f.may_violate;
      const bool counter_property = property == chaos::kS4 || property == chaos::kS7 ||
                                    property == chaos::kS9 ||
                                    (property == chaos::kS3 && config_.fenced_store);
      if (Forgets(f.kind) && counter_property && counters_survive) continue;
      // S8: the places live beside the lock key, in the same nodes' memory
      // with expiries on the same clocks: a fault on the nodes that may
      // lose or expire the lock key early (S1: a restart or kill without
      // persistence, a failover without the durability vote, a clock jump
      // beyond the drift) may lose a place that only a bare quorum held,
      // and a later waiter may go first until its heartbeat puts it back
      // (fair_mutex.h, "What is not promised"). So may a node that forgot
      // what it held, even when the lock key had expired by its return (a
      // kill longer than the ttl breaks no S1; the places last longer). The
      // registry's kinds do not name S8 (its RunShape has no fair lock).
      if (property == chaos::kS8 && config_.primitive == Primitive::kFair && f.scope.empty() &&
          !f.nodes.empty() && ((may & chaos::Prop(chaos::kS1)) || f.data_lost)) {
        may |= chaos::Prop(chaos::kS8);
      }
      if (!(may & chaos::Prop(property))) continue;
      // A lost counter stays lost: a repeated token may come any time after.
      const int64_t f_reach = Forgets(f.kind) && counter_property ? INT64_MAX / 2 : reach;
      if (t != 0 && (f.begin > t_end || f.end + f_reach < t)) continue;
      if (f.scope.empty() || processes.empty()) return true;
      for (const std::string& c : f.scope) {
        if (std::find(processes.begin(), processes.end(), c) != processes.end()) return true;
      }
    }
    return false;
  };
  const std::vector<std::string>& names = PropertyNames();
  for (const chaos::Violation& v : out_.check.violations) {
    const int p = chaos::HarnessIndex(v.property);
    std::vector<std::string> processes;
    // A lost update is the store's: a deposed holder's late write makes
    // every later pair of reads look lost, whoever made them. Any fault
    // that may cause harm explains it, as the final count's.
    int64_t t = v.t;
    if (p != chaos::kS3) {
      for (const chaos::GrantInfo& g : v.grants) processes.push_back(g.process);
    } else {
      // Two reads of one value: the write that set the counter back lies
      // between the first read and the second.
      for (const chaos::GrantInfo& g : v.grants) t = std::min(t, g.granted);
    }
    const std::string& name = names[static_cast<size_t>(p)];
    ++out_.violated[name];
    if (!explained(p, processes, t, v.t_end)) out_.findings.insert(name);
  }
  // S3's final count has no grant: any fault that may break S3 explains it.
  for (const SimViolation& v : out_.sim_violations) {
    ++out_.violated[v.property];
    int p = -1;
    for (size_t i = 0; i < chaos::kNumHarnessProperties; ++i) {
      if (names[i] == v.property) p = static_cast<int>(i);
    }
    if (p >= 0) {
      if (!explained(p, v.processes, 0, 0)) out_.findings.insert(v.property);
    } else if (v.property == "L3" && RetryCutShort(v)) {
      // Explained: the client or its connection to the node was stopped,
      // reset or cut off while the retry was due.
    } else {
      out_.findings.insert(v.property);  // the simulator's own: nothing explains them
    }
  }
  if (!out_.error.empty()) out_.findings.insert("ERROR");
}

}  // namespace redlock::sim
