// Running a command while a lease is held (`redlock run`, `redlock elect`):
// the signals, the at-risk and lost reactions, the exit codes.
//
// Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD (HandledSignals())
// are blocked in every thread before the client is created and read from a
// signalfd by the main thread, so the client's I/O thread never sees them.
// While the command runs they are forwarded to it. The command is spawned
// with the signal mask redlock started with.

#ifndef REDLOCK_TOOLS_SUPERVISE_H_
#define REDLOCK_TOOLS_SUPERVISE_H_

#include <signal.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace redlock::cli {

// Where a renewal reports that the lease is at risk, or lost (from the
// client's I/O thread); wakes the supervising loop through an eventfd.
// Shared (std::shared_ptr), so that a late callback never touches freed
// memory.
class LossReport {
 public:
  // Opens the eventfd; kInternal when it cannot.
  static absl::StatusOr<std::shared_ptr<LossReport>> Create();
  ~LossReport();
  LossReport(const LossReport&) = delete;
  LossReport& operator=(const LossReport&) = delete;

  void Report(absl::Status why, bool is_lost);
  bool AtRisk(absl::Status* why);
  bool Lost(absl::Status* why);
  int fd() const { return event_fd_; }

 private:
  explicit LossReport(int fd) : event_fd_(fd) {}
  const int event_fd_;
  std::mutex mu_;
  bool at_risk_ = false;
  bool lost_ = false;
  absl::Status risk_status_, lost_status_;
};

// "TERM", "SIGTERM", "15" or "none" (0), for --at-risk-signal.
absl::StatusOr<int> ParseSignal(const std::string& text);

// SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD.
sigset_t HandledSignals();

// The end of the wait for what the command runs under (the lock, the
// leadership): when the wait was interrupted by signal `signo` (nonzero;
// `interrupted` says what was given up) or ended in `status`, an error, the
// exit code (128 + signo, or ExitCodeFor(status)) after printing why;
// nullopt when the command may run.
std::optional<int> WaitFailed(absl::string_view name, int signo, const absl::Status& status,
                              absl::string_view interrupted);

struct Supervision {
  absl::string_view name;  // "run", "elect": the prefix of every message
  // What is held, for messages: "the lock on \"R\"", "leadership of \"R\"".
  std::string held;
  std::vector<std::string> command;
  // Added to the command's environment (replacing inherited values).
  std::vector<std::pair<std::string, std::string>> env;
  sigset_t command_mask;  // the command's signal mask
  absl::Duration grace = absl::Seconds(10);
  int at_risk_signal = SIGTERM;  // 0: none
};

// Spawns the command and supervises it until it exits: forwards signals,
// sends the at-risk signal when `loss` reports a risk (or the loss, if no
// risk came first), SIGKILLs it `grace` after the loss. Then calls
// `release` (stop renewing, release the lease) and returns the exit code:
// the command's status (128+N for signal N), 67 when the lease was lost
// meanwhile, 126/127 when it could not be started, 70 on system errors.
// REQUIRES: HandledSignals() are blocked in every thread.
int Supervise(const Supervision& s, LossReport& loss, const std::function<absl::Status()>& release);

}  // namespace redlock::cli

#endif  // REDLOCK_TOOLS_SUPERVISE_H_
