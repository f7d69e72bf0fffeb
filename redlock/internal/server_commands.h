// Which script-free compare-and-set commands a node has, learned per node
// at connection time from what the server says about its own commands,
// never from its version (every Valkey reports redis_version:7.2.4):
//
//   COMMAND INFO DELIFEQ DELEX   one entry per name: nil when the server has
//                                no such command
//   COMMAND DOCS SET             SET's arguments: a token IFEQ among them
//                                means SET key value IFEQ current
//
//   command     what it does                          where (checked, docs/compat.md)
//   DELIFEQ     DELIFEQ key value: :1 deleted, :0 not  Valkey 9.0+
//   DELEX       DELEX key IFEQ value (without the     Redis 8.4+, Valkey 9.2
//               condition it is a plain DEL)
//   SET IFEQ    SET key value IFEQ current PX ttl:    Valkey 8.1+, Redis 8.4+
//               +OK, or nil when the value differs
//
// The release and extend paths may use them in place of scripts where a
// node has them (docs/design.md 5.16); Health() shows what each node has.
// A server that refuses COMMAND (an ACL user without it, an old server) is
// taken as having none of them: the connection is fine.
//
// Thread-safe.

#ifndef REDLOCK_INTERNAL_SERVER_COMMANDS_H_
#define REDLOCK_INTERNAL_SERVER_COMMANDS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redlock/internal/connection.h"
#include "redlock/internal/reply.h"

namespace redlock::internal {

// What one node has.
struct NodeCommands {
  bool known = false;     // a handshake has read them
  bool delifeq = false;   // DELIFEQ key value
  bool delex = false;     // DELEX key IFEQ value
  bool set_ifeq = false;  // SET key value IFEQ current

  // "DELIFEQ, SET IFEQ", "none", or "unknown" before a handshake read them.
  std::string Describe() const;
  bool operator==(const NodeCommands& o) const {
    return known == o.known && delifeq == o.delifeq && delex == o.delex && set_ifeq == o.set_ifeq;
  }
};

// Per node: what its last handshake learned. Shared, like ScriptingModes,
// by the handshake steps (writers) and whoever reads it (Health, the lock
// paths: every release and extend asks). One byte per node, read and
// written whole without a lock.
class ServerCommands {
 public:
  explicit ServerCommands(int nodes);
  // What `node` has (known false until a handshake read it).
  NodeCommands Get(int node) const;
  void Set(int node, NodeCommands commands);
  int size() const { return static_cast<int>(nodes_.size()); }

 private:
  std::vector<std::atomic<uint8_t>> nodes_;  // NodeCommands' four flags as bits
};

// The reply to COMMAND INFO DELIFEQ DELEX: which of the two the server has
// (an entry that is an array describes the command, nil means unknown).
// False when the reply is not an array of two entries.
bool ParseCommandInfo(const Reply& reply, NodeCommands* out);

// The reply to COMMAND DOCS SET: whether SET takes the IFEQ condition (an
// argument whose token is IFEQ, at any depth: Valkey nests it in a oneof
// with NX and XX).
bool SetDocsHaveIfeq(const Reply& reply);

// The handshake steps of `node`: COMMAND INFO DELIFEQ DELEX, then COMMAND
// DOCS SET; the second's check stores the result in `commands`. Neither
// fails the connection: an error reply means "none" (an ACL that refuses
// COMMAND, a server without COMMAND DOCS).
std::vector<HandshakeStep> ServerCommandSteps(std::shared_ptr<ServerCommands> commands, int node);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SERVER_COMMANDS_H_
