// How the operations talk to the nodes, on top of the transport (which moves
// commands and keeps their order, and decides nothing):
//
// - Scripts by SHA. Every connection loads them in its handshake
//   (ScriptLoadSteps). A node whose script cache was flushed answers
//   NOSCRIPT: the command did not run, the scripts are loaded again behind
//   it, and the command either counts as a "no" (a write that must not run
//   later than sent: an acquisition, whose release may already be queued
//   behind it) or is sent again in the EVAL form at the end of the queue
//   with its own confirmation (a command that may run later: release,
//   extend, fencing commit, a read). Nothing runs out of the order it was
//   sent in, and a confirmation counts only for the write it follows.
// - Nodes that forbid scripting (scriptless.h): a script sent to a node the
//   handshake found refusing SCRIPT LOAD runs as a WATCH/MULTI/EXEC
//   transaction instead, with the same reply. A script refused at run time
//   (an ACL changed) marks the node; a command that may run later is then
//   sent again that way, an acquisition is a "no".
// - Durable writes (Options::durability): a WAIT follows the write on the
//   same connection, and the write's "yes" counts only once that WAIT
//   confirmed it. A connection has one WAIT in flight at a time (a node has
//   one connection; a cluster node one per master): it covers every write
//   before it on its connection, so writes sent while one is out are
//   confirmed together by the next, sent when it returns (right behind the
//   write when none is out). A lagging replica thus holds the connection for
//   one durability timeout at a time, whatever the callers send. The confirmation breaker: a node
//   whose replicas left kConfirmationsMissed WAITs in a row unconfirmed votes "no" at once, without
//   being asked, until a probe write (one per probe interval) is confirmed.
// - Releases that must not be lost (a failed attempt's cleanup, a release
//   that did not get through): sent behind the command that set the keys
//   (Command::after), and when they cannot be sent or are not answered,
//   sent again once the node takes commands, until answered or until no
//   key can be left (the keys' expiry, pushed to a ttl after every try the
//   node left unanswered: it may still hold their SET). At most
//   max_in_flight_per_node wait per node (the oldest are dropped first);
//   those still waiting when the client is destroyed are dropped.
//
// Thread-safe. The callbacks run on the transport's thread, never inline.

#ifndef REDLOCK_INTERNAL_NODE_CALLS_H_
#define REDLOCK_INTERNAL_NODE_CALLS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/scriptless.h"
#include "redlock/internal/transport.h"
#include "redlock/internal/votes.h"
#include "redlock/node_status.h"
#include "redlock/options.h"

namespace redlock::internal {

// Unconfirmed writes in a row after which a node's replicas count as
// lagging (NodeCalls).
inline constexpr int kConfirmationsMissed = 3;

// What to do with a command the node answered NOSCRIPT.
enum class OnNoScript {
  kFail,    // a "no" (kUnavailable naming the flush): the command did not run
  kResend,  // its EVAL form goes again, at the end of the node's queue
};

// The keys of one acquisition to remove from the nodes.
struct KeysRelease {
  std::vector<std::string> keys;
  std::string token;
  // Prefix of the channel the release is announced on ("" announces
  // nothing: a failed attempt's cleanup must not wake the waiters).
  std::string channel_prefix;
  // The keys' ttl, and when they expire at the latest if their SET ran when
  // sent (a key set later lives longer: see NodeCalls::Release).
  absl::Duration ttl;
  Clock::TimePoint expires;
  // The command that removes them: the release script on `keys`
  // (ScriptRelease), or another (a reader's lease, a failed attempt of the
  // lock family: lock_shape.h). Made by ScriptCommand, so that it has an
  // EVAL form. Built once by the release's maker, copied per node; left
  // empty, each send builds the script release.
  Command command;
};

// The release script on `release`'s keys with its token, announced on the
// channel of its prefix (none when the prefix is empty).
Command ScriptRelease(const KeysRelease& release);

class NodeCalls {
 public:
  // How a node's answer reads as a vote (votes.h).
  using Judge = std::function<Vote(const absl::StatusOr<Reply>&)>;

  // A node's answer to a command sent with Send.
  struct Answer {
    // The command's own answer (a NOSCRIPT under OnNoScript::kFail: a
    // kUnavailable status naming the flush).
    absl::StatusOr<Reply> reply;
    // The node's vote: the judge's reading of `reply`, or, for a durable
    // write that said yes, its confirmation's.
    Vote vote;
    // A durable write said yes but its replicas did not confirm it: its
    // effect stays on the node until the caller undoes it.
    bool unconfirmed = false;
    // The connection the command went on (0: it was not sent); for the
    // release that undoes an unconfirmed write (Command::after).
    ConnectionId connection = 0;
  };
  using Done = absl::AnyInvocable<void(Answer)>;

  // `transport` and `clock` must outlive this. `modes`: which nodes forbid
  // scripting, as their handshakes found (null: none known yet).
  NodeCalls(Transport* transport, const Clock* clock, const Options& options,
            std::shared_ptr<ScriptingModes> modes = nullptr);
  ~NodeCalls();
  NodeCalls(const NodeCalls&) = delete;
  NodeCalls& operator=(const NodeCalls&) = delete;

  // Sends `command` to `node`; `done` gets the node's vote. With `durable`
  // (and Options::durability on), a durability check follows it on the same
  // connection (the node's next one) and a yes counts only once that check
  // confirmed it; while the node's replicas are lagging, `done` gets a "no"
  // without anything being sent, but for a probe now and then. Returns the
  // connection the command was queued on (0: not sent).
  ConnectionId Send(int node, const Command& command, const Judge& judge, bool durable,
                    OnNoScript noscript, Done done);
  // The same, keeping `command` itself where it may be sent again (a
  // script, or a cluster node) instead of a copy.
  ConnectionId Send(int node, Command&& command, const Judge& judge, bool durable,
                    OnNoScript noscript, Done done);

  // Removes `release` from `node`, behind the command that set its keys on
  // connection `after` (0: unknown), and makes sure it is not lost: when it
  // cannot be sent, is not answered, or the node answers it with an error,
  // it is sent again (EVAL form) every retry interval once the node takes
  // commands, until it is answered or `release->expires` has passed, that
  // time being pushed to a ttl after every attempt the node left
  // unanswered (a SET waiting in a stopped node's socket runs when the node
  // resumes). `done`, if set, gets the first answer.
  void Release(int node, ConnectionId after, std::shared_ptr<const KeysRelease> release,
               Done done = nullptr);

  // Fills in what this layer knows of each node (lagging replicas, pending
  // releases).
  void AddHealth(std::vector<NodeHealth>* health) const;

  // Stops the retries; what is still pending is dropped.
  void Shutdown();

 private:
  struct Call;
  struct Pending {
    std::shared_ptr<const KeysRelease> release;
    ConnectionId after = 0;      // the SET's connection
    ConnectionId queued_on = 0;  // where the last try went (0: refused)
    Clock::TimePoint until;
  };
  // A write waiting for a confirmation: the round it was sent in, and which
  // of its writes (a script-free transaction whose EXEC aborted writes again
  // in the same round: only the WAIT behind the last one confirms it).
  struct Waiter {
    std::shared_ptr<Call> call;
    int round = 0;
    int write = 0;
  };
  // The writes one WAIT confirms, on connection `conn`.
  struct Confirmation {
    ConnectionId conn = 0;
    std::mutex mu;
    std::vector<Waiter> writes;
  };
  struct NodeState {
    // Per connection with a confirmation in flight (one per node, but a
    // cluster node has a connection per master): the writes sent on it
    // since, waiting for the next one.
    std::map<ConnectionId, std::vector<Waiter>> confirming;
    // The confirmation breaker.
    int missed_in_a_row = 0;
    std::string last_miss;  // why the last one was not confirmed
    bool lagging = false;
    bool probe_out = false;
    Clock::TimePoint next_probe{};
    // A reload of the scripts is under way.
    bool reloading = false;
    // Releases to send again, oldest first; how many are out now.
    std::deque<Pending> pending;
    int retrying = 0;
  };

  // Send's call for `command`, or null when it is answered without being
  // sent (a durable write while the node's replicas lag).
  std::shared_ptr<Call> NewCall(int node, const Command& command, const Judge& judge, bool durable,
                                OnNoScript noscript, Done done);
  // Whether the call keeps its command to send it again.
  bool KeepsCommand(const Call& call) const;
  ConnectionId SendOnce(const std::shared_ptr<Call>& call, int round, const Command& command);
  // A durable write (the call's `write`-th) went on `conn`: its
  // confirmation follows it.
  void Wrote(const std::shared_ptr<Call>& call, int round, ConnectionId conn);
  void AfterWrite(const std::shared_ptr<Call>& call, int round, int write, ConnectionId conn);
  void OnWrite(const std::shared_ptr<Call>& call, int round, absl::StatusOr<Reply> r);
  void SendConfirmation(int node, std::shared_ptr<Confirmation> group, ConnectionId after);
  void OnConfirmation(int node, const std::shared_ptr<Confirmation>& group,
                      absl::StatusOr<Reply> r);
  void OnConfirm(const std::shared_ptr<Call>& call, int round, int write, Vote confirmation);
  // A node of a Redis Cluster answered TRYAGAIN (a multi-key call whose keys
  // are split by a slot migration for a moment): sent again after a short
  // pause, within node_timeout of its first send. False when it may not be.
  bool TryAgainLater(const std::shared_ptr<Call>& call, int round);
  // A WAIT's answer, for the node's confirmation breaker (kCancelled: says
  // nothing of the replicas).
  void CountConfirmation(int node, const Vote& confirmation, bool probe);
  // Loads the scripts again on the connection `on` (which got NOSCRIPT).
  void ReloadScripts(int node, ConnectionId on);
  bool cluster(int node) const { return clusters_[static_cast<size_t>(node)]; }
  ConnectionId SendRelease(int node, Pending p, bool eval, Done done);
  // The release was not answered (`answered` false) or was answered with an
  // error: keep it for a retry.
  void Keep(int node, Pending p, bool answered);
  void ArmRetryLocked(std::vector<absl::AnyInvocable<void()>>* after_unlock);
  void RetryPending();

  Transport* const transport_;
  const Clock* const clock_;
  const std::shared_ptr<ScriptingModes> modes_;
  ScriptlessRunner runner_;
  const Options::Durability durability_;
  const Command confirm_command_;
  const absl::Duration probe_interval_;
  const absl::Duration retry_interval_;
  const absl::Duration node_timeout_;
  const size_t max_pending_;
  const std::vector<bool> clusters_;  // per node: a Redis Cluster

  mutable std::mutex mu_;
  std::vector<NodeState> nodes_;
  bool retry_armed_ = false;
  Transport::TimerId retry_timer_ = 0;
  bool stopped_ = false;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_NODE_CALLS_H_
