// The supervisor's side of a client process: the markers it reports
// (MarkerHub) and the process itself (start, pause, resume, stop, reap).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "chaos/base/cleanup.h"
#include "chaos/clients/external_client.h"
#include "chaos/clients/workload.h"
#include "chaos/history/history.h"
#include "redlock/client.h"
#include "redlock/election.h"
#include "redlock/fencing.h"
#include "redlock/internal/status_macros.h"
#include "redlock/options.h"
#include "redlock/rw_lock.h"
#include "redlock/semaphore.h"
#include "testkit/files.h"
#include "testkit/redis.h"

namespace redlock::chaos {

// ---- MarkerHub -------------------------------------------------------------------

void MarkerHub::Push(Marker m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    m.seq = next_seq_++;
    markers_.push_back(std::move(m));
    if (markers_.size() > 50000) markers_.pop_front();
  }
  cv_.notify_all();
}

int64_t MarkerHub::last_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_seq_ - 1;
}

std::deque<Marker>::const_iterator MarkerHub::After(int64_t after_seq) const {
  return std::upper_bound(markers_.begin(), markers_.end(), after_seq,
                          [](int64_t seq, const Marker& m) { return seq < m.seq; });
}

std::optional<Marker> MarkerHub::Wait(int64_t after_seq, absl::Duration timeout,
                                      const std::function<bool(const Marker&)>& match) {
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  std::unique_lock<std::mutex> lock(mu_);
  int64_t scanned = after_seq;
  for (int i = 0; i < 10000000; ++i) {
    for (auto it = After(scanned); it != markers_.end(); ++it) {
      scanned = it->seq;
      if (match(*it)) return *it;
    }
    if (Interrupted() || std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    cv_.wait_until(
        lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  }
  return std::nullopt;
}

std::vector<Marker> MarkerHub::Since(int64_t after_seq, absl::Duration timeout) {
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  std::unique_lock<std::mutex> lock(mu_);
  for (int i = 0; i < 10000000; ++i) {
    auto it = After(after_seq);
    if (it != markers_.end()) return std::vector<Marker>(it, markers_.cend());
    if (Interrupted() || std::chrono::steady_clock::now() >= deadline) return {};
    cv_.wait_until(
        lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  }
  return {};
}

std::optional<Marker> MarkerHub::Last(int client) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = markers_.rbegin(); it != markers_.rend(); ++it) {
    if (it->client == client) return *it;
  }
  return std::nullopt;
}

// ---- ClientProcess ------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<ClientProcess>> ClientProcess::Spawn(ClientLaunch launch,
                                                                    MarkerHub* hub) {
  std::unique_ptr<ClientProcess> p(new ClientProcess(std::move(launch), hub));
  ClientConfig& config = p->launch_.config;
  int hf = open(config.history.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (hf < 0) return absl::UnavailableError(absl::StrCat(config.history, ": ", strerror(errno)));
  if (p->launch_.uid >= 0 &&
      fchown(hf, static_cast<uid_t>(p->launch_.uid), static_cast<gid_t>(p->launch_.uid)) != 0) {
    int err = errno;
    close(hf);
    return absl::UnavailableError(absl::StrCat("chown ", config.history, ": ", strerror(err)));
  }
  close(hf);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::UnavailableError(strerror(errno));
  config.marker_fd = 3;
  testkit::ProcessOptions spec;
  spec.argv.push_back(p->launch_.binary);
  for (std::string& a : ClientArgs(config)) spec.argv.push_back(std::move(a));
  spec.env = p->launch_.env;
  bool preload = false;
  for (const auto& kv : spec.env) preload = preload || kv.first == "LD_PRELOAD";
  if (preload) {
    // A sanitized client refuses a preloaded library ahead of its runtime.
    const char* asan = getenv("ASAN_OPTIONS");
    spec.env.push_back({"ASAN_OPTIONS", absl::StrCat(asan != nullptr ? asan : "",
                                                     asan != nullptr && *asan ? ":" : "",
                                                     "verify_asan_link_order=0")});
  }
  spec.uid = p->launch_.uid;
  if (!p->launch_.log_path.empty()) {
    spec.stdout_to = testkit::Stream::kLogFile;
    spec.stderr_to = testkit::Stream::kLogFile;
    spec.log_path = p->launch_.log_path;
  }
  spec.pass_fd = fds[1];
  absl::StatusOr<std::unique_ptr<testkit::Process>> process =
      testkit::Process::Start(std::move(spec));
  close(fds[1]);
  if (!process.ok()) {
    close(fds[0]);
    return process.status();
  }
  p->process_ = *std::move(process);
  RegisterPid(p->process_->pid());
  p->read_fd_ = fds[0];
  p->reader_ = std::thread([raw = p.get()] { raw->ReadMarkers(); });
  return p;
}

void ClientProcess::ReadMarkers() {
  std::string buf;
  for (int i = 0; i < 100000000; ++i) {
    pollfd pfd{read_fd_, POLLIN, 0};
    int r = poll(&pfd, 1, 100);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (reaped_) return;
      continue;
    }
    char chunk[4096];
    ssize_t n = read(read_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // every writer is gone
    buf.append(chunk, static_cast<size_t>(n));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      if (f.size() < 3) continue;
      Marker m;
      m.t = RawMonotonicNanos();
      m.client = launch_.index;
      m.kind = f[0];
      if (!absl::SimpleAtoi(f[1], &m.op)) continue;
      m.resource = f[2];
      if (f.size() > 3) m.detail = f[3];
      hub_->Push(std::move(m));
    }
  }
}

bool ClientProcess::Reap(absl::Duration timeout) {
  if (reaped_) return true;
  const pid_t pid = process_->pid();
  std::optional<int> status = process_->Wait(timeout);
  if (!status.has_value()) return false;
  wait_status_ = *status;
  UnregisterPid(pid);
  reaped_ = true;
  return true;
}

void ClientProcess::KillAndReap() {
  const pid_t pid = process_->pid();
  wait_status_ = process_->Kill();
  UnregisterPid(pid);
  reaped_ = true;
}

bool ClientProcess::exited() { return Reap(absl::ZeroDuration()); }

absl::Status ClientProcess::SignalGroup(int sig) {
  // An external client's process leads its own group, which holds its
  // adapter (ClientMain): a pause must stop the lock client too.
  if (!IsLibraryClient(launch_.config.client) && process_->pid() > 0 &&
      kill(-process_->pid(), sig) == 0) {
    return absl::OkStatus();
  }
  // Not (yet) a group leader, or the library: the process alone.
  return process_->Signal(sig);
}

absl::Status ClientProcess::Pause() {
  if (exited()) return absl::FailedPreconditionError(absl::StrCat(name(), " has exited"));
  REDLOCK_RETURN_IF_ERROR(SignalGroup(SIGSTOP));
  paused_ = true;
  return absl::OkStatus();
}

absl::Status ClientProcess::Crash() {
  if (exited()) return absl::FailedPreconditionError(absl::StrCat(name(), " has exited"));
  KillAndReap();
  paused_ = false;
  crashed_ = true;
  return absl::OkStatus();
}

absl::Status ClientProcess::Resume() {
  if (exited()) return absl::FailedPreconditionError(absl::StrCat(name(), " has exited"));
  REDLOCK_RETURN_IF_ERROR(SignalGroup(SIGCONT));
  paused_ = false;
  return absl::OkStatus();
}

std::string ClientProcess::Stop(absl::Duration timeout) {
  if (!exited()) {
    (void)SignalGroup(SIGCONT);
    paused_ = false;
    (void)process_->Signal(SIGTERM);
    if (!Reap(timeout)) {
      KillAndReap();
      return absl::StrCat(testkit::DescribeWaitStatus(wait_status_), " (killed after ",
                          absl::FormatDuration(timeout), ")");
    }
  }
  return testkit::DescribeWaitStatus(wait_status_);
}

ClientProcess::~ClientProcess() {
  if (process_ != nullptr && !exited()) KillAndReap();
  reaped_ = true;
  if (reader_.joinable()) reader_.join();
  if (read_fd_ >= 0) close(read_fd_);
}

// ---- First attempts -------------------------------------------------------------------

namespace {

// Each thread of `pid`: its state and kernel wait channel (/proc).
std::string ProcessThreads(pid_t pid) {
  std::string out;
  std::error_code ec;
  const std::filesystem::path tasks = absl::StrCat("/proc/", pid, "/task");
  int listed = 0;
  for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
    if (++listed > 16) break;
    std::string state, wchan;
    for (const auto& l : testkit::LastLines((t.path() / "status").string(), 64)) {
      if (absl::StartsWith(l, "State:")) {
        state = std::string(absl::StripAsciiWhitespace(l.substr(6)));
      }
    }
    std::vector<std::string> w = testkit::LastLines((t.path() / "wchan").string(), 1);
    if (!w.empty()) wchan = w[0];
    absl::StrAppend(&out, "    thread ", t.path().filename().string(), ": ", state,
                    wchan.empty() || wchan == "0" ? "" : absl::StrCat(", in ", wchan), "\n");
  }
  return out.empty() ? "    (no such process)\n" : out;
}

}  // namespace

absl::Status AwaitFirstAttempts(MarkerHub& hub,
                                const std::vector<std::unique_ptr<ClientProcess>>& clients,
                                absl::Duration timeout) {
  for (size_t k = 0; k < clients.size(); ++k) {
    const int index = static_cast<int>(k);
    std::optional<Marker> m = hub.Wait(
        0, timeout, [index](const Marker& m) { return m.client == index && m.kind == "invoke"; });
    if (m.has_value()) continue;
    const ClientProcess& c = *clients[k];
    std::string log;
    for (const auto& l : testkit::LastLines(c.log_path(), 20))
      absl::StrAppend(&log, "    ", l, "\n");
    return absl::DeadlineExceededError(absl::StrCat(
        c.name(), " made no attempt within ", absl::FormatDuration(timeout), " (see ", c.name(),
        ".log); its threads:\n", ProcessThreads(c.pid()), "  the end of its log:\n", log));
  }
  return absl::OkStatus();
}

}  // namespace redlock::chaos
