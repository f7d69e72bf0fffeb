#include "testkit/proxy_reactor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace redlock::testkit::proxy_internal {
namespace {

constexpr uint64_t kWakeToken = 0;
constexpr uint64_t kTimerToken = 1;
constexpr int kMaxEvents = 64;

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

int64_t NowNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Reactor::~Reactor() {
  Stop();
  CloseFd(timer_fd_);
  CloseFd(wake_fd_);
  CloseFd(epoll_fd_);
}

absl::Status Reactor::Init() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0 || timer_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("fault proxy: epoll/eventfd/timerfd: ", strerror(errno)));
  }
  Add(wake_fd_, EPOLLIN, kWakeToken);
  Add(timer_fd_, EPOLLIN, kTimerToken);
  return absl::OkStatus();
}

void Reactor::Start(Handler* handler) {
  handler_ = handler;
  thread_ = std::thread([this] { Run(); });
}

void Reactor::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  Wake();
  thread_.join();
}

void Reactor::RunInLoop(const std::function<void()>& fn) {
  bool done = false;
  std::unique_lock<std::mutex> lock(mu_);
  if (exited_) {
    // The loop died (epoll failure): nothing else touches its state, and
    // mu_ serializes callers.
    fn();
    return;
  }
  tasks_.push_back([&] {
    fn();
    std::lock_guard<std::mutex> done_lock(mu_);
    done = true;
    done_cv_.notify_all();
  });
  Wake();
  done_cv_.wait(lock, [&] { return done; });
}

void Reactor::Add(int fd, uint32_t events, uint64_t token) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void Reactor::Modify(int fd, uint32_t events, uint64_t token) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void Reactor::Remove(int fd) { ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

void Reactor::Wake() {
  uint64_t one = 1;
  ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  (void)n;  // EAGAIN means a wake-up is already pending
}

void Reactor::Run() {
  epoll_event events[kMaxEvents];
  for (;;) {
    ArmTimer();
    const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      // Cannot happen with valid descriptors; fail calls fast, not hang.
      std::vector<std::function<void()>> tasks;
      {
        std::lock_guard<std::mutex> lock(mu_);
        exited_ = true;
        tasks.swap(tasks_);
      }
      for (auto& task : tasks) task();
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t token = events[i].data.u64;
      if (token == kWakeToken) {
        uint64_t v;
        ssize_t r = ::read(wake_fd_, &v, sizeof(v));
        (void)r;
        if (RunTasks()) return;
      } else if (token == kTimerToken) {
        uint64_t v;
        ssize_t r = ::read(timer_fd_, &v, sizeof(v));
        (void)r;
        armed_at_ = 0;
        handler_->OnTimer();
      } else {
        handler_->OnReady(token, events[i].events);
      }
    }
  }
}

bool Reactor::RunTasks() {
  std::vector<std::function<void()>> tasks;
  bool stop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(tasks_);
    stop = stop_;
  }
  for (auto& task : tasks) task();
  return stop;
}

void Reactor::ArmTimer() {
  const int64_t want = handler_->NextDeadline();
  if (want == armed_at_) return;
  itimerspec its{};
  if (want != 0) {
    its.it_value.tv_sec = want / 1000000000;
    its.it_value.tv_nsec = want % 1000000000;
  }
  ::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);
  armed_at_ = want;
}

}  // namespace redlock::testkit::proxy_internal
