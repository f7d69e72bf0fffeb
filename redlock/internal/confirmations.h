// Confirmations of durable writes and their breaker (Options::durability;
// docs/design.md 5.11): one job of the calls to the nodes (node_calls.h).
//
// Behind a durable write, on the same connection, the node runs WAIT (or
// WAITAOF); the write's "yes" counts only once that confirmed it. A WAIT
// covers every earlier write on its connection, so a connection has one
// confirmation in flight at a time: writes sent while one is out wait for
// the next, sent when it returns (right behind the write when none is out),
// and a lagging replica holds the connection for one durability timeout at
// a time, whatever the callers send. A confirmation counts only for the
// writes on its own connection.
//
// The breaker: a node whose replicas left kConfirmationsMissed WAITs in a
// row unconfirmed is "lagging"; its durable writes are then answered "no"
// without being sent, but for one probe write every probe interval, whose
// confirmation closes it.
//
// Thread-safe. Callbacks run on the transport's thread, never inline.

#ifndef REDLOCK_INTERNAL_CONFIRMATIONS_H_
#define REDLOCK_INTERNAL_CONFIRMATIONS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/command.h"
#include "redlock/internal/transport.h"
#include "redlock/internal/votes.h"
#include "redlock/node_status.h"
#include "redlock/options.h"

namespace redlock::internal {

// Unconfirmed writes in a row after which a node's replicas count as
// lagging.
inline constexpr int kConfirmationsMissed = 3;

class Confirmations {
 public:
  // The vote of the WAIT that followed a write (kYes: confirmed).
  using Confirmed = absl::AnyInvocable<void(Vote)>;

  // `transport` and `clock` must outlive this.
  Confirmations(Transport* transport, const Clock* clock, const Options& options);
  ~Confirmations();
  Confirmations(const Confirmations&) = delete;
  Confirmations& operator=(const Confirmations&) = delete;

  // Whether Options::durability asks for confirmations at all.
  bool on() const { return on_; }

  // Before a durable write to `node`: "" to send it (`*probe` says whether
  // it is the breaker's probe), else why it is not asked (the node's
  // replicas lag; the caller answers "no" with that).
  std::string Admit(int node, bool* probe);

  // A durable write went on `conn` (0: it was not sent): `confirmed` gets
  // the vote of the WAIT behind it.
  void Follow(int node, ConnectionId conn, bool probe, Confirmed confirmed);

  // A probe that wrote nothing for a WAIT to follow (a script-free write
  // decided before its writes): it asked the replicas nothing, and a later
  // write may probe.
  void ProbeUnasked(int node);

  // Fills NodeHealth::replicas_lagging.
  void AddHealth(std::vector<NodeHealth>* health) const;

 private:
  // A write waiting for the WAIT behind it, and the connection it went on.
  struct Waiter {
    ConnectionId conn = 0;
    bool probe = false;
    Confirmed confirmed;
  };
  // The writes one WAIT confirms, on connection `conn`.
  struct Group {
    ConnectionId conn = 0;
    std::mutex mu;
    std::vector<Waiter> writes;
  };
  struct NodeState {
    // Per connection with a confirmation in flight (one per node, but a
    // cluster node has a connection per master): the writes sent on it
    // since, waiting for the next one.
    std::map<ConnectionId, std::vector<Waiter>> confirming;
    int missed_in_a_row = 0;
    std::string last_miss;  // why the last one was not confirmed
    bool lagging = false;
    bool probe_out = false;
    Clock::TimePoint next_probe{};
  };

  void Send(int node, std::shared_ptr<Group> group);
  void OnAnswer(int node, const std::shared_ptr<Group>& group, absl::StatusOr<Reply> r);
  // A WAIT's answer, for the breaker (kCancelled: says nothing of the
  // replicas).
  void Count(int node, const Vote& confirmation, bool probe);

  Transport* const transport_;
  const Clock* const clock_;
  const Options::Durability durability_;
  const bool on_;
  const Command command_;
  const absl::Duration probe_interval_;
  mutable std::mutex mu_;
  std::vector<NodeState> nodes_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_CONFIRMATIONS_H_
