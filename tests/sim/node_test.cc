// The simulated node (sim/node.h) on its own: Redis 7.0's semantics for the
// commands the library sends, every script of internal::AllScripts() run as
// written (EVALSHA and EVAL), WATCH aborts, WAIT blocks, replication,
// failover, restarts, cluster redirections during a migration, and the
// trace format. What a real redis-server answers to the same commands is
// checked by conformance_test.cc; here the node's clock is ours, so expiry,
// clock jumps and replication are exact.

#include "sim/node.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/fencing.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/sha1.h"
#include "sim/trace.h"

namespace redlock::sim {
namespace {

using internal::Script;

// Replies compared as their JSON form (type and value), which also prints
// readably when they differ.
std::string J(const Reply& r) { return ReplyToJson(r).dump(); }
Reply Int(int64_t i) { return Reply::Integer(i); }
Reply Str(std::string s) { return Reply::String(std::move(s)); }
Reply Status(std::string s) { return Reply::Status(std::move(s)); }
Reply Nil() { return Reply::Nil(); }
Reply Arr(std::vector<Reply> e) { return Reply::Array(std::move(e)); }
Reply Error(std::string s) { return Reply::Error(std::move(s)); }
Reply OK() { return Status("OK"); }

#define EXPECT_REPLY(got, want) EXPECT_EQ(J(got), J(want))

class NodeTest : public ::testing::Test {
 protected:
  explicit NodeTest(Node::Config config = Node::Config{.name = "n0"}) : node_(std::move(config)) {}

  Reply Run(const Argv& argv) { return node_.Execute(session_, argv, now_).reply; }
  Reply RunOn(Session& s, const Argv& argv) { return node_.Execute(s, argv, now_).reply; }
  // Loads every script of the library; returns nothing (checked).
  void LoadAll() {
    for (const Script* s : internal::AllScripts()) {
      ASSERT_REPLY(Run({"SCRIPT", "LOAD", s->body}), Str(s->sha));
    }
  }
  static void ASSERT_REPLY(const Reply& got, const Reply& want) { ASSERT_EQ(J(got), J(want)); }
  // EVALSHA of `s`, and the same through EVAL on a copy of the dataset
  // state: both must answer alike (the EVAL runs second, on what EVALSHA
  // left, so it is only compared when `both` and the script is read-only).
  Reply Sha(const Script& s, const std::vector<std::string>& keys,
            const std::vector<std::string>& args) {
    Argv argv = {"EVALSHA", s.sha, std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return Run(argv);
  }
  Reply Eval(const Script& s, const std::vector<std::string>& keys,
             const std::vector<std::string>& args) {
    Argv argv = {"EVAL", s.body, std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return Run(argv);
  }
  std::string ScriptError(const Script& s, const std::string& text, int line) {
    return absl::StrCat(text, " script: ", s.sha, ", on @user_script:", line, ".");
  }

  Node node_;
  Session session_;
  int64_t now_ = 1'700'000'000'000;
};

// ---- Strings, keys and expiry ---------------------------------------------------------------

TEST_F(NodeTest, SetNxPxGrantsOnceAndExpiresByTheNodeClock) {
  EXPECT_REPLY(Run({"SET", "k", "a", "NX", "PX", "100"}), OK());
  EXPECT_REPLY(Run({"SET", "k", "b", "NX", "PX", "100"}), Nil());
  EXPECT_REPLY(Run({"PTTL", "k"}), Int(100));
  now_ += 99;
  EXPECT_REPLY(Run({"GET", "k"}), Str("a"));
  now_ += 1;
  EXPECT_REPLY(Run({"GET", "k"}), Nil());
  EXPECT_REPLY(Run({"SET", "k", "b", "NX", "PX", "100"}), OK());
}

TEST_F(NodeTest, AClockJumpMovesExpiry) {
  EXPECT_REPLY(Run({"SET", "k", "a", "PX", "1000"}), OK());
  now_ -= 60'000;  // back: the key lives a minute longer
  EXPECT_REPLY(Run({"PTTL", "k"}), Int(61'000));
  now_ += 60'000 + 5'000;  // forward past it
  EXPECT_REPLY(Run({"EXISTS", "k"}), Int(0));
}

TEST_F(NodeTest, SetOptions) {
  EXPECT_REPLY(Run({"SET", "k", "v", "XX"}), Nil());
  EXPECT_REPLY(Run({"SET", "k", "v", "EX", "10"}), OK());
  EXPECT_REPLY(Run({"PTTL", "k"}), Int(10'000));
  EXPECT_REPLY(Run({"SET", "k", "w", "KEEPTTL", "GET"}), Str("v"));
  EXPECT_REPLY(Run({"PTTL", "k"}), Int(10'000));
  EXPECT_REPLY(Run({"SET", "k", "x", "XX"}), OK());
  EXPECT_REPLY(Run({"PTTL", "k"}), Int(-1));
  EXPECT_REPLY(Run({"SET", "k", "y", "NX", "GET"}), Str("x"));
  EXPECT_REPLY(Run({"SET", "n", "y", "NX", "GET"}), Nil());
  EXPECT_REPLY(Run({"GET", "n"}), Str("y"));
  EXPECT_REPLY(Run({"SET", "k", "v", "PXAT", std::to_string(now_ + 5)}), OK());
  EXPECT_REPLY(Run({"PTTL", "k"}), Int(5));
  EXPECT_REPLY(Run({"SET", "k", "v", "EXAT", std::to_string(now_ / 1000 + 2)}), OK());
  EXPECT_REPLY(Run({"PTTL", "k"}), Int((now_ / 1000 + 2) * 1000 - now_));
  EXPECT_REPLY(Run({"SET", "k", "v", "PXAT", "1"}), OK());  // in the past: gone at once
  EXPECT_REPLY(Run({"GET", "k"}), Nil());
  EXPECT_REPLY(Run({"SET", "k", "v", "EX", "1", "EX", "2"}), OK());  // the last wins
  EXPECT_REPLY(Run({"PTTL", "k"}), Int(2000));
  // Refused, and nothing changes.
  EXPECT_REPLY(Run({"SET", "k", "v", "NX", "XX"}), Error("ERR syntax error"));
  EXPECT_REPLY(Run({"SET", "k", "v", "PX"}), Error("ERR syntax error"));
  EXPECT_REPLY(Run({"SET", "k", "v", "KEEPTTL", "PX", "5"}), Error("ERR syntax error"));
  EXPECT_REPLY(Run({"SET", "k", "v", "EX", "1", "PX", "5"}), Error("ERR syntax error"));
  EXPECT_REPLY(Run({"SET", "k", "v", "PX", "0"}),
               Error("ERR invalid expire time in 'set' command"));
  EXPECT_REPLY(Run({"SET", "k", "v", "PX", "-5"}),
               Error("ERR invalid expire time in 'set' command"));
  EXPECT_REPLY(Run({"SET", "k", "v", "EX", "9223372036854775"}),
               Error("ERR invalid expire time in 'set' command"));
  EXPECT_REPLY(Run({"SET", "k", "v", "PX", "9223372036854775807"}),
               Error("ERR invalid expire time in 'set' command"));
  EXPECT_REPLY(Run({"SET", "k", "v", "PX", "1x"}),
               Error("ERR value is not an integer or out of range"));
  EXPECT_REPLY(Run({"SET", "k", "v", "PX", "010"}),
               Error("ERR value is not an integer or out of range"));
  EXPECT_REPLY(Run({"SET", "k", "v", "IFEQ", "v"}), Error("ERR syntax error"));  // not Valkey
  EXPECT_REPLY(Run({"PTTL", "k"}), Int(2000));
  EXPECT_REPLY(Run({"SET", "k"}), Error("ERR wrong number of arguments for 'set' command"));
}

TEST_F(NodeTest, WrongTypeAndGetRange) {
  EXPECT_REPLY(Run({"ZADD", "z", "1", "m"}), Int(1));
  const Reply wrong = Error("WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_REPLY(Run({"GET", "z"}), wrong);
  EXPECT_REPLY(Run({"GETRANGE", "z", "0", "1"}), wrong);
  EXPECT_REPLY(Run({"INCR", "z"}), wrong);
  EXPECT_REPLY(Run({"SET", "z", "v", "GET"}), wrong);
  EXPECT_REPLY(Run({"TYPE", "z"}), Status("zset"));
  EXPECT_REPLY(Run({"MGET", "z", "none"}), Arr({Nil(), Nil()}));
  EXPECT_REPLY(Run({"SET", "z", "v"}), OK());  // SET replaces any type
  EXPECT_REPLY(Run({"TYPE", "z"}), Status("string"));

  EXPECT_REPLY(Run({"GETRANGE", "none", "0", "5"}), Str(""));
  EXPECT_REPLY(Run({"GETRANGE", "none", "x", "5"}),
               Error("ERR value is not an integer or out of range"));
  EXPECT_REPLY(Run({"SET", "s", "hello"}), OK());
  EXPECT_REPLY(Run({"GETRANGE", "s", "0", "2"}), Str("hel"));
  EXPECT_REPLY(Run({"GETRANGE", "s", "-3", "-1"}), Str("llo"));
  EXPECT_REPLY(Run({"GETRANGE", "s", "0", "100"}), Str("hello"));
  EXPECT_REPLY(Run({"GETRANGE", "s", "5", "2"}), Str(""));
  EXPECT_REPLY(Run({"GETRANGE", "s", "-1", "-5"}), Str(""));
  EXPECT_REPLY(Run({"GETRANGE", "s", "-100", "1"}), Str("he"));
}

TEST_F(NodeTest, CountersUpToTwoToTheSixtyThree) {
  EXPECT_REPLY(Run({"INCR", "c"}), Int(1));
  EXPECT_REPLY(Run({"INCRBY", "c", "41"}), Int(42));
  EXPECT_REPLY(Run({"DECRBY", "c", "2"}), Int(40));
  EXPECT_REPLY(Run({"SET", "c", "9223372036854775806", "PX", "1000"}), OK());
  EXPECT_REPLY(Run({"INCR", "c"}), Int(INT64_MAX));
  EXPECT_REPLY(Run({"INCR", "c"}), Error("ERR increment or decrement would overflow"));
  EXPECT_REPLY(Run({"GET", "c"}), Str("9223372036854775807"));
  EXPECT_REPLY(Run({"PTTL", "c"}), Int(1000));  // INCR keeps the ttl
  EXPECT_REPLY(Run({"SET", "c", "9223372036854775808"}), OK());
  EXPECT_REPLY(Run({"INCR", "c"}), Error("ERR value is not an integer or out of range"));
  for (const char* bad : {"007", " 1", "+5", "-0", "1.5", ""}) {
    EXPECT_REPLY(Run({"SET", "c", bad}), OK());
    EXPECT_REPLY(Run({"INCR", "c"}), Error("ERR value is not an integer or out of range")) << bad;
  }
  EXPECT_REPLY(Run({"DECRBY", "c", "-9223372036854775808"}), Error("ERR decrement would overflow"));
  EXPECT_REPLY(Run({"SET", "c", "-9223372036854775808"}), OK());
  EXPECT_REPLY(Run({"DECR", "c"}), Error("ERR increment or decrement would overflow"));
}

TEST_F(NodeTest, DelExistsPexpirePttl) {
  EXPECT_REPLY(Run({"SET", "a", "1"}), OK());
  EXPECT_REPLY(Run({"SET", "b", "1"}), OK());
  EXPECT_REPLY(Run({"EXISTS", "a", "a", "b", "c"}), Int(3));
  EXPECT_REPLY(Run({"DEL", "a", "a", "c"}), Int(1));
  EXPECT_REPLY(Run({"PTTL", "a"}), Int(-2));
  EXPECT_REPLY(Run({"PTTL", "b"}), Int(-1));
  EXPECT_REPLY(Run({"PEXPIRE", "a", "100"}), Int(0));
  EXPECT_REPLY(Run({"PEXPIRE", "b", "100"}), Int(1));
  EXPECT_REPLY(Run({"PEXPIRE", "b", "50", "GT"}), Int(0));
  EXPECT_REPLY(Run({"PEXPIRE", "b", "500", "GT"}), Int(1));
  EXPECT_REPLY(Run({"PEXPIRE", "b", "100", "NX"}), Int(0));
  EXPECT_REPLY(Run({"PEXPIRE", "b", "100", "NX", "XX"}),
               Error("ERR NX and XX, GT or LT options at the same time are not compatible"));
  EXPECT_REPLY(Run({"PEXPIRE", "b", "100", "FOO"}), Error("ERR Unsupported option FOO"));
  EXPECT_REPLY(Run({"PEXPIRE", "b", "abc"}), Error("ERR value is not an integer or out of range"));
  EXPECT_REPLY(Run({"PEXPIRE", "b", "9223372036854775807"}),
               Error("ERR invalid expire time in 'pexpire' command"));
  EXPECT_REPLY(Run({"PTTL", "b"}), Int(500));
  EXPECT_REPLY(Run({"PERSIST", "b"}), Int(1));
  EXPECT_REPLY(Run({"PTTL", "b"}), Int(-1));
  EXPECT_REPLY(Run({"PEXPIRE", "b", "0"}), Int(1));  // in the past: deleted
  EXPECT_REPLY(Run({"EXISTS", "b"}), Int(0));
  EXPECT_REPLY(Run({"DEL"}), Error("ERR wrong number of arguments for 'del' command"));
}

TEST_F(NodeTest, SortedSets) {
  EXPECT_REPLY(Run({"ZADD", "z", "1", "a", "2", "b", "2", "c"}), Int(3));
  EXPECT_REPLY(Run({"ZADD", "z", "0.1", "x"}), Int(1));
  EXPECT_REPLY(Run({"ZSCORE", "z", "x"}), Str("0.10000000000000001"));
  EXPECT_REPLY(Run({"ZSCORE", "z", "none"}), Nil());
  EXPECT_REPLY(Run({"ZCARD", "z"}), Int(4));
  EXPECT_REPLY(Run({"ZRANGEBYSCORE", "z", "(1", "+inf"}), Arr({Str("b"), Str("c")}));
  EXPECT_REPLY(Run({"ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "2"}),
               Arr({Str("a"), Str("1"), Str("b"), Str("2")}));
  EXPECT_REPLY(Run({"ZCOUNT", "z", "1", "2"}), Int(3));
  // By rank: equal scores in member order; negative ranks from the end.
  EXPECT_REPLY(Run({"ZRANGE", "z", "0", "0"}), Arr({Str("x")}));
  EXPECT_REPLY(Run({"ZRANGE", "z", "-1", "-1", "WITHSCORES"}), Arr({Str("c"), Str("2")}));
  EXPECT_REPLY(Run({"ZRANGE", "z", "1", "100"}), Arr({Str("a"), Str("b"), Str("c")}));
  EXPECT_REPLY(Run({"ZRANGE", "z", "3", "1"}), Arr({}));
  EXPECT_REPLY(Run({"ZRANGE", "none", "0", "-1"}), Arr({}));
  EXPECT_REPLY(Run({"ZRANGE", "z", "a", "1"}),
               Error("ERR value is not an integer or out of range"));
  EXPECT_REPLY(Run({"ZRANGE", "z", "0", "1", "BYLEX"}), Error("ERR syntax error"));
  EXPECT_REPLY(Run({"ZADD", "z", "XX", "CH", "5", "a", "1", "new"}), Int(1));
  EXPECT_REPLY(Run({"ZADD", "z", "GT", "CH", "1", "a"}), Int(0));
  EXPECT_REPLY(Run({"ZADD", "z", "INCR", "2", "a"}), Str("7"));
  EXPECT_REPLY(Run({"ZADD", "z", "NX", "INCR", "2", "a"}), Nil());
  EXPECT_REPLY(Run({"ZADD", "z", "XX", "NX", "1", "a"}),
               Error("ERR XX and NX options at the same time are not compatible"));
  EXPECT_REPLY(Run({"ZADD", "z", "nan", "a"}), Error("ERR value is not a valid float"));
  EXPECT_REPLY(Run({"ZADD", "z", "1", "a", "2"}), Error("ERR syntax error"));
  EXPECT_REPLY(Run({"ZADD", "z", "inf", "i"}), Int(1));
  EXPECT_REPLY(Run({"ZADD", "z", "INCR", "-inf", "i"}),
               Error("ERR resulting score is not a number (NaN)"));
  EXPECT_REPLY(Run({"ZRANGEBYSCORE", "z", "a", "b"}), Error("ERR min or max is not a float"));
  EXPECT_REPLY(Run({"ZREMRANGEBYSCORE", "z", "-inf", "(2"}), Int(1));  // x
  EXPECT_REPLY(Run({"ZREM", "z", "a", "b", "c", "none"}), Int(3));
  EXPECT_REPLY(Run({"ZREM", "z", "i"}), Int(1));
  EXPECT_REPLY(Run({"EXISTS", "z"}), Int(0));  // empty: gone
}

// ---- Transactions ---------------------------------------------------------------------------

TEST_F(NodeTest, ExecRunsTheQueueAndAbortsOnAWatchedChange) {
  Session other;
  EXPECT_REPLY(Run({"WATCH", "k"}), OK());
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"SET", "k", "1"}), Status("QUEUED"));
  EXPECT_REPLY(Run({"GET", "k"}), Status("QUEUED"));
  EXPECT_REPLY(Run({"EXEC"}), Arr({OK(), Str("1")}));

  EXPECT_REPLY(Run({"WATCH", "k"}), OK());
  EXPECT_REPLY(RunOn(other, {"SET", "k", "2"}), OK());
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"SET", "k", "3"}), Status("QUEUED"));
  EXPECT_REPLY(Run({"EXEC"}), Nil());
  EXPECT_REPLY(Run({"GET", "k"}), Str("2"));

  // A change undone is still a change; a DEL of a missing key is none.
  EXPECT_REPLY(Run({"WATCH", "m"}), OK());
  EXPECT_REPLY(RunOn(other, {"DEL", "m"}), Int(0));
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"EXEC"}), Arr({}));
  EXPECT_REPLY(Run({"WATCH", "m"}), OK());
  EXPECT_REPLY(RunOn(other, {"SET", "m", "1"}), OK());
  EXPECT_REPLY(RunOn(other, {"DEL", "m"}), Int(1));
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"EXEC"}), Nil());
  // The session's own write counts too; UNWATCH forgets.
  EXPECT_REPLY(Run({"WATCH", "k"}), OK());
  EXPECT_REPLY(Run({"SET", "k", "4"}), OK());
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"EXEC"}), Nil());
  EXPECT_REPLY(Run({"WATCH", "k"}), OK());
  EXPECT_REPLY(Run({"SET", "k", "5"}), OK());
  EXPECT_REPLY(Run({"UNWATCH"}), OK());
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"EXEC"}), Arr({}));
}

TEST_F(NodeTest, WatchAbortsOnExpiryAsRedis7Does) {
  // Expired after WATCH, never read: EXEC aborts.
  EXPECT_REPLY(Run({"SET", "a", "1", "PX", "100"}), OK());
  EXPECT_REPLY(Run({"WATCH", "a"}), OK());
  now_ += 200;
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"EXEC"}), Nil());
  // Expired after WATCH, then read (deleted): aborts too.
  EXPECT_REPLY(Run({"SET", "b", "1", "PX", "100"}), OK());
  EXPECT_REPLY(Run({"WATCH", "b"}), OK());
  now_ += 200;
  EXPECT_REPLY(Run({"GET", "b"}), Nil());
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"EXEC"}), Nil());
  // Already expired at WATCH: its deletion is no change...
  EXPECT_REPLY(Run({"SET", "c", "1", "PX", "100"}), OK());
  now_ += 200;
  EXPECT_REPLY(Run({"WATCH", "c"}), OK());
  EXPECT_REPLY(Run({"GET", "c"}), Nil());
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"EXEC"}), Arr({}));
  // ... but a write after it is.
  Session other;
  EXPECT_REPLY(Run({"SET", "d", "1", "PX", "100"}), OK());
  now_ += 200;
  EXPECT_REPLY(Run({"WATCH", "d"}), OK());
  EXPECT_REPLY(RunOn(other, {"GET", "d"}), Nil());
  EXPECT_REPLY(RunOn(other, {"SET", "d", "2"}), OK());
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"EXEC"}), Nil());
}

TEST_F(NodeTest, QueueErrorsAbortExecAndRuntimeErrorsDoNot) {
  EXPECT_REPLY(Run({"EXEC"}), Error("ERR EXEC without MULTI"));
  EXPECT_REPLY(Run({"DISCARD"}), Error("ERR DISCARD without MULTI"));
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"MULTI"}), Error("ERR MULTI calls can not be nested"));
  EXPECT_REPLY(Run({"WATCH", "k"}), Error("ERR WATCH inside MULTI is not allowed"));
  EXPECT_REPLY(Run({"SET", "k", "1"}), Status("QUEUED"));
  EXPECT_REPLY(Run({"NOSUCH", "x"}),
               Error("ERR unknown command 'NOSUCH', with args beginning with: 'x' "));
  EXPECT_REPLY(Run({"EXEC"}), Error("EXECABORT Transaction discarded because of previous errors."));
  EXPECT_REPLY(Run({"GET", "k"}), Nil());
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"SET", "k", "1", "BAD"}), Status("QUEUED"));
  EXPECT_REPLY(Run({"INCR", "k"}), Status("QUEUED"));
  EXPECT_REPLY(Run({"WAIT", "0", "0"}), Status("QUEUED"));
  EXPECT_REPLY(Run({"EXEC"}), Arr({Error("ERR syntax error"), Int(1), Int(0)}));
  EXPECT_REPLY(Run({"MULTI"}), OK());
  EXPECT_REPLY(Run({"INCR", "k"}), Status("QUEUED"));
  EXPECT_REPLY(Run({"DISCARD"}), OK());
  EXPECT_REPLY(Run({"GET", "k"}), Str("1"));
}

TEST_F(NodeTest, ATransactionIsOneReplicationUnit) {
  Node node(Node::Config{.name = "r", .replicas = 1});
  Session s;
  EXPECT_REPLY(node.Execute(s, {"MULTI"}, now_).reply, OK());
  node.Execute(s, {"SET", "a", "1"}, now_);
  node.Execute(s, {"SET", "b", "2"}, now_);
  const Result exec = node.Execute(s, {"EXEC"}, now_);
  EXPECT_TRUE(exec.wrote);
  EXPECT_EQ(node.master_offset(), 1);
  EXPECT_EQ(s.last_write_offset, 1);
  const Result read = node.Execute(s, {"GET", "a"}, now_);
  EXPECT_FALSE(read.wrote);
  EXPECT_EQ(node.master_offset(), 1);
}

// ---- Replication, WAIT, failover, restart ----------------------------------------------------

TEST_F(NodeTest, WaitBlocksUntilReplicasHaveTheWrite) {
  Node node(Node::Config{.name = "m", .replicas = 2});
  Session s;
  EXPECT_REPLY(node.Execute(s, {"WAIT", "2", "100"}, now_).reply, Int(2));  // no write yet
  node.Execute(s, {"SET", "a", "1"}, now_);
  node.Execute(s, {"SET", "b", "1"}, now_);
  EXPECT_EQ(node.master_offset(), 2);
  Result wait = node.Execute(s, {"WAIT", "1", "100"}, now_);
  ASSERT_TRUE(wait.block.has_value());
  EXPECT_FALSE(wait.block->aof);
  EXPECT_EQ(wait.block->offset, 2);
  EXPECT_EQ(wait.block->numreplicas, 1);
  EXPECT_EQ(wait.block->timeout_ms, 100);
  node.Replicate(0, 1);
  EXPECT_EQ(node.AckedReplicas(2), 0);
  node.Replicate(0, 2);
  node.Replicate(1, 99);  // clamped to the master's offset
  EXPECT_EQ(node.replica_offset(1), 2);
  EXPECT_EQ(node.AckedReplicas(2), 2);
  EXPECT_REPLY(node.Execute(s, {"WAIT", "2", "0"}, now_).reply, Int(2));
  EXPECT_REPLY(node.Execute(s, {"WAIT", "x", "0"}, now_).reply,
               Error("ERR value is not an integer or out of range"));
  EXPECT_REPLY(node.Execute(s, {"WAIT", "1", "-1"}, now_).reply, Error("ERR timeout is negative"));
  EXPECT_REPLY(node.Execute(s, {"EVAL", "return redis.call('wait', 0, 0)", "0"}, now_).reply,
               Error(absl::StrCat("ERR This Redis command is not allowed from script script: ",
                                  internal::Sha1Hex("return redis.call('wait', 0, 0)"),
                                  ", on @user_script:1.")));
}

TEST_F(NodeTest, WaitAofNeedsRedis72AndAnAppendOnlyFileForNumlocal) {
  EXPECT_REPLY(Run({"WAITAOF", "1", "0", "0"}),
               Error("ERR unknown command 'WAITAOF', with args beginning with: '1' '0' '0' "));
  EXPECT_REPLY(Run({"COMMAND", "INFO", "WAITAOF"}), Arr({Nil()}));
  Node node(Node::Config{.name = "m", .version = "7.2.4", .appendonly = true, .replicas = 1});
  Session s;
  Result probe = node.Execute(s, {"COMMAND", "INFO", "WAITAOF"}, now_);
  ASSERT_EQ(probe.reply.elements.size(), 1u);
  EXPECT_EQ(probe.reply.elements[0].type, Reply::Type::kArray);
  node.Execute(s, {"SET", "a", "1"}, now_);
  Result w = node.Execute(s, {"WAITAOF", "1", "1", "50"}, now_);
  ASSERT_TRUE(w.block.has_value());
  EXPECT_TRUE(w.block->aof);
  EXPECT_EQ(w.block->numlocal, 1);
  node.Replicate(0, 1);
  EXPECT_EQ(node.FsyncedReplicas(1), 1);
  EXPECT_REPLY(node.Execute(s, {"WAITAOF", "1", "1", "50"}, now_).reply, Arr({Int(1), Int(1)}));
  Node plain(Node::Config{.name = "p", .server_name = "valkey"});
  EXPECT_REPLY(
      plain.Execute(s, {"WAITAOF", "1", "0", "0"}, now_).reply,
      Error("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled."));
  EXPECT_REPLY(plain.Execute(s, {"WAITAOF", "0", "0", "0"}, now_).reply, Arr({Int(0), Int(0)}));
}

TEST_F(NodeTest, FailoverLosesWhatTheReplicaHadNotApplied) {
  Node node(Node::Config{.name = "m", .replicas = 2});
  Session s;
  const Script& acquire = internal::AcquireSetScript();
  ASSERT_REPLY(node.Execute(s, {"SCRIPT", "LOAD", acquire.body}, now_).reply, Str(acquire.sha));
  node.Execute(s, {"SET", "a", "1"}, now_);
  node.Execute(s, {"SET", "b", "2", "PX", "5000"}, now_);
  node.Execute(s, {"EVALSHA", acquire.sha, "2", "c", "d", "tok", "5000"}, now_);
  EXPECT_EQ(node.master_offset(), 3);
  node.Replicate(0, 2);
  node.Replicate(1, 3);
  const std::string run_id = node.Execute(s, {"INFO", "server"}, now_).reply.str;
  node.Failover(0);
  EXPECT_EQ(node.master_offset(), 2);
  EXPECT_EQ(node.replica_offset(1), 2);
  EXPECT_EQ(node.Keys(now_), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*node.Get("b", now_), "2");
  EXPECT_FALSE(node.Get("b", now_ + 5000).has_value());  // its expiry came along
  EXPECT_TRUE(node.CachedScripts().empty());
  Session fresh;
  EXPECT_REPLY(node.Execute(fresh, {"EVALSHA", acquire.sha, "1", "c", "tok", "5000"}, now_).reply,
               Error("NOSCRIPT No matching script. Please use EVAL."));
  EXPECT_NE(node.Execute(fresh, {"INFO", "server"}, now_).reply.str, run_id);
}

TEST_F(NodeTest, RestartWithAndWithoutData) {
  Node node(Node::Config{.name = "m", .replicas = 1});
  Session s;
  node.Execute(s, {"SET", "a", "1"}, now_);
  node.Execute(s, {"SCRIPT", "LOAD", "return 1"}, now_);
  node.Restart(true, "1111111111111111111111111111111111111111");
  EXPECT_EQ(node.Keys(now_), std::vector<std::string>{"a"});
  EXPECT_TRUE(node.CachedScripts().empty());
  Session fresh;
  EXPECT_THAT(node.Execute(fresh, {"INFO"}, now_).reply.str,
              ::testing::HasSubstr("run_id:1111111111111111111111111111111111111111\r\n"));
  node.Restart(false, "2222222222222222222222222222222222222222");
  EXPECT_TRUE(node.Keys(now_).empty());
  node.Failover(0);  // the replica resynchronised from the empty master
  EXPECT_TRUE(node.Keys(now_).empty());
}

// ---- Scripts ---------------------------------------------------------------------------------

TEST_F(NodeTest, EveryScriptOfTheLibraryIsKnownByItsSha) {
  LoadAll();
  std::vector<std::string> shas;
  for (const Script* s : internal::AllScripts()) shas.push_back(s->sha);
  std::sort(shas.begin(), shas.end());
  shas.erase(std::unique(shas.begin(), shas.end()), shas.end());
  EXPECT_EQ(node_.CachedScripts(), shas);
  Argv exists = {"SCRIPT", "EXISTS"};
  for (const Script* s : internal::AllScripts()) exists.push_back(s->sha);
  exists.push_back("0000000000000000000000000000000000000000");
  const Reply r = Run(exists);
  ASSERT_EQ(r.elements.size(), internal::AllScripts().size() + 1);
  for (size_t i = 0; i + 1 < r.elements.size(); ++i) EXPECT_EQ(r.elements[i].integer, 1);
  EXPECT_EQ(r.elements.back().integer, 0);
}

TEST_F(NodeTest, AcquireReleaseExtend) {
  LoadAll();
  const Script& acquire = internal::AcquireSetScript();
  const Script& release = internal::ReleaseScript();
  const Script& release_one = internal::ReleaseOneScript();
  const Script& extend = internal::ExtendScript();
  EXPECT_REPLY(Sha(acquire, {"a", "b"}, {"t1", "1000"}), Int(1));
  EXPECT_REPLY(Sha(acquire, {"c", "b"}, {"t2", "1000"}), Int(-2));
  EXPECT_REPLY(Eval(acquire, {"a", "c"}, {"t2", "1000"}), Int(-1));
  EXPECT_REPLY(Run({"EXISTS", "c"}), Int(0));  // all or nothing
  EXPECT_REPLY(Run({"PTTL", "b"}), Int(1000));
  EXPECT_REPLY(Sha(extend, {"a", "b"}, {"t1", "5000"}), Int(1));
  EXPECT_REPLY(Run({"PTTL", "a"}), Int(5000));
  EXPECT_REPLY(Sha(extend, {"a", "b"}, {"t2", "9000"}), Int(0));
  EXPECT_REPLY(Run({"PTTL", "a"}), Int(5000));
  // Release: only the token's keys, announced on prefix..key.
  EXPECT_REPLY(Run({"SET", "d", "other"}), OK());
  Result r =
      node_.Execute(session_, {"EVALSHA", release.sha, "3", "a", "b", "d", "t1", "ch:"}, now_);
  EXPECT_REPLY(r.reply, Int(2));
  ASSERT_EQ(r.published.size(), 2u);
  EXPECT_EQ(r.published[0].channel, "ch:a");
  EXPECT_EQ(r.published[1].channel, "ch:b");
  EXPECT_EQ(r.published[0].payload, "");
  EXPECT_TRUE(r.wrote);
  EXPECT_REPLY(Run({"GET", "d"}), Str("other"));
  // An empty prefix announces nothing (the cleanup after a failed attempt).
  EXPECT_REPLY(Sha(acquire, {"a"}, {"t3", "1000"}), Int(1));
  r = node_.Execute(session_, {"EVALSHA", release.sha, "1", "a", "t3", ""}, now_);
  EXPECT_REPLY(r.reply, Int(1));
  EXPECT_TRUE(r.published.empty());
  // Release-one publishes on the whole channel.
  EXPECT_REPLY(Sha(acquire, {"a"}, {"t4", "1000"}), Int(1));
  r = node_.Execute(session_, {"EVALSHA", release_one.sha, "1", "a", "t4", "released:a"}, now_);
  EXPECT_REPLY(r.reply, Int(1));
  ASSERT_EQ(r.published.size(), 1u);
  EXPECT_EQ(r.published[0].channel, "released:a");
  r = node_.Execute(session_, {"EVALSHA", release_one.sha, "1", "a", "t4", "released:a"}, now_);
  EXPECT_REPLY(r.reply, Int(0));
  EXPECT_FALSE(r.wrote);
  // An expired lock is free; an extend never re-creates it.
  EXPECT_REPLY(Sha(acquire, {"e"}, {"t5", "100"}), Int(1));
  now_ += 100;
  EXPECT_REPLY(Sha(extend, {"e"}, {"t5", "1000"}), Int(0));
  EXPECT_REPLY(Run({"EXISTS", "e"}), Int(0));
  EXPECT_REPLY(Sha(acquire, {"e"}, {"t6", "100"}), Int(1));
}

TEST_F(NodeTest, FencingRounds) {
  LoadAll();
  const Script& fa = internal::FenceAcquireScript();
  const Script& fc = internal::FenceCommitScript();
  const Script& inspect = internal::InspectScript();
  EXPECT_REPLY(Sha(fa, {"a", "b", "fa", "fb"}, {"t1", "1000"}), Arr({Int(1), Str("0"), Str("0")}));
  EXPECT_REPLY(Sha(fa, {"c", "b", "fc", "fb"}, {"t2", "1000"}), Arr({Int(-2)}));
  EXPECT_REPLY(Sha(fc, {"a", "b", "fa", "fb"}, {"t1", "7", "9"}), Int(1));
  EXPECT_REPLY(Run({"MGET", "fa", "fb"}), Arr({Str("7"), Str("9")}));
  EXPECT_REPLY(Sha(fc, {"a", "b", "fa", "fb"}, {"t1", "6", "10"}),
               Int(1));  // raised, never lowered
  EXPECT_REPLY(Run({"MGET", "fa", "fb"}), Arr({Str("7"), Str("10")}));
  EXPECT_REPLY(Sha(fc, {"a", "b", "fa", "fb"}, {"t9", "100", "100"}), Int(0));
  EXPECT_REPLY(Run({"MGET", "fa", "fb"}), Arr({Str("7"), Str("10")}));
  // Counters beyond 2^63 compare as strings: 9223372036854775808 > ...807.
  EXPECT_REPLY(Run({"SET", "fa", "9223372036854775807"}), OK());
  EXPECT_REPLY(Sha(fc, {"a", "fa"}, {"t1", "9223372036854775808"}), Int(1));
  EXPECT_REPLY(Run({"GET", "fa"}), Str("9223372036854775808"));
  EXPECT_REPLY(Sha(inspect, {"a", "fa"}, {}),
               Arr({Str("t1"), Int(1000), Str("9223372036854775808")}));
  EXPECT_REPLY(Sha(inspect, {"none", "nofence"}, {}), Arr({Str(""), Int(-2), Str("0")}));
  // A garbage counter travels cut to 21 bytes.
  EXPECT_REPLY(Run({"SET", "fz", std::string(30, '9')}), OK());
  EXPECT_REPLY(Sha(fa, {"z", "fz"}, {"t3", "1000"}), Arr({Int(1), Str(std::string(21, '9'))}));
  // EVAL of the same body answers as EVALSHA does.
  EXPECT_REPLY(Eval(fa, {"z", "fz"}, {"t3", "1000"}), Arr({Int(-1)}));
  // A lock key of another type: the script's error, with Redis 7's suffix.
  EXPECT_REPLY(Run({"ZADD", "w", "1", "m"}), Int(1));
  EXPECT_REPLY(Sha(fc, {"w", "fw"}, {"t1", "5"}),
               Error(ScriptError(
                   fc, "WRONGTYPE Operation against a key holding the wrong kind of value", 4)));
}

TEST_F(NodeTest, ReaderWriterLockScripts) {
  LoadAll();
  const Script& read = internal::RwReadAcquireScript();
  const Script& write = internal::RwWriteAcquireScript();
  const Script& commit = internal::RwReadCommitScript();
  const Script& rextend = internal::RwReadExtendScript();
  const Script& rrelease = internal::RwReadReleaseScript();
  const Script& withdraw = internal::RwWithdrawScript();
  const Script& inspect = internal::RwInspectScript();
  const std::vector<std::string> keys = {"W", "W:rw:readers", "W:rw:wait"};
  const std::vector<std::string> fenced = {"W", "W:rw:readers", "W:rw:wait", "W:fence"};
  EXPECT_REPLY(Sha(read, keys, {"r1", "1000"}), Int(1));
  EXPECT_REPLY(Sha(read, fenced, {"r2", "2000"}), Arr({Int(1), Str("0")}));
  EXPECT_REPLY(Run({"PTTL", "W:rw:readers"}), Int(2000));
  EXPECT_REPLY(Run({"ZSCORE", "W:rw:readers", "r1"}), Str(std::to_string(now_ + 1000)));
  // A writer waits behind readers, recording its intent; new readers are refused.
  EXPECT_REPLY(Sha(write, keys, {"w1", "1000", "waiter1", "500"}), Int(-1));
  EXPECT_REPLY(Run({"ZCARD", "W:rw:wait"}), Int(1));
  EXPECT_REPLY(Sha(read, keys, {"r3", "1000"}), Int(-2));
  EXPECT_REPLY(Sha(inspect, fenced, {}), Arr({Str(""), Int(-2), Int(2), Int(1), Str("0")}));
  // Reader round 2 and extension.
  EXPECT_REPLY(Sha(commit, {"W:rw:readers", "W:fence"}, {"r2", "5"}), Int(1));
  EXPECT_REPLY(Run({"GET", "W:fence"}), Str("5"));
  EXPECT_REPLY(Sha(commit, {"W:rw:readers", "W:fence"}, {"nobody", "9"}), Int(0));
  EXPECT_REPLY(Sha(rextend, {"W:rw:readers"}, {"r1", "3000"}), Int(1));
  EXPECT_REPLY(Run({"PTTL", "W:rw:readers"}), Int(3000));
  EXPECT_REPLY(Sha(rextend, {"W:rw:readers"}, {"nobody", "3000"}), Int(0));
  // Releases: the last reader out announces.
  Result r = node_.Execute(session_,
                           {"EVALSHA", rrelease.sha, "2", "W", "W:rw:readers", "r1", "ch:"}, now_);
  EXPECT_REPLY(r.reply, Int(1));
  EXPECT_TRUE(r.published.empty());
  r = node_.Execute(session_, {"EVALSHA", rrelease.sha, "2", "W", "W:rw:readers", "r2", "ch:"},
                    now_);
  EXPECT_REPLY(r.reply, Int(1));
  ASSERT_EQ(r.published.size(), 1u);
  EXPECT_EQ(r.published[0].channel, "ch:W");
  EXPECT_REPLY(Sha(write, fenced, {"w1", "1000", "waiter1", "500"}), Arr({Int(1), Str("5")}));
  EXPECT_REPLY(Run({"EXISTS", "W:rw:wait"}), Int(0));  // its intent withdrawn
  EXPECT_REPLY(Run({"GET", "W"}), Str("w1"));
  EXPECT_REPLY(Sha(read, fenced, {"r4", "1000"}), Arr({Int(-1)}));
  // A writer's intent expires by the node's clock; withdraw announces.
  EXPECT_REPLY(Run({"DEL", "W"}), Int(1));
  EXPECT_REPLY(Run({"ZADD", "W:rw:readers", std::to_string(now_ + 100), "rr"}), Int(1));
  EXPECT_REPLY(Sha(write, keys, {"w2", "1000", "waiter2", "50"}), Int(-1));
  r = node_.Execute(session_, {"EVALSHA", withdraw.sha, "2", "W", "W:rw:wait", "waiter2", "ch:"},
                    now_);
  EXPECT_REPLY(r.reply, Int(1));
  ASSERT_EQ(r.published.size(), 1u);
  EXPECT_REPLY(Sha(write, keys, {"w2", "1000", "waiter2", "50"}), Int(-1));
  now_ += 60;
  EXPECT_REPLY(Sha(read, keys, {"r5", "1000"}), Int(1));  // the intent lapsed
  now_ += 50;                                             // rr's entry lapsed too
  EXPECT_REPLY(Sha(commit, {"W:rw:readers", "W:fence"}, {"rr", "9"}), Int(0));
}

TEST_F(NodeTest, SemaphoreScript) {
  LoadAll();
  const Script& sem = internal::SemAcquireScript();
  const std::vector<std::string> permits = {"s:permit:0", "s:permit:1", "s:permit:2"};
  EXPECT_REPLY(Sha(sem, permits, {"t1", "1000", "1", "3"}), Arr({Int(2)}));
  EXPECT_REPLY(Sha(sem, permits, {"t2", "1000", "1", "3"}), Arr({Int(3)}));
  EXPECT_REPLY(Sha(sem, permits, {"t3", "1000", "1", "3"}), Arr({Int(1)}));
  EXPECT_REPLY(Sha(sem, permits, {"t4", "1000", "1", "3"}), Arr({Int(0)}));
  std::vector<std::string> fenced = permits;
  fenced.insert(fenced.end(), {"s:permit:0:f", "s:permit:1:f", "s:permit:2:f"});
  EXPECT_REPLY(Run({"DEL", "s:permit:2"}), Int(1));
  EXPECT_REPLY(Run({"SET", "s:permit:2:f", "41"}), OK());
  EXPECT_REPLY(Sha(sem, fenced, {"t5", "1000", "0", "3"}), Arr({Int(3), Str("41")}));
}

// The fair lock's scripts as written (fair_scripts.h): a try only on an
// empty queue, places by ticket, the lock for the head only, one wake-up
// (on the head's channel) per release or departure, expiry by the node's
// clock.
TEST_F(NodeTest, FairLockScripts) {
  LoadAll();
  const Script& probe = internal::FairProbeScript();
  const Script& reg = internal::FairRegisterScript();
  const Script& acquire = internal::FairAcquireScript();
  const Script& refresh = internal::FairRefreshScript();
  const Script& release = internal::FairReleaseScript();
  const Script& leave = internal::FairLeaveScript();
  const std::vector<std::string> k = {"W", "W:fair:q", "W:fair:exp"};
  auto exec = [&](const Script& script, const std::vector<std::string>& args) {
    Argv argv = {"EVALSHA", script.sha, "3", "W", "W:fair:q", "W:fair:exp"};
    argv.insert(argv.end(), args.begin(), args.end());
    return node_.Execute(session_, argv, now_);
  };
  // A try on an empty queue takes the lock, without a place.
  EXPECT_REPLY(Sha(probe, k, {"t1.a1", "1000", "ch:"}), Arr({Int(1), Str("0")}));
  EXPECT_REPLY(Run({"GET", "W"}), Str("t1.a1"));
  EXPECT_REPLY(Run({"EXISTS", "W:fair:q"}), Int(0));
  // Two waiters take tickets 1 and 2 while W is held.
  EXPECT_REPLY(Sha(reg, k, {"t2.b2", "1000", "ch:", "b2", "1", "600"}), Arr({Int(-1), Str("1")}));
  EXPECT_REPLY(Sha(reg, k, {"t3.c3", "1000", "ch:", "c3", "2", "600"}), Arr({Int(-1), Str("2")}));
  EXPECT_REPLY(Run({"ZSCORE", "W:fair:exp", "b2"}), Str(std::to_string(now_ + 600)));
  EXPECT_REPLY(Run({"PTTL", "W:fair:q"}), Int(600));
  // A try never jumps the queue, even with W free.
  Result r = exec(release, {"t1.a1", "ch:", "release"});
  EXPECT_REPLY(r.reply, Int(1));
  ASSERT_EQ(r.published.size(), 1u) << "one wake-up, for the head only";
  EXPECT_EQ(r.published[0].channel, "ch:W:b2");
  EXPECT_REPLY(Sha(probe, k, {"t9.f9", "1000", "ch:"}), Arr({Int(-2), Str("2")}));
  // Only the head gets the lock; a waiter without a place is told (-3).
  EXPECT_REPLY(Sha(acquire, k, {"t3.c3", "1000", "ch:", "c3"}), Arr({Int(-2), Str("2")}));
  EXPECT_REPLY(Sha(acquire, k, {"t8.e8", "1000", "ch:", "e8"}), Arr({Int(-3), Str("2")}));
  EXPECT_REPLY(Sha(acquire, k, {"t2.b2", "1000", "ch:", "b2"}), Arr({Int(1), Str("2")}));
  // A heartbeat keeps a place, or puts a missing one back with its ticket.
  now_ += 300;
  EXPECT_REPLY(Sha(refresh, k, {"ch:", "c3", "2", "600", "0"}), Arr({Int(1), Int(0)}));
  EXPECT_REPLY(Run({"ZSCORE", "W:fair:exp", "c3"}), Str(std::to_string(now_ + 600)));
  EXPECT_REPLY(Sha(refresh, k, {"ch:", "d4", "3", "600", "0"}), Arr({Int(0), Int(0)}));
  EXPECT_REPLY(Sha(refresh, k, {"ch:", "d4", "3", "600", "1"}), Arr({Int(2), Int(0)}));
  // A waiter that leaves wakes nobody unless it was the head with W free.
  r = exec(leave, {"d4", "ch:"});
  EXPECT_REPLY(r.reply, Int(1));
  EXPECT_TRUE(r.published.empty());
  // The holder's release takes its place out and wakes the next head only.
  r = exec(release, {"t2.b2", "ch:", "release"});
  EXPECT_REPLY(r.reply, Int(1));
  ASSERT_EQ(r.published.size(), 1u);
  EXPECT_EQ(r.published[0].channel, "ch:W:c3");
  EXPECT_REPLY(Run({"ZSCORE", "W:fair:q", "b2"}), Nil());
  // c3's place lapses by the node's clock: the next call purges it, and the
  // queue is empty again.
  now_ += 601;
  EXPECT_REPLY(Sha(acquire, k, {"t3.c3", "1000", "ch:", "c3"}), Arr({Int(-3), Str("0")}));
  EXPECT_REPLY(Sha(probe, k, {"t7.a7", "1000", "ch:"}), Arr({Int(1), Str("0")}));
}

// Every script of the library, through EVALSHA on one node and EVAL on
// another in the same state: the same reply and the same dataset, on typical
// inputs, on keys that just expired, and on keys of the wrong type.
TEST(NodeScriptsTest, EvalShaAndEvalAgreeOnEveryScript) {
  struct Case {
    const Script* script;
    std::vector<std::string> keys;
    std::vector<std::string> args;
  };
  const std::vector<std::string> rw = {"W", "W:rw:readers", "W:rw:wait", "W:fence"};
  const std::vector<std::string> fair = {"W", "W:fair:q", "W:fair:exp", "W:fence"};
  const std::vector<Case> cases = {
      {&internal::AcquireSetScript(), {"a", "b"}, {"t", "1000"}},
      {&internal::ReleaseScript(), {"a", "b"}, {"t", "ch:"}},
      {&internal::ReleaseOneScript(), {"a"}, {"t", "ch:a"}},
      {&internal::ExtendScript(), {"a", "b"}, {"t", "5000"}},
      {&internal::FenceAcquireScript(), {"a", "b", "fa", "fb"}, {"t", "1000"}},
      {&internal::FenceCommitScript(), {"a", "b", "fa", "fb"}, {"t", "9223372036854775808", "3"}},
      {&internal::InspectScript(), {"a", "fa"}, {}},
      {&internal::RwReadAcquireScript(), rw, {"r", "1000"}},
      {&internal::RwWriteAcquireScript(), rw, {"w", "1000", "waiter", "500"}},
      {&internal::RwReadCommitScript(), {"W:rw:readers", "W:fence"}, {"r", "7"}},
      {&internal::RwReadExtendScript(), {"W:rw:readers"}, {"r", "2000"}},
      {&internal::RwReadReleaseScript(), {"W", "W:rw:readers"}, {"r", "ch:"}},
      {&internal::RwWithdrawScript(), {"W", "W:rw:wait"}, {"waiter", "ch:"}},
      {&internal::RwInspectScript(), rw, {}},
      {&internal::SemAcquireScript(), {"p0", "p1", "f0", "f1"}, {"t", "1000", "1", "2"}},
      {&internal::FairProbeScript(), fair, {"t.a1", "1000", "ch:"}},
      {&internal::FairRegisterScript(), fair, {"t.a1", "1000", "ch:", "a1", "2", "500"}},
      {&internal::FairAcquireScript(), fair, {"t.a1", "1000", "ch:", "a1"}},
      {&internal::FairRefreshScript(),
       {"W", "W:fair:q", "W:fair:exp"},
       {"ch:", "a1", "1", "500", "1"}},
      {&internal::FairReleaseScript(), {"W", "W:fair:q", "W:fair:exp"}, {"w.a1", "ch:", "release"}},
      {&internal::FairLeaveScript(), {"W", "W:fair:q", "W:fair:exp"}, {"a1", "ch:"}},
      {&internal::FairInspectScript(), {"W", "W:fair:q", "W:fair:exp"}, {"64"}},
  };
  ASSERT_EQ(cases.size(), internal::AllScripts().size());
  const int64_t t0 = 1'700'000'000'000;
  // The states each case runs in: what the same token left, ready to be
  // extended, committed or released; the same gone by expiry; and keys of
  // the wrong type.
  const std::vector<std::pair<std::string, std::vector<Argv>>> states = {
      {"empty", {}},
      {"held",
       {{"SET", "a", "t", "PX", "1000"},
        {"SET", "b", "t", "PX", "1000"},
        {"SET", "fa", "41"},
        {"ZADD", "W:rw:readers", std::to_string(t0 + 1000), "r"},
        {"ZADD", "W:rw:wait", std::to_string(t0 + 1000), "waiter"},
        {"SET", "p1", "x", "PX", "1000"},
        {"ZADD", "W:fair:q", "1", "a1", "3", "b2"},
        {"ZADD", "W:fair:exp", std::to_string(t0 + 1000), "a1", std::to_string(t0 + 1000), "b2"}}},
      {"expired",
       {{"SET", "a", "t", "PX", "10"},
        {"SET", "b", "t", "PX", "10"},
        {"SET", "W", "w", "PX", "10"},
        {"ZADD", "W:rw:readers", std::to_string(t0 + 10), "r"},
        {"ZADD", "W:rw:wait", std::to_string(t0 + 10), "waiter"},
        {"SET", "p0", "x", "PX", "10"},
        {"ZADD", "W:fair:q", "1", "a1"},
        {"ZADD", "W:fair:exp", std::to_string(t0 + 10), "a1"}}},
      {"wrong type",
       {{"ZADD", "a", "1", "m"},
        {"ZADD", "b", "1", "m"},
        {"ZADD", "fa", "1", "m"},
        {"ZADD", "W", "1", "m"},
        {"SET", "W:rw:readers", "s"},
        {"SET", "W:rw:wait", "s"},
        {"ZADD", "p0", "1", "m"},
        {"ZADD", "p1", "1", "m"},
        {"SET", "W:fair:q", "s"},
        {"SET", "W:fair:exp", "s"}}},
  };
  auto dump = [](Node& node, int64_t now) {
    std::string out;
    Session s;
    for (const std::string& k : node.Keys(now)) {
      absl::StrAppend(&out, k, "=", J(node.Execute(s, {"TYPE", k}, now).reply), ",",
                      J(node.Execute(s, {"PTTL", k}, now).reply), ";");
      const Reply type = node.Execute(s, {"TYPE", k}, now).reply;
      absl::StrAppend(
          &out,
          type.str == "zset"
              ? J(node.Execute(s, {"ZRANGEBYSCORE", k, "-inf", "+inf", "WITHSCORES"}, now).reply)
              : J(node.Execute(s, {"GET", k}, now).reply),
          "\n");
    }
    return out;
  };
  for (const Case& c : cases) {
    for (const auto& [state, setup] : states) {
      SCOPED_TRACE(absl::StrCat(c.script->name, " on ", state));
      Node a(Node::Config{.name = "a"});
      Node b(Node::Config{.name = "b"});
      Session sa, sb;
      for (const Argv& cmd : setup) {
        a.Execute(sa, cmd, t0);
        b.Execute(sb, cmd, t0);
      }
      const int64_t now = t0 + 20;
      ASSERT_EQ(a.Execute(sa, {"SCRIPT", "LOAD", c.script->body}, now).reply.str, c.script->sha);
      Argv sha = {"EVALSHA", c.script->sha, std::to_string(c.keys.size())};
      Argv eval = {"EVAL", c.script->body, std::to_string(c.keys.size())};
      for (Argv* v : {&sha, &eval}) {
        v->insert(v->end(), c.keys.begin(), c.keys.end());
        v->insert(v->end(), c.args.begin(), c.args.end());
      }
      const Result ra = a.Execute(sa, sha, now);
      const Result rb = b.Execute(sb, eval, now);
      EXPECT_EQ(J(ra.reply), J(rb.reply));
      EXPECT_EQ(ra.wrote, rb.wrote);
      EXPECT_EQ(ra.published.size(), rb.published.size());
      EXPECT_EQ(dump(a, now), dump(b, now));
      // Typical inputs run without a Lua error; a key of the wrong type is
      // at worst Redis's WRONGTYPE error.
      if (ra.reply.is_error()) {
        EXPECT_EQ(state, "wrong type") << ra.reply.str;
        EXPECT_THAT(ra.reply.str, ::testing::StartsWith("WRONGTYPE"));
      }
    }
  }
}

// Replies never depend on what ran before on the thread's interpreter (its
// cache, its garbage, other nodes' scripts).
TEST(NodeScriptsTest, RepliesDoNotDependOnWhatRanBefore) {
  auto scenario = [](Node& node) {
    Session s;
    std::string out;
    int64_t now = 1'000'000;
    for (const Script* script : internal::AllScripts()) {
      out += J(node.Execute(s, {"SCRIPT", "LOAD", script->body}, now).reply);
    }
    const internal::Script& fa = internal::FenceAcquireScript();
    for (int i = 0; i < 50; ++i) {
      now += 7;
      const std::string r = "r" + std::to_string(i % 5);
      out += J(
          node.Execute(s, {"EVALSHA", fa.sha, "2", r, r + ":f", "t" + std::to_string(i), "30"}, now)
              .reply);
      out += J(node.Execute(s,
                            {"EVAL", "return {#KEYS, ARGV[1], redis.call('exists', KEYS[1])}", "1",
                             r, "x"},
                            now)
                   .reply);
    }
    return out;
  };
  Node first(Node::Config{.name = "n"});
  const std::string before = scenario(first);
  Node noise(Node::Config{.name = "noise"});
  Session s;
  for (int i = 0; i < 200; ++i) {
    noise.Execute(
        s, {"EVAL", "local t = {} for j = 1, 100 do t[j] = tostring(j) end return #t", "0"}, i);
    noise.Execute(s, {"EVAL", "return redis.pcall('nosuch')", "0"}, i);
  }
  Node second(Node::Config{.name = "n"});
  EXPECT_EQ(scenario(second), before);
}

TEST_F(NodeTest, FencedStoreScripts) {
  const std::string read(FencedReadScript());
  const std::string write(FencedWriteScript());
  auto eval = [&](const std::string& body, std::vector<std::string> args) {
    Argv a = {"EVAL", body, "2", "data", "fence"};
    a.insert(a.end(), args.begin(), args.end());
    return Run(a);
  };
  EXPECT_REPLY(eval(write, {"5", "v5"}), OK());
  EXPECT_REPLY(eval(read, {"5"}), Str("v5"));
  EXPECT_REPLY(eval(write, {"4", "v4"}), Error("STALE token 4 < fence 5"));
  EXPECT_REPLY(eval(write, {"x", "v"}), Error("ERR bad token"));
  EXPECT_REPLY(eval(write, {"10", "v10"}), OK());
  EXPECT_REPLY(Run({"GET", "fence"}), Str("10"));
}

TEST_F(NodeTest, NoScriptAfterAFlushAndEvalReloads) {
  LoadAll();
  const Script& acquire = internal::AcquireSetScript();
  EXPECT_REPLY(Run({"SCRIPT", "FLUSH"}), OK());
  EXPECT_TRUE(node_.CachedScripts().empty());
  EXPECT_REPLY(Sha(acquire, {"a"}, {"t", "100"}),
               Error("NOSCRIPT No matching script. Please use EVAL."));
  EXPECT_REPLY(Run({"EXISTS", "a"}), Int(0));
  EXPECT_REPLY(Eval(acquire, {"a"}, {"t", "100"}), Int(1));
  EXPECT_EQ(node_.CachedScripts(), std::vector<std::string>{acquire.sha});  // EVAL caches
  EXPECT_REPLY(Sha(acquire, {"b"}, {"t", "100"}), Int(1));
  // Any case of the SHA-1; a wrong length is no match.
  std::string upper = acquire.sha;
  for (char& c : upper) c = static_cast<char>(toupper(c));
  EXPECT_REPLY(Run({"EVALSHA", upper, "1", "c", "t", "100"}), Int(1));
  EXPECT_REPLY(Run({"EVALSHA", "abc", "0"}),
               Error("NOSCRIPT No matching script. Please use EVAL."));
  node_.FlushScripts();
  EXPECT_REPLY(Run({"EVALSHA", acquire.sha, "1", "d", "t", "100"}),
               Error("NOSCRIPT No matching script. Please use EVAL."));
}

TEST_F(NodeTest, LuaConversionsAndErrorsAsRedis7) {
  auto eval = [&](const std::string& body) { return Run({"EVAL", body, "0"}); };
  auto suffix = [](const std::string& body, int line) {
    return absl::StrCat(" script: ", internal::Sha1Hex(body), ", on @user_script:", line, ".");
  };
  EXPECT_REPLY(eval("return {1, 'a', {2}, nil, 5}"), Arr({Int(1), Str("a"), Arr({Int(2)})}));
  EXPECT_REPLY(eval("return {false, true, 3.99, -3.99}"), Arr({Nil(), Int(1), Int(3), Int(-3)}));
  EXPECT_REPLY(eval("return 9223372036854775807"), Int(INT64_MIN));
  EXPECT_REPLY(eval("return 0/0"), Int(INT64_MIN));
  EXPECT_REPLY(eval("return {err='MY code'}"), Error("MY code"));
  EXPECT_REPLY(eval("return {ok='fine'}"), Status("fine"));
  EXPECT_REPLY(eval("return redis.error_reply('FOO')"), Error("ERR FOO"));
  EXPECT_REPLY(eval("return redis.error_reply('-BAR baz')"), Error("BAR baz"));
  EXPECT_REPLY(eval("return redis.error_reply()"), Error("ERR wrong number or type of arguments"));
  EXPECT_REPLY(eval("return redis.status_reply('X')"), Status("X"));
  EXPECT_REPLY(eval("return redis.sha1hex('')"), Str("da39a3ee5e6b4b0d3255bfef95601890afd80709"));
  EXPECT_REPLY(eval("return redis.call('set', 'k', 0.1)"), OK());
  EXPECT_REPLY(Run({"GET", "k"}), Str("0.10000000000000001"));
  EXPECT_REPLY(eval("redis.call('set','k', 1e20) return redis.call('get','k')"), Str("1e+20"));
  EXPECT_REPLY(eval("return redis.call('get', 'nokey')"), Nil());
  EXPECT_REPLY(eval("return {redis.call('get', 'nokey'), 5}"), Arr({Nil(), Int(5)}));
  EXPECT_REPLY(eval("return redis.call('time')[1] == tostring(math.floor(" + std::to_string(now_) +
                    " / 1000))"),
               Int(1));
  const std::string incr = "local x = 1\nreturn redis.call('incr', 'k')";
  EXPECT_REPLY(eval(incr), Error("ERR value is not an integer or out of range" + suffix(incr, 2)));
  EXPECT_REPLY(eval("return redis.pcall('incr', 'k')"),
               Error("ERR value is not an integer or out of range"));
  const std::string global = "return y";
  EXPECT_REPLY(eval(global),
               Error("ERR user_script:1: Script attempted to access nonexistent global variable "
                     "'y'" +
                     suffix(global, 1)));
  const std::string set_global = "y = 1";
  EXPECT_REPLY(eval(set_global), Error("ERR user_script:1: Attempt to modify a readonly table" +
                                       suffix(set_global, 1)));
  const std::string boom = "error('boom')";
  EXPECT_REPLY(eval(boom), Error("ERR user_script:1: boom" + suffix(boom, 1)));
  const std::string custom = "error({err='CUSTOM boom'})";
  EXPECT_REPLY(eval(custom), Error("CUSTOM boom" + suffix(custom, 1)));
  const std::string unknown = "return redis.call('nosuch')";
  EXPECT_REPLY(eval(unknown),
               Error("ERR Unknown Redis command called from script" + suffix(unknown, 1)));
  EXPECT_REPLY(eval("return redis.pcall('get', 'a', 'b')"),
               Error("ERR Wrong number of args calling Redis command from script"));
  const std::string bad_arg = "return redis.call('get', {})";
  EXPECT_REPLY(eval(bad_arg),
               Error("ERR Lua redis lib command arguments must be strings or integers" +
                     suffix(bad_arg, 1)));
  const std::string none = "return redis.call()";
  EXPECT_REPLY(
      eval(none),
      Error("ERR Please specify at least one argument for this redis lib call" + suffix(none, 1)));
  const std::string multi = "return redis.call('multi')";
  EXPECT_REPLY(eval(multi),
               Error("ERR This Redis command is not allowed from script" + suffix(multi, 1)));
  EXPECT_REPLY(eval("x = "),
               Error("ERR Error compiling script (new function): user_script:1: unexpected symbol "
                     "near '<eof>'"));
  EXPECT_REPLY(Run({"EVAL", "return 1", "2", "a"}),
               Error("ERR Number of keys can't be greater than number of args"));
  EXPECT_REPLY(Run({"EVAL", "return 1", "-1"}), Error("ERR Number of keys can't be negative"));
  EXPECT_REPLY(Run({"EVAL", "return KEYS[1] .. ARGV[1]", "1", "k", "v"}), Str("kv"));
  // A script cannot leave state for the next: the libraries are read-only.
  const std::string poison = "string.sub = nil";
  EXPECT_REPLY(eval(poison),
               Error("ERR user_script:1: Attempt to modify a readonly table" + suffix(poison, 1)));
  EXPECT_REPLY(eval("return string.sub('abc', 2)"), Str("bc"));
  // What would recurse or run for ever is stopped.
  EXPECT_EQ(eval("local t = {} t[1] = t return t").elements.size(), 1u);
  EXPECT_REPLY(eval("error(setmetatable({}, {__index = function() error('x') end}))"), Nil());
  EXPECT_THAT(eval("while true do end").str, ::testing::HasSubstr("instructions"));
}

TEST_F(NodeTest, AScriptSelectsItsOwnDatabase) {
  EXPECT_REPLY(Run({"EVAL", "redis.call('select', 3) return redis.call('set', 'k', 'v')", "0"}),
               OK());
  EXPECT_REPLY(Run({"GET", "k"}), Nil());
  EXPECT_EQ(session_.db, 0);
  EXPECT_REPLY(Run({"SELECT", "3"}), OK());
  EXPECT_REPLY(Run({"GET", "k"}), Str("v"));
  EXPECT_REPLY(Run({"SELECT", "16"}), Error("ERR DB index is out of range"));
}

// ---- Nodes that forbid or lack scripting; optional commands ----------------------------------

TEST(NodeKindsTest, NoPermForAUserWithoutScripting) {
  Node node(Node::Config{.name = "n", .scripting_noperm = true});
  Session s;
  EXPECT_REPLY(node.Execute(s, {"EVAL", "return 1", "0"}, 0).reply,
               Error("NOPERM this user has no permissions to run the 'eval' command"));
  EXPECT_REPLY(node.Execute(s, {"SCRIPT", "LOAD", "return 1"}, 0).reply,
               Error("NOPERM this user has no permissions to run the 'script|load' command"));
  EXPECT_REPLY(node.Execute(s, {"SCRIPT"}, 0).reply,
               Error("ERR wrong number of arguments for 'script' command"));
  EXPECT_REPLY(node.Execute(s, {"MULTI"}, 0).reply, OK());
  EXPECT_REPLY(node.Execute(s, {"EVALSHA", std::string(40, 'a'), "0"}, 0).reply,
               Error("NOPERM this user has no permissions to run the 'evalsha' command"));
  EXPECT_REPLY(node.Execute(s, {"EXEC"}, 0).reply,
               Error("EXECABORT Transaction discarded because of previous errors."));
  Node v72(Node::Config{.name = "n", .version = "7.2.4", .scripting_noperm = true});
  EXPECT_REPLY(v72.Execute(s, {"AUTH", "locker", "pw"}, 0).reply, OK());
  EXPECT_REPLY(v72.Execute(s, {"EVAL", "return 1", "0"}, 0).reply,
               Error("NOPERM User locker has no permissions to run the 'eval' command"));
}

TEST(NodeKindsTest, ValkeyWithoutItsLuaEngine) {
  Node node(
      Node::Config{.name = "n", .version = "9.1.0", .server_name = "valkey", .scripting = false});
  Session s;
  const Reply no_engine = Error("ERR Could not find scripting engine 'lua'");
  EXPECT_REPLY(node.Execute(s, {"EVAL", "return 1", "0"}, 0).reply, no_engine);
  EXPECT_REPLY(node.Execute(s, {"SCRIPT", "LOAD", "return 1"}, 0).reply, no_engine);
  EXPECT_REPLY(node.Execute(s, {"EVALSHA", internal::Sha1Hex("return 1"), "0"}, 0).reply,
               Error("NOSCRIPT No matching script. Please use EVAL."));
  EXPECT_REPLY(node.Execute(s, {"SCRIPT", "EXISTS", internal::Sha1Hex("return 1")}, 0).reply,
               Arr({Int(0)}));
  const std::string info = node.Execute(s, {"INFO", "server"}, 0).reply.str;
  EXPECT_THAT(info, ::testing::HasSubstr("server_name:valkey\r\n"));
  EXPECT_THAT(info, ::testing::HasSubstr("valkey_version:9.1.0\r\n"));
  EXPECT_THAT(info, ::testing::HasSubstr("redis_version:7.2.4\r\n"));
}

TEST(NodeKindsTest, OptionalCompareAndDelete) {
  Session s;
  Node plain(Node::Config{.name = "n"});
  EXPECT_THAT(plain.Execute(s, {"DELIFEQ", "k", "v"}, 0).reply.str,
              ::testing::StartsWith("ERR unknown command 'DELIFEQ'"));
  Node node(Node::Config{.name = "n", .delifeq = true, .set_ifeq = true, .delex = true});
  EXPECT_REPLY(node.Execute(s, {"SET", "k", "v", "IFEQ", "x"}, 0).reply, Nil());
  EXPECT_REPLY(node.Execute(s, {"EXISTS", "k"}, 0).reply, Int(0));  // IFEQ never creates
  EXPECT_REPLY(node.Execute(s, {"SET", "k", "v"}, 0).reply, OK());
  EXPECT_REPLY(node.Execute(s, {"SET", "k", "w", "IFEQ", "x"}, 0).reply, Nil());
  EXPECT_REPLY(node.Execute(s, {"SET", "k", "w", "IFEQ", "v", "PX", "100"}, 0).reply, OK());
  EXPECT_REPLY(node.Execute(s, {"SET", "k", "w", "IFEQ", "v", "NX"}, 0).reply,
               Error("ERR syntax error"));
  EXPECT_REPLY(node.Execute(s, {"DELIFEQ", "k", "v"}, 0).reply, Int(0));
  EXPECT_REPLY(node.Execute(s, {"DELIFEQ", "k", "w"}, 0).reply, Int(1));
  EXPECT_REPLY(node.Execute(s, {"SET", "k", "v"}, 0).reply, OK());
  EXPECT_REPLY(node.Execute(s, {"DELEX", "k", "IFEQ", "x"}, 0).reply, Int(0));
  EXPECT_REPLY(node.Execute(s, {"DELEX", "k", "IFNE", "x"}, 0).reply, Int(1));
  EXPECT_REPLY(node.Execute(s, {"DELEX", "k", "BAD", "x"}, 0).reply, Error("ERR syntax error"));
}

// ---- Connection, server, pub/sub -------------------------------------------------------------

TEST_F(NodeTest, ServerAndConnectionCommands) {
  EXPECT_REPLY(Run({"PING"}), Status("PONG"));
  EXPECT_REPLY(Run({"PING", "redlock-probe-1"}), Str("redlock-probe-1"));
  EXPECT_REPLY(Run({"PING", "a", "b"}), Error("ERR wrong number of arguments for 'ping' command"));
  EXPECT_REPLY(Run({"ECHO", "x"}), Str("x"));
  EXPECT_REPLY(Run({"TIME"}),
               Arr({Str(std::to_string(now_ / 1000)), Str(std::to_string(now_ % 1000 * 1000))}));
  EXPECT_REPLY(Run({"AUTH", "pw"}), OK());
  EXPECT_REPLY(Run({"AUTH", "user", "pw"}), OK());
  EXPECT_EQ(session_.user, "user");
  EXPECT_REPLY(Run({"CLIENT", "SETNAME", "redlock"}), OK());
  EXPECT_REPLY(Run({"CLIENT", "GETNAME"}), Str("redlock"));
  EXPECT_REPLY(Run({"CLIENT", "SETNAME", "a b"}),
               Error("ERR Client names cannot contain spaces, newlines or special characters."));
  EXPECT_REPLY(Run({"CLIENT", "NOSUCH"}),
               Error("ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP."));
  EXPECT_REPLY(Run({"ROLE"}), Arr({Str("master"), Int(0), Arr({})}));
  const Reply info = Run({"INFO", "server"});
  EXPECT_THAT(info.str, ::testing::HasSubstr("redis_version:7.0.15\r\n"));
  EXPECT_THAT(info.str,
              ::testing::HasSubstr(absl::StrCat("run_id:", internal::Sha1Hex("run:n0"), "\r\n")));
  EXPECT_THAT(Run({"INFO", "replication"}).str, ::testing::HasSubstr("role:master\r\n"));
  EXPECT_REPLY(Run({"COMMAND", "INFO", "nosuch"}), Arr({Nil()}));
  const Reply get = Run({"COMMAND", "INFO", "get"});
  ASSERT_EQ(get.elements.size(), 1u);
  ASSERT_EQ(get.elements[0].elements.size(), 10u);
  EXPECT_REPLY(get.elements[0].elements[0], Str("get"));
  EXPECT_REPLY(get.elements[0].elements[1], Int(2));
  EXPECT_REPLY(Run({"COMMAND", "DOCS", "nosuch"}), Arr({}));
  EXPECT_REPLY(Run({"ASKING"}), Error("ERR This instance has cluster support disabled"));
  EXPECT_REPLY(Run({"CLUSTER", "SLOTS"}), Error("ERR This instance has cluster support disabled"));
  EXPECT_REPLY(Run({"FOO", "a", "b"}),
               Error("ERR unknown command 'FOO', with args beginning with: 'a' 'b' "));
  EXPECT_REPLY(Run({"SCRIPT", "KILL"}), Error("NOTBUSY No scripts in execution right now."));
}

TEST_F(NodeTest, PubSubBookkeeping) {
  Session sub;
  EXPECT_REPLY(RunOn(sub, {"SUBSCRIBE", "a"}), Arr({Str("subscribe"), Str("a"), Int(1)}));
  EXPECT_REPLY(RunOn(sub, {"SUBSCRIBE", "a", "b"}),
               Arr({Arr({Str("subscribe"), Str("a"), Int(2 - 1)}),
                    Arr({Str("subscribe"), Str("b"), Int(2)})}));
  EXPECT_REPLY(RunOn(sub, {"PING"}), Arr({Str("pong"), Str("")}));
  EXPECT_REPLY(RunOn(sub, {"PING", "redlock-keepalive"}),
               Arr({Str("pong"), Str("redlock-keepalive")}));
  EXPECT_REPLY(RunOn(sub, {"GET", "a"}),
               Error("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
                     "QUIT / RESET are allowed in this context"));
  Result pub = node_.Execute(session_, {"PUBLISH", "a", "m"}, now_);
  EXPECT_REPLY(pub.reply, Int(1));
  ASSERT_EQ(pub.published.size(), 1u);
  EXPECT_EQ(pub.published[0].channel, "a");
  EXPECT_EQ(pub.published[0].payload, "m");
  EXPECT_REPLY(RunOn(sub, {"UNSUBSCRIBE", "a"}), Arr({Str("unsubscribe"), Str("a"), Int(1)}));
  EXPECT_REPLY(Run({"PUBLISH", "a", "m"}), Int(0));
  node_.Disconnect(sub);
  EXPECT_TRUE(sub.subscribed.empty());
  EXPECT_REPLY(Run({"PUBLISH", "b", "m"}), Int(0));
  EXPECT_REPLY(RunOn(sub, {"UNSUBSCRIBE"}), Arr({Str("unsubscribe"), Nil(), Int(0)}));
}

TEST_F(NodeTest, CommandCountsNameCommandsAndScripts) {
  const Script& acquire = internal::AcquireSetScript();
  Run({"SET", "a", "1"});
  Run({"set", "b", "1"});
  Run({"SCRIPT", "LOAD", acquire.body});
  Sha(acquire, {"c"}, {"t", "10"});
  Run({"NOSUCH"});
  const auto& counts = node_.CommandCounts();
  std::map<std::string, int64_t> m(counts.begin(), counts.end());
  EXPECT_EQ(m["SET"], 2);
  EXPECT_EQ(m["SCRIPT"], 1);
  EXPECT_EQ(m["EVALSHA"], 1);
  EXPECT_EQ(m[acquire.sha], 1);
  EXPECT_EQ(m["NOSUCH"], 1);
  EXPECT_TRUE(std::is_sorted(counts.begin(), counts.end()));
}

// ---- Cluster ---------------------------------------------------------------------------------

class ClusterTest : public ::testing::Test {
 protected:
  ClusterTest()
      : a_(Node::Config{.name = "a", .slots = {{0, 8191}}, .address = "127.0.0.1:7000"}),
        b_(Node::Config{.name = "b", .slots = {{8192, 16383}}, .address = "127.0.0.1:7001"}) {
    a_.SetClusterPeers({{"127.0.0.1:7001", "", {{8192, 16383}}}});
    b_.SetClusterPeers({{"127.0.0.1:7000", "", {{0, 8191}}}});
  }
  // A key of `slot`-side: a hash tag whose slot is below or above 8192.
  static std::string KeyIn(bool low, const std::string& suffix) {
    for (int i = 0;; ++i) {
      const std::string tag = "{t" + std::to_string(i) + "}";
      if ((internal::KeySlot(tag) < 8192) == low) return tag + suffix;
    }
  }
  Node a_, b_;
  Session s_;
};

TEST_F(ClusterTest, SlotsMovedAndCrossSlot) {
  const Reply slots = a_.Execute(s_, {"CLUSTER", "SLOTS"}, 0).reply;
  ASSERT_EQ(slots.elements.size(), 2u);
  EXPECT_EQ(slots.elements[0].elements[0].integer, 0);
  EXPECT_EQ(slots.elements[0].elements[1].integer, 8191);
  EXPECT_REPLY(slots.elements[0].elements[2].elements[0], Str("127.0.0.1"));
  EXPECT_REPLY(slots.elements[0].elements[2].elements[1], Int(7000));
  EXPECT_EQ(slots.elements[1].elements[2].elements[1].integer, 7001);
  // The library's parser reads it.
  absl::StatusOr<std::vector<internal::SlotRange>> parsed =
      internal::ParseClusterSlots(slots, "127.0.0.1");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size(), 2u);
  const std::string high = KeyIn(false, "k");
  EXPECT_REPLY(a_.Execute(s_, {"SET", high, "v"}, 0).reply,
               Error(absl::StrCat("MOVED ", internal::KeySlot(high), " 127.0.0.1:7001")));
  EXPECT_THAT(
      a_.Execute(s_, {"DEL", "x", "y"}, 0).reply.str,
      ::testing::StartsWith(internal::KeySlot("x") == internal::KeySlot("y") ? "" : "CROSSSLOT"));
  EXPECT_REPLY(a_.Execute(s_, {"SELECT", "1"}, 0).reply,
               Error("ERR SELECT is not allowed in cluster mode"));
  EXPECT_EQ(a_.Execute(s_, {"CLUSTER", "MYID"}, 0).reply.str.size(), 40u);
  // A script's keys are checked before it runs, and its calls after.
  EXPECT_REPLY(a_.Execute(s_, {"EVAL", "return 1", "1", high}, 0).reply,
               Error(absl::StrCat("MOVED ", internal::KeySlot(high), " 127.0.0.1:7001")));
  const std::string body = "return redis.call('get', ARGV[1])";
  EXPECT_REPLY(
      a_.Execute(s_, {"EVAL", body, "0", high}, 0).reply,
      Error(absl::StrCat("ERR Script attempted to access a non local key in a cluster node "
                         "script: ",
                         internal::Sha1Hex(body), ", on @user_script:1.")));
}

TEST_F(ClusterTest, MigrationAnswersAskAndTryAgain) {
  const std::string k1 = KeyIn(true, "1");
  const std::string k2 = KeyIn(true, "2");
  const int slot = internal::KeySlot(k1);
  ASSERT_EQ(internal::KeySlot(k2), slot);
  EXPECT_REPLY(a_.Execute(s_, {"SET", k1, "v1"}, 0).reply, OK());
  EXPECT_REPLY(a_.Execute(s_, {"SET", k2, "v2", "PX", "100000"}, 0).reply, OK());
  a_.BeginMigration(slot, "127.0.0.1:7001");
  b_.BeginImport(slot);
  EXPECT_REPLY(a_.Execute(s_, {"GET", k1}, 0).reply, Str("v1"));  // still here
  EXPECT_EQ(a_.MoveKeys(slot, b_, 1, 0), 1);                      // moves k1 (key order)
  const Reply ask = Error(absl::StrCat("ASK ", slot, " 127.0.0.1:7001"));
  EXPECT_REPLY(a_.Execute(s_, {"GET", k1}, 0).reply, ask);
  EXPECT_REPLY(a_.Execute(s_, {"EXISTS", k1, k2}, 0).reply,
               Error("TRYAGAIN Multiple keys request during rehashing of slot"));
  // On the importing side, only after ASKING, and for that one command.
  Session t;
  EXPECT_REPLY(b_.Execute(t, {"GET", k1}, 0).reply,
               Error(absl::StrCat("MOVED ", slot, " 127.0.0.1:7000")));
  EXPECT_REPLY(b_.Execute(t, {"ASKING"}, 0).reply, OK());
  EXPECT_REPLY(b_.Execute(t, {"GET", k1}, 0).reply, Str("v1"));
  EXPECT_REPLY(b_.Execute(t, {"GET", k1}, 0).reply,
               Error(absl::StrCat("MOVED ", slot, " 127.0.0.1:7000")));
  EXPECT_REPLY(b_.Execute(t, {"ASKING"}, 0).reply, OK());
  EXPECT_REPLY(b_.Execute(t, {"EXISTS", k1, k2}, 0).reply,
               Error("TRYAGAIN Multiple keys request during rehashing of slot"));
  EXPECT_EQ(a_.MoveKeys(slot, b_, 10, 0), 1);
  EXPECT_REPLY(b_.Execute(t, {"ASKING"}, 0).reply, OK());
  EXPECT_REPLY(b_.Execute(t, {"PTTL", k2}, 0).reply, Int(100000));  // its expiry came along
  a_.EndMigration(slot);
  b_.EndImport(slot);
  EXPECT_REPLY(a_.Execute(s_, {"GET", k1}, 0).reply,
               Error(absl::StrCat("MOVED ", slot, " 127.0.0.1:7001")));
  EXPECT_REPLY(b_.Execute(t, {"GET", k1}, 0).reply, Str("v1"));
  EXPECT_TRUE(a_.Keys(0).empty());
}

// ---- Trace -----------------------------------------------------------------------------------

TEST(TraceTest, RoundTrip) {
  std::ostringstream out;
  TraceWriter w(&out);
  Node::Config config{.name = "n0", .replicas = 2, .slots = {{0, 100}}};
  w.Node("n0", config);
  const Reply reply = Arr({Int(1), Str("a"), Nil(), Status("OK"), Error("ERR x"),
                           Str(std::string("\x00\xff", 2)), Arr({})});
  w.Command("n0", 3, 1234, {"EVALSHA", "abc", std::string("\x01\x80", 2)}, reply);
  w.Command("n0", 3, 1300, {"WAIT", "1", "0"}, Int(1), /*blocked=*/true);
  TraceEntry restart;
  restart.node = "n0";
  restart.now_ms = 2000;
  restart.event = "restart";
  restart.keep_data = true;
  w.Event(restart);
  std::istringstream in(out.str());
  absl::StatusOr<Trace> t = ParseTrace(in);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->nodes.size(), 1u);
  EXPECT_EQ(t->nodes[0].config.replicas, 2);
  EXPECT_EQ(t->nodes[0].config.slots, config.slots);
  ASSERT_EQ(t->entries.size(), 3u);
  EXPECT_EQ(t->entries[0].conn, 3);
  EXPECT_EQ(t->entries[0].argv[2], std::string("\x01\x80", 2));
  EXPECT_REPLY(t->entries[0].reply, reply);
  EXPECT_TRUE(t->entries[1].blocked);
  EXPECT_EQ(t->entries[2].event, "restart");
  EXPECT_TRUE(t->entries[2].keep_data);

  std::istringstream bad("{\"conn\":1,\"argv\":[\"GET\"]}\n");
  absl::StatusOr<Trace> b = ParseTrace(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), ::testing::HasSubstr("line 1"));
  std::istringstream garbage("not json\n");
  EXPECT_FALSE(ParseTrace(garbage).ok());
}

}  // namespace
}  // namespace redlock::sim
