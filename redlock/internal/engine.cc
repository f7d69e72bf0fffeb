// The engine's polling: the I/O thread, the polling roles of synchronous
// callers, timers, posted tasks and user callbacks. The nodes' connections
// are in engine_node.cc.

#include "redlock/internal/engine.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/engine_node.h"
#include "redlock/internal/scheme.h"
#include "redlock/internal/url.h"

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

// How long the I/O thread stays off polling after a lone synchronous caller
// polled: back-to-back calls of that caller then never need to take the role
// from it.
constexpr int64_t kSyncQuietNs = 1000000;

constexpr uint64_t kEventFdData = 0;

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Start(Config config) {
  // What the poll events can tell apart (EngineEventData).
  if (config.nodes.size() > kMaxEngineNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.nodes.size(), " nodes: at most ", kMaxEngineNodes, " are supported"));
  }
  // What each node's scheme checks (a Sentinel count the poll events can
  // tell apart, ...): ValidateOptions did it for a client.
  for (const Endpoint& e : config.nodes) {
    const std::string wrong = SchemeOf(e).Check(e);
    if (!wrong.empty()) return absl::InvalidArgumentError(absl::StrCat(e.ToString(), ": ", wrong));
  }
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
    for (int i = 0; i < engine->size(); ++i) engine->StartConnect(engine->NodeAt(i));
  }
  Engine* e = engine.get();
  engine->thread_ = std::thread([e] { e->Loop(); });
  engine->thread_id_.store(engine->thread_.get_id());
  return engine;
}

Engine::~Engine() {
  Shutdown();
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    std::lock_guard<std::mutex> lock(n.mu);
    for (Slot* s : n.free_slots) delete s;
    n.free_slots.clear();
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

const std::string& Engine::NodeName(int node) const { return NodeAt(node).name; }

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
  // Inline on the I/O thread, unless a user callback runs there already: a
  // callback that starts a call which completes at once (bad input, a
  // client shutting down) would nest the next callback in itself, without
  // bound if it starts a new call on every error. Queued, it runs after.
  if (std::this_thread::get_id() == thread_id_ && !in_user_callback_) {
    RunUserCallback(fn);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    user_tasks_.push_back(std::move(fn));
  }
  // The I/O thread is idle (a caller polls) or polling itself.
  idle_cv_.notify_one();
  if (io_polling_.load()) Wake();
}

void Engine::RunUserCallback(absl::AnyInvocable<void()>& fn) {
  in_user_callback_ = true;
  fn();
  in_user_callback_ = false;
}

void Engine::RunUserTasks() {
  for (int round = 0; round < 100; ++round) {
    std::deque<absl::AnyInvocable<void()>> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(user_tasks_);
    }
    if (batch.empty()) return;
    for (auto& fn : batch) RunUserCallback(fn);
  }
}

// ---- Polling roles ------------------------------------------------------------

bool Engine::IoThreadShouldPoll() const {
  // Callers sleep until their calls complete: someone must poll for them.
  if (sleepers_.load() > 0) return true;
  // A lone synchronous caller polls itself (no hand-off on its fast path),
  // also between its back-to-back calls.
  if (sync_active_.load() > 0) return false;
  return NowNs() - last_sync_end_ns_.load() >= kSyncQuietNs;
}

void Engine::AwaitSync(const std::shared_ptr<SyncWaiter>& waiter) {
  sync_active_.fetch_add(1);
  while (!waiter->ready() && !stopping()) {
    std::unique_lock<std::mutex> poll(poll_mu_, std::try_to_lock);
    if (!poll.owns_lock() && sync_active_.load() == 1 && io_polling_.load()) {
      // Alone, but the I/O thread has the role (it served others a moment
      // ago): ask it to let go (it nudges us when it does), then take over;
      // it may also complete the call meanwhile. Never block on poll_mu_:
      // the I/O thread keeps the role while other callers sleep.
      {
        std::lock_guard<std::mutex> lock(mu_);
        role_waiter_ = waiter;
      }
      Wake();
      waiter->Wait(absl::Milliseconds(1));
      std::lock_guard<std::mutex> lock(mu_);
      if (role_waiter_ == waiter) role_waiter_.reset();
      continue;
    }
    if (poll.owns_lock()) {
      {
        Dispatching dispatching(this);
        while (!waiter->ready() && !stopping()) RunOnce();
      }
      poll.unlock();
      // Callers that slept meanwhile: the I/O thread polls for them now.
      if (sleepers_.load() > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        idle_cv_.notify_one();
      }
      break;
    }
    // Someone polls: it completes this call. Sleep until then. While
    // sleepers_ > 0 the I/O thread polls, and it looks for sleepers at
    // least every millisecond when it is idle or a caller has the role, so
    // the timeout is only a safety net: every timed-out sleep is a context
    // switch that completes nothing (at 2 ms, with 64 callers at N=5 and
    // calls of 4-5 ms, they were a third of the blocking path's switches).
    constexpr absl::Duration kSleeperRecheck = absl::Milliseconds(50);
    sleepers_.fetch_add(1);
    if (!io_polling_.load()) {
      // The I/O thread may be idle (a caller polls, or nobody does): it
      // polls for sleepers. Under mu_, so the wake-up cannot be lost.
      std::lock_guard<std::mutex> lock(mu_);
      idle_cv_.notify_one();
    }
    waiter->Wait(kSleeperRecheck);
    sleepers_.fetch_sub(1);
  }
  // Shutting down: the I/O thread completes everything with kCancelled.
  waiter->WaitReady();
  last_sync_end_ns_.store(NowNs());
  sync_active_.fetch_sub(1);
}

void Engine::Loop() {
  thread_id_.store(std::this_thread::get_id());
  while (!stopping()) {
    RunUserTasks();
    if (!IoThreadShouldPoll()) {
      std::unique_lock<std::mutex> lock(mu_);
      idle_cv_.wait_for(lock, std::chrono::milliseconds(1),
                        [&] { return !user_tasks_.empty() || stopping() || sleepers_.load() > 0; });
      continue;
    }
    std::unique_lock<std::mutex> poll(poll_mu_, std::try_to_lock);
    if (!poll.owns_lock()) {
      // A caller polls; it wakes us when it leaves callers behind.
      std::unique_lock<std::mutex> lock(mu_);
      idle_cv_.wait_for(lock, std::chrono::milliseconds(1),
                        [&] { return !user_tasks_.empty() || stopping(); });
      continue;
    }
    io_polling_.store(true);
    {
      Dispatching dispatching(this);
      // Keeps the role across turns while it has work; a lone synchronous
      // caller that wants it gets it at the next turn.
      do {
        RunOnce();
        RunUserTasks();
      } while (!stopping() && IoThreadShouldPoll());
    }
    io_polling_.store(false);
    poll.unlock();
    std::lock_guard<std::mutex> lock(mu_);
    if (role_waiter_ != nullptr) {
      role_waiter_->Nudge();
      role_waiter_.reset();
    }
  }
  {
    std::lock_guard<std::mutex> poll(poll_mu_);
    Dispatching dispatching(this);
    DrainFollowers();
    CancelEverything();
  }
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
  const bool io_thread = std::this_thread::get_id() == thread_id_;
  // Timers due before the stored wake time must wake us: re-check after
  // publishing it so a RunAfter racing with this point is not missed.
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!posted_.empty() || (!timers_.empty() && timers_.begin()->first.first < wake)) {
      timeout_ms = 0;
    }
    if (io_thread && !user_tasks_.empty()) timeout_ms = 0;
  }
  // The I/O thread leaves at once when a lone caller wants the role (not
  // while it drains the last commands at shutdown: nobody else polls then).
  if (io_thread && !stopping() && !IoThreadShouldPoll()) timeout_ms = 0;
  int count = epoll_wait(epoll_fd_, events, kMaxEvents, static_cast<int>(timeout_ms));
  wake_at_ns_.store(0, std::memory_order_release);
  // The turn: output produced by callbacks is written once per node at its
  // end, and the callers it completes are woken then.
  SyncWaiter::DeferWakes defer_wakes;
  in_turn_.store(true, std::memory_order_release);
  for (int i = 0; i < count; ++i) {
    uint64_t data = events[i].data.u64;
    if (data == kEventFdData) {
      uint64_t value;
      while (read(event_fd_, &value, sizeof(value)) > 0) {
      }
      continue;
    }
    int index = static_cast<int>((data & 0xfffffu) >> 2);
    const size_t sub = static_cast<size_t>((data >> 20) & 0xfffu);
    uint32_t generation = static_cast<uint32_t>(data >> 32);
    if (index < 0 || index >= node_count()) continue;
    Node& n = NodeAt(index);
    if ((data & 3) == kSubscriberEvents) {
      if (n.sub.generation() == generation) OnSubIo(n, events[i].events);
    } else if ((data & 3) == kLocatorEvents) {
      n.locator->OnIo(static_cast<uint32_t>(sub), generation, events[i].events);
    } else if (n.cmd.generation() == generation) {  // else closed earlier in this batch
      OnCommandIo(n, events[i].events);
    }
  }
  now = Clock::now();
  ExpireDeadlines(now);
  MaintainNodes(now);
  RunTimers(now);
  RunPosted();
  in_turn_.store(false, std::memory_order_release);
  FlushTurn();
  EmitNodeEvents();
}

Engine::TimePoint Engine::NextWake(TimePoint now) {
  TimePoint wake = now + absl::ToChronoNanoseconds(config_.node_timeout);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!timers_.empty()) wake = std::min(wake, timers_.begin()->first.first);
    if (!posted_.empty()) wake = now;
  }
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    {
      std::lock_guard<std::mutex> lock(n.mu);
      if (n.expired + n.unwritten < n.fifo.size()) {
        wake = std::min(wake, n.fifo[n.expired]->deadline);
      }
      for (auto& w : n.waiting) {
        if (w.first->done) {
          wake = std::min(wake, w.first->deadline);
          break;
        }
      }
      if (!n.write_error.empty()) wake = now;
      if (n.state == Node::State::kReady && n.breaker_open && !n.probe_in_flight &&
          n.load() < config_.max_in_flight_per_node) {
        wake = std::min(wake, n.next_probe);
      }
    }
    if (n.cmd.state() == Connection::State::kDisconnected) {
      // Only a master the locator knows is reconnected (a Sentinel round or
      // a cluster's map names it first, and wakes the poller with its own
      // deadlines); a reconnection time already past must not keep the
      // poller from sleeping.
      if (n.locator->Known()) wake = std::min(wake, n.cmd.next_connect());
    } else if (!n.cmd.ready()) {
      wake = std::min(wake, n.cmd.connect_deadline());
    }
    if (!channels_.empty() && !n.shard()) {
      if (n.sub.state() == Connection::State::kDisconnected) {
        wake = std::min(wake, n.sub.next_connect());
      } else if (!n.sub.ready()) {
        wake = std::min(wake, n.sub.connect_deadline());
      } else {
        wake = std::min(wake,
                        n.sub_ping_out
                            ? n.sub_ping_sent + absl::ToChronoNanoseconds(config_.connect_timeout)
                            : n.sub_last_heard + absl::ToChronoNanoseconds(kKeepaliveIdle));
      }
    }
    wake = std::min(wake, n.locator->Wake(now));
  }
  return wake;
}

// ---- Timers and tasks ---------------------------------------------------------

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
  // Bounded: tasks posted by these tasks run on the next turn.
  std::deque<absl::AnyInvocable<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

void Engine::DrainFollowers() {
  // The requests in flight are answered now, with kCancelled, while their
  // connections stay up: a failed attempt's release goes out behind its SET
  // (Command::after), as it would have without the shutdown.
  std::vector<NodeCallback> cancelled;
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    std::lock_guard<std::mutex> lock(n.mu);
    for (size_t i = n.expired; i < n.fifo.size(); ++i) {
      if (n.fifo[i]->done && !n.fifo[i]->drain) cancelled.push_back(std::move(n.fifo[i]->done));
    }
    n.expired = n.fifo.size();  // their replies are discarded (but Command::drain's)
    for (auto& w : n.waiting) {
      if (w.first->done) cancelled.push_back(std::move(w.first->done));
    }
  }
  {
    SyncWaiter::DeferWakes defer_wakes;
    for (auto& done : cancelled) done(absl::CancelledError("the client is shutting down"));
  }
  // Bounded by node_timeout (the followers' own deadline) and in turns.
  const TimePoint until = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
  for (int turn = 0; turn < 100000 && Clock::now() < until; ++turn) {
    RunUserTasks();
    bool work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      work = !posted_.empty() || !user_tasks_.empty();
    }
    if (!work && !AwaitingFollowers()) break;
    RunOnce();
  }
}

bool Engine::AwaitingFollowers() {
  for (int i = 0; i < node_count(); ++i) {
    Node* np = &NodeAt(i);
    std::lock_guard<std::mutex> lock(np->mu);
    if (np->state == Node::State::kDisconnected) continue;
    if (np->fifo.size() > np->expired) return true;
    for (const Slot* s : np->fifo) {
      if (s->drain && s->done) return true;
    }
    for (auto& w : np->waiting) {
      if (w.first->done) return true;
    }
  }
  return false;
}

void Engine::CancelEverything() {
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    Disconnect(n, "the client is shutting down");
    SubClose(n, "the client is shutting down");
    n.locator->Close();
  }
  // Timers, tasks and user callbacks run round after round until none is
  // left: they may start more work, and a user callback may start a new
  // call, which must call back too (client.h). Every Send now fails and
  // every new operation completes at once, so this ends, unless callbacks
  // start a new call on every completion: such a chain is followed for
  // kShutdownRounds rounds, then dropped (said on stderr).
  constexpr int kShutdownRounds = 10000;
  for (int round = 0;; ++round) {
    std::vector<absl::AnyInvocable<void()>> due;
    std::deque<absl::AnyInvocable<void()>> posted, user;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, fn] : timers_) due.push_back(std::move(fn));
      timers_.clear();
      timer_index_.clear();
      posted.swap(posted_);
      user.swap(user_tasks_);
    }
    if (due.empty() && posted.empty() && user.empty()) break;
    if (round == kShutdownRounds) {
      std::fprintf(stderr,
                   "redlock: callbacks kept starting new calls while the client was being "
                   "destroyed; after %d rounds, %zu callbacks were dropped unrun\n",
                   kShutdownRounds, due.size() + posted.size() + user.size());
      break;
    }
    for (auto& fn : due) fn();
    for (auto& fn : posted) fn();
    for (auto& fn : user) RunUserCallback(fn);
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

}  // namespace redlock::internal
