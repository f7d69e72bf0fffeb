// What AttemptLoop (attempt_loop.h) is given by an acquiring operation, and
// how a node's answer names the attempt and node it belongs to.

#ifndef REDLOCK_INTERNAL_ATTEMPT_LOOP_CONFIG_H_
#define REDLOCK_INTERNAL_ATTEMPT_LOOP_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "redlock/stop_token.h"

namespace redlock::internal {

// What the loop needs of a request.
// The op names its call in messages with `std::string What() const`
// ("acquire \"r\""), built only when a message needs it.
struct AttemptLoopConfig {
  std::vector<std::string> keys;  // every key an attempt may set (with the prefix)
  absl::Duration ttl;
  std::optional<absl::Duration> wait;
  int max_attempts = 1;
  bool fail_fast_unavailable = false;
  StopToken stop;
};

// A node's answer names its attempt and node in its tag
// (NodeCalls::Answer::tag), so that the callback holds only the op and fits
// AnyInvocable's inline storage.
inline uint64_t AnswerTag(int attempt, int node) {
  return (uint64_t{static_cast<uint32_t>(attempt)} << 32) | static_cast<uint32_t>(node);
}
inline int AttemptOfTag(uint64_t tag) { return static_cast<int>(tag >> 32); }
inline int NodeOfTag(uint64_t tag) { return static_cast<int>(tag & 0xffffffffu); }

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_ATTEMPT_LOOP_CONFIG_H_
