// The timeline picture's parts that are not the picture itself: geometry
// and colours, the outcome rows, lane packing, the time axis and the lanes'
// records (chaos/plot/plot.cc draws with them). Internal to the plot.

#ifndef REDLOCK_CHAOS_PLOT_TIMELINE_PARTS_H_
#define REDLOCK_CHAOS_PLOT_TIMELINE_PARTS_H_

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chaos/plot/plot.h"
#include "common/svg.h"

namespace redlock::chaos::plot_parts {

// ---- Geometry (pixels) -------------------------------------------------------------

constexpr double kLeft = 96;    // lane names
constexpr double kRight = 24;   // room for the last tick label
constexpr double kRowH = 15;    // a fault row, a violation-label row
constexpr double kHoldH = 16;   // the holds of a client
constexpr double kTickH = 6;    // one outcome row of failed attempts
constexpr double kLanePad = 4;  // above and below the content of a lane
constexpr double kBin = 2;      // failed attempts are aggregated per kBin pixels
constexpr double kFont = 10;    // labels inside the plot
constexpr double kMaxLabel = 320;
constexpr int kMaxFaultRows = 6;
constexpr int kMaxLabelRows = 4;
// Instant faults get a guide line across the lanes while there are few.
constexpr size_t kMaxGuides = 40;

// ---- Colours ----------------------------------------------------------------------------

constexpr std::array<const char*, kNumProperties> kViolationColor = {
    "#d62728", "#c51b8a", "#ff7f0e", "#6a3d9a", "#e6550d", "#17becf", "#8c564b"};
constexpr std::array<const char*, 6> kResourceColor = {"#4c78a8", "#54a24b", "#b279a2",
                                                       "#9d755d", "#72b7b2", "#bab0ac"};
constexpr std::array<const char*, 8> kSpareColor = {"#8c6d31", "#637939", "#7b4173", "#3182bd",
                                                    "#843c39", "#5254a3", "#ad494a", "#8ca252"};

// A fault's colour: its kind's, as recorded in the history (every kind
// has one, chaos/faults/), or a stable spare colour for a fault name without
// one (histories written before colours were recorded, a body's own names).
inline std::string FaultColor(const FaultInfo& f) {
  if (!f.color.empty()) return f.color;
  uint64_t h = 1469598103934665603ULL;
  for (char c : f.fault) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return kSpareColor[h % kSpareColor.size()];
}

// Failed attempts by outcome (the status code the client recorded).
struct Outcome {
  const char* code;  // "" matches every other code
  const char* label;
  const char* color;
};
constexpr std::array<Outcome, 4> kOutcomes = {{
    {"ABORTED", "failed: held elsewhere", "#6b6ecf"},
    {"UNAVAILABLE", "failed: unavailable", "#de2d26"},
    {"DEADLINE_EXCEEDED", "failed: no validity left", "#fd8d3c"},
    {"", "failed: other", "#969696"},
}};

inline size_t OutcomeOf(const std::string& code) {
  for (size_t i = 0; i + 1 < kOutcomes.size(); ++i) {
    if (code == kOutcomes[i].code) return i;
  }
  return kOutcomes.size() - 1;
}

// "c2" before "c10".
inline bool NaturalLess(const std::string& a, const std::string& b) {
  auto split = [](const std::string& s) {
    size_t d = s.size();
    while (d > 0 && std::isdigit(static_cast<unsigned char>(s[d - 1]))) --d;
    const std::string digits = s.substr(d, 18);
    return std::make_pair(s.substr(0, d), digits.empty() ? -1 : std::atoll(digits.c_str()));
  };
  auto sa = split(a), sb = split(b);
  if (sa != sb) return sa < sb;
  return a < b;
}

// Greedy packing of horizontal extents into rows (first row that is free).
class RowPacker {
 public:
  explicit RowPacker(int max_rows) : max_rows_(max_rows) {}

  // The row for [x0, x1]; -1 when every allowed row is taken there.
  int Place(double x0, double x1) {
    for (size_t r = 0; r < ends_.size(); ++r) {
      if (ends_[r] + 4 <= x0) {
        ends_[r] = x1;
        return static_cast<int>(r);
      }
    }
    if (static_cast<int>(ends_.size()) >= max_rows_) return -1;
    ends_.push_back(x1);
    return static_cast<int>(ends_.size()) - 1;
  }

  // As Place, but when every row is taken: the row that frees first.
  int PlaceAnyway(double x0, double x1) {
    int r = Place(x0, x1);
    if (r >= 0) return r;
    r = static_cast<int>(std::min_element(ends_.begin(), ends_.end()) - ends_.begin());
    ends_[static_cast<size_t>(r)] = std::max(ends_[static_cast<size_t>(r)], x1);
    return r;
  }

  int rows() const { return static_cast<int>(ends_.size()); }

 private:
  const int max_rows_;
  std::vector<double> ends_;
};

// The time axis: raw nanoseconds to pixels, and ms since the origin.
struct TimeAxis {
  int64_t d0 = 0;  // the domain drawn
  int64_t d1 = 1;
  int64_t origin = 0;  // 0 ms
  double width = 1200;

  double X(int64_t t) const {
    const double f = (static_cast<double>(t) - static_cast<double>(d0)) /
                     (static_cast<double>(d1) - static_cast<double>(d0));
    return kLeft + std::clamp(f, 0.0, 1.0) * width;
  }
  double Ms(int64_t t) const {
    return (static_cast<double>(t) - static_cast<double>(origin)) / 1e6;
  }
  std::string MsText(int64_t t) const { return absl::StrFormat("%.1f ms", Ms(t)); }
};

// A fault as drawn on one lane.
struct PlacedFault {
  const FaultInfo* fault = nullptr;
  int row = 0;
  double x0 = 0;
  double x1 = 0;  // == x0 for an instant
  std::string label;
};

struct Lane {
  enum class Kind { kClient, kNode, kOther };
  Kind kind = Kind::kClient;
  std::string name;
  std::vector<PlacedFault> faults;
  int fault_rows = 0;
  // Layout.
  double y = 0;
  double h = 0;
  double hold_y = 0;
  double tick_y = 0;
};

// "kind: detail", or the detail alone when it already names the kind
// ("kill -9 (no persistence)").
inline std::string Describe(const FaultInfo& f) {
  if (f.detail.empty()) return f.fault;
  if (absl::StartsWith(f.detail, f.fault)) return f.detail;
  return absl::StrCat(f.fault, ": ", f.detail);
}

}  // namespace redlock::chaos::plot_parts

#endif  // REDLOCK_CHAOS_PLOT_TIMELINE_PARTS_H_
