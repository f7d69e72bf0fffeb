// Fencing tokens against five real redis-server processes.

#include "redlock/fencing.h"

#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "multilock/multi_lock.h"
#include "redlock/client.h"
#include "testkit/fleet_suite.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;
using testkit::RedisValue;

class FencingTest : public testkit::FleetSuite {
 protected:
  Options MakeOptions() override {
    Options o = FleetSuite::MakeOptions();
    o.fencing = true;
    o.retry_delay = absl::Milliseconds(5);
    o.retry_jitter = absl::Milliseconds(5);
    return o;
  }
  Options Unfenced() {
    Options o = MakeOptions();
    o.fencing = false;
    return o;
  }
  int CounterKeys() { return KeysEverywhere("*:fence"); }

  // What can happen to a node's counter behind the clients' backs.
  enum class Regression {
    kDeleted,  // a restart without persistence
    kSetBack,  // a restore of an older state, or a hand edit
    kGarbage,  // overwritten with something that is no counter
  };
  // Regresses node `node`'s counter of "acct", whose last token was `token`.
  absl::Status Regress(int node, Regression how, uint64_t token) {
    const std::string key = prefix_ + "acct:fence";
    switch (how) {
      case Regression::kDeleted:
        return fleet_->Command(node, {"DEL", key}).status();
      case Regression::kSetBack:
        return fleet_->Command(node, {"SET", key, std::to_string(token - 1)}).status();
      case Regression::kGarbage:
        return fleet_->Command(node, {"SET", key, "garbage"}).status();
    }
    return absl::InternalError("unknown regression");
  }

  // A fenced TryAcquire of "acct" by `c` while node `refusing` (-1: none)
  // holds someone else's key and node `late` is stopped until the call has
  // had time to decide without it (300 ms). Which nodes a majority-only
  // acquisition reads and commits is then known in advance: the three
  // others, whatever the order of their replies. An acquisition that needs
  // four waits for `late`. Needs a node_timeout well above 300 ms.
  absl::StatusOr<Lease> AcquireAround(Client& c, int refusing, int late) {
    const std::string key = prefix_ + "acct";
    if (refusing >= 0) {
      absl::Status st =
          fleet_->Command(refusing, {"SET", key, "someone-else", "PX", "60000"}).status();
      if (!st.ok()) return st;
    }
    absl::Status st = fleet_->Stop(late);
    if (!st.ok()) return st;
    auto promise = std::make_shared<std::promise<absl::StatusOr<Lease>>>();
    std::future<absl::StatusOr<Lease>> result = promise->get_future();
    c.TryAcquireAsync("acct", absl::Seconds(10),
                      [promise](absl::StatusOr<Lease> l) { promise->set_value(std::move(l)); });
    // Bounded: a majority of the three answering nodes decides in a few
    // round trips; the remedy waits for `late` whatever happens.
    result.wait_for(std::chrono::milliseconds(300));
    st = fleet_->Continue(late);
    if (!st.ok()) return st;
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      return absl::DeadlineExceededError("the acquisition did not complete in 10 s");
    }
    if (refusing >= 0) {
      st = fleet_->Command(refusing, {"DEL", key}).status();
      if (!st.ok()) return st;
    }
    return result.get();
  }

  // Holder A, then B, with the counters of `regressed` regressed in
  // between. Returns both tokens.
  void TwoHolders(const Options& o, Regression how, const std::vector<int>& regressed,
                  uint64_t* first, uint64_t* second) {
    auto a = MakeClient(o);
    auto b = MakeClient(o);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    // Counters at 41 everywhere, as after 41 holders.
    for (int i = 0; i < 5; ++i) {
      REDLOCK_ASSERT_OK(fleet_->Command(i, {"SET", prefix_ + "acct:fence", "41"}).status());
    }
    // A: node 4 refuses, node 3 is late. Majorities commit on {0,1,2}; with
    // a lost counter tolerated (four of five) on {0,1,2,3}.
    absl::StatusOr<Lease> la = AcquireAround(*a, 4, 3);
    REDLOCK_ASSERT_OK(la.status());
    *first = la->fencing_token();
    EXPECT_EQ(*first, 42u);
    const int fenced = o.fencing_lost_counters > 0 ? 4 : 3;
    EXPECT_EQ(la->nodes_granted(), fenced);
    absl::StatusOr<RedisValue> on_late = fleet_->Command(3, {"GET", prefix_ + "acct:fence"});
    REDLOCK_ASSERT_OK(on_late.status());
    EXPECT_EQ(on_late->str, fenced == 4 ? "42" : "41") << "the late node took part or not";
    REDLOCK_ASSERT_OK(a->Release(*la));
    // Release answers at the quorum; B's premise is that A's keys are gone
    // from every node (on a node that forbids scripting, the release is a
    // transaction of two round trips, which may still be on its way).
    for (int i = 0; i < 5; ++i) {
      EXPECT_TRUE(testkit::Eventually(
          [&] {
            absl::StatusOr<RedisValue> v = fleet_->Command(i, {"EXISTS", prefix_ + "acct"});
            return v.ok() && v->integer == 0;
          },
          true, absl::Seconds(5)))
          << "node " << i << " kept A's key";
    }
    for (int node : regressed) REDLOCK_ASSERT_OK(Regress(node, how, *first));
    // B: node 0 refuses, node 1 is late. Majorities read {2,3,4}, which
    // meets {0,1,2} in node 2 only; four of five read {1,2,3,4}, which
    // meets {0,1,2,3} in nodes 1, 2 and 3. A garbage counter takes its node
    // out of the vote, so then nobody refuses: {0,3,4} and {0,1,3,4}.
    absl::StatusOr<Lease> lb = AcquireAround(*b, how == Regression::kGarbage ? -1 : 0, 1);
    REDLOCK_ASSERT_OK(lb.status());
    *second = lb->fencing_token();
    EXPECT_EQ(lb->nodes_granted(), fenced);
    REDLOCK_ASSERT_OK(b->Release(*lb));
  }

  Options ToleratingALostCounter() {
    Options o = MakeOptions();
    o.fencing_lost_counters = 1;
    o.node_timeout = absl::Seconds(2);
    return o;
  }
};

// What fencing with the default fencing_lost_counters (0) does NOT survive,
// shown so the README's claim cannot drift from the code: with majority
// quorums of an odd N, two successive holders' quorums may meet in a single
// node, so that one node losing its counter (a restart without appendfsync
// always) is enough to hand out a token twice. With one lost counter
// tolerated the same fleet refuses to hand out a token at all.
TEST_F(FencingTest, OneLostCounterOnTheOnlySharedNodeRepeatsAToken) {
  Options o = MakeOptions();
  o.fencing_lost_counters = 0;
  o.node_timeout = absl::Milliseconds(30);
  REDLOCK_ASSERT_OK(fleet_->Stop(3));
  REDLOCK_ASSERT_OK(fleet_->Stop(4));
  uint64_t first;
  {
    auto a = MakeClient(o);
    absl::StatusOr<Lease> la = a->TryAcquire("acct", absl::Seconds(10));  // quorum {0, 1, 2}
    REDLOCK_ASSERT_OK(la.status());
    first = la->fencing_token();
    REDLOCK_ASSERT_OK(a->Release(*la));
  }
  REDLOCK_ASSERT_OK(fleet_->Continue(3));
  REDLOCK_ASSERT_OK(fleet_->Continue(4));
  // Node 2 forgets its counter, as after a restart without persistence.
  REDLOCK_ASSERT_OK(fleet_->Command(2, {"DEL", prefix_ + "acct:fence"}).status());
  REDLOCK_ASSERT_OK(fleet_->Stop(0));
  REDLOCK_ASSERT_OK(fleet_->Stop(1));
  auto b = MakeClient(o);
  absl::StatusOr<Lease> lb = b->TryAcquire("acct", absl::Seconds(10));  // quorum {2, 3, 4}
  REDLOCK_ASSERT_OK(lb.status());
  EXPECT_EQ(lb->fencing_token(), first)
      << "the quorums {0,1,2} and {2,3,4} share node 2 only: with its counter gone, B reads no "
         "trace of A's token";
  REDLOCK_EXPECT_OK(b->Release(*lb));
  // Tolerating a lost counter needs four nodes: with two stopped, no token.
  Options tolerant = o;
  tolerant.fencing_lost_counters = 1;
  auto c = MakeClient(tolerant);
  absl::StatusOr<Lease> lc = c->TryAcquire("acct", absl::Seconds(10));
  EXPECT_EQ(lc.status().code(), absl::StatusCode::kUnavailable) << lc.status();
  EXPECT_THAT(std::string(lc.status().message()), HasSubstr("(quorum 4)"));
}

// The same case with one lost counter tolerated, for each way a counter can
// go back: B's token is higher than A's.
TEST_F(FencingTest, ToleratingALostCounterADeletedCounterOnASharedNodeStillIncreases) {
  uint64_t first = 0, second = 0;
  ASSERT_NO_FATAL_FAILURE(
      TwoHolders(ToleratingALostCounter(), Regression::kDeleted, {2}, &first, &second));
  EXPECT_GT(second, first);
}

TEST_F(FencingTest, ToleratingALostCounterASetBackCounterOnASharedNodeStillIncreases) {
  uint64_t first = 0, second = 0;
  ASSERT_NO_FATAL_FAILURE(
      TwoHolders(ToleratingALostCounter(), Regression::kSetBack, {2}, &first, &second));
  EXPECT_GT(second, first);
}

TEST_F(FencingTest, ToleratingALostCounterAGarbageCounterOnASharedNodeStillIncreases) {
  uint64_t first = 0, second = 0;
  ASSERT_NO_FATAL_FAILURE(
      TwoHolders(ToleratingALostCounter(), Regression::kGarbage, {2}, &first, &second));
  EXPECT_GT(second, first);
  absl::StatusOr<RedisValue> garbage = fleet_->Command(2, {"GET", prefix_ + "acct:fence"});
  REDLOCK_ASSERT_OK(garbage.status());
  EXPECT_EQ(garbage->str, "garbage") << "left for an operator to look at, never overwritten";
}

// With N=5, F = 4 and two commit sets share three nodes: two of them may
// lose their counters.
TEST_F(FencingTest, ToleratingALostCounterFiveNodesSurviveTwoDeletedCounters) {
  uint64_t first = 0, second = 0;
  ASSERT_NO_FATAL_FAILURE(
      TwoHolders(ToleratingALostCounter(), Regression::kDeleted, {2, 3}, &first, &second));
  EXPECT_GT(second, first);
}

TEST_F(FencingTest, ContendingClientsGetStrictlyIncreasingTokensInHoldOrder) {
  constexpr int kClients = 4;
  constexpr int kPerClient = 60;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(MakeClient(MakeOptions()));
  std::mutex mu;
  std::vector<uint64_t> in_hold_order;  // appended while holding the lock
  std::atomic<int> holders{0};
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < kPerClient; ++i) {
        absl::StatusOr<Lease> l = clients[c]->Acquire("r", absl::Seconds(5), absl::Seconds(10));
        if (!l.ok()) continue;
        if (++holders > 1) ++overlaps;
        {
          std::lock_guard<std::mutex> lock(mu);
          in_hold_order.push_back(l->fencing_token());
        }
        --holders;
        (void)clients[c]->Release(*l);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_GE(in_hold_order.size(), static_cast<size_t>(kClients * kPerClient * 9 / 10));
  for (size_t i = 1; i < in_hold_order.size(); ++i) {
    ASSERT_GT(in_hold_order[i], in_hold_order[i - 1]) << "at hold #" << i;
  }
  std::set<uint64_t> distinct(in_hold_order.begin(), in_hold_order.end());
  EXPECT_EQ(distinct.size(), in_hold_order.size())
      << "concurrent clients never receive equal tokens";
}

// Options::FencingCounters::kShared: contending clients on three resources,
// tokens strictly increasing per resource in hold order, and one counter
// key per node for the whole namespace.
TEST_F(FencingTest, ASharedCounterKeepsTokensIncreasingPerResourceWithOneKeyPerNode) {
  Options o = MakeOptions();
  o.fencing_counters = Options::FencingCounters::kShared;
  constexpr int kClients = 3;
  constexpr int kPerClient = 30;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(MakeClient(o));
  std::mutex mu;
  std::map<std::string, std::vector<uint64_t>> in_hold_order;  // appended while holding
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < kPerClient; ++i) {
        const std::string r = absl::StrCat("r", (c + i) % 3);
        absl::StatusOr<Lease> l = clients[c]->Acquire(r, absl::Seconds(5), absl::Seconds(10));
        if (!l.ok()) continue;
        {
          std::lock_guard<std::mutex> lock(mu);
          in_hold_order[r].push_back(l->fencing_token());
        }
        (void)clients[c]->Release(*l);
      }
    });
  }
  for (auto& t : threads) t.join();
  size_t holds = 0;
  for (const auto& [r, tokens] : in_hold_order) {
    holds += tokens.size();
    for (size_t i = 1; i < tokens.size(); ++i) {
      ASSERT_GT(tokens[i], tokens[i - 1]) << r << " at hold #" << i;
    }
  }
  EXPECT_GE(holds, static_cast<size_t>(kClients * kPerClient * 9 / 10));
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<RedisValue> v = fleet_->Command(i, {"KEYS", prefix_ + "*fence"});
    ASSERT_TRUE(v.ok());
    ASSERT_LE(v->elements.size(), 1u) << "node " << i;
    if (!v->elements.empty()) {
      EXPECT_EQ(v->elements[0].str, prefix_ + ":fence");
    }
  }
}

TEST_F(FencingTest, EarlyExpiryBehindTheHoldersBackStillGivesAHigherToken) {
  auto a = MakeClient(MakeOptions());
  auto b = MakeClient(MakeOptions());
  uint64_t last = 0;
  for (int round = 0; round < 20; ++round) {
    absl::StatusOr<Lease> la = a->TryAcquire("r", absl::Seconds(30));
    REDLOCK_ASSERT_OK(la.status());
    EXPECT_GT(la->fencing_token(), last);
    // The key vanishes on a varying majority: the effect of a forward clock
    // jump on those nodes (Redis expires by the wall clock). A still
    // believes it holds the lock; B takes it.
    for (int k = 0; k < 3; ++k) {
      const int node = (round + k) % 5;
      // A's call returned at its quorum: on a node that runs transactions
      // (a fleet denying scripting) its write may still land after this
      // DEL, so the DEL waits for it first (bounded; a node A was not
      // granted on never gets it).
      (void)testkit::Eventually(
          [&] {
            absl::StatusOr<testkit::RedisValue> v = fleet_->Command(node, {"GET", prefix_ + "r"});
            return v.ok() && v->str == la->token();
          },
          true, absl::Milliseconds(500));
      REDLOCK_ASSERT_OK(fleet_->Command(node, {"DEL", prefix_ + "r"}).status());
    }
    absl::StatusOr<Lease> lb = b->TryAcquire("r", absl::Seconds(30));
    REDLOCK_ASSERT_OK(lb.status());
    EXPECT_GT(lb->fencing_token(), la->fencing_token()) << "round " << round;
    last = lb->fencing_token();
    // The protected resource refuses A from now on.
    FenceGuard guard;
    EXPECT_TRUE(guard.Admit(lb->fencing_token()));
    EXPECT_FALSE(guard.Admit(la->fencing_token()));
    REDLOCK_ASSERT_OK(b->Release(*lb));
    REDLOCK_ASSERT_OK(a->Release(*la));
  }
}

TEST_F(FencingTest, TokensKeepIncreasingAcrossStoppedAndContinuedNodes) {
  auto c = MakeClient(MakeOptions());
  uint64_t last = 0;
  for (int round = 0; round < 30; ++round) {
    int a = round % 5;
    int b = (round + 2) % 5;
    if (round % 3 == 0) {
      REDLOCK_ASSERT_OK(fleet_->Stop(a));
    }
    if (round % 6 == 0) {
      REDLOCK_ASSERT_OK(fleet_->Stop(b));
    }
    absl::StatusOr<Lease> l = c->Acquire("r", absl::Seconds(10), absl::Seconds(5));
    REDLOCK_ASSERT_OK(l.status()) << "round " << round;
    EXPECT_GT(l->fencing_token(), last) << "round " << round;
    last = l->fencing_token();
    REDLOCK_ASSERT_OK(fleet_->Continue(a));
    REDLOCK_ASSERT_OK(fleet_->Continue(b));
    (void)c->Release(*l);
  }
}

TEST_F(FencingTest, MultiLockGivesEachResourceItsOwnIncreasingToken) {
  auto c = MakeClient(MakeOptions());
  MultiLock multi(c.get());
  absl::StatusOr<Lease> single = c->TryAcquire("b", absl::Seconds(5));
  REDLOCK_ASSERT_OK(single.status());
  uint64_t b_before = single->fencing_token();
  REDLOCK_ASSERT_OK(c->Release(*single));
  absl::StatusOr<MultiLease> l = multi.TryAcquire({"a", "b"}, absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_GE(l->fencing_token("a"), 1u);
  EXPECT_GT(l->fencing_token("b"), b_before);
  REDLOCK_ASSERT_OK(multi.Release(*l));
}

TEST_F(FencingTest, WithoutFencingNoCounterKeysAndNoTokens) {
  auto c = MakeClient(Unfenced());
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_EQ(l->fencing_token(), 0u);
  EXPECT_EQ(CounterKeys(), 0);
  REDLOCK_ASSERT_OK(c->Release(*l));
  // Reserved names are refused with fencing off too (an election keeps its
  // counter there whatever the options), and nothing is written.
  EXPECT_EQ(c->TryAcquire("x:fence", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CounterKeys(), 0);
  auto fenced = MakeClient(MakeOptions());
  EXPECT_EQ(fenced->TryAcquire("x:fence", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(FencingTest, CountersHaveNoTtl) {
  auto c = MakeClient(MakeOptions());
  absl::StatusOr<Lease> l = c->TryAcquire("r", absl::Seconds(5));
  REDLOCK_ASSERT_OK(l.status());
  int with_counter = 0;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<RedisValue> ttl = fleet_->Command(i, {"PTTL", prefix_ + "r:fence"});
    REDLOCK_ASSERT_OK(ttl.status());
    if (ttl->integer == -1) ++with_counter;  // exists, no expiry
  }
  EXPECT_GE(with_counter, 3);
  REDLOCK_ASSERT_OK(c->Release(*l));
}

TEST_F(FencingTest, FencedScriptsRefuseStaleTokens) {
  auto run = [&](absl::string_view script, std::vector<std::string> args) {
    std::vector<std::string> cmd = {"EVAL", std::string(script), "2", prefix_ + "data",
                                    prefix_ + "fence"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    return fleet_->Command(0, cmd);
  };
  absl::StatusOr<RedisValue> w = run(FencedWriteScript(), {"5", "v5"});
  REDLOCK_ASSERT_OK(w.status());
  EXPECT_EQ(w->type, RedisValue::Type::kStatus);
  absl::StatusOr<RedisValue> r = run(FencedReadScript(), {"7"});
  REDLOCK_ASSERT_OK(r.status());
  EXPECT_EQ(r->str, "v5");
  // Token 6 read nothing after 7: the fence is at 7 now.
  absl::StatusOr<RedisValue> stale = run(FencedWriteScript(), {"6", "v6"});
  REDLOCK_ASSERT_OK(stale.status());
  EXPECT_EQ(stale->type, RedisValue::Type::kError);
  EXPECT_THAT(stale->str, HasSubstr("STALE token 6 < fence 7"));
  // 64-bit tokens compare exactly (no Lua doubles).
  REDLOCK_ASSERT_OK(run(FencedWriteScript(), {"18446744073709551614", "big"}).status());
  absl::StatusOr<RedisValue> below = run(FencedWriteScript(), {"18446744073709551613", "x"});
  EXPECT_EQ(below->type, RedisValue::Type::kError);
  absl::StatusOr<RedisValue> bad = run(FencedWriteScript(), {"007", "x"});
  EXPECT_EQ(bad->type, RedisValue::Type::kError);
}

}  // namespace
}  // namespace redlock
