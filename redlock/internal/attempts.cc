#include "redlock/internal/attempts.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/jitter.h"
#include "redlock/internal/votes.h"

namespace redlock::internal {

AttemptPolicy::AttemptPolicy(const OpContext& ctx, std::optional<absl::Duration> wait,
                             int max_attempts, bool fail_fast_unavailable)
    : ctx_(ctx),
      wait_(wait),
      max_attempts_(max_attempts),
      fail_fast_unavailable_(fail_fast_unavailable),
      pause_(std::max(ctx.options().retry_delay / 4, absl::Milliseconds(1))) {
  if (wait_.has_value() && *wait_ != absl::InfiniteDuration()) {
    deadline_ = ctx_.clock().Now() + absl::ToChronoNanoseconds(*wait_);
  }
}

AttemptPolicy::Decision AttemptPolicy::AfterFailure(absl::string_view what, int attempt,
                                                    absl::Status status) {
  Decision d;
  d.kind = KindOf(status);
  if (!absl::IsCancelled(status) && ctx_.transport().stopping()) {
    // The client is being destroyed: a waiting caller learns that, not the
    // last attempt's refusal (client.h: pending calls end CANCELLED).
    status = absl::CancelledError(
        absl::StrCat(what, ": the client is shutting down (last attempt: ", status.message(), ")"));
  }
  if (absl::IsCancelled(status)) {
    d.status = std::move(status);
    d.kind = Outcome::Kind::kCancelled;
    return d;
  }
  d.delay = ctx_.RetryDelay();
  if (wait_.has_value()) {
    absl::Duration left = absl::InfiniteDuration();
    if (deadline_.has_value()) left = absl::FromChrono(*deadline_ - ctx_.clock().Now());
    if (left <= absl::ZeroDuration()) {
      d.status = absl::DeadlineExceededError(
          absl::StrCat(what, ": not held after waiting ", absl::FormatDuration(*wait_), " (",
                       AttemptCount(attempt), "); last attempt: ", status.message()));
      d.kind = Outcome::Kind::kWaitExpired;
      return d;
    }
    // Growing, jittered polling pauses (capped at wait_poll_max), cut short
    // by release announcements when notifications are on.
    d.delay = std::min(pause_ * UniformReal(0.5, 1.5), left);
    pause_ = std::min(pause_ * 2, ctx_.options().wait_poll_max);
  } else if (attempt >= max_attempts_ || (fail_fast_unavailable_ && absl::IsUnavailable(status))) {
    if (attempt > 1) {
      status = absl::Status(status.code(),
                            absl::StrCat(status.message(), " (after ", AttemptCount(attempt), ")"));
    }
    d.status = std::move(status);
    return d;
  }
  d.retry = true;
  return d;
}

absl::Duration AttemptPolicy::Left() const {
  if (!deadline_.has_value()) return absl::InfiniteDuration();
  return std::max(absl::FromChrono(*deadline_ - ctx_.clock().Now()), absl::ZeroDuration());
}

absl::Status AttemptPolicy::Cancelled(absl::string_view what, int attempt) {
  return absl::CancelledError(absl::StrCat(what, ": cancelled", attempt > 0 ? " after " : "",
                                           attempt > 0 ? AttemptCount(attempt) : ""));
}

absl::Status FenceCommitFailure(const Round& round, absl::string_view what, absl::string_view lost,
                                absl::Duration elapsed, absl::Duration ttl,
                                const Options& options) {
  const bool expired = elapsed >= ttl - DriftAllowance(ttl, options);
  absl::Status st =
      round.Failure(absl::StrCat(what, " (fencing round)"), "confirmed", lost,
                    expired ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kUnavailable);
  if (!expired) return st;
  return absl::Status(
      st.code(), absl::StrCat(st.message(), "; the attempt took ", absl::FormatDuration(elapsed),
                              " of the ", absl::FormatDuration(ttl), " ttl: its keys had expired"));
}

}  // namespace redlock::internal
