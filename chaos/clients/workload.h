// chaos/clients/workload.h: the client processes of a chaos run.
//
// A client is a PROCESS (redlock-chaos-client), so the harness can pause it
// with SIGSTOP, run it under the clock shim, or as another uid. It loops
//
//   invoke -> acquire (one attempt) -> grant | fail
//          -> use* (read-sleep-write a counter, while TimeLeft covers it)
//          -> release
//
// on a few resources and appends every step to its own JSONL history
// (chaos/history/history.h, HistoryWriter). The counter of resource R lives on a
// separate "data" redis-server that is never faulted, under key "data:R"
// (with fencing: the fence under "fence:R", read and written only through
// redlock/fencing.h's FencedReadScript/FencedWriteScript with the lease's
// fencing token; a STALE reply is recorded as accepted=false).
//
// What a grant records: start and valid_until are the lease's steady-clock
// times mapped to the raw clock (RawFromSteady); drift_ms is the drift
// allowance; fencing_token when fencing is on. `nodes`: the library's Lease
// only says how many nodes granted (nodes_granted), so for the library the
// list is empty unless --inspect-nodes asks the nodes after the grant which
// of them hold the token (Client::Inspect, one more round trip: a superset
// of the granting quorum at that instant, recorded as such); the broken
// variants (tests/chaos/broken_client.h, in the test-only binary
// redlock-chaos-broken-client) know their granting nodes exactly.
//
// A correct client checks before each use that TimeLeft() >= use + guard.
// Between the steps the client also writes one-line markers ("grant 7 r0")
// to an inherited pipe (fd 3), which the harness uses to time its faults
// ("pause this client right after it read the counter").
//
// Thread-safety: ClientProcess and MarkerHub are thread-safe; the rest is
// plain data or single-threaded.

#ifndef REDLOCK_CHAOS_CLIENTS_WORKLOAD_H_
#define REDLOCK_CHAOS_CLIENTS_WORKLOAD_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/lease.h"
#include "redlock/options.h"
#include "testkit/process.h"

namespace redlock::chaos {

// Which lock implementation a client process runs.
enum class ClientVariant {
  kLibrary,  // redlock::Client
  // Deliberately broken, one defect each (test code: tests/chaos/broken_client.h,
  // run by redlock-chaos-broken-client):
  kNoElapsedCheck,    // validity = ttl - drift (the time the round took is ignored)
  kPlainDelRelease,   // release is DEL key (deletes whatever holds the key)
  kWallClock,         // validity measured on system_clock (a wall-clock jump moves it)
  kNoPartialRelease,  // a failed attempt leaves its partial grants in place
  // A semaphore (primitive semaphore) that counts holders per node and
  // grants on a majority: unsafe for K > 1.
  kMajorityCount,
};

// Which lock the client takes (ClientConfig::primitive).
enum class Primitive {
  kMutex,      // redlock::Client (grant mode "exclusive")
  kRwLock,     // redlock::ReadWriteLock: a reader with `shared`, else a writer
  kSemaphore,  // redlock::Semaphore of `permits` (grant mode "slot")
  kElection,   // redlock::Election (grant mode "leader", the term as fencing token)
  // redlock::FairLock (grant mode "fair"; invoke mode "fair" with wait_ms,
  // and a "queued" event once the call's place is on a quorum)
  kFair,
};

// "mutex", "rwlock", "semaphore", "election", "fair"
absl::string_view PrimitiveName(Primitive p);
[[nodiscard]] absl::StatusOr<Primitive> ParsePrimitive(absl::string_view name);

absl::string_view VariantName(ClientVariant v);  // "library", "no-elapsed", ...
[[nodiscard]] absl::StatusOr<ClientVariant> ParseVariant(absl::string_view name);
std::vector<ClientVariant> AllVariants();

// The command line of redlock-chaos-client, as a struct.
struct ClientConfig {
  std::string name = "c1";  // the history's "process"
  ClientVariant variant = ClientVariant::kLibrary;
  // The Redlock client under test: "library" (this library, through
  // `variant`), or an external client run through an adapter
  // (chaos/clients/external_client.h): "node-redlock", "redis-py", or the command
  // line of a user's adapter. External clients have no broken variants.
  std::string client = "library";
  // An external client's adapter must answer each request within this many
  // ms, else the client process fails (0: ttl_ms + 5000).
  int64_t client_timeout_ms = 0;
  // The nodes as this client reaches them (directly or through proxies),
  // "host:port" (or "rediss://host:port" for TLS nodes), in node-index order.
  std::vector<std::string> nodes;
  // TLS nodes: the CA file their certificates chain to, and the name they
  // are checked against (empty: each node's host).
  std::string tls_ca;
  std::string tls_server_name;
  std::string data;     // "host:port" of the data server
  std::string history;  // JSONL file (appended)
  int marker_fd = -1;   // markers, -1: none
  std::vector<std::string> resources = {"r0"};
  int64_t ttl_ms = 1000;
  int64_t use_ms = 20;         // sleep between the read and the write
  int uses_per_lease = 1;      // at most this many uses per lease
  int64_t guard_ms = 100;      // a use needs TimeLeft >= use_ms + guard_ms
  int64_t think_ms = 5;        // pause after a release
  int64_t pre_release_ms = 0;  // pause between the last use and the release
  int64_t retry_ms = 20;       // pause after a failed attempt, +-50 %
  int64_t node_timeout_ms = 50;
  // The drift allowance: ttl * drift_factor + drift_floor_ms
  // (Options::clock_drift_factor and clock_drift_floor; DriftOf).
  double drift_factor = 0.01;
  int64_t drift_floor_ms = absl::ToInt64Milliseconds(redlock::Options().clock_drift_floor);
  bool fencing = false;
  // Options::fencing_counters = kShared: one counter for every resource.
  bool fencing_shared_counter = false;
  // Options::durability: K replicas must confirm each grant (0: off), within
  // this many ms.
  int durability_replicas = 0;
  int64_t durability_timeout_ms = 20;
  // false: never release; wait until the lease's validity has passed (the
  // lease lapses), then go on. The last lease is released at exit.
  bool release = true;
  bool inspect_nodes = false;
  // Extend the lease (to a full ttl) before a use when less than half of it
  // is left, instead of letting it run out: every extension is an "extend"
  // event in the history.
  bool extend = false;
  // The lock family: which primitive, a reader (rwlock), K (semaphore).
  // Readers and permit holders only read the counter in their uses (K
  // holders at once are allowed: a write would lose updates by design).
  Primitive primitive = Primitive::kMutex;
  bool shared = false;
  int permits = 1;
  // The library only: > 0 makes each acquisition wait up to this long (the
  // library's Acquire with a wait: retries, and for a waiting writer the
  // reader-writer lock's writer preference) instead of one attempt.
  int64_t wait_ms = 0;
  // The fair lock: FairOptions::place_ttl (0: the library's default).
  int64_t place_ttl_ms = 0;
  uint64_t seed = 1;
  int64_t duration_ms = 60000;  // the client exits after this long anyway
  int64_t max_ops = 1000000;
};

// "--name=c1 --variant=library ..." and back.
std::vector<std::string> ClientArgs(const ClientConfig& config);
[[nodiscard]] absl::StatusOr<ClientConfig> ParseClientArgs(const std::vector<std::string>& args);

// The drift allowance of a lock of `ttl_ms` at the config's factor and floor,
// by the library's rule (redlock::DriftAllowance).
absl::Duration DriftOf(const ClientConfig& config, int64_t ttl_ms);

// ---- The lock, as the client loop sees it -------------------------------------

struct HeldLock {
  std::string resource;
  std::string token;
  int64_t start_raw = 0;        // the successful attempt began (raw clock)
  int64_t valid_until_raw = 0;  // the end of validity as the client believes it
  int64_t drift_ms = 0;
  std::vector<int> nodes;  // granting nodes, when known
  std::optional<uint64_t> fencing_token;
  redlock::Lease lease;  // the library's lease (kLibrary)
  // The lock family (history grant fields): "" or "exclusive", "shared",
  // "slot", "leader"; K; the permit's index (-1: none or unknown). A
  // read-only holder's uses do not write.
  std::string mode;
  int64_t permits = 0;
  int64_t slot = -1;
  bool read_only = false;
  // Broken variants: their own notion of the end of validity.
  std::chrono::steady_clock::time_point valid_until_steady{};
  std::chrono::system_clock::time_point valid_until_wall{};
};

class LockBackend {
 public:
  virtual ~LockBackend() = default;
  // One attempt. Errors carry the status code recorded in the fail event.
  [[nodiscard]] virtual absl::StatusOr<HeldLock> Acquire(const std::string& resource,
                                                         int64_t ttl_ms) = 0;
  // What the client believes is left of the lease.
  virtual absl::Duration TimeLeft(const HeldLock& lock) = 0;
  // Extends the lease to `ttl_ms` from now: the lock with its new validity.
  // Default: kUnimplemented (a client that cannot extend).
  [[nodiscard]] virtual absl::StatusOr<HeldLock> Extend(const HeldLock& lock, int64_t ttl_ms) {
    return absl::UnimplementedError("this client does not extend leases");
  }
  [[nodiscard]] virtual absl::Status Release(const HeldLock& lock) = 0;
  // Not OK once the backend cannot go on (an external client's adapter
  // exited, answered garbage or timed out): the loop then stops and the
  // client process exits non-zero with this message.
  virtual absl::Status Failure() const { return absl::OkStatus(); }
  // Called (from any thread) when the next Acquire's place in a fair
  // lock's queue is on a quorum; cleared by passing null. Default: never.
  virtual void SetQueuedHook(std::function<void()> hook) {}
};

// redlock::Client with the config's options, or, when config.client names
// an external client, its adapter (MakeExternalBackend,
// chaos/clients/external_client.h). kInvalidArgument for a broken variant: those
// live in the test-only redlock-chaos-broken-client
// (tests/chaos/broken_client.h), never in the shipped client.
[[nodiscard]] absl::StatusOr<std::unique_ptr<LockBackend>> MakeLibraryBackend(
    const ClientConfig& config);

// The client loop: runs until duration_ms, max_ops, or *stop becomes true
// (checked between iterations; set by SIGTERM in the client binary).
// Returns 0 on a clean exit, 3 when the backend failed (Failure()).
// `stop` is set from a signal handler, which may run on any thread of the
// process (the library's I/O thread included): hence a lock-free atomic.
int RunClientLoop(const ClientConfig& config, LockBackend& backend, const std::atomic<bool>* stop);

// main() of a client process binary: parses the command line (ClientArgs),
// ends the loop on SIGTERM/SIGINT, makes the backend with `make_backend` and
// runs RunClientLoop. redlock-chaos-client passes MakeLibraryBackend, the
// test-only redlock-chaos-broken-client MakeBrokenBackend.
using BackendFactory = absl::StatusOr<std::unique_ptr<LockBackend>> (*)(const ClientConfig&);
int ClientMain(int argc, char** argv, BackendFactory make_backend);

// ---- Harness side ----------------------------------------------------------------

// A marker line read from a client: "<kind> <op> <resource> [<detail>]".
struct Marker {
  int64_t seq = 0;   // increasing over the hub
  int64_t t = 0;     // raw clock when read by the harness
  int client = -1;   // index of the client
  std::string kind;  // invoke, grant, fail, use_read, use_end, release, exit
  int64_t op = 0;
  std::string resource;
  std::string detail;  // fail: the status code (e.g. DEADLINE_EXCEEDED)
  // (kinds: also "queued", a fair call's place taken; written from the
  // library's thread)
};

class MarkerHub {
 public:
  void Push(Marker m);
  int64_t last_seq() const;
  // The first marker with seq > after_seq that matches, waiting up to
  // `timeout` (and not past Interrupted()).
  std::optional<Marker> Wait(int64_t after_seq, absl::Duration timeout,
                             const std::function<bool(const Marker&)>& match);
  // Every marker with seq > after_seq, waiting up to `timeout` for the first.
  std::vector<Marker> Since(int64_t after_seq, absl::Duration timeout);
  // The latest marker of client `client`, if any.
  std::optional<Marker> Last(int client) const;

 private:
  // The first marker with seq > after_seq (markers_ is ordered by seq).
  std::deque<Marker>::const_iterator After(int64_t after_seq) const;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Marker> markers_;
  int64_t next_seq_ = 1;
};

struct ClientLaunch {
  ClientConfig config;
  std::string binary;                                    // redlock-chaos-client
  int index = 0;                                         // in the hub
  int uid = -1;                                          // run as this uid (partition scenarios)
  std::vector<std::pair<std::string, std::string>> env;  // e.g. the clock shim
  std::string log_path;                                  // stdout+stderr
};

class ClientProcess {
 public:
  // Creates the history file (owned by `uid` if set), the marker pipe and the
  // reader thread, and spawns the client (a testkit::Process whose pid is
  // registered with chaos/base/cleanup.h while it runs).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ClientProcess>> Spawn(ClientLaunch launch,
                                                                            MarkerHub* hub);
  // SIGKILL (by pid) if still running, reap, join the reader.
  ~ClientProcess();
  ClientProcess(const ClientProcess&) = delete;
  ClientProcess& operator=(const ClientProcess&) = delete;

  const std::string& name() const { return launch_.config.name; }
  const std::string& log_path() const { return launch_.log_path; }
  const ClientConfig& config() const { return launch_.config; }
  pid_t pid() const { return process_->pid(); }  // -1 once reaped
  bool paused() const { return paused_; }
  bool exited();

  // SIGSTOP / SIGCONT. An external client (ClientConfig::client) leads its
  // own process group with its adapter: the whole group is signalled.
  [[nodiscard]] absl::Status Pause();
  [[nodiscard]] absl::Status Resume();
  // SIGKILL now (a crash: nothing the client does is finished or logged),
  // and reap. kFailedPrecondition when it has exited already.
  [[nodiscard]] absl::Status Crash();
  // Crash() ended it (its SIGKILL is no failure of the run).
  bool crashed() const { return crashed_; }
  // SIGCONT, SIGTERM, wait up to `timeout` for a clean exit, then SIGKILL.
  // Returns the wait status description ("exit 0", "signal 9 (killed after
  // timeout)").
  std::string Stop(absl::Duration timeout);

 private:
  ClientProcess(ClientLaunch launch, MarkerHub* hub) : launch_(std::move(launch)), hub_(hub) {}
  void ReadMarkers();
  // Waits up to `timeout` for the exit; true once reaped.
  bool Reap(absl::Duration timeout);
  void KillAndReap();
  absl::Status SignalGroup(int sig);

  ClientLaunch launch_;
  MarkerHub* hub_;
  std::unique_ptr<testkit::Process> process_;
  std::atomic<bool> reaped_{false};
  int wait_status_ = 0;
  bool paused_ = false;
  bool crashed_ = false;
  int read_fd_ = -1;
  std::thread reader_;
};

// Waits until each of `clients` (client k reports as index k in `hub`) has
// made its first attempt, up to `timeout` for each. kDeadlineExceeded names
// the first that has not, with each of its threads' state and kernel wait
// channel (/proc) and the end of its log: a start-up that hangs only under
// load says where it was.
[[nodiscard]] absl::Status AwaitFirstAttempts(
    MarkerHub& hub, const std::vector<std::unique_ptr<ClientProcess>>& clients,
    absl::Duration timeout);

// The data server seen from the harness: counter keys and their final values.
std::string DataKey(absl::string_view resource);   // "data:R"
std::string FenceKey(absl::string_view resource);  // "fence:R"

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_CLIENTS_WORKLOAD_H_
