// What follows a failed attempt of an acquisition (a lock, a set, a permit of
// a semaphore): another one after a pause, or the end of the call with the
// status that says why (docs/design.md 5.5, 5.6). One policy for every
// acquiring operation (acquire_op, semaphore_op).

#ifndef REDLOCK_INTERNAL_ATTEMPTS_H_
#define REDLOCK_INTERNAL_ATTEMPTS_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/context.h"
#include "redlock/outcome.h"

namespace redlock::internal {

class AttemptPolicy {
 public:
  // With `wait`: attempts until held or that long has passed (infinite:
  // until stopped), polling at growing, jittered pauses (from retry_delay / 4
  // up to wait_poll_max) that release announcements cut short. Without:
  // `max_attempts` attempts retry_delay +/- retry_jitter apart, and none
  // after one that failed for unavailable nodes when
  // `fail_fast_unavailable`. The call starts now.
  AttemptPolicy(const OpContext& ctx, std::optional<absl::Duration> wait, int max_attempts,
                bool fail_fast_unavailable);

  struct Decision {
    bool retry = false;
    absl::Duration delay;                           // with retry: the pause before the next attempt
    absl::Status status;                            // without: how the call ends
    Outcome::Kind kind = Outcome::Kind::kInternal;  // set by AfterFailure
  };

  // Attempt number `attempt` failed with `status`; `what` names the call in
  // messages ("acquire \"r\""). A client shutting down ends the call
  // CANCELLED, naming the last attempt.
  Decision AfterFailure(absl::string_view what, int attempt, absl::Status status);

  // What is left of a finite wait (zero once it passed); infinite without
  // a deadline.
  absl::Duration Left() const;

  // The status of a call cancelled after `attempt` attempts.
  static absl::Status Cancelled(absl::string_view what, int attempt);

 private:
  const OpContext& ctx_;
  const std::optional<absl::Duration> wait_;
  std::optional<Clock::TimePoint> deadline_;  // a finite wait's
  const int max_attempts_;
  const bool fail_fast_unavailable_;
  absl::Duration pause_;  // the next polling pause of a wait
};

class Round;

// Why a fencing commit failed (its round refused, docs/design.md 5.10): the
// key was gone when the commit came. It expired (the attempt, `elapsed`
// since its start, outlived its `ttl` less the drift allowance: the client
// stopped between the rounds; kDeadlineExceeded) or the node lost it (a
// restart without persistence, a failover, a clock jump; kUnavailable,
// worth another attempt). Nobody else can have taken it from a live key
// (SET NX): never "held by another client" (the simulator's hour run, seed
// 20288345: a restart between the rounds).
absl::Status FenceCommitFailure(const Round& round, absl::string_view what, absl::string_view lost,
                                absl::Duration elapsed, absl::Duration ttl, const Options& options);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ATTEMPTS_H_
