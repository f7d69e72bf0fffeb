#include "testkit/clock_control.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#ifndef REDLOCK_CLOCK_SHIM_PATH
#error "REDLOCK_CLOCK_SHIM_PATH must name libredlock_clock_shim.so (set by chaos/clock_shim.cmake)"
#endif

namespace redlock::testkit {
namespace {

// Must match clock_shim.c.
constexpr size_t kRecordLen = 114;
constexpr size_t kHashedLen = 97;
constexpr int64_t kMaxMagnitude = 1000000000000000000LL;

uint64_t Fnv1a(const char* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string Signed20(int64_t ns) {
  uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return absl::StrFormat("%c%019u", ns < 0 ? '-' : '+', magnitude);
}

absl::Status CheckRange(absl::string_view what, absl::Duration d) {
  if (d == absl::InfiniteDuration() || d == -absl::InfiniteDuration() ||
      d > absl::Nanoseconds(kMaxMagnitude) || d < -absl::Nanoseconds(kMaxMagnitude)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "clock control: ", what, " ", absl::FormatDuration(d), " is outside +-10^18 ns"));
  }
  return absl::OkStatus();
}

absl::Status ErrnoError(absl::string_view what, const std::string& path, int err) {
  return absl::UnavailableError(
      absl::StrCat("clock control: ", what, " ", path, ": ", strerror(err)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClockControl>> ClockControl::Create(std::string path) {
  if (path.empty()) {
    return absl::InvalidArgumentError("clock control: empty path");
  }
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  std::unique_ptr<ClockControl> control(new ClockControl(std::move(path), fd));
  {
    std::lock_guard<std::mutex> lock(control->mu_);
    absl::Status status = control->WriteLocked(ClockState{});
    if (!status.ok()) return status;
  }
  // A longer file (left over from something else) would still parse, since the
  // shim reads only the first record, but keep the file exactly one record.
  struct stat st;
  if (::fstat(control->fd_, &st) == 0 && st.st_size > static_cast<off_t>(kRecordLen)) {
    if (::ftruncate(control->fd_, kRecordLen) != 0) {
      return ErrnoError("cannot truncate", control->path_, errno);
    }
  }
  return control;
}

ClockControl::ClockControl(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

ClockControl::~ClockControl() { ::close(fd_); }

absl::Status ClockControl::SetOffset(absl::Duration realtime, absl::Duration monotonic) {
  ClockState next;
  next.realtime = realtime;
  next.monotonic = monotonic;
  std::lock_guard<std::mutex> lock(mu_);
  return WriteLocked(next);
}

absl::Status ClockControl::JumpBy(absl::Duration realtime, absl::Duration monotonic) {
  std::lock_guard<std::mutex> lock(mu_);
  ClockState next = state_;
  next.realtime += realtime;
  if (next.mode == ClockState::Mode::kStrobe) next.realtime_alt += realtime;
  next.monotonic += monotonic;
  return WriteLocked(next);
}

absl::Status ClockControl::Strobe(absl::Duration a, absl::Duration b, absl::Duration period) {
  std::lock_guard<std::mutex> lock(mu_);
  ClockState next = state_;
  next.mode = ClockState::Mode::kStrobe;
  next.realtime = a;
  next.realtime_alt = b;
  next.period = period;
  return WriteLocked(next);
}

absl::Status ClockControl::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteLocked(ClockState{});
}

ClockState ClockControl::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

std::vector<std::pair<std::string, std::string>> ClockControl::ProcessEnv() const {
  return {{"LD_PRELOAD", ShimLibraryPath()}, {"REDLOCK_CLOCK_SHIM_FILE", path_}};
}

std::string ClockControl::ShimLibraryPath() { return REDLOCK_CLOCK_SHIM_PATH; }

absl::Status ClockControl::Validate(const ClockState& state) {
  absl::Status status = CheckRange("realtime offset", state.realtime);
  if (status.ok()) status = CheckRange("realtime offset", state.realtime_alt);
  if (status.ok()) status = CheckRange("monotonic offset", state.monotonic);
  if (status.ok()) status = CheckRange("strobe period", state.period);
  if (status.ok() && state.mode == ClockState::Mode::kStrobe &&
      state.period < absl::Nanoseconds(1)) {
    status = absl::InvalidArgumentError(
        absl::StrCat("clock control: strobe period must be at least 1ns, not ",
                     absl::FormatDuration(state.period)));
  }
  return status;
}

std::string ClockControl::EncodeRecord(const ClockState& state) {
  const bool strobe = state.mode == ClockState::Mode::kStrobe;
  const bool shift_monotonic = state.monotonic != absl::ZeroDuration();
  std::string record = absl::StrCat(
      "RLCLOCK1 ", strobe ? "S" : "F", " ", shift_monotonic ? "M" : "-", " ",
      Signed20(absl::ToInt64Nanoseconds(state.realtime)), " ",
      Signed20(absl::ToInt64Nanoseconds(strobe ? state.realtime_alt : absl::ZeroDuration())), " ",
      Signed20(absl::ToInt64Nanoseconds(state.monotonic)), " ",
      Signed20(absl::ToInt64Nanoseconds(strobe ? state.period : absl::ZeroDuration())), " ");
  absl::StrAppend(&record, absl::StrFormat("%016x", Fnv1a(record.data(), record.size())), "\n");
  return record;
}

absl::Status ClockControl::WriteLocked(const ClockState& next) {
  absl::Status status = Validate(next);
  if (!status.ok()) return status;
  const std::string record = EncodeRecord(next);
  if (record.size() != kRecordLen) {
    return absl::InternalError(
        absl::StrCat("clock control: record is ", record.size(), " bytes, not ", kRecordLen));
  }
  // One pwrite of the whole record at offset 0: readers either see the old or
  // the new record, or a mix that fails the checksum and is read again.
  static_assert(kHashedLen + 17 == kRecordLen);
  ssize_t n;
  do {
    n = ::pwrite(fd_, record.data(), record.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoError("cannot write", path_, errno);
  if (static_cast<size_t>(n) != record.size()) {
    return absl::UnavailableError(absl::StrCat("clock control: short write to ", path_));
  }
  state_ = next;
  state_.realtime_alt =
      next.mode == ClockState::Mode::kStrobe ? next.realtime_alt : absl::ZeroDuration();
  if (next.mode == ClockState::Mode::kFixed) state_.period = absl::ZeroDuration();
  return absl::OkStatus();
}

}  // namespace redlock::testkit
