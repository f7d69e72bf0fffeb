// chaos/base/cleanup.h: helper commands and the last-resort cleanup of the chaos
// harness (child processes themselves are testkit::Process).
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

#ifndef REDLOCK_CHAOS_BASE_CLEANUP_H_
#define REDLOCK_CHAOS_BASE_CLEANUP_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "testkit/process.h"

namespace redlock::chaos {

// Registry of what must not outlive the harness.
void RegisterPid(pid_t pid);
void UnregisterPid(pid_t pid);
void RegisterNamespace(const std::string& name);
void UnregisterNamespace(const std::string& name);

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (call it from main
// before any thread is started, so every thread inherits the mask) and starts
// the signal thread described above. Children started with testkit::Process
// (RunCommand() and the client processes) get an empty signal mask back.
// Idempotent.
void InstallSignalCleanup(absl::Duration grace = absl::Seconds(20));

// True once a termination signal was received (or RequestInterrupt()).
bool Interrupted();
void RequestInterrupt();

// Runs argv[0] (testkit::FindExecutable) with `input` on its stdin, its pid
// registered while it runs, and waits for it at most `timeout` (then SIGKILL
// by pid). The result holds the exit code and stdout and stderr, interleaved.
// A non-zero exit is not an error here; a command that cannot be started is
// an error (kNotFound when it is missing), a timeout kDeadlineExceeded.
[[nodiscard]] absl::StatusOr<testkit::ProcessResult> RunCommand(
    const std::vector<std::string>& argv, absl::Duration timeout, const std::string& input = "");

// Sleeps for `d` in small steps; returns false early when Interrupted().
bool InterruptibleSleep(absl::Duration d);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_BASE_CLEANUP_H_
