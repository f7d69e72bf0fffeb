// The built `redlock` binary against a real fleet (label integration).

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "testkit/cluster.h"
#include "testkit/files.h"
#include "testkit/fleet.h"
#include "testkit/gtest_fleet.h"
#include "testkit/process.h"
#include "testkit/replication.h"

#ifndef REDLOCK_CLI_PATH
#error "REDLOCK_CLI_PATH must name the built redlock binary (tests/CMakeLists.txt)"
#endif

namespace redlock {
namespace {

using testkit::Fleet;
using testkit::FleetOptions;
using testkit::RedisValue;

constexpr int kUsage = 64;
constexpr int kHeld = 65;
constexpr int kUnavailable = 66;
constexpr int kLeaseLost = 67;
constexpr int kTimedOut = 68;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A running `redlock` process with its stdout and stderr captured.
class CliProcess {
 public:
  // `env` is added to our environment minus REDLOCK_* variables.
  // With `ignore_sigint`, redlock starts with SIGINT ignored, as a shell
  // starts a background job.
  static std::unique_ptr<CliProcess> Start(
      const std::vector<std::string>& args,
      const std::vector<std::pair<std::string, std::string>>& env = {},
      bool ignore_sigint = false) {
    testkit::ProcessOptions o;
    o.argv = {REDLOCK_CLI_PATH};
    if (ignore_sigint) {
      o.argv = {"/bin/sh", "-c", "trap '' INT; exec \"$0\" \"$@\"", REDLOCK_CLI_PATH};
    }
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = env;
    o.remove_env_prefixes = {"REDLOCK_"};
    o.stdout_to = testkit::Stream::kPipe;
    o.stderr_to = testkit::Stream::kPipe;
    absl::StatusOr<std::unique_ptr<testkit::Process>> p = testkit::Process::Start(std::move(o));
    if (!p.ok()) {
      ADD_FAILURE() << "starting " << REDLOCK_CLI_PATH << ": " << p.status();
      return nullptr;
    }
    return std::unique_ptr<CliProcess>(new CliProcess(*std::move(p)));
  }

  pid_t pid() const { return process_->pid(); }

  // Collects the output until the process exits, at most `timeout`.
  Result Wait(absl::Duration timeout = absl::Seconds(30)) {
    testkit::ProcessResult r = process_->Communicate(timeout);
    if (r.timed_out) ADD_FAILURE() << "redlock did not exit within " << timeout << "; killed it";
    return Result{r.exit_code(), std::move(r.out), std::move(r.err)};
  }

 private:
  explicit CliProcess(std::unique_ptr<testkit::Process> process) : process_(std::move(process)) {}
  std::unique_ptr<testkit::Process> process_;
};

Result RunCli(const std::vector<std::string>& args,
              const std::vector<std::pair<std::string, std::string>>& env = {}) {
  auto p = CliProcess::Start(args, env);
  if (p == nullptr) return Result{};
  return p->Wait();
}

std::string Describe(const Result& r) {
  return absl::StrCat("exit ", r.exit_code, "\n--- stdout:\n", r.out, "--- stderr:\n", r.err);
}

// `acquire` of `resource` on `nodes` (30 s), then `status` of it there:
// both exit 0; the status run into `*status`, its `line_count` non-empty
// lines into `*lines`. Use with ASSERT_NO_FATAL_FAILURE.
void AcquireThenStatus(const std::string& nodes, const std::string& resource, size_t line_count,
                       Result* status, std::vector<std::string>* lines) {
  Result r = RunCli({"acquire", "--nodes", nodes, "--resource", resource, "--ttl", "30s"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  *status = RunCli({"status", "--nodes", nodes, resource});
  ASSERT_EQ(status->exit_code, 0) << Describe(*status);
  *lines = absl::StrSplit(status->out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines->size(), line_count) << status->out;
}

// Exactly one line, newline-terminated.
bool OneLine(const std::string& s) {
  return !s.empty() && s.back() == '\n' && s.find('\n') == s.size() - 1;
}

// The value of "key" in a flat JSON object: a string's contents, or the raw
// number / literal.
std::string JsonField(const std::string& json, const std::string& key) {
  std::string needle = absl::StrCat("\"", key, "\":");
  size_t at = json.find(needle);
  if (at == std::string::npos) return "<missing>";
  at += needle.size();
  if (json[at] == '"') {
    size_t end = json.find('"', at + 1);
    return json.substr(at + 1, end - at - 1);
  }
  size_t end = json.find_first_of(",}", at);
  return json.substr(at, end - at);
}

int64_t JsonInt(const std::string& json, const std::string& key) {
  int64_t v = -1;
  if (!absl::SimpleAtoi(JsonField(json, key), &v)) return -1;
  return v;
}

bool WaitForFile(const std::string& path, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (access(path.c_str(), F_OK) == 0) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

using testkit::ReadFile;

void Touch(const std::string& path) { std::ofstream(path) << "go\n"; }

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testkit::CheckRedisServerAvailable().ok()) return;
    auto fleet = Fleet::Start(FleetOptions{.nodes = 5});
    if (fleet.ok()) {
      fleet_ = fleet->release();
    } else {
      start_error_ = new std::string(fleet.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete fleet_;
    fleet_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }

  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    ASSERT_EQ(start_error_, nullptr) << *start_error_;
    ASSERT_NE(fleet_, nullptr);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    prefix_ = absl::StrCat("cli/", info->name(), "/");
    tmp_ = std::make_unique<testkit::TempDir>("redlock-cli-test");
    ASSERT_FALSE(tmp_->path().empty()) << "mkdtemp failed";
    dir_ = tmp_->path();
  }
  void TearDown() override { tmp_.reset(); }

  Fleet& fleet() { return *fleet_; }
  std::string Nodes() { return fleet_->NodeList(); }
  std::string Res(const std::string& name) { return prefix_ + name; }

  // --nodes of the fleet (as a leading global flag) + args.
  Result Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"--nodes", Nodes()});
    return RunCli(args);
  }

  // GET key on every node.
  std::vector<std::string> Values(const std::string& key) {
    std::vector<std::string> out;
    for (int i = 0; i < fleet_->size(); ++i) {
      absl::StatusOr<RedisValue> v = fleet_->Command(i, {"GET", key});
      out.push_back(v.ok() && v->type == RedisValue::Type::kString ? v->str : "");
    }
    return out;
  }
  int NodesHolding(const std::string& key, const std::string& token) {
    int n = 0;
    for (const std::string& v : Values(key)) n += (v == token);
    return n;
  }
  void DeleteOn(const std::string& key, std::vector<int> nodes) {
    for (int i : nodes) {
      absl::StatusOr<RedisValue> v = fleet_->Command(i, {"DEL", key});
      ASSERT_TRUE(v.ok()) << v.status();
    }
  }
  // The fewest places in the fair lock `resource`'s queue on any node
  // (ZCARD of its queue: expired places count until a script purges them).
  int64_t FewestPlaces(const std::string& resource) {
    int64_t fewest = -1;
    for (int i = 0; i < fleet_->size(); ++i) {
      absl::StatusOr<RedisValue> v = fleet_->Command(i, {"ZCARD", resource + ":fair:q"});
      const int64_t n =
          v.ok() && v->type == RedisValue::Type::kInteger ? static_cast<int64_t>(v->integer) : -1;
      fewest = fewest < 0 ? n : std::min(fewest, n);
    }
    return fewest;
  }
  // The nodes whose queue of `resource` is empty (or gone).
  int NodesWithoutPlaces(const std::string& resource) {
    int n = 0;
    for (int i = 0; i < fleet_->size(); ++i) {
      absl::StatusOr<RedisValue> v = fleet_->Command(i, {"ZCARD", resource + ":fair:q"});
      n += v.ok() && v->type == RedisValue::Type::kInteger && v->integer == 0;
    }
    return n;
  }
  // The most places on any node.
  int64_t MostPlaces(const std::string& resource) {
    int64_t most = 0;
    for (int i = 0; i < fleet_->size(); ++i) {
      absl::StatusOr<RedisValue> v = fleet_->Command(i, {"ZCARD", resource + ":fair:q"});
      if (v.ok() && v->type == RedisValue::Type::kInteger) {
        most = std::max(most, static_cast<int64_t>(v->integer));
      }
    }
    return most;
  }

  // Starts redlock with `args` (a run or elect, ending in "--") and a command
  // that touches dir_/started, then runs for about 20 s unless SIGTERM comes,
  // which it answers by writing "term" to dir_/term and exiting `term_exit`.
  // Returns once the command started (null after a failure).
  std::unique_ptr<CliProcess> StartTrappingTerm(std::vector<std::string> args, int term_exit) {
    const std::string marker = dir_ + "/started", term = dir_ + "/term";
    args.insert(
        args.end(),
        {"sh", "-c",
         absl::StrCat("trap 'echo term > ", term, "; exit ", term_exit, "' TERM; touch ", marker,
                      "; i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; "
                      "exit 0")});
    auto p = CliProcess::Start(args);
    if (p == nullptr) {
      ADD_FAILURE() << "redlock did not start";
    } else if (!WaitForFile(marker, absl::Seconds(20))) {
      ADD_FAILURE() << "the command did not start: " << Describe(p->Wait());
      p = nullptr;
    }
    return p;
  }

  static Fleet* fleet_;
  static std::string* start_error_;
  std::string prefix_;
  std::unique_ptr<testkit::TempDir> tmp_;
  std::string dir_;
};

Fleet* CliTest::fleet_ = nullptr;
std::string* CliTest::start_error_ = nullptr;

TEST_F(CliTest, AcquirePrintsJsonAndSetsTheKeys) {
  Result r = Cli({"acquire", "--resource", Res("a"), "--ttl", "30s"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  ASSERT_TRUE(OneLine(r.out)) << Describe(r);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(JsonField(r.out, "resource"), Res("a"));
  std::string token = JsonField(r.out, "token");
  EXPECT_EQ(token.size(), 40u) << r.out;
  int64_t validity = JsonInt(r.out, "validity_ms");
  EXPECT_GT(validity, 25000) << r.out;
  EXPECT_LE(validity, 30000) << r.out;
  EXPECT_EQ(JsonInt(r.out, "ttl_ms"), 30000);
  EXPECT_GE(JsonInt(r.out, "nodes_granted"), 3);
  EXPECT_EQ(JsonInt(r.out, "fencing_token"), 0);
  EXPECT_GE(NodesHolding(Res("a"), token), 3);
  absl::StatusOr<RedisValue> pttl = fleet().Command(0, {"PTTL", Res("a")});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(pttl->integer, 20000);
  EXPECT_LE(pttl->integer, 30000);
}

TEST_F(CliTest, NodesFromTheEnvironment) {
  Result r =
      RunCli({"acquire", "--resource", Res("env"), "--ttl", "10s"}, {{"REDLOCK_NODES", Nodes()}});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_GE(NodesHolding(Res("env"), JsonField(r.out, "token")), 3);
  // --nodes wins over the variable.
  r = RunCli({"acquire", "--resource", Res("env2"), "--ttl", "10s", "--nodes", Nodes()},
             {{"REDLOCK_NODES", "127.0.0.1"}});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
}

TEST_F(CliTest, SecondAcquireIsHeldElsewhere) {
  Result first = Cli({"acquire", "--resource", Res("h"), "--ttl", "30s"});
  ASSERT_EQ(first.exit_code, 0) << Describe(first);
  Result second = Cli({"acquire", "--resource", Res("h"), "--ttl", "30s"});
  EXPECT_EQ(second.exit_code, kHeld) << Describe(second);
  EXPECT_EQ(second.out, "");
  EXPECT_TRUE(OneLine(second.err)) << Describe(second);
  EXPECT_TRUE(absl::StartsWith(second.err, "redlock acquire: ")) << second.err;
  // The holder is untouched.
  EXPECT_GE(NodesHolding(Res("h"), JsonField(first.out, "token")), 3);
}

TEST_F(CliTest, WaitDeadlinePasses) {
  ASSERT_EQ(Cli({"acquire", "--resource", Res("w"), "--ttl", "30s"}).exit_code, 0);
  absl::Time start = absl::Now();
  Result r = Cli({"acquire", "--resource", Res("w"), "--ttl", "30s", "--wait", "300ms"});
  EXPECT_EQ(r.exit_code, kTimedOut) << Describe(r);
  EXPECT_TRUE(OneLine(r.err)) << Describe(r);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
}

TEST_F(CliTest, WaitGetsTheLockWhenItExpires) {
  ASSERT_EQ(Cli({"acquire", "--resource", Res("x"), "--ttl", "500ms"}).exit_code, 0);
  Result r = Cli({"acquire", "--resource", Res("x"), "--ttl", "10s", "--wait", "5s"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
}

TEST_F(CliTest, ReleaseFreesTheLock) {
  Result a = Cli({"acquire", "--resource", Res("r"), "--ttl", "30s"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  std::string token = JsonField(a.out, "token");
  // A foreign token changes nothing and still succeeds.
  Result foreign = Cli({"release", "--resource", Res("r"), "--token", "not-the-token"});
  EXPECT_EQ(foreign.exit_code, 0) << Describe(foreign);
  EXPECT_GE(NodesHolding(Res("r"), token), 3);

  Result rel = Cli({"release", "--resource", Res("r"), "--token", token});
  ASSERT_EQ(rel.exit_code, 0) << Describe(rel);
  EXPECT_EQ(rel.err, "");
  for (const std::string& v : Values(Res("r"))) EXPECT_EQ(v, "");
  // Idempotent, and the lock can be taken again.
  EXPECT_EQ(Cli({"release", "--resource", Res("r"), "--token", token}).exit_code, 0);
  EXPECT_EQ(Cli({"acquire", "--resource", Res("r"), "--ttl", "30s"}).exit_code, 0);
}

TEST_F(CliTest, ExtendThenLeaseLost) {
  Result a = Cli({"acquire", "--resource", Res("e"), "--ttl", "5s"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  std::string token = JsonField(a.out, "token");

  Result e = Cli({"extend", "--resource", Res("e"), "--token", token, "--ttl", "60s"});
  ASSERT_EQ(e.exit_code, 0) << Describe(e);
  ASSERT_TRUE(OneLine(e.out)) << Describe(e);
  EXPECT_EQ(JsonField(e.out, "token"), token);
  EXPECT_EQ(JsonInt(e.out, "ttl_ms"), 60000);
  EXPECT_GT(JsonInt(e.out, "validity_ms"), 55000);
  EXPECT_GE(JsonInt(e.out, "nodes_granted"), 3);
  absl::StatusOr<RedisValue> pttl = fleet().Command(0, {"PTTL", Res("e")});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(pttl->integer, 50000);

  // Gone from a majority: the lease is lost, and extend never re-creates it.
  DeleteOn(Res("e"), {0, 1, 2});
  Result lost = Cli({"extend", "--resource", Res("e"), "--token", token, "--ttl", "60s"});
  EXPECT_EQ(lost.exit_code, kLeaseLost) << Describe(lost);
  EXPECT_TRUE(OneLine(lost.err)) << Describe(lost);
  EXPECT_EQ(lost.out, "");
  std::vector<std::string> values = Values(Res("e"));
  EXPECT_EQ(values[0], "");
  EXPECT_EQ(values[1], "");
  EXPECT_EQ(values[2], "");
}

TEST_F(CliTest, StatusShowsTheHolder) {
  Result free_status = Cli({"status", Res("s")});
  ASSERT_EQ(free_status.exit_code, 0) << Describe(free_status);
  EXPECT_TRUE(absl::StrContains(free_status.out, "not held")) << free_status.out;

  Result a = Cli({"acquire", "--resource", Res("s"), "--ttl", "30s", "--fencing"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  std::string token = JsonField(a.out, "token");
  uint64_t fence = static_cast<uint64_t>(JsonInt(a.out, "fencing_token"));
  EXPECT_GE(fence, 1u);

  Result s = Cli({"status", Res("s")});
  ASSERT_EQ(s.exit_code, 0) << Describe(s);
  EXPECT_TRUE(absl::StrContains(s.out, absl::StrCat("held by token ", token))) << s.out;
  // A summary, a header and one line per node.
  std::vector<std::string> lines = absl::StrSplit(s.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u + fleet().size()) << s.out;
  for (int i = 0; i < fleet().size(); ++i) {
    EXPECT_TRUE(absl::StartsWith(lines[2 + i], fleet().address(i))) << lines[2 + i];
  }
  EXPECT_GE(std::count_if(lines.begin(), lines.end(),
                          [&](const std::string& l) { return absl::StrContains(l, token); }),
            4);

  Result j = Cli({"status", "--json", "--resource", Res("s")});
  ASSERT_EQ(j.exit_code, 0) << Describe(j);
  ASSERT_TRUE(OneLine(j.out)) << j.out;
  EXPECT_EQ(JsonField(j.out, "held"), "true");
  EXPECT_EQ(JsonField(j.out, "holder"), token);
  EXPECT_GE(JsonInt(j.out, "holder_nodes"), 3);
  EXPECT_EQ(static_cast<uint64_t>(JsonInt(j.out, "fence_counter")), fence);
}

TEST_F(CliTest, FencingTokensIncrease) {
  Result a = Cli({"acquire", "--fencing", "--resource", Res("f"), "--ttl", "30s"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  ASSERT_EQ(
      Cli({"release", "--resource", Res("f"), "--token", JsonField(a.out, "token")}).exit_code, 0);
  Result b = Cli({"--fencing", "acquire", "--resource", Res("f"), "--ttl", "30s"});
  ASSERT_EQ(b.exit_code, 0) << Describe(b);
  EXPECT_GT(JsonInt(b.out, "fencing_token"), JsonInt(a.out, "fencing_token"));
}

TEST_F(CliTest, AllNodesNeedsEveryNode) {
  absl::StatusOr<int> dead = testkit::PickFreePort("127.0.0.1");
  ASSERT_TRUE(dead.ok());
  std::string nodes = absl::StrCat(Nodes(), ",127.0.0.1:", *dead);  // 5 of 6 answer
  Result majority = RunCli({"acquire", "--nodes", nodes, "--resource", Res("m1"), "--ttl", "10s"});
  EXPECT_EQ(majority.exit_code, 0) << Describe(majority);
  Result all =
      RunCli({"acquire", "--all-nodes", "--nodes", nodes, "--resource", Res("m2"), "--ttl", "10s"});
  EXPECT_EQ(all.exit_code, kUnavailable) << Describe(all);
  EXPECT_TRUE(OneLine(all.err)) << Describe(all);
  for (const std::string& v : Values(Res("m2"))) EXPECT_EQ(v, "") << "left behind";

  Result ok = Cli({"acquire", "--all-nodes", "--resource", Res("m3"), "--ttl", "10s"});
  ASSERT_EQ(ok.exit_code, 0) << Describe(ok);
  EXPECT_EQ(JsonInt(ok.out, "nodes_granted"), fleet().size());
  Result s = Cli({"status", "--all-nodes", "--json", Res("m3")});
  EXPECT_EQ(JsonInt(s.out, "quorum"), fleet().size()) << s.out;
}

TEST_F(CliTest, KeyPrefix) {
  Result a = Cli({"acquire", "--key-prefix", "app1:", "--resource", Res("k"), "--ttl", "10s"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  EXPECT_EQ(JsonField(a.out, "resource"), Res("k"));  // without the prefix
  const std::string token = JsonField(a.out, "token");
  EXPECT_GE(NodesHolding("app1:" + Res("k"), token), 3);
  EXPECT_EQ(NodesHolding(Res("k"), token), 0);
  // Another prefix is another lock; the same prefix sees the holder.
  EXPECT_EQ(
      Cli({"acquire", "--key-prefix", "app2:", "--resource", Res("k"), "--ttl", "10s"}).exit_code,
      0);
  Result s = Cli({"status", "--key-prefix=app1:", "--json", Res("k")});
  EXPECT_EQ(JsonField(s.out, "holder"), token) << Describe(s);
  EXPECT_EQ(
      Cli({"release", "--key-prefix", "app1:", "--resource", Res("k"), "--token", token}).exit_code,
      0);
  EXPECT_EQ(NodesHolding("app1:" + Res("k"), token), 0);
}

// status: which path each node uses (Lua scripts, or transactions where the
// node forbids scripting).
TEST_F(CliTest, StatusShowsNodesThatForbidScripting) {
  auto mixed = Fleet::Start(FleetOptions{.nodes = 3, .deny_scripting = {false, true, false}});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  std::string urls;
  for (int i = 0; i < 3; ++i) {
    const Endpoint ep = (*mixed)->endpoint(i);
    absl::StrAppend(&urls, i ? "," : "", "redis://");
    if (!ep.username.empty()) absl::StrAppend(&urls, ep.username, ":", ep.password, "@");
    absl::StrAppend(&urls, (*mixed)->address(i));
  }
  Result s;
  std::vector<std::string> lines;
  ASSERT_NO_FATAL_FAILURE(AcquireThenStatus(urls, Res("p"), 5, &s, &lines));
  EXPECT_TRUE(absl::StrContains(lines[1], "PATH")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[2], " lua ")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[3], " tx ")) << lines[3];
  EXPECT_TRUE(absl::StrContains(lines[4], " lua ")) << lines[4];
  Result j = RunCli({"status", "--json", "--nodes", urls, Res("p")});
  ASSERT_EQ(j.exit_code, 0) << Describe(j);
  EXPECT_TRUE(absl::StrContains(j.out, "\"path\":\"transactions\",\"scripting_refused\":\"NOPERM"))
      << j.out;
  EXPECT_TRUE(absl::StrContains(j.out, "\"path\":\"scripts\"")) << j.out;
  // And which script-free commands each node's server has (Redis 7.0: none;
  // docs/compat.md has the other servers).
  if ((*mixed)->server().name == "redis-7.0") {
    size_t count = 0;
    for (size_t at = j.out.find("\"commands\":[]"); at != std::string::npos;
         at = j.out.find("\"commands\":[]", at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, 3u) << j.out;
  }
}

TEST_F(CliTest, StatusShowsAClusterNodesMasters) {
  auto cluster = testkit::Cluster::Start({.masters = 3, .replicas_per_master = 0});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string nodes = (*cluster)->url();
  Result s;
  std::vector<std::string> lines;
  // The summary, the header, the cluster's row, one line per master.
  ASSERT_NO_FATAL_FAILURE(AcquireThenStatus(nodes, Res("c"), 6, &s, &lines));
  EXPECT_TRUE(absl::StrContains(lines[2], " yes ")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "redis+cluster")) << lines[2];
  int slots = 0;
  for (int i = 3; i < 6; ++i) {
    EXPECT_TRUE(absl::StrContains(lines[i], "  master 127.0.0.1:")) << lines[i];
    EXPECT_TRUE(absl::StrContains(lines[i], "connected")) << lines[i];
    slots += std::atoi(lines[i].substr(lines[i].find(": ") + 2).c_str());
  }
  EXPECT_EQ(slots, 16384) << s.out;
  Result j = RunCli({"status", "--json", "--nodes", nodes, Res("c")});
  ASSERT_EQ(j.exit_code, 0) << Describe(j);
  EXPECT_TRUE(absl::StrContains(j.out, "\"scheme\":\"redis+cluster\"")) << j.out;
  EXPECT_TRUE(absl::StrContains(j.out, "\"slots_uncovered\":0")) << j.out;
  EXPECT_EQ(JsonInt(j.out, "holder_nodes"), 1) << j.out;
}

TEST_F(CliTest, TlsNodesFromFlagsOrEnvironment) {
  auto tls = Fleet::Start(FleetOptions{.nodes = 3, .tls = true, .tls_auth_clients = true});
  ASSERT_TRUE(tls.ok()) << tls.status();
  const testkit::TestCertificates& certs = *(*tls)->certificates();
  std::string urls;
  for (int i = 0; i < 3; ++i) absl::StrAppend(&urls, i ? "," : "", "rediss://", (*tls)->address(i));
  const std::vector<std::string> flags = {
      "--nodes",         urls,        "--tls-ca",      certs.ca_cert, "--tls-cert",
      certs.client_cert, "--tls-key", certs.client_key};
  std::vector<std::string> args = flags;
  args.insert(args.end(), {"acquire", "--resource", Res("t"), "--ttl", "30s"});
  Result r = RunCli(args);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_GE(JsonInt(r.out, "nodes_granted"), 2) << r.out;

  // status: TLS and its version per node, from the environment this time.
  const std::vector<std::pair<std::string, std::string>> env = {
      {"REDLOCK_NODES", urls},
      {"REDLOCK_TLS_CA", certs.ca_cert},
      {"REDLOCK_TLS_CERT", certs.client_cert},
      {"REDLOCK_TLS_KEY", certs.client_key}};
  Result s = RunCli({"status", Res("t")}, env);
  ASSERT_EQ(s.exit_code, 0) << Describe(s);
  std::vector<std::string> lines = absl::StrSplit(s.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << s.out;
  EXPECT_TRUE(absl::StrContains(lines[1], "TLS")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[1], "SCHEME")) << lines[1];
  for (int i = 2; i < 5; ++i) {
    EXPECT_TRUE(absl::StrContains(lines[i], "TLSv1.")) << lines[i];
    EXPECT_TRUE(absl::EndsWith(lines[i], " rediss")) << lines[i];
  }
  Result j = RunCli({"status", "--json", Res("t")}, env);
  ASSERT_EQ(j.exit_code, 0) << Describe(j);
  EXPECT_TRUE(absl::StrContains(j.out, "\"tls\":true,\"tls_version\":\"TLSv1.")) << j.out;
  EXPECT_TRUE(absl::StrContains(j.out, "\"scheme\":\"rediss\"")) << j.out;

  // Without the client certificate every node refuses: 66, the cause named
  // on each node's line.
  Result no_cert = RunCli({"status", "--nodes", urls, "--tls-ca", certs.ca_cert, Res("t")});
  EXPECT_EQ(no_cert.exit_code, kUnavailable) << Describe(no_cert);
  lines = absl::StrSplit(no_cert.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << no_cert.out;
  for (int i = 2; i < 5; ++i) {
    EXPECT_TRUE(absl::StrContains(lines[i], "requires a client certificate")) << lines[i];
  }
  // A wrong name fails verification unless --tls-insecure says not to check.
  std::vector<std::string> named = flags;
  named.insert(named.end(), {"--tls-server-name", "redis.example.com"});
  args = named;
  args.insert(args.end(), {"status", Res("t")});
  Result wrong = RunCli(args);
  EXPECT_EQ(wrong.exit_code, kUnavailable) << Describe(wrong);
  EXPECT_TRUE(absl::StrContains(wrong.out, "not valid for \"redis.example.com\"")) << wrong.out;
  args = named;
  args.insert(args.end(), {"--tls-insecure", "status", Res("t")});
  EXPECT_EQ(RunCli(args).exit_code, 0);
  // A missing file is a usage error: nothing is sent.
  Result missing = RunCli({"status", "--nodes", urls, "--tls-ca", dir_ + "/nope.pem", Res("t")});
  EXPECT_EQ(missing.exit_code, kUsage) << Describe(missing);
  EXPECT_TRUE(absl::StrContains(missing.err, dir_ + "/nope.pem")) << missing.err;
}

// The documented way to TLS nodes (README, docker-compose.yml's "tls"
// profile): the certificates of scripts/tls-certs.sh, a redis-server on a TLS
// port only with the compose file's TLS arguments, the CLI with --tls-ca.
TEST_F(CliTest, TlsCertsScriptMakesWhatTheComposeTlsNodesUse) {
  const std::string certs = dir_ + "/tls";
  absl::StatusOr<testkit::ProcessResult> made =
      testkit::RunProcess({.argv = {"sh", REDLOCK_TLS_CERTS_SCRIPT, certs, "redis.example"},
                           .stdout_to = testkit::Stream::kPipe,
                           .stderr_to = testkit::Stream::kStdout},
                          absl::Seconds(60));
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->exit_code(), 0) << made->out;
  absl::StatusOr<int> port = testkit::PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  absl::StatusOr<std::unique_ptr<testkit::Process>> server =
      testkit::Process::Start({.argv = {"redis-server",
                                        "--port",
                                        "0",
                                        "--tls-port",
                                        std::to_string(*port),
                                        "--tls-cert-file",
                                        certs + "/server.crt",
                                        "--tls-key-file",
                                        certs + "/server.key",
                                        "--tls-ca-cert-file",
                                        certs + "/ca.crt",
                                        "--tls-auth-clients",
                                        "optional",
                                        "--bind",
                                        "127.0.0.1",
                                        "--save",
                                        "",
                                        "--dir",
                                        dir_,
                                        "--logfile",
                                        dir_ + "/redis.log"}});
  ASSERT_TRUE(server.ok()) << server.status();
  Endpoint node;
  node.host = "127.0.0.1";
  node.port = *port;
  node.tls = true;
  TlsOptions tls;
  tls.ca_file = certs + "/ca.crt";
  absl::StatusOr<RedisValue> pong;
  for (int i = 0; i < 200; ++i) {
    pong = testkit::RunCommand(node, {"PING"}, absl::Milliseconds(500), tls);
    if (pong.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(pong.ok()) << pong.status();

  const std::string url = absl::StrCat("rediss://127.0.0.1:", *port);
  Result r = RunCli({"acquire", "--nodes", url, "--tls-ca", certs + "/ca.crt", "--resource",
                     Res("c"), "--ttl", "10s"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  // By a name the script was given, and with the client certificate.
  r = RunCli({"acquire", "--nodes", url, "--tls-ca", certs + "/ca.crt", "--tls-server-name",
              "redis.example", "--tls-cert", certs + "/client.crt", "--tls-key",
              certs + "/client.key", "--resource", Res("d"), "--ttl", "10s"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
}

TEST_F(CliTest, PasswordsInRedisUrls) {
  auto secured = Fleet::Start(FleetOptions{.nodes = 3, .password = "s3cr:t@"});
  ASSERT_TRUE(secured.ok()) << secured.status();
  std::string urls;
  for (int i = 0; i < 3; ++i) {
    absl::StrAppend(&urls, i ? "," : "", "redis://:s3cr%3At%40@", (*secured)->address(i), "/3");
  }
  Result r = RunCli({"acquire", "--nodes", urls, "--resource", Res("p"), "--ttl", "10s"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // The key is in database 3.
  absl::StatusOr<RedisValue> v = (*secured)->Command(
      0, {"EVAL", "redis.call('select', 3) return redis.call('get', KEYS[1])", "1", Res("p")});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->str, JsonField(r.out, "token"));
  v = (*secured)->Command(0, {"EXISTS", Res("p")});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->integer, 0) << "the key is in database 0";
  Result no_auth = RunCli(
      {"acquire", "--nodes", (*secured)->NodeList(), "--resource", Res("p2"), "--ttl", "10s"});
  EXPECT_EQ(no_auth.exit_code, kUnavailable) << Describe(no_auth);
  EXPECT_FALSE(absl::StrContains(no_auth.err, "s3cr")) << "password leaked: " << no_auth.err;
}

// acquire --fair: the fair lock's lease; waiters in other processes are
// served in the order they took their places; release --fair frees the
// lock and the holder's place at once.
TEST_F(CliTest, FairAcquireServesWaitersInOrderAndReleaseTakesThePlaceOut) {
  const std::string r = Res("fair");
  Result a = Cli({"acquire", "--fair", "--resource", r, "--ttl", "30s"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  ASSERT_TRUE(OneLine(a.out)) << Describe(a);
  const std::string token_a = JsonField(a.out, "token");
  EXPECT_TRUE(absl::StrContains(token_a, ".")) << "a fair lease's token names its place: " << a.out;
  EXPECT_GE(NodesHolding(r, token_a), 3);
  // Held: neither a fair try nor a plain one gets it.
  Result try_fair = Cli({"acquire", "--fair", "--resource", r, "--ttl", "30s"});
  EXPECT_EQ(try_fair.exit_code, kHeld) << Describe(try_fair);
  Result try_plain = Cli({"acquire", "--resource", r, "--ttl", "30s"});
  EXPECT_EQ(try_plain.exit_code, kHeld) << Describe(try_plain);

  // A waiting fair acquire in a process of its own, once its place is on
  // every node (`places` places there in all).
  auto enqueue = [&](int places, const std::string& who, std::unique_ptr<CliProcess>* p) {
    *p = CliProcess::Start({"acquire", "--nodes", Nodes(), "--fair", "--resource", r, "--ttl",
                            "30s", "--wait", "25s"});
    ASSERT_NE(*p, nullptr);
    ASSERT_EQ(
        testkit::Eventually([&] { return FewestPlaces(r) >= places; }, true, absl::Seconds(20)),
        true)
        << who << "'s place is not on every node";
  };
  // `p` exits granted, holding on a quorum: its token into `*token`.
  auto granted = [&](CliProcess& p, std::string* token) {
    Result got = p.Wait(absl::Seconds(40));
    ASSERT_EQ(got.exit_code, 0) << Describe(got);
    *token = JsonField(got.out, "token");
    EXPECT_GE(NodesHolding(r, *token), 3);
  };
  auto release = [&](const std::string& token) {
    Result rel = Cli({"release", "--fair", "--resource", r, "--token", token});
    ASSERT_EQ(rel.exit_code, 0) << Describe(rel);
  };

  // C takes its place (on every node) before D begins taking its own (A,
  // granted at once, took none).
  std::unique_ptr<CliProcess> c, d;
  ASSERT_NO_FATAL_FAILURE(enqueue(1, "C", &c));
  ASSERT_NO_FATAL_FAILURE(enqueue(2, "D", &d));

  ASSERT_NO_FATAL_FAILURE(release(token_a));
  // C first: had D been granted, C would wait past its 25 s for D's 30 s
  // lease and exit 68.
  std::string token_c, token_d;
  ASSERT_NO_FATAL_FAILURE(granted(*c, &token_c));
  ASSERT_NO_FATAL_FAILURE(release(token_c));
  ASSERT_NO_FATAL_FAILURE(granted(*d, &token_d));

  // D waited, so it holds with a place; its release --fair takes the place
  // out on the quorum that confirmed it. (A plain release would leave it
  // until the queue's own key expired, place_ttl after D's last heartbeat.)
  ASSERT_NO_FATAL_FAILURE(release(token_d));
  EXPECT_GE(NodesWithoutPlaces(r), 3) << "the holder's place is left in the queue";
  EXPECT_EQ(testkit::Eventually([&] { return MostPlaces(r); }, int64_t{0}), 0)
      << "a place is left in the queue";
  for (const std::string& v : Values(r)) EXPECT_EQ(v, "") << "not released";
}

// run --fair: waits in the queue behind a fair holder, runs the command
// with the lock, and its release takes the place out.
TEST_F(CliTest, RunFairWaitsItsTurnAndReleasesThePlace) {
  const std::string r = Res("runfair");
  Result a = Cli({"acquire", "--fair", "--resource", r, "--ttl", "30s"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  const std::string marker = dir_ + "/token";
  auto p = CliProcess::Start(
      {"run", "--nodes", Nodes(), "--fair", "--resource", r, "--ttl", "10s", "--wait", "25s", "--",
       "sh", "-c",
       absl::StrCat("echo \"$REDLOCK_TOKEN\" > ", marker, ".tmp && mv ", marker, ".tmp ", marker)});
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(testkit::Eventually([&] { return FewestPlaces(r) >= 1; }, true, absl::Seconds(20)),
            true)
      << "run's place is not on every node";
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran while the lock was held";
  Result rel = Cli({"release", "--fair", "--resource", r, "--token", JsonField(a.out, "token")});
  ASSERT_EQ(rel.exit_code, 0) << Describe(rel);
  Result done = p->Wait(absl::Seconds(40));
  EXPECT_EQ(done.exit_code, 0) << Describe(done);
  EXPECT_EQ(done.err, "");
  // run's release (after the command) took its place out on a quorum.
  EXPECT_GE(NodesWithoutPlaces(r), 3) << "run's release left its place";
  EXPECT_TRUE(absl::StrContains(ReadFile(marker), ".")) << "not a fair lease's token";
  for (const std::string& v : Values(r)) EXPECT_EQ(v, "") << "not released";
  EXPECT_EQ(testkit::Eventually([&] { return MostPlaces(r); }, int64_t{0}), 0)
      << "run's release left its place";
}

TEST_F(CliTest, RunExitsWithTheCommandsStatus) {
  Result r = Cli({"run", "--resource", Res("x"), "--ttl", "10s", "--", "sh", "-c", "exit 7"});
  EXPECT_EQ(r.exit_code, 7) << Describe(r);
  EXPECT_EQ(r.err, "");
  r = Cli({"run", "--resource", Res("x"), "--ttl", "10s", "true"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  r = Cli({"run", "--resource", Res("x"), "--ttl", "10s", "--", "sh", "-c", "kill -USR1 $$"});
  EXPECT_EQ(r.exit_code, 128 + SIGUSR1) << Describe(r);
  r = Cli({"run", "--resource", Res("x"), "--ttl", "10s", "--", "/nonexistent/redlock-test-cmd"});
  EXPECT_EQ(r.exit_code, 127) << Describe(r);
  EXPECT_TRUE(OneLine(r.err)) << Describe(r);
  for (const std::string& v : Values(Res("x"))) EXPECT_EQ(v, "") << "not released";
}

TEST_F(CliTest, RunHoldsTheLockWhileTheCommandRunsAndReleasesAfter) {
  const std::string marker = dir_ + "/started", go = dir_ + "/go";
  // The child records its token and waits (bounded) for the test to let it go.
  std::string script =
      absl::StrCat("echo \"$REDLOCK_TOKEN $REDLOCK_RESOURCE\" > ", marker, ".tmp && mv ", marker,
                   ".tmp ", marker, "; i=0; while [ ! -e ", go,
                   " ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exit 3");
  auto p = CliProcess::Start({"run", "--nodes", Nodes(), "--resource", Res("run"), "--ttl", "1s",
                              "--", "sh", "-c", script});
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(WaitForFile(marker, absl::Seconds(20))) << Describe(p->Wait());
  std::vector<std::string> parts =
      absl::StrSplit(ReadFile(marker), absl::ByAnyChar(" \n"), absl::SkipEmpty());
  ASSERT_EQ(parts.size(), 2u);
  const std::string token = parts[0];
  EXPECT_EQ(parts[1], Res("run"));
  EXPECT_GE(NodesHolding(Res("run"), token), 3);
  // Still held well past the 1 s ttl: renewed while the command runs.
  absl::SleepFor(absl::Milliseconds(1600));
  EXPECT_GE(NodesHolding(Res("run"), token), 3);
  Result other = Cli({"acquire", "--resource", Res("run"), "--ttl", "5s"});
  EXPECT_EQ(other.exit_code, kHeld) << Describe(other);

  Touch(go);
  Result r = p->Wait();
  EXPECT_EQ(r.exit_code, 3) << Describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  for (const std::string& v : Values(Res("run"))) EXPECT_EQ(v, "") << "not released";
}

TEST_F(CliTest, RunDoesNotStartTheCommandWhenHeld) {
  ASSERT_EQ(Cli({"acquire", "--resource", Res("held"), "--ttl", "30s"}).exit_code, 0);
  const std::string marker = dir_ + "/ran";
  Result r = Cli({"run", "--resource", Res("held"), "--ttl", "10s", "--", "touch", marker});
  EXPECT_EQ(r.exit_code, kHeld) << Describe(r);
  EXPECT_TRUE(OneLine(r.err)) << Describe(r);
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran without the lock";
}

TEST_F(CliTest, RunStopsTheCommandWhenTheLeaseIsLost) {
  const std::string term = dir_ + "/term";
  auto p = StartTrappingTerm(
      {"run", "--nodes", Nodes(), "--resource", Res("lost"), "--ttl", "1s", "--grace", "5s", "--"},
      0);
  ASSERT_NE(p, nullptr);
  // Behind its back: the key disappears from a majority of the nodes.
  DeleteOn(Res("lost"), {0, 1, 2});
  absl::Time start = absl::Now();
  Result r = p->Wait(absl::Seconds(20));
  EXPECT_EQ(r.exit_code, kLeaseLost) << Describe(r);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(OneLine(r.err)) << Describe(r);
  EXPECT_TRUE(absl::StrContains(r.err, "lost the lock")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "SIGTERM")) << r.err;
  EXPECT_EQ(ReadFile(term), "term\n");
}

// The documented order: the command gets its environment, then the
// at-risk signal while the lock can still be saved, then SIGKILL a grace
// period after the loss; exit 67 tells "lost" from the command's status.
TEST_F(CliTest, RunSignalsAtRiskThenKillsAfterTheLoss) {
  const std::string marker = dir_ + "/started", log = dir_ + "/log";
  std::string script =
      absl::StrCat("echo \"$REDLOCK_RESOURCE $REDLOCK_TOKEN\" > ", log, "; trap 'echo usr1 >> ",
                   log, "' USR1; touch ", marker,
                   "; i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; exit 0");
  auto p =
      CliProcess::Start({"run", "--nodes", Nodes(), "--resource", Res("risk"), "--ttl", "900ms",
                         "--grace", "300ms", "--at-risk-signal", "USR1", "--", "sh", "-c", script});
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(WaitForFile(marker, absl::Seconds(20))) << Describe(p->Wait());
  // Extensions cannot reach a quorum: at risk, then lost by the validity.
  for (int i : {0, 1, 2}) ASSERT_TRUE(fleet().Stop(i).ok());
  Result r = p->Wait(absl::Seconds(20));
  for (int i : {0, 1, 2}) ASSERT_TRUE(fleet().Continue(i).ok());
  EXPECT_EQ(r.exit_code, kLeaseLost) << Describe(r);
  size_t risk = r.err.find("is at risk");
  size_t lost = r.err.find("lost the lock");
  size_t killed = r.err.find("sent SIGKILL");
  ASSERT_NE(risk, std::string::npos) << r.err;
  ASSERT_NE(lost, std::string::npos) << r.err;
  ASSERT_NE(killed, std::string::npos) << r.err;
  EXPECT_LT(risk, lost);
  EXPECT_LT(lost, killed);
  EXPECT_TRUE(absl::StrContains(r.err, "sent SIGUSR1")) << r.err;
  std::string seen = ReadFile(log);
  EXPECT_TRUE(absl::StartsWith(seen, Res("risk") + " ")) << seen;
  EXPECT_TRUE(absl::StrContains(seen, "usr1")) << seen;
}

TEST_F(CliTest, StatusMetricsPrintsPrometheusTextOfAProbeRun) {
  Result r = Cli({"status", "--metrics", Res("m")});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(absl::StrContains(r.out, "# TYPE redlock_acquisitions_total counter")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "redlock_acquisitions_total{outcome=\"succeeded\"} 1"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "redlock_releases_total{outcome=\"succeeded\"} 1")) << r.out;
  EXPECT_TRUE(absl::StrContains(
      r.out, absl::StrCat("redlock_node_up{node=\"", fleet().endpoint(0).ToString(), "\"} 1")))
      << r.out;
  // The probe left nothing, and R was never touched.
  for (const std::string& v : Values(Res("m"))) EXPECT_EQ(v, "");
}

TEST_F(CliTest, RunKillsACommandThatIgnoresSigterm) {
  const std::string marker = dir_ + "/started";
  std::string script =
      absl::StrCat("trap '' TERM; touch ", marker,
                   "; i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; exit 0");
  auto p = CliProcess::Start({"run", "--nodes", Nodes(), "--resource", Res("kill"), "--ttl", "1s",
                              "--grace", "300ms", "--", "sh", "-c", script});
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(WaitForFile(marker, absl::Seconds(20))) << Describe(p->Wait());
  DeleteOn(Res("kill"), {0, 1, 2, 3, 4});
  Result r = p->Wait(absl::Seconds(20));
  EXPECT_EQ(r.exit_code, kLeaseLost) << Describe(r);
  EXPECT_TRUE(absl::StrContains(r.err, "SIGKILL")) << r.err;
}

TEST_F(CliTest, RunForwardsSigterm) {
  const std::string term = dir_ + "/term";
  auto p = StartTrappingTerm(
      {"run", "--nodes", Nodes(), "--resource", Res("fwd"), "--ttl", "10s", "--"}, 5);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(kill(p->pid(), SIGTERM), 0);  // the redlock process we started
  Result r = p->Wait(absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 5) << Describe(r);
  EXPECT_EQ(ReadFile(term), "term\n");
  for (const std::string& v : Values(Res("fwd"))) EXPECT_EQ(v, "") << "not released";
}

// SIGINT and SIGTERM end a waiting `acquire --wait` or `run` at once, even
// started the way a shell starts a background job (SIGINT ignored), with
// exit 128 + signal and none of its keys left on the nodes.
TEST_F(CliTest, SignalsCancelAWaitPromptlyAndLeaveNothing) {
  Result holder = Cli({"acquire", "--resource", Res("busy"), "--ttl", "60s"});
  ASSERT_EQ(holder.exit_code, 0) << Describe(holder);
  const std::string token = JsonField(holder.out, "token");
  struct Case {
    std::vector<std::string> args;
    int sig;
  };
  const std::vector<Case> cases = {
      {{"acquire", "--resource", Res("busy"), "--ttl", "10s", "--wait", "30s"}, SIGINT},
      {{"acquire", "--resource", Res("busy"), "--ttl", "10s", "--wait", "30s"}, SIGTERM},
      {{"run", "--resource", Res("busy"), "--ttl", "10s", "--wait", "30s", "--", "true"}, SIGINT},
      {{"run", "--resource", Res("busy"), "--ttl", "10s", "--wait", "30s", "--", "true"}, SIGTERM},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--nodes", Nodes()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto p = CliProcess::Start(args, {}, /*ignore_sigint=*/true);
    ASSERT_NE(p, nullptr);
    absl::SleepFor(absl::Seconds(1));     // connected, failed once, waiting
    ASSERT_EQ(kill(p->pid(), c.sig), 0);  // the process we started
    // A 30 s wait that ignored the signal would run into this bound.
    Result r = p->Wait(absl::Seconds(5));
    EXPECT_EQ(r.exit_code, 128 + c.sig) << c.args[0] << " " << Describe(r);
    EXPECT_TRUE(absl::StrContains(r.err, "interrupted")) << r.err;
    EXPECT_TRUE(OneLine(r.err)) << r.err;
    for (const std::string& v : Values(Res("busy"))) EXPECT_EQ(v, token) << "only the holder's";
  }
}

// `redlock elect`: the command runs only while leader, with the term in its
// environment; a second candidate runs after the first resigns, with a
// higher term.
TEST_F(CliTest, ElectRunsTheCommandOnlyWhileLeaderAndHandsOverOnExit) {
  const std::string log = dir_ + "/log", marker = dir_ + "/started", go = dir_ + "/go";
  std::string first = absl::StrCat(
      "echo \"$REDLOCK_LEADER_ID $REDLOCK_TERM $REDLOCK_FENCING_TOKEN\" >> ", log, "; touch ",
      marker, "; i=0; while [ ! -e ", go, " ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done");
  auto a = CliProcess::Start({"elect", "--nodes", Nodes(), "--resource", Res("e"), "--id", "a",
                              "--ttl", "1s", "--", "sh", "-c", first});
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(WaitForFile(marker, absl::Seconds(20))) << Describe(a->Wait());
  std::string second = absl::StrCat("echo \"$REDLOCK_LEADER_ID $REDLOCK_TERM\" >> ", log);
  auto b = CliProcess::Start(
      {"elect", "--nodes", Nodes(), "--resource", Res("e"), "--id", "b", "--", "sh", "-c", second});
  ASSERT_NE(b, nullptr);
  absl::SleepFor(absl::Milliseconds(1500));  // past a's 1 s ttl: renewed, b still waits
  std::vector<std::string> so_far = absl::StrSplit(ReadFile(log), '\n', absl::SkipEmpty());
  EXPECT_EQ(so_far.size(), 1u) << ReadFile(log);
  Result status = Cli({"status", "--json", Res("e")});
  EXPECT_TRUE(absl::StrContains(status.out, absl::StrCat(".", "61")))
      << "a's hex id: " << status.out;
  Touch(go);
  Result ra = a->Wait();
  EXPECT_EQ(ra.exit_code, 0) << Describe(ra);
  Result rb = b->Wait();
  EXPECT_EQ(rb.exit_code, 0) << Describe(rb);
  std::vector<std::string> lines = absl::StrSplit(ReadFile(log), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << ReadFile(log);
  std::vector<std::string> la = absl::StrSplit(lines[0], ' ');
  std::vector<std::string> lb = absl::StrSplit(lines[1], ' ');
  ASSERT_EQ(la.size(), 3u);
  ASSERT_EQ(lb.size(), 2u);
  EXPECT_EQ(la[0], "a");
  EXPECT_EQ(la[1], la[2]) << "the term is the fencing token";
  EXPECT_EQ(lb[0], "b");
  int64_t ta = 0, tb = 0;
  ASSERT_TRUE(absl::SimpleAtoi(la[1], &ta));
  ASSERT_TRUE(absl::SimpleAtoi(lb[1], &tb));
  EXPECT_GT(tb, ta);
  for (const std::string& v : Values(Res("e"))) EXPECT_EQ(v, "") << "resigned";
}

// A leader killed with SIGKILL (its command with it) is replaced once its
// lease runs out.
TEST_F(CliTest, ElectTakesOverAfterTheLeaderIsKilled) {
  const std::string marker = dir_ + "/started", ran = dir_ + "/ran";
  // The command's pid, to kill it with its leader (it holds the pipes the
  // test reads).
  std::string script =
      absl::StrCat("echo $$ > ", marker, ".tmp && mv ", marker, ".tmp ", marker, "; exec sleep 30");
  auto a = CliProcess::Start({"elect", "--nodes", Nodes(), "--resource", Res("k"), "--id", "a",
                              "--ttl", "1s", "--", "sh", "-c", script});
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(WaitForFile(marker, absl::Seconds(20))) << Describe(a->Wait());
  auto b = CliProcess::Start({"elect", "--nodes", Nodes(), "--resource", Res("k"), "--id", "b",
                              "--ttl", "1s", "--", "touch", ran});
  ASSERT_NE(b, nullptr);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_NE(access(ran.c_str(), F_OK), 0) << "b ran while a leads";
  int64_t command_pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(marker)), &command_pid));
  ASSERT_EQ(kill(a->pid(), SIGKILL), 0);  // the redlock process we started
  absl::Time killed = absl::Now();
  ASSERT_EQ(kill(static_cast<pid_t>(command_pid), SIGKILL), 0);  // and its command
  (void)a->Wait();
  Result rb = b->Wait(absl::Seconds(20));
  EXPECT_EQ(rb.exit_code, 0) << Describe(rb);
  EXPECT_EQ(access(ran.c_str(), F_OK), 0);
  EXPECT_LT(absl::Now() - killed, absl::Seconds(8)) << "about one ttl, not b's whole wait";
}

TEST_F(CliTest, ElectStopsTheCommandWhenLeadershipIsLostAndSignalsCancelTheCampaign) {
  const std::string term = dir_ + "/term";
  auto p = StartTrappingTerm({"elect", "--nodes", Nodes(), "--resource", Res("lost"), "--ttl", "1s",
                              "--grace", "5s", "--"},
                             0);
  ASSERT_NE(p, nullptr);
  // Campaigning for a resource someone leads, then interrupted.
  auto waiting =
      CliProcess::Start({"elect", "--nodes", Nodes(), "--resource", Res("lost"), "--", "true"}, {},
                        /*ignore_sigint=*/true);
  ASSERT_NE(waiting, nullptr);
  absl::SleepFor(absl::Seconds(1));
  ASSERT_EQ(kill(waiting->pid(), SIGTERM), 0);
  Result rw = waiting->Wait(absl::Seconds(5));
  EXPECT_EQ(rw.exit_code, 128 + SIGTERM) << Describe(rw);
  EXPECT_TRUE(absl::StrContains(rw.err, "interrupted")) << rw.err;
  // Behind the leader's back, its key goes from a majority.
  DeleteOn(Res("lost"), {0, 1, 2});
  Result r = p->Wait(absl::Seconds(20));
  EXPECT_EQ(r.exit_code, kLeaseLost) << Describe(r);
  EXPECT_TRUE(absl::StrContains(r.err, "lost leadership")) << r.err;
  EXPECT_EQ(ReadFile(term), "term\n");
  Result usage = Cli({"elect", "--resource", Res("x")});
  EXPECT_EQ(usage.exit_code, kUsage) << Describe(usage);
}

TEST_F(CliTest, BadInputIsAUsageErrorOnOneLine) {
  const std::string ok_nodes = Nodes();
  const std::vector<std::vector<std::string>> cases = {
      {"acquire", "--resource", "r", "--ttl", "10s"},                                    // no nodes
      {"acquire", "--nodes", "127.0.0.1", "--resource", "r", "--ttl", "10s"},            // no port
      {"acquire", "--nodes", "127.0.0.1:99999", "--resource", "r", "--ttl", "10s"},      // bad port
      {"acquire", "--nodes", "rediss://h:1", "--resource", "r", "--ttl", "10s",          // no such
       "--tls-ca", "/nonexistent/ca.pem"},                                               // CA file
      {"acquire", "--nodes", ok_nodes, "--tls-ca", "/etc/ssl/certs", "--resource", "r",  // TLS
       "--ttl", "10s"},  // settings, plaintext nodes
      {"acquire", "--nodes", ok_nodes, "--resource", "r", "--ttl", "30"},  // no unit
      {"acquire", "--nodes", ok_nodes, "--resource", "r", "--ttl", "-1s"},
      {"acquire", "--nodes", ok_nodes, "--resource", "r", "--ttl", "10s", "--wait", "soon"},
      {"acquire", "--nodes", ok_nodes, "--ttl", "10s"},  // no resource
      {"acquire", "--nodes", ok_nodes, "--resource", "", "--ttl", "10s"},
      {"acquire", "--nodes", ok_nodes, "--resource", "r"},  // no ttl
      {"acquire", "--nodes", ok_nodes, "--resource", "r", "--ttl", "10s", "--bogus"},
      {"acquire", "--nodes", ok_nodes, "--resource", "r", "--ttl", "10s", "extra"},
      {"acquire", "--nodes", ok_nodes, "--resource", "r", "--ttl", "1ms"},  // <= drift
      {"release", "--nodes", ok_nodes, "--resource", "r"},                  // no token
      {"extend", "--nodes", ok_nodes, "--resource", "r", "--token", "t"},   // no ttl
      {"status", "--nodes", ok_nodes},
      {"run", "--nodes", ok_nodes, "--resource", "r", "--ttl", "10s"},  // no command
      {"run", "--nodes", ok_nodes, "--ttl", "10s", "--", "true"},
      {"frobnicate"},
      {"--nodes"},
  };
  for (const auto& args : cases) {
    Result r = RunCli(args);
    std::string what = absl::StrJoin(args, " ");
    EXPECT_EQ(r.exit_code, kUsage) << what << "\n" << Describe(r);
    EXPECT_TRUE(OneLine(r.err)) << what << "\n" << Describe(r);
    EXPECT_TRUE(absl::StartsWith(r.err, "redlock")) << what << "\n" << r.err;
    EXPECT_EQ(r.out, "") << what;
  }
  // The bare tool prints its usage on stderr.
  Result bare = RunCli({});
  EXPECT_EQ(bare.exit_code, kUsage);
  EXPECT_TRUE(absl::StrContains(bare.err, "usage: redlock"));
}

TEST_F(CliTest, Help) {
  Result r = RunCli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(r.out, "usage: redlock")) << r.out;
  for (const char* cmd : {"run", "acquire", "release", "extend", "status"}) {
    EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat("  ", cmd, " "))) << cmd;
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{cmd, "--help"}, {"help", cmd}, {"--help", cmd}}) {
      Result h = RunCli(args);
      EXPECT_EQ(h.exit_code, 0) << cmd;
      EXPECT_TRUE(absl::StartsWith(h.out, absl::StrCat("usage: redlock ", cmd))) << h.out;
      EXPECT_TRUE(absl::StrContains(h.out, "Exit codes:")) << cmd;
    }
  }
  Result v = RunCli({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(v.out, "redlock ")) << v.out;
}

// A Sentinel-managed node: `status` shows where its master is and what each
// of its Sentinels says (one answering, one where nothing listens).
TEST_F(CliTest, StatusShowsWhatEachSentinelSays) {
  REDLOCK_REQUIRE_SENTINEL();
  auto sentinel = testkit::Sentinel::Start({.masters = {{"n0", fleet().address(0)}}});
  ASSERT_TRUE(sentinel.ok()) << sentinel.status();
  absl::StatusOr<int> dead = testkit::PickFreePort("127.0.0.1");
  ASSERT_TRUE(dead.ok()) << dead.status();
  const std::string dead_address = absl::StrCat("127.0.0.1:", *dead);
  const std::string node =
      absl::StrCat("redis+sentinel://", (*sentinel)->address(), "+", dead_address, "/n0");
  Result s = RunCli({"--nodes", node, "status", Res("sentinel")});
  ASSERT_EQ(s.exit_code, 0) << Describe(s);
  EXPECT_TRUE(absl::StrContains(s.out, absl::StrCat("  master at ", fleet().address(0)))) << s.out;
  EXPECT_TRUE(
      absl::StrContains(s.out, absl::StrCat("  sentinel ", (*sentinel)->address(), ": names ",
                                            fleet().address(0), " (config epoch 0)")))
      << s.out;
  EXPECT_TRUE(absl::StrContains(
      s.out, absl::StrCat("  sentinel ", dead_address, ": names no master yet; Sentinel ",
                          dead_address, ": ")))
      << s.out;
  Result j = RunCli({"--nodes", node, "status", "--json", Res("sentinel")});
  ASSERT_EQ(j.exit_code, 0) << Describe(j);
  EXPECT_TRUE(absl::StrContains(
      j.out, absl::StrCat("\"sentinels\":[{\"address\":\"", (*sentinel)->address(),
                          "\",\"connected\":true,\"master\":\"", fleet().address(0),
                          "\",\"config_epoch\":0,\"error\":null}")))
      << j.out;
}

}  // namespace
}  // namespace redlock
