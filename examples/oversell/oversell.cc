// oversell: the inventory scenario redlock exists for (README.md next to
// this file).
//
// A stock of K units lives in a Redis data server. M worker processes each
// loop: read the stock, pause briefly (the business logic), and if it was
// positive write it back decremented and record an order. The same workers
// run in several modes and a table shows stock, orders and overselling:
//
//   no lock                    read-pause-write races: more orders than stock
//   redlock                    one holder at a time: exactly K orders
//   redlock, clock jump        Kleppmann's scenario: half of the workers are
//                              cut off from two of the five lock nodes, and
//                              whenever the middle node grants the lock its
//                              wall clock leaps forward (the clock shim), so
//                              its key expires early and a second worker can
//                              get a majority while the first still holds
//                              the lock: the plain lock may oversell
//   redlock + fencing, clock jump
//                              the same, with the lease's fencing token
//                              checked by the data server on every read and
//                              write (redlock/fencing.h): never oversells
//
//   build/examples/oversell/oversell            # all modes, well under a minute
//   build/examples/oversell/oversell --quick --check   # what ctest runs

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "examples/oversell/worker.h"
#include "testkit/files.h"
#include "testkit/fleet.h"
#include "testkit/process.h"
#include "testkit/redis.h"

#ifdef REDLOCK_OVERSELL_CLOCK_JUMP
#include "testkit/clock_control.h"
#endif

ABSL_FLAG(int, stock, 0, "Units in stock at the start of each mode (0: 20, or 10 with --quick).");
ABSL_FLAG(int, workers, 0, "Worker processes per mode (0: 8, or 6 with --quick).");
ABSL_FLAG(absl::Duration, pause, absl::Milliseconds(25),
          "Pause between reading and writing the stock (the business logic).");
ABSL_FLAG(absl::Duration, ttl, absl::Seconds(10), "Lock ttl.");
ABSL_FLAG(std::string, modes, "no-lock,lock,clock-jump,fenced-clock-jump",
          "Modes to run, comma-separated: no-lock, lock, clock-jump, fenced-clock-jump.");
ABSL_FLAG(bool, quick, false, "Smaller stock and fewer workers (what ctest runs).");
ABSL_FLAG(bool, check, false,
          "Exit 1 unless: no-lock sells at least the stock and oversells, lock sells exactly "
          "the stock, fenced never oversells.");
ABSL_FLAG(std::string, redis_server, "",
          "The server binary (default: the server $REDLOCK_SERVER names, else Debian's "
          "redis-server).");

// Internal: how the example re-runs itself as a worker process.
ABSL_FLAG(bool, worker, false, "internal: run as a worker process");
ABSL_FLAG(int, worker_id, 0, "internal");
ABSL_FLAG(std::string, worker_mode, "none", "internal: none, lock or fenced");
ABSL_FLAG(std::string, data, "", "internal: the data server, host:port");
ABSL_FLAG(std::string, nodes, "", "internal: the lock nodes, host:port,...");

namespace oversell {
namespace {

using redlock::testkit::Fleet;
using redlock::testkit::FleetOptions;
using redlock::testkit::Process;
using redlock::testkit::RedisConnection;
using redlock::testkit::RedisValue;

// The node whose clock jumps, and the two nodes half of the workers cannot
// reach, in Kleppmann's naming A..E = 0..4.
constexpr int kJumpingNode = 2;

struct Mode {
  std::string flag;   // --modes name
  std::string title;  // table row
  LockMode lock;
  bool clock_jump;
};

const std::vector<Mode>& AllModes() {
  static const std::vector<Mode>* const modes = new std::vector<Mode>{
      {"no-lock", "no lock", LockMode::kNone, false},
      {"lock", "redlock", LockMode::kLock, false},
      {"clock-jump", "redlock, clock jump", LockMode::kLock, true},
      {"fenced-clock-jump", "redlock + fencing, clock jump", LockMode::kFenced, true},
  };
  return *modes;
}

struct Outcome {
  bool ran = false;
  std::string skipped;  // why not run
  long long stock = 0;
  long long orders = 0;
  long long left = 0;
  long long stale = 0;
  int jumps = 0;
  int failed_workers = 0;
  absl::Duration elapsed;

  long long oversold() const { return orders > stock ? orders - stock : 0; }
};

const char* ModeArg(LockMode m) {
  switch (m) {
    case LockMode::kNone:
      return "none";
    case LockMode::kLock:
      return "lock";
    case LockMode::kFenced:
      return "fenced";
  }
  return "none";
}

// This program again, as a worker process (its messages go to our stderr).
std::unique_ptr<Process> SpawnWorker(std::vector<std::string> args) {
  redlock::testkit::ProcessOptions o;
  o.argv = std::move(args);
  o.executable = "/proc/self/exe";
  o.stdout_to = redlock::testkit::Stream::kInherit;
  o.stderr_to = redlock::testkit::Stream::kInherit;
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Start(std::move(o));
  if (!p.ok()) {
    std::fprintf(stderr, "oversell: starting a worker: %s\n", p.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(p);
}

// A connection to `address` (host:port).
absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(const std::string& address) {
  absl::StatusOr<redlock::Endpoint> node = redlock::ParseEndpoint(address);
  if (!node.ok()) return node.status();
  auto conn = std::make_unique<RedisConnection>(*node);
  if (absl::Status st = conn->Connect(absl::Seconds(5), absl::Seconds(5)); !st.ok()) return st;
  return conn;
}

// The integer reply of `args`, or the integer in a string reply (nil: 0).
absl::StatusOr<long long> Integer(RedisConnection& conn, const std::vector<std::string>& args) {
  absl::StatusOr<RedisValue> r = conn.Command(args);
  if (!r.ok()) return r.status();
  long long v = 0;
  switch (r->type) {
    case RedisValue::Type::kInteger:
      return r->integer;
    case RedisValue::Type::kNil:
      return 0;
    case RedisValue::Type::kString:
      if (absl::SimpleAtoi(r->str, &v)) return v;
      break;
    case RedisValue::Type::kError:
      return absl::InternalError(absl::StrCat(args[0], ": ", r->str));
    default:
      break;
  }
  return absl::InternalError(absl::StrCat(args[0], ": not an integer reply"));
}

class Demo {
 public:
  absl::Status Start() {
    stock_ = absl::GetFlag(FLAGS_stock);
    if (stock_ <= 0) stock_ = absl::GetFlag(FLAGS_quick) ? 10 : 20;
    workers_ = absl::GetFlag(FLAGS_workers);
    if (workers_ <= 0) workers_ = absl::GetFlag(FLAGS_quick) ? 6 : 8;

    FleetOptions lock_nodes;
    lock_nodes.nodes = 5;
    lock_nodes.redis_server = absl::GetFlag(FLAGS_redis_server);
#ifdef REDLOCK_OVERSELL_CLOCK_JUMP
    clock_dir_ = std::make_unique<redlock::testkit::TempDir>("redlock-oversell");
    if (clock_dir_->path().empty()) return absl::InternalError("mkdtemp failed");
    absl::StatusOr<std::unique_ptr<redlock::testkit::ClockControl>> clock =
        redlock::testkit::ClockControl::Create(clock_dir_->path() + "/node2.clock");
    if (!clock.ok()) return clock.status();
    clock_ = *std::move(clock);
    lock_nodes.node_env.resize(kJumpingNode + 1);
    lock_nodes.node_env[kJumpingNode] = clock_->ProcessEnv();
#endif
    absl::StatusOr<std::unique_ptr<Fleet>> fleet = Fleet::Start(lock_nodes);
    if (!fleet.ok()) return fleet.status();
    lock_fleet_ = *std::move(fleet);

    FleetOptions data_node;
    data_node.nodes = 1;
    data_node.redis_server = lock_nodes.redis_server;
    fleet = Fleet::Start(data_node);
    if (!fleet.ok()) return fleet.status();
    data_fleet_ = *std::move(fleet);

    // Two loopback ports nobody listens on: "D and E cannot be reached".
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<int> port = redlock::testkit::PickFreePort("127.0.0.1");
      if (!port.ok()) return port.status();
      unreachable_.push_back(absl::StrCat("127.0.0.1:", *port));
    }
    absl::StatusOr<std::unique_ptr<RedisConnection>> data = Connect(data_fleet_->address(0));
    if (!data.ok()) return data.status();
    data_ = *std::move(data);
    return absl::OkStatus();
  }

  ~Demo() {
#ifdef REDLOCK_OVERSELL_CLOCK_JUMP
    clock_.reset();  // before its directory goes
#endif
  }

  int stock() const { return stock_; }
  int workers() const { return workers_; }

  absl::StatusOr<Outcome> Run(const Mode& mode) {
    Outcome out;
    out.stock = stock_;
#ifndef REDLOCK_OVERSELL_CLOCK_JUMP
    if (mode.clock_jump) {
      out.skipped = "needs the clock shim: build with REDLOCK_BUILD_CHAOS=ON";
      return out;
    }
#endif
    // Fresh state: the stock, and no lock or fencing counter left over.
    for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
             {"FLUSHALL"}, {"SET", kStockKey, std::to_string(stock_)}}) {
      absl::StatusOr<RedisValue> r = data_->Command(cmd);
      if (!r.ok()) return r.status();
    }
    if (absl::Status st = lock_fleet_->FlushAll(); !st.ok()) return st;

    // All nodes, or (half of the workers in the clock-jump modes) only A, B
    // and C: D and E are unreachable for them.
    std::vector<std::string> all, partial;
    for (int i = 0; i < lock_fleet_->size(); ++i) {
      all.push_back(lock_fleet_->address(i));
      partial.push_back(i < 3 ? lock_fleet_->address(i) : unreachable_[static_cast<size_t>(i - 3)]);
    }
    std::vector<std::unique_ptr<Process>> procs;
    for (int i = 0; i < workers_; ++i) {
      const bool cut_off = mode.clock_jump && i % 2 == 0;
      std::unique_ptr<Process> worker = SpawnWorker({
          "oversell",
          "--worker",
          absl::StrCat("--worker_id=", i),
          absl::StrCat("--worker_mode=", ModeArg(mode.lock)),
          absl::StrCat("--data=", data_fleet_->address(0)),
          absl::StrCat("--nodes=", absl::StrJoin(cut_off ? partial : all, ",")),
          absl::StrCat("--pause=", absl::FormatDuration(absl::GetFlag(FLAGS_pause))),
          absl::StrCat("--ttl=", absl::FormatDuration(absl::GetFlag(FLAGS_ttl))),
      });
      if (worker != nullptr) procs.push_back(std::move(worker));
    }

    // Start them together, once every worker is connected.
    absl::Time ready_deadline = absl::Now() + absl::Seconds(20);
    for (;;) {
      absl::StatusOr<long long> ready = Integer(*data_, {"GET", kReadyKey});
      if (!ready.ok()) return ready.status();
      if (*ready >= static_cast<long long>(procs.size())) break;
      if (absl::Now() > ready_deadline) break;  // the workers' own barrier times out
      absl::SleepFor(absl::Milliseconds(5));
    }
    std::vector<std::string> go = {"RPUSH", kGoKey};
    for (size_t i = 0; i < procs.size(); ++i) go.push_back("go");
    if (absl::StatusOr<RedisValue> r = data_->Command(go); !r.ok()) return r.status();
    const absl::Time start = absl::Now();

    std::atomic<bool> stop{false};
    std::atomic<int> jumps{0};
    std::thread controller;
#ifdef REDLOCK_OVERSELL_CLOCK_JUMP
    if (mode.clock_jump) {
      controller = std::thread([&] { JumpClockOnGrant(stop, jumps); });
    }
#endif

    // Reap the workers (bounded: they give up on their own after 40 s).
    absl::Time deadline = absl::Now() + absl::Seconds(60);
    for (std::unique_ptr<Process>& worker : procs) {
      std::optional<int> status =
          worker->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
      if (!status.has_value()) status = worker->Kill();  // our own worker, by pid
      if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) ++out.failed_workers;
    }
    out.failed_workers += workers_ - static_cast<int>(procs.size());
    out.elapsed = absl::Now() - start;
    stop = true;
    if (controller.joinable()) controller.join();
    out.jumps = jumps.load();

    absl::StatusOr<long long> left = Integer(*data_, {"GET", kStockKey});
    absl::StatusOr<long long> orders = Integer(*data_, {"LLEN", kOrdersKey});
    absl::StatusOr<long long> stale = Integer(*data_, {"GET", kStaleKey});
    for (const absl::Status& st : {left.status(), orders.status(), stale.status()}) {
      if (!st.ok()) return st;
    }
    out.ran = true;
    out.left = *left;
    out.orders = *orders;
    out.stale = *stale;
    return out;
  }

 private:
#ifdef REDLOCK_OVERSELL_CLOCK_JUMP
  // The chaos: watch the middle node, and as soon as it holds a lock token
  // it had not held before, leap its wall clock forward past the ttl. Redis
  // expires keys by the wall clock, so that key is gone at once, long before
  // its holder's validity ends.
  void JumpClockOnGrant(std::atomic<bool>& stop, std::atomic<int>& jumps) {
    absl::StatusOr<std::unique_ptr<RedisConnection>> node =
        Connect(lock_fleet_->address(kJumpingNode));
    if (!node.ok()) {
      std::fprintf(stderr, "oversell: clock controller: %s\n", node.status().ToString().c_str());
      return;
    }
    std::string last;
    const absl::Duration leap = absl::GetFlag(FLAGS_ttl) + absl::Seconds(1);
    // Bounded by the mode's own deadline (60 s) at 1 ms a turn.
    for (int turn = 0; turn < 60000 && !stop.load(); ++turn) {
      absl::StatusOr<RedisValue> r = (*node)->Command({"GET", kResource});
      if (!r.ok()) return;
      if (r->type == RedisValue::Type::kString) {
        if (r->str != last) {
          last = r->str;
          if (clock_->JumpBy(leap).ok()) ++jumps;
          // Touch the key so that Redis drops it now.
          (void)(*node)->Command({"EXISTS", kResource});
        }
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  std::unique_ptr<redlock::testkit::ClockControl> clock_;
#endif
  std::unique_ptr<redlock::testkit::TempDir> clock_dir_;
  int stock_ = 0;
  int workers_ = 0;
  std::unique_ptr<Fleet> lock_fleet_;
  std::unique_ptr<Fleet> data_fleet_;
  std::unique_ptr<RedisConnection> data_;
  std::vector<std::string> unreachable_;
};

int RunDemo() {
  absl::Status available = redlock::testkit::CheckRedisServerAvailable();
  if (absl::IsFailedPrecondition(available)) {
    std::printf("SKIP: %s\n", std::string(available.message()).c_str());
    return 77;
  }
  if (!available.ok()) {
    std::fprintf(stderr, "oversell: %s\n", std::string(available.message()).c_str());
    return 1;
  }
  std::vector<Mode> modes;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_modes), ',', absl::SkipEmpty())) {
    bool found = false;
    for (const Mode& m : AllModes()) {
      if (m.flag == name) {
        modes.push_back(m);
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "oversell: unknown mode '%s' (see --help)\n", std::string(name).c_str());
      return 2;
    }
  }

  Demo demo;
  if (absl::Status st = demo.Start(); !st.ok()) {
    std::fprintf(stderr, "oversell: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("stock %d, %d worker processes, pause %s between read and write, 5 lock nodes\n\n",
              demo.stock(), demo.workers(),
              absl::FormatDuration(absl::GetFlag(FLAGS_pause)).c_str());
  std::printf("%-31s %6s %7s %5s %9s %13s %6s %7s\n", "mode", "stock", "orders", "left", "oversold",
              "stale refused", "jumps", "time");
  std::fflush(stdout);

  bool ok = true;
  std::vector<std::string> notes;
  for (const Mode& mode : modes) {
    absl::StatusOr<Outcome> o = demo.Run(mode);
    if (!o.ok()) {
      std::fprintf(stderr, "oversell: %s: %s\n", mode.title.c_str(), o.status().ToString().c_str());
      return 1;
    }
    if (!o->ran) {
      std::printf("%-31s skipped: %s\n", mode.title.c_str(), o->skipped.c_str());
      continue;
    }
    std::printf("%-31s %6lld %7lld %5lld %9lld %13s %6s %7s\n", mode.title.c_str(), o->stock,
                o->orders, o->left, o->oversold(),
                mode.lock == LockMode::kFenced ? std::to_string(o->stale).c_str() : "-",
                mode.clock_jump ? std::to_string(o->jumps).c_str() : "-",
                absl::FormatDuration(absl::Trunc(o->elapsed, absl::Milliseconds(10))).c_str());
    std::fflush(stdout);

    auto expect = [&](bool cond, const std::string& what) {
      if (cond) return;
      ok = false;
      notes.push_back(absl::StrCat("CHECK FAILED: ", mode.title, ": ", what));
    };
    if (o->failed_workers > 0) {
      expect(false, absl::StrCat(o->failed_workers, " worker(s) failed (see above)"));
    }
    if (mode.lock == LockMode::kNone) {
      expect(o->orders >= o->stock, "without a lock it sold less than the stock");
      expect(o->oversold() > 0, "without a lock it did not oversell");
    } else if (!mode.clock_jump) {
      expect(o->orders == o->stock && o->left == 0, "the lock did not sell exactly the stock");
    } else if (mode.lock == LockMode::kFenced) {
      expect(o->oversold() == 0, "fencing did not prevent overselling");
      expect(o->orders + o->left == o->stock, "orders and stock left do not add up");
    } else if (o->oversold() == 0) {
      notes.push_back(absl::StrCat(
          mode.title, ": no overlap this run (the plain lock MAY oversell; it is a race)"));
    }
  }
  std::printf("\n");
  for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  if (absl::GetFlag(FLAGS_check)) {
    std::printf("%s\n", ok ? "checks passed" : "checks FAILED");
    return ok ? 0 : 1;
  }
  return 0;
}

}  // namespace
}  // namespace oversell

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "oversell [--quick] [--check] [--modes=no-lock,lock,clock-jump,fenced-clock-jump]\n"
      "Sells a stock from several worker processes with no lock, with redlock, and with\n"
      "redlock under a lock-node clock jump with and without fencing, and prints a table.");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_worker)) {
    oversell::WorkerConfig config;
    config.id = absl::GetFlag(FLAGS_worker_id);
    const std::string mode = absl::GetFlag(FLAGS_worker_mode);
    config.mode = mode == "fenced" ? oversell::LockMode::kFenced
                  : mode == "lock" ? oversell::LockMode::kLock
                                   : oversell::LockMode::kNone;
    config.data = absl::GetFlag(FLAGS_data);
    config.nodes = absl::GetFlag(FLAGS_nodes);
    config.pause = absl::GetFlag(FLAGS_pause);
    config.ttl = absl::GetFlag(FLAGS_ttl);
    return oversell::RunWorker(config);
  }
  return oversell::RunDemo();
}
