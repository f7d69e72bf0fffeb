// chaos/cleanup.h: child processes, helper commands and the last-resort
// cleanup of the chaos harness.
//
// Everything the harness creates outside its own memory (client processes,
// network namespaces with their nft rules) is registered here while it
// exists. The objects that own them remove them on every normal and error
// path (destructors). For signals, InstallSignalCleanup() runs a thread that
// waits for SIGINT/SIGTERM/SIGHUP: the first signal sets Interrupted(), which
// every wait of the harness polls, so the scenario unwinds through its
// destructors; if that has not finished within a grace period (or on a second
// signal) the thread kills the registered processes by pid, deletes the
// registered namespaces and exits with status 130.
//
// Thread-safety: every function is thread-safe.

#ifndef REDLOCK_CHAOS_CLEANUP_H_
#define REDLOCK_CHAOS_CLEANUP_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace redlock::chaos {

// Registry of what must not outlive the harness.
void RegisterPid(pid_t pid);
void UnregisterPid(pid_t pid);
void RegisterNamespace(const std::string& name);
void UnregisterNamespace(const std::string& name);

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (call it from main
// before any thread is started, so every thread inherits the mask) and starts
// the signal thread described above. Children started by SpawnProcess() and
// RunCommand() get an empty signal mask back. Idempotent.
void InstallSignalCleanup(absl::Duration grace = absl::Seconds(20));

// True once a termination signal was received (or RequestInterrupt()).
bool Interrupted();
void RequestInterrupt();

// Output of a finished helper command.
struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal (or the timeout)
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] (looked up on PATH) with `input` on its stdin, waits for it at
// most `timeout` (then SIGKILL by pid), and returns its exit code and output.
// A non-zero exit is not an error here; a command that cannot be started is
// kUnavailable, a timeout kDeadlineExceeded.
[[nodiscard]] absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                                       absl::Duration timeout,
                                                       const std::string& input = "");

// How to start a child process.
struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path
  // Added to (or replacing in) the harness's environment.
  std::vector<std::pair<std::string, std::string>> env;
  // Run as this uid/gid (setgroups(0), setgid, setuid) when >= 0.
  int uid = -1;
  // stdout and stderr appended to this file ("" = /dev/null).
  std::string log_path;
  // This descriptor of the parent becomes fd 3 of the child (-1: none).
  int pass_fd = -1;
};

// fork+exec with PR_SET_PDEATHSIG=SIGKILL (the child dies with the thread
// that forked it: call from a thread that outlives the child), an empty
// signal mask and stdin from /dev/null. The pid is registered; the caller
// reaps it (ReapProcess) and unregisters it.
[[nodiscard]] absl::StatusOr<pid_t> SpawnProcess(const SpawnSpec& spec);

// waitpid for exactly `pid`: returns true (and the raw wait status) when it
// has exited; with `timeout` zero it does not wait. Unregisters the pid once
// reaped.
bool ReapProcess(pid_t pid, absl::Duration timeout, int* wait_status);

// "exit 0", "signal 9", ... for a raw wait status.
std::string DescribeWaitStatus(int wait_status);

// Sleeps for `d` in small steps; returns false early when Interrupted().
bool InterruptibleSleep(absl::Duration d);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_CLEANUP_H_
