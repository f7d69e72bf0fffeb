// A small SVG line-chart writer (no plotting dependency): linear or
// logarithmic axes with round ticks, solid or dashed series with markers, a
// legend and a title. Output is a standalone, well-formed SVG 1.1 document.
//
//   LineChart chart;
//   chart.title = "acquire+release latency vs N";
//   chart.x = {.label = "N (nodes)"};
//   chart.y = {.label = "latency", .format = FormatMicros};
//   chart.series.push_back({.name = "library p50", .color = "#1f77b4",
//                           .points = {{1, 40}, {3, 52}, {5, 60}}});
//   std::string svg = RenderSvg(chart);

#ifndef REDLOCK_BENCH_SVG_H_
#define REDLOCK_BENCH_SVG_H_

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace redlock::bench {

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
  std::vector<std::pair<double, double>>
      points;  // (x, y); non-finite or <= 0 on a log axis are skipped
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

std::string RenderSvg(const LineChart& chart);

// Tick labels for values in microseconds: "50us", "1.5ms", "2s".
std::string FormatMicros(double us);

// Escapes &, <, >, " and ' for XML text and attributes.
std::string XmlEscape(const std::string& text);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_SVG_H_
