// How a script command reaches a node (docs/design.md 5.12, 5.16): one job
// of the calls to the nodes (node_calls.h).
//
// - By SHA (EVALSHA): every connection loads the scripts in its handshake
//   (ScriptLoadSteps). A node whose script cache was flushed answers
//   NOSCRIPT: the command did not run; the scripts are loaded again behind
//   it (one reload at a time per node), and the caller either counts it as
//   a "no" or sends its EVAL form again (Again).
// - On a node that has them (server_commands.h: Valkey 9's DELIFEQ, Redis
//   8.4's DELEX ... IFEQ, Valkey 8.1's and Redis 8.4's SET ... IFEQ), the
//   release of one key and the extension of one key go as those commands
//   instead, with the script's reply: no script cache, no NOSCRIPT, and they
//   work where Lua is gone. A release that announces pipelines a PUBLISH
//   behind the delete (always: a spurious wake-up is harmless, a lost one is
//   not). A node that answers such a command "unknown command" (replaced by
//   another server since its handshake) goes back to the scripts.
// - On a node that forbids scripting (scriptless.h), as a WATCH/MULTI/EXEC
//   transaction with the same reply (ScriptlessRunner). A script refused at
//   run time (an ACL changed) marks the node: it goes script-free from now
//   on, and a command that may run later is sent again that way.
//
// Thread-safe. Callbacks run on the transport's thread, never inline.

#ifndef REDLOCK_INTERNAL_SCRIPT_DELIVERY_H_
#define REDLOCK_INTERNAL_SCRIPT_DELIVERY_H_

#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/internal/command.h"
#include "redlock/internal/scriptless.h"
#include "redlock/internal/server_commands.h"
#include "redlock/internal/transport.h"
#include "redlock/node_status.h"

namespace redlock::internal {

class ScriptDelivery {
 public:
  // What an answer to a script command says about scripting.
  enum class Scripting {
    kRan,       // nothing: the answer is the command's
    kNoScript,  // NOSCRIPT: it did not run; the scripts are being loaded again
    kRefused,   // the node refused scripting itself: it is script-free now
  };

  // `transport` must outlive this. `modes`: which nodes forbid scripting,
  // as their handshakes found (null: none known yet). At most
  // `max_waiting` transactions wait per script-free node, each at most
  // `turn_wait` for its turn (ScriptlessTurnWait).
  // `commands`: which script-free commands each node has (null: none).
  ScriptDelivery(Transport* transport, std::shared_ptr<ScriptingModes> modes,
                 std::shared_ptr<ServerCommands> commands, size_t max_waiting,
                 absl::Duration turn_wait);
  ScriptDelivery(const ScriptDelivery&) = delete;
  ScriptDelivery& operator=(const ScriptDelivery&) = delete;

  // How a command goes to a node.
  enum class Form {
    kAsIs,         // the command itself (a script by SHA, or no script)
    kNative,       // a single-key release or extension as the node's commands
    kTransaction,  // a script as a WATCH/MULTI/EXEC transaction
  };
  Form FormFor(int node, const Command& command) const;
  // True when a script command to `node` runs as a transaction.
  bool Transacted(int node, const Command& command) const {
    return FormFor(node, command) == Form::kTransaction;
  }

  // Sends `command` to `node`: a script command to a script-free node as a
  // transaction (`written`, if set, told the connection its writes went on
  // once queued), anything else to the transport as it is. Returns the
  // connection it was queued on (ScriptlessRunner::kQueued for a
  // transaction waiting its turn; 0: refused, `done` gets why).
  ConnectionId Deliver(int node, const Command& command, ScriptlessRunner::Written written,
                       NodeCallback done);

  // Reads an answer to a command of `script` (null: not a script) that went
  // on connection `on`: a NOSCRIPT starts a reload behind it; a refusal of
  // scripting marks the node script-free.
  Scripting Read(int node, const Script* script, const absl::StatusOr<Reply>& r, ConnectionId on);

  // The copy of `command` to send again after Read said kNoScript (its EVAL
  // form) or kRefused (itself: it now goes as a transaction).
  static Command Again(const Command& command, Scripting why);

  // Fills NodeHealth's scriptless, scriptless_reason, transactions_waiting
  // and path (how the node's locks are released and extended).
  void AddHealth(std::vector<NodeHealth>* health) const;

  // No reload starts after this.
  void Shutdown();

 private:
  // Loads the scripts again on the connection `on` (which got NOSCRIPT).
  void Reload(int node, ConnectionId on);
  // The release of one key, or its extension, as `node`'s own commands.
  ConnectionId SendNative(int node, const Command& command, NodeCallback done);
  // Sends `c` (SendNative's) and reads its replies back into the script's
  // form: the command's own (not ASKING's or the PUBLISH's), an extension's
  // OK as 1.
  ConnectionId SendNativeCommand(int node, const Command& c, bool release, NodeCallback done);

  Transport* const transport_;
  const std::shared_ptr<ScriptingModes> modes_;
  const std::shared_ptr<ServerCommands> commands_;
  ScriptlessRunner runner_;
  mutable std::mutex mu_;
  std::vector<bool> reloading_;
  bool stopped_ = false;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SCRIPT_DELIVERY_H_
