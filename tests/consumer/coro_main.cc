// Compiled by run.sh against the installed headers: redlock/coro.h is
// self-contained with C++20, and refuses C++17 with a message that says so.

#include <coroutine>
#include <exception>

#include "redlock/coro.h"

namespace {

[[maybe_unused]] redlock::coro::Detached LockOnce(redlock::Client& client) {
  absl::StatusOr<redlock::Lease> lease =
      co_await redlock::coro::TryAcquire(client, "consumer", absl::Seconds(1));
  if (lease.ok()) (void)co_await redlock::coro::Release(client, *lease);
}

}  // namespace

int main() { return 0; }
