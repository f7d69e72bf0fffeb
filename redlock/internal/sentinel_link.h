// One Sentinel of a Sentinel-managed node (docs/design.md 6.8): a
// connection that asks the Sentinel, in its handshake, where the master is
// (SENTINEL get-master-addr-by-name) and with which config epoch (SENTINEL
// MASTER), then stays subscribed to +switch-master. The locator
// (sentinel_locator.cc) runs it and keeps it alive with PINGs.

#ifndef REDLOCK_INTERNAL_SENTINEL_LINK_H_
#define REDLOCK_INTERNAL_SENTINEL_LINK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/sentinel_choice.h"
#include "redlock/options.h"

namespace redlock::internal {

inline constexpr absl::string_view kSwitchMaster = "+switch-master";

struct SentinelLink {
  SentinelLink(const Connection::Settings& settings, const SentinelAddress& at);

  // The handshake: login with the Sentinels' credentials, the two questions
  // about `spec.master` (answers kept in asked_*), the subscription.
  std::vector<HandshakeStep> Steps(const SentinelSpec& spec);
  // The handshake completed: its answer becomes the link's.
  void TakeAnswer();

  Connection conn;
  const std::string address;  // "host:port"
  // What the handshake under way was told (taken once it completes).
  std::string asked_host;
  int asked_port = 0;
  int64_t asked_epoch = -1;
  // Its last answer ("" before any), with its config epoch (-1: unknown).
  std::string host;
  int port = 0;
  int64_t epoch = -1;
  // The discovery round its last answer belongs to, and the last round in
  // which it failed.
  uint64_t answered_round = 0;
  uint64_t failed_round = 0;
  std::string error;  // why its last attempt failed ("" since it answered)
  SentinelTime last_heard{};
  bool ping_out = false;
  SentinelTime ping_sent{};
};

// What a +switch-master message says of master `name` (nullopt: another
// message, or another master of this Sentinel):
// ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"].
struct SwitchMaster {
  std::string old_host;
  std::string old_port;
  std::string host;
  int port = 0;
};
std::optional<SwitchMaster> ParseSwitchMaster(const Reply& message, absl::string_view name);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SENTINEL_LINK_H_
