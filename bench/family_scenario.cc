// The `family` scenario (only with --scenario family): the lock family
// side by side with the mutex on the same nodes.
//
//   library x1, xC         Client::TryAcquire + Release, one key per caller
//   rwlock shared x1, xC   ReadWriteLock::TryAcquireShared + Release, every
//                          caller on ONE resource (readers do not contend)
//   mutex hot xC           Client::Acquire(wait) + hold + Release, one resource
//   semaphore K=1,4,16 xC  Semaphore::Acquire(wait) + hold + Release, one
//                          semaphore: throughput against the mutex's
//   rw writer->readers     a writer releases while `hot_waiters` readers of
//                          another client wait: from its Release returning
//                          to each reader's AcquireShared returning
//   rw readers->writer     the readers release while a writer waits: from
//                          the last reader's Release returning to the
//                          writer's AcquireExclusive returning
//   election SIGKILL/STOP  a `redlock elect --ttl 1s` leader process is
//                          SIGKILLed (SIGSTOPped) while a candidate waits
//                          in Election::Campaign: from the signal to the
//                          candidate leading (p50 and max over rounds)

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/locker.h"
#include "bench/rows.h"
#include "bench/scenarios.h"
#include "redlock/client.h"
#include "redlock/election.h"
#include "redlock/rw_lock.h"
#include "redlock/semaphore.h"
#include "testkit/fleet.h"
#include "testkit/process.h"
#include "testkit/redis.h"

namespace redlock::bench {
namespace {

// TryAcquireShared + Release of one resource.
using SharedLocker = TryLocker<ReadWriteLock, &ReadWriteLock::TryAcquireShared>;

// A contended cycle: a blocking acquisition with a wait, `hold`, release.
// acquire_ns is the acquisition (the wait included), cycle_ns all of it.
CycleFn HeldCycle(std::function<absl::StatusOr<Lease>()> acquire,
                  std::function<absl::Status(const Lease&)> release, absl::Duration hold) {
  return [acquire = std::move(acquire), release = std::move(release), hold]() -> CycleSample {
    CycleSample s;
    const int64_t start = NowNs();
    absl::StatusOr<Lease> l = acquire();
    s.acquire_ns = NowNs() - start;
    if (!l.ok()) {
      s.acquire_status = l.status();
      return s;
    }
    if (hold > absl::ZeroDuration()) absl::SleepFor(hold);
    s.release_status = release(*l);
    s.cycle_ns = NowNs() - start;
    return s;
  };
}

RowResult ClientRow(Context& ctx, const std::vector<Endpoint>& eps, RowResult identity,
                    std::function<std::vector<CycleFn>(Client* c, const std::string& key)> make,
                    std::unique_ptr<Client>* keep) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(ClientOptions(ctx, eps));
  if (!client.ok())
    return HarnessErrorRow(ctx, std::move(identity), "Client::Create", client.status());
  Client* c = client->get();
  *keep = *std::move(client);
  const std::string key = ctx.RowKey();
  return MeasureRow(
      ctx, std::move(identity),
      [c, key, make]() -> absl::StatusOr<std::vector<CycleFn>> { return make(c, key); });
}

// A row measured by hand (hand-offs, takeovers): `handoff` is what the row
// is about, `acquire` the waiting side's whole call.
RowResult HandRow(RowResult row, const LatencyHistogram& handoff, const LatencyHistogram& acquire,
                  int64_t attempts, int64_t successes, double seconds) {
  row.handoff = Distribution(handoff);
  row.handoff_call = Distribution(handoff);
  row.acquire = Distribution(acquire);
  row.attempts = attempts;
  row.successes = successes;
  row.measured_s = seconds;
  return row;
}

int Rounds(const Context& ctx, int quick) {
  switch (ctx.settings.mode) {
    case Mode::kSmoke:
      return 1;
    case Mode::kQuick:
      return quick;
    case Mode::kFull:
      return quick * 4;
  }
  return quick;
}

// A writer of client W holds; `readers` threads of client R wait in
// AcquireShared; the writer releases: each reader's hand-off. Then the
// readers hold and a writer waits; they release: the writer's hand-off.
void HandOffRows(Context& ctx, const std::vector<Endpoint>& eps, GroupResult* g) {
  const int readers = ctx.settings.hot_waiters;
  const absl::Duration ttl = ctx.settings.ttl;
  const absl::Duration wait = absl::Seconds(5);
  RowResult to_readers =
      LibraryRowIdentity(absl::StrCat("rw writer->", readers, " readers"), "handoff", readers);
  RowResult to_writer =
      LibraryRowIdentity(absl::StrCat("rw ", readers, " readers->writer"), "handoff", 1);
  ctx.progress.Row(to_readers.impl);
  absl::StatusOr<std::unique_ptr<Client>> wc = Client::Create(ClientOptions(ctx, eps));
  absl::StatusOr<std::unique_ptr<Client>> rc = Client::Create(ClientOptions(ctx, eps));
  if (!wc.ok() || !rc.ok()) {
    g->rows.push_back(
        HarnessErrorRow(ctx, to_readers, "Client::Create", !wc.ok() ? wc.status() : rc.status()));
    return;
  }
  const std::string resource = ctx.RowKey() + ":rw";
  ReadWriteLock w(wc->get(), resource);
  ReadWriteLock r(rc->get(), resource);
  LatencyHistogram h_readers, acq_readers, h_writer, acq_writer;
  int64_t attempts = 0, ok = 0, w_attempts = 0, w_ok = 0;
  const int rounds = Rounds(ctx, 20);
  const int64_t start_ns = NowNs();
  for (int round = 0; round < rounds; ++round) {
    absl::StatusOr<Lease> held = w.AcquireExclusive(ttl, wait);
    if (!held.ok()) {
      ctx.harness_errors.push_back(absl::StrCat(to_readers.impl, ": ", held.status().ToString()));
      break;
    }
    std::atomic<int64_t> released_at{0};
    std::vector<Lease> leases(static_cast<size_t>(readers));
    std::vector<int64_t> got_at(static_cast<size_t>(readers), -1), called_at(leases.size(), 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < readers; ++i) {
      threads.emplace_back([&, i] {
        called_at[static_cast<size_t>(i)] = NowNs();
        absl::StatusOr<Lease> l = r.AcquireShared(ttl, wait);
        if (l.ok()) {
          got_at[static_cast<size_t>(i)] = NowNs();
          leases[static_cast<size_t>(i)] = *std::move(l);
        }
      });
    }
    // Every reader's first attempt has found the writer.
    absl::SleepFor(absl::Milliseconds(30));
    (void)w.Release(*held);
    released_at = NowNs();
    for (auto& t : threads) t.join();
    for (int i = 0; i < readers; ++i) {
      ++attempts;
      if (got_at[static_cast<size_t>(i)] < 0) continue;
      ++ok;
      h_readers.Record(std::max<int64_t>(0, got_at[static_cast<size_t>(i)] - released_at));
      acq_readers.Record(got_at[static_cast<size_t>(i)] - called_at[static_cast<size_t>(i)]);
    }
    // Now the readers hold; a writer waits, they release.
    int64_t w_called = 0, w_got = -1;
    std::thread writer([&] {
      w_called = NowNs();
      absl::StatusOr<Lease> l = w.AcquireExclusive(ttl, wait);
      if (l.ok()) {
        w_got = NowNs();
        (void)w.Release(*l);
      }
    });
    absl::SleepFor(absl::Milliseconds(30));
    int64_t last_release = 0;
    for (const Lease& l : leases) {
      if (l.has_value()) (void)r.Release(l);
      last_release = NowNs();
    }
    writer.join();
    ++w_attempts;
    if (w_got >= 0) {
      ++w_ok;
      h_writer.Record(std::max<int64_t>(0, w_got - last_release));
      acq_writer.Record(w_got - w_called);
    }
  }
  const double seconds = static_cast<double>(NowNs() - start_ns) / 1e9;
  g->rows.push_back(HandRow(to_readers, h_readers, acq_readers, attempts, ok, seconds));
  g->rows.back().notes.push_back(absl::StrCat(
      rounds, " rounds: the writer releases while ", readers,
      " readers of another client wait; handoff = from its Release returning to each reader's "
      "AcquireShared returning (every waiting reader is woken by the one announcement)"));
  ctx.progress.Row(to_writer.impl);
  g->rows.push_back(HandRow(to_writer, h_writer, acq_writer, w_attempts, w_ok, seconds));
  g->rows.back().notes.push_back(
      "the readers release one after another while a writer waits: handoff = from the last "
      "reader's Release returning to the writer's AcquireExclusive returning (woken by the "
      "last reader's announcement)");
}

// Where the `redlock` tool is: $REDLOCK_CLI, else next to this binary's
// build directory (build/bench/../tools/redlock).
std::string CliPath() {
  if (const char* env = getenv("REDLOCK_CLI"); env != nullptr && *env) return env;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));
  std::string path = dir + "/../tools/redlock";
  return access(path.c_str(), X_OK) == 0 ? path : "";
}

// A leader process (`redlock elect --ttl 1s`) signalled with `sig` while a
// candidate of this process waits: the takeover time.
void TakeoverRow(Context& ctx, const std::vector<Endpoint>& eps, int sig, GroupResult* g) {
  const std::string name = sig == SIGKILL ? "SIGKILL" : "SIGSTOP";
  RowResult row = LibraryRowIdentity(absl::StrCat("election takeover ", name), "takeover", 1);
  ctx.progress.Row(row.impl);
  const std::string cli = CliPath();
  if (cli.empty()) {
    row.skipped = true;
    row.skip_reason = "the redlock tool was not found (build tools/, or set REDLOCK_CLI)";
    g->rows.push_back(row);
    return;
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(ClientOptions(ctx, eps));
  if (!client.ok()) {
    g->rows.push_back(HarnessErrorRow(ctx, row, "Client::Create", client.status()));
    return;
  }
  std::vector<std::string> nodes;
  for (const Endpoint& e : eps) nodes.push_back(e.ToString());
  const std::string resource = ctx.RowKey() + ":leader";
  Election election(client->get(), resource);
  LatencyHistogram takeover, campaign;
  int64_t attempts = 0, ok = 0;
  const int rounds = Rounds(ctx, 5);
  const int64_t start_ns = NowNs();
  for (int round = 0; round < rounds; ++round) {
    testkit::ProcessOptions po;
    // The command leaves once its leader is gone (not when it is stopped).
    po.argv = {cli,
               "--nodes",
               absl::StrJoin(nodes, ","),
               "elect",
               "--resource",
               resource,
               "--ttl",
               "1s",
               "--id",
               "leader",
               "--",
               "sh",
               "-c",
               "while kill -0 $PPID 2>/dev/null; do sleep 0.05; done"};
    po.remove_env_prefixes = {"REDLOCK_"};
    absl::StatusOr<std::unique_ptr<testkit::Process>> leader = testkit::Process::Start(po);
    if (!leader.ok()) {
      g->rows.push_back(HarnessErrorRow(ctx, row, "starting redlock elect", leader.status()));
      return;
    }
    // Bounded wait for the leader to lead.
    bool leading = false;
    for (int i = 0; i < 200 && !leading; ++i) {
      absl::StatusOr<std::optional<LeaderInfo>> now = election.Observe();
      leading = now.ok() && now->has_value() && (*now)->identity == "leader";
      if (!leading) absl::SleepFor(absl::Milliseconds(10));
    }
    if (!leading) {
      (*leader)->Kill();
      ctx.harness_errors.push_back(absl::StrCat(row.impl, ": the leader process did not lead"));
      break;
    }
    absl::StatusOr<std::unique_ptr<Leadership>> won;
    int64_t signalled = 0, elected = 0, called = 0;
    std::thread candidate([&] {
      called = NowNs();
      CampaignOptions o;
      o.ttl = absl::Seconds(1);
      won = election.Campaign("candidate", absl::Seconds(10), StopToken(), o);
      elected = NowNs();
    });
    // The candidate's first attempt finds the leader; then the leader goes.
    absl::SleepFor(absl::Milliseconds(100));
    signalled = NowNs();
    (void)(*leader)->Signal(sig);
    candidate.join();
    (*leader)->Kill();  // a stopped leader too, once the round is over
    ++attempts;
    if (won.ok()) {
      ++ok;
      takeover.Record(elected - signalled);
      campaign.Record(elected - called);
      (void)(*won)->Resign();
    } else {
      ctx.harness_errors.push_back(absl::StrCat(row.impl, ": ", won.status().ToString()));
    }
  }
  const double seconds = static_cast<double>(NowNs() - start_ns) / 1e9;
  g->rows.push_back(HandRow(row, takeover, campaign, attempts, ok, seconds));
  g->rows.back().notes.push_back(absl::StrCat(
      rounds, " takeovers: handoff = from the ", name,
      " of the `redlock elect --ttl 1s` leader process to the waiting candidate's Campaign "
      "returning (the lease runs out: about the validity left, up to 1 s, plus a poll of at "
      "most wait_poll_max); acq+wait = the candidate's whole Campaign"));
}

// The other safe semaphore design, for comparison only: each node counts
// live holders (admitting while fewer than K) and a holder needs more than
// N*K/(K+1) nodes, so that K+1 holders cannot all find room (they would
// need (K+1)*T > N*K admissions).
constexpr char kCountAcquire[] = R"lua(
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
)lua";

// One counted acquisition on every node at once (a thread per node, each
// with its own deadline); kept when at least `threshold` nodes admitted,
// else removed. Returns the admitting nodes' count, or -1 when refused.
int CountedAcquire(const std::vector<Endpoint>& eps, const std::string& key,
                   const std::string& token, int permits, int threshold, absl::Duration timeout) {
  std::vector<int> admitted(eps.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < eps.size(); ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<testkit::RedisValue> r = testkit::RunCommand(
          eps[i], {"EVAL", kCountAcquire, "1", key, token, "60000", std::to_string(permits)},
          timeout);
      admitted[i] = r.ok() && r->integer == 1;
    });
  }
  for (auto& t : threads) t.join();
  int yes = 0;
  for (int a : admitted) yes += a;
  if (yes >= threshold) return yes;
  for (size_t i = 0; i < eps.size(); ++i) {
    if (admitted[i]) (void)testkit::RunCommand(eps[i], {"ZREM", key, token}, timeout);
  }
  return -1;
}

// How many of `eps` may be down (SIGSTOPped, the last ones) while all K
// permits can still be taken, for the library's permits and for counting
// on more than N*K/(K+1) nodes.
void AvailabilityRows(Context& ctx, const std::vector<Endpoint>& eps, int k, GroupResult* g) {
  testkit::Fleet* fleet = ctx.nodes.fleet();
  const int n = static_cast<int>(eps.size());
  const int threshold = n * k / (k + 1) + 1;
  const absl::Duration timeout = ctx.settings.node_timeout;
  struct Design {
    std::string impl;
    bool permits;
  };
  for (const Design& d : {Design{absl::StrCat("permits K=", k), true},
                          Design{absl::StrCat("count>NK/(K+1) K=", k), false}}) {
    ctx.progress.Row(d.impl);
    RowResult row = LibraryRowIdentity(d.impl, d.permits ? "permits" : "count", 1);
    LatencyHistogram acquire;
    int64_t attempts = 0, ok = 0;
    int survives = -1;
    const int64_t start_ns = NowNs();
    for (int down = 0; down < n; ++down) {
      for (int i = n - down; i < n; ++i) (void)fleet->Stop(i);
      int granted = 0;
      const std::string key = absl::StrCat(ctx.RowKey(), ":avail");
      if (d.permits) {
        Options o = ClientOptions(ctx, eps);
        absl::StatusOr<std::unique_ptr<Client>> c = Client::Create(o);
        if (c.ok()) {
          Semaphore sem(c->get(), key, k);
          std::vector<Permit> held;
          for (int j = 0; j < k; ++j) {
            const int64_t t0 = NowNs();
            absl::StatusOr<Permit> p = sem.TryAcquire(absl::Seconds(60));
            ++attempts;
            if (!p.ok()) continue;
            ++ok;
            if (down == 0) acquire.Record(NowNs() - t0);
            held.push_back(*p);
          }
          granted = static_cast<int>(held.size());
          for (const Permit& p : held) (void)sem.Release(p);
        }
      } else {
        std::vector<std::string> tokens;
        for (int j = 0; j < k; ++j) {
          const std::string token = absl::StrCat("holder-", j);
          const int64_t t0 = NowNs();
          ++attempts;
          if (CountedAcquire(eps, key, token, k, threshold, timeout) < 0) continue;
          ++ok;
          if (down == 0) acquire.Record(NowNs() - t0);
          tokens.push_back(token);
        }
        granted = static_cast<int>(tokens.size());
        for (int i = 0; i < n - down; ++i) {
          (void)testkit::RunCommand(eps[static_cast<size_t>(i)], {"DEL", key}, timeout);
        }
      }
      for (int i = n - down; i < n; ++i) (void)fleet->Continue(i);
      if (granted < k) break;  // more nodes down cannot do better
      survives = down;
    }
    row = HandRow(row, LatencyHistogram(), acquire, attempts, ok,
                  static_cast<double>(NowNs() - start_ns) / 1e9);
    row.handoff = Distribution();
    row.handoff_call = Distribution();
    row.notes.push_back(absl::StrCat(
        "all ", k, " permits granted with up to ", survives, " of ", n, " nodes down (",
        d.permits ? absl::StrCat("each permit needs a majority, ", n / 2 + 1, " nodes")
                  : absl::StrCat("a holder needs more than N*K/(K+1): ", threshold, " nodes"),
        "); acquire = one acquisition with every node up",
        d.permits ? "" : " (a prototype over fresh connections, one per node: not comparable)"));
    g->rows.push_back(std::move(row));
  }
}

}  // namespace

void RunSemaphoreAvailability(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  g->title = "semaphore designs: nodes down survived, K = 1, 4, 16";
  AddSetting(g, "node_timeout", absl::FormatDuration(ctx.settings.node_timeout));
  g->rows.push_back(FloorRow(ctx, eps));
  for (int k : {1, 4, 16}) AvailabilityRows(ctx, eps, k, g);
  g->notes.push_back(
      "nodes are SIGSTOPped from the last one; a design survives d nodes down when all K "
      "permits (K distinct holders, one attempt each) are still granted");
}

void RunFamily(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> eps = ctx.nodes.First(n);
  const BenchSettings& s = ctx.settings;
  const int many = s.callers_many;
  g->title = "the lock family beside the mutex";
  AddSetting(g, "ttl", absl::FormatDuration(s.ttl));
  AddSetting(g, "node_timeout", absl::FormatDuration(s.node_timeout));
  AddSetting(g, "hold", absl::FormatDuration(s.hot_hold));
  g->rows.push_back(FloorRow(ctx, eps));
  const absl::Duration ttl = s.ttl;
  const absl::Duration wait = s.hot_wait;
  const absl::Duration hold = s.hot_hold;
  std::vector<std::unique_ptr<Client>> clients;
  auto keep = [&clients]() -> std::unique_ptr<Client>* {
    clients.emplace_back();
    return &clients.back();
  };

  for (int callers : {1, many}) {
    g->rows.push_back(ClientRow(
        ctx, eps, LibraryRowIdentity("library", "", callers),
        [ttl, callers](Client* c, const std::string& key) {
          std::vector<CycleFn> out;
          for (int i = 0; i < callers; ++i) {
            out.push_back(LockCycle(NewClientLocker(c, absl::StrCat(key, ":t", i)), ttl));
          }
          return out;
        },
        keep()));
    g->rows.push_back(ClientRow(
        ctx, eps, LibraryRowIdentity("rwlock shared", "shared", callers),
        [ttl, callers](Client* c, const std::string& key) {
          std::vector<CycleFn> out;
          for (int i = 0; i < callers; ++i) {
            out.push_back(LockCycle(std::make_unique<SharedLocker>(c, key + ":rw"), ttl));
          }
          return out;
        },
        keep()));
  }
  g->rows.push_back(ClientRow(
      ctx, eps, LibraryRowIdentity("mutex hot", "contended", many),
      [ttl, wait, hold, many](Client* c, const std::string& key) {
        std::vector<CycleFn> out;
        for (int i = 0; i < many; ++i) {
          out.push_back(
              HeldCycle([c, key, ttl, wait] { return c->Acquire(key + ":hot", ttl, wait); },
                        [c](const Lease& l) { return c->Release(l); }, hold));
        }
        return out;
      },
      keep()));
  for (int k : {1, 4, 16}) {
    g->rows.push_back(ClientRow(
        ctx, eps, LibraryRowIdentity(absl::StrCat("semaphore K=", k), absl::StrCat("K=", k), many),
        [ttl, wait, hold, many, k](Client* c, const std::string& key) {
          auto sem = std::make_shared<Semaphore>(c, key + ":sem", k);
          std::vector<CycleFn> out;
          for (int i = 0; i < many; ++i) {
            out.push_back(HeldCycle(
                [sem, ttl, wait]() -> absl::StatusOr<Lease> {
                  absl::StatusOr<Permit> p = sem->Acquire(ttl, wait);
                  if (!p.ok()) return p.status();
                  return p->lease();
                },
                [c](const Lease& l) { return c->Release(l); }, hold));
          }
          return out;
        },
        keep()));
  }
  HandOffRows(ctx, eps, g);
  TakeoverRow(ctx, eps, SIGKILL, g);
  TakeoverRow(ctx, eps, SIGSTOP, g);
  g->notes.push_back(absl::StrCat(
      "library/rwlock shared: one attempt + release per cycle (the library on one key per "
      "caller, the readers all on one resource); mutex hot and semaphore: ",
      many, " callers of one client on one resource, each Acquire(wait) + ",
      absl::FormatDuration(hold),
      " hold + Release: the semaphore's cycles/s against the mutex's is what K permits buy"));
}

}  // namespace redlock::bench
