// common/svg.h: the one SVG writer of the project (no plotting dependency),
// used by the bench's charts (bench/plots.h) and the chaos harness's
// timelines (chaos/plot/plot.h).
//
// Output is a standalone, well-formed SVG 1.1 document: no script, no
// external font, image or stylesheet, so it opens in any browser and renders
// inside a README on a code host.
//
// Two levels:
//
//   - Document: shapes and text appended in paint order, with groups that
//     carry a class (for tests and stylers) and a tooltip (<title>).
//
//       redlock::svg::Document doc;
//       doc.Rect(10, 10, 80, 20, {.fill = "#1f77b4"}, "a hold");
//       doc.Text(10, 50, "c1", {.size = 12});
//       std::string text = doc.Render(400, 100, "example");
//
//   - LineChart: linear or logarithmic axes with round ticks, solid or
//     dashed series with markers, a legend and a title.
//
//       redlock::svg::LineChart chart;
//       chart.title = "acquire+release latency vs N";
//       chart.x = {.label = "N (nodes)"};
//       chart.y = {.label = "latency", .format = redlock::svg::FormatMicros};
//       chart.series.push_back({.name = "library p50", .color = "#1f77b4",
//                               .points = {{1, 40}, {3, 52}, {5, 60}}});
//       std::string text = redlock::svg::RenderLineChart(chart);
//
// Thread-safety: no shared state; a Document is not thread-safe.

#ifndef REDLOCK_COMMON_SVG_H_
#define REDLOCK_COMMON_SVG_H_

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace redlock::svg {

// ---- Text helpers ---------------------------------------------------------------

// Escapes &, <, >, " and ' for XML text and attributes; drops the control
// characters XML 1.0 does not allow.
std::string XmlEscape(absl::string_view text);

// A coordinate or length: at most 2 decimals, no trailing zeros ("12.5").
std::string Num(double v);

// Approximate width in pixels of `text` in a sans-serif font of `size`
// pixels (no font metrics are available to a writer with no dependency:
// 0.6 em per character, counted in UTF-8 code points; generous for most
// fonts).
double TextWidth(absl::string_view text, double size);

// `text`, cut (with "...") so that TextWidth() fits in `width`; "" when not
// even one character and the dots fit.
std::string FitText(absl::string_view text, double size, double width);

// Tick labels for values in microseconds: "50us", "1.5ms", "2s".
std::string FormatMicros(double us);

// ---- Axes --------------------------------------------------------------------------

// A round step (1, 2, 2.5 or 5 times a power of ten) that cuts `span` into
// about `target_ticks` pieces; 1 for an empty or invalid span.
double NiceStep(double span, int target_ticks);

// The multiples of NiceStep(hi - lo, target_ticks) within [lo, hi] (at most
// 64 of them).
std::vector<double> NiceTicks(double lo, double hi, int target_ticks);

// ---- Document ----------------------------------------------------------------------

// How a shape is painted; empty strings are not written (SVG defaults).
struct Paint {
  std::string fill = "none";
  std::string stroke;
  double stroke_width = 1;
  // 1 is not written.
  double opacity = 1;
  std::string dash;  // stroke-dasharray, e.g. "6 4"
};

struct Font {
  double size = 12;
  std::string fill = "#333";
  std::string anchor;  // "" (start), "middle", "end"
  bool bold = false;
  std::string transform;  // e.g. "rotate(-90 16 200)"
};

// A group: class (space-separated names), id, and a tooltip shown by
// browsers on hover (<title>). Empty fields are not written.
struct Group {
  std::string cls;
  std::string id;
  std::string tooltip;
};

class Document {
 public:
  void Rect(double x, double y, double w, double h, const Paint& paint,
            absl::string_view tooltip = "");
  void Line(double x1, double y1, double x2, double y2, const Paint& paint);
  void Polyline(const std::vector<std::pair<double, double>>& points, const Paint& paint);
  void Polygon(const std::vector<std::pair<double, double>>& points, const Paint& paint,
               absl::string_view tooltip = "");
  void Circle(double cx, double cy, double r, const Paint& paint);
  void Text(double x, double y, absl::string_view text, const Font& font = Font());

  // Everything appended until the matching Close() belongs to the group.
  void Open(const Group& group);
  void Close();

  // The whole document: XML declaration, <svg> with the size, a <title>, a
  // white background, the elements, and any group left open closed.
  std::string Render(int width, int height, absl::string_view title) const;

 private:
  std::string body_;
  int open_groups_ = 0;
};

// ---- Line charts ---------------------------------------------------------------------

struct Axis {
  std::string label;
  bool log = false;
  // Fixed ends; NaN means "from the data" (a linear y axis starts at 0).
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
  // Explicit ticks (e.g. the N values); empty: computed.
  std::vector<double> ticks;
  // Tick labels; default %g.
  std::function<std::string(double)> format;
};

struct Series {
  std::string name;
  std::string color = "#1f77b4";
  bool dashed = false;
  bool markers = true;
  // (x, y); non-finite values, and values <= 0 on a log axis, are skipped.
  std::vector<std::pair<double, double>> points;
};

struct LineChart {
  std::string title;
  std::string subtitle;
  Axis x;
  Axis y;
  std::vector<Series> series;
  int width = 800;
  int height = 480;
};

std::string RenderLineChart(const LineChart& chart);

}  // namespace redlock::svg

#endif  // REDLOCK_COMMON_SVG_H_
