#include "testkit/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace redlock::testkit {

// ---------------------------------------------------------------------------
// FaultSpec

absl::string_view DirectionName(Direction direction) {
  return direction == Direction::kToServer ? "to-server" : "to-client";
}

FaultSpec FaultSpec::Latency(absl::Duration latency, absl::Duration jitter) {
  FaultSpec spec;
  spec.kind = FaultKind::kLatency;
  spec.latency = latency;
  spec.jitter = jitter;
  return spec;
}

FaultSpec FaultSpec::BlackHole() {
  FaultSpec spec;
  spec.kind = FaultKind::kBlackHole;
  return spec;
}

FaultSpec FaultSpec::Hold() {
  FaultSpec spec;
  spec.kind = FaultKind::kHold;
  return spec;
}

FaultSpec FaultSpec::Reset() {
  FaultSpec spec;
  spec.kind = FaultKind::kReset;
  return spec;
}

FaultSpec FaultSpec::Slice(size_t bytes, absl::Duration delay) {
  FaultSpec spec;
  spec.kind = FaultKind::kSlice;
  spec.slice_bytes = bytes;
  spec.slice_delay = delay;
  return spec;
}

FaultSpec FaultSpec::Truncate(size_t bytes) {
  FaultSpec spec;
  spec.kind = FaultKind::kTruncate;
  spec.truncate_bytes = bytes;
  return spec;
}

FaultSpec FaultSpec::ResetAfterDelivery() {
  FaultSpec spec;
  spec.kind = FaultKind::kResetAfterDelivery;
  return spec;
}

namespace {

absl::StatusOr<absl::Duration> ParseDurationToken(absl::string_view token) {
  absl::Duration d;
  if (!absl::ParseDuration(token, &d) || d < absl::ZeroDuration() ||
      d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault: bad duration '", token, "' (want e.g. 20ms)"));
  }
  return d;
}

absl::StatusOr<size_t> ParseSizeToken(absl::string_view token) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(token, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("fault: bad byte count '", token, "'"));
  }
  return static_cast<size_t>(v);
}

}  // namespace

absl::StatusOr<FaultSpec> FaultSpec::Parse(absl::string_view text) {
  const std::string lowered = absl::AsciiStrToLower(text);
  std::vector<absl::string_view> t =
      absl::StrSplit(lowered, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
  if (t.empty()) return absl::InvalidArgumentError("fault: empty");
  auto extra = [&](size_t from) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault: unexpected '", t[from], "' in '", text, "'"));
  };
  FaultSpec spec;
  const absl::string_view verb = t[0];
  if (verb == "clear" || verb == "none") {
    if (t.size() > 1) return extra(1);
    return spec;
  }
  if (verb == "blackhole" || verb == "hold" || verb == "reset") {
    if (t.size() > 1) return extra(1);
    spec.kind = verb == "blackhole" ? FaultKind::kBlackHole
                : verb == "hold"    ? FaultKind::kHold
                                    : FaultKind::kReset;
    return spec;
  }
  if (verb == "reset-after") {
    if (t.size() > 1) return extra(1);
    spec.kind = FaultKind::kResetAfterDelivery;
    return spec;
  }
  if (verb == "latency") {
    if (t.size() < 2)
      return absl::InvalidArgumentError("fault: latency <duration> [jitter <duration>]");
    spec.kind = FaultKind::kLatency;
    auto latency = ParseDurationToken(t[1]);
    if (!latency.ok()) return latency.status();
    spec.latency = *latency;
    size_t i = 2;
    if (i < t.size() && t[i] == "jitter") {
      if (i + 1 >= t.size()) return absl::InvalidArgumentError("fault: jitter needs a duration");
      auto jitter = ParseDurationToken(t[i + 1]);
      if (!jitter.ok()) return jitter.status();
      spec.jitter = *jitter;
      i += 2;
    }
    if (i < t.size()) return extra(i);
  } else if (verb == "slice") {
    if (t.size() < 2) return absl::InvalidArgumentError("fault: slice <bytes> [delay <duration>]");
    spec.kind = FaultKind::kSlice;
    auto bytes = ParseSizeToken(t[1]);
    if (!bytes.ok()) return bytes.status();
    spec.slice_bytes = *bytes;
    size_t i = 2;
    if (i < t.size() && t[i] == "delay") {
      if (i + 1 >= t.size()) return absl::InvalidArgumentError("fault: delay needs a duration");
      auto delay = ParseDurationToken(t[i + 1]);
      if (!delay.ok()) return delay.status();
      spec.slice_delay = *delay;
      i += 2;
    }
    if (i < t.size()) return extra(i);
  } else if (verb == "truncate") {
    if (t.size() != 2) return absl::InvalidArgumentError("fault: truncate <bytes>");
    spec.kind = FaultKind::kTruncate;
    auto bytes = ParseSizeToken(t[1]);
    if (!bytes.ok()) return bytes.status();
    spec.truncate_bytes = *bytes;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("fault: unknown '", verb,
                     "' (latency, blackhole, hold, reset, reset-after, slice, truncate, clear)"));
  }
  absl::Status status = spec.Validate();
  if (!status.ok()) return status;
  return spec;
}

std::string FaultSpec::ToString() const {
  switch (kind) {
    case FaultKind::kNone:
      return "none";
    case FaultKind::kLatency:
      return absl::StrCat("latency ", absl::FormatDuration(latency), " jitter ",
                          absl::FormatDuration(jitter));
    case FaultKind::kBlackHole:
      return "blackhole";
    case FaultKind::kHold:
      return "hold";
    case FaultKind::kReset:
      return "reset";
    case FaultKind::kSlice:
      return absl::StrCat("slice ", slice_bytes, " delay ", absl::FormatDuration(slice_delay));
    case FaultKind::kTruncate:
      return absl::StrCat("truncate ", truncate_bytes);
    case FaultKind::kResetAfterDelivery:
      return "reset-after";
  }
  return "none";
}

absl::Status FaultSpec::Validate() const {
  for (absl::Duration d : {latency, jitter, slice_delay}) {
    if (d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fault: durations must be finite and >= 0, got ", absl::FormatDuration(d)));
    }
  }
  if (kind == FaultKind::kLatency && latency + jitter > absl::Hours(1)) {
    return absl::InvalidArgumentError("fault: latency + jitter above 1h");
  }
  if (kind == FaultKind::kSlice && slice_delay > absl::Hours(1)) {
    return absl::InvalidArgumentError("fault: slice delay above 1h");
  }
  if (kind == FaultKind::kSlice && slice_bytes == 0) {
    return absl::InvalidArgumentError("fault: slice size must be >= 1");
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Event loop

namespace {

constexpr int kClientSide = 0;
constexpr int kServerSide = 1;
// epoll tokens: the three fixed ones, then (connection id << 2) | side.
constexpr uint64_t kWakeToken = 0;
constexpr uint64_t kTimerToken = 1;
constexpr uint64_t kListenToken = 2;
constexpr size_t kReadBufferSize = 64 * 1024;
constexpr int kMaxReadsPerEvent = 16;
constexpr int kMaxAcceptsPerEvent = 64;
constexpr int kMaxEvents = 64;
constexpr size_t kCoalesceLimit = 64 * 1024;

int64_t NowNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Parses a 127.0.0.0/8 IPv4 address ("localhost" = 127.0.0.1).
absl::StatusOr<in_addr> LoopbackAddress(absl::string_view what, const std::string& host) {
  in_addr addr{};
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault proxy: ", what, " '", host, "' is not an IPv4 address"));
  }
  if ((ntohl(addr.s_addr) >> 24) != 127) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fault proxy: ", what, " '", host, "' is not a loopback address (127.0.0.0/8 only)"));
  }
  return addr;
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void AbortFd(int& fd) {
  if (fd < 0) return;
  linger lg{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  CloseFd(fd);
}

struct Chunk {
  std::string data;
  size_t offset = 0;
  int64_t due = 0;
  bool held = false;
  size_t remaining() const { return data.size() - offset; }
};

// One direction of one connection: bytes read from the source side, waiting to
// be written to the destination side.
struct Pipe {
  std::deque<Chunk> chunks;
  size_t queued = 0;  // bytes of non-held chunks not yet written
  size_t held = 0;    // bytes of held chunks
  int64_t last_due = 0;
  int64_t next_slice = 0;
  int64_t timer_at = 0;        // pending timer entry for this pipe, 0 if none
  int64_t truncate_left = -1;  // < 0: no truncation
  bool src_eof = false;        // nothing more will be read from the source
  bool stop_reading = false;   // truncation reached: read no more
  bool close_when_drained = false;
  bool dst_shut = false;    // shutdown(dst, SHUT_WR) done
  bool dst_dead = false;    // writing to the destination failed
  bool want_write = false;  // destination returned EAGAIN
};

struct Conn {
  uint64_t id = 0;
  int fd[2] = {-1, -1};             // [kClientSide], [kServerSide]
  uint32_t registered[2] = {0, 0};  // current epoll interest, 0 = not added
  bool server_connected = false;
  Pipe pipe[2];  // indexed by Direction
};

struct TimerEntry {
  int64_t at;
  uint64_t id;
  int dir;
  bool operator>(const TimerEntry& o) const { return at > o.at; }
};

}  // namespace

class FaultProxy::Loop {
 public:
  explicit Loop(const ProxyOptions& options)
      : options_(options),
        rng_(options.seed != 0 ? options.seed : std::random_device{}()),
        read_buffer_(kReadBufferSize) {}

  ~Loop() {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
      }
      Wake();
      thread_.join();
    }
    for (auto& [id, conn] : conns_) {
      CloseFd(conn.fd[kClientSide]);
      CloseFd(conn.fd[kServerSide]);
    }
    conns_.clear();
    CloseFd(listen_fd_);
    CloseFd(timer_fd_);
    CloseFd(wake_fd_);
    CloseFd(epoll_fd_);
  }

  absl::Status Init() {
    auto listen_addr = LoopbackAddress("listen host", options_.listen_host);
    if (!listen_addr.ok()) return listen_addr.status();
    auto upstream_addr = LoopbackAddress("upstream host", options_.upstream_host);
    if (!upstream_addr.ok()) return upstream_addr.status();
    if (options_.upstream_port == 0) {
      return absl::InvalidArgumentError("fault proxy: upstream port is 0");
    }
    if (options_.max_queued_bytes == 0) {
      return absl::InvalidArgumentError("fault proxy: max_queued_bytes is 0");
    }
    listen_sa_.sin_family = AF_INET;
    listen_sa_.sin_addr = *listen_addr;
    listen_sa_.sin_port = htons(options_.listen_port);
    upstream_sa_.sin_family = AF_INET;
    upstream_sa_.sin_addr = *upstream_addr;
    upstream_sa_.sin_port = htons(options_.upstream_port);

    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0 || timer_fd_ < 0) {
      return absl::UnavailableError(
          absl::StrCat("fault proxy: epoll/eventfd/timerfd: ", strerror(errno)));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeToken;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    ev.data.u64 = kTimerToken;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_fd_, &ev);

    absl::Status status = Listen();
    if (!status.ok()) return status;
    port_ = ntohs(listen_sa_.sin_port);
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  uint16_t port() const { return port_; }
  const ProxyOptions& options() const { return options_; }

  // Runs `fn` on the loop thread and waits for it.
  void RunInLoop(const std::function<void()>& fn) {
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

  // ---- operations, loop thread only ----

  void SetFault(Direction d, const FaultSpec& spec) {
    const int di = static_cast<int>(d);
    const FaultSpec old = faults_[di];
    faults_[di] = spec;
    std::vector<uint64_t> ids = ConnIds();
    for (uint64_t id : ids) {
      Conn* c = Find(id);
      if (c == nullptr) continue;
      Pipe& p = c->pipe[di];
      if (old.kind == FaultKind::kHold && spec.kind != FaultKind::kHold) {
        ReleasePipe(p);
      }
      if (spec.kind == FaultKind::kTruncate) {
        StartTruncation(p, spec.truncate_bytes);
      } else {
        p.truncate_left = -1;
      }
      if (spec.kind != FaultKind::kSlice) p.next_slice = 0;
    }
    if (spec.kind == FaultKind::kReset) {
      ResetAllConns();
      return;
    }
    FlushAll();
  }

  FaultSpec GetFault(Direction d) const { return faults_[static_cast<int>(d)]; }

  void ReleaseHeld() {
    for (auto& [id, conn] : conns_) {
      ReleasePipe(conn.pipe[0]);
      ReleasePipe(conn.pipe[1]);
    }
    FlushAll();
  }

  void ResetAllConns() {
    std::vector<uint64_t> ids = ConnIds();
    for (uint64_t id : ids) {
      Conn* c = Find(id);
      if (c != nullptr) CloseConn(*c, /*abort=*/true);
    }
  }

  void Down() {
    if (listen_fd_ >= 0) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
      CloseFd(listen_fd_);
    }
    std::vector<uint64_t> ids = ConnIds();
    for (uint64_t id : ids) {
      Conn* c = Find(id);
      if (c != nullptr) CloseConn(*c, /*abort=*/false);
    }
  }

  absl::Status Up() {
    if (listen_fd_ >= 0) return absl::OkStatus();
    return Listen();
  }

  void Retarget(in_addr host, uint16_t port) {
    upstream_sa_.sin_addr = host;
    upstream_sa_.sin_port = htons(port);
    std::vector<uint64_t> ids = ConnIds();
    for (uint64_t id : ids) {
      Conn* c = Find(id);
      if (c != nullptr) CloseConn(*c, /*abort=*/false);
    }
  }

  std::string Upstream() const {
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &upstream_sa_.sin_addr, buf, sizeof(buf));
    return absl::StrCat(buf, ":", ntohs(upstream_sa_.sin_port));
  }

  ProxyStats Stats() const {
    ProxyStats s = stats_;
    s.connections_open = conns_.size();
    s.down = listen_fd_ < 0;
    for (const auto& [id, conn] : conns_) {
      s.to_server.queued += conn.pipe[0].queued;
      s.to_server.held += conn.pipe[0].held;
      s.to_client.queued += conn.pipe[1].queued;
      s.to_client.held += conn.pipe[1].held;
    }
    return s;
  }

 private:
  void Wake() {
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    (void)n;  // EAGAIN means a wake-up is already pending
  }

  absl::Status Listen() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("fault proxy: socket: ", strerror(errno)));
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa = listen_sa_;
    if (port_ != 0) sa.sin_port = htons(port_);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd, 128) != 0) {
      const int err = errno;
      ::close(fd);
      char host[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
      return absl::UnavailableError(absl::StrCat("fault proxy: cannot listen on ", host, ":",
                                                 ntohs(sa.sin_port), ": ", strerror(err)));
    }
    socklen_t len = sizeof(sa);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    listen_sa_.sin_port = sa.sin_port;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenToken;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    listen_fd_ = fd;
    return absl::OkStatus();
  }

  void Run() {
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
          RunTimers();
        } else if (token == kListenToken) {
          Accept();
        } else {
          HandleConnEvent(token >> 2, static_cast<int>(token & 1), events[i].events);
        }
      }
    }
  }

  // Returns true when the loop must stop.
  bool RunTasks() {
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

  void ArmTimer() {
    while (!timers_.empty()) {
      const TimerEntry& top = timers_.top();
      Conn* c = Find(top.id);
      if (c != nullptr && c->pipe[top.dir].timer_at == top.at) break;
      timers_.pop();  // stale
    }
    const int64_t want = timers_.empty() ? 0 : timers_.top().at;
    if (want == armed_at_) return;
    itimerspec its{};
    if (want != 0) {
      its.it_value.tv_sec = want / 1000000000;
      its.it_value.tv_nsec = want % 1000000000;
    }
    ::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);
    armed_at_ = want;
  }

  void RunTimers() {
    const int64_t now = NowNanos();
    // Bounded: each entry is popped once; flushing may push entries for later.
    std::vector<TimerEntry> due;
    while (!timers_.empty() && timers_.top().at <= now) {
      due.push_back(timers_.top());
      timers_.pop();
    }
    for (const TimerEntry& e : due) {
      Conn* c = Find(e.id);
      if (c == nullptr || c->pipe[e.dir].timer_at != e.at) continue;
      c->pipe[e.dir].timer_at = 0;
      Flush(*c, e.dir);
    }
  }

  void Schedule(Conn& c, int dir, int64_t at) {
    Pipe& p = c.pipe[dir];
    if (p.timer_at != 0 && p.timer_at <= at) return;
    p.timer_at = at;
    timers_.push(TimerEntry{at, c.id, dir});
  }

  Conn* Find(uint64_t id) {
    auto it = conns_.find(id);
    return it == conns_.end() ? nullptr : &it->second;
  }

  std::vector<uint64_t> ConnIds() const {
    std::vector<uint64_t> ids;
    ids.reserve(conns_.size());
    for (const auto& [id, conn] : conns_) ids.push_back(id);
    return ids;
  }

  bool ResetFaultSet() const {
    return faults_[0].kind == FaultKind::kReset || faults_[1].kind == FaultKind::kReset;
  }

  void Accept() {
    for (int i = 0; i < kMaxAcceptsPerEvent && listen_fd_ >= 0; ++i) {
      int cfd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (cfd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN, or out of descriptors: retried on the next event
      }
      ++stats_.connections_accepted;
      if (ResetFaultSet()) {
        AbortFd(cfd);
        ++stats_.connections_reset;
        continue;
      }
      int sfd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (sfd < 0) {
        CloseFd(cfd);
        ++stats_.upstream_failures;
        continue;
      }
      SetNoDelay(cfd);
      SetNoDelay(sfd);
      const uint64_t id = next_id_++;
      Conn& c = conns_[id];
      c.id = id;
      c.fd[kClientSide] = cfd;
      c.fd[kServerSide] = sfd;
      for (int d = 0; d < 2; ++d) {
        if (faults_[d].kind == FaultKind::kTruncate) {
          StartTruncation(c.pipe[d], faults_[d].truncate_bytes);
        }
      }
      int r =
          ::connect(sfd, reinterpret_cast<const sockaddr*>(&upstream_sa_), sizeof(upstream_sa_));
      if (r == 0) {
        c.server_connected = true;
      } else if (errno != EINPROGRESS) {
        ++stats_.upstream_failures;
        CloseConn(c, /*abort=*/false);
        continue;
      }
      UpdateInterest(c);
      if (c.pipe[0].close_when_drained || c.pipe[1].close_when_drained) {
        MaybeFinish(c);  // "truncate 0" closes at once
      }
    }
  }

  void StartTruncation(Pipe& p, size_t bytes) {
    p.truncate_left = static_cast<int64_t>(bytes);
    if (bytes == 0) {
      p.stop_reading = true;
      p.close_when_drained = true;
    }
  }

  void HandleConnEvent(uint64_t id, int side, uint32_t events) {
    Conn* c = Find(id);
    if (c == nullptr || c->fd[side] < 0) return;
    if (side == kServerSide && !c->server_connected) {
      int err = 0;
      socklen_t len = sizeof(err);
      if (::getsockopt(c->fd[side], SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
      if (err != 0) {
        ++stats_.upstream_failures;
        CloseConn(*c, /*abort=*/false);
        return;
      }
      if ((events & EPOLLOUT) == 0) return;
      c->server_connected = true;
      UpdateInterest(*c);
      Flush(*c, static_cast<int>(Direction::kToServer));
      return;
    }
    const uint32_t interest = c->registered[side];
    if ((interest & EPOLLIN) != 0 && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
      // The pipe whose source is `side` has the same index as the side.
      Read(*c, side);
      c = Find(id);
      if (c == nullptr || c->fd[side] < 0) return;
    }
    if ((interest & EPOLLOUT) != 0 && (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) {
      Flush(*c, 1 - side);
    }
  }

  // Reads from the source side of pipe `dir` (side index == dir).
  void Read(Conn& c, int dir) {
    Pipe& p = c.pipe[dir];
    const int fd = c.fd[dir];
    for (int i = 0; i < kMaxReadsPerEvent; ++i) {
      if (p.src_eof || p.stop_reading || p.queued >= options_.max_queued_bytes) {
        break;
      }
      ssize_t n = ::read(fd, read_buffer_.data(), read_buffer_.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        // The source side is broken: nothing more to read, nothing can be
        // written to it either.
        p.src_eof = true;
        MarkDstDead(c, 1 - dir);
        break;
      }
      if (n == 0) {
        p.src_eof = true;
        break;
      }
      Ingest(c, dir, read_buffer_.data(), static_cast<size_t>(n));
    }
    const uint64_t id = c.id;
    Flush(c, dir);
    Conn* alive = Find(id);
    if (alive != nullptr) Flush(*alive, 1 - dir);  // settles a dead peer side
  }

  void Ingest(Conn& c, int dir, const char* data, size_t n) {
    Pipe& p = c.pipe[dir];
    ProxyStats::Flow& flow = dir == 0 ? stats_.to_server : stats_.to_client;
    const FaultSpec& f = faults_[dir];
    if (p.truncate_left >= 0) {
      const size_t take = std::min(n, static_cast<size_t>(p.truncate_left));
      flow.dropped += n - take;
      p.truncate_left -= static_cast<int64_t>(take);
      n = take;
      if (p.truncate_left == 0) {
        p.stop_reading = true;
        p.close_when_drained = true;
      }
      if (n == 0) return;
    }
    if (f.kind == FaultKind::kBlackHole) {
      flow.dropped += n;
      return;
    }
    const int64_t now = NowNanos();
    if (f.kind == FaultKind::kHold) {
      p.chunks.push_back(Chunk{std::string(data, n), 0, now, true});
      p.held += n;
      return;
    }
    int64_t due = now;
    if (f.kind == FaultKind::kLatency) {
      int64_t extra = 0;
      const int64_t jitter = absl::ToInt64Nanoseconds(f.jitter);
      if (jitter > 0) {
        extra = std::uniform_int_distribution<int64_t>(0, jitter)(rng_);
      }
      due = now + absl::ToInt64Nanoseconds(f.latency) + extra;
    }
    due = std::max(due, p.last_due);
    p.last_due = due;
    if (!p.chunks.empty()) {
      // Appending to the last chunk delivers with it: only when that does not
      // move this chunk's delivery time.
      Chunk& last = p.chunks.back();
      if (!last.held && (last.due == due || (due <= now && last.due <= now)) &&
          last.data.size() + n <= kCoalesceLimit) {
        last.data.append(data, n);
        p.queued += n;
        return;
      }
    }
    p.chunks.push_back(Chunk{std::string(data, n), 0, due, false});
    p.queued += n;
  }

  void ReleasePipe(Pipe& p) {
    if (p.held == 0) return;
    for (Chunk& chunk : p.chunks) {
      if (chunk.held) {
        chunk.held = false;
        chunk.due = std::max(chunk.due, p.last_due);
        p.last_due = chunk.due;
      }
    }
    p.queued += p.held;
    p.held = 0;
  }

  void MarkDstDead(Conn& c, int dir) {
    Pipe& p = c.pipe[dir];
    if (p.dst_dead) return;
    p.dst_dead = true;
    DropPipe(dir, p);
  }

  void DropPipe(int dir, Pipe& p) {
    ProxyStats::Flow& flow = dir == 0 ? stats_.to_server : stats_.to_client;
    flow.dropped += p.queued + p.held;
    p.chunks.clear();
    p.queued = 0;
    p.held = 0;
    p.want_write = false;
  }

  void FlushAll() {
    std::vector<uint64_t> ids = ConnIds();
    for (uint64_t id : ids) {
      for (int d = 0; d < 2; ++d) {
        Conn* c = Find(id);
        if (c != nullptr) Flush(*c, d);
      }
    }
  }

  // Writes what is due of pipe `dir` to its destination, then re-evaluates
  // the connection (which may close it: callers re-find by id afterwards).
  void Flush(Conn& c, int dir) {
    Pipe& p = c.pipe[dir];
    const int dst = c.fd[1 - dir];
    const FaultSpec& f = faults_[dir];
    bool blocked = false;
    const bool can_write = !p.dst_dead && dst >= 0 &&
                           (dir == static_cast<int>(Direction::kToClient) || c.server_connected);
    int64_t now = NowNanos();
    while (can_write && !p.chunks.empty()) {
      Chunk& chunk = p.chunks.front();
      if (chunk.held) break;
      if (chunk.due > now) {
        Schedule(c, dir, chunk.due);
        break;
      }
      size_t n = chunk.remaining();
      if (f.kind == FaultKind::kSlice) {
        if (p.next_slice > now) {
          Schedule(c, dir, p.next_slice);
          break;
        }
        n = std::min(n, f.slice_bytes);
      }
      ssize_t w = ::send(dst, chunk.data.data() + chunk.offset, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          blocked = true;
          break;
        }
        MarkDstDead(c, dir);
        break;
      }
      const size_t written = static_cast<size_t>(w);
      chunk.offset += written;
      p.queued -= written;
      (dir == 0 ? stats_.to_server : stats_.to_client).delivered += written;
      if (chunk.remaining() == 0) p.chunks.pop_front();
      if (f.kind == FaultKind::kResetAfterDelivery) {
        CloseConn(c, /*abort=*/true);  // invalidates c
        return;
      }
      if (f.kind == FaultKind::kSlice) {
        now = NowNanos();
        p.next_slice = now + absl::ToInt64Nanoseconds(f.slice_delay);
      }
    }
    p.want_write = blocked;
    if (MaybeFinish(c)) UpdateInterest(c);
  }

  // Applies end-of-stream rules; returns false if the connection was closed.
  bool MaybeFinish(Conn& c) {
    bool done = true;
    for (int d = 0; d < 2; ++d) {
      Pipe& p = c.pipe[d];
      if (p.dst_dead && !p.chunks.empty()) DropPipe(d, p);
      const bool drained = p.chunks.empty();
      if (drained && p.close_when_drained) {
        CloseConn(c, /*abort=*/false);
        return false;
      }
      if (drained && p.src_eof && !p.dst_shut && !p.dst_dead && (d == 1 || c.server_connected)) {
        ::shutdown(c.fd[1 - d], SHUT_WR);
        p.dst_shut = true;
      }
      if (!(drained && p.src_eof)) done = false;
    }
    if (done) {
      CloseConn(c, /*abort=*/false);
      return false;
    }
    return true;
  }

  // Registers exactly the events the connection can act on; a side with
  // nothing to do is removed from epoll, so hang-ups on it cannot spin.
  void UpdateInterest(Conn& c) {
    for (int side = 0; side < 2; ++side) {
      if (c.fd[side] < 0) continue;
      uint32_t want = 0;
      const Pipe& in = c.pipe[side];       // source is this side
      const Pipe& out = c.pipe[1 - side];  // destination is this side
      const bool connected = side == kClientSide || c.server_connected;
      if (side == kServerSide && !c.server_connected) want |= EPOLLOUT;
      if (connected && !in.src_eof && !in.stop_reading && in.queued < options_.max_queued_bytes) {
        want |= EPOLLIN;
      }
      if (connected && out.want_write) want |= EPOLLOUT;
      if (want == c.registered[side]) continue;
      epoll_event ev{};
      ev.events = want;
      ev.data.u64 = (c.id << 2) | static_cast<uint64_t>(side);
      if (want == 0) {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd[side], nullptr);
      } else if (c.registered[side] == 0) {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd[side], &ev);
      } else {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd[side], &ev);
      }
      c.registered[side] = want;
    }
  }

  void CloseConn(Conn& c, bool abort) {
    for (int d = 0; d < 2; ++d) DropPipe(d, c.pipe[d]);
    for (int side = 0; side < 2; ++side) {
      if (c.fd[side] < 0) continue;
      if (c.registered[side] != 0) {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd[side], nullptr);
      }
      if (abort) {
        AbortFd(c.fd[side]);
      } else {
        CloseFd(c.fd[side]);
      }
    }
    if (abort) ++stats_.connections_reset;
    conns_.erase(c.id);  // invalidates c
  }

  const ProxyOptions options_;
  sockaddr_in listen_sa_{};
  sockaddr_in upstream_sa_{};
  uint16_t port_ = 0;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int timer_fd_ = -1;
  int listen_fd_ = -1;
  std::thread thread_;

  // std::mutex rather than absl::Mutex: Debian's prebuilt Abseil is not
  // instrumented, so ThreadSanitizer cannot see absl::Mutex synchronization.
  std::mutex mu_;
  std::condition_variable done_cv_;
  std::vector<std::function<void()>> tasks_;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  bool exited_ = false;                       // guarded by mu_

  // Loop-thread state.
  FaultSpec faults_[2];
  std::map<uint64_t, Conn> conns_;
  uint64_t next_id_ = 1;
  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<TimerEntry>> timers_;
  int64_t armed_at_ = 0;
  std::mt19937_64 rng_;
  std::vector<char> read_buffer_;
  ProxyStats stats_;
};

// ---------------------------------------------------------------------------
// FaultProxy

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Start(const ProxyOptions& options) {
  auto loop = std::make_unique<Loop>(options);
  absl::Status status = loop->Init();
  if (!status.ok()) return status;
  return std::unique_ptr<FaultProxy>(new FaultProxy(std::move(loop)));
}

FaultProxy::FaultProxy(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}

FaultProxy::~FaultProxy() = default;

uint16_t FaultProxy::listen_port() const { return loop_->port(); }

std::string FaultProxy::listen_address() const {
  return absl::StrCat(loop_->options().listen_host, ":", loop_->port());
}

const ProxyOptions& FaultProxy::options() const { return loop_->options(); }

absl::Status FaultProxy::SetFault(Direction direction, const FaultSpec& spec) {
  absl::Status status = spec.Validate();
  if (!status.ok()) return status;
  loop_->RunInLoop([&] { loop_->SetFault(direction, spec); });
  return absl::OkStatus();
}

absl::Status FaultProxy::SetFaultBoth(const FaultSpec& spec) {
  absl::Status status = spec.Validate();
  if (!status.ok()) return status;
  loop_->RunInLoop([&] {
    loop_->SetFault(Direction::kToServer, spec);
    loop_->SetFault(Direction::kToClient, spec);
  });
  return absl::OkStatus();
}

FaultSpec FaultProxy::fault(Direction direction) const {
  FaultSpec spec;
  loop_->RunInLoop([&] { spec = loop_->GetFault(direction); });
  return spec;
}

void FaultProxy::ClearFaults() {
  loop_->RunInLoop([&] {
    loop_->SetFault(Direction::kToServer, FaultSpec::None());
    loop_->SetFault(Direction::kToClient, FaultSpec::None());
  });
}

void FaultProxy::ReleaseHeld() {
  loop_->RunInLoop([&] { loop_->ReleaseHeld(); });
}

void FaultProxy::ResetAll() {
  loop_->RunInLoop([&] { loop_->ResetAllConns(); });
}

void FaultProxy::Down() {
  loop_->RunInLoop([&] { loop_->Down(); });
}

absl::Status FaultProxy::Up() {
  absl::Status status;
  loop_->RunInLoop([&] { status = loop_->Up(); });
  return status;
}

absl::Status FaultProxy::Retarget(const std::string& host, uint16_t port) {
  absl::StatusOr<in_addr> addr = LoopbackAddress("upstream host", host);
  if (!addr.ok()) return addr.status();
  if (port == 0) return absl::InvalidArgumentError("fault proxy: upstream port is 0");
  loop_->RunInLoop([&] { loop_->Retarget(*addr, port); });
  return absl::OkStatus();
}

std::string FaultProxy::upstream() const {
  std::string out;
  loop_->RunInLoop([&] { out = loop_->Upstream(); });
  return out;
}

ProxyStats FaultProxy::Stats() const {
  ProxyStats stats;
  loop_->RunInLoop([&] { stats = loop_->Stats(); });
  return stats;
}

}  // namespace redlock::testkit
