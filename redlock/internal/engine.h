// The I/O engine: one thread, one ordered connection per node.
//
// Design (DESIGN.md 4.7):
// - Callers on any thread append their command to the node's output buffer
//   and the reply slot to the node's FIFO under the node's mutex. Whoever
//   finds no write in progress becomes the writer and flushes everything
//   queued so far with one write(2) outside the mutex, so under load many
//   callers' commands go out in one system call (pipelining), and a lone
//   caller writes straight from its own thread without waking the loop.
// - The loop thread owns reading: it parses replies with hiredis' reader,
//   pairs them with FIFO slots in order and runs the callbacks.
// - Every request's deadline is its send time plus node_timeout, taken under
//   the node's mutex, so deadlines grow along each FIFO and expired requests
//   always form a prefix of it; their late replies are discarded when they
//   arrive. The loop never sleeps longer than node_timeout, so a new request
//   never needs to wake it to arm a timer.
// - Leader/follower polling: whoever polls holds poll_mu_ and runs the
//   event processing (replies, deadlines, timers, reconnects). A thread
//   blocked in a synchronous call polls itself instead of sleeping while the
//   I/O thread does it and then wakes it: a lone synchronous call costs no
//   thread hand-off. Other blocked callers queue and are handed the role
//   when the poller's own call completes. The I/O thread polls when no
//   caller has for a millisecond, and is the only thread that runs user
//   callbacks (DeliverToUser), so those never run inside another call.
// - A missed deadline or a failed connection opens the node's circuit
//   breaker: normal requests then fail at once, and a PING probe is sent
//   every breaker_probe_interval until one is answered in time. Requests in
//   flight per node are capped, so nothing grows without bound behind a
//   stopped node.
// - Lost connections are re-established with exponential backoff; every new
//   connection sends AUTH, SELECT and SCRIPT LOAD before any request.

#ifndef REDLOCK_INTERNAL_ENGINE_H_
#define REDLOCK_INTERNAL_ENGINE_H_

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
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/transport.h"
#include "redlock/node_status.h"
#include "redlock/options.h"

namespace redlock::internal {

class Engine final : public Transport {
 public:
  struct Config {
    std::vector<Endpoint> nodes;
    absl::Duration node_timeout = absl::Milliseconds(50);
    absl::Duration connect_timeout = absl::Seconds(1);
    absl::Duration reconnect_backoff_min = absl::Milliseconds(10);
    absl::Duration reconnect_backoff_max = absl::Seconds(1);
    absl::Duration breaker_probe_interval = absl::Milliseconds(100);
    size_t max_in_flight_per_node = 4096;
  };

  // Starts the loop thread and the first connection to every node.
  static absl::StatusOr<std::unique_ptr<Engine>> Start(Config config);

  ~Engine() override;

  // Blocks until every node has connected or failed once, or `timeout`.
  void WaitForFirstConnections(absl::Duration timeout);

  // Completes every pending request, timer and task with kCancelled and
  // stops the thread. Idempotent; called by the destructor.
  void Shutdown() override;

  std::vector<NodeHealth> Health() const;

  // Pairs (first, second) of nodes found to be one server (same run_id):
  // the second was refused. Checked when each connection is established.
  std::vector<std::pair<int, int>> DuplicateNodes() const;

  // Transport.
  int size() const override { return static_cast<int>(nodes_.size()); }
  const std::string& NodeName(int node) const override;
  void Send(int node, Command command, NodeCallback done) override;
  TimerId RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) override;
  bool Cancel(TimerId id) override;
  void AwaitSync(const std::shared_ptr<SyncWaiter>& waiter) override;
  void DeliverToUser(absl::AnyInvocable<void()> fn) override;
  bool InTransportThread() const override;
  bool stopping() const override { return stopping_.load(std::memory_order_acquire); }

  void SetMessageHandler(MessageHandler handler) override { message_handler_ = std::move(handler); }
  void Subscribe(const std::vector<std::string>& channels) override;
  void Unsubscribe(const std::vector<std::string>& channels) override;

  // Runs `fn` on the loop thread soon.
  void Post(absl::AnyInvocable<void()> fn);

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Node;
  struct Slot;

  explicit Engine(Config config);

  void Loop();
  // One round of polling: wait for events (or the next deadline), then
  // process them, deadlines, reconnections, timers and tasks.
  // REQUIRES: poll_mu_ held.
  void RunOnce();
  // Wakes one caller queued for the polling role.
  void HandOffPolling();
  void RunUserTasks();
  // Each of these runs with poll_mu_ held (by the I/O thread or a caller).
  void HandleEvent(uint64_t data, uint32_t events);
  void StartConnect(Node& n);
  void OnConnected(Node& n);
  void OnReadable(Node& n);
  void OnWritable(Node& n);
  void Disconnect(Node& n, const std::string& why);
  void ExpireDeadlines(TimePoint now);
  void MaintainNodes(TimePoint now);
  void SendProbe(Node& n);
  TimePoint NextWake(TimePoint now);
  void RunTimers(TimePoint now);
  // The subscriber connection of a node (loop thread only).
  void SubConnect(Node& n);
  void SubOnEvent(Node& n, uint32_t events);
  void SubDisconnect(Node& n, const std::string& why);
  void SubWrite(Node& n, std::string bytes);
  void SubMaintain(Node& n, TimePoint now);
  void RunPosted();
  void CancelEverything();

  // Appends under n.mu and flushes if nobody else is writing. `lock` holds
  // n.mu; it is released and re-taken around the write(2).
  // False when `reply` cannot be the answer to `slot` (engine.cc).
  static bool ReplyFits(const Slot& slot, const Reply& reply);
  void EnqueueLocked(Node& n, std::unique_lock<std::mutex>& lock, std::shared_ptr<Slot> slot,
                     absl::string_view payload);
  void FlushLocked(Node& n, std::unique_lock<std::mutex>& lock);
  void OpenBreakerLocked(Node& n, const std::string& why);
  void Wake();
  // Records node n's server identity; a message when another node already
  // has it (the connection is then refused). REQUIRES: n.mu held.
  std::string CheckIdentityLocked(Node& n, const std::string& run_id);
  void FailLater(NodeCallback done, absl::Status status);

  const Config config_;
  std::vector<std::unique_ptr<Node>> nodes_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::thread thread_;
  std::atomic<std::thread::id> thread_id_{};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
  std::mutex shutdown_mu_;
  // Latest point in time at which the loop will wake by itself (ns since the
  // steady clock's epoch); RunAfter wakes it only for earlier timers.
  std::atomic<int64_t> wake_at_ns_{0};

  // Leader/follower polling (see the file comment).
  std::mutex poll_mu_;
  std::atomic<int> sync_active_{0};             // callers inside AwaitSync
  std::atomic<bool> io_thread_polling_{false};  // the I/O thread holds poll_mu_
  std::atomic<int64_t> last_sync_end_ns_{0};
  std::atomic<uint64_t> next_probe_id_{1};

  mutable std::mutex mu_;                              // guards the members below
  std::deque<absl::AnyInvocable<void()>> posted_;      // run by any poller
  std::deque<absl::AnyInvocable<void()>> user_tasks_;  // run by the I/O thread
  std::deque<std::shared_ptr<SyncWaiter>> handoff_;    // callers waiting to poll
  std::condition_variable idle_cv_;                    // the idle I/O thread
  std::map<std::pair<TimePoint, TimerId>, absl::AnyInvocable<void()>> timers_;
  std::unordered_map<TimerId, TimePoint> timer_index_;
  TimerId next_timer_id_ = 1;
  // Loop thread only: subscribed channels and their reference counts.
  std::map<std::string, int> channels_;
  MessageHandler message_handler_;
  int first_connect_pending_ = 0;
  std::condition_variable first_connect_cv_;

  mutable std::mutex identity_mu_;               // guards the two below
  std::vector<std::string> run_ids_;             // per node, of its current connection
  std::vector<std::pair<int, int>> duplicates_;  // (kept, refused)
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ENGINE_H_
