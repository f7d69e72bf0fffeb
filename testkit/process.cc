#include "tests/testing/child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/time/clock.h"

extern char** environ;

namespace redlock::testkit {

std::unique_ptr<Child> Child::Start(const std::vector<std::string>& argv,
                                    const std::vector<std::pair<std::string, std::string>>& env,
                                    bool capture_stdout) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    bool replaced = false;
    for (const auto& [name, value] : env) {
      if (entry.compare(0, name.size() + 1, name + "=") == 0) replaced = true;
    }
    if (!replaced) env_strings.push_back(std::move(entry));
  }
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
  // Everything the child needs is built before fork(): the child may only
  // make async-signal-safe calls.
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  std::vector<char*> argvp;
  for (auto& s : argv_copy) argvp.push_back(s.data());
  argvp.push_back(nullptr);

  int out[2] = {-1, -1};
  if (capture_stdout && ::pipe2(out, O_CLOEXEC) != 0) return nullptr;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (capture_stdout) {
      ::close(out[0]);
      ::close(out[1]);
    }
    return nullptr;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(capture_stdout ? out[1] : devnull, 1);
    ::dup2(devnull, 2);
    ::execve(argvp[0], argvp.data(), envp.data());
    ::_exit(127);
  }
  auto child = std::unique_ptr<Child>(new Child(pid));
  if (capture_stdout) {
    ::close(out[1]);
    child->out_fd_ = out[0];
  }
  return child;
}

Child::~Child() {
  Kill();
  if (out_fd_ >= 0) ::close(out_fd_);
}

std::optional<std::string> Child::ReadLine(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (int i = 0; i < 100000; ++i) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration() || out_fd_ < 0) return std::nullopt;
    pollfd p{out_fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char buf[4096];
    ssize_t n = ::read(out_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer_.append(buf, static_cast<size_t>(n));
  }
  return std::nullopt;
}

void Child::Signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

int Child::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (int i = 0; i < 100000 && pid_ > 0; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    if (absl::Now() > deadline) return -1;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return -1;
}

bool Child::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void Child::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace redlock::testkit
