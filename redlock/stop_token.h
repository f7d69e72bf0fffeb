// redlock/stop_token.h: cancellation of pending calls, and the signal that a
// held lease is lost, as one small type modelled on C++20's std::stop_token
// (usable from C++17).
//
// Cancelling a blocking acquisition from another thread:
//
//   redlock::StopSource stop;
//   std::thread waiter([&] {
//     absl::StatusOr<redlock::Lease> lease =
//         client->Acquire("jobs/nightly", absl::Seconds(30), absl::InfiniteDuration(),
//                         stop.token());
//     if (absl::IsCancelled(lease.status())) return;  // asked to give up
//   });
//   ...
//   stop.RequestStop();  // the Acquire returns kCancelled promptly
//
// Stopping work when a lease is lost (Renewal::lost(), Mutex::lost()):
//
//   redlock::StopToken lost = renewal->lost();
//   for (const Item& item : batch) {
//     if (lost.stop_requested()) break;  // pollable
//     Process(item);
//   }
//   redlock::StopCallback on_lost(lost, [&] { cancel_rpc.Cancel(); });  // or a callback
//
// Thread-safety: every method of the three classes may be called from any
// thread. A token is a cheap handle (one shared pointer); copies observe the
// same source.

#ifndef REDLOCK_STOP_TOKEN_H_
#define REDLOCK_STOP_TOKEN_H_

#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"

namespace redlock {

namespace internal {
class StopState;
}  // namespace internal

class StopSource;

// The observing side: passed to calls that can be cancelled, or handed out by
// a lease's watcher.
class StopToken {
 public:
  // A token that is never stopped.
  StopToken() = default;

  // True once the source has requested a stop.
  bool stop_requested() const;
  // False for a default-constructed token (nothing can ever stop it).
  bool stop_possible() const { return state_ != nullptr; }

 private:
  friend class StopSource;
  friend class StopCallback;
  explicit StopToken(std::shared_ptr<internal::StopState> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::StopState> state_;
};

// The requesting side.
class StopSource {
 public:
  StopSource();

  // Requests a stop: every call holding a token of this source returns
  // kCancelled promptly, and every StopCallback runs (on this thread, before
  // RequestStop returns). Idempotent: true only for the call that made the
  // request.
  bool RequestStop();
  // True once RequestStop was called.
  bool stop_requested() const;
  // A token of this source, for the calls to cancel (cheap; any number).
  StopToken token() const { return StopToken(state_); }

 private:
  std::shared_ptr<internal::StopState> state_;
};

// Runs `fn` once when the token's source requests a stop: at construction if
// it already has (on this thread), else on the thread that calls
// RequestStop(). Destroying the callback unregisters it; if `fn` is running
// on another thread at that moment, the destructor waits for it to return,
// so `fn` may safely use objects that die with the callback.
class StopCallback {
 public:
  // Registers `fn` on `token` (runs it at once if a stop was already
  // requested). A token without a source never runs it.
  StopCallback(const StopToken& token, absl::AnyInvocable<void()> fn);
  ~StopCallback();
  StopCallback(const StopCallback&) = delete;
  StopCallback& operator=(const StopCallback&) = delete;

 private:
  std::shared_ptr<internal::StopState> state_;
  uint64_t id_ = 0;
};

}  // namespace redlock

#endif  // REDLOCK_STOP_TOKEN_H_
