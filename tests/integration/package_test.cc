// The Debian packages (scripts/package.sh, cmake/RedlockPackage.cmake),
// installed for real: this build tree is packaged, both packages are
// installed with dpkg -i, the consumers of tests/consumer/ are built against
// the installed files (find_package(redlock) and pkg-config, nothing
// pointing at a prefix) and run against a fleet of the test kit, and the
// packages are removed with dpkg -r, also when a step fails.
//
// It changes the machine while it runs, so it needs root and refuses to
// start when a redlock package is installed already or when a file of the
// packages exists already (dpkg would overwrite it and dpkg -r delete it):
// skipped then, and failed under CI=true.

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "testkit/files.h"
#include "testkit/fleet.h"
#include "testkit/gtest_fleet.h"
#include "testkit/process.h"

namespace redlock {
namespace {

constexpr char kDev[] = "libredlock-dev";
constexpr char kTool[] = "redlock";

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// A precondition this machine does not meet: a skip, a failure under CI.
#define REDLOCK_PACKAGE_REQUIRE(cond, why)                            \
  do {                                                                \
    if (!(cond)) {                                                    \
      if (InCi()) FAIL() << why << " (CI=true makes that a failure)"; \
      GTEST_SKIP() << why;                                            \
    }                                                                 \
  } while (0)

// Runs a command to completion; stdout and stderr together in `out`.
testkit::ProcessResult Sh(std::vector<std::string> argv,
                          std::vector<std::pair<std::string, std::string>> env = {},
                          absl::Duration timeout = absl::Minutes(5)) {
  testkit::ProcessOptions o;
  o.argv = std::move(argv);
  o.env = std::move(env);
  // Nothing may lead the consumers to files other than the installed ones.
  o.remove_env_prefixes = {"PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH", "redlock_DIR",
                           "LD_LIBRARY_PATH"};
  o.stdout_to = testkit::Stream::kPipe;
  o.stderr_to = testkit::Stream::kStdout;
  absl::StatusOr<testkit::ProcessResult> r = testkit::RunProcess(std::move(o), timeout);
  if (!r.ok()) {
    testkit::ProcessResult failed;
    failed.wait_status = 127 << 8;
    failed.out = std::string(r.status().message());
    return failed;
  }
  return *std::move(r);
}

std::string Describe(const std::vector<std::string>& argv, const testkit::ProcessResult& r) {
  return absl::StrCat(absl::StrJoin(argv, " "), ": ", testkit::DescribeWaitStatus(r.wait_status),
                      r.timed_out ? " (timed out)" : "", "\n", r.out);
}

bool Installed(const std::string& package) {
  testkit::ProcessResult r = Sh({"dpkg-query", "-W", "-f=${Status}", package});
  return r.exit_code() == 0 && absl::StrContains(r.out, "install ok installed");
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The regular files of a package ("/usr/bin/redlock", ...), from dpkg-deb -c.
std::vector<std::string> Files(const std::string& deb) {
  std::vector<std::string> out;
  testkit::ProcessResult r = Sh({"dpkg-deb", "-c", deb});
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    if (line.empty() || line[0] == 'd') continue;  // directories
    const size_t at = line.find(" ./");
    if (at == absl::string_view::npos) continue;
    std::string path(line.substr(at + 2));
    if (size_t arrow = path.find(" -> "); arrow != std::string::npos) path.resize(arrow);
    out.push_back(path);
  }
  return out;
}

std::string Field(const std::string& deb, const std::string& field) {
  testkit::ProcessResult r = Sh({"dpkg-deb", "-f", deb, field});
  return std::string(absl::StripTrailingAsciiWhitespace(r.out));
}

// Removes what the test installed, on every exit path.
class Uninstall {
 public:
  ~Uninstall() {
    if (armed_) (void)Now();
  }
  void Arm() { armed_ = true; }
  // dpkg -r of whichever of the two packages is installed; "" when done.
  std::string Now() {
    armed_ = false;
    std::vector<std::string> argv = {"dpkg", "-r"};
    for (const char* p : {kTool, kDev}) {
      if (Installed(p)) argv.push_back(p);
    }
    if (argv.size() == 2) return "";
    testkit::ProcessResult r = Sh(argv);
    return r.exit_code() == 0 ? "" : Describe(argv, r);
  }

 private:
  bool armed_ = false;
};

TEST(PackageTest, InstallsBuildsTheConsumersRunsThemAndUninstalls) {
  REDLOCK_PACKAGE_REQUIRE(geteuid() == 0, "dpkg -i needs root");
  for (const char* tool : {"dpkg", "dpkg-deb", "dpkg-query", "dpkg-shlibdeps", "pkg-config"}) {
    REDLOCK_PACKAGE_REQUIRE(!testkit::FindExecutable(tool).empty(),
                            absl::StrCat(tool, " is not installed"));
  }
  REDLOCK_PACKAGE_REQUIRE(!Installed(kDev) && !Installed(kTool),
                          "a redlock package is installed already: this test installs and "
                          "removes its own, and leaves yours alone");
  REDLOCK_REQUIRE_REDIS();

  testkit::TempDir tmp("redlock-package-test");
  ASSERT_FALSE(tmp.path().empty()) << "no temporary directory";

  // 1. The packages of this build tree.
  const std::vector<std::string> package = {REDLOCK_PACKAGE_SCRIPT, "--from-build",
                                            REDLOCK_BUILD_DIR, "--out", tmp.path() + "/debs"};
  testkit::ProcessResult made = Sh(package, {{"CPACK", REDLOCK_CPACK}}, absl::Minutes(10));
  ASSERT_EQ(made.exit_code(), 0) << Describe(package, made);
  std::string dev_deb, tool_deb;
  for (absl::string_view line : absl::StrSplit(made.out, '\n', absl::SkipEmpty())) {
    if (!absl::EndsWith(line, ".deb")) continue;
    if (absl::StrContains(line, "/libredlock-dev_")) dev_deb = std::string(line);
    if (absl::StrContains(line, "/redlock_")) tool_deb = std::string(line);
  }
  ASSERT_FALSE(dev_deb.empty() || tool_deb.empty()) << made.out;

  // 2. What they hold and need: the Debian names of the libraries.
  EXPECT_EQ(Field(dev_deb, "Package"), kDev);
  EXPECT_EQ(Field(tool_deb, "Package"), kTool);
  const std::string tool_depends = Field(tool_deb, "Depends");
  for (const char* lib : {"libabsl20220623", "libhiredis0.14", "libssl3", "libc6"}) {
    EXPECT_TRUE(absl::StrContains(tool_depends, lib)) << lib << " not in: " << tool_depends;
  }
  const std::string dev_depends = Field(dev_deb, "Depends");
  for (const char* lib : {"libabsl-dev", "libhiredis-dev", "libssl-dev", "pkg-config"}) {
    EXPECT_TRUE(absl::StrContains(dev_depends, lib)) << lib << " not in: " << dev_depends;
  }
  const std::vector<std::string> dev_files = Files(dev_deb);
  const std::vector<std::string> tool_files = Files(tool_deb);
  const std::string dev_list = absl::StrJoin(dev_files, "\n");
  for (const char* want : {"/usr/include/redlock/client.h", "/usr/include/multilock/multi_lock.h",
                           "/libredlock.a", "/libredlock_multilock.a", "/redlockConfig.cmake",
                           "/redlockTargets.cmake", "/pkgconfig/redlock.pc"}) {
    EXPECT_TRUE(absl::StrContains(dev_list, want)) << want << " not in " << dev_deb;
  }
  EXPECT_FALSE(absl::StrContains(dev_list, "/redlock/internal/")) << "private headers packaged";
  EXPECT_EQ(tool_files,
            (std::vector<std::string>{"/usr/bin/redlock", "/usr/share/man/man1/redlock.1.gz"}));

  // 3. Nothing of theirs is on the machine yet (dpkg would overwrite a file
  // no package owns, and dpkg -r would then delete it).
  for (const std::vector<std::string>* files : {&dev_files, &tool_files}) {
    for (const std::string& f : *files) {
      REDLOCK_PACKAGE_REQUIRE(!Exists(f), absl::StrCat(f, " exists already (no package owns it)"));
    }
  }

  // 4. Installed, and removed however the test ends.
  Uninstall uninstall;
  uninstall.Arm();
  const std::vector<std::string> install = {"dpkg", "-i", dev_deb, tool_deb};
  testkit::ProcessResult installed = Sh(install);
  ASSERT_EQ(installed.exit_code(), 0) << Describe(install, installed);
  ASSERT_TRUE(Installed(kDev) && Installed(kTool));

  testkit::ProcessResult version = Sh({"/usr/bin/redlock", "--version"});
  EXPECT_EQ(version.exit_code(), 0) << version.out;
  EXPECT_TRUE(absl::StartsWith(version.out, "redlock ")) << version.out;
  testkit::ProcessResult man = Sh({"zcat", "/usr/share/man/man1/redlock.1.gz"});
  EXPECT_TRUE(absl::StrContains(man.out, ".SH COMMANDS")) << man.out.substr(0, 2000);
  EXPECT_TRUE(absl::StrContains(man.out, ".SS acquire")) << man.out.substr(0, 2000);

  absl::StatusOr<std::unique_ptr<testkit::Fleet>> fleet = testkit::Fleet::Start({.nodes = 3});
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  const std::string nodes = (*fleet)->NodeList();

  // 5. find_package(redlock) from the installed CMake package.
  const std::string build = tmp.path() + "/consumer";
  const std::vector<std::string> configure = {
      REDLOCK_CMAKE, "-S", REDLOCK_CONSUMER_DIR, "-B", build, "-DCMAKE_CXX_COMPILER=" REDLOCK_CXX};
  testkit::ProcessResult configured = Sh(configure);
  ASSERT_EQ(configured.exit_code(), 0) << Describe(configure, configured);
  std::ifstream cache(build + "/CMakeCache.txt");
  std::stringstream cache_text;
  cache_text << cache.rdbuf();
  EXPECT_TRUE(absl::StrContains(cache_text.str(), "redlock_DIR:PATH=/usr/lib/"))
      << "find_package(redlock) did not use the installed package";
  const std::vector<std::string> compile = {REDLOCK_CMAKE, "--build", build};
  testkit::ProcessResult compiled = Sh(compile);
  ASSERT_EQ(compiled.exit_code(), 0) << Describe(compile, compiled);
  const std::vector<std::string> consumer = {build + "/consumer", "--nodes", nodes};
  testkit::ProcessResult ran = Sh(consumer, {}, absl::Minutes(1));
  EXPECT_EQ(ran.exit_code(), 0) << Describe(consumer, ran);

  // 6. pkg-config from the installed redlock.pc.
  testkit::ProcessResult prefix = Sh({"pkg-config", "--variable=prefix", "redlock"});
  EXPECT_EQ(absl::StripTrailingAsciiWhitespace(prefix.out), "/usr") << prefix.out;
  testkit::ProcessResult pc_flags = Sh({"pkg-config", "--cflags", "--libs", "redlock"});
  ASSERT_EQ(pc_flags.exit_code(), 0) << pc_flags.out;
  std::vector<std::string> cc = {REDLOCK_CXX,
                                 "-std=c++17",
                                 "-Wall",
                                 "-Wextra",
                                 "-Werror",
                                 "-pedantic",
                                 std::string(REDLOCK_CONSUMER_DIR) + "/pkgconfig_main.cc",
                                 "-o",
                                 tmp.path() + "/pc_consumer"};
  for (absl::string_view f :
       absl::StrSplit(pc_flags.out, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    cc.emplace_back(f);
  }
  testkit::ProcessResult pc_built = Sh(cc);
  ASSERT_EQ(pc_built.exit_code(), 0) << Describe(cc, pc_built);
  const std::vector<std::string> pc_consumer = {tmp.path() + "/pc_consumer", "--nodes", nodes};
  testkit::ProcessResult pc_ran = Sh(pc_consumer, {}, absl::Minutes(1));
  EXPECT_EQ(pc_ran.exit_code(), 0) << Describe(pc_consumer, pc_ran);

  // 7. Removed: the machine as it was.
  EXPECT_EQ(uninstall.Now(), "");
  EXPECT_FALSE(Installed(kDev) || Installed(kTool));
  for (const std::vector<std::string>* files : {&dev_files, &tool_files}) {
    for (const std::string& f : *files) EXPECT_FALSE(Exists(f)) << f << " is left behind";
  }
}

}  // namespace
}  // namespace redlock
