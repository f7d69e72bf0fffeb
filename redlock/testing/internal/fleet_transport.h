// One fake-fleet client's transport (internal::Transport and Blocking, as
// the engine is): the library's ClientImpl runs over it, its commands go to
// the fleet's nodes (fleet_world.h) in real time.
//
// It keeps the engine's contract (redlock/internal/transport.h): one I/O
// thread runs every callback, timer and user callback; Send never calls
// back inline; one node's commands execute in the order they were sent,
// each exactly once (a request lost to a partition, never); a request
// with no reply within the node timeout fails with kUnavailable, and its
// late reply is dropped; Shutdown answers what is in flight with
// kCancelled, still lets the commands that follow another (Command::after)
// and the drained ones (Command::drain) finish for up to the node timeout,
// then runs the remaining timers and callbacks until none is left.
// Release announcements: every message a node publishes on a channel this
// transport subscribes to reaches the message handler.
//
// A connection is modelled per node and per generation of the node (a new
// one after the node stopped or restarted), with its session state
// (sim::Session) and the real handshake's SCRIPT LOADs before its first
// command.

#ifndef REDLOCK_TESTING_INTERNAL_FLEET_TRANSPORT_H_
#define REDLOCK_TESTING_INTERNAL_FLEET_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "redlock/internal/sync_waiter.h"
#include "redlock/internal/transport.h"
#include "redlock/testing/internal/fleet_world.h"
#include "sim/node.h"

namespace redlock::testing {

class FleetTransport final : public internal::Transport, public internal::Blocking {
 public:
  // Starts the I/O thread and joins the world's transports.
  FleetTransport(std::shared_ptr<FleetWorld> world, absl::Duration node_timeout);
  ~FleetTransport() override;
  FleetTransport(const FleetTransport&) = delete;
  FleetTransport& operator=(const FleetTransport&) = delete;

  // internal::NodeIo.
  int size() const override { return world_->size(); }
  const std::string& NodeName(int node) const override { return world_->name(node); }
  internal::ConnectionId Send(int node, const internal::Command& command,
                              internal::NodeCallback done) override;
  bool Accepts(int node) const override;
  std::vector<NodeHealth> Health() const override;

  // internal::TransportThread.
  TimerId RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) override;
  bool Cancel(TimerId id) override;
  void DeliverToUser(absl::AnyInvocable<void()> fn) override;
  bool InTransportThread() const override;

  // internal::Lifecycle.
  bool stopping() const override { return stopping_.load(std::memory_order_acquire); }
  void Shutdown() override;

  // internal::Announcements.
  void SetMessageHandler(MessageHandler handler) override;
  void Subscribe(const std::vector<std::string>& channels) override;
  void Unsubscribe(const std::vector<std::string>& channels) override;

  // internal::Blocking: the I/O thread completes the waiter.
  void AwaitSync(const std::shared_ptr<internal::SyncWaiter>& waiter) override {
    waiter->WaitReady();
  }

  // From the world, its mutex held: every connection to `node` closed.
  void ConnectionsClosed(int node, const std::string& why);
  // From the world, its mutex held: `node` published a message.
  void Published(int node, const std::string& channel, const std::string& payload);

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Key = std::pair<TimePoint, uint64_t>;  // when, then the order of scheduling

  struct Request {
    uint64_t id = 0;
    int node = 0;
    uint64_t generation = 0;
    std::vector<sim::Argv> commands;
    bool array = false;  // more than one command: the reply is an array of theirs
    bool drain = false;
    TimePoint deadline;
    bool closed = false;          // its connection closed before it ran
    internal::NodeCallback done;  // empty once answered
  };
  // One node's connection, as this client holds it.
  struct Link {
    internal::ConnectionId conn = 0;  // 0: none yet, or closed
    uint64_t generation = 0;
    TimePoint last_arrival;                                // keeps one node's requests in order
    std::map<uint64_t, std::shared_ptr<Request>> pending;  // awaiting an answer
    std::string last_error;
    // Only the I/O thread touches these.
    uint64_t session_generation = 0;
    bool handshake_done = false;
    sim::Session session;
  };
  struct Event {
    absl::AnyInvocable<void()> fn;
    TimerId timer = 0;  // a RunAfter timer, or 0
  };
  enum class Phase { kRunning, kRequested, kDraining, kClosed };

  void Loop();
  // Runs the request on its node when it arrives there.
  void Arrive(const std::shared_ptr<Request>& r);
  // Answers the request if it is still pending.
  void Answer(const std::shared_ptr<Request>& r, absl::StatusOr<internal::Reply> reply);
  // Shutdown's steps, on the I/O thread.
  void BeginDrain();
  void CloseAll();
  void RunUser(absl::AnyInvocable<void()>& fn);
  // REQUIRES: mu_ held.
  void PostLocked(absl::AnyInvocable<void()> fn);
  void FailLocked(internal::NodeCallback done, absl::Status status);
  Key ScheduleLocked(TimePoint when, Event event);
  size_t PendingLocked() const;

  const std::shared_ptr<FleetWorld> world_;
  const absl::Duration node_timeout_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Link> links_;
  std::map<Key, Event> queue_;
  std::unordered_map<TimerId, Key> timers_;
  std::deque<absl::AnyInvocable<void()>> posted_;
  std::map<std::string, int> channels_;
  MessageHandler handler_;
  uint64_t next_seq_ = 1;
  uint64_t next_request_ = 1;
  TimerId next_timer_ = 1;
  internal::ConnectionId next_conn_ = 1;
  Phase phase_ = Phase::kRunning;
  TimePoint drain_until_;

  std::atomic<bool> stopping_{false};
  std::atomic<std::thread::id> thread_id_{};
  bool in_user_ = false;  // the I/O thread runs a user callback
  std::mutex shutdown_mu_;
  std::thread thread_;
};

}  // namespace redlock::testing

#endif  // REDLOCK_TESTING_INTERNAL_FLEET_TRANSPORT_H_
