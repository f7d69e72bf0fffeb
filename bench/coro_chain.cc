// The library's co_await form (redlock/coro.h) as a bench chain: one
// coroutine per cycle, resuming on the client's I/O thread (no Resume), as
// the async chains' callbacks do.

#include <coroutine>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "bench/locker.h"
#include "redlock/coro.h"

namespace redlock::bench {
namespace {

// Parameters, not lambda captures: they live in the coroutine's frame.
coro::Detached Cycle(Client* client, std::shared_ptr<const std::string> resource,
                     absl::Duration ttl, CycleDone done) {
  CycleSample s;
  const int64_t t0 = NowNs();
  absl::StatusOr<Lease> lease = co_await coro::TryAcquire(*client, *resource, ttl);
  s.acquire_ns = NowNs() - t0;
  s.acquire_status = lease.status();
  if (lease.ok()) {
    s.release_status = co_await coro::Release(*client, *std::move(lease));
    s.cycle_ns = NowNs() - t0;
  }
  done(std::move(s));
}

}  // namespace

ChainFn CoroLockChain(Client* client, std::string resource, absl::Duration ttl) {
  auto shared = std::make_shared<const std::string>(std::move(resource));
  return [client, shared, ttl](CycleDone done) { Cycle(client, shared, ttl, std::move(done)); };
}

}  // namespace redlock::bench
