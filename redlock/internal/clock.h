// The steady clock, behind an interface so tests can drive time.

#ifndef REDLOCK_INTERNAL_CLOCK_H_
#define REDLOCK_INTERNAL_CLOCK_H_

#include <chrono>

namespace redlock::internal {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  static SteadyClock* Get() {
    static SteadyClock clock;
    return &clock;
  }
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_CLOCK_H_
