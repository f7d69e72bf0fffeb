#include "bench/pipelined_limit.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "testkit/redis.h"

namespace redlock::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kEventFdData = 0;  // epoll data of the eventfd; node i is i + 1

std::string ErrnoText(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof(buf));  // the GNU form returns the message
}

void AppendBulk(std::string* out, absl::string_view arg) {
  absl::StrAppend(out, "$", arg.size(), "\r\n", arg, "\r\n");
}

void AppendCommand(std::string* out, std::initializer_list<absl::string_view> args) {
  absl::StrAppend(out, "*", args.size(), "\r\n");
  for (absl::string_view a : args) AppendBulk(out, a);
}

void AppendCommand(std::string* out, const std::vector<std::string>& args) {
  absl::StrAppend(out, "*", args.size(), "\r\n");
  for (const std::string& a : args) AppendBulk(out, a);
}

int PollMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now() + std::chrono::microseconds(999));
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1000));
}

// A connected non-blocking TCP socket (TCP_NODELAY) to `ep`.
absl::StatusOr<int> ConnectSocket(const Endpoint& ep, absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(ep.port);
  const int rc = getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) return absl::UnavailableError(absl::StrCat(ep.ToString(), ": ", gai_strerror(rc)));
  const Clock::time_point deadline = Clock::now() + absl::ToChronoNanoseconds(timeout);
  std::string last = "no address";
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    const int s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) {
      last = ErrnoText(errno);
      continue;
    }
    if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = ErrnoText(errno);
      close(s);
      continue;
    }
    pollfd p{s, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (poll(&p, 1, PollMs(deadline)) <= 0) {
      last = "connect timed out";
    } else if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      last = ErrnoText(err != 0 ? err : errno);
    } else {
      fd = s;
      break;
    }
    close(s);
  }
  freeaddrinfo(res);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(ep.ToString(), ": ", last));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Sends `commands` and waits for their replies (by `deadline`); an error
// reply fails. Returns the last reply's text.
absl::StatusOr<std::string> Handshake(int fd, redisReader* reader, const std::string& name,
                                      const std::vector<std::vector<std::string>>& commands,
                                      Clock::time_point deadline) {
  std::string out;
  for (const auto& c : commands) AppendCommand(&out, c);
  size_t off = 0;
  size_t replies = 0;
  std::string last;
  char buf[4096];
  for (int pass = 0; pass < 10000 && replies < commands.size(); ++pass) {
    if (Clock::now() >= deadline) break;
    pollfd p{fd, static_cast<short>(POLLIN | (off < out.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, PollMs(deadline)) < 0 && errno != EINTR) break;
    if ((p.revents & POLLOUT) != 0) {
      const ssize_t w = send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
      if (w > 0) off += static_cast<size_t>(w);
    }
    if ((p.revents & (POLLIN | POLLERR | POLLHUP)) == 0) continue;
    const ssize_t r = read(fd, buf, sizeof(buf));
    if (r == 0) return absl::UnavailableError(absl::StrCat(name, ": connection closed"));
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat(name, ": ", ErrnoText(errno)));
    }
    redisReaderFeed(reader, buf, static_cast<size_t>(r));
    void* raw = nullptr;
    while (replies < commands.size() && redisReaderGetReply(reader, &raw) == REDIS_OK &&
           raw != nullptr) {
      const redisReply* reply = static_cast<const redisReply*>(raw);
      const bool error = reply->type == REDIS_REPLY_ERROR;
      last = reply->str != nullptr ? std::string(reply->str, reply->len) : std::string();
      freeReplyObject(raw);
      if (error) return absl::UnavailableError(absl::StrCat(name, ": handshake: ", last));
      ++replies;
    }
  }
  if (replies < commands.size()) {
    return absl::UnavailableError(absl::StrCat(name, ": no reply to the handshake in time"));
  }
  return last;
}

enum class Op { kIdle, kAcquire, kRelease };

// A chain's state; only the loop thread touches it.
struct ChainSlot {
  std::string key;
  std::string token;
  std::string ttl_ms;
  absl::Duration ttl;
  uint32_t seq = 0;  // raised by every round and every decision: older replies are stale
  Op op = Op::kIdle;
  Tally tally;
  int answered = 0;  // nodes that answered, failed or timed out this round
  Clock::time_point start;
  AsyncLocker::Done done;
};

// A command awaiting its reply on one node (replies come in order).
struct Pending {
  uint32_t chain;
  uint32_t seq;
};

struct Deadline {
  Clock::time_point at;
  uint32_t chain;
  uint32_t seq;
};

struct NodeConn {
  std::string name;
  int fd = -1;
  redisReader* reader = nullptr;
  std::string out;  // RESP not written yet
  bool epollout = false;
  bool dirty = false;  // in Loop::dirty_
  std::deque<Pending> fifo;
  std::string lost;  // why the connection is gone; empty while it is up
};

}  // namespace

class PipelinedLimit::Loop {
 public:
  explicit Loop(const BaselineOptions& options)
      : options_(options),
        quorum_(EffectiveQuorumOf(options)),
        timeout_(absl::ToChronoNanoseconds(options.node_timeout)),
        timeout_text_(
            absl::StrCat("no reply within ", absl::FormatDuration(options.node_timeout))) {
    for (const Endpoint& ep : options.nodes) {
      NodeConn& n = nodes_.emplace_back();
      n.name = ep.ToString();
      n.reader = redisReaderCreate();
    }
  }

  ~Loop() {
    if (thread_.joinable()) {
      stop_.store(true);
      Wake();
      thread_.join();
    }
    for (NodeConn& n : nodes_) {
      if (n.fd >= 0) close(n.fd);
      if (n.reader != nullptr) redisReaderFree(n.reader);
    }
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (event_fd_ >= 0) close(event_fd_);
  }

  absl::Status Start() {
    const Clock::time_point deadline =
        Clock::now() + absl::ToChronoNanoseconds(options_.connect_timeout);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      NodeConn& n = nodes_[i];
      if (n.reader == nullptr) return absl::ResourceExhaustedError("redisReaderCreate failed");
      absl::StatusOr<int> fd = ConnectSocket(options_.nodes[i], options_.connect_timeout);
      if (!fd.ok()) return fd.status();
      n.fd = *fd;
      std::vector<std::vector<std::string>> commands =
          testkit::HandshakeCommands(options_.nodes[i]);
      commands.push_back({"SCRIPT", "LOAD", kCompareAndDeleteScript});
      absl::StatusOr<std::string> sha = Handshake(n.fd, n.reader, n.name, commands, deadline);
      if (!sha.ok()) return sha.status();
      sha_ = *sha;
    }
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || event_fd_ < 0) return absl::InternalError(ErrnoText(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kEventFdData;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev) != 0) {
      return absl::InternalError(ErrnoText(errno));
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      ev.data.u64 = i + 1;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, nodes_[i].fd, &ev) != 0) {
        return absl::InternalError(ErrnoText(errno));
      }
    }
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  uint32_t AddChain(std::string key) {
    const uint32_t id = next_chain_.fetch_add(1);
    Post([this, id, key = std::move(key)]() mutable {
      if (chains_.size() <= id) chains_.resize(id + 1);
      chains_[id].key = std::move(key);
    });
    return id;
  }

  void Acquire(uint32_t chain, absl::Duration ttl, AsyncLocker::Done done) {
    OnLoop([this, chain, ttl, done = std::move(done)]() mutable {
      ChainSlot& c = chains_[chain];
      c.done = std::move(done);
      c.ttl = ttl;
      c.token = NewBaselineToken();
      c.ttl_ms = std::to_string(absl::ToInt64Milliseconds(ttl));
      Begin(chain, Op::kAcquire);
    });
  }

  void Release(uint32_t chain, AsyncLocker::Done done) {
    OnLoop([this, chain, done = std::move(done)]() mutable {
      chains_[chain].done = std::move(done);
      Begin(chain, Op::kRelease);
    });
  }

  Counters counters() const {
    Counters c;
    c.commands = commands_.load(std::memory_order_relaxed);
    c.writes = writes_.load(std::memory_order_relaxed);
    c.replies = replies_.load(std::memory_order_relaxed);
    return c;
  }

 private:
  // Runs `fn` now when called on the loop thread (from a callback), else
  // hands it to the loop.
  void OnLoop(absl::AnyInvocable<void()> fn) {
    if (std::this_thread::get_id() == thread_.get_id()) {
      fn();
    } else {
      Post(std::move(fn));
    }
  }

  void Post(absl::AnyInvocable<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      posted_.push_back(std::move(fn));
    }
    Wake();
  }

  void Wake() {
    const uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof(one));
  }

  void RunPosted() {
    uint64_t count = 0;
    (void)!read(event_fd_, &count, sizeof(count));
    std::vector<absl::AnyInvocable<void()>> tasks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks.swap(posted_);
    }
    for (auto& t : tasks) t();
  }

  void Run() {
    epoll_event events[64];
    // Bounded by stop_: every wait ends within 100 ms.
    while (!stop_.load(std::memory_order_relaxed)) {
      int wait_ms = 100;
      if (!deadlines_.empty()) wait_ms = std::min(wait_ms, PollMs(deadlines_.front().at));
      const int ready = epoll_wait(epoll_fd_, events, 64, wait_ms);
      for (int i = 0; i < ready; ++i) {
        const uint64_t data = events[i].data.u64;
        if (data == kEventFdData) {
          RunPosted();
          continue;
        }
        NodeConn& n = nodes_[data - 1];
        if ((events[i].events & EPOLLOUT) != 0) Flush(n);
        if ((events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) OnReadable(n);
      }
      ExpireDeadlines(Clock::now());
      // Everything the callbacks above appended goes out in one write per node.
      // (A write that fails loses the node, which may start new rounds and
      // mark nodes dirty again: bounded passes.)
      for (int pass = 0; pass < 4 && !dirty_.empty(); ++pass) {
        flushing_.clear();
        flushing_.swap(dirty_);
        for (size_t i : flushing_) {
          nodes_[i].dirty = false;
          Flush(nodes_[i]);
        }
      }
    }
  }

  // Starts a round of `op` for `chain` on every node.
  void Begin(uint32_t chain, Op op) {
    ChainSlot& c = chains_[chain];
    ++c.seq;
    c.op = op;
    c.tally = Tally();
    c.answered = 0;
    c.start = Clock::now();
    SendAll(chain, c);
    deadlines_.push_back(Deadline{c.start + timeout_, chain, c.seq});
    MaybeDecide(chain);
  }

  // The round's command to every node, tagged (chain, c.seq); a node that
  // cannot take it counts as failed at once.
  void SendAll(uint32_t chain, ChainSlot& c) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      NodeConn& n = nodes_[i];
      if (!n.lost.empty()) {
        c.tally.Fail(absl::StrCat(n.name, ": ", n.lost));
        ++c.answered;
        continue;
      }
      if (n.fifo.size() >= kMaxInFlightPerNode) {
        c.tally.Fail(absl::StrCat(n.name, ": ", n.fifo.size(), " commands already waiting"));
        ++c.answered;
        continue;
      }
      if (c.op == Op::kAcquire) {
        AppendCommand(&n.out, {"SET", c.key, c.token, "NX", "PX", c.ttl_ms});
      } else {
        AppendCommand(&n.out, {"EVALSHA", sha_, "1", c.key, c.token});
      }
      n.fifo.push_back(Pending{chain, c.seq});
      commands_.fetch_add(1, std::memory_order_relaxed);
      if (!n.dirty) {
        n.dirty = true;
        dirty_.push_back(i);
      }
    }
  }

  // Decides the round once a quorum said yes or can no longer.
  void MaybeDecide(uint32_t chain) {
    ChainSlot& c = chains_[chain];
    const int n = static_cast<int>(nodes_.size());
    if (c.op == Op::kIdle) return;
    if (c.tally.yes < quorum_ && c.tally.yes + (n - c.answered) >= quorum_) return;
    absl::Status st = c.op == Op::kAcquire ? AcquireDecision("pipelined", c.tally, n, quorum_,
                                                             c.start, c.ttl, options_)
                                           : ReleaseDecision("pipelined", c.tally, n, quorum_);
    const bool failed_acquire = c.op == Op::kAcquire && !st.ok();
    ++c.seq;  // the round's late replies are stale from now on
    if (failed_acquire) {
      // Remove what was set, without waiting (as an idle round: replies dropped).
      c.op = Op::kRelease;
      SendAll(chain, c);
    }
    c.op = Op::kIdle;
    AsyncLocker::Done done = std::move(c.done);
    c.done = nullptr;
    done(std::move(st));  // may start the chain's next round
  }

  void OnReply(NodeConn& n, const redisReply* r) {
    const Pending p = n.fifo.front();
    n.fifo.pop_front();
    ChainSlot& c = chains_[p.chain];
    if (c.seq != p.seq || c.op == Op::kIdle) return;
    if (c.op == Op::kAcquire && r->type == REDIS_REPLY_STATUS && r->len == 2 &&
        memcmp(r->str, "OK", 2) == 0) {
      ++c.tally.yes;
    } else if (c.op == Op::kAcquire && r->type == REDIS_REPLY_NIL) {
      ++c.tally.refused;
    } else if (c.op == Op::kRelease && r->type == REDIS_REPLY_INTEGER) {
      ++c.tally.yes;  // 1 deleted, 0 already gone
    } else {
      c.tally.Fail(absl::StrCat(n.name, ": unexpected reply ",
                                r->str != nullptr ? std::string(r->str, r->len) : ""));
    }
    ++c.answered;
    MaybeDecide(p.chain);
  }

  void OnReadable(NodeConn& n) {
    for (int i = 0; i < 16 && n.lost.empty(); ++i) {
      const ssize_t r = read(n.fd, read_buf_, sizeof(read_buf_));
      if (r == 0) return Lose(n, "connection closed");
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) Lose(n, ErrnoText(errno));
        return;
      }
      redisReaderFeed(n.reader, read_buf_, static_cast<size_t>(r));
      for (;;) {
        void* raw = nullptr;
        if (redisReaderGetReply(n.reader, &raw) != REDIS_OK) return Lose(n, "protocol error");
        if (raw == nullptr) break;
        replies_.fetch_add(1, std::memory_order_relaxed);
        if (n.fifo.empty()) {
          freeReplyObject(raw);
          return Lose(n, "a reply to no command");
        }
        OnReply(n, static_cast<const redisReply*>(raw));
        freeReplyObject(raw);
      }
      if (static_cast<size_t>(r) < sizeof(read_buf_)) return;
    }
  }

  void Flush(NodeConn& n) {
    if (!n.lost.empty()) return;
    size_t off = 0;
    while (off < n.out.size()) {
      const ssize_t w = send(n.fd, n.out.data() + off, n.out.size() - off, MSG_NOSIGNAL);
      if (w > 0) {
        off += static_cast<size_t>(w);
        writes_.fetch_add(1, std::memory_order_relaxed);
      } else if (w < 0 && errno == EINTR) {
        continue;
      } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        return Lose(n, absl::StrCat("write failed: ", ErrnoText(errno)));
      }
    }
    n.out.erase(0, off);
    const bool want_out = !n.out.empty();
    if (want_out != n.epollout) {
      n.epollout = want_out;
      epoll_event ev{};
      ev.events = want_out ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
      ev.data.u64 = static_cast<uint64_t>(&n - nodes_.data()) + 1;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, n.fd, &ev);
    }
  }

  // The connection is gone for good: every round waiting on it gets a "no".
  void Lose(NodeConn& n, const std::string& why) {
    n.lost = why;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, n.fd, nullptr);
    close(n.fd);
    n.fd = -1;
    n.out.clear();
    std::deque<Pending> pending;
    pending.swap(n.fifo);
    for (const Pending& p : pending) {
      ChainSlot& c = chains_[p.chain];
      if (c.seq != p.seq || c.op == Op::kIdle) continue;
      c.tally.Fail(absl::StrCat(n.name, ": ", why));
      ++c.answered;
      MaybeDecide(p.chain);
    }
  }

  void ExpireDeadlines(Clock::time_point now) {
    // Every round's deadline is its start + node_timeout: the queue is in order.
    while (!deadlines_.empty() && deadlines_.front().at <= now) {
      const Deadline d = deadlines_.front();
      deadlines_.pop_front();
      ChainSlot& c = chains_[d.chain];
      if (c.seq != d.seq || c.op == Op::kIdle) continue;
      for (int left = static_cast<int>(nodes_.size()) - c.answered; left > 0; --left) {
        c.tally.Fail(timeout_text_);
      }
      c.answered = static_cast<int>(nodes_.size());
      MaybeDecide(d.chain);
    }
  }

  const BaselineOptions options_;
  const int quorum_;
  const Clock::duration timeout_;
  const std::string timeout_text_;
  std::string sha_;
  std::vector<NodeConn> nodes_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> next_chain_{0};
  std::atomic<int64_t> commands_{0};
  std::atomic<int64_t> writes_{0};
  std::atomic<int64_t> replies_{0};

  std::mutex mu_;
  std::vector<absl::AnyInvocable<void()>> posted_;  // guarded by mu_

  // Loop thread only.
  std::deque<ChainSlot> chains_;
  std::deque<Deadline> deadlines_;
  std::vector<size_t> dirty_;
  std::vector<size_t> flushing_;
  char read_buf_[64 * 1024];
};

namespace {

class PipelinedLocker final : public AsyncLocker {
 public:
  PipelinedLocker(PipelinedLimit::Loop* loop, uint32_t chain) : loop_(loop), chain_(chain) {}
  void AcquireAsync(absl::Duration ttl, Done done) override {
    loop_->Acquire(chain_, ttl, std::move(done));
  }
  void ReleaseAsync(Done done) override { loop_->Release(chain_, std::move(done)); }

 private:
  PipelinedLimit::Loop* const loop_;
  const uint32_t chain_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PipelinedLimit>> PipelinedLimit::Start(
    const BaselineOptions& options) {
  if (options.nodes.empty()) return absl::InvalidArgumentError("no nodes");
  auto loop = std::make_unique<Loop>(options);
  absl::Status st = loop->Start();
  if (!st.ok()) return st;
  return std::unique_ptr<PipelinedLimit>(new PipelinedLimit(std::move(loop)));
}

PipelinedLimit::PipelinedLimit(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}
PipelinedLimit::~PipelinedLimit() = default;

std::unique_ptr<AsyncLocker> PipelinedLimit::NewLocker(std::string resource) {
  return std::make_unique<PipelinedLocker>(loop_.get(), loop_->AddChain(std::move(resource)));
}

PipelinedLimit::Counters PipelinedLimit::counters() const { return loop_->counters(); }

}  // namespace redlock::bench
