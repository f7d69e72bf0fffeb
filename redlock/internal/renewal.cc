#include "redlock/internal/renewal.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/keys_op.h"

namespace redlock::internal {

// One renewal. Every decision is taken in Evaluate(), run at start, by its
// one timer and after each extension: lost when the validity ran out, at
// risk when it runs low and no extension is to be expected to renew it (not
// extending, or the last extension failed), extend when due. The timer is
// set for the next of these points only: never while an extension is in
// flight and nothing else is due.
class RenewState : public std::enable_shared_from_this<RenewState> {
 public:
  RenewState(OpContext* ctx, std::vector<Lease> leases, int quorum, const LockTtl& ttl,
             RenewOptions options, absl::AnyInvocable<void(absl::Status)> on_lost)
      : ctx_(ctx),
        leases_(std::move(leases)),
        quorum_(quorum),
        ttl_(ttl),
        period_(std::max(ttl.ttl * options.interval_fraction, absl::Milliseconds(1))),
        at_risk_(options.at_risk > absl::ZeroDuration() ? options.at_risk : period_),
        options_(std::move(options)),
        first_acquired_(leases_[0].acquired_at()),
        extending_(options_.extend),
        next_extension_(leases_[0].acquired_at() + absl::ToChronoNanoseconds(period_)),
        on_lost_(std::move(on_lost)) {}

  void Evaluate() {
    absl::Status lost, risk;
    bool extend = false;
    OpContext* ctx = nullptr;
    std::vector<Lease> current;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!active_ || ctx_ == nullptr) return;
      ctx = ctx_;
      const Clock::TimePoint now = ctx_->clock().Now();
      const Clock::TimePoint valid_until = leases_[0].valid_until();
      if (extending_ && !in_flight_ && now >= next_extension_ &&
          options_.max_hold != absl::InfiniteDuration() &&
          now + absl::ToChronoNanoseconds(ttl_.ttl) >
              first_acquired_ + absl::ToChronoNanoseconds(options_.max_hold)) {
        extending_ = false;
        limit_ = absl::StrCat("the maximum hold of ", absl::FormatDuration(options_.max_hold),
                              " was reached");
      }
      if (now >= valid_until) {
        lost = absl::DeadlineExceededError(
            absl::StrCat("auto-renew: ", WhyNotRenewedLocked(), " and the lease ran out"));
        LoseLocked(lost);
      } else {
        const absl::Duration left = absl::FromChrono(valid_until - now);
        // Until the at-risk point (infinite while a healthy extension is
        // expected to renew the lease).
        const absl::Duration until_risk =
            RiskWatchedLocked() ? left - at_risk_ : absl::InfiniteDuration();
        if (!at_risk_now_ && until_risk <= absl::ZeroDuration()) {
          at_risk_now_ = true;
          risk = absl::UnavailableError(absl::StrCat("auto-renew: ", WhyNotRenewedLocked(), " and ",
                                                     absl::FormatDuration(left),
                                                     " of validity is left"));
        }
        if (extending_ && !in_flight_ && now >= next_extension_) {
          in_flight_ = true;
          extend = true;
          current = leases_;
        }
        // Look again at the next of: the extension, the at-risk point, the
        // end. An extension in flight calls Evaluate when it completes.
        absl::Duration wake = left;
        if (!at_risk_now_) wake = std::min(wake, until_risk);
        if (extending_ && !in_flight_) {
          wake = std::min(wake, absl::FromChrono(next_extension_ - now));
        }
        ScheduleLocked(wake);
      }
    }
    if (!lost.ok()) {
      Report(ctx, lost);
      return;
    }
    if (!risk.ok()) ReportAtRisk(ctx, risk);
    if (extend) {
      std::weak_ptr<RenewState> weak = weak_from_this();
      StartExtend(ctx, std::move(current), ttl_, quorum_,
                  [weak](absl::StatusOr<std::vector<Lease>> r) {
                    if (auto self = weak.lock()) self->OnExtended(std::move(r));
                  });
    }
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = false;
    if (ctx_ != nullptr && timer_ != 0) ctx_->transport().Cancel(timer_);
  }

  // The client is going. An active renewal ends: the lease is no longer
  // renewed and will run out, so lost() is stopped (on the I/O thread, like
  // a loss, before the client's destruction completes); on_lost is not
  // called, the lease is not known lost. REQUIRES: the transport is not shut
  // down yet.
  void Detach() {
    Transport* transport = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ctx_ == nullptr) return;
      if (active_) {
        transport = &ctx_->transport();
        status_ = absl::CancelledError(absl::StrCat(
            "auto-renew: the client was destroyed; the lease is no longer renewed and runs out ",
            "at its validity"));
      }
      active_ = false;
      ctx_ = nullptr;
    }
    if (transport == nullptr) return;
    transport->DeliverToUser([self = shared_from_this()] { self->lost_.RequestStop(); });
  }

  const std::string& token() const { return token_; }
  std::vector<Lease> leases() const {
    std::lock_guard<std::mutex> lock(mu_);
    return leases_;
  }
  Lease lease() const {
    std::lock_guard<std::mutex> lock(mu_);
    return leases_[0];
  }
  bool active() const {
    std::lock_guard<std::mutex> lock(mu_);
    return active_;
  }
  bool at_risk() const {
    std::lock_guard<std::mutex> lock(mu_);
    return at_risk_now_;
  }
  absl::Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  int renewals() const {
    std::lock_guard<std::mutex> lock(mu_);
    return renewals_;
  }
  StopToken lost() const { return lost_.token(); }

 private:
  void OnExtended(absl::StatusOr<std::vector<Lease>> r) {
    absl::Status lost;
    OpContext* ctx;
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ = false;
      if (!active_ || ctx_ == nullptr) return;
      ctx = ctx_;
      const Clock::TimePoint now = ctx_->clock().Now();
      if (r.ok()) {
        leases_ = *std::move(r);
        ++renewals_;
        at_risk_now_ = false;
        extension_failed_ = false;
        next_extension_ = leases_[0].acquired_at() + absl::ToChronoNanoseconds(period_);
        if (options_.max_renewals > 0 && renewals_ >= options_.max_renewals) {
          extending_ = false;
          limit_ = absl::StrCat("the limit of ", options_.max_renewals, " renewals was reached");
        }
      } else if (absl::IsCancelled(r.status())) {
        active_ = false;  // the client is shutting down
        return;
      } else if (absl::IsFailedPrecondition(r.status())) {
        lost = r.status();
      } else {
        // Not known lost (nodes unreachable, or refusals that a quorum may
        // still outweigh): retry well before it runs out; at-risk may fire.
        extension_failed_ = true;
        last_error_ = std::string(r.status().message());
        absl::Duration left = leases_[0].TimeLeft(now);
        next_extension_ = now + absl::ToChronoNanoseconds(std::min(period_ / 4, left / 2));
      }
      if (!lost.ok()) LoseLocked(lost);
    }
    if (!lost.ok()) {
      Report(ctx, lost);
      return;
    }
    Evaluate();
  }

  // Whether the at-risk point applies now: no extension is expected to
  // renew the lease (watch-only, stopped at a limit, or the last extension
  // failed). A healthy extension, due or in flight, is no risk: its round
  // ends within node_timeout, and a failure brings Evaluate back.
  bool RiskWatchedLocked() const { return !extending_ || extension_failed_; }

  // Why the lease is not being renewed, for the at-risk and lost messages.
  std::string WhyNotRenewedLocked() const {
    if (!limit_.empty()) return limit_;
    if (!options_.extend) return "the lease is only watched, not extended";
    return absl::StrCat("no extension succeeded (last error: ", last_error_, ")");
  }

  void ScheduleLocked(absl::Duration delay) {
    Transport& t = ctx_->transport();
    if (timer_ != 0) t.Cancel(timer_);
    std::weak_ptr<RenewState> weak = weak_from_this();
    timer_ = t.RunAfter(std::max(delay, absl::ZeroDuration()), [weak] {
      if (auto self = weak.lock()) self->Evaluate();
    });
  }

  void LoseLocked(const absl::Status& why) {
    active_ = false;
    status_ = why;
    if (timer_ != 0) ctx_->transport().Cancel(timer_);
    timer_ = 0;
  }

  // The lost token and the user's callback, on the I/O thread. `ctx` is
  // alive: the client waits for its I/O thread before it goes.
  void Report(OpContext* ctx, absl::Status why) {
    absl::AnyInvocable<void(absl::Status)> fire;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fire = std::move(on_lost_);
      on_lost_ = nullptr;
    }
    Observe(ctx, LeaseEvent::Kind::kLost, why);
    ctx->transport().DeliverToUser(
        [self = shared_from_this(), fire = std::move(fire), why]() mutable {
          self->lost_.RequestStop();
          if (fire) fire(why);
        });
  }

  void ReportAtRisk(OpContext* ctx, absl::Status why) {
    Observe(ctx, LeaseEvent::Kind::kAtRisk, why);
    if (!options_.on_at_risk) return;
    Lease lease = this->lease();
    auto fn = options_.on_at_risk;
    ctx->transport().DeliverToUser([fn, lease, why] { fn(lease, why); });
  }

  void Observe(OpContext* ctx, LeaseEvent::Kind kind, const absl::Status& why) {
    Observer* observer = ctx->observer();
    if (observer == nullptr) return;
    LeaseEvent event;
    event.kind = kind;
    event.why = why;
    for (const Lease& l : leases()) event.resources.push_back(l.resource());
    observer->OnLease(event);
  }

  mutable std::mutex mu_;
  OpContext* ctx_;  // null once detached
  std::vector<Lease> leases_;
  bool active_ = true;
  bool at_risk_now_ = false;
  absl::Status status_;
  int renewals_ = 0;
  StopSource lost_;
  const int quorum_;
  const LockTtl ttl_;
  const absl::Duration period_;
  const absl::Duration at_risk_;
  const RenewOptions options_;
  const Clock::TimePoint first_acquired_;
  const std::string token_ = leases_[0].token();
  bool extending_;
  bool in_flight_ = false;
  bool extension_failed_ = false;  // since the last success
  Clock::TimePoint next_extension_;
  std::string last_error_ = "none yet";
  std::string limit_;  // why renewal stopped at a limit
  absl::AnyInvocable<void(absl::Status)> on_lost_;
  Transport::TimerId timer_ = 0;
};

namespace {

class RenewalImpl final : public Renewal {
 public:
  explicit RenewalImpl(std::shared_ptr<RenewState> state) : state_(std::move(state)) {}
  ~RenewalImpl() override { state_->Stop(); }
  void Stop() override { state_->Stop(); }
  Lease lease() const override { return state_->lease(); }
  std::vector<Lease> leases() const override { return state_->leases(); }
  bool active() const override { return state_->active(); }
  bool at_risk() const override { return state_->at_risk(); }
  StopToken lost() const override { return state_->lost(); }
  absl::Status status() const override { return state_->status(); }
  int renewals() const override { return state_->renewals(); }

 private:
  std::shared_ptr<RenewState> state_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Renewal>> Renewals::Start(
    OpContext* ctx, std::vector<Lease> leases, int quorum, RenewOptions options,
    absl::AnyInvocable<void(absl::Status)> on_lost) {
  if (leases.empty() || !leases[0].has_value()) {
    return absl::InvalidArgumentError("auto-renew: empty lease");
  }
  const std::string& resource = leases[0].resource();
  if (!(options.interval_fraction > 0.0 && options.interval_fraction < 1.0)) {
    return absl::InvalidArgumentError("auto-renew: interval_fraction must be in (0, 1)");
  }
  if (options.max_renewals < 0) {
    return absl::InvalidArgumentError("auto-renew: max_renewals must be >= 0");
  }
  if (options.max_hold <= absl::ZeroDuration() || options.at_risk < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("auto-renew: max_hold must be > 0 and at_risk >= 0");
  }
  absl::Duration ttl = options.ttl == absl::ZeroDuration() ? leases[0].ttl() : options.ttl;
  absl::StatusOr<LockTtl> checked = CheckTtl(ttl, ctx->options());
  if (!checked.ok()) return checked.status();
  if (leases[0].TimeLeft(ctx->clock().Now()) <= absl::ZeroDuration()) {
    return absl::FailedPreconditionError(
        absl::StrCat("auto-renew \"", resource, "\": the lease has already run out"));
  }
  auto state = std::make_shared<RenewState>(ctx, std::move(leases), quorum, *checked,
                                            std::move(options), std::move(on_lost));
  {
    std::lock_guard<std::mutex> lock(mu_);
    // From a callback while the client is being destroyed: nothing would
    // ever detach it.
    if (detached_) {
      return absl::CancelledError(
          absl::StrCat("auto-renew \"", resource, "\": the client is shutting down"));
    }
    // Drop entries of finished renewals as we go.
    for (auto it = by_token_.begin(); it != by_token_.end();) {
      it = it->second.expired() ? by_token_.erase(it) : std::next(it);
    }
    by_token_.emplace(state->token(), state);
  }
  state->Evaluate();
  return std::unique_ptr<Renewal>(new RenewalImpl(std::move(state)));
}

void Renewals::StopFor(const std::string& token) {
  std::vector<std::shared_ptr<RenewState>> found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [begin, end] = by_token_.equal_range(token);
    for (auto it = begin; it != end; ++it) {
      if (auto r = it->second.lock()) found.push_back(std::move(r));
    }
    by_token_.erase(begin, end);
  }
  for (auto& r : found) r->Stop();
}

void Renewals::DetachAll() {
  std::vector<std::shared_ptr<RenewState>> found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    detached_ = true;
    for (auto& [token, weak] : by_token_) {
      if (auto r = weak.lock()) found.push_back(std::move(r));
    }
    by_token_.clear();
  }
  for (auto& r : found) r->Detach();
}

}  // namespace redlock::internal
