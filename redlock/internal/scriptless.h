// Nodes that forbid scripting: an ACL user without @scripting, EVAL,
// EVALSHA and SCRIPT renamed away, or no Lua engine (Valkey 9.1 without its
// Lua module). The handshake learns it (SCRIPT LOAD is
// refused) and NodeCalls then runs each script's effect on that node with
// WATCH / MULTI / EXEC instead, with the same outcome and the same reply
// (docs/design.md 5.16):
//
//   phase 1   WATCH <every key the script touches; an acquisition only its
//             lock keys>; the reads (EXISTS, GETRANGE) the script would make
//   decide    as the script would, on what was read
//   phase 2   MULTI; the writes (an acquisition's counter reads); EXEC
//             (or UNWATCH when nothing is written)
//
// EXEC runs only if no watched key changed since the WATCH, so the reads and
// the writes are one atomic step, as in the script; an aborted EXEC is run
// again from phase 1 (release, extend, fencing commit: up to 3 times) or is
// a "no" (an acquisition: a lock key changed meanwhile; kUnavailable, not
// "held", and never run again: its release may be queued behind it). An
// acquisition's counters are read inside MULTI instead of watched: another
// resource's commit that raises a shared counter
// (Options::FencingCounters::kShared) does not abort it. A fencing commit
// writes its counters even when not raising them, as its script does.
//
// Why one transaction at a time per node, on the shared connection: WATCH
// state belongs to a connection, and every caller's commands are pipelined
// on the node's one command connection. Another caller's EXEC, DISCARD or
// UNWATCH between our WATCH and our EXEC would drop our watch and let our
// EXEC run unconditionally; another caller's commands inside our MULTI would
// run in our transaction. So (a) MULTI ... EXEC is one payload (one
// Command, Command::replies), which no other caller's command can split;
// (b) phase 2 is pinned to phase 1's connection (Command::pinned: refused
// if that connection is gone, never sent on a new one without the WATCH);
// (c) the runner keeps one transaction per node between its WATCH and its
// EXEC: the next one's WATCH is sent right after the previous one's EXEC (or
// UNWATCH), so transactions follow each other at one round trip each. Plain
// commands (SET NX, WAIT, PING, a read) may run between a WATCH and its
// MULTI: they never touch the watch state. A connection of our own per
// transaction would allow several at once, but would cost a connection
// handshake or a pool per node, and the engine's one-connection-per-node
// ordering (a release follows its SET on the SET's connection) would no
// longer hold between them.
//
// When the client is destroyed, a release between its WATCH and its EXEC
// still finishes (Command::drain: the engine awaits its answers instead of
// cancelling them), and the transactions queued behind it go out on the
// same connection, within the engine's drain window (node_timeout); what is
// left then is dropped, and its keys go at their ttl.
//
// Scripts with no script-free form (the lock family's, say) are refused on
// such a node with an error naming it. Each script's form (its reads, its
// writes, its reply) is in scriptless_forms.h; this file runs them.
//
// Thread-safe. Callbacks run on the transport's thread, never inline.

#ifndef REDLOCK_INTERNAL_SCRIPTLESS_H_
#define REDLOCK_INTERNAL_SCRIPTLESS_H_

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/transport.h"

namespace redlock::internal {

// Per node: does it run the client's scripts? Written by the handshake (and
// by a script refused at run time), read by NodeCalls and Health.
class ScriptingModes {
 public:
  explicit ScriptingModes(int nodes);
  // True once the node refused scripting; false while it runs scripts or
  // has not been reached yet.
  bool scriptless(int node) const;
  // What the node answered when it refused ("" while it runs scripts).
  std::string reason(int node) const;
  void SetScripts(int node);
  void SetScriptless(int node, std::string reason);

 private:
  mutable std::mutex mu_;
  std::unique_ptr<std::atomic<bool>[]> scriptless_;
  std::vector<std::string> reasons_;
};

// True when an error reply says the node refuses the scripting command
// itself (NOPERM for EVAL/EVALSHA/SCRIPT, or one of them unknown: renamed or
// removed), or has no Lua engine (Valkey 9.1 without its Lua module: "ERR
// Could not find scripting engine 'lua'"), not that a script failed.
bool RefusesScripting(absl::string_view error);

// The handshake steps of `node`: SCRIPT LOAD of every script. A node that
// refuses them is marked scriptless in `modes` (the connection is fine),
// unless `scripts_required` (a cluster node: the connection fails, saying
// why); one that loads them, as running scripts. Any other error fails the
// connection.
std::vector<HandshakeStep> ScriptLoadSteps(std::shared_ptr<ScriptingModes> modes, int node,
                                           bool scripts_required = false);

// A ScriptCommand's keys and arguments (EVALSHA or EVAL form). False when
// `payload` is not one.
bool DecodeScriptCall(absl::string_view payload, std::vector<std::string>* keys,
                      std::vector<std::string>* args);
// The same as views into `payload` (valid while it is), with no allocation
// for up to four keys and four arguments: the steady path's release and
// extension by the server's own commands (ScriptDelivery::SendNative).
using ScriptCallViews = absl::InlinedVector<absl::string_view, 4>;
bool DecodeScriptCallViews(absl::string_view payload, ScriptCallViews* keys, ScriptCallViews* args);

// How long a script-free transaction waits for its turn on its node before
// it fails as a node that did not answer: ten node timeouts, at least a
// second. A queue forms under load (one WATCH ... EXEC at a time per node,
// two round trips each) and must not fail votes that a busy node would
// give; the bound keeps a vote within the call's deadline when the node is
// slow for every transaction ahead of it.
absl::Duration ScriptlessTurnWait(absl::Duration node_timeout);

class ScriptlessRunner {
 public:
  // Told the connection a transaction's writes (its MULTI ... EXEC) went on,
  // once queued: what a durability check must follow.
  using Written = absl::AnyInvocable<void(ConnectionId)>;

  // A connection id that names no connection: returned for a transaction
  // queued behind another one of its node (a command that follows it then
  // goes as any command, and on this node, behind it in the runner).
  static constexpr ConnectionId kQueued = ~ConnectionId{0};

  // `transport` must outlive this. At most `max_waiting` transactions wait
  // per node (Options::max_in_flight_per_node); more are refused at once. A
  // transaction whose turn has not come within `turn_wait`
  // (ScriptlessTurnWait) leaves the queue and fails as a node that did not
  // answer: a vote does not wait for every transaction ahead of it, each of
  // which may take up to a node timeout.
  ScriptlessRunner(Transport* transport, size_t max_waiting, absl::Duration turn_wait);
  ~ScriptlessRunner();
  ScriptlessRunner(const ScriptlessRunner&) = delete;
  ScriptlessRunner& operator=(const ScriptlessRunner&) = delete;

  // Runs the script of `command` (a ScriptCommand) on `node` without
  // scripting. `done` gets a reply shaped as the script's would be (or an
  // error reply, or why the node did not answer); `written`, if set, is
  // called when the writes are queued. `command.after` places phase 1 behind
  // an earlier command. Returns the connection phase 1 went on, kQueued, or
  // 0 when it was refused at once (`done` then gets why).
  ConnectionId Run(int node, const Command& command, Written written, NodeCallback done);

  // Transactions of `node` waiting for their turn (Health's in_flight).
  size_t waiting(int node) const;

 private:
  struct Tx;
  struct NodeQueue {
    bool busy = false;  // a transaction is between its WATCH and its EXEC
    std::deque<std::shared_ptr<Tx>> waiting;
  };

  // The keys phase 1 watches and reads: an acquisition's lock keys (its
  // counters are read inside MULTI), every key of the others.
  ConnectionId SendPhase1(const std::shared_ptr<Tx>& tx);
  void OnPhase1(const std::shared_ptr<Tx>& tx, absl::StatusOr<Reply> r);
  void OnPhase2(const std::shared_ptr<Tx>& tx, absl::StatusOr<Reply> r);
  // The node's transaction left its WATCH behind (its phase 1 went on
  // `previous`): the next one starts.
  void Next(int node, ConnectionId previous);
  // Sends UNWATCH behind phase 1 (the WATCH may have run).
  void Unwatch(const Tx& tx);

  // The turn of `tx` did not come within turn_wait_: out of the queue, and
  // failed, unless it left already.
  void TurnMissed(const std::shared_ptr<Tx>& tx);

  Transport* const transport_;
  const size_t max_waiting_;
  const absl::Duration turn_wait_;
  mutable std::mutex mu_;
  std::vector<NodeQueue> nodes_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SCRIPTLESS_H_
