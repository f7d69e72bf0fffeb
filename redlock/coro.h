// redlock/coro.h: co_await on a Client's acquire, extend and release, for
// code compiled with C++20 coroutines. Header-only, over the *Async calls of
// redlock/client.h; no coroutine library needed (bring your own task type,
// or use Detached below for coroutines nobody awaits).
// The other redlock headers need only C++17 and never include this one.
//
// Usage (inside any coroutine: your task type, asio::awaitable, ...):
//
//   #include "redlock/coro.h"
//
//   absl::StatusOr<redlock::Lease> lease =
//       co_await redlock::coro::TryAcquire(*client, "orders/42", absl::Seconds(10));
//   if (!lease.ok()) co_return lease.status();
//   ... work that must finish before lease->valid_until() ...
//   absl::Status released = co_await redlock::coro::Release(*client, *lease);
//
// Where the coroutine continues. By default the coroutine resumes on the
// client's I/O thread, inside the call's completion callback: the rules of
// the *Async callbacks then apply to the code after co_await up to its next
// suspension (redlock/client.h): it must not block (a blocking call of the
// same client returns kFailedPrecondition), and while it runs no other
// callback of the client does. Another co_await on the same client is fine
// there (that is how a chain of awaits costs what the async path costs).
// To continue elsewhere, pass a Resume: the completion callback hands the
// coroutine to it instead of resuming it, e.g. to post it to an executor
// (any thread):
//
//   redlock::coro::Resume on_pool = [&pool](std::coroutine_handle<> h) {
//     pool.post([h] { h.resume(); });   // or asio::post(io, h)
//   };
//   auto lease = co_await redlock::coro::TryAcquire(*client, "orders/42", ttl, on_pool);
//
// A Resume must resume the handle exactly once, and may not run it inline
// if it must not run on the I/O thread.
//
// Each function returns an awaitable that starts the call when awaited
// (not before; an awaitable never awaited sends nothing), and produces the
// same result as the matching *Async call: every error code of
// redlock/client.h, kCancelled when the client is destroyed meanwhile (the
// coroutine is still resumed, with that result, before the destructor
// returns, unless a Resume defers it). The client must outlive the await.
//
// Thread-safety: as the *Async calls; an awaitable is awaited once, by one
// coroutine.

#ifndef REDLOCK_CORO_H_
#define REDLOCK_CORO_H_

#if !defined(__cpp_impl_coroutine) || __cpp_impl_coroutine < 201902L
#error \
    "redlock/coro.h needs C++20 coroutines (e.g. -std=c++20); the other redlock headers need only C++17"
#endif

#include <coroutine>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/fair_mutex.h"
#include "redlock/lease.h"
#include "redlock/stop_token.h"

namespace redlock::coro {

// Continues an awaiting coroutine elsewhere: called once, on the client's
// I/O thread, with the coroutine to resume. Empty: resume it right there.
using Resume = std::function<void(std::coroutine_handle<>)>;

// A coroutine type for coroutines nobody awaits (fire and forget): it starts
// at once, runs to its end and frees its frame; an exception escaping it
// ends the program (std::terminate). For small programs and tests; a
// service uses its executor's own task type.
//
//   redlock::coro::Detached LockOnce(redlock::Client& client) {
//     auto lease = co_await redlock::coro::TryAcquire(client, "jobs/1", ttl);
//     ...
//   }
struct Detached {
  // The coroutine protocol's promise: starts at once, never suspends at the end
  // (the frame frees itself), terminates on an escaping exception.
  struct promise_type {
    // Part of the coroutine protocol (see promise_type).
    Detached get_return_object() noexcept { return {}; }
    // Part of the coroutine protocol (see promise_type).
    std::suspend_never initial_suspend() noexcept { return {}; }
    // Part of the coroutine protocol (see promise_type).
    std::suspend_never final_suspend() noexcept { return {}; }
    // Part of the coroutine protocol (see promise_type).
    void return_void() noexcept {}
    // Part of the coroutine protocol (see promise_type).
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

namespace internal_coro {

// The calls the awaitables make (one per function below).
struct TryAcquireCall {
  Client* client;
  std::string resource;
  absl::Duration ttl;
  void operator()(Client::LeaseCallback done) {
    client->TryAcquireAsync(resource, ttl, std::move(done));
  }
};
struct AcquireCall {
  Client* client;
  std::string resource;
  absl::Duration ttl;
  void operator()(Client::LeaseCallback done) {
    client->AcquireAsync(resource, ttl, std::move(done));
  }
};
struct AcquireWaitCall {
  Client* client;
  std::string resource;
  absl::Duration ttl;
  absl::Duration wait;
  StopToken stop;
  void operator()(Client::LeaseCallback done) {
    client->AcquireAsync(resource, ttl, wait, stop, std::move(done));
  }
};
struct ExtendCall {
  Client* client;
  Lease lease;
  absl::Duration ttl;
  void operator()(Client::LeaseCallback done) { client->ExtendAsync(lease, ttl, std::move(done)); }
};
struct ReleaseCall {
  Client* client;
  Lease lease;
  void operator()(Client::StatusCallback done) { client->ReleaseAsync(lease, std::move(done)); }
};
struct FairAcquireCall {
  FairLock* lock;
  absl::Duration ttl;
  absl::Duration wait;  // zero: FairLock::TryAcquire
  StopToken stop;
  void operator()(Client::LeaseCallback done) {
    lock->AcquireAsync(ttl, wait, stop, std::move(done));
  }
};

}  // namespace internal_coro

// What the functions below return: co_await it for a T
// (absl::StatusOr<Lease> or absl::Status). `Call` starts the call.
template <typename T, typename Call>
class [[nodiscard]] Awaitable {
 public:
  // Made by the functions below: `call` starts the call when awaited; `resume`
  // as in Resume.
  Awaitable(Call call, Resume resume) : call_(std::move(call)), resume_(std::move(resume)) {}
  // Movable until awaited (the functions below return it by value).
  Awaitable(Awaitable&&) = default;
  Awaitable& operator=(Awaitable&&) = delete;

  // Part of the coroutine protocol: never ready before the call is made.
  bool await_ready() const noexcept { return false; }

  // Part of the coroutine protocol: starts the call; its completion resumes
  // `awaiting` (or hands it to the Resume).
  void await_suspend(std::coroutine_handle<> awaiting) {
    awaiting_ = awaiting;
    // The call may complete on the I/O thread, and the coroutine (whose
    // frame holds *this) resume and even finish, before it returns: the
    // call runs from this stack, not from the frame.
    Call call = std::move(call_);
    call([this](T result) { Complete(std::move(result)); });
  }

  // Part of the coroutine protocol: the call's result.
  T await_resume() { return std::move(*result_); }

 private:
  // On the I/O thread, once.
  void Complete(T result) {
    result_.emplace(std::move(result));
    const std::coroutine_handle<> awaiting = awaiting_;
    if (!resume_) {
      awaiting.resume();
      return;
    }
    // From this stack: the coroutine may run (elsewhere) and free *this as
    // soon as the handle is handed over.
    Resume resume = std::move(resume_);
    resume(awaiting);
  }

  Call call_;
  Resume resume_;
  std::coroutine_handle<> awaiting_;
  std::optional<T> result_;
};

// Client::TryAcquireAsync: one attempt.
inline Awaitable<absl::StatusOr<Lease>, internal_coro::TryAcquireCall> TryAcquire(
    Client& client, absl::string_view resource, absl::Duration ttl, Resume resume = {}) {
  return {{&client, std::string(resource), ttl}, std::move(resume)};
}

// Client::AcquireAsync: up to Options::max_attempts attempts.
inline Awaitable<absl::StatusOr<Lease>, internal_coro::AcquireCall> Acquire(
    Client& client, absl::string_view resource, absl::Duration ttl, Resume resume = {}) {
  return {{&client, std::string(resource), ttl}, std::move(resume)};
}

// Client::AcquireAsync with a wait: until held, `wait` passed (kDeadlineExceeded),
// or `stop` stopped (kCancelled).
inline Awaitable<absl::StatusOr<Lease>, internal_coro::AcquireWaitCall> Acquire(
    Client& client, absl::string_view resource, absl::Duration ttl, absl::Duration wait,
    StopToken stop = StopToken(), Resume resume = {}) {
  return {{&client, std::string(resource), ttl, wait, std::move(stop)}, std::move(resume)};
}

// Client::ExtendAsync. The awaitable keeps a copy of the lease (moved in
// from an rvalue).
inline Awaitable<absl::StatusOr<Lease>, internal_coro::ExtendCall> Extend(Client& client,
                                                                          Lease lease,
                                                                          absl::Duration ttl,
                                                                          Resume resume = {}) {
  return {{&client, std::move(lease), ttl}, std::move(resume)};
}

// FairLock::AcquireAsync (redlock/fair_mutex.h): a place in the queue, then
// the lock when it is first; until held, `wait` passed, `stop` stopped or
// the place lost. The lock must outlive the await. Its lease is released
// with coro::Release below (or FairLock::Release).
inline Awaitable<absl::StatusOr<Lease>, internal_coro::FairAcquireCall> Acquire(
    FairLock& lock, absl::Duration ttl, absl::Duration wait, StopToken stop = StopToken(),
    Resume resume = {}) {
  return {{&lock, ttl, wait, std::move(stop)}, std::move(resume)};
}

// FairLock::TryAcquire's asynchronous form: the lock only when it is free
// and nobody waits.
inline Awaitable<absl::StatusOr<Lease>, internal_coro::FairAcquireCall> TryAcquire(
    FairLock& lock, absl::Duration ttl, Resume resume = {}) {
  return {{&lock, ttl, absl::ZeroDuration(), StopToken()}, std::move(resume)};
}

// Client::ReleaseAsync. The awaitable keeps a copy of the lease (moved in
// from an rvalue).
inline Awaitable<absl::Status, internal_coro::ReleaseCall> Release(Client& client, Lease lease,
                                                                   Resume resume = {}) {
  return {{&client, std::move(lease)}, std::move(resume)};
}

}  // namespace redlock::coro

#endif  // REDLOCK_CORO_H_
