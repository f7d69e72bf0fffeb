#include "chaos/base/cleanup.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"

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
    absl::StatusOr<testkit::ProcessResult> r =
        RunCommand({"ip", "netns", "del", ns}, absl::Seconds(5));
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

absl::StatusOr<testkit::ProcessResult> RunCommand(const std::vector<std::string>& argv,
                                                  absl::Duration timeout,
                                                  const std::string& input) {
  testkit::ProcessOptions o;
  o.argv = argv;
  o.stdin_pipe = true;
  o.stdout_to = testkit::Stream::kPipe;
  o.stderr_to = testkit::Stream::kStdout;
  absl::StatusOr<std::unique_ptr<testkit::Process>> p = testkit::Process::Start(std::move(o));
  if (!p.ok()) return p.status();
  const pid_t pid = (*p)->pid();
  RegisterPid(pid);
  testkit::ProcessResult result = (*p)->Communicate(timeout, input);
  UnregisterPid(pid);
  if (result.timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat(argv[0], " did not finish within ", absl::FormatDuration(timeout)));
  }
  return result;
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
