// examples/guide/coro_snippets.cc: the C++20 coroutine example of
// docs/guide/waiting-and-cancellation.md, compiled as C++20 (redlock/coro.h
// is the one C++20-only header).
#include <coroutine>

#include "redlock/coro.h"

namespace guide {

// Your executor: anything that can run a coroutine handle later.
struct EventLoop {
  void Post(std::coroutine_handle<> h);
};

redlock::coro::Detached TakeOrder(redlock::Client* client, EventLoop& loop) {
  redlock::coro::Resume on_loop = [&loop](std::coroutine_handle<> h) { loop.Post(h); };
  absl::StatusOr<redlock::Lease> lease =
      co_await redlock::coro::TryAcquire(*client, "orders/42", absl::Seconds(10), on_loop);
  if (lease.ok()) (void)co_await redlock::coro::Release(*client, *std::move(lease), on_loop);
}

}  // namespace guide
