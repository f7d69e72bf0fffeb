#include "testkit/process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace redlock::testkit {
namespace {

constexpr size_t kMaxCapture = 4 << 20;

// What the child must reach after fork(): plain arrays and numbers only.
struct ChildPlan {
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* exe = nullptr;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int pass_fd = -1;
  int uid = -1;
  bool keep_signal_mask = false;
  pid_t parent = 0;
};

[[noreturn]] void ExecChild(const ChildPlan& p) {
  if (!p.keep_signal_mask) {
    sigset_t empty;
    sigemptyset(&empty);
    pthread_sigmask(SIG_SETMASK, &empty, nullptr);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != p.parent) _exit(127);  // the parent died before prctl
  dup2(p.stdin_fd, 0);
  dup2(p.stdout_fd, 1);
  dup2(p.stderr_fd, 2);
  if (p.pass_fd == 3) {
    fcntl(3, F_SETFD, fcntl(3, F_GETFD) & ~FD_CLOEXEC);
  } else if (p.pass_fd >= 0) {
    dup2(p.pass_fd, 3);  // dup2 clears FD_CLOEXEC on the new descriptor
  }
  if (p.uid >= 0) {
    if (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(p.uid)) != 0 ||
        setuid(static_cast<uid_t>(p.uid)) != 0) {
      _exit(126);
    }
    // setuid clears the death signal; set it again.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != p.parent) _exit(127);
  }
  execve(p.exe, p.argv.data(), p.envp.data());
  _exit(127);
}

std::vector<std::string> ChildEnvironment(const ProcessOptions& o) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view entry = *e;
    bool drop = false;
    for (const std::string& prefix : o.remove_env_prefixes) {
      drop = drop || absl::StartsWith(entry, prefix);
    }
    for (const auto& [name, value] : o.env) {
      drop = drop || (absl::StartsWith(entry, name) && entry.size() > name.size() &&
                      entry[name.size()] == '=');
    }
    if (!drop) env.emplace_back(entry);
  }
  for (const auto& [name, value] : o.env) env.push_back(absl::StrCat(name, "=", value));
  return env;
}

// Closes every descriptor in `fds` that is open, once.
void CloseAll(std::initializer_list<int*> fds) {
  for (int* fd : fds) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

// Reads what is there from `fd` into `out` (capped); false at EOF or error.
bool Drain(int fd, std::string* out) {
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf));
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  if (out->size() < kMaxCapture) out->append(buf, static_cast<size_t>(n));
  return true;
}

}  // namespace

int ProcessResult::exit_code() const {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

std::string FindExecutable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = getenv("PATH");
  const std::string dirs = absl::StrCat(
      path != nullptr ? path : "", ":/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin");
  for (absl::string_view dir : absl::StrSplit(dirs, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string DescribeWaitStatus(int s) {
  if (WIFEXITED(s)) return absl::StrCat("exit ", WEXITSTATUS(s));
  if (WIFSIGNALED(s)) return absl::StrCat("signal ", WTERMSIG(s));
  return absl::StrCat("status ", s);
}

absl::StatusOr<std::unique_ptr<Process>> Process::Start(ProcessOptions o) {
  if (o.argv.empty()) return absl::InvalidArgumentError("Process::Start: empty argv");
  const std::string exe = FindExecutable(o.executable.empty() ? o.argv[0] : o.executable);
  if (exe.empty()) {
    return absl::NotFoundError(
        absl::StrCat(o.executable.empty() ? o.argv[0] : o.executable, ": no such executable"));
  }
  if (o.stdout_to == Stream::kStdout) {
    return absl::InvalidArgumentError("Process::Start: stdout cannot go to stdout");
  }
  std::vector<std::string> env = ChildEnvironment(o);
  ChildPlan plan;
  for (std::string& a : o.argv) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (std::string& e : env) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);
  plan.exe = exe.c_str();
  plan.pass_fd = o.pass_fd;
  plan.uid = o.uid;
  plan.keep_signal_mask = o.keep_signal_mask;
  plan.parent = getpid();

  // Every descriptor is O_CLOEXEC: the child keeps only what dup2 gives it.
  int null_fd = -1, log_fd = -1, in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto fail = [&](absl::string_view what) {
    const int e = errno;
    CloseAll({&null_fd, &log_fd, &in[0], &in[1], &out[0], &out[1], &err[0], &err[1]});
    return absl::UnavailableError(absl::StrCat(what, ": ", strerror(e)));
  };
  null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) return fail("/dev/null");
  if (o.stdout_to == Stream::kLogFile || o.stderr_to == Stream::kLogFile) {
    if (o.log_path.empty()) {
      CloseAll({&null_fd});
      return absl::InvalidArgumentError("Process::Start: kLogFile without a log_path");
    }
    log_fd = open(o.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return fail(o.log_path);
    if (o.uid >= 0) {
      // Not fatal: the child may still write if the mode allows.
      (void)!fchown(log_fd, static_cast<uid_t>(o.uid), static_cast<gid_t>(o.uid));
    }
  }
  if (o.stdin_pipe && pipe2(in, O_CLOEXEC) != 0) return fail("pipe");
  if (o.stdout_to == Stream::kPipe && pipe2(out, O_CLOEXEC) != 0) return fail("pipe");
  if (o.stderr_to == Stream::kPipe && pipe2(err, O_CLOEXEC) != 0) return fail("pipe");
  auto target = [&](Stream s, int pipe_write, int own) {
    switch (s) {
      case Stream::kNull:
        return null_fd;
      case Stream::kInherit:
        return own;
      case Stream::kPipe:
        return pipe_write;
      case Stream::kLogFile:
        return log_fd;
      case Stream::kStdout:
        break;
    }
    return -1;
  };
  plan.stdin_fd = o.stdin_pipe ? in[0] : null_fd;
  plan.stdout_fd = target(o.stdout_to, out[1], 1);
  plan.stderr_fd = o.stderr_to == Stream::kStdout ? plan.stdout_fd : target(o.stderr_to, err[1], 2);

  const pid_t pid = fork();
  if (pid < 0) return fail("fork");
  if (pid == 0) ExecChild(plan);

  auto p = std::unique_ptr<Process>(new Process(pid));
  p->in_fd_ = in[1];
  p->out_fd_ = out[0];
  p->err_fd_ = err[0];
  in[1] = out[0] = err[0] = -1;
  CloseAll({&null_fd, &log_fd, &in[0], &out[1], &err[1]});
  return p;
}

Process::~Process() {
  Kill();
  CloseAll({&in_fd_, &out_fd_, &err_fd_});
}

std::optional<std::string> Process::ReadLine(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (int i = 0; i < 100000; ++i) {
    const size_t nl = out_buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = out_buffer_.substr(0, nl);
      out_buffer_.erase(0, nl + 1);
      return line;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration() || out_fd_ < 0) return std::nullopt;
    pollfd p{out_fd_, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    const size_t before = out_buffer_.size();
    if (!Drain(out_fd_, &out_buffer_) && out_buffer_.size() == before) return std::nullopt;
  }
  return std::nullopt;
}

absl::Status Process::Signal(int sig) {
  if (pid_ <= 0) return absl::FailedPreconditionError("the process has been reaped");
  if (kill(pid_, sig) != 0) return absl::InternalError(absl::StrCat("kill: ", strerror(errno)));
  return absl::OkStatus();
}

std::optional<int> Process::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return wait_status_;
  const absl::Time deadline = absl::Now() + timeout;
  for (int i = 0; i < 10000000; ++i) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      wait_status_ = r == pid_ ? status : 0;
      pid_ = -1;
      return wait_status_;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return std::nullopt;
}

int Process::Kill() {
  if (pid_ <= 0) return wait_status_;
  kill(pid_, SIGKILL);
  int status = 0;
  pid_t r = -1;
  for (int i = 0; i < 1000; ++i) {  // retried on EINTR only
    r = waitpid(pid_, &status, 0);
    if (r >= 0 || errno != EINTR) break;
  }
  wait_status_ = r == pid_ ? status : 0;
  pid_ = -1;
  return wait_status_;
}

ProcessResult Process::Communicate(absl::Duration timeout, absl::string_view input) {
  ProcessResult result;
  const absl::Time deadline = absl::Now() + timeout;
  if (in_fd_ >= 0) {
    // A child that exits without reading its stdin must not kill the caller
    // with SIGPIPE: blocked for this thread while writing (EPIPE instead),
    // and a SIGPIPE raised meanwhile is consumed.
    sigset_t pipe_set, old_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    bool broken = false;
    for (size_t off = 0, i = 0; off < input.size() && i < 100000; ++i) {
      const ssize_t w = write(in_fd_, input.data() + off, input.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        broken = w < 0 && errno == EPIPE;
        break;
      }
      off += static_cast<size_t>(w);
    }
    if (broken) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_set, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
    CloseAll({&in_fd_});
  }
  result.out = std::move(out_buffer_);
  out_buffer_.clear();
  // Bounded: every pass either reads or waits at most 100 ms, until the deadline.
  for (int i = 0; i < 1000000 && (out_fd_ >= 0 || err_fd_ >= 0); ++i) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      result.timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    const int r =
        poll(fds, 2, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 100)));
    if (r <= 0) continue;
    if (fds[0].revents != 0 && !Drain(out_fd_, &result.out)) CloseAll({&out_fd_});
    if (fds[1].revents != 0 && !Drain(err_fd_, &result.err)) CloseAll({&err_fd_});
  }
  std::optional<int> status;
  if (!result.timed_out) status = Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
  if (!status.has_value()) {
    result.timed_out = true;
    status = Kill();
  }
  result.wait_status = *status;
  return result;
}

absl::StatusOr<ProcessResult> RunProcess(ProcessOptions options, absl::Duration timeout,
                                         absl::string_view input) {
  if (!input.empty()) options.stdin_pipe = true;
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Start(std::move(options));
  if (!p.ok()) return p.status();
  return (*p)->Communicate(timeout, input);
}

}  // namespace redlock::testkit
