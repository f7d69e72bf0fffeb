// Redis Cluster's key space, without I/O: which of the 16384 hash slots a key
// lives in (CRC16 of the key, or of its hash tag), the slot map a node
// reports (CLUSTER SLOTS), and the redirections a node answers with (MOVED,
// ASK, TRYAGAIN) and how a call follows them. The cluster locator
// (cluster_locator.h), the calls to the nodes (node_calls.h) and the checks
// of a call's keys (a call's keys must share a slot on a cluster node) use
// them.

#ifndef REDLOCK_INTERNAL_CLUSTER_SLOTS_H_
#define REDLOCK_INTERNAL_CLUSTER_SLOTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/command.h"
#include "redlock/internal/reply.h"
#include "redlock/options.h"

namespace redlock::internal {

inline constexpr int kClusterSlots = 16384;

// CRC16 (XMODEM), as Redis Cluster computes it.
uint16_t Crc16(absl::string_view data);

// The part of `key` that is hashed: the text between the first '{' and the
// first '}' after it when that is not empty (the key's hash tag), else the
// whole key.
absl::string_view HashedPart(absl::string_view key);

// True when `key` has a hash tag (HashedPart is not the whole key).
bool HasHashTag(absl::string_view key);

// The hash slot of `key`, 0..16383.
int KeySlot(absl::string_view key);

// A master and the slots it serves, as one entry of CLUSTER SLOTS.
struct SlotRange {
  int first = 0;
  int last = 0;  // inclusive
  std::string host;
  int port = 0;
};

// Parses a CLUSTER SLOTS reply. An error reply, a malformed one or one that
// covers no slot is an error naming what is wrong. An empty host (a master
// that does not know its own address) is replaced by `peer_host`, the host
// the reply came from, as redis-cli does.
absl::StatusOr<std::vector<SlotRange>> ParseClusterSlots(const Reply& reply,
                                                         const std::string& peer_host);

// A redirection: "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>".
struct Redirect {
  bool ask = false;  // ASK: this once, during a migration; MOVED: from now on
  int slot = 0;
  std::string host;
  int port = 0;
  std::string address() const;  // "host:port" (IPv6 in brackets)
};

// The redirection an error reply says, if it is one.
std::optional<Redirect> ParseRedirect(absl::string_view error);

// The calls to a cluster node follow its redirections (node_calls.h): a
// command answered MOVED or ASK did not run there and goes where the node
// said, at most kMaxRedirects times; one answered TRYAGAIN (a multi-key call
// whose keys a migration has split for a moment) goes again after
// TryAgainPause, within the node's deadline.
inline constexpr int kMaxRedirects = 5;

// The copy of `command` to send after `redirect`: on no earlier connection
// (a redirected command follows nothing) and, for ASK, once to the importing
// master with ASKING in front (one more reply).
Command RedirectedCopy(const Command& command, const Redirect& redirect);

// The answer of a command sent as ASKING then itself: the second reply (or
// ASKING's own error).
absl::StatusOr<Reply> AnswerAfterAsking(absl::StatusOr<Reply> r);

// TRYAGAIN, and the pause before the command goes again.
bool IsTryAgain(const absl::StatusOr<Reply>& r);
absl::Duration TryAgainPause(absl::Duration node_timeout);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_CLUSTER_SLOTS_H_
