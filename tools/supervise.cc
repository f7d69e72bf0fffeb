#include "tools/supervise.h"

#include <errno.h>
#include <poll.h>
#include <spawn.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tools/cli_flags.h"

extern char** environ;

namespace redlock::cli {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// fd closed on scope exit.
struct ScopedFd {
  int fd = -1;
  ~ScopedFd() {
    if (fd >= 0) close(fd);
  }
};

// The environment of the command: ours, plus what it needs to know about the
// lock (replacing inherited values of the same names).
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& add) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const auto& [name, value] : add) replaced |= absl::StartsWith(*e, name + "=");
    if (!replaced) env.emplace_back(*e);
  }
  for (const auto& [name, value] : add) env.push_back(absl::StrCat(name, "=", value));
  return env;
}

// Spawns the command with `mask` as its signal mask. Returns the pid, or the
// exit code to use when it could not be started (126/127).
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& command,
                            const std::vector<std::string>& env, const sigset_t& mask,
                            int* exit_code) {
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc == 0) return pid;
  *exit_code = (rc == ENOENT || rc == ENOTDIR) ? kExitNotFound : kExitCannotExecute;
  return absl::Status(
      absl::StatusCode::kNotFound,
      absl::StrCat(command[0], ": ", rc == ENOENT ? "command not found" : strerror(rc)));
}

}  // namespace

absl::StatusOr<std::shared_ptr<LossReport>> LossReport::Create() {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  return std::shared_ptr<LossReport>(new LossReport(fd));
}

LossReport::~LossReport() { close(event_fd_); }

void LossReport::Report(absl::Status why, bool is_lost) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (is_lost) {
      if (!lost_) lost_status_ = std::move(why);
      lost_ = true;
    } else if (!at_risk_) {
      at_risk_ = true;
      risk_status_ = std::move(why);
    }
  }
  uint64_t one = 1;
  // Non-blocking; a full counter already means "something happened".
  (void)!write(event_fd_, &one, sizeof(one));
}

bool LossReport::AtRisk(absl::Status* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (at_risk_ && why != nullptr) *why = risk_status_;
  return at_risk_;
}

bool LossReport::Lost(absl::Status* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (lost_ && why != nullptr) *why = lost_status_;
  return lost_;
}

absl::StatusOr<int> ParseSignal(const std::string& text) {
  if (text == "none") return 0;
  int number = 0;
  if (absl::SimpleAtoi(text, &number) && number > 0 && number < NSIG) return number;
  std::string name = absl::StartsWith(text, "SIG") ? text.substr(3) : text;
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev != nullptr && name == abbrev) return sig;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--at-risk-signal: unknown signal '", text, "' (TERM, INT, USR1, ... or none)"));
}

std::optional<int> WaitFailed(absl::string_view name, int signo, const absl::Status& status,
                              absl::string_view interrupted) {
  if (signo != 0) {
    PrintError(name, absl::StrCat("interrupted by ", strsignal(signo), interrupted));
    return 128 + signo;
  }
  if (status.ok()) return std::nullopt;
  PrintError(name, status.message());
  return ExitCodeFor(status);
}

sigset_t HandledSignals() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : kForwarded) sigaddset(&handled, sig);
  sigaddset(&handled, SIGCHLD);
  return handled;
}

int Supervise(const Supervision& s, LossReport& loss,
              const std::function<absl::Status()>& release) {
  const absl::string_view kName = s.name;
  const sigset_t handled = HandledSignals();
  ScopedFd signal_fd{signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK)};
  if (signal_fd.fd < 0) {
    int err = errno;
    (void)release();
    PrintError(kName, absl::StrCat("signalfd: ", strerror(err)));
    return kExitInternal;
  }
  const int event_fd = loss.fd();
  int spawn_exit = kExitInternal;
  absl::StatusOr<pid_t> child =
      Spawn(s.command, ChildEnvironment(s.env), s.command_mask, &spawn_exit);
  if (!child.ok()) {
    (void)release();
    PrintError(kName, child.status().message());
    return spawn_exit;
  }
  const pid_t pid = *child;
  // Supervise until the command exits. Each turn waits at most 100 ms, so a
  // missed wake-up costs no more than that.
  bool signalled = false;  // the at-risk signal was sent
  bool lost = false;
  bool killed = false;
  absl::Time kill_at = absl::InfiniteFuture();
  int wstatus = 0;
  std::string supervise_error;
  for (;;) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      supervise_error = absl::StrCat("waitpid: ", strerror(errno));
      break;
    }
    absl::Duration until_kill = kill_at - absl::Now();
    int timeout_ms = 100;
    if (kill_at != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(
          std::clamp<int64_t>(absl::ToInt64Milliseconds(until_kill) + 1, 0, timeout_ms));
    }
    pollfd fds[2] = {{signal_fd.fd, POLLIN, 0}, {event_fd, POLLIN, 0}};
    (void)poll(fds, 2, timeout_ms);

    signalfd_siginfo info;
    while (read(signal_fd.fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;  // waitpid above
      // A signal from the terminal went to the whole foreground process
      // group, the command included: forward only those sent to us alone.
      const int code = info.ssi_code;
      if (code == SI_USER || code == SI_QUEUE || code == SI_TKILL) kill(pid, sig);
    }
    uint64_t count;
    while (read(event_fd, &count, sizeof(count)) == static_cast<ssize_t>(sizeof(count))) {
    }
    absl::Status why;
    const std::string signal_name =
        s.at_risk_signal > 0 ? absl::StrCat("SIG", sigabbrev_np(s.at_risk_signal)) : "";
    if (!signalled && s.at_risk_signal > 0 && loss.AtRisk(&why) && !loss.Lost(nullptr)) {
      // Likely to be lost, not certainly: ask the command to stop now.
      signalled = true;
      kill(pid, s.at_risk_signal);
      PrintError(kName, absl::StrCat(s.held, " is at risk (", why.message(), "); sent ",
                                     signal_name, " to the command (pid ", pid, ")"));
    }
    if (!lost && loss.Lost(&why)) {
      lost = true;
      kill_at = absl::Now() + s.grace;
      std::string sent;
      if (!signalled && s.at_risk_signal > 0) {
        signalled = true;
        kill(pid, s.at_risk_signal);
        sent = absl::StrCat("; sent ", signal_name, " to the command (pid ", pid, ")");
      }
      PrintError(kName, absl::StrCat("lost ", s.held, " (", why.message(), ")", sent,
                                     ", SIGKILL in ", absl::FormatDuration(s.grace)));
    }
    if (lost && !killed && absl::Now() >= kill_at) {
      killed = true;
      kill(pid, SIGKILL);
      if (s.grace > absl::ZeroDuration()) {
        PrintError(kName, absl::StrCat("the command (pid ", pid, ") did not exit within ",
                                       absl::FormatDuration(s.grace),
                                       " of losing the lock; sent SIGKILL"));
      }
    }
  }

  absl::Status why;
  if (!lost && loss.Lost(&why)) {
    lost = true;
    PrintError(kName, absl::StrCat("lost ", s.held, " (", why.message(),
                                   ") just before the command exited"));
  }
  if (absl::Status st = release(); !st.ok() && !lost) {
    PrintError(kName, absl::StrCat("warning: ", st.message(), "; the lock stays until its ttl"));
  }
  // The signal mask stays as it is: a signal still queued (one forwarded as
  // the command exited) must not end redlock now with another status.
  if (!supervise_error.empty()) {
    PrintError(kName, supervise_error);
    return kExitInternal;
  }
  if (lost) return kExitLeaseLost;
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return kExitInternal;
}

}  // namespace redlock::cli
