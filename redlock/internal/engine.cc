// The engine's turn (docs/design.md 3.2, 6): wait for events or the next
// deadline, read and dispatch replies, expire deadlines, maintain the
// connections, run timers and posted tasks, then write each node's output
// once; and the I/O thread's life, from start to shutdown. Who polls is
// poll_roles.cc's; a node's requests, node_queue.cc's; the command
// connection's life, engine_connection.cc's.

#include "redlock/internal/engine.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/engine_node.h"
#include "redlock/internal/scheme.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Start(Config config) {
  // What the poll events can tell apart (Poller::kNodeBits).
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
  absl::Status opened = engine->poller_.Open();
  if (!opened.ok()) return opened;
  engine->first_.pending = engine->size();
  {
    // Before any request can be made: every node is connecting (requests
    // wait for it) or has failed (requests fail at once).
    std::unique_lock<std::mutex> role = engine->roles_.TakeForGood();
    for (int i = 0; i < engine->size(); ++i) engine->StartConnect(engine->NodeAt(i));
  }
  Engine* e = engine.get();
  engine->io_.thread = std::thread([e] { e->Loop(); });
  engine->io_.id.store(engine->io_.thread.get_id());
  return engine;
}

Engine::~Engine() { Shutdown(); }

void Engine::Shutdown() {
  if (InTransportThread()) {
    std::fputs("redlock: a Client was destroyed from one of its own callbacks\n", stderr);
    std::abort();
  }
  std::lock_guard<std::mutex> guard(io_.shutdown_mu);
  if (io_.stopped.load()) return;
  io_.stopping.store(true, std::memory_order_release);
  poller_.Wake();
  roles_.WakeIoThread();
  if (io_.thread.joinable()) io_.thread.join();
  io_.stopped.store(true);
}

const std::string& Engine::NodeName(int node) const { return NodeAt(node).name; }

bool Engine::InTransportThread() const {
  return roles_.PollingHere() || std::this_thread::get_id() == io_.id;
}

void Engine::Wake() {
  poller_.Wake();
  KickIfOutside();
}

void Engine::KickIfOutside() {
  if (!roles_.PollingHere() && !SyncCallScope::Active()) roles_.Kick();
}

void Engine::AwaitSync(const std::shared_ptr<SyncWaiter>& waiter) { roles_.AwaitSync(waiter); }

void Engine::DeliverToUser(absl::AnyInvocable<void()> fn) {
  // Inline on the I/O thread, unless a user callback runs there already: a
  // callback that starts a call which completes at once (bad input, a
  // client shutting down) would nest the next callback in itself, without
  // bound if it starts a new call on every error. Queued, it runs after.
  if (std::this_thread::get_id() == io_.id && !tasks_.in_user_callback()) {
    tasks_.RunUserCallback(fn);
    return;
  }
  tasks_.PushUser(std::move(fn));
  // The I/O thread is idle (a caller polls) or polling itself.
  roles_.WakeIoThread();
  if (roles_.io_polling()) poller_.Wake();
}

void Engine::Loop() {
  io_.id.store(std::this_thread::get_id());
  roles_.RunIoThread();
  std::unique_lock<std::mutex> role = roles_.TakeForGood();
  PollRoles::Polling polling(&roles_);
  DrainFollowers();
  CancelEverything();
}

// ---- The turn -------------------------------------------------------------------

void Engine::RunOnce(TimePoint until) {
  constexpr int kMaxEvents = 64;
  Poller::Event events[kMaxEvents];
  TimePoint now = Clock::now();
  const uint64_t outside_sends = outside_sends_.load();
  TimePoint wake = std::min(NextWake(now), until);
  poller_.Sleeping(wake);
  // Nothing pending: sleep until something happens (-1: no timeout).
  int64_t timeout_ms = -1;
  if (wake != TimePoint::max()) {
    timeout_ms = 0;
    if (wake > now) {
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wake - now).count();
      timeout_ms = std::min<int64_t>((ns + 999999) / 1000000, std::numeric_limits<int>::max());
    }
  }
  // A request sent meanwhile by a thread that does not poll: NextWake may
  // not have seen it, and the sender may not have seen the sleep published
  // above. Its deadline is node_timeout from now at least.
  if (outside_sends_.load() != outside_sends) {
    const int64_t cap = absl::ToInt64Milliseconds(config_.node_timeout);
    if (timeout_ms < 0 || timeout_ms > cap) timeout_ms = cap;
  }
  const bool io_thread = std::this_thread::get_id() == io_.id;
  // Timers due before the stored wake time must wake us: re-check after
  // publishing it so a RunAfter racing with this point is not missed.
  if (tasks_.DueBefore(wake, io_thread)) timeout_ms = 0;
  // The I/O thread leaves at once when a lone caller wants the role (not
  // while it drains the last commands at shutdown: nobody else polls then).
  if (io_thread && !stopping() && !roles_.IoThreadKeepsPolling()) timeout_ms = 0;
  const int count = poller_.Wait(timeout_ms, events, kMaxEvents);
  poller_.Awake();
  // The turn: output produced by callbacks is written once per node at its
  // end, and the callers it completes are woken then.
  SyncWaiter::DeferWakes defer_wakes;
  poller_.set_in_turn(true);
  for (int i = 0; i < count; ++i) {
    const Poller::Event& e = events[i];
    if (e.node < 0 || e.node >= node_count()) continue;
    Node& n = NodeAt(e.node);
    if (e.kind == Poller::kSubscriber) {
      if (n.sub.conn.generation() == e.generation) subscriber_.OnIo(n.sub, n.index, e.events);
    } else if (e.kind == Poller::kLocator) {
      n.locator->OnIo(e.sub, e.generation, e.events);
    } else if (n.cmd.generation() == e.generation) {  // else closed earlier in this batch
      OnCommandIo(n, e.events);
    }
  }
  now = Clock::now();
  ExpireDeadlines(now);
  MaintainNodes(now);
  tasks_.RunTimers(now);
  tasks_.RunPosted();
  poller_.set_in_turn(false);
  FlushTurn();
  EmitNodeEvents();
}

Engine::TimePoint Engine::NextWake(TimePoint now) {
  TimePoint wake = tasks_.NextWake(now, TimePoint::max());
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    wake = n.queue.NextWake(now, wake);
    if (n.cmd.state() == Connection::State::kDisconnected) {
      // Only a master the locator knows is reconnected (a Sentinel round or
      // a cluster's map names it first, and wakes the poller with its own
      // deadlines); a reconnection time already past must not keep the
      // poller from sleeping.
      if (n.locator->Known()) wake = std::min(wake, n.cmd.next_connect());
    } else if (!n.cmd.ready()) {
      wake = std::min(wake, n.cmd.connect_deadline());
    }
    if (!n.shard()) wake = subscriber_.NextWake(n.sub, wake);
    wake = std::min(wake, n.locator->Wake(now));
  }
  return wake;
}

int64_t Engine::NextTurnNs() {
  const TimePoint now = Clock::now();
  // What only a socket moves on, and should not wait for the next deadline
  // or call: a connection being established (its handshake's next step), a
  // breaker's probe (its answer closes the breaker), a subscriber link
  // being set up. A turn now: the I/O thread polls until it is done.
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    const Connection::State s = n.cmd.state();
    if (s != Connection::State::kDisconnected && !n.cmd.ready()) return 0;
    if (n.queue.ProbeInFlight()) return 0;
    if (!n.shard() && subscriber_.wanted() &&
        n.sub.conn.state() != Connection::State::kDisconnected && !n.sub.conn.ready()) {
      return 0;
    }
  }
  const TimePoint wake = NextWake(now);
  if (wake == TimePoint::max()) return std::numeric_limits<int64_t>::max();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(wake.time_since_epoch()).count();
}

void Engine::ExpireDeadlines(TimePoint now) {
  std::vector<NodeCallback> expired;
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    // Replies already in the socket are not late: read them before expiring
    // anything (after a pause of this process, say, they arrived while
    // nobody was polling).
    if (n.queue.DeadlineDue(now)) OnCommandIo(n, EPOLLIN);
    n.queue.Expire(now, &expired);
  }
  if (expired.empty()) return;
  std::string why = absl::StrCat("no reply within ", absl::FormatDuration(config_.node_timeout));
  for (auto& done : expired) done(absl::UnavailableError(why));
}

void Engine::FlushTurn() {
  for (int i = 0; i < node_count(); ++i) NodeAt(i).queue.FlushTurnEnd();
}

void Engine::EmitNodeEvents() {
  if (!node_events_pending_.exchange(false, std::memory_order_acq_rel)) return;
  for (int i = 0; i < node_count(); ++i) {
    for (const NodeEvent& e : NodeAt(i).queue.TakeEvents()) config_.on_node_event(e);
  }
}

// ---- Timers and tasks ---------------------------------------------------------

void Engine::Post(absl::AnyInvocable<void()> fn) {
  if (tasks_.Post(std::move(fn))) Wake();
}

void Engine::FailLater(NodeCallback done, absl::Status status) {
  Post([done = std::move(done), status = std::move(status)]() mutable { done(status); });
}

Transport::TimerId Engine::RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) {
  const TimePoint at =
      Clock::now() + absl::ToChronoNanoseconds(std::max(delay, absl::ZeroDuration()));
  const TimerId id = tasks_.AddTimer(at, std::move(fn));
  poller_.WakeIfSleepingPast(at);
  KickIfOutside();
  return id;
}

bool Engine::Cancel(TimerId id) { return tasks_.Cancel(id); }

// ---- Sending ----------------------------------------------------------------------

ConnectionId Engine::Send(int node, const Command& command, NodeCallback done) {
  absl::Status refused;
  const ConnectionId conn = Route(node, command).queue.Send(command, done, stopping(), &refused);
  // Refused: answered later, through a posted task, never inline.
  if (!refused.ok()) {
    FailLater(std::move(done), std::move(refused));
  } else {
    KickIfOutside();
  }
  return conn;
}

bool Engine::Accepts(int node) const {
  // A cluster node: its own connection (to the member it asks for the slot
  // map) says whether the cluster is reachable; each master's breaker
  // answers for its slots.
  return NodeAt(node).queue.Accepts();
}

// ---- Announcements (subscriber.h) -------------------------------------------------

void Engine::Subscribe(const std::vector<std::string>& channels) {
  Post([this, channels] {
    const std::string cmd = subscriber_.Add(channels);
    if (cmd.empty()) return;
    // Connections still connecting subscribe to every channel once ready.
    // A cluster node listens on one member: PUBLISH reaches every member.
    for (int i = 0; i < size(); ++i) subscriber_.Write(NodeAt(i).sub, i, cmd);
  });
}

void Engine::Unsubscribe(const std::vector<std::string>& channels) {
  Post([this, channels] {
    const std::string cmd = subscriber_.Remove(channels);
    if (cmd.empty()) return;
    for (int i = 0; i < size(); ++i) subscriber_.Write(NodeAt(i).sub, i, cmd);
  });
}

bool Engine::QueueHost::InTurn() const { return engine_.poller_.in_turn(); }

void Engine::QueueHost::WatchWritable(int node, bool on) {
  engine_.poller_.Register(engine_.NodeAt(node).cmd, node, Poller::kCommand, EPOLL_CTL_MOD, on);
}

void Engine::QueueHost::WakePoller() { engine_.Wake(); }

void Engine::QueueHost::DeadlineSet(TimePoint at) {
  // Sent by a thread that does not poll: the poller may sleep past the
  // deadline (RunOnce checks the count after publishing its sleep).
  if (engine_.roles_.PollingHere()) return;
  engine_.outside_sends_.fetch_add(1);
  engine_.poller_.WakeIfSleepingPast(at);
}

void Engine::QueueHost::EventQueued() {
  engine_.node_events_pending_.store(true, std::memory_order_release);
}

void Engine::QueueHost::BeforeDelivery(int node, const Reply& reply) {
  engine_.NoteRedirects(engine_.NodeAt(node), reply);
}

// ---- Shutdown -------------------------------------------------------------------

void Engine::DrainFollowers() {
  // The requests in flight are answered now, with kCancelled, while their
  // connections stay up: a failed attempt's release goes out behind its SET
  // (Command::after), as it would have without the shutdown.
  std::vector<NodeCallback> cancelled;
  for (int i = 0; i < node_count(); ++i) NodeAt(i).queue.CancelInFlight(&cancelled);
  {
    SyncWaiter::DeferWakes defer_wakes;
    for (auto& done : cancelled) done(absl::CancelledError("the client is shutting down"));
  }
  // Bounded by node_timeout (the followers' own deadline) and in turns.
  const TimePoint until = Clock::now() + absl::ToChronoNanoseconds(config_.node_timeout);
  for (int turn = 0; turn < 100000 && Clock::now() < until; ++turn) {
    tasks_.RunUser();
    if (!tasks_.HasQueued() && !AwaitingFollowers()) break;
    RunOnce(until);
  }
}

bool Engine::AwaitingFollowers() {
  for (int i = 0; i < node_count(); ++i) {
    if (NodeAt(i).queue.AwaitingAnswers()) return true;
  }
  return false;
}

void Engine::CancelEverything() {
  for (int i = 0; i < node_count(); ++i) {
    Node& n = NodeAt(i);
    Disconnect(n, "the client is shutting down");
    subscriber_.Close(n.sub, "the client is shutting down");
    n.locator->Close();
  }
  // Timers, tasks and user callbacks run round after round until none is
  // left: they may start more work, and a user callback may start a new
  // call, which must call back too (client.h). Every Send now fails and
  // every new operation completes at once, so this ends, unless callbacks
  // start a new call on every completion: such a chain is followed for
  // 10000 rounds, then dropped (said on stderr).
  tasks_.RunAllRemaining(10000);
  std::lock_guard<std::mutex> g(first_.mu);
  first_.pending = 0;
  first_.cv.notify_all();
}

void Engine::WaitForFirstConnections(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(first_.mu);
  first_.cv.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return first_.pending <= 0; });
}

}  // namespace redlock::internal
