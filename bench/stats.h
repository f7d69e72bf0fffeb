// Latency statistics for redlock-bench: a fixed-size log-linear histogram
// (HDR-style) for recording without allocation, and a compact sparse copy of
// it for results, percentiles and CDFs.
//
// Resolution: values are nanoseconds; below 256 ns each value has its own
// bucket, above that every power of two is split into 128 buckets, so a
// bucket is at most 1/128 of its lower bound wide. Percentiles report the
// bucket's midpoint (clamped to the exact min and max), an error of at most
// 0.4 % of the value. Values above 2^38 ns (about 4.6 minutes) are clamped.
//
// Thread-safety: none; each recording thread owns its histogram and the
// runner merges them after the threads are joined.

#ifndef REDLOCK_BENCH_STATS_H_
#define REDLOCK_BENCH_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace redlock::bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 7;       // 128 buckets per power of two
  static constexpr int kMaxExponent = 38;  // values up to 2^38 ns
  static constexpr int kBuckets = 256 + (kMaxExponent - kSubBits - 1) * 128;

  LatencyHistogram();

  void Record(int64_t ns);
  void Merge(const LatencyHistogram& other);

  int64_t count() const { return count_; }
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  int64_t max() const { return max_; }
  double sum() const { return sum_; }
  const std::vector<uint64_t>& buckets() const { return buckets_; }

  // The histogram as plain numbers, and back (for one sent between
  // processes): the non-empty buckets (index, count), min, max and sum.
  struct Parts {
    std::vector<std::pair<int, uint64_t>> buckets;
    int64_t min = 0;
    int64_t max = 0;
    double sum = 0;
  };
  Parts ToParts() const;
  // Buckets out of range are ignored.
  static LatencyHistogram FromParts(const Parts& parts);

  static int BucketIndex(int64_t ns);
  // [lower, upper) of a bucket, in ns.
  static int64_t BucketLower(int index);
  static int64_t BucketUpper(int index);

 private:
  std::vector<uint64_t> buckets_;
  int64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  double sum_ = 0;
};

// The figures printed per latency: p50, p90, p99, p99.9, max (ns).
struct Percentiles {
  int64_t count = 0;
  double mean = 0;
  int64_t min = 0;
  int64_t p50 = 0;
  int64_t p90 = 0;
  int64_t p99 = 0;
  int64_t p999 = 0;
  int64_t max = 0;
};

// A finished distribution: only the non-empty buckets.
class Distribution {
 public:
  Distribution() = default;
  explicit Distribution(const LatencyHistogram& h);

  bool empty() const { return count_ == 0; }
  int64_t count() const { return count_; }
  int64_t min() const { return min_; }
  int64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0 : sum_ / static_cast<double>(count_); }

  // Value at quantile q in [0, 1] (nearest rank), in ns; 0 when empty.
  int64_t Quantile(double q) const;
  Percentiles Summary() const;

  // Adds `other`'s samples.
  void Merge(const Distribution& other);

  // At most `max_points` (value_ns, fraction <= value) points of the CDF,
  // evenly spread over the buckets, always including min and max.
  std::vector<std::pair<int64_t, double>> Cdf(int max_points = 200) const;

 private:
  std::vector<std::pair<int, uint64_t>> buckets_;  // (index, count), ascending
  int64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  double sum_ = 0;
};

// Failed calls by status code, with the first message seen for each code,
// and by cause: the message with quoted names and numbers blanked out
// (acquire "...": # of # nodes granted (quorum #); #.#.#.#:#: no reply
// within #ms"), so that one resource or one count does not make a cause of
// its own. At most kMaxCauses causes per code; the rest count as "(other)".
class ErrorCounts {
 public:
  static constexpr size_t kMaxCauses = 12;

  void Add(const absl::Status& status);
  void Merge(const ErrorCounts& other);
  bool empty() const { return counts_.empty(); }
  int64_t total() const;
  // Keyed by absl::StatusCodeToString (e.g. "UNAVAILABLE").
  const std::map<std::string, int64_t>& counts() const { return counts_; }
  const std::map<std::string, std::string>& first_messages() const { return first_; }
  // Code -> cause -> count.
  const std::map<std::string, std::map<std::string, int64_t>>& causes() const { return causes_; }

  // The cause of a message (exposed for tests).
  static std::string CauseOf(const std::string& message);

 private:
  void AddCause(const std::string& code, const std::string& cause, int64_t n);

  std::map<std::string, int64_t> counts_;
  std::map<std::string, std::string> first_;
  std::map<std::string, std::map<std::string, int64_t>> causes_;
};

// CPU time and context switches of this whole process (every thread) from
// getrusage(RUSAGE_SELF): the client's cost, independent of how fast the
// shared machine happens to be.
struct ProcessUsage {
  int64_t user_us = 0;
  int64_t sys_us = 0;
  int64_t voluntary_csw = 0;
  int64_t involuntary_csw = 0;
  // operator new calls while the allocation count was open
  // (bench/alloc_count.h); -1 when the binary does not count them.
  int64_t allocations = -1;
};
ProcessUsage CurrentProcessUsage();
// Adds `allocations` (-1: not counted) to the row's sum: the sum stays -1 when
// any part is not counted.
void AddAllocations(ProcessUsage* sum, int64_t allocations);
// later - earlier, field by field (allocations -1 when either is).
ProcessUsage UsageDelta(const ProcessUsage& later, const ProcessUsage& earlier);

// Memory of this process, from /proc/self/status (kB; -1 if unreadable).
int64_t CurrentRssKb();
int64_t PeakRssKb();
// Resets the peak (VmHWM) so the next PeakRssKb() covers what follows.
// Returns false where the kernel does not allow it (the peak is then the
// process's lifetime peak).
bool ResetPeakRss();

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_STATS_H_
