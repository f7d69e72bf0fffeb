// How the operations talk to the nodes, on top of the transport (which moves
// commands and keeps their order, and decides nothing). NodeCalls is the
// front; each job is a unit of its own:
//
// - script delivery (script_delivery.h): scripts by SHA, NOSCRIPT and the
//   reload behind it, the script-free transactions of nodes that forbid
//   scripting. A command that got NOSCRIPT either counts as a "no" (a write
//   that must not run later than sent: an acquisition, whose release may be
//   queued behind it) or is sent again in its EVAL form at the end of the
//   queue with its own confirmation (release, extend, fencing commit, a
//   read). Nothing runs out of the order it was sent in.
// - confirmations (confirmations.h): a durable write's "yes" counts only
//   once the WAIT behind it confirmed it, and only the WAIT behind its own
//   latest write (a resend, or a script-free transaction run again, writes
//   again); the breaker for nodes whose replicas lag.
// - releases that must not be lost: their sends (node_calls_release.cc) and
//   their retries (release_retries.h).
// - a Redis Cluster's redirections (cluster_slots.h): a command answered
//   MOVED or ASK goes where the node said, TRYAGAIN again after a pause
//   within the node's deadline, each with its own confirmation. They are
//   followed here, above the transport, because what follows a redirected
//   command (its WAIT, a release behind its SET) must follow its new copy,
//   and the transport never sends a command twice.
//
// NodeCalls itself keeps one record per command in flight (Call,
// node_calls_record.h): its judge, its rounds (one per send), and the
// answer it delivers once.
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
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/confirmations.h"
#include "redlock/internal/release_retries.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/script_delivery.h"
#include "redlock/internal/scriptless.h"
#include "redlock/internal/transport.h"
#include "redlock/internal/votes.h"
#include "redlock/node_status.h"
#include "redlock/options.h"

namespace redlock::internal {

// What to do with a command the node answered NOSCRIPT.
enum class OnNoScript {
  kFail,    // a "no" (kUnavailable naming the flush): the command did not run
  kResend,  // its EVAL form goes again, at the end of the node's queue
};

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
    // Send's `tag`, given back: what the caller needs to place the answer
    // (its attempt and node), so that `done` holds no more than a pointer
    // or two and fits AnyInvocable's inline storage.
    uint64_t tag = 0;
  };
  using Done = absl::AnyInvocable<void(Answer)>;

  // `transport` and `clock` must outlive this. `modes`: which nodes forbid
  // scripting, as their handshakes found (null: none known yet).
  // `commands`: which script-free compare-and-set commands each node has
  // (server_commands.h; null: none, every release and extend is a script).
  NodeCalls(Transport* transport, const Clock* clock, const Options& options,
            std::shared_ptr<ScriptingModes> modes = nullptr,
            std::shared_ptr<ServerCommands> commands = nullptr);
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
                    OnNoScript noscript, Done done, uint64_t tag = 0);
  // The same, keeping `command` itself where it may be sent again (a
  // script, or a cluster node) instead of a copy.
  ConnectionId Send(int node, Command&& command, const Judge& judge, bool durable,
                    OnNoScript noscript, Done done, uint64_t tag = 0);

  // Removes `release` from `node`, behind the command that set its keys on
  // connection `after` (0: unknown), and makes sure it is not lost: when it
  // cannot be sent, is not answered, or the node answers it with an error,
  // it is sent again (EVAL form) every retry interval once the node takes
  // commands, until it is answered or `release->expires` has passed, that
  // time being pushed to a ttl after every attempt the node left
  // unanswered (a SET waiting in a stopped node's socket runs when the node
  // resumes). `done`, if set, gets the first answer.
  void Release(int node, ConnectionId after, std::shared_ptr<const KeysRelease> release,
               Done done = nullptr, uint64_t tag = 0);

  // Fills in what this layer knows of each node (lagging replicas, pending
  // releases).
  void AddHealth(std::vector<NodeHealth>* health) const;

  // Stops the retries; what is still pending is dropped.
  void Shutdown();

 private:
  struct Call;
  // A counted reference to a Call. One pointer: a callback that holds one
  // and a round or two fits AnyInvocable's inline storage (no allocation
  // per callback); the records themselves are recycled (node_calls.cc).
  class CallRef {
   public:
    CallRef() = default;
    explicit CallRef(Call* call);  // takes a reference
    // noexcept: a lambda that captures a `const CallRef&` holds a const
    // copy, which moves by copying; AnyInvocable keeps a callback inline
    // only when its move cannot throw.
    CallRef(const CallRef& other) noexcept;
    CallRef(CallRef&& other) noexcept : call_(other.call_) { other.call_ = nullptr; }
    CallRef& operator=(CallRef other) noexcept {
      std::swap(call_, other.call_);
      return *this;
    }
    ~CallRef();
    Call* operator->() const { return call_; }
    Call* get() const { return call_; }
    explicit operator bool() const { return call_ != nullptr; }

   private:
    Call* call_ = nullptr;
  };
  static Call* NewCallRecord();

  // Send's call for `command`, or null when it is answered without being
  // sent (a durable write while the node's replicas lag).
  CallRef NewCall(int node, const Command& command, const Judge& judge, bool durable,
                  OnNoScript noscript, Done done, uint64_t tag);
  // Whether the call keeps its command to send it again.
  bool KeepsCommand(const Call& call) const;
  // Sends a new call's first round, keeping `command` if it may go again.
  ConnectionId SendNew(const CallRef& call, Command&& command);
  ConnectionId SendOnce(const CallRef& call, int round, const Command& command);
  // Delivers the call's answer to `done` (the release's retry first, if it
  // is one).
  void Finish(const CallRef& call, Done done, Answer answer);
  // A durable write went on `conn`: its confirmation follows it.
  void Wrote(const CallRef& call, int round, ConnectionId conn);
  void OnWrite(const CallRef& call, int round, absl::StatusOr<Reply> r);
  void OnConfirm(const CallRef& call, int round, int write, Vote confirmation);
  // A cluster node's redirection or TRYAGAIN in `r`: true when the call
  // goes again (elsewhere, or later); *r becomes the failure when the
  // redirections ran out.
  bool Redirected(const CallRef& call, int round, absl::StatusOr<Reply>* r);
  bool cluster(int node) const { return clusters_[static_cast<size_t>(node)]; }
  ConnectionId SendRelease(int node, ReleaseRetries::Pending p, bool eval, Done done,
                           uint64_t tag = 0);
  // SendRelease's first try of a release whose command is built (not a
  // resend, not a cluster node): sent without a copy of its own.
  ConnectionId SendSharedRelease(int node, ReleaseRetries::Pending p, ConnectionId after, Done done,
                                 uint64_t tag);
  // Keeps `*p` for a retry unless answer `a` settled it.
  void KeepRelease(int node, ReleaseRetries::Pending* p, const Answer& a);

  Transport* const transport_;
  const Clock* const clock_;
  const absl::Duration node_timeout_;
  const std::vector<bool> clusters_;  // per node: routes by key (a Redis Cluster)
  ScriptDelivery delivery_;
  Confirmations confirmations_;
  ReleaseRetries retries_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_NODE_CALLS_H_
