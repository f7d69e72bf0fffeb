// An Observer that records each acquisition's number of attempts (for
// tests of how often a waiter tries: the fair lock over real servers and
// over the fake fleet).

#ifndef REDLOCK_TESTS_ATTEMPT_LOG_H_
#define REDLOCK_TESTS_ATTEMPT_LOG_H_

#include <mutex>
#include <vector>

#include "redlock/observer.h"

namespace redlock::testkit {

class AttemptLog : public Observer {
 public:
  void OnAcquire(const AcquireEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    attempts_.push_back(event.outcome.attempts);
  }
  // Every acquisition's attempts so far, in the order they ended.
  std::vector<int> attempts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return attempts_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<int> attempts_;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTS_ATTEMPT_LOG_H_
