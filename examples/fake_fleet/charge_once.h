// examples/fake_fleet: "your code", the kind a service writes around a lock,
// and its test against the fake fleet (charge_once_test.cc, README.md).
//
// ChargeOnce charges an order at most once, whichever of several workers
// runs it: under the order's lock it looks the charge up in the ledger and,
// if it is not there, makes it. The ledger takes the lease's fencing token
// with each charge and refuses a token older than one it has seen for the
// order, so a worker whose lease ran out while it was busy (a pause, a
// node's clock jumping) cannot charge after the next holder.

#ifndef REDLOCK_EXAMPLES_FAKE_FLEET_CHARGE_ONCE_H_
#define REDLOCK_EXAMPLES_FAKE_FLEET_CHARGE_ONCE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "redlock/client.h"

namespace payments {

// The payments ledger (in real life a database table with a fencing
// column). Thread-safe.
class Ledger {
 public:
  // Records the charge of `order`. kFailedPrecondition when `fencing_token`
  // is older than the newest one seen for the order; kAlreadyExists when
  // the order is charged already.
  absl::Status Charge(const std::string& order, int64_t cents, uint64_t fencing_token);
  bool Charged(const std::string& order) const;
  // How many charges were recorded, all orders together.
  int charges() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> charged_;        // order -> cents
  std::map<std::string, uint64_t> newest_token_;  // order -> highest token seen
};

// Called between the lock and the charge (the slow part: a call to the
// card processor). Tests use it to inject faults at that moment.
using BeforeCharge = std::function<void()>;

// Charges `order` once. OK when it is charged (now or before). REQUIRES:
// `locks` has Options::fencing on (the ledger needs the tokens).
//   kAborted             another worker holds the order's lock: try later.
//   kUnavailable         the lock service is unreachable: try later.
//   kFailedPrecondition  our lease ran out before the charge and another
//                        worker took the order over: nothing was charged by us.
absl::Status ChargeOnce(redlock::Client& locks, Ledger& ledger, const std::string& order,
                        int64_t cents, const BeforeCharge& before_charge = nullptr);

}  // namespace payments

#endif  // REDLOCK_EXAMPLES_FAKE_FLEET_CHARGE_ONCE_H_
