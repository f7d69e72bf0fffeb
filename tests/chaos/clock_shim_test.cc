// Tests of the clock shim (libredlock_clock_shim.so) and ClockControl: the
// clock_probe program and a throw-away redis-server run under the shim.
//
// The test binary itself never runs under the shim (it may be built with a
// sanitizer); only its children get LD_PRELOAD.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "testkit/clock_control.h"
#include "testkit/files.h"
#include "testkit/gtest_fleet.h"
#include "testkit/process.h"

namespace redlock::testkit {
namespace {

constexpr int64_t kSecond = 1000000000LL;
constexpr int64_t kHour = 3600 * kSecond;

using redlock::testkit::Process;
using redlock::testkit::ProcessOptions;

using redlock::testkit::TempDir;

using Reading = std::map<std::string, int64_t>;

std::optional<Reading> ParseProbeLine(const std::string& line) {
  Reading reading;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::vector<absl::string_view> kv = absl::StrSplit(field, '=');
    int64_t value = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &value)) return std::nullopt;
    reading[std::string(kv[0])] = value;
  }
  if (reading.size() != 14) return std::nullopt;
  return reading;
}

std::unique_ptr<Process> StartProbe(const std::vector<std::pair<std::string, std::string>>& env,
                                    int count = 1, int interval_ms = 0) {
  std::vector<std::string> argv = {REDLOCK_CLOCK_PROBE_PATH};
  if (count != 1 || interval_ms != 0) {
    argv.push_back(std::to_string(count));
    argv.push_back(std::to_string(interval_ms));
  }
  ProcessOptions o;
  o.argv = std::move(argv);
  o.env = env;
  o.stdout_to = redlock::testkit::Stream::kPipe;
  absl::StatusOr<std::unique_ptr<Process>> probe = Process::Start(std::move(o));
  EXPECT_TRUE(probe.ok()) << probe.status();
  return probe.ok() ? *std::move(probe) : nullptr;
}

// Runs clock_probe once under `env` and returns its reading.
std::optional<Reading> ProbeOnce(const std::vector<std::pair<std::string, std::string>>& env) {
  std::unique_ptr<Process> probe = StartProbe(env);
  if (probe == nullptr) return std::nullopt;
  std::optional<std::string> line = probe->ReadLine(absl::Seconds(20));
  if (!line.has_value()) return std::nullopt;
  return ParseProbeLine(*line);
}

// The realtime offset a reading shows, in nanoseconds.
int64_t RealtimeOffset(const Reading& r) { return r.at("realtime") - r.at("real_realtime"); }
int64_t MonotonicOffset(const Reading& r) { return r.at("monotonic") - r.at("real_monotonic"); }

// Asserts every clock of `r` shows the expected offsets, within 1 s.
void ExpectOffsets(const Reading& r, int64_t realtime, int64_t monotonic) {
  const int64_t tol = kSecond;
  EXPECT_NEAR(RealtimeOffset(r), realtime, tol);
  EXPECT_NEAR(r.at("realtime_coarse") - r.at("real_realtime"), realtime, tol);
  EXPECT_NEAR(r.at("tai") - r.at("real_tai"), realtime, tol);
  EXPECT_NEAR(r.at("gettimeofday_us") * 1000 - r.at("real_realtime"), realtime, tol);
  EXPECT_NEAR(r.at("time") * kSecond - r.at("real_realtime"), realtime, 2 * tol);
  EXPECT_NEAR(MonotonicOffset(r), monotonic, tol);
  EXPECT_NEAR(r.at("monotonic_coarse") - r.at("real_monotonic"), monotonic, tol);
  EXPECT_NEAR(r.at("boottime") - r.at("real_boottime"), monotonic, tol);
  // Never shifted.
  EXPECT_NEAR(r.at("monotonic_raw") - r.at("real_monotonic_raw"), 0, tol);
}

class ClockShimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed";
    auto control = ClockControl::Create(dir_.path() + "/clock");
    ASSERT_TRUE(control.ok()) << control.status();
    clock_ = *std::move(control);
  }

  TempDir dir_;
  std::unique_ptr<ClockControl> clock_;
};

TEST(ClockControlTest, EncodesFixedWidthRecord) {
  ClockState state;
  state.realtime = absl::Hours(1);
  const std::string record = ClockControl::EncodeRecord(state);
  ASSERT_EQ(record.size(), 114u);
  EXPECT_EQ(record.substr(0, 33), "RLCLOCK1 F - +0000003600000000000");
  EXPECT_EQ(record.back(), '\n');

  state.mode = ClockState::Mode::kStrobe;
  state.realtime = absl::Seconds(-5);
  state.realtime_alt = absl::Seconds(5);
  state.monotonic = absl::Nanoseconds(-1);
  state.period = absl::Milliseconds(100);
  const std::string strobe = ClockControl::EncodeRecord(state);
  ASSERT_EQ(strobe.size(), 114u);
  EXPECT_EQ(strobe.substr(0, 97),
            "RLCLOCK1 S M -0000000005000000000 +0000000005000000000 "
            "-0000000000000000001 +0000000000100000000 ");
}

TEST(ClockControlTest, RejectsBadArguments) {
  EXPECT_EQ(ClockControl::Create("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClockControl::Create("/nonexistent-dir/x/clock").status().code(),
            absl::StatusCode::kUnavailable);
  TempDir dir;
  auto clock = ClockControl::Create(dir.path() + "/clock");
  ASSERT_TRUE(clock.ok()) << clock.status();
  EXPECT_EQ((*clock)->Strobe(absl::ZeroDuration(), absl::Seconds(1), absl::ZeroDuration()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*clock)->SetOffset(absl::Hours(24 * 365 * 40)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*clock)->SetOffset(absl::InfiniteDuration()).code(),
            absl::StatusCode::kInvalidArgument);
  // A rejected change leaves the previous state.
  ASSERT_TRUE((*clock)->SetOffset(absl::Seconds(7)).ok());
  EXPECT_FALSE((*clock)->JumpBy(absl::Hours(24 * 365 * 40)).ok());
  EXPECT_EQ((*clock)->state().realtime, absl::Seconds(7));
}

TEST(ClockControlTest, ProcessEnvNamesBuiltLibrary) {
  TempDir dir;
  auto clock = ClockControl::Create(dir.path() + "/clock");
  ASSERT_TRUE(clock.ok()) << clock.status();
  auto env = (*clock)->ProcessEnv();
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0].first, "LD_PRELOAD");
  EXPECT_TRUE(std::filesystem::exists(env[0].second)) << env[0].second;
  EXPECT_EQ(env[1].first, "REDLOCK_CLOCK_SHIM_FILE");
  EXPECT_EQ(env[1].second, dir.path() + "/clock");
}

TEST_F(ClockShimTest, ZeroRecordMeansNoShift) {
  auto r = ProbeOnce(clock_->ProcessEnv());
  ASSERT_TRUE(r.has_value());
  ExpectOffsets(*r, 0, 0);
}

TEST_F(ClockShimTest, MissingFileMeansNoShift) {
  auto env = clock_->ProcessEnv();
  env[1].second = dir_.path() + "/does-not-exist";
  auto r = ProbeOnce(env);
  ASSERT_TRUE(r.has_value());
  ExpectOffsets(*r, 0, 0);

  // No REDLOCK_CLOCK_SHIM_FILE at all.
  env.pop_back();
  r = ProbeOnce(env);
  ASSERT_TRUE(r.has_value());
  ExpectOffsets(*r, 0, 0);
}

TEST_F(ClockShimTest, GarbledFileMeansNoShift) {
  const std::string path = dir_.path() + "/garbled";
  std::string record =
      ClockControl::EncodeRecord(ClockState{ClockState::Mode::kFixed, absl::Hours(1)});
  record[20] = '7';  // checksum no longer matches
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, record.data(), record.size()), static_cast<ssize_t>(record.size()));
  ::close(fd);
  auto env = clock_->ProcessEnv();
  env[1].second = path;
  auto r = ProbeOnce(env);
  ASSERT_TRUE(r.has_value());
  ExpectOffsets(*r, 0, 0);
}

TEST_F(ClockShimTest, RealtimeShiftedForwardAndBack) {
  ASSERT_TRUE(clock_->SetOffset(absl::Hours(1)).ok());
  auto r = ProbeOnce(clock_->ProcessEnv());
  ASSERT_TRUE(r.has_value());
  ExpectOffsets(*r, kHour, 0);

  ASSERT_TRUE(clock_->SetOffset(absl::Hours(-1)).ok());
  r = ProbeOnce(clock_->ProcessEnv());
  ASSERT_TRUE(r.has_value());
  ExpectOffsets(*r, -kHour, 0);

  ASSERT_TRUE(clock_->Clear().ok());
  r = ProbeOnce(clock_->ProcessEnv());
  ASSERT_TRUE(r.has_value());
  ExpectOffsets(*r, 0, 0);
}

TEST_F(ClockShimTest, MonotonicShiftedOnlyWhenEnabled) {
  ASSERT_TRUE(clock_->SetOffset(absl::Hours(1), absl::Minutes(10)).ok());
  auto r = ProbeOnce(clock_->ProcessEnv());
  ASSERT_TRUE(r.has_value());
  ExpectOffsets(*r, kHour, 600 * kSecond);

  ASSERT_TRUE(clock_->SetOffset(absl::Hours(1)).ok());
  r = ProbeOnce(clock_->ProcessEnv());
  ASSERT_TRUE(r.has_value());
  ExpectOffsets(*r, kHour, 0);
}

TEST_F(ClockShimTest, JumpSeenByRunningProcess) {
  // Up to 1000 lines 10 ms apart; the test stops it as soon as it has seen
  // what it needs.
  std::unique_ptr<Process> probe = StartProbe(clock_->ProcessEnv(), 1000, 10);
  ASSERT_NE(probe, nullptr);
  for (int i = 0; i < 3; ++i) {
    auto line = probe->ReadLine(absl::Seconds(20));
    ASSERT_TRUE(line.has_value());
    auto r = ParseProbeLine(*line);
    ASSERT_TRUE(r.has_value()) << *line;
    EXPECT_NEAR(RealtimeOffset(*r), 0, kSecond);
  }
  // Forward, then back past zero: each jump must show up in a later line.
  const std::vector<std::pair<absl::Duration, int64_t>> jumps = {{absl::Hours(1), kHour},
                                                                 {absl::Hours(-2), -kHour}};
  for (const auto& [delta, expected] : jumps) {
    ASSERT_TRUE(clock_->JumpBy(delta).ok());
    bool seen = false;
    for (int i = 0; i < 1000 && !seen; ++i) {
      auto line = probe->ReadLine(absl::Seconds(20));
      ASSERT_TRUE(line.has_value()) << "probe ended before the jump was seen";
      auto r = ParseProbeLine(*line);
      ASSERT_TRUE(r.has_value()) << *line;
      seen = std::llabs(RealtimeOffset(*r) - expected) < kSecond;
      if (seen) {
        EXPECT_NEAR(MonotonicOffset(*r), 0, kSecond);
      }
    }
    EXPECT_TRUE(seen) << "jump by " << delta << " never observed";
  }
  probe->Kill();
}

TEST_F(ClockShimTest, StrobeAlternates) {
  ASSERT_TRUE(clock_->Strobe(absl::ZeroDuration(), absl::Hours(1), absl::Milliseconds(50)).ok());
  std::unique_ptr<Process> probe = StartProbe(clock_->ProcessEnv(), 80, 10);
  ASSERT_NE(probe, nullptr);
  int zero = 0, shifted = 0, other = 0, flips = 0;
  std::optional<bool> last;
  for (int i = 0; i < 80; ++i) {
    auto line = probe->ReadLine(absl::Seconds(20));
    ASSERT_TRUE(line.has_value()) << "after " << i << " lines";
    auto r = ParseProbeLine(*line);
    ASSERT_TRUE(r.has_value()) << *line;
    const int64_t offset = RealtimeOffset(*r);
    bool is_shifted;
    if (std::llabs(offset) < kSecond) {
      ++zero;
      is_shifted = false;
    } else if (std::llabs(offset - kHour) < kSecond) {
      ++shifted;
      is_shifted = true;
    } else {
      ++other;
      continue;
    }
    if (last.has_value() && *last != is_shifted) ++flips;
    last = is_shifted;
  }
  EXPECT_EQ(other, 0);
  EXPECT_GT(zero, 0);
  EXPECT_GT(shifted, 0);
  // 80 lines at >= 10 ms span >= 16 phases of 50 ms; ask for far fewer flips.
  EXPECT_GE(flips, 3);
  EXPECT_EQ(probe->Wait(absl::Seconds(30)).value_or(-1), 0);
}

// ---- redis-server under the shim ----

// redis-server under the shim, started by the project's fleet fixture (one
// node, the shim's environment).
class ShimmedRedisTest : public ClockShimTest {
 protected:
  void SetUp() override {
    ClockShimTest::SetUp();
    if (HasFatalFailure()) return;
    REDLOCK_REQUIRE_REDIS();
  }

  // Starts the node; the fleet waits until it answers PING (within 20 s: the
  // shim must not hang start-up the way libfaketime does).
  void StartRedis() {
    auto fleet = redlock::testkit::Fleet::Start(
        {.nodes = 1, .env = clock_->ProcessEnv(), .start_timeout = absl::Seconds(20)});
    ASSERT_TRUE(fleet.ok()) << "redis-server under the shim: " << fleet.status();
    fleet_ = *std::move(fleet);
  }

  absl::StatusOr<redlock::testkit::RedisValue> Command(const std::vector<std::string>& args) {
    return fleet_->Command(0, args);
  }

  // Redis's TIME as nanoseconds since the epoch, or -1.
  int64_t RedisTime() {
    auto r = Command({"TIME"});
    if (!r.ok() || r->elements.size() != 2) return -1;
    int64_t sec = 0, usec = 0;
    if (!absl::SimpleAtoi(r->elements[0].str, &sec) ||
        !absl::SimpleAtoi(r->elements[1].str, &usec)) {
      return -1;
    }
    return sec * kSecond + usec * 1000;
  }

  bool KeyExists(const std::string& key) {
    auto r = Command({"GET", key});
    return r.ok() && r->type == redlock::testkit::RedisValue::Type::kString;
  }

  void SetWithTtl(const std::string& key) {
    auto set = Command({"SET", key, "v", "PX", "20000"});
    ASSERT_TRUE(set.ok()) << set.status();
    ASSERT_EQ(set->type, redlock::testkit::RedisValue::Type::kStatus);
  }

  void TearDown() override { fleet_.reset(); }  // SIGKILL + reap by pid

  std::unique_ptr<redlock::testkit::Fleet> fleet_;
};

TEST_F(ShimmedRedisTest, StartsAndReportsShiftedTime) {
  ASSERT_TRUE(clock_->SetOffset(absl::Hours(1)).ok());
  StartRedis();
  if (HasFatalFailure()) return;
  const int64_t now = absl::ToUnixNanos(absl::Now());
  const int64_t redis_time = RedisTime();
  ASSERT_GT(redis_time, 0);
  EXPECT_NEAR(redis_time - now, kHour, 2 * kSecond);

  ASSERT_TRUE(clock_->JumpBy(absl::Hours(-2)).ok());
  // A server may read the wall clock once a millisecond and add its own
  // monotonic clock in between (Valkey 9.1, whose monotonic clock is the
  // x86 TSC: ustime() in its util.c), so the jump shows within a millisecond,
  // not at once: poll (bounded) until it does.
  auto behind = [&] { return RedisTime() - absl::ToUnixNanos(absl::Now()) < 0; };
  EXPECT_TRUE(redlock::testkit::Eventually(behind, true, absl::Seconds(2)));
  EXPECT_NEAR(RedisTime() - absl::ToUnixNanos(absl::Now()), -kHour, 2 * kSecond);
}

TEST_F(ShimmedRedisTest, ForwardJumpExpiresKeyEarly) {
  StartRedis();
  if (HasFatalFailure()) return;
  SetWithTtl("shim:fwd");
  if (HasFatalFailure()) return;
  ASSERT_TRUE(KeyExists("shim:fwd"));
  // The node's wall clock leaps 60 s: a 20 s lease is gone at once although
  // almost no real time passed (Kleppmann's clock-jump scenario).
  ASSERT_TRUE(clock_->JumpBy(absl::Seconds(60)).ok());
  // Within a millisecond (a server may read the wall clock once a
  // millisecond: StartsAndReportsShiftedTime); far less than the 20 s ttl,
  // so only the jump can expire it.
  EXPECT_FALSE(
      redlock::testkit::Eventually([&] { return KeyExists("shim:fwd"); }, false, absl::Seconds(2)));
}

TEST_F(ShimmedRedisTest, BackwardJumpDoesNotExpireKey) {
  StartRedis();
  if (HasFatalFailure()) return;
  SetWithTtl("shim:back");
  if (HasFatalFailure()) return;
  ASSERT_TRUE(clock_->JumpBy(absl::Seconds(-60)).ok());
  EXPECT_TRUE(KeyExists("shim:back"));
  // The absolute expiry is now ~80 s away on the node's clock (seen within a
  // millisecond: StartsAndReportsShiftedTime).
  auto pttl_ms = [&]() -> long long {
    auto pttl = Command({"PTTL", "shim:back"});
    return pttl.ok() && pttl->type == redlock::testkit::RedisValue::Type::kInteger ? pttl->integer
                                                                                   : -1;
  };
  EXPECT_TRUE(
      redlock::testkit::Eventually([&] { return pttl_ms() > 20000; }, true, absl::Seconds(2)))
      << "PTTL " << pttl_ms();
  // Back to real time: still there (only a little real time has passed).
  ASSERT_TRUE(clock_->Clear().ok());
  EXPECT_TRUE(KeyExists("shim:back"));
}

}  // namespace
}  // namespace redlock::testkit
