// The world: the scheduler, the clocks, the network and the nodes. The
// fault kinds are in sim_faults.cc, the clients' loops in workload.cc, the
// end of a run and the properties in judge.cc.

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/sha1.h"
#include "sim/world_internal.h"

namespace redlock::sim {
namespace {

World* g_world = nullptr;

// The time one turn of a client's engine takes (World::Post).
constexpr int64_t kTurnNs = 1000;

void TokenObserver(void* arg, const unsigned char* bytes, size_t n) {
  static_cast<World*>(arg)->OnToken(bytes, n);
}

bool Is(const std::string& arg, absl::string_view name) {
  return absl::EqualsIgnoreCase(arg, name);
}

// Keys a command names (for the simulator's view of the nodes' truth).
void CommandKeys(const Argv& argv, std::vector<std::string>* out) {
  if (argv.empty()) return;
  const std::string& cmd = argv[0];
  if (Is(cmd, "EVAL") || Is(cmd, "EVALSHA")) {
    int64_t n = 0;
    if (argv.size() < 3 || !absl::SimpleAtoi(argv[2], &n) || n < 0 ||
        3 + static_cast<size_t>(n) > argv.size()) {
      return;
    }
    out->insert(out->end(), argv.begin() + 3, argv.begin() + 3 + n);
    return;
  }
  if (Is(cmd, "DEL") || Is(cmd, "EXISTS") || Is(cmd, "WATCH")) {
    out->insert(out->end(), argv.begin() + 1, argv.end());
    return;
  }
  if ((Is(cmd, "SET") || Is(cmd, "GET") || Is(cmd, "GETRANGE") || Is(cmd, "PEXPIRE") ||
       Is(cmd, "PTTL")) &&
      argv.size() > 1) {
    out->push_back(argv[1]);
  }
}

// The scripts whose run is an acquisition (for L2: was the node asked).
const std::vector<const internal::Script*>& AcquisitionScripts() {
  static const std::vector<const internal::Script*>* scripts =
      new std::vector<const internal::Script*>{
          &internal::AcquireSetScript(),    &internal::FenceAcquireScript(),
          &internal::RwReadAcquireScript(), &internal::RwWriteAcquireScript(),
          &internal::SemAcquireScript(),    &internal::FairProbeScript(),
          &internal::FairRegisterScript(),  &internal::FairAcquireScript()};
  return *scripts;
}

bool IsAcquisition(const std::vector<Argv>& commands) {
  for (size_t i = 0; i < commands.size(); ++i) {
    const Argv& a = commands[i];
    if (a.empty()) continue;
    const std::string& cmd = a[0];
    if (Is(cmd, "SET")) {
      for (size_t j = 3; j < a.size(); ++j) {
        if (Is(a[j], "NX")) return true;
      }
    } else if ((Is(cmd, "EVALSHA") || Is(cmd, "EVAL")) && a.size() > 1) {
      const bool sha = Is(cmd, "EVALSHA");
      for (const internal::Script* s : AcquisitionScripts()) {
        if (a[1] == (sha ? s->sha : s->body)) return true;
      }
    } else if (Is(cmd, "EXISTS") && i > 0 && Is(commands[0][0], "WATCH")) {
      return true;  // the script-free acquisition's phase 1
    }
  }
  return false;
}

// What identifies a command for "sent again" (L3): its keys and arguments,
// whatever form (EVALSHA, EVAL, with ASKING in front) it took.
// RetryKey's fields back as an argv-like list (its first element is the
// command's kind, the rest its arguments).
Argv SplitRetryKey(const std::string& key) {
  Argv out;
  for (absl::string_view part : absl::StrSplit(key, '\x1f')) out.emplace_back(part);
  return out;
}

bool IsHex40(absl::string_view a) {
  return a.size() == 40 && std::all_of(a.begin(), a.end(), [](char ch) {
           return absl::ascii_isdigit(static_cast<unsigned char>(ch)) || (ch >= 'a' && ch <= 'f');
         });
}

// The lock tokens a command carries: arguments of 40 hexadecimal digits,
// and the fair lock's "<attempt>.<waiter>" tokens (40 digits each), whose
// waiter id, also passed on its own beside them, is not a token of its own
// there (fair_op.cc).
std::vector<std::string> TokensOf(const Argv& argv) {
  std::vector<std::string> out;
  std::vector<absl::string_view> waiters;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() == 81 && a[40] == '.' && IsHex40(absl::string_view(a).substr(0, 40)) &&
        IsHex40(absl::string_view(a).substr(41))) {
      out.push_back(a);
      waiters.push_back(absl::string_view(a).substr(41));
    }
  }
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (IsHex40(a) && std::find(waiters.begin(), waiters.end(), a) == waiters.end()) {
      out.push_back(a);
    }
  }
  return out;
}

// Whether a command (or, for EXEC, one it runs) only prolongs a lock key:
// the extend script, PEXPIRE, or a SET that needs the key (XX, IFEQ). Such
// a command never creates one (H2).
bool IsExtension(const Argv& a) {
  if (a.empty()) return false;
  const std::string& cmd = a[0];
  if (Is(cmd, "PEXPIRE")) return true;
  if (Is(cmd, "SET")) {
    for (size_t j = 3; j < a.size(); ++j) {
      if (Is(a[j], "XX") || Is(a[j], "IFEQ")) return true;
    }
    return false;
  }
  if ((Is(cmd, "EVALSHA") || Is(cmd, "EVAL")) && a.size() > 1) {
    const internal::Script& s = internal::ExtendScript();
    return a[1] == (Is(cmd, "EVALSHA") ? s.sha : s.body);
  }
  return false;
}

std::string RetryKey(const Argv& argv) {
  const std::string cmd = absl::AsciiStrToUpper(argv[0]);
  std::string key;
  size_t from = 1;
  if (Is(cmd, "EVAL") || Is(cmd, "EVALSHA")) {
    key = "script";
    from = 2;
  } else {
    key = cmd;
  }
  for (size_t i = from; i < argv.size(); ++i) absl::StrAppend(&key, "\x1f", argv[i]);
  return key;
}

}  // namespace

World* CurrentWorld() { return g_world; }

int64_t ClockModel::When(int64_t value, int64_t now) const {
  if (At(now) >= value) return now;
  int64_t t =
      base_t + static_cast<int64_t>(std::ceil(static_cast<double>(value - base_value) / rate));
  t = std::max(t, now);
  for (int i = 0; i < 8 && At(t) < value; ++i) t += 1 + i;
  return t;
}

internal::Clock::TimePoint SimClock::Now() const {
  return TimePoint(std::chrono::nanoseconds(world_->ClientNow(client_)));
}

// ---- Construction ------------------------------------------------------------------------

World::World(const RunInput& input, TraceSink* trace)
    : input_(input),
      config_(input_.config),
      trace_(trace),
      options_(ToOptions(input_.config)),
      rng_(SubSeed(input.seed, 3)),
      net_rng_(SubSeed(input.seed, 5)) {
  g_world = this;
  library_random_ = std::make_unique<SeededRandomSource>(SubSeed(input.seed, 4));
  library_random_->set_on_token(&TokenObserver, this);
  previous_random_ = internal::SetRandomSourceForTesting(library_random_.get());
  const int n = static_cast<int>(config_.nodes.size());
  const int64_t epoch = int64_t{1700000000000} * 1000000;  // node wall clocks, ns
  auto rate = [this] {
    return 1.0 + static_cast<double>(rng_.Int(-config_.clock_ppm, config_.clock_ppm)) * 1e-6;
  };
  for (int v = 0; v < n; ++v) {
    const NodeConfig& nc = config_.nodes[static_cast<size_t>(v)];
    Voter voter;
    voter.config = nc;
    const int count = nc.members > 0 ? nc.members : 1;
    for (int k = 0; k < count; ++k) {
      Member m;
      m.voter = v;
      m.host = nc.members > 0 ? absl::StrCat("c", v, "m", k) : absl::StrCat("sim-n", v);
      m.id = internal::Sha1Hex(m.host);
      m.port = nc.members > 0 ? 7000 + k : 6379;
      Node::Config cfg;
      cfg.name = nc.members > 0 ? absl::StrCat("n", v, "m", k) : absl::StrCat("n", v);
      cfg.scripting = nc.scripting != Scripting::kLualess;
      cfg.scripting_noperm = nc.scripting == Scripting::kNoPerm;
      cfg.appendonly = nc.aof;
      cfg.replicas = nc.replicas;
      // Redis 7.2: WAITAOF (durability.fsync) exists from 7.2 on.
      cfg.version = "7.2.4";
      if (nc.members > 0) {
        const int lo = internal::kClusterSlots * k / count;
        const int hi = internal::kClusterSlots * (k + 1) / count - 1;
        cfg.slots.emplace_back(lo, hi);
        cfg.address = absl::StrCat(m.host, ":", m.port);
        cfg.cluster_id = m.id;
      }
      m.node = std::make_unique<Node>(cfg);
      m.clock.base_t = 0;
      m.clock.base_value = epoch + rng_.Int(-500, 500) * 1000000;
      m.clock.rate = rate();
      // A cluster's masters keep one time between them (MIGRATE carries a
      // key's ttl, not its deadline, so a clock offset between two masters
      // would not move an expiry; sim::Node::MoveKeys takes one clock).
      if (k > 0) m.clock = members_[static_cast<size_t>(voter.members[0])].clock;
      m.stalled.assign(static_cast<size_t>(nc.replicas), false);
      m.replicate_at.assign(static_cast<size_t>(nc.replicas), 0);
      voter.members.push_back(static_cast<int>(members_.size()));
      members_.push_back(std::move(m));
    }
    if (nc.members > 0) {
      voter.slot_owner.assign(internal::kClusterSlots, 0);
      for (int k = 0; k < count; ++k) {
        const int lo = internal::kClusterSlots * k / count;
        const int hi = internal::kClusterSlots * (k + 1) / count - 1;
        for (int s = lo; s <= hi; ++s) voter.slot_owner[static_cast<size_t>(s)] = voter.members[k];
      }
    }
    voters_.push_back(std::move(voter));
    if (nc.members > 0) SyncClusterPeers(v);
  }
  // Lock keys (the simulator's view of which keys are locks).
  std::vector<std::string> all;
  for (int i = 0; i < config_.resources; ++i) all.push_back(ResourceName(i));
  for (const std::string& k : LockKeys(all)) lock_keys_.insert(k);
  clients_.resize(static_cast<size_t>(config_.clients));
  workers_.resize(static_cast<size_t>(config_.clients));
  for (int c = 0; c < config_.clients; ++c) {
    ClientCtx& ctx = clients_[static_cast<size_t>(c)];
    ctx.index = c;
    ctx.name = absl::StrCat("c", c + 1);
    ctx.clock.base_t = 0;
    ctx.clock.base_value = int64_t{3600} * 1000000000 + rng_.Int(0, 1000000) * 1000;
    ctx.clock.rate = rate();
    ctx.clock_iface = std::make_unique<SimClock>(this, c);
    workers_[static_cast<size_t>(c)].client = c;
    workers_[static_cast<size_t>(c)].reader =
        config_.primitive == Primitive::kRwLock && c < config_.readers;
  }
}

World::~World() {
  for (ClientCtx& c : clients_) {
    c.alive = false;
    c.client.reset();
  }
  internal::SetRandomSourceForTesting(previous_random_);
  g_world = nullptr;
}

void World::OnToken(const unsigned char* bytes, size_t n) {
  if (current_client_ < 0) return;
  Worker& w = workers_[static_cast<size_t>(current_client_)];
  if (!w.call.has_value()) return;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < n; ++i) {
    hex.push_back(kHex[bytes[i] >> 4]);
    hex.push_back(kHex[bytes[i] & 0xf]);
  }
  w.tokens.insert(hex);
  w.last_token = std::move(hex);
}

std::string World::ResourceName(int i) const {
  const char* base = config_.primitive == Primitive::kSemaphore ? "s" : "r";
  return absl::StrCat(base, i);
}

std::vector<std::string> World::LockKeys(const std::vector<std::string>& resources) const {
  std::vector<std::string> keys;
  for (const std::string& r : resources) {
    const std::string key = config_.key_prefix + r;
    if (config_.primitive == Primitive::kSemaphore) {
      for (int p = 0; p < config_.permits; ++p) keys.push_back(absl::StrCat(key, ":permit:", p));
    } else {
      keys.push_back(key);
    }
  }
  return keys;
}

// ---- Scheduler --------------------------------------------------------------------------

void World::Schedule(int64_t t, absl::AnyInvocable<void()> fn) {
  heap_.push_back(Event{std::max(t, now_), seq_++, std::move(fn)});
  std::push_heap(heap_.begin(), heap_.end(), [](const Event& a, const Event& b) {
    return a.t != b.t ? a.t > b.t : a.seq > b.seq;
  });
}

void World::RunUntil(int64_t t_end) {
  auto later = [](const Event& a, const Event& b) {
    return a.t != b.t ? a.t > b.t : a.seq > b.seq;
  };
  while (!heap_.empty() && heap_.front().t <= t_end) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    Event e = std::move(heap_.back());
    heap_.pop_back();
    if (e.t == now_) {
      if (++same_time_ > 1000000) {
        out_.error = absl::StrCat("a million events at one instant (", now_ / 1000000,
                                  "ms): something loops without time passing; stopped");
        heap_.clear();
        return;
      }
    } else {
      same_time_ = 0;
    }
    now_ = e.t;
    ++events_;
    if (events_ > 50000000) {
      out_.error = "more than 50 million events in one run: the simulator stopped it";
      heap_.clear();
      return;
    }
    e.fn();
  }
  now_ = std::max(now_, t_end);
}

void World::RunForClient(int client, absl::AnyInvocable<void()> fn) {
  ClientCtx& c = clients_[static_cast<size_t>(client)];
  if (!c.alive) return;
  if (c.paused) {
    c.deferred.push_back(std::move(fn));
    return;
  }
  const int previous = current_client_;
  current_client_ = client;
  c.transport->EnterContext();
  fn();
  if (c.alive) c.transport->LeaveContext();
  current_client_ = previous;
}

int64_t World::ClientNow(int client) {
  return clients_[static_cast<size_t>(client)].clock.At(now_);
}

void World::At(int client, int64_t at, absl::AnyInvocable<void()> fn) {
  ClientCtx& c = clients_[static_cast<size_t>(client)];
  c.timed.emplace(std::make_pair(at, seq_++), std::move(fn));
  RearmWake(client);
}

void World::Post(int client, absl::AnyInvocable<void()> fn) {
  // A posted task runs in the engine's next turn: a microsecond of the
  // client's time passes (a chain of tasks that each post the next, as a
  // retry that fails at once, then cannot loop at one instant forever).
  Schedule(now_ + kTurnNs,
           [this, client, fn = std::move(fn)]() mutable { RunForClient(client, std::move(fn)); });
}

void World::RearmWake(int client) {
  ClientCtx& c = clients_[static_cast<size_t>(client)];
  if (c.timed.empty() || c.paused || !c.alive) return;
  const int64_t t = c.clock.When(c.timed.begin()->first.first, now_);
  if (t >= c.wake_at) return;
  c.wake_at = t;
  const uint64_t gen = ++c.wake_gen;
  Schedule(t, [this, client, gen] {
    ClientCtx& x = clients_[static_cast<size_t>(client)];
    if (gen != x.wake_gen) return;
    x.wake_at = INT64_MAX;
    WakeClient(client);
  });
}

void World::WakeClient(int client) {
  ClientCtx& c = clients_[static_cast<size_t>(client)];
  int guard = 0;
  for (; guard < 200000 && c.alive && !c.paused && !c.timed.empty(); ++guard) {
    auto it = c.timed.begin();
    if (it->first.first > ClientNow(client)) break;
    absl::AnyInvocable<void()> fn = std::move(it->second);
    c.timed.erase(it);
    RunForClient(client, std::move(fn));
  }
  if (guard >= 200000) {
    out_.error = absl::StrCat(c.name, ": 200000 timers due at one instant (", now_ / 1000000,
                              "ms): something loops without time passing; stopped");
    heap_.clear();
    return;
  }
  RearmWake(client);
}

void World::PauseClient(int client) {
  ClientCtx& c = clients_[static_cast<size_t>(client)];
  if (c.paused) return;
  c.paused = true;
  c.paused_since = now_;
  c.wake_at = INT64_MAX;
  ++c.wake_gen;
}

void World::ResumeClient(int client) {
  ClientCtx& c = clients_[static_cast<size_t>(client)];
  if (!c.paused) return;
  c.paused = false;
  c.paused_total += now_ - c.paused_since;
  // What arrived meanwhile is read first (it sat in the sockets), then
  // the timers that came due.
  std::deque<absl::AnyInvocable<void()>> deferred = std::move(c.deferred);
  c.deferred.clear();
  for (auto& fn : deferred) RunForClient(client, std::move(fn));
  WakeClient(client);
}

// ---- The network --------------------------------------------------------------------------

uint64_t World::Connect(int client, int member) {
  const uint64_t id = next_conn_++;
  Conn& c = conns_[id];
  c.id = id;
  c.client = client;
  c.member = member;
  if (member < 0 || member >= static_cast<int>(members_.size())) {
    c.member = 0;
    Message reset;
    reset.kind = Message::Kind::kReset;
    reset.why = "could not resolve the host";
    c.node_open = false;
    Schedule(now_ + 1000,
             [this, id, m = std::move(reset)]() mutable { Arrive(id, 1, std::move(m)); });
    return id;
  }
  Message syn;
  syn.kind = Message::Kind::kSyn;
  Send(c, 0, std::move(syn));
  return id;
}

void World::Write(uint64_t conn, std::vector<Argv> commands, int64_t handed_at) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || !it->second.client_open) return;
  Conn& c = it->second;
  const int voter = members_[static_cast<size_t>(c.member)].voter;
  if (IsAcquisition(commands)) asked_[{c.client, voter}].push_back(now_);
  for (const Argv& a : commands) {
    if (a.empty()) continue;
    for (const std::string& token : TokensOf(a)) {
      token_commands_[{c.client, token}].insert(RetryKey(a));
    }
  }
  if (voters_[static_cast<size_t>(voter)].config.members > 0) {
    bool asking = false;
    for (const Argv& a : commands) {
      if (a.empty()) continue;
      if (Is(a[0], "ASKING")) {
        asking = true;
        continue;
      }
      const auto key = std::make_tuple(c.client, voter, RetryKey(a));
      tryagain_.erase(key);
      // A new chain unless this is a retry of one that had a TRYAGAIN
      // lately, or the copy an ASK sent to the importing master (the
      // library's deadline runs from the original's send: node_calls.cc).
      // The library sends ASKING only after an ASK to a send of this
      // command (and the copy a MOVED sends continues the chain too, seed
      // 20315974), however long that answer took (hour-run seed 20273633:
      // the ASK came 56 ms after a send with a 50 ms node timeout, and the
      // copy's TRYAGAIN was rightly the node's last answer).
      auto& [start, last] = tryagain_chain_[key];
      const int64_t at = handed_at >= 0 ? handed_at : ClientNow(c.client);
      const int64_t timeout = config_.node_timeout_ms * 1000000;
      const bool copy = (asking || redirected_.erase(key) > 0) && start > 0;
      if (!copy && (last == 0 || at - last > timeout)) start = at;
      asking = false;
    }
  }
  Message m;
  m.kind = Message::Kind::kCommands;
  m.commands = std::move(commands);
  Send(c, 0, std::move(m));
}

void World::Close(uint64_t conn) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || !it->second.client_open) return;
  it->second.client_open = false;
  Message fin;
  fin.kind = Message::Kind::kFin;
  Send(it->second, 0, std::move(fin));
}

int World::MemberAt(const std::string& host, int port) {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].host == host && members_[i].port == port) return static_cast<int>(i);
  }
  return -1;
}

int64_t World::Latency(const Conn& c, int dir) {
  (void)c;
  (void)dir;
  return net_rng_.Int(config_.latency_us_lo, config_.latency_us_hi) * 1000;
}

ActiveFault::Effect World::LinkEffect(const Conn& c, int dir, int64_t* extra) const {
  using E = ActiveFault::Effect;
  E best = E::kNone;
  const int voter = members_[static_cast<size_t>(c.member)].voter;
  auto rank = [](E e) {
    switch (e) {
      case E::kDrop:
        return 5;
      case E::kHold:
        return 4;
      case E::kRefuse:
        return 3;
      case E::kResetAfterReply:
        return 2;
      case E::kLatency:
        return 1;
      default:
        return 0;
    }
  };
  for (const auto& [id, f] : active_) {
    if (f.effect == E::kNone || !f.dir[dir]) continue;
    bool applies;
    if (!f.links.empty()) {
      applies = f.links.count({c.client, voter}) > 0;
    } else {
      applies = std::find(f.voters.begin(), f.voters.end(), voter) != f.voters.end();
    }
    if (!applies) continue;
    if (f.effect == E::kLatency && extra != nullptr) {
      *extra += const_cast<World*>(this)->net_rng_.Int(f.latency_lo, f.latency_hi);
    }
    if (rank(f.effect) > rank(best)) best = f.effect;
  }
  return best;
}

void World::Send(Conn& c, int dir, Message m) {
  using E = ActiveFault::Effect;
  int64_t extra = 0;
  const E effect = LinkEffect(c, dir, &extra);
  if (effect == E::kDrop) {
    // A dropped request or reply; a connection's opening or closing gets
    // through (the proxy accepts and closes on its own). The connection
    // stays open, as behind the lab's proxy: its replies may now answer the
    // wrong requests (RESP has no request ids) until it is replaced.
    if (m.kind == Message::Kind::kCommands || m.kind == Message::Kind::kReplies) {
      if (!c.dropped) c.dropped_at = now_;
      c.dropped = true;
      return;
    }
  }
  if (effect == E::kHold) {
    c.held[dir].push_back(std::move(m));
    return;
  }
  const int64_t t = std::max(now_ + Latency(c, dir) + extra, c.last_arrival[dir]);
  c.last_arrival[dir] = t;
  const uint64_t id = c.id;
  Schedule(t, [this, id, dir, m = std::move(m)]() mutable { Arrive(id, dir, std::move(m)); });
}

void World::ReleaseHeld() {
  for (auto& [id, c] : conns_) {
    for (int dir = 0; dir < 2; ++dir) {
      while (!c.held[dir].empty()) {
        int64_t extra = 0;
        if (LinkEffect(c, dir, &extra) == ActiveFault::Effect::kHold) break;
        Message m = std::move(c.held[dir].front());
        c.held[dir].pop_front();
        Send(c, dir, std::move(m));
      }
    }
  }
}

void World::Arrive(uint64_t id, int dir, Message m) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  Member& member = members_[static_cast<size_t>(c.member)];
  if (dir == 0) {
    switch (m.kind) {
      case Message::Kind::kSyn: {
        int64_t extra = 0;
        const bool refused = LinkEffect(c, 0, &extra) == ActiveFault::Effect::kRefuse;
        if (!member.up || refused) {
          Message reset;
          reset.kind = Message::Kind::kReset;
          reset.why = member.up ? "Connection reset by peer" : "Connection refused";
          Send(c, 1, std::move(reset));
          return;
        }
        c.node_open = true;
        c.generation = member.generation;
        member.conns.push_back(id);
        Message ok;
        ok.kind = Message::Kind::kAccepted;
        Send(c, 1, std::move(ok));
        return;
      }
      case Message::Kind::kCommands: {
        if (!c.node_open || !member.up) return;
        if (c.inbox.empty()) c.inbox_seq = seq_++;
        for (Argv& a : m.commands) c.inbox.push_back(std::move(a));
        if (!member.paused) Process(c);
        return;
      }
      case Message::Kind::kFin: {
        if (!c.node_open) return;
        // Commands already read still run; the rest goes with the client.
        ResetConn(c, "", /*tell_client=*/false);
        return;
      }
      default:
        return;
    }
  }
  if (!c.client_open) return;
  const int client = c.client;
  SimTransport* t = clients_[static_cast<size_t>(client)].transport;
  switch (m.kind) {
    case Message::Kind::kAccepted:
      RunForClient(client, [t, id] { t->OnConnected(id); });
      return;
    case Message::Kind::kReplies: {
      if (!m.why.empty()) {
        // A TRYAGAIN reached the client (L3): the command must come again.
        const int voter = members_[static_cast<size_t>(c.member)].voter;
        // The library tries again after node_timeout/10 while that ends
        // before the node's deadline (node_timeout from when the chain's
        // first command was handed to the transport, on the client's
        // clock; node_calls.cc): a TRYAGAIN later than that is the
        // documented end of the window, not a miss. A margin of another
        // pause (at least 2 ms): when the library reads its clock for the
        // deadline and when the world sees the reply differ by its
        // turns, which the world does not see exactly.
        const auto key = std::make_tuple(client, voter, m.why);
        auto& [start, last] = tryagain_chain_[key];
        const int64_t client_now = ClientNow(client);
        last = client_now;
        const int64_t timeout = config_.node_timeout_ms * 1000000;
        const int64_t pause = std::max<int64_t>(1000000, timeout / 10);
        // And a quarter of the node timeout: a retry's own round trip (the
        // ASK to the old master, then ASKING and the command at the new
        // one) runs inside the window too, and a TRYAGAIN in its last
        // quarter may be the last one the library's deadline allows
        // (seed 1008: retries 6-7 ms apart in a 20 ms window). A library
        // that never retries still answers L3: its first TRYAGAIN comes a
        // round trip after the start.
        const int64_t margin = std::max<int64_t>({2000000, pause, timeout / 4});
        // A call that already ended (decided by the other nodes, which
        // also abandons this one) need not try again.
        const Worker& w = workers_[static_cast<size_t>(client)];
        const bool in_call = w.call.has_value() && !w.call->done;
        // An attempt already decided by the other nodes before this answer
        // came (the client wrote its release or its commit, another command
        // with the same token) abandons this node too.
        bool decided = false;
        for (const std::string& token : TokensOf(SplitRetryKey(m.why))) {
          auto tc = token_commands_.find({client, token});
          decided = decided || (tc != token_commands_.end() &&
                                std::any_of(tc->second.begin(), tc->second.end(),
                                            [&](const std::string& k) { return k != m.why; }));
        }
        if (in_call && !decided && start > 0 && client_now + pause + margin < start + timeout) {
          tryagain_[key] = {now_, now_ + timeout + 5000000};
        }
      }
      RunForClient(client, [t, id, replies = std::move(m.replies)]() mutable {
        t->OnReplies(id, std::move(replies));
      });
      return;
    }
    case Message::Kind::kReset:
      c.client_open = false;
      RunForClient(client, [t, id, why = m.why] { t->OnClosed(id, why); });
      return;
    default:
      return;
  }
}

void World::ResetConn(Conn& c, const std::string& why, bool tell_client) {
  Member& member = members_[static_cast<size_t>(c.member)];
  c.node_open = false;
  c.inbox.clear();
  c.blocked = false;
  ++c.block_gen;
  // The node forgets the connection: its subscriptions, WATCH and MULTI.
  member.node->Disconnect(c.session);
  c.session = Session();
  c.held[0].clear();
  member.conns.erase(std::remove(member.conns.begin(), member.conns.end(), c.id),
                     member.conns.end());
  if (tell_client && c.client_open) {
    Message reset;
    reset.kind = Message::Kind::kReset;
    reset.why = why;
    Send(c, 1, std::move(reset));
  }
}

void World::ResetMember(int member, const std::string& why, bool command_only) {
  std::vector<uint64_t> ids = members_[static_cast<size_t>(member)].conns;
  for (uint64_t id : ids) {
    Conn& c = conns_[id];
    if (command_only && !c.session.subscribed.empty()) continue;
    ResetConn(c, why, true);
  }
}

// ---- The nodes ---------------------------------------------------------------------------

int64_t World::NodeMs(int member) const {
  const int64_t ns = members_[static_cast<size_t>(member)].clock.At(now_);
  return ns >= 0 ? ns / 1000000 : -((-ns + 999999) / 1000000);
}

void World::Process(Conn& c) {
  Member& member = members_[static_cast<size_t>(c.member)];
  std::vector<Reply> replies;
  std::string tryagain;
  bool reset_after = false;
  while (!c.blocked && !c.inbox.empty() && c.node_open && member.up && !member.paused) {
    Argv argv = std::move(c.inbox.front());
    c.inbox.pop_front();
    const size_t before = replies.size();
    ExecuteOne(c, argv, &replies);
    if (replies.size() > before && replies.back().is_error() &&
        absl::StartsWith(replies.back().str, "TRYAGAIN")) {
      tryagain = RetryKey(argv);
    }
    // A MOVED or ASK: the library sends this command again to the master
    // named, and its TRYAGAIN deadline still runs from the first send (L3).
    if (replies.size() > before && replies.back().is_error() &&
        (absl::StartsWith(replies.back().str, "MOVED ") ||
         absl::StartsWith(replies.back().str, "ASK "))) {
      redirected_.insert({c.client, member.voter, RetryKey(argv)});
    }
  }
  if (!c.inbox.empty()) c.inbox_seq = seq_++;
  if (replies.empty()) return;
  int64_t extra = 0;
  reset_after = LinkEffect(c, 1, &extra) == ActiveFault::Effect::kResetAfterReply;
  Message m;
  m.kind = Message::Kind::kReplies;
  m.replies = std::move(replies);
  m.why = tryagain;
  Send(c, 1, std::move(m));
  if (reset_after) ResetConn(c, "Connection reset by peer", true);
}

Reply World::ClusterSlots(int voter) const {
  const Voter& v = voters_[static_cast<size_t>(voter)];
  std::vector<Reply> ranges;
  int s = 0;
  while (s < internal::kClusterSlots) {
    const int owner = v.slot_owner[static_cast<size_t>(s)];
    int e = s;
    while (e + 1 < internal::kClusterSlots && v.slot_owner[static_cast<size_t>(e + 1)] == owner) {
      ++e;
    }
    const Member& m = members_[static_cast<size_t>(owner)];
    ranges.push_back(Reply::Array(
        {Reply::Integer(s), Reply::Integer(e),
         Reply::Array({Reply::String(m.host), Reply::Integer(m.port), Reply::String(m.id)})}));
    s = e + 1;
  }
  return Reply::Array(std::move(ranges));
}

void World::SyncClusterPeers(int voter) {
  const Voter& v = voters_[static_cast<size_t>(voter)];
  for (int self : v.members) {
    std::vector<Node::ClusterPeer> peers;
    for (int other : v.members) {
      if (other == self) continue;
      const Member& o = members_[static_cast<size_t>(other)];
      Node::ClusterPeer p;
      p.address = absl::StrCat(o.host, ":", o.port);
      p.id = o.id;
      // Its slots as inclusive ranges, from the world's map.
      for (int s = 0; s < internal::kClusterSlots; ++s) {
        if (v.slot_owner[static_cast<size_t>(s)] != other) continue;
        if (!p.slots.empty() && p.slots.back().second == s - 1) {
          p.slots.back().second = s;
        } else {
          p.slots.emplace_back(s, s);
        }
      }
      peers.push_back(std::move(p));
    }
    members_[static_cast<size_t>(self)].node->SetClusterPeers(std::move(peers));
  }
}

void World::ExecuteOne(Conn& c, const Argv& argv, std::vector<Reply>* replies) {
  Member& member = members_[static_cast<size_t>(c.member)];
  const Voter& voter = voters_[static_cast<size_t>(member.voter)];
  if (argv.size() >= 2 && voter.config.members > 0 && Is(argv[0], "CLUSTER") &&
      Is(argv[1], "SLOTS")) {
    // The cluster's map is the world's (its gossip): every member answers it.
    Reply r = ClusterSlots(member.voter);
    Trace(c, argv, r);
    replies->push_back(std::move(r));
    return;
  }
  std::vector<std::string> keys;
  CommandKeys(argv, &keys);
  bool extension = IsExtension(argv);
  if (!argv.empty() && Is(argv[0], "EXEC")) {
    for (const Argv& q : c.session.queued) {
      CommandKeys(q, &keys);
      extension = extension || IsExtension(q);
    }
  }
  Result r;
  if (member.voter < config_.lying_nodes && argv.size() > 3 && Is(argv[0], "SET")) {
    // The known-bad node of SimConfig::lying_nodes: every SET succeeds.
    Argv lie;
    for (const std::string& a : argv) {
      if (!Is(a, "NX")) lie.push_back(a);
    }
    r = member.node->Execute(c.session, lie, NodeMs(c.member));
  } else {
    r = member.node->Execute(c.session, argv, NodeMs(c.member));
  }
  for (const Publication& p : r.published) Publish(c.member, p);
  if (r.block.has_value()) {
    c.blocked = true;
    c.block = *r.block;
    c.block_argv = argv;
    const uint64_t gen = ++c.block_gen;
    c.block_deadline = c.block.timeout_ms > 0 ? now_ + c.block.timeout_ms * 1000000 : 0;
    if (c.block.timeout_ms > 0) {
      const uint64_t id = c.id;
      Schedule(now_ + c.block.timeout_ms * 1000000, [this, id, gen] {
        Conn& x = conns_[id];
        if (!x.blocked || x.block_gen != gen) return;
        if (members_[static_cast<size_t>(x.member)].paused) return;  // resolved on resume
        ResolveWait(x);
      });
    }
    CheckWaits(c.member);
    return;
  }
  if (!keys.empty()) ObserveKeys(c.member, keys, r.wrote, c.client, extension);
  if (r.wrote) AfterWrite(c.member);
  Trace(c, argv, r.reply);
  replies->push_back(std::move(r.reply));
}

void World::ResolveWait(Conn& c) {
  Member& member = members_[static_cast<size_t>(c.member)];
  const Block& b = c.block;
  Reply reply;
  if (b.aof) {
    reply = Reply::Array({Reply::Integer(member.node->config().appendonly ? 1 : 0),
                          Reply::Integer(member.node->FsyncedReplicas(b.offset))});
  } else {
    reply = Reply::Integer(member.node->AckedReplicas(b.offset));
  }
  c.blocked = false;
  ++c.block_gen;
  Trace(c, c.block_argv, reply, /*blocked=*/true);
  Message m;
  m.kind = Message::Kind::kReplies;
  m.replies.push_back(std::move(reply));
  Send(c, 1, std::move(m));
  Process(c);
}

void World::CheckWaits(int member) {
  Member& m = members_[static_cast<size_t>(member)];
  if (m.paused || !m.up) return;
  std::vector<uint64_t> ids = m.conns;
  for (uint64_t id : ids) {
    Conn& c = conns_[id];
    if (!c.blocked) continue;
    const Block& b = c.block;
    const int acked = b.aof ? m.node->FsyncedReplicas(b.offset) : m.node->AckedReplicas(b.offset);
    const bool local = !b.aof || b.numlocal == 0 || m.node->config().appendonly;
    if (acked >= b.numreplicas && local) ResolveWait(c);
  }
}

void World::Publish(int member, const Publication& p) {
  const Voter& v = voters_[static_cast<size_t>(members_[static_cast<size_t>(member)].voter)];
  for (int mm : v.members) {
    for (uint64_t id : members_[static_cast<size_t>(mm)].conns) {
      Conn& c = conns_[id];
      const auto& subs = c.session.subscribed;
      if (!c.node_open || std::find(subs.begin(), subs.end(), p.channel) == subs.end()) continue;
      Message m;
      m.kind = Message::Kind::kReplies;
      m.replies.push_back(Reply::Array(
          {Reply::String("message"), Reply::String(p.channel), Reply::String(p.payload)}));
      Send(c, 1, std::move(m));
    }
  }
}

void World::AfterWrite(int member) {
  Member& m = members_[static_cast<size_t>(member)];
  for (size_t r = 0; r < m.stalled.size(); ++r) {
    if (!m.stalled[r]) ScheduleReplication(member, static_cast<int>(r));
  }
}

void World::ScheduleReplication(int member, int replica) {
  Member& m = members_[static_cast<size_t>(member)];
  const int64_t offset = m.node->master_offset();
  const int64_t lag = rng_.Int(config_.replication_lag_us_lo, config_.replication_lag_us_hi) * 1000;
  int64_t& last = m.replicate_at[static_cast<size_t>(replica)];
  const int64_t t = std::max(now_ + lag, last);
  last = t;
  const int gen = m.generation;
  Schedule(t, [this, member, replica, offset, gen] {
    Member& x = members_[static_cast<size_t>(member)];
    if (x.generation != gen || !x.up || x.stalled[static_cast<size_t>(replica)]) return;
    if (x.paused) return;  // caught up on resume
    x.node->Replicate(replica, offset);
    CheckWaits(member);
  });
}

void World::KillMember(int member) {
  Member& m = members_[static_cast<size_t>(member)];
  if (!m.up) return;
  ResetMember(member, "Connection reset by peer", false);
  m.up = false;
  m.paused = false;
  ++m.generation;
}

void World::StartMember(int member, bool keep_data) {
  Member& m = members_[static_cast<size_t>(member)];
  ++m.generation;
  m.node->Restart(keep_data, internal::Sha1Hex(absl::StrCat(m.host, ":", m.generation)));
  m.up = true;
  m.paused = false;
  std::fill(m.replicate_at.begin(), m.replicate_at.end(), now_);
  // What the restart kept or lost, as the simulator's view of the keys sees it.
  std::vector<std::string> keys;
  for (const auto& [mk, holdings] : holdings_) {
    if (mk.first == member) keys.push_back(mk.second);
  }
  if (!keys.empty()) ObserveKeys(member, keys, false, -1);
}

void World::ResumeMember(int member) {
  Member& m = members_[static_cast<size_t>(member)];
  if (!m.paused) return;
  m.paused = false;
  // The sockets are read in the order their bytes arrived.
  std::vector<std::pair<uint64_t, uint64_t>> order;
  for (uint64_t id : m.conns) {
    if (!conns_[id].inbox.empty()) order.emplace_back(conns_[id].inbox_seq, id);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [seq, id] : order) Process(conns_[id]);
  for (size_t r = 0; r < m.stalled.size(); ++r) {
    if (!m.stalled[r]) ScheduleReplication(member, static_cast<int>(r));
  }
  std::vector<uint64_t> ids = m.conns;
  for (uint64_t id : ids) {
    Conn& c = conns_[id];
    if (c.blocked && c.block_deadline > 0 && now_ >= c.block_deadline) {
      // A WAIT whose timeout passed while the server was stopped ends now.
      ResolveWait(c);
    }
  }
  CheckWaits(member);
}

// ---- The nodes' truth -----------------------------------------------------------------------

void World::ObserveKeys(int member, const std::vector<std::string>& keys, bool wrote, int client,
                        bool extension) {
  Member& m = members_[static_cast<size_t>(member)];
  const int64_t ms = NodeMs(member);
  for (const std::string& key : keys) {
    if (absl::EndsWith(key, ":fence")) {
      if (!wrote) continue;
      std::optional<std::string> v = m.node->Get(key, ms);
      auto& list = counters_[{member, key}];
      const std::string value = v.value_or("");
      if (list.empty() || list.back().second != value) {
        list.emplace_back(m.node->master_offset(), value);
      }
      continue;
    }
    if (lock_keys_.count(key) == 0) continue;
    std::optional<std::string> v = m.node->Get(key, ms);
    auto& list = holdings_[{member, key}];
    if (!list.empty() && list.back().to == INT64_MAX) {
      KeyHolding& last = list.back();
      if (v.has_value() && *v == last.token) {
        last.expire_ms = m.node->ExpireAt(key, ms).value_or(-1);  // an extend moves it
        continue;
      }
      last.to = now_;
      last.deleted = last.expire_ms < 0 || ms < last.expire_ms;
    }
    if (v.has_value()) {
      KeyHolding h;
      h.token = *v;
      h.from = now_;
      h.client = client;
      h.offset = wrote ? m.node->master_offset() : 0;
      h.generation = m.generation;
      h.expire_ms = m.node->ExpireAt(key, ms).value_or(-1);
      if (wrote && extension && client >= 0) {
        Violation("H2",
                  absl::StrCat(m.node->config().name, ": an extension by ",
                               clients_[static_cast<size_t>(client)].name, " created lock key ",
                               key, " (token ", v->substr(0, 8),
                               "...): an extend may only prolong a key its lease holds"),
                  {clients_[static_cast<size_t>(client)].name});
      }
      list.push_back(std::move(h));
    }
  }
}

void World::Record(const chaos::Event& e) { events_log_.push_back(e); }

chaos::Event World::NewEvent(chaos::EventType type, int64_t t, int client, int64_t op,
                             const std::string& resource) const {
  chaos::Event e;
  e.type = type;
  e.type_name = std::string(chaos::EventTypeName(type));
  e.t = t;
  if (client >= 0) e.process = clients_[static_cast<size_t>(client)].name;
  e.op = op;
  e.resource = resource;
  return e;
}

chaos::Event World::NemesisEvent(const chaos::FaultKind& kind, const chaos::FaultInstance& f,
                                 std::string detail, chaos::FaultPhase phase) const {
  chaos::Event ev;
  ev.type = chaos::EventType::kNemesis;
  ev.type_name = "nemesis";
  ev.t = now_;
  ev.fault = kind.name();
  ev.target = f.SiteName();
  ev.detail = std::move(detail);
  ev.nodes = f.nodes;
  for (int k : f.clients) ev.clients.push_back(clients_[static_cast<size_t>(k)].name);
  ev.color = kind.info().color;
  ev.phase = phase;
  return ev;
}

// ---- A run ---------------------------------------------------------------------------------

RunOutput World::Run() {
  TraceNodes();
  // The clients, each over its own transport, on its own clock.
  std::vector<VoterSpec> specs;
  for (size_t v = 0; v < voters_.size(); ++v) {
    VoterSpec s;
    s.name = options_.nodes[v].ToString();
    if (voters_[v].config.members > 0) {
      s.seeds = voters_[v].members;
    } else {
      s.member = voters_[v].members[0];
    }
    specs.push_back(std::move(s));
  }
  for (int c = 0; c < config_.clients; ++c) {
    ClientCtx& ctx = clients_[static_cast<size_t>(c)];
    auto modes = std::make_shared<internal::ScriptingModes>(static_cast<int>(voters_.size()));
    auto transport = std::make_unique<SimTransport>(this, c, specs, options_, modes);
    ctx.transport = transport.get();
    ctx.client = std::make_unique<internal::ClientImpl>(options_, std::move(transport),
                                                        ctx.clock_iface.get(), modes, nullptr);
    ctx.alive = true;
    const int64_t start = rng_.Int(0, 20) * 1000000;
    Schedule(start, [this, c] {
      RunForClient(c, [this, c] { clients_[static_cast<size_t>(c)].transport->Start(); });
    });
  }
  StartWorkers();
  ScheduleFaults();
  workload_end_ = config_.duration_ms * 1000000;
  RunUntil(workload_end_);
  Finish();
  return std::move(out_);
}

RunOutput RunSimulation(const RunInput& input, TraceSink* trace) {
  RunOutput out;
  absl::Status valid = CheckConfig(input.config);
  if (!valid.ok()) {
    out.error = std::string(valid.message());
    return out;
  }
  World world(input, trace);
  return world.Run();
}

}  // namespace redlock::sim
