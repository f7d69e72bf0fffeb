// The one way tests, bench, chaos and examples start a child process.
//
//   ProcessOptions o;
//   o.argv = {"/path/to/redlock-proxy", "--help"};
//   o.stdout_to = Stream::kPipe;
//   absl::StatusOr<std::unique_ptr<Process>> p = Process::Start(std::move(o));
//   std::optional<std::string> line = (*p)->ReadLine(absl::Seconds(5));
//   std::optional<int> status = (*p)->Wait(absl::Seconds(5));  // raw wait status
//
//   // One command to completion, with its output:
//   absl::StatusOr<ProcessResult> r = RunProcess({.argv = {"nft", "-v"}}, absl::Seconds(5));
//
// fork+exec: everything the child needs is built before fork(), the child
// makes only async-signal-safe calls. The child gets PR_SET_PDEATHSIG=SIGKILL
// (it dies with the THREAD that started it: start from a thread that
// outlives the child), an empty signal mask unless asked, stdin from /dev/null unless
// asked, and the caller's environment plus `env`. The object owns the child:
// its destructor SIGKILLs and reaps it by pid, so every exit path of a test
// cleans up.
//
// Thread-safety: a Process is not thread-safe; one owner drives it.

#ifndef REDLOCK_TESTKIT_PROCESS_H_
#define REDLOCK_TESTKIT_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace redlock::testkit {

// Where a standard output stream of the child goes.
enum class Stream {
  kNull,     // /dev/null
  kInherit,  // the caller's own
  kPipe,     // a pipe, read with ReadLine() or Communicate()
  kLogFile,  // appended to ProcessOptions::log_path
  kStdout,   // stderr only: wherever stdout goes (one interleaved stream)
};

struct ProcessOptions {
  // argv[0] is a path, or a name looked up with FindExecutable().
  std::vector<std::string> argv;
  // The file to execute when it is not argv[0] (e.g. "/proc/self/exe").
  std::string executable;
  // Added to the caller's environment, replacing variables of the same name.
  std::vector<std::pair<std::string, std::string>> env;
  // Variables of the caller whose names start with one of these are left out.
  std::vector<std::string> remove_env_prefixes;
  Stream stdout_to = Stream::kNull;
  Stream stderr_to = Stream::kNull;
  // For Stream::kLogFile: created (mode 0644) or appended to.
  std::string log_path;
  // stdin is a pipe fed by Communicate()'s `input` (else /dev/null).
  bool stdin_pipe = false;
  // When >= 0: run as this uid, with gid = uid and no supplementary groups
  // (needs root); the log file is handed to that uid.
  int uid = -1;
  // When >= 0: this descriptor of the caller becomes fd 3 of the child.
  int pass_fd = -1;
  // The child keeps the signals the starting thread blocks blocked (by
  // default it starts with none blocked).
  bool keep_signal_mask = false;
};

// How a child ended, and what it wrote to its pipes.
struct ProcessResult {
  int wait_status = 0;     // raw, as waitpid returns it
  bool timed_out = false;  // killed by Communicate() at its deadline
  std::string out;         // stdout (with stderr when stderr_to = kStdout)
  std::string err;         // stderr, when piped on its own
  // The exit code; 128 + the signal number when a signal ended it.
  int exit_code() const;
};

class Process {
 public:
  // kNotFound when the executable is missing, kUnavailable when a pipe, the
  // log file or fork() fails.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Process>> Start(ProcessOptions options);

  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  // Kill().
  ~Process();

  // The child's pid; -1 once it has been reaped.
  pid_t pid() const { return pid_; }

  // The next line of piped stdout without its newline; nullopt at EOF or when
  // `timeout` passes first.
  std::optional<std::string> ReadLine(absl::Duration timeout);

  // Sends `sig`. kFailedPrecondition once the child has been reaped.
  absl::Status Signal(int sig);

  // Waits up to `timeout` (zero: does not wait) for the child to exit and
  // reaps it; returns the raw wait status, or nullopt while it still runs.
  // After the child was reaped, returns the same status again.
  std::optional<int> Wait(absl::Duration timeout);
  bool Running() { return !Wait(absl::ZeroDuration()).has_value(); }

  // SIGKILL by pid and reap (no-op once reaped). Returns the wait status.
  int Kill();

  // Writes `input` to stdin (needs stdin_pipe; written whole before any
  // output is read, so keep it below a pipe buffer, 64 KiB) and closes it,
  // reads the piped output until EOF, and reaps the child. At `timeout` the
  // child is killed and the result says timed_out. Keeps the first 4 MiB of
  // each stream.
  ProcessResult Communicate(absl::Duration timeout, absl::string_view input = "");

 private:
  explicit Process(pid_t pid) : pid_(pid) {}

  pid_t pid_;
  int wait_status_ = 0;
  int in_fd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_buffer_;  // ReadLine's unread rest
};

// Start() + Communicate(): runs a command to completion. The error is
// Start()'s; a non-zero exit or a timeout is in the result.
[[nodiscard]] absl::StatusOr<ProcessResult> RunProcess(ProcessOptions options,
                                                       absl::Duration timeout,
                                                       absl::string_view input = "");

// The path of an executable: `name` itself when it contains a '/' (if
// executable), else the first match on PATH, then in /usr/local/sbin,
// /usr/sbin, /sbin, /usr/local/bin, /usr/bin, /bin (ip and nft live in sbin,
// which a non-login PATH may lack). "" when there is none.
std::string FindExecutable(const std::string& name);

// "exit 0", "signal 9", ... for a raw wait status.
std::string DescribeWaitStatus(int wait_status);

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_PROCESS_H_
