// Compiled by run.sh against the installed headers: redlock/coro.h is
// self-contained with C++20, and refuses C++17 with a message that says so.

#include <coroutine>
#include <exception>

#include "redlock/coro.h"

namespace {

struct Detached {
  struct promise_type {
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

[[maybe_unused]] Detached LockOnce(redlock::Client& client) {
  absl::StatusOr<redlock::Lease> lease =
      co_await redlock::coro::TryAcquire(client, "consumer", absl::Seconds(1));
  if (lease.ok()) (void)co_await redlock::coro::Release(client, *lease);
}

}  // namespace

int main() { return 0; }
