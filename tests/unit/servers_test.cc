// The test kit's servers by name (testkit/servers.h) and scripts/servers.sh
// agree: the same names, and for each installed server the same binary.

#include "testkit/servers.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "testkit/process.h"

namespace redlock::testkit {
namespace {

// Runs scripts/servers.sh with `args`; its stdout, and its exit code.
std::string Script(const std::vector<std::string>& args, int* code) {
  std::vector<std::string> argv = {REDLOCK_SERVERS_SCRIPT};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<ProcessResult> r =
      RunProcess({.argv = argv, .stdout_to = Stream::kPipe}, absl::Seconds(60));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  *code = r->exit_code();
  return r->out;
}

TEST(ServersTest, TheScriptAndTheKitKnowTheSameNames) {
  int code = -1;
  std::vector<std::string> listed =
      absl::StrSplit(Script({"--list"}, &code), '\n', absl::SkipEmpty());
  EXPECT_EQ(code, 0);
  EXPECT_EQ(listed, ServerNames());
  EXPECT_EQ(ServerNames()[0], kDefaultServer);
}

TEST(ServersTest, EachInstalledServerIsTheSameBinary) {
  for (const std::string& name : ServerNames()) {
    absl::StatusOr<ServerBuild> b = LocateServer(name);
    ASSERT_TRUE(b.ok()) << b.status();
    int code = -1;
    std::string path(absl::StripTrailingAsciiWhitespace(Script({"--print-path", name}, &code)));
    if (b->installed) {
      EXPECT_EQ(code, 0) << name;
      EXPECT_EQ(path, b->server) << name;
    } else {
      // The script also checks the version; the kit only that the files
      // are there: a server the kit lacks, the script lacks too.
      EXPECT_NE(code, 0) << name << " at " << path;
    }
  }
}

TEST(ServersTest, AnUnknownNameIsAnErrorNamingTheKnownOnes) {
  absl::StatusOr<ServerBuild> b = LocateServer("redis-6.2");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("valkey-9.1"), absl::string_view::npos) << b.status();
  int code = -1;
  Script({"--print-path", "redis-6.2"}, &code);
  EXPECT_NE(code, 0);
}

TEST(ServersTest, AMissingServerNamesTheCommandThatInstallsIt) {
  // A servers dir with nothing in it: the built servers are missing there.
  const char* ci = std::getenv("CI");
  const std::string saved_ci = ci == nullptr ? "" : ci;
  const char* dir = std::getenv("REDLOCK_SERVERS_DIR");
  const std::string saved_dir = dir == nullptr ? "" : dir;
  setenv("REDLOCK_SERVERS_DIR", "/nonexistent-redlock-servers", 1);
  unsetenv("CI");
  absl::StatusOr<ServerBuild> b = RequireServer("valkey-9.1");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("scripts/servers.sh valkey-9.1"), absl::string_view::npos)
      << b.status();
  setenv("CI", "true", 1);
  b = RequireServer("valkey-9.1");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound) << "CI=true must fail, not skip";
  if (ci == nullptr) {
    unsetenv("CI");
  } else {
    setenv("CI", saved_ci.c_str(), 1);
  }
  if (dir == nullptr) {
    unsetenv("REDLOCK_SERVERS_DIR");
  } else {
    setenv("REDLOCK_SERVERS_DIR", saved_dir.c_str(), 1);
  }
}

TEST(ServersTest, TheSelectedServerComesFromTheEnvironment) {
  unsetenv(kServerEnv);
  EXPECT_EQ(SelectedServerName(), kDefaultServer);
  setenv(kServerEnv, "valkey-8.0", 1);
  EXPECT_EQ(SelectedServerName(), "valkey-8.0");
  setenv(kServerEnv, "", 1);
  EXPECT_EQ(SelectedServerName(), kDefaultServer);
  unsetenv(kServerEnv);
}

}  // namespace
}  // namespace redlock::testkit
