// Uses the installed redlock package the way an application would: the
// public headers (C++17), redlock::Client and redlock::MultiLock.
//
//   consumer PORT             PORT is a loopback port nobody listens on:
//                             every call must fail with kUnavailable, which
//                             proves the library links and runs (run.sh)
//   consumer --nodes LIST     real servers (host:port,...): a lock is taken,
//                             refused to a second taker, released; a
//                             MultiLock and a Mutex are held and released
//                             (the package test, tests/integration/package_test.cc)

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "multilock/multi_lock.h"
#include "redlock/client.h"
#include "redlock/fencing.h"
#include "redlock/lease.h"
#include "redlock/mutex.h"
#include "redlock/options.h"

namespace {

int Check(bool ok, const char* what, const absl::Status& status) {
  if (ok) {
    std::printf("ok: %s (%s)\n", what, status.ToString().c_str());
    return 0;
  }
  std::fprintf(stderr, "FAIL: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

// Against real servers: every call succeeds, and the lock excludes.
int Live(const std::string& list) {
  absl::StatusOr<std::vector<redlock::Endpoint>> nodes = redlock::ParseEndpointList(list);
  if (!nodes.ok()) return Check(false, "ParseEndpointList", nodes.status());
  redlock::Options options;
  options.nodes = *nodes;
  options.fencing = true;
  absl::StatusOr<std::unique_ptr<redlock::Client>> client = redlock::Client::Create(options);
  if (!client.ok()) return Check(false, "Client::Create", client.status());

  absl::StatusOr<redlock::Lease> lease = (*client)->TryAcquire("consumer/1", absl::Seconds(10));
  int failures = Check(lease.ok() && lease->fencing_token() > 0,
                       "Client::TryAcquire holds the lock, with a fencing token", lease.status());
  absl::StatusOr<redlock::Lease> second = (*client)->TryAcquire("consumer/1", absl::Seconds(10));
  failures += Check(absl::IsAborted(second.status()), "a second TryAcquire is refused (kAborted)",
                    second.status());
  if (lease.ok()) {
    const absl::Status released = (*client)->Release(*lease);
    failures += Check(released.ok(), "Client::Release", released);
    absl::StatusOr<redlock::Lease> again = (*client)->TryAcquire("consumer/1", absl::Seconds(10));
    failures += Check(again.ok() && again->fencing_token() > lease->fencing_token(),
                      "taken again after the release, with a higher fencing token", again.status());
    if (again.ok()) failures += Check((*client)->Release(*again).ok(), "released again", {});
  }

  redlock::MultiLock multi(client->get(), redlock::MultiLock::Mode::kAllNodes);
  absl::StatusOr<redlock::MultiLease> both =
      multi.TryAcquire({"consumer/a", "consumer/b"}, absl::Seconds(10));
  failures += Check(both.ok() && both->leases().size() == 2, "MultiLock::TryAcquire (all nodes)",
                    both.status());
  if (both.ok()) failures += Check(multi.Release(*both).ok(), "MultiLock::Release", {});

  redlock::Mutex mutex(client->get(), "consumer/mutex");
  {
    std::unique_lock<redlock::Mutex> lock(mutex, std::try_to_lock);
    failures +=
        Check(lock.owns_lock() && mutex.held_ok(), "Mutex::try_lock holds it", mutex.status());
  }
  failures += Check(mutex.status().ok(), "Mutex::unlock", mutex.status());

  redlock::FenceGuard guard;
  failures += Check(guard.Admit(2) && !guard.Admit(1), "FenceGuard", absl::OkStatus());
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--nodes") == 0) return Live(argv[2]);
  // argv[1]: a free loopback port.
  const std::string port = argc > 1 ? argv[1] : "1";
  absl::StatusOr<std::vector<redlock::Endpoint>> nodes =
      redlock::ParseEndpointList("127.0.0.1:" + port);
  if (!nodes.ok()) return Check(false, "ParseEndpointList", nodes.status());

  redlock::Options options;
  options.nodes = *nodes;
  options.node_timeout = absl::Milliseconds(20);
  options.connect_timeout = absl::Milliseconds(200);
  options.max_attempts = 1;
  int failures = Check(redlock::ValidateOptions(options).ok(), "ValidateOptions",
                       redlock::ValidateOptions(options));

  absl::StatusOr<std::unique_ptr<redlock::Client>> client = redlock::Client::Create(options);
  if (!client.ok()) return Check(false, "Client::Create", client.status());

  absl::StatusOr<redlock::Lease> lease = (*client)->TryAcquire("consumer/1", absl::Seconds(5));
  failures += Check(absl::IsUnavailable(lease.status()), "Client::TryAcquire is unavailable",
                    lease.status());

  redlock::MultiLock multi(client->get(), redlock::MultiLock::Mode::kAllNodes);
  absl::StatusOr<redlock::MultiLease> multi_lease =
      multi.TryAcquire({"consumer/a", "consumer/b"}, absl::Seconds(5));
  failures += Check(absl::IsUnavailable(multi_lease.status()),
                    "MultiLock::TryAcquire is unavailable", multi_lease.status());

  redlock::Mutex mutex(client->get(), "consumer/mutex");
  std::unique_lock<redlock::Mutex> lock(mutex, std::try_to_lock);
  failures += Check(!lock.owns_lock(), "Mutex::try_lock fails", mutex.status());

  redlock::FenceGuard guard;
  failures += Check(guard.Admit(2) && !guard.Admit(1), "FenceGuard", absl::OkStatus());
  return failures == 0 ? 0 : 1;
}
