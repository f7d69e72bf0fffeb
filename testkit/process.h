// A child process for tests: started with fork+exec, its stdout optionally
// read line by line, and SIGKILLed and reaped by pid when the object dies,
// so every exit path of a test cleans up. The child also dies with the
// thread that started it (PR_SET_PDEATHSIG).

#ifndef REDLOCK_TESTS_TESTING_CHILD_H_
#define REDLOCK_TESTS_TESTING_CHILD_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace redlock::testkit {

class Child {
 public:
  // Starts `argv` (argv[0] an absolute path) with the current environment
  // plus `env` (replacing names that exist). Stdout goes to a pipe read by
  // ReadLine() when `capture_stdout`, else to /dev/null; stdin and stderr
  // are /dev/null. Null if the pipe or fork failed.
  static std::unique_ptr<Child> Start(const std::vector<std::string>& argv,
                                      const std::vector<std::pair<std::string, std::string>>& env,
                                      bool capture_stdout);

  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  // Next line of stdout without the newline, or nullopt at EOF or when
  // `timeout` passes first.
  std::optional<std::string> ReadLine(absl::Duration timeout);
  void Signal(int sig);
  // Waits for exit; returns the raw wait status, or -1 on timeout.
  int Wait(absl::Duration timeout);
  bool Running();
  void Kill();

 private:
  explicit Child(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  int out_fd_ = -1;
  std::string buffer_;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTS_TESTING_CHILD_H_
