// Release announcements (docs/design.md 6.9): per node a subscriber
// connection, opened when the first channel is subscribed, that runs
// AUTH/SELECT and a PING, then SUBSCRIBEs to every channel wanted. Channels
// are reference-counted over the client's waiters and subscribed again
// after every reconnection; each message goes to the handler with the
// node's index. Kept alive: silent for kKeepaliveIdle, it is sent a PING,
// and replaced when nothing answers within connect_timeout (a half-open
// connection delivers nothing, forever). Best effort: while it is down,
// waiters fall back to polling and Health says why.
//
// Poller only, but for a link's error (SubscriberLink::Error, any thread).

#ifndef REDLOCK_INTERNAL_SUBSCRIBER_H_
#define REDLOCK_INTERNAL_SUBSCRIBER_H_

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/poller.h"
#include "redlock/internal/transport.h"

namespace redlock::internal {

// One node's subscriber connection.
class SubscriberLink {
 public:
  explicit SubscriberLink(const Connection::Settings& settings) : conn(settings) {}
  // Why it last failed ("" once it is subscribed again).
  std::string Error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  Connection conn;

 private:
  friend class Subscriber;
  using TimePoint = std::chrono::steady_clock::time_point;
  std::string out_;  // not taken by the node yet
  bool epollout_ = false;
  TimePoint last_heard_{};  // keep-alive (kKeepaliveIdle)
  bool ping_out_ = false;
  TimePoint ping_sent_{};
  mutable std::mutex mu_;  // guards error_
  std::string error_;
};

class Subscriber {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // `poller` and `life` (whether the engine is shutting down) outlive this.
  Subscriber(Poller* poller, const Lifecycle* life, absl::Duration connect_timeout)
      : poller_(*poller), life_(*life), connect_timeout_(connect_timeout) {}

  // Set once, before any channel is subscribed.
  void SetHandler(Announcements::MessageHandler handler) { handler_ = std::move(handler); }

  // Counts `channels` in (out); the SUBSCRIBE (UNSUBSCRIBE) every node must
  // be sent for those that came (went), or "".
  std::string Add(const std::vector<std::string>& channels);
  std::string Remove(const std::vector<std::string>& channels);
  bool wanted() const { return !channels_.empty(); }

  // Node `node`'s link, reached at `endpoint`'s credentials.
  void Start(SubscriberLink& link, const Endpoint& endpoint, int node);
  void OnIo(SubscriberLink& link, int node, uint32_t events);
  void Write(SubscriberLink& link, int node, std::string bytes);
  // Connects, keeps alive or replaces the link (the master is known).
  void Maintain(SubscriberLink& link, const Endpoint& endpoint, int node, TimePoint now);
  // Records `why` (unless the engine shuts down) and closes the link.
  void Close(SubscriberLink& link, const std::string& why);
  // The earliest of `wake` and what the link waits for.
  TimePoint NextWake(const SubscriberLink& link, TimePoint wake) const;

 private:
  // Records why the link failed (Health).
  static void Failed(SubscriberLink& link, const std::string& why);

  Poller& poller_;
  const Lifecycle& life_;
  const absl::Duration connect_timeout_;
  // Subscribed channels and their reference counts, and what one SUBSCRIBE
  // of all of them takes (bounds a link's backlog).
  std::map<std::string, int> channels_;
  size_t channel_bytes_ = 0;
  Announcements::MessageHandler handler_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SUBSCRIBER_H_
