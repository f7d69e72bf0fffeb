// The real-server fleet fixture itself (testkit/fleet.h).

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "testkit/gtest_fleet.h"

namespace redlock::testkit {
namespace {

bool Alive(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

TEST(FleetTest, StartsNodesThatAnswerAndControlsThem) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 3});
  REDLOCK_ASSERT_OK(fleet.status());
  Fleet& f = **fleet;
  ASSERT_EQ(f.size(), 3);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<RedisValue> pong = f.Command(i, {"PING"});
    REDLOCK_ASSERT_OK(pong.status());
    EXPECT_EQ(pong->str, "PONG");
    EXPECT_EQ(f.endpoint(i).host, "127.0.0.1");
  }
  EXPECT_EQ(f.NodeList(), f.address(0) + "," + f.address(1) + "," + f.address(2));
  // Stop: the node does not answer; continue: it does.
  REDLOCK_ASSERT_OK(f.Stop(1));
  EXPECT_FALSE(f.Command(1, {"PING"}, absl::Milliseconds(200)).ok());
  REDLOCK_ASSERT_OK(f.Continue(1));
  REDLOCK_EXPECT_OK(f.Command(1, {"PING"}).status());
  // Kill + start on the same port; without persistence the data is gone.
  REDLOCK_ASSERT_OK(f.Command(2, {"SET", "k", "v"}).status());
  int port = f.port(2);
  pid_t before = f.pid(2);
  REDLOCK_ASSERT_OK(f.Kill(2));
  EXPECT_EQ(f.pid(2), -1);
  EXPECT_FALSE(Alive(before));
  EXPECT_FALSE(f.Kill(2).ok()) << "not running";
  REDLOCK_ASSERT_OK(f.StartNode(2));
  EXPECT_EQ(f.port(2), port);
  absl::StatusOr<RedisValue> v = f.Command(2, {"GET", "k"});
  REDLOCK_ASSERT_OK(v.status());
  EXPECT_EQ(v->type, RedisValue::Type::kNil);
}

TEST(FleetTest, AofAlwaysSurvivesKillNine) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 1, .aof = true});
  REDLOCK_ASSERT_OK(fleet.status());
  Fleet& f = **fleet;
  REDLOCK_ASSERT_OK(f.Command(0, {"SET", "k", "v"}).status());
  REDLOCK_ASSERT_OK(f.Restart(0));
  absl::StatusOr<RedisValue> v = f.Command(0, {"GET", "k"});
  REDLOCK_ASSERT_OK(v.status());
  EXPECT_EQ(v->str, "v");
}

TEST(FleetTest, PasswordAndLoopbackOnly) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 1, .password = "s3cret"});
  REDLOCK_ASSERT_OK(fleet.status());
  REDLOCK_EXPECT_OK((*fleet)->Command(0, {"PING"}).status());
  EXPECT_EQ((*fleet)->endpoint(0).password, "s3cret");
  auto bad = Fleet::Start({.nodes = 1, .hosts = {"10.0.0.1"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FleetTest, ACrashedTestBinaryLeavesNoOrphanServers) {
  REDLOCK_REQUIRE_REDIS();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The "test binary": starts a fleet, reports the pids, then crashes.
    close(fds[0]);
    auto fleet = Fleet::Start({.nodes = 2});
    if (!fleet.ok()) _exit(3);
    std::string pids =
        std::to_string((*fleet)->pid(0)) + " " + std::to_string((*fleet)->pid(1)) + "\n";
    ssize_t w = write(fds[1], pids.data(), pids.size());
    (void)w;
    abort();
  }
  close(fds[1]);
  char buf[64] = {};
  ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_GT(n, 0) << "the child could not start its fleet";
  EXPECT_TRUE(WIFSIGNALED(status));
  std::vector<pid_t> pids;
  for (absl::string_view p : absl::StrSplit(absl::string_view(buf, static_cast<size_t>(n)), ' ',
                                            absl::SkipWhitespace())) {
    int pid = 0;
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(p), &pid));
    pids.push_back(pid);
  }
  ASSERT_EQ(pids.size(), 2u);
  // The servers were the crashed process's children: PR_SET_PDEATHSIG killed
  // them; they are reparented and reaped by init (bounded wait).
  for (pid_t pid : pids) {
    bool gone = false;
    for (int tries = 0; tries < 200 && !gone; ++tries) {
      gone = !Alive(pid);
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(gone) << "redis-server " << pid << " outlived its crashed parent";
    if (!gone) kill(pid, SIGKILL);  // ours (started by our child): do not leave it
  }
}

}  // namespace
}  // namespace redlock::testkit
