// ClockControl: drives the clock shim (chaos/clock_shim.c,
// libredlock_clock_shim.so) of one or more processes by rewriting its control
// file in place.
//
// A process started with the environment from ProcessEnv() (LD_PRELOAD of the
// shim and REDLOCK_CLOCK_SHIM_FILE=<path>) sees CLOCK_REALTIME,
// CLOCK_REALTIME_COARSE, CLOCK_TAI, gettimeofday(), time() and timespec_get()
// shifted by the realtime offset, and, only when a monotonic offset is set,
// CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE and CLOCK_BOOTTIME shifted by the
// monotonic offset. CLOCK_MONOTONIC_RAW is never shifted (the chaos harness
// stamps its histories with it). The shim reads the file on every clock call,
// so a change takes effect in the next call of every process sharing the file.
//
// Usage:
//
//   REDLOCK_ASSIGN_OR_RETURN(auto clock, ClockControl::Create(dir + "/node0.clock"));
//   Spawn("redis-server", ..., clock->ProcessEnv());   // starts at offset 0
//   REDLOCK_RETURN_IF_ERROR(clock->JumpBy(absl::Seconds(60)));  // node's wall clock leaps
//   REDLOCK_RETURN_IF_ERROR(clock->Strobe(absl::ZeroDuration(), absl::Seconds(-5),
//                                 absl::Milliseconds(100)));
//   REDLOCK_RETURN_IF_ERROR(clock->Clear());
//
// File format (the authoritative description is at the top of clock_shim.c):
// one fixed-width 114-byte ASCII record
//
//   RLCLOCK1 <F|S> <M|-> <A> <B> <MONO> <PERIOD> <FNV1A64-HEX>\n
//
// mode F (fixed: realtime offset A) or S (strobe: realtime offset A while
// floor(real CLOCK_MONOTONIC / PERIOD) is even, B while odd); M shifts the
// monotonic clocks by MONO. A, B, MONO and PERIOD are signed nanoseconds written
// as a sign and 19 digits; the last field is the FNV-1a 64-bit hash of the
// first 97 bytes, so a reader detects a torn record (one read during a write)
// and re-reads. The record is always rewritten with pwrite() at offset 0: never
// rename a new file over the path, since shimmed processes keep it open.
//
// Limits: every offset and the period must lie within +-10^18 ns (~31 years);
// the shim clamps a shifted time that would be negative to 0.
//
// Thread safety: all methods are thread-safe. One ClockControl per file: two
// writers of the same file would overwrite each other's state.

#ifndef REDLOCK_TESTKIT_CLOCK_CONTROL_H_
#define REDLOCK_TESTKIT_CLOCK_CONTROL_H_

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace redlock::testkit {

// What the control file currently says.
struct ClockState {
  enum class Mode { kFixed, kStrobe };
  Mode mode = Mode::kFixed;
  // Realtime offset (kFixed), or the offset of the even strobe phases.
  absl::Duration realtime = absl::ZeroDuration();
  // Realtime offset of the odd strobe phases (kStrobe only).
  absl::Duration realtime_alt = absl::ZeroDuration();
  // Offset of the monotonic clocks; zero means they are not shifted.
  absl::Duration monotonic = absl::ZeroDuration();
  // Length of one strobe phase (kStrobe only).
  absl::Duration period = absl::ZeroDuration();
};

class ClockControl {
 public:
  // Opens `path` (creating it, mode 0644, if missing) and writes a zero-offset
  // record in place. An existing file keeps its inode, so processes already
  // reading it follow the new state.
  // Errors: kInvalidArgument for an empty path; kUnavailable (with errno text)
  // when the file cannot be opened or written.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ClockControl>> Create(std::string path);

  // Leaves the file as it is (processes may still be reading it).
  ~ClockControl();
  ClockControl(const ClockControl&) = delete;
  ClockControl& operator=(const ClockControl&) = delete;

  // Fixed offsets: realtime clocks read real + `realtime`; a non-zero
  // `monotonic` also shifts the monotonic clocks (zero leaves them alone).
  // Errors: kInvalidArgument if an offset exceeds +-10^18 ns or is infinite;
  // kUnavailable if the write fails (the previous state then stays in force).
  [[nodiscard]] absl::Status SetOffset(absl::Duration realtime,
                                       absl::Duration monotonic = absl::ZeroDuration());

  // Adds `realtime` to the current realtime offset (to both strobe offsets in
  // strobe mode) and `monotonic` to the monotonic offset. Negative values jump
  // back. Errors as SetOffset.
  [[nodiscard]] absl::Status JumpBy(absl::Duration realtime,
                                    absl::Duration monotonic = absl::ZeroDuration());

  // Strobe: the realtime offset alternates between `a` and `b` every `period`
  // of real monotonic time, in phase across all processes sharing the file.
  // The monotonic offset is kept as it is.
  // Errors: kInvalidArgument if period <= 0 or a value is out of range;
  // kUnavailable if the write fails.
  [[nodiscard]] absl::Status Strobe(absl::Duration a, absl::Duration b, absl::Duration period);

  // Back to zero offsets, fixed mode, monotonic clocks unshifted.
  [[nodiscard]] absl::Status Clear();

  // The state last written successfully.
  ClockState state() const;

  const std::string& path() const { return path_; }

  // The environment a process needs to run under this clock, as name/value
  // pairs: LD_PRELOAD=<ShimLibraryPath()> and REDLOCK_CLOCK_SHIM_FILE=<path()>.
  // Add them to (or replace them in) the child's environment; do not set them
  // in the calling process.
  std::vector<std::pair<std::string, std::string>> ProcessEnv() const;

  // Absolute path of libredlock_clock_shim.so in the build tree.
  static std::string ShimLibraryPath();

  // The 114-byte record for `state` (exposed for tests and tools).
  // REQUIRES: the values are within range (see Validate()).
  static std::string EncodeRecord(const ClockState& state);

  // kInvalidArgument if `state` cannot be encoded.
  [[nodiscard]] static absl::Status Validate(const ClockState& state);

 private:
  ClockControl(std::string path, int fd);
  // REQUIRES: mu_ held.
  absl::Status WriteLocked(const ClockState& next);

  const std::string path_;
  const int fd_;
  // std::mutex, not absl::Mutex: Debian's prebuilt Abseil is not instrumented
  // for ThreadSanitizer, which would then report false races.
  mutable std::mutex mu_;
  ClockState state_;  // guarded by mu_
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_CLOCK_CONTROL_H_
