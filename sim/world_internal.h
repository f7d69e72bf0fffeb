// sim/world_internal.h: the World's parts, shared by world.cc (scheduler,
// clocks, network, nodes), sim_faults.cc (the fault kinds), workload.cc
// (the clients' loops) and judge.cc (the properties and the judging).
// Private to sim/.

#ifndef REDLOCK_SIM_WORLD_INTERNAL_H_
#define REDLOCK_SIM_WORLD_INTERNAL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "chaos/history/history.h"
#include "redlock/election.h"
#include "redlock/internal/client_impl.h"
#include "redlock/lease.h"
#include "redlock/renewal.h"
#include "sim/node.h"
#include "sim/random.h"
#include "sim/transport.h"
#include "sim/world.h"

namespace redlock::sim {

// A clock that runs at `rate` times true time and may jump:
// value(t) = base_value + (t - base_t) * rate, in nanoseconds.
struct ClockModel {
  int64_t base_t = 0;
  int64_t base_value = 0;
  double rate = 1.0;
  int64_t At(int64_t t) const {
    return base_value + static_cast<int64_t>(static_cast<double>(t - base_t) * rate);
  }
  // The first true time at which the clock reads `value` or more (from `now`).
  int64_t When(int64_t value, int64_t now) const;
  void Jump(int64_t now, int64_t by) {
    base_value = At(now) + by;
    base_t = now;
  }
};

class World;

// The simulated internal::Clock of one client.
class SimClock final : public internal::Clock {
 public:
  SimClock(World* world, int client) : world_(world), client_(client) {}
  TimePoint Now() const override;

 private:
  World* world_;
  int client_;
};

struct Member {
  std::unique_ptr<Node> node;
  int voter = 0;
  std::string host;
  int port = 0;
  std::string id;    // CLUSTER SLOTS' node id
  ClockModel clock;  // the node's wall clock (ns)
  bool up = true;
  bool paused = false;
  int generation = 0;                 // restarts and failovers
  std::vector<bool> stalled;          // per replica
  std::vector<int64_t> replicate_at;  // per replica: the last replication scheduled
  std::vector<uint64_t> conns;        // open, in opening order
  int64_t strobe_by = 0;              // a clock strobe's amplitude while active
};

struct Voter {
  NodeConfig config;
  std::vector<int> members;
  std::vector<int> slot_owner;  // a cluster: slot -> member
};

// One message on a connection.
struct Message {
  enum class Kind { kSyn, kCommands, kFin, kAccepted, kReplies, kReset };
  Kind kind = Kind::kCommands;
  std::vector<Argv> commands;
  std::vector<Reply> replies;
  std::string why;
};

struct Conn {
  uint64_t id = 0;
  int client = 0;
  int member = 0;
  Session session;
  bool client_open = true;           // the client has not closed it
  bool node_open = false;            // accepted, not reset or closed on the node's side
  int64_t last_arrival[2] = {0, 0};  // 0: to the node, 1: to the client
  std::deque<Message> held[2];       // held by a fault (delivered on heal)
  std::deque<Argv> inbox;            // arrived, not yet executed
  uint64_t inbox_seq = 0;            // arrival order of the oldest in the inbox
  bool blocked = false;              // a WAIT is pending
  Block block;
  Argv block_argv;             // the WAIT or WAITAOF that blocked (for the trace)
  int64_t block_deadline = 0;  // true time its timeout ends (0: none)
  uint64_t block_gen = 0;
  int generation = 0;  // the member's when accepted
  // A message of it was dropped (blackhole, ack_loss) while it stayed open;
  // the first time one was.
  bool dropped = false;
  int64_t dropped_at = 0;
};

// What one lasting or instant fault does while active.
struct ActiveFault {
  uint64_t id = 0;
  const chaos::FaultKind* kind = nullptr;
  chaos::FaultInstance instance;
  std::vector<int> voters;
  std::vector<int> clients;
  // Network effects: which links, which direction (0 to the node, 1 back).
  std::set<std::pair<int, int>> links;  // (client, voter); empty: every client
  bool dir[2] = {false, false};
  enum class Effect { kNone, kDrop, kHold, kLatency, kRefuse, kResetAfterReply };
  Effect effect = Effect::kNone;
  int64_t latency_lo = 0, latency_hi = 0;  // ns
  // slot_migration: the slot, the voter, its members from and to.
  int slot = -1, slot_voter = -1, from = -1, to = -1;
  // clock_strobe: how far and how often the clocks flip.
  int64_t strobe_amplitude = 0, strobe_period = 0;
  size_t injected_index = 0;  // into RunOutput::injected
};

// Per client: its library client, clock, events and worker.
struct ClientCtx {
  int index = 0;
  std::string name;  // "c1"
  ClockModel clock;
  std::unique_ptr<SimClock> clock_iface;
  SimTransport* transport = nullptr;  // owned by `client`
  std::unique_ptr<internal::ClientImpl> client;
  bool alive = false;
  bool paused = false;
  int64_t paused_since = 0;
  int64_t paused_total = 0;
  std::deque<absl::AnyInvocable<void()>> deferred;  // arrived while paused
  // Events on the client's clock: (client time, seq) -> fn.
  std::map<std::pair<int64_t, uint64_t>, absl::AnyInvocable<void()>> timed;
  int64_t wake_at = INT64_MAX;  // true time of the scheduled wake-up
  uint64_t wake_gen = 0;
};

// One call of a worker, for the deadline property (L4).
struct Call {
  std::string what;
  int64_t start = 0;   // true time
  int64_t budget = 0;  // ns of the client's running time
  int64_t paused_at_start = 0;
  bool done = false;
};

// The current hold of a worker.
struct Hold {
  std::vector<int64_t> ops;            // the history's op of each resource
  std::vector<std::string> resources;  // the history's resources
  std::vector<Lease> leases;           // one per resource (a MultiLease's)
  std::string token;
  std::string mode;
  int64_t permits = 0;
  int64_t slot = -1;
  bool read_only = false;
  std::vector<std::optional<uint64_t>> fencing;  // per resource
  std::unique_ptr<Leadership> leader;
  std::unique_ptr<Renewal> renewal;
  bool lost = false;
  int uses = 0;
  int64_t seen_valid_until = 0;  // the lease's valid_until last recorded (client ns)
};

struct Worker {
  int client = 0;
  bool reader = false;
  int64_t op = 0;
  std::vector<int64_t> ops;  // of the current call, one per resource
  bool stopped = false;      // the workload is over: no new call
  bool idle = true;          // between calls (nothing held, nothing pending)
  std::optional<Hold> hold;
  std::optional<Call> call;
  bool in_use = false;      // between a use's read and its write
  std::string last_marker;  // what the lab's Run::ClientInUse reads
  // Tokens drawn by the current acquisition, and its last attempt's (H1).
  std::set<std::string> tokens;
  std::string last_token;
  int64_t invoked_at = 0;
  std::vector<std::string> invoked_resources;
  // The fair call's invoke record (into events_log_), whose wait the end
  // of the call may shorten (World::WorkerAcquired).
  size_t fair_invoke = SIZE_MAX;
};

// Who held a lock key on a member: intervals by token (H1, D1).
struct KeyHolding {
  std::string token;
  int64_t from = 0;
  int64_t to = INT64_MAX;
  int client = -1;
  int64_t offset = 0;  // the write that set it (replication offset)
  int generation = 0;
  int64_t expire_ms = -1;  // its expiry time in the node's ms, as last seen (-1: none)
  bool deleted = false;    // it ended before that expiry (a DEL, an overwrite, a lost dataset)
};

class World final : public TransportHost {
 public:
  World(const RunInput& input, TraceSink* trace);
  ~World() override;
  RunOutput Run();

  // TransportHost.
  int64_t ClientNow(int client) override;
  void At(int client, int64_t at, absl::AnyInvocable<void()> fn) override;
  void Post(int client, absl::AnyInvocable<void()> fn) override;
  uint64_t Connect(int client, int member) override;
  void Write(uint64_t conn, std::vector<Argv> commands, int64_t handed_at) override;
  void Close(uint64_t conn) override;
  int MemberAt(const std::string& host, int port) override;

  int64_t now() const { return now_; }
  void OnToken(const unsigned char* bytes, size_t n);

 private:
  // ---- Scheduler (world.cc) ----
  struct Event {
    int64_t t;
    uint64_t seq;
    absl::AnyInvocable<void()> fn;
  };
  void Schedule(int64_t t, absl::AnyInvocable<void()> fn);
  void RunUntil(int64_t t_end);
  void RunForClient(int client, absl::AnyInvocable<void()> fn);
  void WakeClient(int client);
  void RearmWake(int client);
  void PauseClient(int client);
  void ResumeClient(int client);

  // ---- Network and nodes (world.cc) ----
  void Send(Conn& c, int dir, Message m);
  void Arrive(uint64_t conn, int dir, Message m);
  void Process(Conn& c);
  void ExecuteOne(Conn& c, const Argv& argv, std::vector<Reply>* replies);
  void ResolveWait(Conn& c);
  void CheckWaits(int member);
  void Publish(int member, const Publication& p);
  void ResetConn(Conn& c, const std::string& why, bool tell_client);
  void ResetMember(int member, const std::string& why, bool command_only);
  void KillMember(int member);
  void StartMember(int member, bool keep_data);
  void ResumeMember(int member);
  void AfterWrite(int member);
  void ScheduleReplication(int member, int replica);
  int64_t NodeMs(int member) const;
  int64_t Latency(const Conn& c, int dir);
  ActiveFault::Effect LinkEffect(const Conn& c, int dir, int64_t* extra) const;
  void ReleaseHeld();
  Reply ClusterSlots(int voter) const;
  // What commands did to the lock keys: holdings_ (`extension`: the command
  // only prolongs keys, H2).
  void ObserveKeys(int member, const std::vector<std::string>& keys, bool wrote, int client,
                   bool extension = false);
  void ObserveMovedKeys(int from, int to);
  // Gives each master of cluster node `voter` the others' slots as the
  // world's map has them (Node::SetClusterPeers): MOVED names the owner.
  void SyncClusterPeers(int voter);
  void TraceNodes();  // each node's config line (sim/trace.h), once at the start
  void Trace(const Conn& c, const Argv& argv, const Reply& reply, bool blocked = false);

  // ---- Faults (sim_faults.cc) ----
  void ScheduleFaults();
  void Inject(const FaultEvent& e, int marker_client);
  void Heal(uint64_t id);
  void StrobeFlip(uint64_t id, bool up);
  void MigrateStep(uint64_t id);
  void OnMarker(int client, const std::string& kind);

  // ---- Workload (workload.cc) ----
  void StartWorkers();
  void WorkerNext(int client);
  void WorkerAcquired(int client, absl::StatusOr<Hold> held);
  void WorkerUse(int client);
  void WorkerUseNow(int client);
  void WorkerWrite(int client, int64_t begin, std::vector<int64_t> read);
  void WorkerRelease(int client);
  void WorkerDone(int client);
  void WorkerSleep(int client, int64_t ms, absl::AnyInvocable<void()> fn);
  void NoteExtension(int client);
  void BeginCall(int client, const std::string& what, int64_t budget_ms);
  void EndCall(int client);
  int64_t TrueFromClient(int client, Lease::TimePoint tp);
  std::string ResourceName(int i) const;
  std::vector<std::string> LockKeys(const std::vector<std::string>& resources) const;

  // ---- End of run and properties (judge.cc) ----
  void Finish();
  void ScanKeys();
  void CheckCleanup();
  // Whether an injected fault acted at some time in [from, to] (true time).
  bool AnyFaultBetween(int64_t from, int64_t to) const;
  // Per client, when one of its connections first lost a message in the
  // middle (its replies may pair with the wrong requests from then on).
  std::map<int, int64_t> DesyncedSince() const;
  void CheckValidityBacked();
  void CheckLiveness();
  void CheckAskedAgain();
  void CheckRecovery();
  void CheckDurableGrant(int client, const Hold& h);
  void CheckHeldRefusal(int client, const std::string& code);
  void CheckRefusedNodes(int client, const absl::Status& status);
  // The primitive's scripts have no script-free form (the lock family and
  // the fair lock): nodes that forbid scripting refuse it.
  bool ScriptsOnly() const;
  int ScriptingVoters() const;  // voters that allow scripting
  // How long after the last fault healed the clients have reconnected and
  // probed every node again (L2, H1's refusals).
  int64_t SettleWindow() const;
  void JudgeAll();
  bool RetryCutShort(const SimViolation& v) const;
  void Violation(const std::string& property, const std::string& description,
                 std::vector<std::string> processes = {});

  // ---- State ----
  RunInput input_;
  const SimConfig& config_;
  TraceSink* trace_;
  Options options_;
  Rng rng_;      // the world's draws (latencies, workload choices)
  Rng net_rng_;  // latencies only
  std::unique_ptr<SeededRandomSource> library_random_;
  internal::RandomSource* previous_random_ = nullptr;
  int64_t now_ = 0;
  uint64_t seq_ = 0;
  std::vector<Event> heap_;
  int64_t events_ = 0;
  int64_t same_time_ = 0;
  std::vector<Voter> voters_;
  std::vector<Member> members_;
  std::map<uint64_t, Conn> conns_;
  uint64_t next_conn_ = 1;
  std::vector<ClientCtx> clients_;
  std::vector<Worker> workers_;
  int current_client_ = -1;
  // The store the locks protect: per resource, the counter and its fence.
  struct Store {
    int64_t value = 0;
    uint64_t fence = 0;
  };
  std::map<std::string, Store> store_;
  // History (JSON lines) and the events as the checker reads them.
  std::vector<chaos::Event> events_log_;
  void Record(const chaos::Event& e);
  // An event of `type` at true time `t` by `client` (-1: none) on its
  // call `op` and `resource`; the caller adds the type's own fields.
  // A use of the store by `client` on resource `i` of its hold, begun at
  // `begin`, ending now; `fencing`: the token the store checked, if any.
  struct UseResult {
    int64_t read = -1;   // the value read, -1: refused
    int64_t wrote = -1;  // the value written, the read for a read-only use
    bool accepted = false;
    int64_t write_at = 0;  // 0: not recorded
  };
  void RecordUse(int client, const Hold& h, size_t i, int64_t begin, UseResult result,
                 std::optional<uint64_t> fencing);
  chaos::Event NewEvent(chaos::EventType type, int64_t t, int client, int64_t op,
                        const std::string& resource) const;
  // A fault's nemesis event at now_: its start or instant (detail: what was
  // done) or its stop ("healed").
  chaos::Event NemesisEvent(const chaos::FaultKind& kind, const chaos::FaultInstance& f,
                            std::string detail, chaos::FaultPhase phase) const;
  // Faults.
  std::map<uint64_t, ActiveFault> active_;
  uint64_t next_fault_ = 1;
  std::vector<std::pair<size_t, const FaultEvent*>> waiting_markers_;  // (index, event)
  int64_t last_heal_ = 0;
  std::set<int> forgot_voters_;  // lost data (restart or kill without aof, failover)
  // When a node's dataset was replaced (restart, kill and its start,
  // failover), whatever was confirmed: D1 does not judge across them.
  std::vector<std::pair<int64_t, int64_t>> data_faults_;
  // Truth of the nodes.
  std::map<std::pair<int, std::string>, std::vector<KeyHolding>> holdings_;
  std::map<std::pair<int, std::string>, std::vector<std::pair<int64_t, std::string>>> counters_;
  std::set<std::string> lock_keys_;
  std::map<std::string, std::set<std::string>> grant_tokens_;  // resource -> tokens granted
  std::set<std::string> all_grant_tokens_;
  // Acquisition requests per (client, voter), by true time (L2).
  std::map<std::pair<int, int>, std::vector<int64_t>> asked_;
  std::map<int, std::vector<int64_t>> invokes_;  // per client
  // TRYAGAIN answers not yet retried (L3): (client, voter, key) -> (t, deadline).
  std::map<std::tuple<int, int, std::string>, std::pair<int64_t, int64_t>> tryagain_;
  // Per (client, voter, command), on the client's clock: when the library
  // handed the command to the transport first in its current chain of
  // TRYAGAIN retries (the library's deadline runs from it), and when its
  // last TRYAGAIN came.
  std::map<std::tuple<int, int, std::string>, std::pair<int64_t, int64_t>> tryagain_chain_;
  // (client, voter, command) answered MOVED or ASK: its next send is a copy
  // that continues the TRYAGAIN chain (L3).
  std::set<std::tuple<int, int, std::string>> redirected_;
  // Per (client, lock token): the commands (RetryKey) the client wrote that
  // carry the token. A second kind means the attempt moved on (its release,
  // its fencing commit): decided by the other nodes, so a TRYAGAIN that
  // comes after that need not be retried (L3).
  std::map<std::pair<int, std::string>, std::set<std::string>> token_commands_;
  // Grants (true time), for L1.
  std::vector<int64_t> grant_times_;
  // Properties.
  RunOutput out_;
  int64_t workload_end_ = 0;
  bool finishing_ = false;
};

// The world whose events run now (the token observer needs it).
World* CurrentWorld();

}  // namespace redlock::sim

#endif  // REDLOCK_SIM_WORLD_INTERNAL_H_
