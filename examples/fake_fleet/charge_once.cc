#include "charge_once.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace payments {

absl::Status Ledger::Charge(const std::string& order, int64_t cents, uint64_t fencing_token) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& newest = newest_token_[order];
  if (fencing_token < newest) {
    return absl::FailedPreconditionError(absl::StrCat("order ", order, ": fencing token ",
                                                      fencing_token, " is older than ", newest));
  }
  newest = fencing_token;
  if (!charged_.emplace(order, cents).second) {
    return absl::AlreadyExistsError(absl::StrCat("order ", order, " is charged already"));
  }
  return absl::OkStatus();
}

bool Ledger::Charged(const std::string& order) const {
  std::lock_guard<std::mutex> lock(mu_);
  return charged_.count(order) != 0;
}

int Ledger::charges() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(charged_.size());
}

absl::Status ChargeOnce(redlock::Client& locks, Ledger& ledger, const std::string& order,
                        int64_t cents, const BeforeCharge& before_charge) {
  const std::string resource = "charge/" + order;
  // A few attempts (Options::max_attempts), each answered for what it is:
  // an Acquire with a wait would answer kDeadlineExceeded for both a held
  // lock and an unreachable lock service (this example's first version
  // took that for "held", and LockServiceDownIsUnavailableAndChargesNothing
  // caught it).
  absl::StatusOr<redlock::Lease> lease = locks.Acquire(resource, absl::Seconds(2));
  if (absl::IsAborted(lease.status())) {
    return absl::AbortedError(absl::StrCat("order ", order, " is being charged by another worker"));
  }
  if (!lease.ok()) return lease.status();  // kUnavailable: the caller retries later

  absl::Status result = absl::OkStatus();
  if (!ledger.Charged(order)) {
    if (before_charge) before_charge();
    result = ledger.Charge(order, cents, lease->fencing_token());
    if (absl::IsAlreadyExists(result)) result = absl::OkStatus();  // charged once: done
  }
  // A release that fails leaves the lock to its ttl: nothing to undo here.
  (void)locks.Release(*lease);
  return result;
}

}  // namespace payments
