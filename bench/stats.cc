#include "bench/stats.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "bench/alloc_count.h"

namespace redlock::bench {

LatencyHistogram::LatencyHistogram() : buckets_(kBuckets, 0) {}

int LatencyHistogram::BucketIndex(int64_t ns) {
  if (ns < 0) ns = 0;
  constexpr int64_t kMax = (int64_t{1} << kMaxExponent) - 1;
  if (ns > kMax) ns = kMax;
  if (ns < 256) return static_cast<int>(ns);
  const int msb = 63 - __builtin_clzll(static_cast<unsigned long long>(ns));
  const int shift = msb - kSubBits;               // >= 1
  const int sub = static_cast<int>(ns >> shift);  // in [128, 256)
  return 256 + (shift - 1) * 128 + (sub - 128);
}

int64_t LatencyHistogram::BucketLower(int index) {
  if (index < 256) return index;
  const int shift = (index - 256) / 128 + 1;
  const int64_t sub = (index - 256) % 128 + 128;
  return sub << shift;
}

int64_t LatencyHistogram::BucketUpper(int index) {
  if (index < 256) return index + 1;
  const int shift = (index - 256) / 128 + 1;
  const int64_t sub = (index - 256) % 128 + 128;
  return (sub + 1) << shift;
}

void LatencyHistogram::Record(int64_t ns) {
  if (ns < 0) ns = 0;
  ++buckets_[static_cast<size_t>(BucketIndex(ns))];
  if (count_ == 0 || ns < min_) min_ = ns;
  if (ns > max_) max_ = ns;
  ++count_;
  sum_ += static_cast<double>(ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  if (count_ == 0 || other.min_ < min_) min_ = other.min_;
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

LatencyHistogram::Parts LatencyHistogram::ToParts() const {
  Parts p;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (buckets_[i] != 0) p.buckets.emplace_back(static_cast<int>(i), buckets_[i]);
  }
  p.min = min();
  p.max = max_;
  p.sum = sum_;
  return p;
}

LatencyHistogram LatencyHistogram::FromParts(const Parts& parts) {
  LatencyHistogram h;
  for (const auto& [index, n] : parts.buckets) {
    if (index < 0 || index >= kBuckets || n == 0) continue;
    h.buckets_[static_cast<size_t>(index)] += n;
    h.count_ += static_cast<int64_t>(n);
  }
  if (h.count_ > 0) {
    h.min_ = parts.min;
    h.max_ = parts.max;
    h.sum_ = parts.sum;
  }
  return h;
}

Distribution::Distribution(const LatencyHistogram& h)
    : count_(h.count()), min_(h.min()), max_(h.max()), sum_(h.sum()) {
  const std::vector<uint64_t>& b = h.buckets();
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i] != 0) buckets_.emplace_back(static_cast<int>(i), b[i]);
  }
}

int64_t Distribution::Quantile(double q) const {
  if (count_ == 0) return 0;
  if (q <= 0) return min_;
  if (q >= 1) return max_;
  // Nearest rank: the smallest value with at least ceil(q * count) samples
  // at or below it.
  const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  uint64_t seen = 0;
  for (const auto& [index, n] : buckets_) {
    seen += n;
    if (seen >= rank) {
      const int64_t lo = LatencyHistogram::BucketLower(index);
      const int64_t hi = LatencyHistogram::BucketUpper(index);
      const int64_t mid = lo + (hi - lo - 1) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

Percentiles Distribution::Summary() const {
  Percentiles p;
  p.count = count_;
  p.mean = mean();
  p.min = min_;
  p.p50 = Quantile(0.50);
  p.p90 = Quantile(0.90);
  p.p99 = Quantile(0.99);
  p.p999 = Quantile(0.999);
  p.max = max_;
  return p;
}

void Distribution::Merge(const Distribution& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    *this = other;
    return;
  }
  std::vector<std::pair<int, uint64_t>> merged;
  merged.reserve(buckets_.size() + other.buckets_.size());
  size_t i = 0, j = 0;
  while (i < buckets_.size() || j < other.buckets_.size()) {
    if (j == other.buckets_.size() ||
        (i < buckets_.size() && buckets_[i].first < other.buckets_[j].first)) {
      merged.push_back(buckets_[i++]);
    } else if (i == buckets_.size() || other.buckets_[j].first < buckets_[i].first) {
      merged.push_back(other.buckets_[j++]);
    } else {
      merged.emplace_back(buckets_[i].first, buckets_[i].second + other.buckets_[j].second);
      ++i;
      ++j;
    }
  }
  buckets_ = std::move(merged);
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

std::vector<std::pair<int64_t, double>> Distribution::Cdf(int max_points) const {
  std::vector<std::pair<int64_t, double>> out;
  if (count_ == 0 || max_points < 2) return out;
  const double total = static_cast<double>(count_);
  out.emplace_back(min_, 0.0);
  uint64_t seen = 0;
  const size_t n = buckets_.size();
  const size_t step = std::max<size_t>(
      1, (n + static_cast<size_t>(max_points) - 3) / static_cast<size_t>(max_points - 2));
  for (size_t i = 0; i < n; ++i) {
    seen += buckets_[i].second;
    if (i % step == step - 1 || i + 1 == n) {
      const int64_t upper = std::min(LatencyHistogram::BucketUpper(buckets_[i].first), max_);
      out.emplace_back(std::max(upper, min_), static_cast<double>(seen) / total);
    }
  }
  out.back() = {max_, 1.0};
  return out;
}

std::string ErrorCounts::CauseOf(const std::string& message) {
  std::string out;
  out.reserve(message.size());
  bool quoted = false;
  for (size_t i = 0; i < message.size(); ++i) {
    const char c = message[i];
    if (c == '"') {
      if (!quoted) out += "\"...\"";
      quoted = !quoted;
      continue;
    }
    if (quoted) continue;
    if (c >= '0' && c <= '9') {
      if (out.empty() || out.back() != '#') out += '#';
      continue;
    }
    out += c;
  }
  return out;
}

void ErrorCounts::AddCause(const std::string& code, const std::string& cause, int64_t n) {
  std::map<std::string, int64_t>& m = causes_[code];
  auto it = m.find(cause);
  if (it == m.end() && m.size() >= kMaxCauses) it = m.emplace("(other)", 0).first;
  if (it == m.end()) it = m.emplace(cause, 0).first;
  it->second += n;
}

void ErrorCounts::Add(const absl::Status& status) {
  if (status.ok()) return;
  std::string code = absl::StatusCodeToString(status.code());
  auto [it, inserted] = counts_.emplace(code, 0);
  ++it->second;
  if (inserted) first_.emplace(code, std::string(status.message()));
  AddCause(code, CauseOf(std::string(status.message())), 1);
}

void ErrorCounts::Merge(const ErrorCounts& other) {
  for (const auto& [code, n] : other.counts_) counts_[code] += n;
  for (const auto& [code, msg] : other.first_) first_.emplace(code, msg);
  for (const auto& [code, causes] : other.causes_) {
    for (const auto& [cause, n] : causes) AddCause(code, cause, n);
  }
}

int64_t ErrorCounts::total() const {
  int64_t t = 0;
  for (const auto& [code, n] : counts_) t += n;
  return t;
}

namespace {

int64_t StatusFieldKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0 && line.size() > len && line[len] == ':') {
      return std::strtoll(line.c_str() + len + 1, nullptr, 10);
    }
  }
  return -1;
}

}  // namespace

int64_t CurrentRssKb() { return StatusFieldKb("VmRSS"); }
int64_t PeakRssKb() { return StatusFieldKb("VmHWM"); }

ProcessUsage CurrentProcessUsage() {
  ProcessUsage u;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return u;
  u.user_us = int64_t{ru.ru_utime.tv_sec} * 1000000 + ru.ru_utime.tv_usec;
  u.sys_us = int64_t{ru.ru_stime.tv_sec} * 1000000 + ru.ru_stime.tv_usec;
  u.voluntary_csw = ru.ru_nvcsw;
  u.involuntary_csw = ru.ru_nivcsw;
  u.allocations = AllocationsCounted();
  return u;
}

void AddAllocations(ProcessUsage* sum, int64_t allocations) {
  sum->allocations =
      allocations >= 0 && sum->allocations >= 0 ? sum->allocations + allocations : -1;
}

ProcessUsage UsageDelta(const ProcessUsage& later, const ProcessUsage& earlier) {
  ProcessUsage d;
  d.user_us = later.user_us - earlier.user_us;
  d.sys_us = later.sys_us - earlier.sys_us;
  d.voluntary_csw = later.voluntary_csw - earlier.voluntary_csw;
  d.involuntary_csw = later.involuntary_csw - earlier.involuntary_csw;
  d.allocations = later.allocations >= 0 && earlier.allocations >= 0
                      ? later.allocations - earlier.allocations
                      : -1;
  return d;
}

bool ResetPeakRss() {
  // Writing "5" to clear_refs resets VmHWM to the current RSS (Linux 4.0+).
  int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, "5", 1) == 1;
  close(fd);
  return ok;
}

}  // namespace redlock::bench
