// The servers the test kit starts, by name: Debian 12's Redis 7.0 (the
// default), Valkey 8.0 from bookworm-backports, and Valkey 9.1 and Redis 8.0
// built from Debian unstable's source packages by scripts/servers.sh.
//
//   REDLOCK_SERVER=valkey-9.1 ctest ...       every fleet, replica, cluster
//                                             and Sentinel of the kit runs
//                                             that server
//   absl::StatusOr<ServerBuild> s = RequireServer("valkey-9.1");
//
// Where each one is (scripts/servers.sh --print-path NAME says the same):
//   redis-7.0   redis-server and redis-sentinel on the PATH
//   valkey-8.0  valkey-server and valkey-sentinel on the PATH
//   valkey-9.1  $REDLOCK_SERVERS_DIR/valkey-9.1/bin/valkey-server (and
//               -sentinel), its Lua engine in ../lib/libvalkeylua.so
//   redis-8.0   $REDLOCK_SERVERS_DIR/redis-8.0/bin/redis-server (and
//               -sentinel)
// with REDLOCK_SERVERS_DIR defaulting to ~/.cache/redlock-servers.
//
// A server that is named but not installed is a skip (kFailedPrecondition)
// with the command that installs it, and a failure (kNotFound) under
// CI=true; an unknown name is always a failure (kInvalidArgument).
//
// Thread-safe (reads the environment and the file system only).

#ifndef REDLOCK_TESTKIT_SERVERS_H_
#define REDLOCK_TESTKIT_SERVERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace redlock::testkit {

inline constexpr char kDefaultServer[] = "redis-7.0";
// The environment variable that names the server (tests, bench, chaos).
inline constexpr char kServerEnv[] = "REDLOCK_SERVER";

struct ServerBuild {
  std::string name;  // "valkey-9.1"
  // The server binary (absolute when installed, else where it would be).
  std::string server;
  // Its Sentinel: the binary that runs as a Sentinel ("" when the build has
  // none installed).
  std::string sentinel;
  // The module that gives the server its Lua engine, loaded at start with
  // --loadmodule ("" when Lua is built in: the server cannot start without).
  std::string lua_module;
  bool installed = false;
  // How to install it: "scripts/servers.sh valkey-9.1".
  std::string install;
};

// Every name, the default first.
const std::vector<std::string>& ServerNames();

// $REDLOCK_SERVER, or kDefaultServer when unset or empty.
std::string SelectedServerName();

// $REDLOCK_SERVERS_DIR, or ~/.cache/redlock-servers.
std::string ServersDir();

// Where `name` is or would be (`installed` says which). kInvalidArgument for
// a name that is not one of ServerNames().
absl::StatusOr<ServerBuild> LocateServer(const std::string& name);

// `name`, installed: else kFailedPrecondition (skip), or kNotFound under
// CI=true, each naming the command that installs it.
absl::StatusOr<ServerBuild> RequireServer(const std::string& name);

// RequireServer(SelectedServerName()).
absl::StatusOr<ServerBuild> SelectedServer();

// The same for the server's Sentinel: kFailedPrecondition (skip), or
// kNotFound under CI=true, when the build has none.
absl::StatusOr<std::string> RequireSentinel(const ServerBuild& server);

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_SERVERS_H_
