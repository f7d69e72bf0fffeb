#include "testkit/proxy_conns.h"

#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace redlock::testkit::proxy_internal {
namespace {

constexpr int kClientSide = 0;
constexpr int kServerSide = 1;
constexpr size_t kReadBufferSize = 64 * 1024;
constexpr int kMaxReadsPerEvent = 16;
constexpr int kMaxAcceptsPerEvent = 64;

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

}  // namespace

ConnTable::ConnTable(const ProxyOptions& options, const FaultSpec (&faults)[2], ProxyStats& stats,
                     Reactor& reactor)
    : options_(options),
      faults_(faults),
      stats_(stats),
      reactor_(reactor),
      rng_(options.seed != 0 ? options.seed : std::random_device{}()),
      read_buffer_(kReadBufferSize) {}

ConnTable::~ConnTable() {
  for (auto& [id, conn] : conns_) {
    CloseFd(conn.fd[kClientSide]);
    CloseFd(conn.fd[kServerSide]);
  }
}

void ConnTable::FaultChanged(Direction d, const FaultSpec& old) {
  const int di = static_cast<int>(d);
  const FaultSpec& spec = faults_[di];
  for (uint64_t id : ConnIds()) {
    Conn* c = Find(id);
    if (c == nullptr) continue;
    Pipe& p = c->pipe[di];
    if (old.kind == FaultKind::kHold && spec.kind != FaultKind::kHold) p.ReleaseHeld();
    if (spec.kind == FaultKind::kTruncate) {
      p.StartTruncation(spec.truncate_bytes);
    } else {
      p.truncate_left = -1;
    }
    if (spec.kind != FaultKind::kSlice) p.next_slice = 0;
  }
  if (spec.kind == FaultKind::kReset) {
    ResetAll();
    return;
  }
  FlushAll();
}

void ConnTable::ReleaseHeld() {
  for (auto& [id, conn] : conns_) {
    conn.pipe[0].ReleaseHeld();
    conn.pipe[1].ReleaseHeld();
  }
  FlushAll();
}

void ConnTable::ResetAll() {
  for (uint64_t id : ConnIds()) {
    Conn* c = Find(id);
    if (c != nullptr) CloseConn(*c, /*abort=*/true);
  }
}

void ConnTable::CloseAll() {
  for (uint64_t id : ConnIds()) {
    Conn* c = Find(id);
    if (c != nullptr) CloseConn(*c, /*abort=*/false);
  }
}

void ConnTable::AddTo(ProxyStats& s) const {
  s.connections_open = conns_.size();
  for (const auto& [id, conn] : conns_) {
    s.to_server.queued += conn.pipe[0].queued;
    s.to_server.held += conn.pipe[0].held;
    s.to_client.queued += conn.pipe[1].queued;
    s.to_client.held += conn.pipe[1].held;
  }
}

int64_t ConnTable::NextDeadline() {
  while (!timers_.empty()) {
    const TimerEntry& top = timers_.top();
    Conn* c = Find(top.id);
    if (c != nullptr && c->pipe[top.dir].timer_at == top.at) break;
    timers_.pop();  // stale
  }
  return timers_.empty() ? 0 : timers_.top().at;
}

void ConnTable::OnTimer() {
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

void ConnTable::Schedule(Conn& c, int dir, int64_t at) {
  Pipe& p = c.pipe[dir];
  if (p.timer_at != 0 && p.timer_at <= at) return;
  p.timer_at = at;
  timers_.push(TimerEntry{at, c.id, dir});
}

ConnTable::Conn* ConnTable::Find(uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : &it->second;
}

std::vector<uint64_t> ConnTable::ConnIds() const {
  std::vector<uint64_t> ids;
  ids.reserve(conns_.size());
  for (const auto& [id, conn] : conns_) ids.push_back(id);
  return ids;
}

bool ConnTable::ResetFaultSet() const {
  return faults_[0].kind == FaultKind::kReset || faults_[1].kind == FaultKind::kReset;
}

void ConnTable::Accept(int listen_fd) {
  for (int i = 0; i < kMaxAcceptsPerEvent; ++i) {
    int cfd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
        c.pipe[d].StartTruncation(faults_[d].truncate_bytes);
      }
    }
    int r = ::connect(sfd, reinterpret_cast<const sockaddr*>(&upstream_), sizeof(upstream_));
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

void ConnTable::OnReady(uint64_t token, uint32_t events) {
  const uint64_t id = token >> 2;
  const int side = static_cast<int>(token & 1);
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
void ConnTable::Read(Conn& c, int dir) {
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
    p.Ingest(faults_[dir], read_buffer_.data(), static_cast<size_t>(n), NowNanos(), rng_,
             FlowOf(dir));
  }
  const uint64_t id = c.id;
  Flush(c, dir);
  Conn* alive = Find(id);
  if (alive != nullptr) Flush(*alive, 1 - dir);  // settles a dead peer side
}

void ConnTable::MarkDstDead(Conn& c, int dir) {
  Pipe& p = c.pipe[dir];
  if (p.dst_dead) return;
  p.dst_dead = true;
  p.Drop(FlowOf(dir));
}

void ConnTable::FlushAll() {
  for (uint64_t id : ConnIds()) {
    for (int d = 0; d < 2; ++d) {
      Conn* c = Find(id);
      if (c != nullptr) Flush(*c, d);
    }
  }
}

void ConnTable::Flush(Conn& c, int dir) {
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
    FlowOf(dir).delivered += written;
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

bool ConnTable::MaybeFinish(Conn& c) {
  bool done = true;
  for (int d = 0; d < 2; ++d) {
    Pipe& p = c.pipe[d];
    if (p.dst_dead && !p.chunks.empty()) p.Drop(FlowOf(d));
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

void ConnTable::UpdateInterest(Conn& c) {
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
    const uint64_t token = (c.id << 2) | static_cast<uint64_t>(side);
    if (want == 0) {
      reactor_.Remove(c.fd[side]);
    } else if (c.registered[side] == 0) {
      reactor_.Add(c.fd[side], want, token);
    } else {
      reactor_.Modify(c.fd[side], want, token);
    }
    c.registered[side] = want;
  }
}

void ConnTable::CloseConn(Conn& c, bool abort) {
  for (int d = 0; d < 2; ++d) c.pipe[d].Drop(FlowOf(d));
  for (int side = 0; side < 2; ++side) {
    if (c.fd[side] < 0) continue;
    if (c.registered[side] != 0) reactor_.Remove(c.fd[side]);
    if (abort) {
      AbortFd(c.fd[side]);
    } else {
      CloseFd(c.fd[side]);
    }
  }
  if (abort) ++stats_.connections_reset;
  conns_.erase(c.id);  // invalidates c
}

}  // namespace redlock::testkit::proxy_internal
