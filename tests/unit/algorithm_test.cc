#include "redlock/internal/algorithm.h"

#include <sys/wait.h>
#include <unistd.h>

#include <limits>
#include <set>

#include "gtest/gtest.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/sha1.h"
#include "redlock/internal/token.h"
#include "redlock/internal/transport.h"

namespace redlock::internal {
namespace {

using Vote = Round::Vote;
using Outcome = Round::Outcome;

TEST(Drift, IsTtlTimesFactorPlusFloor) {
  Options o;  // factor 0.01, floor 2ms
  EXPECT_EQ(DriftAllowance(absl::Seconds(10), o), absl::Milliseconds(102));
  o.clock_drift_factor = 0.0;
  EXPECT_EQ(DriftAllowance(absl::Milliseconds(100), o), absl::Milliseconds(2));
  o.clock_drift_factor = 0.5;
  o.clock_drift_floor = absl::Microseconds(250);
  EXPECT_EQ(DriftAllowance(absl::Milliseconds(100), o), absl::Microseconds(50250));
  EXPECT_EQ(Validity(absl::Seconds(10), absl::Milliseconds(30), absl::Milliseconds(102)),
            absl::Milliseconds(9868));
  EXPECT_LT(Validity(absl::Milliseconds(100), absl::Milliseconds(99), absl::Milliseconds(3)),
            absl::ZeroDuration());
}

TEST(CheckTtl, MustExceedDriftAndBeFiniteAndBounded) {
  Options o;  // factor 0.01, floor 2ms
  EXPECT_EQ(CheckTtl(absl::Seconds(10), o)->ms, 10000);
  EXPECT_EQ(CheckTtl(absl::Seconds(10), o)->drift, DriftAllowance(absl::Seconds(10), o));
  EXPECT_EQ(CheckTtl(absl::Microseconds(10999), o)->ms, 10)
      << "sub-millisecond parts are truncated";
  EXPECT_EQ(CheckTtl(absl::Microseconds(10999), o)->ttl, absl::Milliseconds(10));
  // ttl must be > ttl*0.01 + 2ms, i.e. ttl > 2.0202ms: 3ms is the smallest.
  EXPECT_TRUE(CheckTtl(absl::Milliseconds(3), o).ok());
  for (absl::Duration bad :
       {absl::Milliseconds(2), absl::Milliseconds(1), absl::ZeroDuration(), absl::Milliseconds(-5),
        absl::InfiniteDuration(), absl::Milliseconds(kMaxTtlMs + 1)}) {
    absl::StatusOr<LockTtl> r = CheckTtl(bad, o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(CheckTtl(absl::Milliseconds(2), o).status().message().find("drift"),
            absl::string_view::npos);
  o.clock_drift_factor = 0.5;
  EXPECT_FALSE(CheckTtl(absl::Milliseconds(4), o).ok());
  EXPECT_TRUE(CheckTtl(absl::Milliseconds(5), o).ok());
}

TEST(CheckResource, EmptyHugeAndReservedNames) {
  Options o;
  EXPECT_TRUE(CheckResource("orders/42", o).ok());
  EXPECT_TRUE(CheckResource(std::string(kMaxResourceLength, 'x'), o).ok());
  EXPECT_EQ(CheckResource("", o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckResource(std::string(kMaxResourceLength + 1, 'x'), o).code(),
            absl::StatusCode::kInvalidArgument);
  // Reserved with fencing off too: an election keeps its counter there
  // whatever the client's options, and a plain lock of that name would
  // overwrite it.
  EXPECT_EQ(CheckResource("x:fence", o).code(), absl::StatusCode::kInvalidArgument);
  o.fencing = true;
  EXPECT_EQ(CheckResource("x:fence", o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckResource("x:fenced", o).ok());
}

TEST(Round, QuorumSizesAndEarlyDecisions) {
  for (int n = 1; n <= 7; ++n) {
    int q = n / 2 + 1;
    // For: q yes votes decide success, whatever the others do later.
    Round yes(n, q);
    for (int i = 0; i < q - 1; ++i) EXPECT_EQ(yes.Record("n", Vote::kYes), Outcome::kPending);
    EXPECT_EQ(yes.Record("n", Vote::kYes), Outcome::kSucceeded);
    // Against: n - q + 1 non-yes votes decide failure without waiting.
    Round no(n, q);
    for (int i = 0; i < n - q; ++i)
      EXPECT_EQ(no.Record("n", Vote::kUnavailable, "x"), Outcome::kPending);
    EXPECT_EQ(no.Record("n", Vote::kRefused), Outcome::kFailed) << n;
  }
  // All-nodes mode: the first refusal decides.
  Round all(5, 5);
  EXPECT_EQ(all.Record("a", Vote::kYes), Outcome::kPending);
  EXPECT_EQ(all.Record("b", Vote::kUnavailable, "down"), Outcome::kFailed);
}

TEST(Round, FailureCodesFollowTheDesignTable) {
  auto fail = [](std::vector<Vote> votes) {
    Round r(5, 3);
    for (Vote v : votes) r.Record("127.0.0.1:7001", v, "boom");
    EXPECT_EQ(r.outcome(), Outcome::kFailed);
    return r.Failure("acquire \"r\"", "granted", "held by another client",
                     absl::StatusCode::kAborted);
  };
  EXPECT_EQ(fail({Vote::kRefused, Vote::kRefused, Vote::kRefused}).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(
      fail({Vote::kYes, Vote::kYes, Vote::kRefused, Vote::kUnavailable, Vote::kUnavailable}).code(),
      absl::StatusCode::kAborted);
  EXPECT_EQ(fail({Vote::kUnavailable, Vote::kUnavailable, Vote::kUnavailable}).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(fail({Vote::kRefused, Vote::kUnavailable, Vote::kUnavailable}).code(),
            absl::StatusCode::kAborted)
      << "two nodes down alone would not have prevented the quorum: the refusal did";
  EXPECT_EQ(
      fail({Vote::kRefused, Vote::kUnavailable, Vote::kUnavailable, Vote::kUnavailable}).code(),
      absl::StatusCode::kUnavailable)
      << "three nodes down make the quorum impossible whatever the others say";
  {
    Round all(5, 5);  // all-nodes mode: one refusal decides
    all.Record("n", Vote::kYes);
    all.Record("n", Vote::kRefused);
    EXPECT_EQ(all.Failure("a", "granted", "held", absl::StatusCode::kAborted).code(),
              absl::StatusCode::kAborted);
  }
  EXPECT_EQ(fail({Vote::kInternal, Vote::kInternal, Vote::kInternal}).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(fail({Vote::kInternal, Vote::kUnavailable, Vote::kUnavailable}).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(fail({Vote::kCancelled, Vote::kUnavailable, Vote::kUnavailable}).code(),
            absl::StatusCode::kCancelled);
}

TEST(Round, MessageNamesTallyAndFirstErrors) {
  Round r(5, 3);
  r.Record("127.0.0.1:7001", Vote::kYes);
  r.Record("127.0.0.1:7002", Vote::kYes);
  r.Record("127.0.0.1:7003", Vote::kUnavailable, "connection refused");
  r.Record("127.0.0.1:7004", Vote::kUnavailable, "no reply within 50ms");
  r.Record("127.0.0.1:7005", Vote::kUnavailable, "no reply within 50ms");
  absl::Status st =
      r.Failure("acquire \"orders/42\"", "granted", "held", absl::StatusCode::kAborted);
  EXPECT_EQ(st.message(),
            "acquire \"orders/42\": 2 of 5 nodes granted (quorum 3); 127.0.0.1:7003: connection "
            "refused; 127.0.0.1:7004: no reply within 50ms; 127.0.0.1:7005: no reply within 50ms");
  Round many(7, 4);
  for (int i = 0; i < 7; ++i) many.Record("n" + std::to_string(i), Vote::kUnavailable, "x");
  EXPECT_NE(many.Summary("granted", "held").find("and 4 more errors"), std::string::npos);
}

TEST(VoteForErrorReply, AvailabilityVersusInternal) {
  for (const char* e :
       {"LOADING Redis is loading", "READONLY You can't write", "OOM command not allowed",
        "NOAUTH Authentication required.", "BUSY Redis is busy", "MASTERDOWN x"}) {
    EXPECT_EQ(VoteForErrorReply(e), Vote::kUnavailable) << e;
  }
  for (const char* e :
       {"WRONGTYPE Operation against a key", "ERR Error running script", "NOSCRIPT x"}) {
    EXPECT_EQ(VoteForErrorReply(e), Vote::kInternal) << e;
  }
}

TEST(Fence, CountersAndNext) {
  EXPECT_EQ(*ParseCounter("0"), 0u);
  EXPECT_EQ(*ParseCounter("18446744073709551615"), 18446744073709551615ull);
  for (const char* bad : {"", "-1", "01", "1.5", "abc", "18446744073709551616", " 1"}) {
    EXPECT_FALSE(ParseCounter(bad).ok()) << bad;
  }
  EXPECT_EQ(*NextFence({}), 1u);
  EXPECT_EQ(*NextFence({3, 9, 4}), 10u);
  EXPECT_FALSE(NextFence({18446744073709551615ull}).ok());
}

TEST(Encoding, Sha1KnownVectors) {
  EXPECT_EQ(Sha1Hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(Sha1Hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Sha1Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(Sha1Hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // Redis' own example: SCRIPT LOAD "return 1".
  EXPECT_EQ(Sha1Hex("return 1"), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

TEST(Encoding, RespAndEvalFallback) {
  EXPECT_EQ(EncodeCommand({"SET", "k", "", "NX"}),
            "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$2\r\nNX\r\n");
  Command c = ScriptCommand(ReleaseScript(), {"a", "b"}, {"tok"});
  EXPECT_EQ(c.payload, "*6\r\n$7\r\nEVALSHA\r\n$40\r\n" + ReleaseScript().sha +
                           "\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\nb\r\n$3\r\ntok\r\n");
  std::string eval = EvalFallback(c);
  std::string body = ReleaseScript().body;
  EXPECT_EQ(eval, "*6\r\n$4\r\nEVAL\r\n$" + std::to_string(body.size()) + "\r\n" + body +
                      "\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\nb\r\n$3\r\ntok\r\n");
}

TEST(Token, RandomHexOfTwentyBytes) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string t = NewToken();
    ASSERT_EQ(t.size(), 40u);
    EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_TRUE(seen.insert(t).second);
  }
}

// Tokens come from a per-thread buffer: a child after fork() must not hand
// out the tokens its parent will (the buffer is copied with the process).
TEST(Token, AChildAfterForkDrawsTokensOfItsOwn) {
  NewToken();  // the buffer is filled and holds unused tokens
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string t = NewToken();
    ssize_t w = write(fds[1], t.data(), t.size());
    _exit(w == static_cast<ssize_t>(t.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string child(40, '\0');
  ssize_t got = 0;
  for (int i = 0; i < 100 && got < 40; ++i) {
    ssize_t r = read(fds[0], child.data() + got, static_cast<size_t>(40 - got));
    if (r <= 0) break;
    got += r;
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(got, 40);
  EXPECT_NE(NewToken(), child) << "the child drew the parent's next token";
}

TEST(DescribeResources, QuotesAndElides) {
  EXPECT_EQ(DescribeResources({"a"}), "\"a\"");
  EXPECT_EQ(DescribeResources({"a", "b"}), "{\"a\", \"b\"}");
  EXPECT_EQ(DescribeResources({"a", "b", "c", "d", "e", "f"}),
            "{\"a\", \"b\", \"c\", \"d\", ... (6 in all)}");
}

// The reader-writer lock's tokens (issue 36 item 2): writers odd, readers
// even, each strictly above the other kind before it.
TEST(ReaderWriterFences, WritersTakeTheNextOddReadersTheLeastEvenNotBelow) {
  EXPECT_EQ(*WriterFence({}), 1u);
  EXPECT_EQ(*WriterFence({0, 0}), 1u);
  EXPECT_EQ(*WriterFence({1}), 3u) << "after a writer";
  EXPECT_EQ(*WriterFence({2, 1}), 3u) << "after a reader";
  EXPECT_EQ(*ReaderFence({}), 2u) << "never 0 (fencing off)";
  EXPECT_EQ(*ReaderFence({1}), 2u) << "above the writer";
  EXPECT_EQ(*ReaderFence({2, 1}), 2u) << "shared with the reader before it";
  EXPECT_EQ(*ReaderFence({7, 41, 12}), 42u);
  for (uint64_t max = 0; max < 64; ++max) {
    const uint64_t w = *WriterFence({max});
    const uint64_t r = *ReaderFence({max});
    EXPECT_GT(w, max);
    EXPECT_EQ(w % 2, 1u);
    EXPECT_GE(r, max);
    EXPECT_EQ(r % 2, 0u);
    EXPECT_GT(*ReaderFence({w}), w) << "a reader after a writer is above it";
    EXPECT_GT(*WriterFence({r}), r);
  }
  const uint64_t top = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(WriterFence({top}).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(*WriterFence({top - 1}), top) << "the maximum is odd";
  EXPECT_EQ(*WriterFence({top - 2}), top);
  EXPECT_EQ(ReaderFence({top}).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(*ReaderFence({top - 1}), top - 1);
}

}  // namespace
}  // namespace redlock::internal
