// An environment variable set for a scope (the chaos tests' CI=true and
// REDLOCK_CHAOS_* switches).

#ifndef REDLOCK_TESTS_CHAOS_SCOPED_ENV_H_
#define REDLOCK_TESTS_CHAOS_SCOPED_ENV_H_

#include <stdlib.h>

#include <string>

namespace redlock::chaos {

// Sets an environment variable for the scope (unsets it if `value` is
// null), restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace redlock::chaos

#endif  // REDLOCK_TESTS_CHAOS_SCOPED_ENV_H_
