// redlock/observer.h: events for metrics and logs (Options::observer).
//
//   class LatencyLog : public redlock::Observer {
//    public:
//     void OnAcquire(const redlock::AcquireEvent& e) override {
//       if (!e.status.ok()) LOG(INFO) << e.resources[0] << ": " << e.status;
//     }
//   };
//   options.observer = std::make_shared<LatencyLog>();
//
// redlock/metrics.h has a ready-made collector that renders Prometheus text.
//
// Threads: events are delivered synchronously, on the thread where the
// client completes what they report, never while the library holds a lock
// of the operation reported:
//   - OnAcquire, OnExtend, OnRelease: the client's I/O thread; or a thread
//     blocked in a synchronous call of the same client, which polls the
//     nodes meanwhile and completes whatever it reads (its own call or
//     another's); or the thread that starts the call, before the call
//     returns, when the call is decided while that thread still sends it
//     (a stop requested before the call or during its first send, a client
//     shutting down, a round whose replies came back before the last node
//     was sent to). A stop (StopSource::RequestStop) decides a pending
//     acquisition at once, but the thread that requests it never gets the
//     event: the client's threads complete the call.
//   - OnLease: the I/O thread or a polling thread (the renewal's timers
//     and extensions), or the thread calling AutoRenew when the lease is
//     already at risk or run out then.
//   - OnNode: the thread polling the nodes (the I/O thread or a blocked
//     caller), at the end of its turn.
// So several may arrive at the same time: an observer must be thread-safe.
// It must be quick and must not block (a polling thread runs it, and every
// call of the client waits for that thread); it must not call the client's
// blocking methods (they would return kFailedPrecondition). Every method has
// an empty default, so an observer overrides only what it needs.

#ifndef REDLOCK_OBSERVER_H_
#define REDLOCK_OBSERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "redlock/outcome.h"

namespace redlock {

// An acquisition finished (TryAcquire, Acquire with or without a wait,
// MultiLock), successfully or not. `outcome` covers the whole call: its
// attempts and duration (waits included), and the last round per node.
struct AcquireEvent {
  // The resources asked for (one, or a MultiLock's set in canonical order).
  std::vector<std::string> resources;
  // What the call returned: OK, or its error.
  absl::Status status;
  // How the call went (kSucceeded on success; redlock/outcome.h).
  Outcome outcome;
  uint64_t fencing_token = 0;  // on success with fencing
};

// An extension finished (one round): Extend, or a renewal's extension.
struct ExtendEvent {
  // The lease's resources (one, or a MultiLease's set).
  std::vector<std::string> resources;
  // What the extension returned: OK, or its error.
  absl::Status status;
  // How the round went (redlock/outcome.h).
  Outcome outcome;
};
// A release finished (one round).
struct ReleaseEvent {
  // The lease's resources (one, or a MultiLease's set).
  std::vector<std::string> resources;
  // What the release returned: OK, or its error.
  absl::Status status;
  // How the round went (redlock/outcome.h).
  Outcome outcome;
};

// A renewed (or watched) lease became at risk, or was lost (renewal.h).
struct LeaseEvent {
  // At risk (RenewOptions::at_risk), or lost (the renewal's on_lost).
  enum class Kind { kAtRisk, kLost };
  // Which of the two.
  Kind kind = Kind::kAtRisk;
  // The lease's resources (one, or a MultiLease's set).
  std::vector<std::string> resources;
  // Why: the failed extension's error, or the validity running out.
  absl::Status why;
};

// A node's connection changed state.
struct NodeEvent {
  // What changed.
  enum class Kind {
    kConnected,      // a connection is established and ready
    kDisconnected,   // it failed or was lost (`detail` says why)
    kBreakerOpened,  // requests now fail at once until a probe succeeds
    kBreakerClosed,  // a probe succeeded (or a new connection is ready)
  };
  // Which change.
  Kind kind = Kind::kConnected;
  std::string node;  // "host:port"
  // Why: the error for kDisconnected and kBreakerOpened, what happened for
  // kBreakerClosed; "" for kConnected.
  std::string detail;
};

const char* LeaseEventName(LeaseEvent::Kind kind);  // "at_risk", "lost"
const char* NodeEventName(NodeEvent::Kind kind);    // "connected", ...

// Observer: receives the client's events (Options::observer). Override what
// you need; see the top of this file for the threads each runs on.
class Observer {
 public:
  virtual ~Observer() = default;
  // An acquisition finished.
  virtual void OnAcquire(const AcquireEvent& event) {}
  // An extension finished.
  virtual void OnExtend(const ExtendEvent& event) {}
  // A release finished.
  virtual void OnRelease(const ReleaseEvent& event) {}
  // A renewed or watched lease became at risk or was lost.
  virtual void OnLease(const LeaseEvent& event) {}
  // A node's connection changed state.
  virtual void OnNode(const NodeEvent& event) {}
};

}  // namespace redlock

#endif  // REDLOCK_OBSERVER_H_
