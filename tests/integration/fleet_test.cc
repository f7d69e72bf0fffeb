// The test kit itself: the real-server fleet fixture (testkit/fleet.h), child
// processes (testkit/process.h) and the blocking Redis connection
// (testkit/redis.h).

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
#include "testkit/process.h"
#include "testkit/redis.h"

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

// ---- Process ------------------------------------------------------------------------

ProcessOptions Shell(const std::string& script) {
  ProcessOptions o;
  o.argv = {"sh", "-c", script};
  return o;
}

TEST(ProcessTest, CapturesOutputAndExitCode) {
  ProcessOptions o = Shell("echo out; echo err >&2; exit 3");
  o.stdout_to = Stream::kPipe;
  o.stderr_to = Stream::kPipe;
  absl::StatusOr<ProcessResult> r = RunProcess(std::move(o), absl::Seconds(30));
  REDLOCK_ASSERT_OK(r.status());
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code(), 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");

  o = Shell("echo out; echo err >&2");
  o.stdout_to = Stream::kPipe;
  o.stderr_to = Stream::kStdout;
  r = RunProcess(std::move(o), absl::Seconds(30));
  REDLOCK_ASSERT_OK(r.status());
  EXPECT_EQ(r->exit_code(), 0);
  EXPECT_EQ(r->out, "out\nerr\n");
  EXPECT_EQ(r->err, "");

  EXPECT_EQ(RunProcess({.argv = {"/nonexistent/binary"}}, absl::Seconds(5)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ProcessTest, EnvironmentAndInput) {
  ASSERT_EQ(setenv("REDLOCK_KIT_TEST_DROPPED", "x", 1), 0);
  ProcessOptions o = Shell("echo \"$KIT_A:$REDLOCK_KIT_TEST_DROPPED\"; cat");
  o.env = {{"KIT_A", "1"}};
  o.remove_env_prefixes = {"REDLOCK_KIT_TEST_"};
  o.stdout_to = Stream::kPipe;
  absl::StatusOr<ProcessResult> r = RunProcess(std::move(o), absl::Seconds(30), "in\n");
  unsetenv("REDLOCK_KIT_TEST_DROPPED");
  REDLOCK_ASSERT_OK(r.status());
  EXPECT_EQ(r->out, "1:\nin\n");

  // A child that does not read its input: no SIGPIPE for the caller.
  r = RunProcess({.argv = {"true"}}, absl::Seconds(30), std::string(1 << 20, 'x'));
  REDLOCK_ASSERT_OK(r.status());
  EXPECT_EQ(r->exit_code(), 0);
}

TEST(ProcessTest, TimeoutKillsAndSignalsArrive) {
  absl::StatusOr<ProcessResult> r = RunProcess(Shell("exec sleep 30"), absl::Milliseconds(100));
  REDLOCK_ASSERT_OK(r.status());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code(), 128 + SIGKILL);

  ProcessOptions o = Shell("echo ready; exec sleep 30");
  o.stdout_to = Stream::kPipe;
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Start(std::move(o));
  REDLOCK_ASSERT_OK(p.status());
  EXPECT_EQ((*p)->ReadLine(absl::Seconds(30)).value_or("<none>"), "ready");
  EXPECT_TRUE((*p)->Running());
  REDLOCK_ASSERT_OK((*p)->Signal(SIGTERM));
  std::optional<int> status = (*p)->Wait(absl::Seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGTERM) << DescribeWaitStatus(*status);
  EXPECT_EQ((*p)->pid(), -1);
  EXPECT_FALSE((*p)->Signal(SIGTERM).ok());
}

// ---- RedisConnection ----------------------------------------------------------------

TEST(RedisConnectionTest, AuthSelectReuseAndReconnect) {
  REDLOCK_REQUIRE_REDIS();
  auto fleet = Fleet::Start({.nodes = 1, .password = "s3cret"});
  REDLOCK_ASSERT_OK(fleet.status());
  Endpoint db2 = (*fleet)->endpoint(0);
  db2.db = 2;
  RedisConnection conn(db2);
  EXPECT_FALSE(conn.Command({"PING"}).ok());  // not connected yet
  REDLOCK_ASSERT_OK(conn.Connect(absl::Seconds(5), absl::Seconds(5)));
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<RedisValue> r = conn.Command({"INCR", "k"});
    REDLOCK_ASSERT_OK(r.status());
    EXPECT_EQ(r->integer, i + 1);
  }
  // SELECT 2 took effect: db 0 has no "k".
  absl::StatusOr<RedisValue> db0 = (*fleet)->Command(0, {"GET", "k"});
  REDLOCK_ASSERT_OK(db0.status());
  EXPECT_TRUE(db0->is_nil());
  absl::StatusOr<RedisValue> err = conn.Command({"NOSUCHCOMMAND"});
  REDLOCK_ASSERT_OK(err.status());
  EXPECT_TRUE(err->is_error());

  // A restarted server: the command fails, the connection closes, Connect again.
  REDLOCK_ASSERT_OK((*fleet)->Restart(0));
  EXPECT_FALSE(conn.Command({"PING"}).ok());
  EXPECT_FALSE(conn.connected());
  REDLOCK_ASSERT_OK(conn.Connect(absl::Seconds(5), absl::Seconds(5)));
  REDLOCK_EXPECT_OK(conn.Command({"PING"}).status());

  Endpoint wrong = (*fleet)->endpoint(0);
  wrong.password = "wrong";
  EXPECT_EQ(RunCommand(wrong, {"PING"}).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace redlock::testkit
