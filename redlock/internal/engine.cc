#include "redlock/internal/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/token.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

// The engine whose callbacks the current thread is running, if any.
thread_local const void* t_dispatching = nullptr;

// Restores t_dispatching on scope exit.
class Dispatching {
 public:
  explicit Dispatching(const void* engine) : saved_(t_dispatching) { t_dispatching = engine; }
  ~Dispatching() { t_dispatching = saved_; }

 private:
  const void* saved_;
};

int64_t NowNs() { return Clock::now().time_since_epoch().count(); }

// How long the I/O thread stays off polling after a synchronous caller
// polled: back-to-back calls then never need to take the role from it.
constexpr int64_t kSyncQuietNs = 1000000;

// A node behind an open breaker that has not answered anything for this long
// gets a new connection.
constexpr absl::Duration kStaleConnection = absl::Seconds(1);

constexpr uint64_t kEventFdData = 0;

// epoll data: generation << 32 | node << 2 | kind, kind 1 = the command
// connection, 3 = the subscriber connection (0 is the eventfd).
constexpr uint64_t kCommandConn = 1;
constexpr uint64_t kSubConn = 3;

uint64_t EventData(uint32_t generation, int node, uint64_t kind = kCommandConn) {
  return (uint64_t{generation} << 32) | (static_cast<uint64_t>(node) << 2) | kind;
}

std::string ErrnoText(int err) {
  char buf[128];
  // GNU strerror_r returns the message pointer.
  const char* msg = strerror_r(err, buf, sizeof(buf));
  return msg;
}

std::string FormatMs(absl::Duration d) { return absl::FormatDuration(d); }

Reply Convert(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
      return Reply::String(std::string(r->str, r->len));
    case REDIS_REPLY_STATUS:
      return Reply::Status(std::string(r->str, r->len));
    case REDIS_REPLY_ERROR:
      return Reply::Error(std::string(r->str, r->len));
    case REDIS_REPLY_INTEGER:
      return Reply::Integer(r->integer);
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> elements;
      elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) elements.push_back(Convert(r->element[i]));
      return Reply::Array(std::move(elements));
    }
    default:
      return Reply::Nil();
  }
}

// The run_id line of an INFO reply ("" if absent).
std::string RunIdFromInfo(absl::string_view info) {
  constexpr absl::string_view kKey = "run_id:";
  size_t pos = info.find(kKey);
  if (pos == absl::string_view::npos) return "";
  absl::string_view rest = info.substr(pos + kKey.size());
  size_t end = rest.find_first_of("\r\n");
  return std::string(rest.substr(0, end));
}

}  // namespace

// One request awaiting its reply.
struct Engine::Slot {
  // kReload: a SCRIPT LOAD after NOSCRIPT, whose reply is not needed.
  enum class Kind { kRequest, kHandshake, kProbe, kReload };
  Kind kind = Kind::kRequest;
  NodeCallback done;  // empty once completed
  TimePoint deadline = TimePoint::max();
  bool cleanup = false;
  uint8_t expect = 0;   // Command::expect
  const char* op = "";  // Command::op, for messages
  std::string echo;     // kProbe: the nonce the PING must return
  // For a NOSCRIPT retry: the request as sent.
  const Script* script = nullptr;
  std::string payload;
  // kHandshake: what the reply must look like.
  const Script* loads = nullptr;  // SCRIPT LOAD of this script
  const char* step = "";          // "AUTH", "SELECT", "SCRIPT LOAD"
};

struct Engine::Node {
  enum class State { kDisconnected, kConnecting, kHandshake, kReady };

  int index = 0;
  Endpoint endpoint;
  std::string name;

  mutable std::mutex mu;
  // Guarded by mu.
  State state = State::kDisconnected;
  int fd = -1;
  std::string out;        // bytes not written yet
  bool writing = false;   // a thread is in write(2) for this node, outside mu
  bool epollout = false;  // EPOLLOUT is armed; the loop will flush
  int close_after_write = -1;
  std::string write_error;
  std::deque<std::shared_ptr<Slot>> fifo;  // sent, in order, awaiting replies
  size_t expired = 0;                      // fifo prefix whose deadline passed
  // Requests made while the first connection is being established.
  std::deque<std::pair<std::shared_ptr<Slot>, std::string>> waiting;
  bool breaker_open = false;
  TimePoint breaker_opened_at{};
  TimePoint last_reply_at{};  // any reply, late ones included: the node is alive
  std::string last_error;
  bool probe_in_flight = false;
  size_t handshake_left = 0;

  // Loop thread only.
  uint32_t generation = 0;
  redisReader* reader = nullptr;
  TimePoint next_connect{};
  TimePoint connect_deadline{};
  TimePoint next_probe{};
  absl::Duration backoff;
  bool first_connect_reported = false;

  // The subscriber connection (loop thread only): SUBSCRIBE mode, for
  // release notifications. Opened when the first channel is subscribed.
  struct Sub {
    State state = State::kDisconnected;
    int fd = -1;
    uint32_t generation = 0;
    redisReader* reader = nullptr;
    std::string out;
    bool epollout = false;
    size_t auth_left = 0;
    TimePoint next_connect{};
    TimePoint connect_deadline{};
    absl::Duration backoff;
  } sub;

  size_t load() const { return fifo.size() + waiting.size(); }
};

bool Engine::ReplyFits(const Slot& slot, const Reply& reply) {
  if (slot.kind == Slot::Kind::kHandshake) return true;  // checked step by step
  if (slot.kind == Slot::Kind::kProbe) {
    return reply.is_error() || (reply.type == Reply::Type::kString && reply.str == slot.echo);
  }
  return internal::ReplyFits(slot.expect, reply);
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Start(Config config) {
  std::unique_ptr<Engine> engine(new Engine(std::move(config)));
  engine->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (engine->epoll_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll_create1: ", ErrnoText(errno)));
  }
  engine->event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (engine->event_fd_ < 0) {
    return absl::InternalError(absl::StrCat("eventfd: ", ErrnoText(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kEventFdData;
  if (epoll_ctl(engine->epoll_fd_, EPOLL_CTL_ADD, engine->event_fd_, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", ErrnoText(errno)));
  }
  engine->first_connect_pending_ = engine->size();
  {
    // Before any request can be made: every node is connecting (requests
    // wait for it) or has failed (requests fail at once).
    std::lock_guard<std::mutex> poll(engine->poll_mu_);
    for (auto& n : engine->nodes_) engine->StartConnect(*n);
  }
  Engine* e = engine.get();
  engine->thread_ = std::thread([e] { e->Loop(); });
  engine->thread_id_.store(engine->thread_.get_id());
  return engine;
}

Engine::Engine(Config config) : config_(std::move(config)) {
  for (size_t i = 0; i < config_.nodes.size(); ++i) {
    auto n = std::make_unique<Node>();
    n->index = static_cast<int>(i);
    n->endpoint = config_.nodes[i];
    n->name = config_.nodes[i].ToString();
    n->backoff = config_.reconnect_backoff_min;
    n->sub.backoff = config_.reconnect_backoff_min;
    nodes_.push_back(std::move(n));
  }
  run_ids_.resize(nodes_.size());
}

Engine::~Engine() {
  Shutdown();
  for (auto& n : nodes_) {
    if (n->reader != nullptr) redisReaderFree(n->reader);
    if (n->sub.reader != nullptr) redisReaderFree(n->sub.reader);
  }
  if (event_fd_ >= 0) close(event_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

void Engine::Shutdown() {
  if (InTransportThread()) {
    std::fputs("redlock: a Client was destroyed from one of its own callbacks\n", stderr);
    std::abort();
  }
  std::lock_guard<std::mutex> guard(shutdown_mu_);
  if (stopped_.load()) return;
  stopping_.store(true, std::memory_order_release);
  Wake();
  if (thread_.joinable()) thread_.join();
  stopped_.store(true);
}

const std::string& Engine::NodeName(int node) const { return nodes_[node]->name; }

bool Engine::InTransportThread() const {
  return t_dispatching == this || std::this_thread::get_id() == thread_id_;
}

void Engine::Wake() {
  uint64_t one = 1;
  ssize_t r = write(event_fd_, &one, sizeof(one));
  (void)r;  // EAGAIN means the counter is already non-zero: the loop will wake.
  idle_cv_.notify_one();
}

void Engine::DeliverToUser(absl::AnyInvocable<void()> fn) {
  if (std::this_thread::get_id() == thread_id_) {
    fn();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    user_tasks_.push_back(std::move(fn));
  }
  // The I/O thread is idle (a caller polls) or polling itself.
  idle_cv_.notify_one();
  if (io_thread_polling_.load()) Wake();
}

void Engine::RunUserTasks() {
  for (int round = 0; round < 100; ++round) {
    std::deque<absl::AnyInvocable<void()>> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(user_tasks_);
    }
    if (batch.empty()) return;
    for (auto& fn : batch) fn();
  }
}

void Engine::HandOffPolling() {
  std::shared_ptr<SyncWaiter> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (handoff_.empty()) return;
    next = std::move(handoff_.front());
    handoff_.pop_front();
  }
  next->Nudge();
}

void Engine::AwaitSync(const std::shared_ptr<SyncWaiter>& waiter) {
  sync_active_.fetch_add(1);
  // The I/O thread may be sleeping in epoll_wait with the role: make it let
  // go (it sees sync_active_ and stays off until we are done).
  if (io_thread_polling_.load()) Wake();
  bool queued = false;
  while (!waiter->ready() && !stopping()) {
    std::unique_lock<std::mutex> poll(poll_mu_, std::try_to_lock);
    if (poll.owns_lock()) {
      {
        Dispatching dispatching(this);
        while (!waiter->ready() && !stopping()) RunOnce();
      }
      poll.unlock();
      HandOffPolling();
      break;
    }
    if (!queued) {
      // Queue for the role, then try once more: the poller may have left
      // between our try_lock and the queueing, and handed off to nobody.
      std::lock_guard<std::mutex> lock(mu_);
      handoff_.push_back(waiter);
      queued = true;
      continue;
    }
    waiter->Wait(absl::Milliseconds(1));
    // Nudged, timed out or ready: if still queued, stay queued.
    std::lock_guard<std::mutex> lock(mu_);
    queued = std::find(handoff_.begin(), handoff_.end(), waiter) != handoff_.end();
  }
  if (queued) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(handoff_.begin(), handoff_.end(), waiter);
    if (it != handoff_.end()) handoff_.erase(it);
  }
  // Shutting down: the I/O thread completes everything with kCancelled.
  waiter->WaitReady();
  last_sync_end_ns_.store(NowNs());
  sync_active_.fetch_sub(1);
}

void Engine::Post(absl::AnyInvocable<void()> fn) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(fn));
  }
  if (was_empty) Wake();
}

void Engine::FailLater(NodeCallback done, absl::Status status) {
  Post([done = std::move(done), status = std::move(status)]() mutable { done(status); });
}

Transport::TimerId Engine::RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) {
  TimePoint at = Clock::now() + absl::ToChronoNanoseconds(std::max(delay, absl::ZeroDuration()));
  TimerId id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_timer_id_++;
    timers_.emplace(std::make_pair(at, id), std::move(fn));
    timer_index_.emplace(id, at);
  }
  if (at.time_since_epoch().count() < wake_at_ns_.load(std::memory_order_acquire)) Wake();
  return id;
}

bool Engine::Cancel(TimerId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = timer_index_.find(id);
  if (it == timer_index_.end()) return false;
  timers_.erase(std::make_pair(it->second, id));
  timer_index_.erase(it);
  return true;
}

void Engine::Send(int node, Command command, NodeCallback done) {
  Node& n = *nodes_[node];
  if (stopping()) {
    FailLater(std::move(done), absl::CancelledError("the client is shutting down"));
    return;
  }
  std::unique_lock<std::mutex> lock(n.mu);
  if (n.load() >= config_.max_in_flight_per_node) {
    std::string why = absl::StrCat(n.load(), " commands already waiting for this node (",
                                   n.breaker_open ? n.last_error : "it is slow", ")");
    lock.unlock();
    FailLater(std::move(done), absl::UnavailableError(why));
    return;
  }
  bool usable = n.state == Node::State::kReady || n.state == Node::State::kHandshake ||
                n.state == Node::State::kConnecting;
  if (n.breaker_open && !(command.cleanup && n.state == Node::State::kReady &&
                          command.since <= n.breaker_opened_at)) {
    usable = false;
  }
  if (!usable) {
    std::string why = n.last_error.empty() ? std::string("not connected") : n.last_error;
    if (n.breaker_open) absl::StrAppend(&why, " (node marked down until a probe succeeds)");
    lock.unlock();
    FailLater(std::move(done), absl::UnavailableError(why));
    return;
  }
  auto slot = std::make_shared<Slot>();
  slot->done = std::move(done);
  slot->deadline = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
  slot->cleanup = command.cleanup;
  slot->expect = command.expect;
  slot->op = command.op;
  if (command.script != nullptr) {
    slot->script = command.script;
    slot->payload = command.payload;
  }
  if (n.state != Node::State::kReady) {
    // First connection still in progress: sent once it is ready.
    n.waiting.emplace_back(std::move(slot), std::move(command.payload));
    return;
  }
  EnqueueLocked(n, lock, std::move(slot), command.payload);
}

void Engine::EnqueueLocked(Node& n, std::unique_lock<std::mutex>& lock, std::shared_ptr<Slot> slot,
                           absl::string_view payload) {
  n.fifo.push_back(std::move(slot));
  n.out.append(payload.data(), payload.size());
  if (!n.writing && !n.epollout) FlushLocked(n, lock);
}

void Engine::FlushLocked(Node& n, std::unique_lock<std::mutex>& lock) {
  n.writing = true;
  for (int rounds = 0; rounds < 64 && !n.out.empty() && n.fd >= 0; ++rounds) {
    std::string buf;
    buf.swap(n.out);
    const int fd = n.fd;
    lock.unlock();
    size_t off = 0;
    int err = 0;
    while (off < buf.size()) {
      ssize_t w = ::send(fd, buf.data() + off, buf.size() - off, MSG_NOSIGNAL);
      if (w > 0) {
        off += static_cast<size_t>(w);
      } else if (w < 0 && errno == EINTR) {
        continue;
      } else {
        err = w < 0 ? errno : EPIPE;
        break;
      }
    }
    lock.lock();
    if (n.fd != fd) break;  // the connection was dropped meanwhile
    if (off < buf.size()) {
      if (err == EAGAIN || err == EWOULDBLOCK) {
        n.out.insert(0, buf, off, std::string::npos);
        n.epollout = true;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT;
        ev.data.u64 = EventData(n.generation, n.index);
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, n.fd, &ev);
      } else {
        n.write_error = absl::StrCat("write failed: ", ErrnoText(err));
        Wake();
      }
      break;
    }
  }
  if (!n.out.empty() && !n.epollout && n.fd >= 0 && n.write_error.empty()) {
    // Bounded rounds exhausted with more queued: let the loop finish.
    n.epollout = true;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u64 = EventData(n.generation, n.index);
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, n.fd, &ev);
  }
  n.writing = false;
  if (n.close_after_write >= 0) {
    close(n.close_after_write);
    n.close_after_write = -1;
  }
}

void Engine::OpenBreakerLocked(Node& n, const std::string& why) {
  n.last_error = why;
  if (!n.breaker_open) {
    n.breaker_open = true;
    n.breaker_opened_at = Clock::now();
    n.next_probe = Clock::now() + absl::ToChronoNanoseconds(config_.breaker_probe_interval);
  }
}

// ---------------------------------------------------------------------------
// Loop thread.

void Engine::Loop() {
  thread_id_.store(std::this_thread::get_id());
  while (!stopping()) {
    RunUserTasks();
    if (sync_active_.load() > 0 || NowNs() - last_sync_end_ns_.load() < kSyncQuietNs) {
      // A caller polls, or did a moment ago: stay off, but keep running user
      // callbacks, and come back within a millisecond.
      std::unique_lock<std::mutex> lock(mu_);
      idle_cv_.wait_for(lock, std::chrono::milliseconds(1),
                        [&] { return !user_tasks_.empty() || stopping(); });
      continue;
    }
    std::unique_lock<std::mutex> poll(poll_mu_);
    io_thread_polling_.store(true);
    if (sync_active_.load() == 0) {
      Dispatching dispatching(this);
      RunOnce();
    }
    io_thread_polling_.store(false);
    poll.unlock();
    HandOffPolling();
  }
  {
    std::lock_guard<std::mutex> poll(poll_mu_);
    Dispatching dispatching(this);
    CancelEverything();
  }
  RunUserTasks();
}

void Engine::RunOnce() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  TimePoint now = Clock::now();
  TimePoint wake = NextWake(now);
  wake_at_ns_.store(wake.time_since_epoch().count(), std::memory_order_release);
  int64_t timeout_ms = 0;
  if (wake > now) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wake - now).count();
    timeout_ms = (ns + 999999) / 1000000;
  }
  // Timers due before the stored wake time must wake us: re-check after
  // publishing it so a RunAfter racing with this point is not missed. The
  // I/O thread also leaves at once when a caller wants the role.
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!posted_.empty() || (!timers_.empty() && timers_.begin()->first.first < wake)) {
      timeout_ms = 0;
    }
    if (std::this_thread::get_id() == thread_id_ && !user_tasks_.empty()) timeout_ms = 0;
  }
  if (std::this_thread::get_id() == thread_id_ && sync_active_.load() > 0) timeout_ms = 0;
  int count = epoll_wait(epoll_fd_, events, kMaxEvents, static_cast<int>(timeout_ms));
  wake_at_ns_.store(0, std::memory_order_release);
  for (int i = 0; i < count; ++i) HandleEvent(events[i].data.u64, events[i].events);
  now = Clock::now();
  ExpireDeadlines(now);
  MaintainNodes(now);
  RunTimers(now);
  RunPosted();
}

Engine::TimePoint Engine::NextWake(TimePoint now) {
  TimePoint wake = now + absl::ToChronoNanoseconds(config_.node_timeout);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!timers_.empty()) wake = std::min(wake, timers_.begin()->first.first);
    if (!posted_.empty()) wake = now;
  }
  for (auto& np : nodes_) {
    Node& n = *np;
    std::lock_guard<std::mutex> lock(n.mu);
    if (n.expired < n.fifo.size()) wake = std::min(wake, n.fifo[n.expired]->deadline);
    for (auto& w : n.waiting) {
      if (w.first->done) {
        wake = std::min(wake, w.first->deadline);
        break;
      }
    }
    if (!n.write_error.empty()) wake = now;
    switch (n.state) {
      case Node::State::kDisconnected:
        wake = std::min(wake, n.next_connect);
        break;
      case Node::State::kConnecting:
      case Node::State::kHandshake:
        wake = std::min(wake, n.connect_deadline);
        break;
      case Node::State::kReady:
        if (n.breaker_open && !n.probe_in_flight && n.load() < config_.max_in_flight_per_node) {
          wake = std::min(wake, n.next_probe);
        }
        break;
    }
    if (!channels_.empty()) {
      if (n.sub.state == Node::State::kDisconnected) wake = std::min(wake, n.sub.next_connect);
      if (n.sub.state == Node::State::kConnecting || n.sub.state == Node::State::kHandshake) {
        wake = std::min(wake, n.sub.connect_deadline);
      }
    }
  }
  return wake;
}

void Engine::HandleEvent(uint64_t data, uint32_t events) {
  if (data == kEventFdData) {
    uint64_t value;
    while (read(event_fd_, &value, sizeof(value)) > 0) {
    }
    return;
  }
  int index = static_cast<int>((data & 0xffffffffu) >> 2);
  uint32_t generation = static_cast<uint32_t>(data >> 32);
  if (index < 0 || index >= size()) return;
  Node& n = *nodes_[index];
  if ((data & 3) == kSubConn) {
    if (n.sub.generation == generation) SubOnEvent(n, events);
    return;
  }
  if (n.generation != generation) return;  // an event of a connection closed in this batch
  if (n.state == Node::State::kConnecting) {
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(n.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        Disconnect(n, ErrnoText(err));
        return;
      }
      OnConnected(n);
    }
    return;
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) OnReadable(n);
  if (n.generation == generation && (events & EPOLLOUT)) OnWritable(n);
}

void Engine::StartConnect(Node& n) {
  if (stopping()) return;
  TimePoint now = Clock::now();
  n.connect_deadline = now + absl::ToChronoNanoseconds(config_.connect_timeout);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port = std::to_string(n.endpoint.port);
  int rc = getaddrinfo(n.endpoint.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    Disconnect(n,
               absl::StrCat("cannot resolve host \"", n.endpoint.host, "\": ", gai_strerror(rc)));
    return;
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    Disconnect(n, absl::StrCat("socket: ", ErrnoText(errno)));
    return;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  rc = connect(fd, res->ai_addr, res->ai_addrlen);
  int err = rc == 0 ? 0 : errno;
  freeaddrinfo(res);
  if (rc != 0 && err != EINPROGRESS) {
    close(fd);
    Disconnect(n, ErrnoText(err));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(n.mu);
    n.fd = fd;
    n.state = Node::State::kConnecting;
    n.write_error.clear();
  }
  ++n.generation;
  if (n.reader != nullptr) redisReaderFree(n.reader);
  n.reader = redisReaderCreate();
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.u64 = EventData(n.generation, n.index);
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void Engine::OnConnected(Node& n) {
  std::unique_lock<std::mutex> lock(n.mu);
  n.state = Node::State::kHandshake;
  n.epollout = false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = EventData(n.generation, n.index);
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, n.fd, &ev);
  std::string payload;
  auto add = [&](const char* step, const Script* loads) {
    auto slot = std::make_shared<Slot>();
    slot->kind = Slot::Kind::kHandshake;
    slot->step = step;
    slot->loads = loads;
    n.fifo.push_back(std::move(slot));
  };
  if (!n.endpoint.password.empty()) {
    if (n.endpoint.username.empty()) {
      AppendCommand(&payload, {"AUTH", n.endpoint.password});
    } else {
      AppendCommand(&payload, {"AUTH", n.endpoint.username, n.endpoint.password});
    }
    add("AUTH", nullptr);
  }
  if (n.endpoint.db != 0) {
    AppendCommand(&payload, {"SELECT", std::to_string(n.endpoint.db)});
    add("SELECT", nullptr);
  }
  // The server's run_id: two entries of the node list that reach one server
  // (two names, a proxy, a port forward) must not give it two votes.
  AppendCommand(&payload, {"INFO", "server"});
  add("INFO", nullptr);
  for (const Script* s : AllScripts()) {
    AppendCommand(&payload, {"SCRIPT", "LOAD", s->body});
    add("SCRIPT LOAD", s);
  }
  n.handshake_left = n.fifo.size();
  n.out = std::move(payload);
  FlushLocked(n, lock);
}

void Engine::OnWritable(Node& n) {
  std::unique_lock<std::mutex> lock(n.mu);
  if (!n.epollout || n.fd < 0) return;
  n.epollout = false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = EventData(n.generation, n.index);
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, n.fd, &ev);
  if (!n.writing) FlushLocked(n, lock);
}

void Engine::OnReadable(Node& n) {
  char buf[65536];
  std::string failure;
  for (int i = 0; i < 16; ++i) {
    ssize_t r = read(n.fd, buf, sizeof(buf));
    if (r > 0) {
      if (redisReaderFeed(n.reader, buf, static_cast<size_t>(r)) != REDIS_OK) {
        failure = absl::StrCat("protocol error: ", n.reader->errstr);
        break;
      }
      if (static_cast<size_t>(r) < sizeof(buf)) break;
    } else if (r == 0) {
      failure = "connection closed by the node";
      break;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else {
      failure = ErrnoText(errno);
      break;
    }
  }
  std::vector<Reply> replies;
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(n.reader, &raw) != REDIS_OK) {
      failure = absl::StrCat("protocol error: ", n.reader->errstr);
      break;
    }
    if (raw == nullptr) break;
    replies.push_back(Convert(static_cast<redisReply*>(raw)));
    freeReplyObject(raw);
  }

  std::vector<std::pair<NodeCallback, Reply>> ready;
  {
    std::unique_lock<std::mutex> lock(n.mu);
    if (!replies.empty()) n.last_reply_at = Clock::now();
    for (Reply& reply : replies) {
      if (n.fifo.empty()) {
        failure = absl::StrCat("unexpected reply from the node: ", reply.Describe());
        break;
      }
      std::shared_ptr<Slot> slot = std::move(n.fifo.front());
      n.fifo.pop_front();
      if (!ReplyFits(*slot, reply)) {
        failure =
            absl::StrCat("the node sent ", reply.Describe(), ", which cannot answer ", slot->op,
                         " (not a Redis server, or its replies are out of step "
                         "with the requests): reconnecting");
        // Back in the FIFO, so Disconnect fails its request with this message.
        n.fifo.push_front(std::move(slot));
        break;
      }
      if (n.expired > 0) {
        // Its deadline passed: the caller has counted it as a "no" already.
        // But the node is answering again: probe it now.
        --n.expired;
        if (slot->kind == Slot::Kind::kProbe) n.probe_in_flight = false;
        n.next_probe = Clock::now();
        continue;
      }
      switch (slot->kind) {
        case Slot::Kind::kHandshake: {
          std::string problem;
          const bool info = std::string(slot->step) == "INFO";
          if (info && reply.is_error() && !absl::StrContains(reply.str, "NOAUTH")) {
            // An ACL user without INFO (+@dangerous): the server's identity
            // cannot be checked on this node; everything else works.
          } else if (info && reply.type == Reply::Type::kString) {
            problem = CheckIdentityLocked(n, RunIdFromInfo(reply.str));
          } else if (reply.is_error()) {
            if (absl::StrContains(reply.str, "NOAUTH")) {
              problem = absl::StrCat(
                  "authentication required: the node has a password, give it in the endpoint "
                  "(redis://:password@host:port) (",
                  reply.str, ")");
            } else if (std::string(slot->step) == "AUTH") {
              problem = absl::StrCat("authentication failed: ", reply.str);
            } else {
              problem = absl::StrCat(slot->step, " failed: ", reply.str);
            }
          } else if (slot->loads != nullptr &&
                     !(reply.type == Reply::Type::kString && reply.str == slot->loads->sha)) {
            problem = absl::StrCat("SCRIPT LOAD of the ", slot->loads->name, " script returned ",
                                   reply.Describe());
          }
          if (!problem.empty()) {
            failure = problem;
            break;
          }
          if (n.handshake_left > 0) --n.handshake_left;
          if (n.handshake_left == 0 && n.state == Node::State::kHandshake) {
            n.state = Node::State::kReady;
            n.breaker_open = false;
            n.probe_in_flight = false;
            n.last_error.clear();
            n.backoff = config_.reconnect_backoff_min;
            // Requests made while connecting for the first time.
            auto waiting = std::move(n.waiting);
            n.waiting.clear();
            for (auto& w : waiting) {
              if (!w.first->done && !w.first->cleanup) continue;  // timed out, never sent
              n.fifo.push_back(std::move(w.first));
              n.out.append(w.second);
            }
            if (!n.out.empty() && !n.writing && !n.epollout) FlushLocked(n, lock);
            if (!n.first_connect_reported) {
              n.first_connect_reported = true;
              std::lock_guard<std::mutex> g(mu_);
              --first_connect_pending_;
              first_connect_cv_.notify_all();
            }
          }
          break;
        }
        case Slot::Kind::kProbe:
          n.probe_in_flight = false;
          n.breaker_open = false;
          n.last_error.clear();
          break;
        case Slot::Kind::kRequest:
          if (reply.is_error() && slot->script != nullptr &&
              absl::StartsWith(reply.str, "NOSCRIPT") && slot->done) {
            // The node's script cache was flushed (SCRIPT FLUSH): send the
            // EVAL form and load the scripts again for the next requests.
            Command again;
            again.payload = std::move(slot->payload);
            again.script = slot->script;
            auto retry = std::make_shared<Slot>();
            retry->done = std::move(slot->done);
            retry->deadline = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
            retry->cleanup = slot->cleanup;
            retry->expect = slot->expect;
            retry->op = slot->op;
            std::string eval = EvalFallback(again);
            for (const Script* s : AllScripts()) {
              auto load = std::make_shared<Slot>();
              load->kind = Slot::Kind::kReload;
              load->expect = kExpectString;
              load->op = "SCRIPT LOAD";
              load->deadline = retry->deadline;
              n.fifo.push_back(std::move(load));
              AppendCommand(&n.out, {"SCRIPT", "LOAD", s->body});
            }
            n.fifo.push_back(std::move(retry));
            n.out.append(eval);
            if (!n.writing && !n.epollout) FlushLocked(n, lock);
            break;
          }
          if (slot->done) ready.emplace_back(std::move(slot->done), std::move(reply));
          break;
        case Slot::Kind::kReload:
          break;
      }
      if (!failure.empty()) break;
    }
  }
  for (auto& [done, reply] : ready) done(std::move(reply));
  if (!failure.empty()) Disconnect(n, failure);
}

void Engine::Disconnect(Node& n, const std::string& why) {
  std::vector<NodeCallback> failed;
  bool report_first = false;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    if (n.fd >= 0) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, n.fd, nullptr);
      if (n.writing) {
        n.close_after_write = n.fd;
      } else {
        close(n.fd);
      }
      n.fd = -1;
    }
    n.state = Node::State::kDisconnected;
    n.out.clear();
    n.epollout = false;
    n.write_error.clear();
    for (auto& slot : n.fifo) {
      if (slot->done) failed.push_back(std::move(slot->done));
    }
    n.fifo.clear();
    n.expired = 0;
    for (auto& w : n.waiting) {
      if (w.first->done) failed.push_back(std::move(w.first->done));
    }
    n.waiting.clear();
    n.probe_in_flight = false;
    n.handshake_left = 0;
    {
      std::lock_guard<std::mutex> identity(identity_mu_);
      run_ids_[static_cast<size_t>(n.index)].clear();
    }
    OpenBreakerLocked(n, why);
    if (!n.first_connect_reported) {
      n.first_connect_reported = true;
      report_first = true;
    }
  }
  ++n.generation;
  double jitter = UniformReal(0.8, 1.2);
  n.next_connect = Clock::now() + absl::ToChronoNanoseconds(n.backoff * jitter);
  n.backoff = std::min(n.backoff * 2, config_.reconnect_backoff_max);
  if (report_first) {
    std::lock_guard<std::mutex> g(mu_);
    --first_connect_pending_;
    first_connect_cv_.notify_all();
  }
  absl::Status status = stopping() ? absl::CancelledError("the client is shutting down")
                                   : absl::UnavailableError(why);
  for (auto& done : failed) done(status);
}

void Engine::ExpireDeadlines(TimePoint now) {
  std::vector<NodeCallback> expired;
  for (auto& np : nodes_) {
    Node& n = *np;
    // Replies already in the socket are not late: read them before expiring
    // anything (after a pause of this process, say, they arrived while
    // nobody was polling).
    bool due;
    {
      std::lock_guard<std::mutex> lock(n.mu);
      due = n.state != Node::State::kDisconnected && n.expired < n.fifo.size() &&
            n.fifo[n.expired]->deadline <= now;
    }
    if (due) OnReadable(n);
    {
      std::lock_guard<std::mutex> lock(n.mu);
      bool missed = false;
      while (n.expired < n.fifo.size() && n.fifo[n.expired]->deadline <= now) {
        Slot& slot = *n.fifo[n.expired];
        ++n.expired;
        if (slot.done) expired.push_back(std::move(slot.done));
        // An expired probe stays outstanding until its late reply: a new one
        // could not be answered before it anyway (one ordered stream).
        missed = true;
      }
      for (auto& w : n.waiting) {
        if (w.first->done && w.first->deadline <= now) expired.push_back(std::move(w.first->done));
      }
      // The breaker means "this node is silent": a node that keeps answering,
      // only late (CPU starved, or slower than node_timeout), misses those
      // deadlines (each a "no" vote) but is not shut out.
      if (missed && now - n.last_reply_at >= absl::ToChronoNanoseconds(config_.node_timeout)) {
        OpenBreakerLocked(n, absl::StrCat("no reply within ", FormatMs(config_.node_timeout)));
      }
    }
  }
  if (expired.empty()) return;
  std::string why = absl::StrCat("no reply within ", FormatMs(config_.node_timeout));
  for (auto& done : expired) done(absl::UnavailableError(why));
}

void Engine::MaintainNodes(TimePoint now) {
  for (auto& np : nodes_) {
    Node& n = *np;
    std::string write_error;
    Node::State state;
    bool probe = false;
    bool stale = false;
    {
      std::lock_guard<std::mutex> lock(n.mu);
      write_error = n.write_error;
      state = n.state;
      // A probe counts against max_in_flight_per_node like any request; a
      // node with that many unanswered commands is not probed until it
      // answers some (each late reply triggers a probe).
      probe = state == Node::State::kReady && n.breaker_open && !n.probe_in_flight &&
              now >= n.next_probe && n.load() < config_.max_in_flight_per_node;
      stale = state == Node::State::kReady && n.breaker_open && !n.fifo.empty() &&
              now - std::max(n.last_reply_at, n.breaker_opened_at) >=
                  absl::ToChronoNanoseconds(kStaleConnection);
    }
    if (!write_error.empty()) {
      Disconnect(n, write_error);
      continue;
    }
    switch (state) {
      case Node::State::kDisconnected:
        if (now >= n.next_connect) StartConnect(n);
        break;
      case Node::State::kConnecting:
      case Node::State::kHandshake:
        if (now >= n.connect_deadline) {
          Disconnect(n,
                     absl::StrCat("could not connect within ", FormatMs(config_.connect_timeout)));
        }
        break;
      case Node::State::kReady:
        if (stale) {
          // Silent for long with the breaker open: start afresh rather than
          // wait behind a connection that may be stuck in TCP retransmission
          // backoff (a healed partition) or behind a long backlog.
          Disconnect(n,
                     absl::StrCat("no reply for ", FormatMs(kStaleConnection), "; reconnecting"));
        } else if (probe) {
          SendProbe(n);
        }
        break;
    }
    SubMaintain(n, now);
  }
}

void Engine::SendProbe(Node& n) {
  std::unique_lock<std::mutex> lock(n.mu);
  auto slot = std::make_shared<Slot>();
  slot->kind = Slot::Kind::kProbe;
  slot->op = "a PING probe";
  slot->deadline = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
  slot->echo = absl::StrCat("redlock-probe-", next_probe_id_.fetch_add(1));
  n.probe_in_flight = true;
  n.next_probe = Clock::now() + absl::ToChronoNanoseconds(config_.breaker_probe_interval);
  std::string ping = EncodeCommand({"PING", slot->echo});
  EnqueueLocked(n, lock, std::move(slot), ping);
}

void Engine::RunTimers(TimePoint now) {
  std::vector<absl::AnyInvocable<void()>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!timers_.empty() && timers_.begin()->first.first <= now) {
      auto it = timers_.begin();
      timer_index_.erase(it->first.second);
      due.push_back(std::move(it->second));
      timers_.erase(it);
    }
  }
  for (auto& fn : due) fn();
}

void Engine::RunPosted() {
  // Bounded: tasks posted by these tasks run on the next iteration.
  std::deque<absl::AnyInvocable<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

void Engine::CancelEverything() {
  for (auto& n : nodes_) {
    Disconnect(*n, "the client is shutting down");
    SubDisconnect(*n, "the client is shutting down");
  }
  // Timers and tasks may start more work; every Send now fails at once, so
  // this converges. Bounded anyway.
  for (int round = 0; round < 10000; ++round) {
    std::vector<absl::AnyInvocable<void()>> due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, fn] : timers_) due.push_back(std::move(fn));
      timers_.clear();
      timer_index_.clear();
    }
    for (auto& fn : due) fn();
    bool idle;
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle = posted_.empty() && timers_.empty();
    }
    if (idle && due.empty()) break;
    RunPosted();
  }
  std::lock_guard<std::mutex> g(mu_);
  first_connect_pending_ = 0;
  first_connect_cv_.notify_all();
}

void Engine::WaitForFirstConnections(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  first_connect_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                             [&] { return first_connect_pending_ <= 0; });
}

// ---------------------------------------------------------------------------
// Subscriber connections (release notifications).

void Engine::Subscribe(const std::vector<std::string>& channels) {
  Post([this, channels] {
    std::vector<std::string> fresh;
    for (const auto& c : channels) {
      if (channels_[c]++ == 0) fresh.push_back(c);
    }
    if (fresh.empty()) return;
    for (auto& np : nodes_) {
      Node& n = *np;
      // A connection still in its handshake gets it after its hello.
      if (n.sub.state == Node::State::kReady || n.sub.state == Node::State::kHandshake) {
        std::string cmd;
        AppendArrayHeader(&cmd, fresh.size() + 1);
        AppendBulk(&cmd, "SUBSCRIBE");
        for (const auto& c : fresh) AppendBulk(&cmd, c);
        SubWrite(n, std::move(cmd));
      }
      // Otherwise the (re)connection subscribes to every channel.
    }
  });
}

void Engine::Unsubscribe(const std::vector<std::string>& channels) {
  Post([this, channels] {
    std::vector<std::string> gone;
    for (const auto& c : channels) {
      auto it = channels_.find(c);
      if (it == channels_.end()) continue;
      if (--it->second <= 0) {
        channels_.erase(it);
        gone.push_back(c);
      }
    }
    if (gone.empty()) return;
    for (auto& np : nodes_) {
      Node& n = *np;
      if (n.sub.state != Node::State::kReady && n.sub.state != Node::State::kHandshake) continue;
      std::string cmd;
      AppendArrayHeader(&cmd, gone.size() + 1);
      AppendBulk(&cmd, "UNSUBSCRIBE");
      for (const auto& c : gone) AppendBulk(&cmd, c);
      SubWrite(n, std::move(cmd));
    }
  });
}

void Engine::SubMaintain(Node& n, TimePoint now) {
  if (channels_.empty() || stopping()) return;
  switch (n.sub.state) {
    case Node::State::kDisconnected:
      if (now >= n.sub.next_connect) SubConnect(n);
      break;
    case Node::State::kConnecting:
    case Node::State::kHandshake:
      if (now >= n.sub.connect_deadline) SubDisconnect(n, "subscriber connection timed out");
      break;
    case Node::State::kReady:
      break;
  }
}

void Engine::SubConnect(Node& n) {
  Node::Sub& sub = n.sub;
  sub.connect_deadline = Clock::now() + absl::ToChronoNanoseconds(config_.connect_timeout);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port = std::to_string(n.endpoint.port);
  if (getaddrinfo(n.endpoint.host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    SubDisconnect(n, "cannot resolve host");
    return;
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -1 : connect(fd, res->ai_addr, res->ai_addrlen);
  int err = rc == 0 ? 0 : errno;
  freeaddrinfo(res);
  if (fd < 0 || (rc != 0 && err != EINPROGRESS)) {
    if (fd >= 0) close(fd);
    SubDisconnect(n, ErrnoText(err));
    return;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sub.fd = fd;
  sub.state = Node::State::kConnecting;
  sub.out.clear();
  ++sub.generation;
  if (sub.reader != nullptr) redisReaderFree(sub.reader);
  sub.reader = redisReaderCreate();
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.u64 = EventData(sub.generation, n.index, kSubConn);
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  sub.epollout = true;
}

void Engine::SubWrite(Node& n, std::string bytes) {
  Node::Sub& sub = n.sub;
  sub.out.append(bytes);
  if (sub.fd < 0 || sub.epollout) return;
  while (!sub.out.empty()) {
    ssize_t w = ::send(sub.fd, sub.out.data(), sub.out.size(), MSG_NOSIGNAL);
    if (w > 0) {
      sub.out.erase(0, static_cast<size_t>(w));
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      sub.epollout = true;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT;
      ev.data.u64 = EventData(sub.generation, n.index, kSubConn);
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, sub.fd, &ev);
      return;
    } else {
      SubDisconnect(n, absl::StrCat("write failed: ", ErrnoText(errno)));
      return;
    }
  }
}

void Engine::SubOnEvent(Node& n, uint32_t events) {
  Node::Sub& sub = n.sub;
  const uint32_t generation = sub.generation;
  if (sub.state == Node::State::kConnecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(sub.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      SubDisconnect(n, ErrnoText(err));
      return;
    }
    sub.state = Node::State::kHandshake;
    std::string hello;
    sub.auth_left = 0;
    if (!n.endpoint.password.empty()) {
      if (n.endpoint.username.empty()) {
        AppendCommand(&hello, {"AUTH", n.endpoint.password});
      } else {
        AppendCommand(&hello, {"AUTH", n.endpoint.username, n.endpoint.password});
      }
      sub.auth_left = 1;
    }
    // PING proves the handshake is through; then every channel.
    AppendCommand(&hello, {"PING"});
    if (!channels_.empty()) {
      AppendArrayHeader(&hello, channels_.size() + 1);
      AppendBulk(&hello, "SUBSCRIBE");
      for (const auto& [c, count] : channels_) AppendBulk(&hello, c);
    }
    sub.epollout = false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = EventData(sub.generation, n.index, kSubConn);
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, sub.fd, &ev);
    SubWrite(n, std::move(hello));
    return;
  }
  if (events & EPOLLOUT) {
    sub.epollout = false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = EventData(sub.generation, n.index, kSubConn);
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, sub.fd, &ev);
    std::string rest = std::move(sub.out);
    sub.out.clear();
    SubWrite(n, std::move(rest));
    if (sub.generation != generation) return;
  }
  if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP))) return;
  char buf[16384];
  for (int i = 0; i < 16; ++i) {
    ssize_t r = read(sub.fd, buf, sizeof(buf));
    if (r > 0) {
      redisReaderFeed(sub.reader, buf, static_cast<size_t>(r));
      if (static_cast<size_t>(r) < sizeof(buf)) break;
    } else if (r == 0) {
      SubDisconnect(n, "subscriber connection closed by the node");
      return;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else {
      SubDisconnect(n, ErrnoText(errno));
      return;
    }
  }
  for (int guard = 0; guard < 100000; ++guard) {
    void* raw = nullptr;
    if (redisReaderGetReply(sub.reader, &raw) != REDIS_OK) {
      SubDisconnect(n, "protocol error on the subscriber connection");
      return;
    }
    if (raw == nullptr) break;
    Reply reply = Convert(static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    if (sub.state == Node::State::kHandshake) {
      if (reply.is_error()) {
        SubDisconnect(n, absl::StrCat("subscriber connection: ", reply.str));
        return;
      }
      if (sub.auth_left > 0) {
        --sub.auth_left;
        continue;
      }
      if (reply.IsStatus("PONG")) {
        sub.state = Node::State::kReady;
        sub.backoff = config_.reconnect_backoff_min;
      }
      continue;
    }
    if (reply.type == Reply::Type::kArray && reply.elements.size() == 3 &&
        reply.elements[0].str == "message" && message_handler_) {
      message_handler_(n.index, reply.elements[1].str, reply.elements[2].str);
    }
    // subscribe/unsubscribe confirmations need no action.
  }
}

void Engine::SubDisconnect(Node& n, const std::string& why) {
  Node::Sub& sub = n.sub;
  if (sub.fd >= 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, sub.fd, nullptr);
    close(sub.fd);
    sub.fd = -1;
  }
  sub.state = Node::State::kDisconnected;
  sub.out.clear();
  sub.epollout = false;
  ++sub.generation;
  sub.next_connect = Clock::now() + absl::ToChronoNanoseconds(sub.backoff);
  sub.backoff = std::min(sub.backoff * 2, config_.reconnect_backoff_max);
  (void)why;  // Notifications are best effort: waiters fall back to polling.
}

std::string Engine::CheckIdentityLocked(Node& n, const std::string& run_id) {
  if (run_id.empty()) return "";
  std::lock_guard<std::mutex> identity(identity_mu_);
  for (size_t j = 0; j < run_ids_.size(); ++j) {
    if (static_cast<int>(j) == n.index || run_ids_[j] != run_id) continue;
    duplicates_.emplace_back(static_cast<int>(j), n.index);
    return absl::StrCat("the same server as node ", nodes_[j]->name, " (run_id ", run_id,
                        "): one server listed twice would vote twice; refused");
  }
  run_ids_[static_cast<size_t>(n.index)] = run_id;
  return "";
}

std::vector<std::pair<int, int>> Engine::DuplicateNodes() const {
  std::lock_guard<std::mutex> identity(identity_mu_);
  return duplicates_;
}

std::vector<NodeHealth> Engine::Health() const {
  std::vector<NodeHealth> out;
  for (const auto& np : nodes_) {
    std::lock_guard<std::mutex> lock(np->mu);
    NodeHealth h;
    h.node = np->name;
    h.connected = np->state == Node::State::kReady;
    h.breaker_open = np->breaker_open;
    h.in_flight = np->fifo.size() + np->waiting.size();
    h.last_error = np->last_error;
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace redlock::internal
