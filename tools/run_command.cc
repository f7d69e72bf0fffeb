// `redlock run`: holds a lock, auto-renewed, while a command runs.
//
// Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD are blocked in every
// thread and read from signalfds by the main thread, so the client's I/O
// thread (created with them blocked) never sees them. While waiting for the
// lock, SIGINT and SIGTERM cancel the wait (exit 128 + signal, nothing held);
// while the command runs, they are forwarded to it. The command is spawned
// with the signal mask redlock started with.

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "tools/cli_flags.h"
#include "tools/commands.h"
#include "tools/interruptible.h"

extern char** environ;

namespace redlock::cli {
namespace {

constexpr absl::string_view kName = "run";
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Where the renewal reports that the lease is at risk, or lost (from the
// client's I/O thread). Shared, so that a late callback never touches freed
// memory.
struct LossReport {
  explicit LossReport(int fd) : event_fd(fd) {}
  ~LossReport() { close(event_fd); }
  LossReport(const LossReport&) = delete;
  LossReport& operator=(const LossReport&) = delete;

  void Report(absl::Status why, bool is_lost) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (is_lost) {
        if (!lost) lost_status = std::move(why);
        lost = true;
      } else if (!at_risk) {
        at_risk = true;
        risk_status = std::move(why);
      }
    }
    uint64_t one = 1;
    // Non-blocking; a full counter already means "something happened".
    (void)!write(event_fd, &one, sizeof(one));
  }
  bool AtRisk(absl::Status* why) {
    std::lock_guard<std::mutex> lock(mu);
    if (at_risk && why != nullptr) *why = risk_status;
    return at_risk;
  }
  bool Lost(absl::Status* why) {
    std::lock_guard<std::mutex> lock(mu);
    if (lost && why != nullptr) *why = lost_status;
    return lost;
  }

  const int event_fd;
  std::mutex mu;
  bool at_risk = false;
  bool lost = false;
  absl::Status risk_status, lost_status;
};

// "TERM", "SIGTERM", "15" or "none" (0).
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

// fd closed on scope exit.
struct ScopedFd {
  int fd = -1;
  ~ScopedFd() {
    if (fd >= 0) close(fd);
  }
};

// The environment of the command: ours, plus what it needs to know about the
// lock (replacing inherited values of the same names).
std::vector<std::string> ChildEnvironment(const Lease& lease, bool fencing) {
  std::vector<std::pair<std::string, std::string>> add = {
      {"REDLOCK_RESOURCE", lease.resource()},
      {"REDLOCK_TOKEN", lease.token()},
  };
  if (fencing) add.emplace_back("REDLOCK_FENCING_TOKEN", std::to_string(lease.fencing_token()));
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

int RunRun(const ParsedArgs& args) {
  if (!args.positional.empty()) {
    PrintError(kName, absl::StrCat("unexpected argument '", args.positional[0], "'"));
    return kExitUsage;
  }
  absl::StatusOr<std::string> resource = ResourceFlag(args, false);
  absl::StatusOr<absl::Duration> ttl = DurationFlag(args, "ttl", true, absl::ZeroDuration(), false);
  absl::StatusOr<absl::Duration> wait =
      DurationFlag(args, "wait", false, absl::ZeroDuration(), true);
  absl::StatusOr<absl::Duration> grace =
      DurationFlag(args, "grace", false, absl::Seconds(10), true);
  absl::StatusOr<absl::Duration> max_hold =
      DurationFlag(args, "max-hold", false, absl::InfiniteDuration(), false);
  absl::StatusOr<int> at_risk_signal =
      ParseSignal(args.Has("at-risk-signal") ? args.Get("at-risk-signal") : "TERM");
  for (const absl::Status& st : {resource.status(), ttl.status(), wait.status(), grace.status(),
                                 max_hold.status(), at_risk_signal.status()}) {
    if (!st.ok()) {
      PrintError(kName, st.message());
      return kExitUsage;
    }
  }
  if (args.command.empty()) {
    PrintError(kName, "missing the command: redlock run --resource R --ttl DUR -- CMD [ARGS...]");
    return kExitUsage;
  }

  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : kForwarded) sigaddset(&handled, sig);
  sigaddset(&handled, SIGCHLD);
  // The client's I/O thread inherits the mask at its creation: create it
  // with our signals blocked, so that only the main thread takes them.
  // While waiting for the lock, SIGINT and SIGTERM cancel the wait.
  InterruptSignals interrupts;
  const sigset_t original = interrupts.original_mask();
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  absl::StatusOr<std::unique_ptr<Client>> client = MakeClient(args);
  if (!client.ok()) {
    PrintError(kName, client.status().message());
    return ExitCodeFor(client.status());
  }
  const bool fencing = (*client)->options().fencing;

  int signo = 0;
  absl::StatusOr<Lease> lease =
      AcquireInterruptibly(**client, *resource, *ttl, *wait, interrupts, &signo);
  if (signo != 0) {
    PrintError(kName, absl::StrCat("interrupted by ", strsignal(signo),
                                   " while waiting for the lock; the command was not run"));
    return 128 + signo;
  }
  if (!lease.ok()) {
    PrintError(kName, lease.status().message());
    return ExitCodeFor(lease.status());
  }

  ScopedFd signal_fd{signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK)};
  int event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (signal_fd.fd < 0 || event_fd < 0) {
    int err = errno;
    if (event_fd >= 0) close(event_fd);
    (void)(*client)->Release(*lease);
    PrintError(kName, absl::StrCat("signalfd/eventfd: ", strerror(err)));
    return kExitInternal;
  }
  auto loss = std::make_shared<LossReport>(event_fd);

  RenewOptions renew;
  renew.max_hold = *max_hold;
  renew.on_at_risk = [loss](const Lease&, const absl::Status& why) { loss->Report(why, false); };
  absl::StatusOr<std::unique_ptr<Renewal>> renewal = (*client)->AutoRenew(
      *lease, std::move(renew), [loss](absl::Status why) { loss->Report(why, true); });
  if (!renewal.ok()) {
    (void)(*client)->Release(*lease);
    PrintError(kName, renewal.status().message());
    return ExitCodeFor(renewal.status());
  }

  int spawn_exit = kExitInternal;
  absl::StatusOr<pid_t> child =
      Spawn(args.command, ChildEnvironment(*lease, fencing), original, &spawn_exit);
  if (!child.ok()) {
    renewal->reset();
    (void)(*client)->Release(*lease);
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
        *at_risk_signal > 0 ? absl::StrCat("SIG", sigabbrev_np(*at_risk_signal)) : "";
    if (!signalled && *at_risk_signal > 0 && loss->AtRisk(&why) && !loss->Lost(nullptr)) {
      // Likely to be lost, not certainly: ask the command to stop now.
      signalled = true;
      kill(pid, *at_risk_signal);
      PrintError(kName,
                 absl::StrCat("the lock on ", JsonString(*resource), " is at risk (", why.message(),
                              "); sent ", signal_name, " to the command (pid ", pid, ")"));
    }
    if (!lost && loss->Lost(&why)) {
      lost = true;
      kill_at = absl::Now() + *grace;
      std::string sent;
      if (!signalled && *at_risk_signal > 0) {
        signalled = true;
        kill(pid, *at_risk_signal);
        sent = absl::StrCat("; sent ", signal_name, " to the command (pid ", pid, ")");
      }
      PrintError(kName,
                 absl::StrCat("lost the lock on ", JsonString(*resource), " (", why.message(), ")",
                              sent, ", SIGKILL in ", absl::FormatDuration(*grace)));
    }
    if (lost && !killed && absl::Now() >= kill_at) {
      killed = true;
      kill(pid, SIGKILL);
      if (*grace > absl::ZeroDuration()) {
        PrintError(kName,
                   absl::StrCat("the command (pid ", pid, ") did not exit within ",
                                absl::FormatDuration(*grace), " of losing the lock; sent SIGKILL"));
      }
    }
  }

  renewal->reset();
  absl::Status why;
  if (!lost && loss->Lost(&why)) {
    lost = true;
    PrintError(kName, absl::StrCat("lost the lock on ", JsonString(*resource), " (", why.message(),
                                   ") just before the command exited"));
  }
  if (absl::Status st = (*client)->Release(*lease); !st.ok() && !lost) {
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
