// One command for one node, as the operations build it and the transport
// sends it: its RESP bytes, the reply types it can get, what it follows, the
// hash slot of its keys; the script commands' EVALSHA and EVAL forms; and
// the callback that gets a node's answer.

#ifndef REDLOCK_INTERNAL_COMMAND_H_
#define REDLOCK_INTERNAL_COMMAND_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {

// A connection of a node, as Transport::Send names it: unique within the
// transport, never reused. 0 names none.
using ConnectionId = uint64_t;

// One command for one node.
struct Command {
  // The command in RESP.
  std::string payload;
  // When `payload` is an EVALSHA of this script (ScriptCommand): the script,
  // for the caller to build the EVAL form (EvalFallback). The transport
  // ignores it: a NOSCRIPT answer is an answer like any other.
  const Script* script = nullptr;
  // The connection of an earlier command this one must follow (0: none): a
  // release behind its SET, a WAIT behind its write. While that connection
  // is still the node's current one, the command is queued on it behind the
  // earlier one whatever the node's circuit breaker says, and over
  // max_in_flight_per_node up to twice that (the load it would be refused
  // for is made of the commands it must follow); it is also still written
  // while the transport shuts down. Once that connection is gone, the
  // command is treated as any other.
  ConnectionId after = 0;
  // With `after`: only on that connection. Once it is gone the command is
  // refused (kUnavailable) instead of going on another: the second half of a
  // WATCH ... EXEC transaction means nothing on a connection that does not
  // hold its WATCH (scriptless.h).
  bool pinned = false;
  // The number of commands in `payload` (RESP commands sent back to back,
  // never split by another caller's). With more than one, the callback gets
  // an array of their replies, in order (errors included).
  uint16_t replies = 1;
  // Not cancelled when the transport shuts down: its real answer is awaited
  // (up to the node timeout, as a command that follows another), so that
  // what it starts can finish (a release run as a transaction, whose second
  // half is sent on the first half's answer).
  bool drain = false;
  // The hash slot of the command's keys (cluster_slots.h; -1: no key): a
  // node that is a Redis Cluster sends it to the master of that slot.
  // ScriptCommand sets it; a command that follows another (`after`) goes
  // where that one went whatever its slot.
  int slot = -1;
  // A node that is a Redis Cluster answered ASK: this one command goes to
  // that master ("host:port"), its payload starting with ASKING. Empty
  // otherwise.
  std::string asking_at;
  // Free-form name for tests and diagnostics ("acquire", "release", ...).
  const char* op = "";
  // The reply types this command can get (reply.h, kExpect*; 0: anything).
  uint8_t expect = 0;
};

// A Command a thread builds one kind of send in (`Tag` names the kind):
// the thread's own, its buffers reused from one send to the next (the
// transport copies what it sends), so a warm sender allocates nothing. Held
// for one send; a send of the same kind from within it, on the same thread,
// gets a fresh Command of its own.
template <typename Tag>
class ScratchCommand {
 public:
  ScratchCommand() : slot_(ThreadSlot()), borrowed_(!slot_.busy) { slot_.busy = true; }
  ~ScratchCommand() {
    if (borrowed_) slot_.busy = false;
  }
  ScratchCommand(const ScratchCommand&) = delete;
  ScratchCommand& operator=(const ScratchCommand&) = delete;

  Command& operator*() { return borrowed_ ? slot_.command : own_; }

 private:
  struct Slot {
    Command command;
    bool busy = false;
  };
  static Slot& ThreadSlot() {
    thread_local Slot slot;
    return slot;
  }
  Slot& slot_;
  const bool borrowed_;
  Command own_;
};

// EVALSHA script numkeys keys... args...
Command ScriptCommand(const Script& script, const std::vector<std::string>& keys,
                      const std::vector<std::string>& args);
// The same with views of the arguments (nothing copied before the payload:
// the steady path's release).
Command ScriptCommandOf(const Script& script, const std::vector<std::string>& keys,
                        std::initializer_list<absl::string_view> args);
// The same, each key and argument the concatenation of its pieces (the first
// `num_keys` of `args` are the keys), written straight into the payload:
// nothing is built before it (the release of one lease: its key is the
// prefix and the resource, its channel a prefix and the key). The slot is
// the first key's. `first_key_at`, if set, gets the offset of the first
// key's bytes in the payload.
Command ScriptCommandOfPieces(const Script& script, size_t num_keys,
                              std::initializer_list<std::initializer_list<absl::string_view>> args,
                              size_t* first_key_at = nullptr);

// The EVAL form of a Command made by ScriptCommand.
std::string EvalFallback(const Command& command);

// What a node answered, or why it did not (kUnavailable: timeout, connection
// failure, circuit breaker, too many requests in flight; kCancelled: the
// transport is shutting down). A Redis error reply is an OK status holding a
// Reply of type kError.
using NodeCallback = absl::AnyInvocable<void(absl::StatusOr<Reply>)>;

// What a request whose reply was lost on a connection that stayed open
// ends with (the queue finds it out at its next PING marker; docs/design.md 6.3).
absl::Status LostReplyError();

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_COMMAND_H_
