#include "chaos/cleanup.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace redlock::chaos {
namespace {

std::atomic<bool> g_interrupted{false};

struct Registry {
  std::mutex mu;
  std::set<pid_t> pids;
  std::set<std::string> namespaces;
};

Registry& GetRegistry() {
  static Registry* r = new Registry();
  return *r;
}

std::string FindOnPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = getenv("PATH");
  std::string p = path != nullptr ? path : "";
  // ip and nft live in sbin, which a non-login PATH may lack.
  p += ":/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(p, ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::vector<std::string> MergedEnv(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const auto& kv : extra) {
    std::string prefix = kv.first + "=";
    bool replaced = false;
    for (auto& s : env) {
      if (absl::StartsWith(s, prefix)) {
        s = prefix + kv.second;
        replaced = true;
        break;
      }
    }
    if (!replaced) env.push_back(prefix + kv.second);
  }
  return env;
}

void EmergencyCleanup() {
  std::set<pid_t> pids;
  std::set<std::string> namespaces;
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    pids = r.pids;
    namespaces = r.namespaces;
  }
  for (pid_t pid : pids) {
    if (pid > 0) kill(pid, SIGKILL);
  }
  for (const std::string& ns : namespaces) {
    absl::StatusOr<CommandResult> r = RunCommand({"ip", "netns", "del", ns}, absl::Seconds(5));
    (void)r;
  }
}

void SignalThread(sigset_t set, absl::Duration grace) {
  for (int round = 0; round < 2; ++round) {
    int sig = 0;
    if (round == 0) {
      if (sigwait(&set, &sig) != 0) return;
      g_interrupted.store(true);
      fprintf(stderr, "\nredlock-chaos: signal %d, cleaning up (again to force)\n", sig);
      continue;
    }
    // Second round: wait for a second signal or the grace period.
    timespec ts = absl::ToTimespec(grace);
    siginfo_t info;
    int r = sigtimedwait(&set, &info, &ts);
    (void)r;
    fprintf(stderr, "redlock-chaos: forced cleanup\n");
    EmergencyCleanup();
    _exit(130);
  }
}

}  // namespace

void RegisterPid(pid_t pid) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.pids.insert(pid);
}

void UnregisterPid(pid_t pid) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.pids.erase(pid);
}

void RegisterNamespace(const std::string& name) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.namespaces.insert(name);
}

void UnregisterNamespace(const std::string& name) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.namespaces.erase(name);
}

void InstallSignalCleanup(absl::Duration grace) {
  static std::once_flag once;
  std::call_once(once, [grace] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(SignalThread, set, grace).detach();
  });
}

bool Interrupted() { return g_interrupted.load(); }
void RequestInterrupt() { g_interrupted.store(true); }

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout, const std::string& input) {
  if (argv.empty()) return absl::InvalidArgumentError("RunCommand: empty argv");
  std::string exe = FindOnPath(argv[0]);
  if (exe.empty()) return absl::UnavailableError(absl::StrCat(argv[0], ": not found on PATH"));
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return absl::UnavailableError(strerror(errno));
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    return absl::UnavailableError(strerror(errno));
  }
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env = MergedEnv({});
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) close(fd);
    return absl::UnavailableError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) {
    sigset_t empty;
    sigemptyset(&empty);
    pthread_sigmask(SIG_SETMASK, &empty, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(out_pipe[1], 2);
    execve(exe.c_str(), cargv.data(), cenv.data());
    _exit(127);
  }
  RegisterPid(pid);
  close(in_pipe[0]);
  close(out_pipe[1]);
  // Inputs are small (a ruleset): write all, then close.
  size_t off = 0;
  while (off < input.size()) {
    ssize_t w = write(in_pipe[1], input.data() + off, input.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  close(in_pipe[1]);
  CommandResult result;
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  bool timed_out = false;
  for (int i = 0; i < 1000000; ++i) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out_pipe[0], POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = read(out_pipe[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (result.output.size() < (1u << 20)) result.output.append(buf, static_cast<size_t>(n));
  }
  close(out_pipe[0]);
  int status = 0;
  if (timed_out) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    UnregisterPid(pid);
    return absl::DeadlineExceededError(
        absl::StrCat(args[0], " did not finish within ", absl::FormatDuration(timeout)));
  }
  if (!ReapProcess(pid, timeout, &status)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    UnregisterPid(pid);
    return absl::DeadlineExceededError(absl::StrCat(args[0], " did not exit"));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

absl::StatusOr<pid_t> SpawnProcess(const SpawnSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("SpawnProcess: empty argv");
  if (access(spec.argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(spec.argv[0], ": ", strerror(errno)));
  }
  std::vector<std::string> args = spec.argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env = MergedEnv(spec.env);
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::string log = spec.log_path.empty() ? "/dev/null" : spec.log_path;
  int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::UnavailableError(absl::StrCat(log, ": ", strerror(errno)));
  if (spec.uid >= 0 && !spec.log_path.empty()) {
    if (fchown(log_fd, static_cast<uid_t>(spec.uid), static_cast<gid_t>(spec.uid)) != 0) {
      // Not fatal: the child may still write if the mode allows.
    }
  }
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t parent = getpid();
  const int uid = spec.uid;
  const int pass_fd = spec.pass_fd;

  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return absl::UnavailableError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) {
    sigset_t empty;
    sigemptyset(&empty);
    pthread_sigmask(SIG_SETMASK, &empty, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    if (pass_fd >= 0) {
      if (pass_fd == 3) {
        int flags = fcntl(3, F_GETFD);
        fcntl(3, F_SETFD, flags & ~FD_CLOEXEC);
      } else {
        dup2(pass_fd, 3);  // dup2 clears FD_CLOEXEC on the new descriptor
      }
    }
    if (uid >= 0) {
      if (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(uid)) != 0 ||
          setuid(static_cast<uid_t>(uid)) != 0) {
        _exit(126);
      }
      // setuid clears the death signal; set it again.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
    }
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  RegisterPid(pid);
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  return pid;
}

bool ReapProcess(pid_t pid, absl::Duration timeout, int* wait_status) {
  if (pid <= 0) return true;
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  for (int i = 0; i < 10000000; ++i) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (wait_status != nullptr) *wait_status = status;
      UnregisterPid(pid);
      return true;
    }
    if (r < 0 && errno == ECHILD) {
      if (wait_status != nullptr) *wait_status = 0;
      UnregisterPid(pid);
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

std::string DescribeWaitStatus(int s) {
  if (WIFEXITED(s)) return absl::StrCat("exit ", WEXITSTATUS(s));
  if (WIFSIGNALED(s)) return absl::StrCat("signal ", WTERMSIG(s));
  return absl::StrCat("status ", s);
}

bool InterruptibleSleep(absl::Duration d) {
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(d);
  for (int i = 0; i < 100000000; ++i) {
    if (Interrupted()) return false;
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) return true;
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(left), std::chrono::milliseconds(20)));
  }
  return true;
}

}  // namespace redlock::chaos
