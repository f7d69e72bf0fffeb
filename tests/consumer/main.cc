// Uses the installed redlock package the way an application would: the
// public headers (C++17), redlock::Client and redlock::MultiLock. No server
// is needed: the one node is a loopback port nobody listens on, so every call
// must fail with kUnavailable, which proves the library links and runs.

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
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
