// Tests of the external-client protocol (chaos/clients/external_client.h):
//
//   - framing and mapping against a fake adapter (tests/chaos/fake_adapter.py,
//     no server): a grant becomes a HeldLock, refusals become status codes,
//     and an adapter that dies, answers garbage or hangs is a clear error
//     that stops the client process with a non-zero exit;
//   - the real adapters (node-redlock, redis-py's Lock) against a real
//     redis-server fleet: two clients on one resource, acquire, remaining,
//     extend, release, the held-elsewhere and unavailable answers, and
//     mutual exclusion of two client loops checked by the checker.
//
// A missing node, npm package or python3-redis skips the real-adapter tests
// with the message naming scripts/lab-clients.sh; under CI=true it fails.

#include "chaos/clients/external_client.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "chaos/check/checker.h"
#include "chaos/clients/workload.h"
#include "chaos/history/history.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testkit/files.h"
#include "testkit/fleet.h"
#include "testkit/gtest_fleet.h"
#include "testkit/process.h"
#include "tests/chaos/scoped_env.h"

namespace redlock::chaos {
namespace {

using ::testing::HasSubstr;

using testkit::ReadFile;

// ---- The fake adapter -------------------------------------------------------------

class FakeAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = testkit::FindExecutable("python3");
    if (python_.empty()) {
      if (testkit::UnderCi())
        FAIL() << "python3 is not installed, and CI=true makes that a failure";
      GTEST_SKIP() << "python3 is not installed (run scripts/lab-clients.sh)";
    }
  }

  ClientConfig Config(const std::string& flags = "") {
    ClientConfig c;
    c.name = "c9";
    c.client = absl::StrCat(python_, " ", REDLOCK_FAKE_ADAPTER, " --log=", log_,
                            flags.empty() ? "" : " ", flags);
    c.nodes = {"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"};
    c.data = "127.0.0.1:7009";
    c.history = dir_.path() + "/c9.jsonl";
    c.ttl_ms = 1000;
    c.node_timeout_ms = 42;
    c.drift_factor = 0.02;
    c.client_timeout_ms = 3000;
    return c;
  }

  std::unique_ptr<ExternalBackend> Start(const ClientConfig& c) {
    absl::StatusOr<std::unique_ptr<ExternalBackend>> b = ExternalBackend::Start(c);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  std::string python_;
  testkit::TempDir dir_;
  std::string log_ = dir_.path() + "/requests.jsonl";
};

TEST_F(FakeAdapterTest, HelloCarriesTheConfigAndTheAnswerIsKept) {
  std::unique_ptr<ExternalBackend> b = Start(Config());
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->info().name, "fake");
  EXPECT_EQ(b->info().version, "0.1");
  EXPECT_TRUE(b->info().single_instance);
  EXPECT_FALSE(b->info().fencing);
  EXPECT_EQ(b->info().validity, "ttl - 10 ms");
  std::string log = ReadFile(log_);
  EXPECT_THAT(log, HasSubstr(R"("op":"hello")"));
  EXPECT_THAT(log, HasSubstr(R"("protocol":1)"));
  EXPECT_THAT(log, HasSubstr(R"("nodes":["127.0.0.1:7001","127.0.0.1:7002","127.0.0.1:7003"])"));
  EXPECT_THAT(log, HasSubstr(R"("node_timeout_ms":42)"));
  EXPECT_THAT(log, HasSubstr(R"("drift_factor":0.02)"));
  EXPECT_THAT(log, HasSubstr(R"("client":"c9")"));
  EXPECT_THAT(log, HasSubstr(R"("id":1)"));
}

TEST_F(FakeAdapterTest, AGrantIsMappedOntoTheRawClock) {
  std::unique_ptr<ExternalBackend> b = Start(Config());
  ASSERT_NE(b, nullptr);
  const int64_t before = RawMonotonicNanos();
  absl::StatusOr<HeldLock> h = b->Acquire("r0", 1000);
  const int64_t after = RawMonotonicNanos();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->resource, "r0");
  EXPECT_EQ(h->token, "tok-1");
  EXPECT_EQ(h->nodes, std::vector<int>{0});
  EXPECT_EQ(h->drift_ms, 3);
  EXPECT_FALSE(h->fencing_token.has_value());
  // start: before the request; valid_until: at the reply + the 990 ms the
  // fake reported.
  EXPECT_GE(h->start_raw, before);
  EXPECT_LE(h->start_raw, after);
  EXPECT_GE(h->valid_until_raw, h->start_raw + 990 * 1000000LL);
  EXPECT_LE(h->valid_until_raw, after + 990 * 1000000LL);
  EXPECT_THAT(ReadFile(log_), HasSubstr(R"("op":"acquire","resource":"r0","ttl_ms":1000)"));

  // TimeLeft is the adapter's own belief (`remaining`).
  absl::Duration left = b->TimeLeft(*h);
  EXPECT_GT(left, absl::ZeroDuration());
  EXPECT_LE(left, absl::Milliseconds(1000));
  EXPECT_THAT(ReadFile(log_), HasSubstr(R"("op":"remaining","resource":"r0","token":"tok-1")"));

  // Held elsewhere: kAborted with the adapter's message.
  absl::StatusOr<HeldLock> again = b->Acquire("r0", 1000);
  EXPECT_TRUE(absl::IsAborted(again.status())) << again.status();
  EXPECT_THAT(again.status().message(), HasSubstr("held by tok-1"));

  HeldLock extended = *h;
  ASSERT_TRUE(b->Extend(&extended, 2000).ok());
  EXPECT_GE(extended.valid_until_raw, h->valid_until_raw);
  EXPECT_THAT(ReadFile(log_),
              HasSubstr(R"("op":"extend","resource":"r0","token":"tok-1","ttl_ms":2000)"));

  EXPECT_TRUE(b->Release(*h).ok());
  EXPECT_EQ(b->TimeLeft(*h), absl::ZeroDuration());  // released: no belief left
  // Releasing again: the adapter says the lock is not ours.
  EXPECT_TRUE(absl::IsFailedPrecondition(b->Release(*h)));
  EXPECT_TRUE(absl::IsFailedPrecondition(b->Extend(&extended, 1000)));
  EXPECT_TRUE(b->Acquire("r0", 1000).ok());
  EXPECT_TRUE(b->Failure().ok());
}

// Granted, but by the time the client asks, the adapter believes the lease
// is over (the client process was paused while the reply waited): the
// recorded validity ends then, not a full ttl after the reply was read.
TEST_F(FakeAdapterTest, APauseWhileTheAdapterAnsweredIsNotCredited) {
  std::unique_ptr<ExternalBackend> b = Start(Config());
  ASSERT_NE(b, nullptr);
  absl::StatusOr<HeldLock> h = b->Acquire("stale", 1000);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_LT(h->valid_until_raw, RawMonotonicNanos());
  EXPECT_EQ(b->TimeLeft(*h), absl::ZeroDuration());
}

TEST_F(FakeAdapterTest, RefusalClassesBecomeStatusCodes) {
  std::unique_ptr<ExternalBackend> b = Start(Config());
  ASSERT_NE(b, nullptr);
  const std::vector<std::pair<std::string, absl::StatusCode>> classes = {
      {"held", absl::StatusCode::kAborted},
      {"unavailable", absl::StatusCode::kUnavailable},
      {"expired", absl::StatusCode::kDeadlineExceeded},
      {"lost", absl::StatusCode::kFailedPrecondition},
      {"other", absl::StatusCode::kInternal},
  };
  for (const auto& [cls, code] : classes) {
    absl::StatusOr<HeldLock> h = b->Acquire("refuse-" + cls, 1000);
    EXPECT_EQ(h.status().code(), code) << cls << ": " << h.status();
    EXPECT_THAT(h.status().message(), HasSubstr("refused refuse-" + cls));
  }
  EXPECT_TRUE(b->Failure().ok()) << b->Failure();
  // An unknown class is a broken adapter, not a refusal.
  absl::StatusOr<HeldLock> h = b->Acquire("refuse-nope", 1000);
  EXPECT_FALSE(h.ok());
  EXPECT_THAT(b->Failure().message(), HasSubstr("unknown class \"nope\""));
}

TEST_F(FakeAdapterTest, FencingTokensOnlyWhenTheAdapterHasThem) {
  ClientConfig c = Config();
  c.fencing = true;
  absl::StatusOr<std::unique_ptr<ExternalBackend>> no = ExternalBackend::Start(c);
  EXPECT_TRUE(absl::IsInvalidArgument(no.status())) << no.status();
  EXPECT_THAT(no.status().message(), HasSubstr("no fencing tokens"));

  c = Config("--fencing");
  c.fencing = true;
  std::unique_ptr<ExternalBackend> b = Start(c);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<HeldLock> h = b->Acquire("r0", 1000);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->fencing_token, 101u);
}

// Each way an adapter can fail the protocol: a clear error naming the
// request, the backend stays failed, and nothing hangs.
struct Broken {
  std::string resource;
  absl::StatusCode code;
  std::string message;
};

TEST_F(FakeAdapterTest, ABrokenAdapterIsAClearErrorNeverAHang) {
  const std::vector<Broken> cases = {
      {"die", absl::StatusCode::kUnavailable, "exited (exit 7) during acquire \"die\""},
      {"garbage", absl::StatusCode::kInternal, "not a JSON object: {this is not json"},
      {"wrong-id", absl::StatusCode::kInternal, "has another or no id"},
      {"hang", absl::StatusCode::kDeadlineExceeded, "did not answer acquire \"hang\" within 300ms"},
      {"huge", absl::StatusCode::kInternal, "longer than 65536 bytes"},
      {"no-token", absl::StatusCode::kInternal, "needs a \"token\""},
  };
  for (const Broken& k : cases) {
    ClientConfig c = Config();
    c.client_timeout_ms = 300;
    std::unique_ptr<ExternalBackend> b = Start(c);
    ASSERT_NE(b, nullptr);
    absl::StatusOr<HeldLock> h = b->Acquire(k.resource, 1000);
    EXPECT_EQ(h.status().code(), k.code) << k.resource << ": " << h.status();
    EXPECT_THAT(h.status().message(), HasSubstr(k.message)) << k.resource;
    EXPECT_THAT(h.status().message(), HasSubstr("client under test adapter `")) << k.resource;
    EXPECT_EQ(b->Failure(), h.status()) << k.resource;
    // Every later call answers the same failure at once, without I/O.
    EXPECT_EQ(b->Acquire("r0", 1000).status(), h.status()) << k.resource;
    HeldLock any;
    any.resource = "r0";
    any.token = "t";
    EXPECT_EQ(b->TimeLeft(any), absl::ZeroDuration());
    EXPECT_EQ(b->Release(any), h.status());
  }
}

TEST_F(FakeAdapterTest, ABadHelloFailsTheStart) {
  struct Case {
    std::string flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"--hello=error", "fake is not installed: run fake-install"},
      {"--hello=garbage", "not a JSON object: hello there"},
      {"--hello=noise", "not a JSON object: a library that prints on stdout"},
      {"--hello=old", "must carry \"protocol\": 1"},
  };
  for (const Case& k : cases) {
    absl::StatusOr<std::unique_ptr<ExternalBackend>> b = ExternalBackend::Start(Config(k.flags));
    EXPECT_FALSE(b.ok()) << k.flags;
    EXPECT_THAT(b.status().message(), HasSubstr(k.message)) << k.flags;
  }
  // A command that does not exist: the shell's exit status is named.
  ClientConfig c = Config();
  c.client = "/nonexistent/redlock-adapter --flag";
  absl::StatusOr<std::unique_ptr<ExternalBackend>> b = ExternalBackend::Start(c);
  EXPECT_TRUE(absl::IsUnavailable(b.status())) << b.status();
  EXPECT_THAT(b.status().message(), HasSubstr("exited (exit 127) during hello"));
}

// The client process: an adapter that dies mid-run stops it with exit 3 and
// the reason in its log.
TEST_F(FakeAdapterTest, TheClientProcessExitsNonZeroWhenItsAdapterDies) {
  ClientConfig c = Config();
  c.resources = {"die"};
  testkit::ProcessOptions p;
  p.argv = {REDLOCK_CHAOS_CLIENT_PATH};
  for (std::string& a : ClientArgs(c)) p.argv.push_back(std::move(a));
  p.stdout_to = testkit::Stream::kPipe;
  p.stderr_to = testkit::Stream::kStdout;
  absl::StatusOr<testkit::ProcessResult> r = testkit::RunProcess(p, absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code(), 3) << r->out;
  EXPECT_THAT(r->out, HasSubstr("c9: stopped: UNAVAILABLE: client under test adapter `"));
  EXPECT_THAT(r->out, HasSubstr("exited (exit 7) during acquire \"die\""));
  // The attempt whose outcome is unknown is not recorded as a failure.
  std::string history = ReadFile(c.history);
  EXPECT_THAT(history, HasSubstr("\"invoke\""));
  EXPECT_EQ(history.find("\"fail\""), std::string::npos) << history;
}

// The state letter of /proc/<pid>/stat ('S', 'R', 'T', ...), and the pids
// whose parent is `parent`.
char ProcState(pid_t pid) {
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

std::vector<pid_t> Children(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ');
    pid_t ppid = 0;
    if (f.size() > 1 && absl::SimpleAtoi(f[1], &ppid) && ppid == parent) out.push_back(pid);
  }
  return out;
}

// The harness pauses "the client": for an external client that must stop
// the adapter (the lock client) too, as a pause stops a library inside the
// process. The client process leads a process group holding its adapter.
TEST_F(FakeAdapterTest, PausingTheClientProcessPausesItsAdapter) {
  REDLOCK_REQUIRE_REDIS();
  absl::StatusOr<std::unique_ptr<testkit::Fleet>> data = testkit::Fleet::Start({.nodes = 1});
  ASSERT_TRUE(data.ok()) << data.status();
  MarkerHub hub;
  ClientLaunch launch;
  launch.config = Config();
  launch.config.data = (*data)->address(0);
  launch.binary = REDLOCK_CHAOS_CLIENT_PATH;
  launch.log_path = dir_.path() + "/c9.log";
  absl::StatusOr<std::unique_ptr<ClientProcess>> client = ClientProcess::Spawn(launch, &hub);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(hub.Wait(0, absl::Seconds(20), [](const Marker& m) { return m.kind == "grant"; }))
      << ReadFile(launch.log_path);
  std::vector<pid_t> adapters = Children((*client)->pid());
  ASSERT_EQ(adapters.size(), 1u);
  const pid_t adapter = adapters[0];
  EXPECT_EQ(getpgid(adapter), (*client)->pid());

  ASSERT_TRUE((*client)->Pause().ok());
  // Both stop, each when the kernel next takes it off a CPU: wait for both.
  char state = '?';
  char leader = '?';
  for (int i = 0; i < 200 && (state != 'T' || leader != 'T'); ++i) {  // bounded: 2 s
    state = ProcState(adapter);
    leader = ProcState((*client)->pid());
    if (state != 'T' || leader != 'T') usleep(10000);
  }
  EXPECT_EQ(state, 'T') << "the adapter runs on while its client is paused";
  EXPECT_EQ(leader, 'T');
  ASSERT_TRUE((*client)->Resume().ok());
  for (int i = 0; i < 200 && state == 'T'; ++i) {
    state = ProcState(adapter);
    if (state == 'T') usleep(10000);
  }
  EXPECT_NE(state, 'T');
  EXPECT_EQ((*client)->Stop(absl::Seconds(10)), "exit 0") << ReadFile(launch.log_path);
  // The adapter exits with its client.
  for (int i = 0; i < 200 && ProcState(adapter) != '?' && ProcState(adapter) != 'Z'; ++i) {
    usleep(10000);
  }
  EXPECT_TRUE(ProcState(adapter) == '?' || ProcState(adapter) == 'Z');
}

// ---- Configuration --------------------------------------------------------------

TEST(ExternalClientConfigTest, ClientArgsRoundTrip) {
  ClientConfig c;
  c.nodes = {"127.0.0.1:1"};
  c.data = "127.0.0.1:2";
  c.history = "/tmp/h.jsonl";
  absl::StatusOr<ClientConfig> back = ParseClientArgs(ClientArgs(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->client, "library");
  EXPECT_EQ(back->client_timeout_ms, 0);
  c.client = "python3 /opt/my adapter.py --flag=x";
  c.client_timeout_ms = 777;
  back = ParseClientArgs(ClientArgs(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->client, c.client);
  EXPECT_EQ(back->client_timeout_ms, 777);
  EXPECT_EQ(AdapterRequestTimeout(*back), absl::Milliseconds(777));
  back->client_timeout_ms = 0;
  EXPECT_EQ(AdapterRequestTimeout(*back), absl::Milliseconds(c.ttl_ms + 5000));

  // External clients have no broken variants.
  c.variant = ClientVariant::kNoElapsedCheck;
  EXPECT_TRUE(absl::IsInvalidArgument(ParseClientArgs(ClientArgs(c)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MakeLibraryBackend(c).status()));
}

TEST(ExternalClientConfigTest, KnownAdaptersAndWhatToInstall) {
  absl::StatusOr<AdapterCommand> node = ResolveAdapter("node-redlock");
  if (node.ok()) {
    EXPECT_TRUE(node->known);
    EXPECT_TRUE(absl::EndsWith(node->argv.back(), "chaos/clients/node-redlock/adapter.js"))
        << node->argv.back();
  }
  absl::StatusOr<AdapterCommand> py = ResolveAdapter("redis-py");
  if (py.ok()) {
    EXPECT_TRUE(absl::EndsWith(py->argv.back(), "chaos/clients/redis-py/adapter.py"));
  }
  absl::StatusOr<AdapterCommand> user = ResolveAdapter("./my-adapter --x");
  ASSERT_TRUE(user.ok());
  EXPECT_FALSE(user->known);
  EXPECT_EQ(user->argv, (std::vector<std::string>{"/bin/sh", "-c", "exec ./my-adapter --x"}));
  EXPECT_FALSE(ResolveAdapter("library").ok());
  EXPECT_TRUE(IsLibraryClient("library"));
  EXPECT_TRUE(IsLibraryClient(""));
  EXPECT_TRUE(CheckExternalClientAvailable("library").ok());

  // A missing runtime names the install script; a skip locally, a failure
  // under CI=true.
  ScopedEnv node_env("REDLOCK_CHAOS_NODE", "/nonexistent/node");
  absl::StatusOr<AdapterCommand> missing = ResolveAdapter("node-redlock");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("scripts/lab-clients.sh"));
  {
    ScopedEnv ci("CI", nullptr);
    absl::Status s = CheckExternalClientAvailable("node-redlock");
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("scripts/lab-clients.sh"));
  }
  {
    ScopedEnv ci("CI", "true");
    absl::Status s = CheckExternalClientAvailable("node-redlock");
    EXPECT_TRUE(absl::IsNotFound(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("CI=true"));
  }
  // An adapter directory without the adapter, and one without the npm
  // packages (the adapter's --check says what to run).
  testkit::TempDir empty;
  ScopedEnv ci("CI", nullptr);
  {
    ScopedEnv dir("REDLOCK_CHAOS_CLIENTS_DIR", empty.path().c_str());
    absl::Status s = CheckExternalClientAvailable("redis-py");
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("no adapter at"));
  }
  std::filesystem::create_directories(empty.path() + "/node-redlock");
  std::filesystem::copy_file(
      std::string(REDLOCK_SOURCE_DIR) + "/chaos/clients/node-redlock/adapter.js",
      empty.path() + "/node-redlock/adapter.js");
  ScopedEnv dir("REDLOCK_CHAOS_CLIENTS_DIR", empty.path().c_str());
  ScopedEnv real_node("REDLOCK_CHAOS_NODE", nullptr);
  absl::Status s = CheckExternalClientAvailable("node-redlock");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("scripts/lab-clients.sh"));
}

// ---- The real adapters against a real fleet -----------------------------------------

class RealAdapterTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    absl::Status available = CheckExternalClientAvailable(GetParam());
    if (absl::IsFailedPrecondition(available)) GTEST_SKIP() << available;
    ASSERT_TRUE(available.ok()) << available;
    absl::StatusOr<std::unique_ptr<testkit::Fleet>> fleet = testkit::Fleet::Start({.nodes = 5});
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = *std::move(fleet);
    absl::StatusOr<std::unique_ptr<testkit::Fleet>> data = testkit::Fleet::Start({.nodes = 1});
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *std::move(data);
  }

  ClientConfig Config(const std::string& name) {
    ClientConfig c;
    c.name = name;
    c.client = GetParam();
    for (int i = 0; i < fleet_->size(); ++i) c.nodes.push_back(fleet_->address(i));
    c.data = data_->address(0);
    c.history = absl::StrCat(dir_.path(), "/", name, ".jsonl");
    c.ttl_ms = 2000;
    c.node_timeout_ms = 100;
    return c;
  }

  bool single() const { return GetParam() == "redis-py"; }
  // The nodes the client locks on: all five, or the middle one.
  std::vector<int> LockNodes() const {
    return single() ? std::vector<int>{2} : std::vector<int>{0, 1, 2, 3, 4};
  }

  std::unique_ptr<testkit::Fleet> fleet_;
  std::unique_ptr<testkit::Fleet> data_;
  testkit::TempDir dir_;
};

TEST_P(RealAdapterTest, TwoClientsOnOneResource) {
  absl::StatusOr<std::unique_ptr<ExternalBackend>> a = ExternalBackend::Start(Config("c1"));
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::unique_ptr<ExternalBackend>> b = ExternalBackend::Start(Config("c2"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->info().name, GetParam());
  EXPECT_EQ((*a)->info().single_instance, single());
  EXPECT_FALSE((*a)->info().fencing);

  absl::StatusOr<HeldLock> held = (*a)->Acquire("ext-r", 2000);
  ASSERT_TRUE(held.ok()) << held.status();
  const std::vector<int> lock_nodes = LockNodes();
  EXPECT_EQ(held->nodes, lock_nodes);
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<testkit::RedisValue> v = fleet_->Command(i, {"GET", "ext-r"});
    ASSERT_TRUE(v.ok()) << v.status();
    bool locked_here = std::find(lock_nodes.begin(), lock_nodes.end(), i) != lock_nodes.end();
    if (locked_here) {
      EXPECT_EQ(v->str, held->token) << "n" << i;  // the token is the key's value
    } else {
      EXPECT_EQ(v->type, testkit::RedisValue::Type::kNil) << "n" << i;
    }
  }
  absl::Duration left = (*a)->TimeLeft(*held);
  EXPECT_GT(left, absl::Milliseconds(1000));
  EXPECT_LE(left, absl::Milliseconds(2000));
  EXPECT_GT(held->valid_until_raw, held->start_raw + 1000 * 1000000LL);
  EXPECT_LE(held->valid_until_raw, RawMonotonicNanos() + 2000 * 1000000LL);

  // Held elsewhere, classified as such.
  absl::StatusOr<HeldLock> other = (*b)->Acquire("ext-r", 2000);
  EXPECT_TRUE(absl::IsAborted(other.status())) << other.status();

  // Extend: a fresh ttl, the same token, still held on the same nodes.
  HeldLock extended = *held;
  ASSERT_TRUE((*a)->Extend(&extended, 5000).ok());
  EXPECT_EQ(extended.token, held->token);
  EXPECT_GT((*a)->TimeLeft(extended), absl::Milliseconds(3000));
  absl::StatusOr<testkit::RedisValue> pttl = fleet_->Command(lock_nodes[0], {"PTTL", "ext-r"});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(pttl->integer, 3000);
  // The other client cannot extend (or release) what it does not hold.
  HeldLock foreign = extended;
  foreign.token = "not-the-token";
  EXPECT_FALSE((*b)->Extend(&foreign, 1000).ok());

  ASSERT_TRUE((*a)->Release(extended).ok());
  for (int i : lock_nodes) {
    EXPECT_EQ(fleet_->Command(i, {"GET", "ext-r"})->type, testkit::RedisValue::Type::kNil);
  }
  absl::StatusOr<HeldLock> next = (*b)->Acquire("ext-r", 2000);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NE(next->token, held->token);
  EXPECT_TRUE((*b)->Release(*next).ok());
  EXPECT_TRUE((*a)->Failure().ok() && (*b)->Failure().ok());
}

TEST_P(RealAdapterTest, TooFewNodesIsUnavailable) {
  absl::StatusOr<std::unique_ptr<ExternalBackend>> a = ExternalBackend::Start(Config("c1"));
  ASSERT_TRUE(a.ok()) << a.status();
  // Node 2 (the single-instance client's node) and two more: no quorum of
  // five either.
  for (int i : {1, 2, 3}) ASSERT_TRUE(fleet_->Kill(i).ok());
  absl::StatusOr<HeldLock> h = (*a)->Acquire("ext-down", 2000);
  EXPECT_TRUE(absl::IsUnavailable(h.status())) << h.status();
  EXPECT_TRUE((*a)->Failure().ok()) << (*a)->Failure();
  for (int i : {1, 2, 3}) ASSERT_TRUE(fleet_->StartNode(i).ok());
  // The client reconnects by itself (bounded: a few attempts).
  absl::StatusOr<HeldLock> later = absl::UnavailableError("not tried");
  for (int k = 0; k < 50 && !later.ok(); ++k) {
    later = (*a)->Acquire("ext-down", 2000);
    if (!later.ok()) usleep(100000);
  }
  EXPECT_TRUE(later.ok()) << later.status();
}

// Two client loops (the same loop as a chaos run) on one resource of a
// healthy fleet: grants on both sides, and the checker finds mutual
// exclusion, validity and the counter intact.
TEST_P(RealAdapterTest, TwoClientLoopsKeepMutualExclusion) {
  std::vector<ClientConfig> configs = {Config("c1"), Config("c2")};
  std::atomic<bool> stop{false};
  std::vector<int> codes(configs.size(), -1);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < configs.size(); ++k) {
    configs[k].ttl_ms = 500;
    configs[k].use_ms = 10;
    configs[k].guard_ms = 50;
    configs[k].seed = k + 1;
    configs[k].duration_ms = 2500;
    threads.emplace_back([&, k] {
      absl::StatusOr<std::unique_ptr<LockBackend>> b = MakeLibraryBackend(configs[k]);
      if (!b.ok()) {
        ADD_FAILURE() << b.status();
        return;
      }
      codes[k] = RunClientLoop(configs[k], **b, &stop);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(codes, std::vector<int>(configs.size(), 0));
  absl::StatusOr<std::vector<Event>> history =
      ReadHistory({configs[0].history, configs[1].history});
  ASSERT_TRUE(history.ok()) << history.status();
  CheckResult r = Check(*history, CheckOptions());
  EXPECT_TRUE(r.ok()) << FormatReport(r);
  int64_t grants[2] = {0, 0};
  for (const Event& e : *history) {
    if (e.type == EventType::kGrant) ++grants[e.process == "c1" ? 0 : 1];
  }
  EXPECT_GT(grants[0], 3);
  EXPECT_GT(grants[1], 3);
}

INSTANTIATE_TEST_SUITE_P(Clients, RealAdapterTest, ::testing::Values("node-redlock", "redis-py"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return absl::StrReplaceAll(info.param, {{"-", "_"}});
                         });

}  // namespace
}  // namespace redlock::chaos
