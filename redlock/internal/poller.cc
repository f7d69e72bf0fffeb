#include "redlock/internal/poller.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "redlock/internal/stream.h"

namespace redlock::internal {
namespace {

// epoll data: generation << 32 | sub << 20 | node << 2 | kind; 0 is the
// eventfd.
constexpr uint64_t kEventFdData = 0;

uint64_t EventData(uint32_t generation, int node, uint32_t kind, uint32_t sub) {
  return (uint64_t{generation} << 32) | (uint64_t{sub} << 20) | (static_cast<uint64_t>(node) << 2) |
         kind;
}

}  // namespace

Poller::~Poller() {
  if (event_fd_ >= 0) close(event_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

absl::Status Poller::Open() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return absl::InternalError(absl::StrCat("epoll_create1: ", ErrnoText(errno)));
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", ErrnoText(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kEventFdData;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

void Poller::Register(const Connection& c, int node, Kind kind, int op, bool writable,
                      uint32_t sub) {
  if (c.fd() < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN | (writable ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  ev.data.u64 = EventData(c.generation(), node, kind, sub);
  epoll_ctl(epoll_fd_, op, c.fd(), &ev);
}

void Poller::Unregister(int fd) {
  if (fd >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

Connection::Progress Poller::SideIo(Connection& c, int node, Kind kind, uint32_t events,
                                    std::vector<Reply>* messages, uint32_t sub) {
  const Connection::State before = c.state();
  Connection::Progress p = c.HandleIo(events, messages);
  if (p.failure.empty() &&
      (before == Connection::State::kConnecting || before == Connection::State::kEstablishing) &&
      c.state() != Connection::State::kConnecting) {
    // Connected or establishing the stream (TLS): writable events only while
    // the stream asks for them.
    Register(c, node, kind, EPOLL_CTL_MOD, p.want_write, sub);
  }
  return p;
}

void Poller::Wake() {
  uint64_t one = 1;
  ssize_t r = write(event_fd_, &one, sizeof(one));
  (void)r;  // EAGAIN means the counter is already non-zero: the poller will wake.
}

int Poller::Wait(int64_t timeout_ms, Event* out, int max) {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  const int got =
      epoll_wait(epoll_fd_, events, std::min(max, kMaxEvents), static_cast<int>(timeout_ms));
  int count = 0;
  for (int i = 0; i < got; ++i) {
    const uint64_t data = events[i].data.u64;
    if (data == kEventFdData) {
      uint64_t value;
      while (read(event_fd_, &value, sizeof(value)) > 0) {
      }
      continue;
    }
    Event& e = out[count++];
    e.node = static_cast<int>((data & 0xfffffu) >> 2);
    e.kind = static_cast<Kind>(data & 3);
    e.sub = static_cast<uint32_t>((data >> 20) & 0xfffu);
    e.generation = static_cast<uint32_t>(data >> 32);
    e.events = events[i].events;
  }
  return count;
}

void Poller::Sleeping(TimePoint until) {
  wake_at_ns_.store(until.time_since_epoch().count(), std::memory_order_seq_cst);
}

void Poller::WakeIfSleepingPast(TimePoint at) {
  if (at.time_since_epoch().count() < wake_at_ns_.load(std::memory_order_seq_cst)) Wake();
}

}  // namespace redlock::internal
