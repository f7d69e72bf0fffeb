// examples/guide/snippets.cc: every C++ example of docs/guide/ (C++17), in
// functions that compile against the public headers. The guide's pages
// quote these lines; scripts/check-guide-examples.py checks that each
// example of a page is found here (or in first_lock.cc, coro_snippets.cc),
// and the build compiles them (the guide_snippets target).
#include <chrono>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "redlock/client.h"
#include "redlock/election.h"
#include "redlock/fair_mutex.h"
#include "redlock/outcome.h"
#include "redlock/rw_lock.h"
#include "redlock/scoped_lease.h"
#include "redlock/semaphore.h"
#include "redlock/stop_token.h"

namespace guide {

// What the examples' protected work stands for.
void Serve(uint64_t token);
void Rebuild(uint64_t token);
void RunImport(int slot, uint64_t token);
void RunImport(uint64_t token);
void StopTakingJobs();
void RunOneJob(uint64_t term);
void Write(const std::string& part, uint64_t token);

// docs/guide/nodes.md, "TLS to the nodes".
absl::Status TlsNodes() {
  redlock::Options options;
  options.nodes = *redlock::ParseEndpointList(
      "rediss://:secret@redis-1.example:6380,rediss://:secret@redis-2.example:6380,"
      "rediss://:secret@redis-3.example:6380");
  options.tls.ca_file = "/etc/redis/tls/ca.crt";        // or ca_dir; neither: the system's CAs
  options.tls.cert_file = "/etc/redis/tls/client.crt";  // mutual TLS only (tls-auth-clients yes)
  options.tls.key_file = "/etc/redis/tls/client.key";
  auto client = redlock::Client::Create(options);  // bad or unreadable files: kInvalidArgument
  return client.status();
}

// docs/guide/nodes.md, "Finding the master through Sentinel" and "Sentinel
// over TLS".
void SentinelNodes(redlock::Options& options) {
  {
    // redis+sentinel://[[user]:password@]sentinel[:port][+sentinel[:port]...]/master[/db]
    // (Sentinel's port defaults to 26379; the credentials and db are the master's)
    auto n1 = redlock::ParseEndpoint("redis+sentinel://127.0.0.1:27001+127.0.0.1:27002/n1");
    n1->sentinel.password = "...";  // the Sentinels' own credentials, if they need them
    options.nodes.push_back(*n1);
  }
  {
    // Sentinels on their tls-port; the master and its replicas certified for redis.example
    auto n1 = redlock::ParseEndpoint(
        "rediss+sentinel://:pw@s1.example:26380+s2.example:26380/n1?tls_server_name=redis.example");
    options.tls.ca_file = "/etc/redis/tls/ca.crt";
    options.nodes.push_back(*n1);
  }
}

// docs/guide/durability.md.
redlock::Options Durable() {
  redlock::Options options;
  options.nodes = *redlock::ParseEndpointList("127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003");
  options.durability.replicas = 1;                      // each master's replica must have it
  options.durability.timeout = absl::Milliseconds(20);  // part of node_timeout (50 ms)
  return options;
}

// docs/guide/errors.md, "Telling outcomes apart".
void Outcomes(redlock::Client* client) {
  absl::StatusOr<redlock::Lease> lease = client->TryAcquire("orders/42", absl::Seconds(10));
  if (auto o = redlock::GetOutcome(lease.status());
      o && o->kind == redlock::Outcome::Kind::kHeldElsewhere) {
    // o->refused of o->nodes.size() nodes hold it; back off
  }
}

// docs/guide/waiting-and-cancellation.md, "Cancellation".
void Cancellation(redlock::Client* client, absl::Duration ttl) {
  absl::StatusOr<redlock::Lease> lease;
  redlock::StopSource stop;
  std::thread t(
      [&] { lease = client->Acquire("jobs/once", ttl, absl::InfiniteDuration(), stop.token()); });
  stop.RequestStop();  // from a shutdown handler: Acquire returns kCancelled now
  t.join();
}

// docs/guide/renewal.md, "WithLock".
absl::Status Nightly(redlock::Client* client, const std::vector<std::string>& parts) {
  absl::Status done =
      redlock::WithLock(*client, "reports/nightly", absl::Seconds(30), {},
                        [&](const redlock::Lease& lease, const redlock::StopToken& lost) {
                          for (auto& part : parts) {
                            if (lost.stop_requested()) return absl::AbortedError("lock lost");
                            Write(part, lease.fencing_token());
                          }
                          return absl::OkStatus();
                        });
  return done;
}

// docs/guide/lock-family.md, "Reader-writer lock".
void ReaderWriter(std::unique_ptr<redlock::Client>& client) {
  redlock::ReadWriteLock catalog(client.get(), "catalog");
  absl::StatusOr<redlock::Lease> r = catalog.AcquireShared(absl::Seconds(10), absl::Seconds(2));
  if (r.ok()) {
    Serve(r->fencing_token());
    (void)catalog.Release(*r);
  }

  absl::StatusOr<redlock::Lease> w = catalog.AcquireExclusive(absl::Seconds(10), absl::Seconds(5));
  if (w.ok()) {
    Rebuild(w->fencing_token());
    (void)catalog.Release(*w);
  }

  // Or as a std::shared_mutex (SharedTimedLockable), renewed while held:
  redlock::SharedMutex m(client.get(), "catalog");
  { std::shared_lock<redlock::SharedMutex> read(m, std::chrono::seconds(2)); /* read */ }
  { std::unique_lock<redlock::SharedMutex> write(m, std::chrono::seconds(5)); /* write */ }
}

// docs/guide/lock-family.md, "Semaphore".
absl::Status Imports(std::unique_ptr<redlock::Client>& client) {
  redlock::Semaphore imports(client.get(), "imports", /*permits=*/4);
  absl::StatusOr<redlock::Permit> p = imports.Acquire(absl::Seconds(30), absl::Seconds(10));
  if (!p.ok()) return p.status();  // kDeadlineExceeded: 4 imports ran all along
  auto renewal = imports.AutoRenew(*p, {}, [](absl::Status) { /* stop this import */ });
  RunImport(p->slot(), p->fencing_token());
  (void)imports.Release(*p);
  return absl::OkStatus();
}

// docs/guide/lock-family.md, "Leader election".
absl::Status Scheduler(std::unique_ptr<redlock::Client>& client, const redlock::StopToken& stop) {
  redlock::Election election(client.get(), "scheduler");
  redlock::CampaignOptions campaign;
  campaign.renew.on_at_risk = [](const redlock::Lease&, const absl::Status&) { StopTakingJobs(); };
  auto leadership = election.Campaign("host-a:4242", absl::InfiniteDuration(), stop, campaign);
  if (!leadership.ok()) return leadership.status();
  while (!(*leadership)->lost().stop_requested()) RunOneJob((*leadership)->term());
  // ~Leadership (or Resign()) hands over to the next candidate at once.

  auto now = election.Observe();  // who leads: identity, term, time left
  return now.status();
}

// docs/guide/lock-family.md, "Fair lock".
absl::Status FairImports(std::unique_ptr<redlock::Client>& client) {
  redlock::FairLock jobs(client.get(), "jobs/import");
  absl::StatusOr<redlock::Lease> lease = jobs.Acquire(absl::Seconds(10), absl::Seconds(30));
  if (!lease.ok()) return lease.status();  // kDeadlineExceeded: not our turn within 30 s
  RunImport(lease->fencing_token());
  (void)jobs.Release(*lease);  // wakes the next waiter, and only that one

  // Or as a TimedLockable (redlock::Mutex's contract, renewed while held):
  redlock::FairMutex m(client.get(), "jobs/import");
  {
    std::unique_lock<redlock::FairMutex> hold(m, std::chrono::seconds(30));
    if (hold.owns_lock()) RunImport(0);
  }
  return absl::OkStatus();
}

}  // namespace guide
