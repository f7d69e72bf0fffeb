// A GoogleTest fixture that shares one real-server fleet across a test suite
// and gives every test its own key prefix, so tests cannot see each other's
// keys:
//
//   class MyTest : public redlock::testkit::FleetSuite {
//    protected:
//     Options MakeOptions() override {           // optional
//       Options o = FleetSuite::MakeOptions();
//       o.fencing = true;
//       return o;
//     }
//   };
//   TEST_F(MyTest, Works) { auto client = MakeClient(); ... }
//
// Nodes that forbid scripting: with REDLOCK_TEST_SCRIPTING=none in the
// environment every node of the fleet denies scripting to the clients' ACL
// user (FleetOptions::deny_scripting), with =mixed nodes 0, 2 and 4 do; so a
// whole suite runs again on such fleets (tests/CMakeLists.txt registers the
// *_scriptless and *_mixed entries). A test that exercises the scripts
// themselves skips there (ScriptsOnEveryNode()).
//
// The same tests over plain TCP and over TLS (each instantiation runs on a
// fleet of its own kind):
//
//   class MyCoreTest : public redlock::testkit::OverTransports<MyTest> {};
//   TEST_P(MyCoreTest, Works) { ... }
//   REDLOCK_INSTANTIATE_OVER_TRANSPORTS(MyCoreTest);

#ifndef REDLOCK_TESTKIT_FLEET_SUITE_H_
#define REDLOCK_TESTKIT_FLEET_SUITE_H_

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "testkit/gtest_fleet.h"

namespace redlock::testkit {

class FleetSuite : public ::testing::Test {
 protected:
  static constexpr int kNodes = 5;

  static void TearDownTestSuite() {
    delete fleet_;
    fleet_ = nullptr;
  }

  // Whether the fleet speaks TLS (OverTransports sets it per instantiation).
  virtual bool UseTls() const { return false; }

  // Which nodes deny scripting (REDLOCK_TEST_SCRIPTING, see the file comment).
  static std::vector<bool> DenyScripting() {
    const char* e = std::getenv("REDLOCK_TEST_SCRIPTING");
    const std::string mode = e == nullptr ? "" : e;
    if (mode == "none") return std::vector<bool>(kNodes, true);
    if (mode == "mixed") return {true, false, true, false, true};
    return {};
  }
  // False when the suite runs on nodes that forbid scripting.
  static bool ScriptsOnEveryNode() { return DenyScripting().empty(); }

  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    // Started by the suite's first test, shared by the others.
    if (fleet_ == nullptr || fleet_->options().tls != UseTls()) {
      delete fleet_;
      fleet_ = nullptr;
      auto fleet =
          Fleet::Start({.nodes = kNodes, .tls = UseTls(), .deny_scripting = DenyScripting()});
      ASSERT_TRUE(fleet.ok()) << fleet.status();
      fleet_ = fleet->release();
    }
    // A test may have stopped or killed nodes: bring every node back.
    for (int i = 0; i < fleet_->size(); ++i) {
      if (fleet_->pid(i) <= 0) {
        REDLOCK_ASSERT_OK(fleet_->StartNode(i));
      } else {
        REDLOCK_ASSERT_OK(fleet_->Continue(i));
      }
    }
    prefix_ = absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
  }

  void TearDown() override {
    if (holder_ != nullptr) {
      absl::Status st = holder_->Release(held_);
      EXPECT_TRUE(st.ok()) << st;
    }
  }

  // Another client takes this test's `resource` for 30 s; it is released
  // when the test ends. Use with ASSERT_NO_FATAL_FAILURE.
  void HoldElsewhere(const std::string& resource) {
    holder_ = MakeClient();
    ASSERT_NE(holder_, nullptr);
    absl::StatusOr<Lease> held = holder_->TryAcquire(resource, absl::Seconds(30));
    ASSERT_TRUE(held.ok()) << held.status();
    held_ = *std::move(held);
  }

  // The fleet's nodes and this test's key prefix; suites override to tune.
  virtual Options MakeOptions() {
    Options o;
    o.nodes = fleet_->endpoints();
    o.tls = fleet_->ClientTls();
    o.key_prefix = prefix_;
    return o;
  }
  std::unique_ptr<Client> MakeClient(Options o) {
    auto c = Client::Create(std::move(o));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  std::unique_ptr<Client> MakeClient() { return MakeClient(MakeOptions()); }

  // The time since `t`.
  static absl::Duration Since(std::chrono::steady_clock::time_point t) {
    return absl::FromChrono(std::chrono::steady_clock::now() - t);
  }

  // Get(node, resource), polled until the key is gone ("") or the wait runs
  // out: a release returns once a quorum confirmed, the other nodes follow
  // (and a failed attempt's cleanup, after the late SETs it follows).
  std::string EventuallyGone(int node, const std::string& resource) {
    return Eventually([&] { return Get(node, resource); }, std::string());
  }

  // The value of this test's key for `resource` on `node` ("" if absent).
  std::string Get(int node, const std::string& resource) {
    absl::StatusOr<RedisValue> v = fleet_->Command(node, {"GET", prefix_ + resource});
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? v->str : "";
  }

  // How many of this test's keys match `pattern` (after prefix_) on `node`;
  // -1 (and a failure) where the node does not answer.
  int KeysOn(int node, const std::string& pattern = "*") {
    absl::StatusOr<RedisValue> v = fleet_->Command(node, {"KEYS", prefix_ + pattern});
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? static_cast<int>(v->elements.size()) : -1;
  }

  // The same summed over every node, a node that does not answer counting
  // 100 (no failure: a caller may wait for a node to come back).
  int KeysEverywhere(const std::string& pattern = "*") {
    int n = 0;
    for (int i = 0; i < fleet_->size(); ++i) {
      absl::StatusOr<RedisValue> v = fleet_->Command(i, {"KEYS", prefix_ + pattern});
      n += v.ok() ? static_cast<int>(v->elements.size()) : 100;
    }
    return n;
  }

  // `o` retrying quickly (every 20 ms, give or take 10): for suites whose
  // clients contend.
  static Options QuickRetries(Options o) {
    o.retry_delay = absl::Milliseconds(20);
    o.retry_jitter = absl::Milliseconds(10);
    return o;
  }

  // `o` pausing `delay` (no jitter) after a failed attempt, and while
  // waiting polling no more often than that: an acquisition of a held
  // resource stays pending that long unless a release announcement wakes it.
  static Options SlowRetries(Options o, absl::Duration delay) {
    o.retry_delay = delay;
    o.retry_jitter = absl::ZeroDuration();
    o.wait_poll_max = delay;
    return o;
  }

  // How many times `node` has run `command` (lower case, as INFO
  // commandstats names it: "set", "evalsha"); -1 if it cannot be read.
  // Calls of `command` on `node`; "evalsha|delifeq" sums several (a
  // release goes as DELIFEQ where the server has it: Valkey 9.1).
  long long CommandCalls(int node, const std::string& command) {
    long long calls = 0;
    for (absl::string_view c : absl::StrSplit(command, '|')) {
      calls += fleet_->CommandCalls(node, std::string(c));
    }
    return calls;
  }

  // CommandCalls(node, command) for every node.
  std::vector<long long> CommandCallsOnEveryNode(const std::string& command) {
    std::vector<long long> calls;
    for (int i = 0; i < fleet_->size(); ++i) calls.push_back(CommandCalls(i, command));
    return calls;
  }

  // True once `attempts` failed acquisition attempts, each a `command` on a
  // node and its cleanup's (two calls), have reached the nodes every failed
  // attempt reaches: an attempt goes to the nodes in index order and stops
  // once decided, so a failed one has reached at least the first
  // N - quorum + 1 (the refusals that decided it), and its cleanup follows
  // on each. `before` is CommandCallsOnEveryNode before the attempts. A
  // release from then on finds the waiters waiting, not yet trying.
  bool AttemptsFailedSince(const std::string& command, const std::vector<long long>& before,
                           long long attempts) {
    const int n = fleet_->size();
    const int deciding = n - (n / 2 + 1) + 1;
    for (int i = 0; i < deciding; ++i) {
      if (CommandCalls(i, command) < before[static_cast<size_t>(i)] + 2 * attempts) return false;
    }
    return true;
  }

  // True when every node has a subscriber on the release channel of this
  // test's `resource`: a waiting Acquire there hears a release announced.
  bool ReleasesHeardOnEveryNode(const std::string& resource) {
    for (int i = 0; i < fleet_->size(); ++i) {
      absl::StatusOr<RedisValue> v = fleet_->Command(
          i, {"PUBSUB", "NUMSUB", absl::StrCat("redlock:release:", prefix_, resource)});
      if (!v.ok() || v->elements.size() != 2 || v->elements[1].integer < 1) return false;
    }
    return true;
  }

  static inline Fleet* fleet_ = nullptr;
  std::string prefix_;
  std::unique_ptr<Client> holder_;  // HoldElsewhere
  Lease held_;
};

// A FleetSuite for clients that contend: they retry quickly (QuickRetries),
// and Fenced() gives the same options with fencing tokens on.
class ContendingFleetSuite : public FleetSuite {
 protected:
  Options MakeOptions() override { return QuickRetries(FleetSuite::MakeOptions()); }
  Options Fenced() {
    Options o = MakeOptions();
    o.fencing = true;
    return o;
  }
};

enum class Transport { kPlain, kTls };

// A FleetSuite whose tests run once per transport (see the file comment).
template <typename Suite>
class OverTransports : public Suite, public ::testing::WithParamInterface<Transport> {
 protected:
  bool UseTls() const override { return this->GetParam() == Transport::kTls; }
};

// Two instantiations, "Plain/" and "Tls/", so that each runs all its tests
// on one fleet.
#define REDLOCK_INSTANTIATE_OVER_TRANSPORTS(suite)                                    \
  INSTANTIATE_TEST_SUITE_P(Plain, suite,                                              \
                           ::testing::Values(::redlock::testkit::Transport::kPlain)); \
  INSTANTIATE_TEST_SUITE_P(Tls, suite, ::testing::Values(::redlock::testkit::Transport::kTls))

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_FLEET_SUITE_H_
