#include "redlock/testing/internal/fleet_transport.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace redlock::testing {

using internal::Command;
using internal::ConnectionId;
using internal::NodeCallback;
using internal::Reply;

FleetTransport::FleetTransport(std::shared_ptr<FleetWorld> world, absl::Duration node_timeout)
    : world_(std::move(world)), node_timeout_(node_timeout) {
  links_.resize(static_cast<size_t>(world_->size()));
  world_->Register(this);
  thread_ = std::thread([this] { Loop(); });
}

FleetTransport::~FleetTransport() {
  Shutdown();
  world_->Unregister(this);
}

// ---- Sending --------------------------------------------------------------------

ConnectionId FleetTransport::Send(int node, const Command& command, NodeCallback done) {
  std::vector<sim::Argv> commands;
  const bool parsed = SplitCommands(command.payload, &commands) &&
                      commands.size() == std::max<size_t>(command.replies, 1);
  std::lock_guard<std::mutex> world_lock(world_->mu());
  std::lock_guard<std::mutex> lock(mu_);
  if (node < 0 || node >= size()) {
    FailLocked(std::move(done),
               absl::InvalidArgumentError(absl::StrCat("no node ", node, " in the fake fleet")));
    return 0;
  }
  if (!parsed) {
    FailLocked(std::move(done), absl::InternalError(absl::StrCat(
                                    "the fake fleet cannot read the command ", command.op)));
    return 0;
  }
  const FleetWorld::Route route = world_->RouteLocked(node);
  Link& link = links_[static_cast<size_t>(node)];
  if (link.conn != 0 && link.generation != route.generation) link.conn = 0;  // closed
  const bool follows = command.after != 0 && command.after == link.conn;
  if (command.pinned && !follows) {
    FailLocked(std::move(done),
               absl::UnavailableError(absl::StrCat(
                   "the connection ", command.op,
                   " must follow is gone (a WATCH holds only on its own connection)")));
    return 0;
  }
  if (phase_ == Phase::kClosed || (stopping() && !follows)) {
    FailLocked(std::move(done), absl::CancelledError("the client is shutting down"));
    return 0;
  }
  if (route.stopped) {
    link.last_error = "connection refused (the node is stopped)";
    FailLocked(std::move(done), absl::UnavailableError(link.last_error));
    return 0;
  }
  if (link.conn == 0) {
    link.conn = next_conn_++;
    link.generation = route.generation;
  }
  auto r = std::make_shared<Request>();
  r->id = next_request_++;
  r->node = node;
  r->generation = link.generation;
  r->commands = std::move(commands);
  r->array = command.replies > 1;
  r->drain = command.drain;
  r->done = std::move(done);
  const TimePoint now = std::chrono::steady_clock::now();
  r->deadline = now + absl::ToChronoNanoseconds(node_timeout_);
  // A slowed node gets each request `latency` late, and in the order sent.
  const TimePoint arrival =
      std::max(now + absl::ToChronoNanoseconds(route.latency), link.last_arrival);
  link.last_arrival = arrival;
  link.pending.emplace(r->id, r);
  ScheduleLocked(arrival, Event{[this, r] { Arrive(r); }, 0});
  ScheduleLocked(r->deadline,
                 Event{[this, r] {
                         Answer(r, absl::UnavailableError(absl::StrCat(
                                       "no reply within ", absl::FormatDuration(node_timeout_))));
                       },
                       0});
  return link.conn;
}

void FleetTransport::Arrive(const std::shared_ptr<Request>& r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ == Phase::kClosed || r->closed) return;
  }
  // The session and the handshake are the I/O thread's alone.
  Link& link = links_[static_cast<size_t>(r->node)];
  if (link.session_generation != r->generation) {
    link.session = sim::Session();
    link.session_generation = r->generation;
    link.handshake_done = false;
  }
  std::vector<Reply> replies;
  switch (world_->Execute(r->node, r->generation, !link.handshake_done, link.session, r->commands,
                          &replies)) {
    case FleetWorld::Outcome::kGone:
      Answer(r, absl::UnavailableError("connection lost"));
      return;
    case FleetWorld::Outcome::kLost:
      return;  // its deadline answers it
    case FleetWorld::Outcome::kRan:
      link.handshake_done = true;
      // Answered unless its deadline passed first (a slow node): then the
      // node executed it, but the reply is dropped, as the engine drops a
      // late one.
      Answer(r, r->array ? Reply::Array(std::move(replies)) : std::move(replies[0]));
      return;
  }
}

void FleetTransport::Answer(const std::shared_ptr<Request>& r,
                            absl::StatusOr<internal::Reply> reply) {
  NodeCallback done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!r->done) return;
    done = std::move(r->done);
    Link& link = links_[static_cast<size_t>(r->node)];
    link.pending.erase(r->id);
    if (!reply.ok()) link.last_error = std::string(reply.status().message());
  }
  done(std::move(reply));
}

bool FleetTransport::Accepts(int node) const {
  if (node < 0 || node >= size()) return false;
  std::lock_guard<std::mutex> lock(world_->mu());
  return !world_->RouteLocked(node).stopped;
}

std::vector<NodeHealth> FleetTransport::Health() const {
  std::lock_guard<std::mutex> world_lock(world_->mu());
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeHealth> health(static_cast<size_t>(size()));
  for (int i = 0; i < size(); ++i) {
    NodeHealth& h = health[static_cast<size_t>(i)];
    const FleetWorld::Route route = world_->RouteLocked(i);
    const Link& link = links_[static_cast<size_t>(i)];
    h.node = NodeName(i);
    h.scheme = "redis";
    h.address = NodeName(i);
    h.connected = !route.stopped && !route.partitioned;
    h.in_flight = link.pending.size();
    h.last_error = link.last_error;
  }
  return health;
}

// ---- From the world ---------------------------------------------------------------

void FleetTransport::ConnectionsClosed(int node, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  Link& link = links_[static_cast<size_t>(node)];
  link.conn = 0;
  link.last_error = why;
  for (auto& [id, r] : link.pending) {
    r->closed = true;
    if (r->done) FailLocked(std::move(r->done), absl::UnavailableError(why));
  }
  link.pending.clear();
}

void FleetTransport::Published(int node, const std::string& channel, const std::string& payload) {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ == Phase::kClosed || channels_.count(channel) == 0) return;
  PostLocked([this, node, channel, payload] {
    if (handler_) handler_(node, channel, payload);
  });
}

// ---- Announcements --------------------------------------------------------------

void FleetTransport::SetMessageHandler(MessageHandler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  handler_ = std::move(handler);
}

void FleetTransport::Subscribe(const std::vector<std::string>& channels) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& c : channels) ++channels_[c];
}

void FleetTransport::Unsubscribe(const std::vector<std::string>& channels) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& c : channels) {
    auto it = channels_.find(c);
    if (it != channels_.end() && --it->second <= 0) channels_.erase(it);
  }
}

// ---- The thread, timers and user callbacks -----------------------------------------

void FleetTransport::PostLocked(absl::AnyInvocable<void()> fn) {
  posted_.push_back(std::move(fn));
  cv_.notify_one();
}

void FleetTransport::FailLocked(NodeCallback done, absl::Status status) {
  PostLocked([done = std::move(done), status = std::move(status)]() mutable { done(status); });
}

FleetTransport::Key FleetTransport::ScheduleLocked(TimePoint when, Event event) {
  Key key{when, next_seq_++};
  queue_.emplace(key, std::move(event));
  cv_.notify_one();
  return key;
}

size_t FleetTransport::PendingLocked() const {
  size_t n = 0;
  for (const Link& link : links_) n += link.pending.size();
  return n;
}

FleetTransport::TimerId FleetTransport::RunAfter(absl::Duration delay,
                                                 absl::AnyInvocable<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  const TimerId id = next_timer_++;
  const TimePoint when = std::chrono::steady_clock::now() +
                         absl::ToChronoNanoseconds(std::max(delay, absl::ZeroDuration()));
  timers_.emplace(id, ScheduleLocked(when, Event{std::move(fn), id}));
  return id;
}

bool FleetTransport::Cancel(TimerId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = timers_.find(id);
  if (it == timers_.end()) return false;
  queue_.erase(it->second);
  timers_.erase(it);
  return true;
}

bool FleetTransport::InTransportThread() const {
  return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire);
}

void FleetTransport::RunUser(absl::AnyInvocable<void()>& fn) {
  in_user_ = true;
  fn();
  in_user_ = false;
}

void FleetTransport::DeliverToUser(absl::AnyInvocable<void()> fn) {
  // Inline on the I/O thread, unless a user callback runs there already (a
  // callback never nests in another: client.h).
  if (InTransportThread() && !in_user_) {
    RunUser(fn);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  PostLocked([this, fn = std::move(fn)]() mutable { RunUser(fn); });
}

void FleetTransport::Loop() {
  thread_id_.store(std::this_thread::get_id(), std::memory_order_release);
  for (;;) {
    absl::AnyInvocable<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        const TimePoint now = std::chrono::steady_clock::now();
        if (phase_ == Phase::kRequested) {
          phase_ = Phase::kDraining;
          drain_until_ = now + absl::ToChronoNanoseconds(node_timeout_);
          task = [this] { BeginDrain(); };
          break;
        }
        if (phase_ == Phase::kDraining &&
            (now >= drain_until_ || (posted_.empty() && PendingLocked() == 0))) {
          lock.unlock();
          CloseAll();
          // A finished thread's id may be given to a new thread.
          thread_id_.store(std::thread::id(), std::memory_order_release);
          return;
        }
        if (!posted_.empty()) {
          task = std::move(posted_.front());
          posted_.pop_front();
          break;
        }
        if (!queue_.empty() && queue_.begin()->first.first <= now) {
          auto node = queue_.extract(queue_.begin());
          if (node.mapped().timer != 0) timers_.erase(node.mapped().timer);
          task = std::move(node.mapped().fn);
          break;
        }
        TimePoint wake = queue_.empty() ? TimePoint::max() : queue_.begin()->first.first;
        if (phase_ == Phase::kDraining) wake = std::min(wake, drain_until_);
        if (wake == TimePoint::max()) {
          cv_.wait(lock);
        } else {
          cv_.wait_until(lock, wake);
        }
      }
    }
    task();
  }
}

// ---- Shutdown --------------------------------------------------------------------

void FleetTransport::Shutdown() {
  if (InTransportThread()) {
    std::fputs("redlock: a Client was destroyed from one of its own callbacks\n", stderr);
    std::abort();
  }
  std::lock_guard<std::mutex> guard(shutdown_mu_);
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true, std::memory_order_release);
    if (phase_ == Phase::kRunning) phase_ = Phase::kRequested;
    cv_.notify_one();
  }
  thread_.join();
}

void FleetTransport::BeginDrain() {
  // What is in flight is answered now, with kCancelled; the commands those
  // callbacks send behind one already sent (a failed attempt's release
  // behind its SET) still go, and drained ones are awaited.
  std::vector<NodeCallback> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Link& link : links_) {
      for (auto it = link.pending.begin(); it != link.pending.end();) {
        if (it->second->drain) {
          ++it;
          continue;
        }
        cancelled.push_back(std::move(it->second->done));
        it = link.pending.erase(it);
      }
    }
  }
  for (auto& done : cancelled) done(absl::CancelledError("the client is shutting down"));
}

void FleetTransport::CloseAll() {
  std::vector<NodeCallback> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = Phase::kClosed;
    for (Link& link : links_) {
      for (auto& [id, r] : link.pending) cancelled.push_back(std::move(r->done));
      link.pending.clear();
    }
  }
  for (auto& done : cancelled) done(absl::CancelledError("the client is shutting down"));
  // Timers, tasks and user callbacks run round after round until none is
  // left (they may start more, which fail at once now), as the engine does.
  constexpr int kShutdownRounds = 10000;
  for (int round = 0;; ++round) {
    std::vector<absl::AnyInvocable<void()>> due;
    std::deque<absl::AnyInvocable<void()>> posted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, event] : queue_) due.push_back(std::move(event.fn));
      queue_.clear();
      timers_.clear();
      posted.swap(posted_);
    }
    if (due.empty() && posted.empty()) break;
    if (round == kShutdownRounds) {
      std::fprintf(stderr,
                   "redlock: callbacks kept starting new calls while the client was being "
                   "destroyed; after %d rounds, %zu callbacks were dropped unrun\n",
                   kShutdownRounds, due.size() + posted.size());
      break;
    }
    for (auto& fn : due) fn();
    for (auto& fn : posted) fn();
  }
}

}  // namespace redlock::testing
