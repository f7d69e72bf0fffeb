#include "testkit/servers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "testkit/fleet.h"
#include "testkit/process.h"

namespace redlock::testkit {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A Debian package's binary: found on the PATH, else where Debian puts it.
std::string OnPath(const std::string& binary) {
  std::string found = FindExecutable(binary);
  return found.empty() ? absl::StrCat("/usr/bin/", binary) : found;
}

absl::Status Missing(const std::string& what, const std::string& install) {
  if (UnderCi()) {
    return absl::NotFoundError(
        absl::StrCat(what, " is not installed, and CI=true makes that a failure: run ", install));
  }
  return absl::FailedPreconditionError(absl::StrCat(what, " is not installed (run ", install, ")"));
}

}  // namespace

const std::vector<std::string>& ServerNames() {
  static const std::vector<std::string>* names =
      new std::vector<std::string>{kDefaultServer, "valkey-8.0", "valkey-9.1", "redis-8.0"};
  return *names;
}

std::string SelectedServerName() {
  const char* e = std::getenv(kServerEnv);
  return e == nullptr || *e == '\0' ? kDefaultServer : e;
}

std::string ServersDir() {
  const char* dir = std::getenv("REDLOCK_SERVERS_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr ? home : "", "/.cache/redlock-servers");
}

absl::StatusOr<ServerBuild> LocateServer(const std::string& name) {
  ServerBuild b;
  b.name = name;
  b.install = absl::StrCat("scripts/servers.sh ", name);
  if (name == "redis-7.0") {
    b.server = OnPath("redis-server");
    b.sentinel = OnPath("redis-sentinel");
  } else if (name == "valkey-8.0") {
    b.server = OnPath("valkey-server");
    b.sentinel = OnPath("valkey-sentinel");
  } else if (name == "valkey-9.1" || name == "redis-8.0") {
    const std::string kind = name.substr(0, name.find('-'));
    const std::string bin = absl::StrCat(ServersDir(), "/", name, "/bin/");
    b.server = absl::StrCat(bin, kind, "-server");
    b.sentinel = absl::StrCat(bin, kind, "-sentinel");
    if (kind == "valkey") {
      b.lua_module = absl::StrCat(ServersDir(), "/", name, "/lib/libvalkeylua.so");
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown server '", name, "' (", kServerEnv,
                                                   " or --server: one of ",
                                                   absl::StrJoin(ServerNames(), ", "), ")"));
  }
  b.installed = IsExecutableFile(b.server) && (b.lua_module.empty() || IsFile(b.lua_module));
  if (!IsExecutableFile(b.sentinel)) b.sentinel.clear();
  return b;
}

absl::StatusOr<ServerBuild> RequireServer(const std::string& name) {
  absl::StatusOr<ServerBuild> b = LocateServer(name);
  if (!b.ok()) return b.status();
  if (!b->installed) return Missing(absl::StrCat(name, " (", b->server, ")"), b->install);
  return b;
}

absl::StatusOr<ServerBuild> SelectedServer() { return RequireServer(SelectedServerName()); }

absl::StatusOr<std::string> RequireSentinel(const ServerBuild& server) {
  if (!server.sentinel.empty()) return server.sentinel;
  return Missing(absl::StrCat("the Sentinel of ", server.name), server.install);
}

}  // namespace redlock::testkit
