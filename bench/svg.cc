#include "bench/svg.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace redlock::bench {

std::string XmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
        break;
    }
  }
  return out;
}

std::string FormatMicros(double us) {
  if (us < 1000) return absl::StrFormat("%gus", us);
  if (us < 1e6) return absl::StrFormat("%gms", us / 1e3);
  return absl::StrFormat("%gs", us / 1e6);
}

namespace {

struct Range {
  double lo = 0;
  double hi = 1;
};

double NiceStep(double span, int target_ticks) {
  if (!(span > 0)) return 1;
  const double raw = span / target_ticks;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double nice = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10;
  return nice * mag;
}

bool Usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

// The axis range and its ticks.
Range Resolve(const Axis& axis, const std::vector<double>& data, std::vector<double>* ticks) {
  double lo = INFINITY;
  double hi = -INFINITY;
  for (double v : data) {
    if (!Usable(v, axis.log)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  for (double t : axis.ticks) {
    if (!Usable(t, axis.log)) continue;
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  if (!std::isfinite(lo)) {
    lo = axis.log ? 1 : 0;
    hi = axis.log ? 10 : 1;
  }
  if (std::isfinite(axis.min)) lo = axis.min;
  if (std::isfinite(axis.max)) hi = axis.max;
  ticks->clear();
  if (axis.log) {
    double dlo = std::floor(std::log10(lo));
    double dhi = std::ceil(std::log10(hi));
    if (dhi <= dlo) dhi = dlo + 1;
    const bool fine = dhi - dlo <= 3;
    for (double d = dlo; d <= dhi && ticks->size() < 64; d += 1) {
      const double base = std::pow(10, d);
      for (double m : {1.0, 2.0, 5.0}) {
        if (!fine && m != 1.0) continue;
        const double t = base * m;
        if (t >= std::pow(10, dlo) * 0.999 && t <= std::pow(10, dhi) * 1.001) ticks->push_back(t);
      }
    }
    if (!axis.ticks.empty()) *ticks = axis.ticks;
    return Range{std::pow(10, dlo), std::pow(10, dhi)};
  }
  if (!std::isfinite(axis.min) && axis.ticks.empty()) lo = std::min(lo, 0.0);
  if (hi <= lo) hi = lo + 1;
  if (!axis.ticks.empty()) {
    *ticks = axis.ticks;
    const double pad = (hi - lo) * 0.04;
    return Range{lo - pad, hi + pad};
  }
  const double step = NiceStep(hi - lo, 5);
  const double top = std::ceil(hi / step) * step;
  const double bottom = std::floor(lo / step) * step;
  for (double t = bottom; t <= top + step * 1e-9 && ticks->size() < 64; t += step) {
    ticks->push_back(t);
  }
  return Range{bottom, top};
}

}  // namespace

std::string RenderSvg(const LineChart& chart) {
  // The legend sits right of the plot and is as wide as its longest name;
  // the chart grows rather than squeezing the plot.
  size_t longest = 0;
  for (const Series& s : chart.series) longest = std::max(longest, s.name.size());
  const double right = std::max(150.0, 60 + 7.0 * static_cast<double>(longest));
  const double left = 80, top = chart.subtitle.empty() ? 50 : 66, bottom = 56;
  const int width = std::max(chart.width, static_cast<int>(left + 440 + right));
  const double W = width;
  const double H = chart.height;
  const double pw = W - left - right;
  const double ph = H - top - bottom;

  std::vector<double> xs, ys;
  for (const Series& s : chart.series) {
    for (const auto& [x, y] : s.points) {
      if (Usable(x, chart.x.log) && Usable(y, chart.y.log)) {
        xs.push_back(x);
        ys.push_back(y);
      }
    }
  }
  std::vector<double> xticks, yticks;
  const Range xr = Resolve(chart.x, xs, &xticks);
  const Range yr = Resolve(chart.y, ys, &yticks);
  auto map = [](const Axis& a, const Range& r, double v, double origin, double span, bool flip) {
    double f = a.log ? (std::log10(v) - std::log10(r.lo)) / (std::log10(r.hi) - std::log10(r.lo))
                     : (v - r.lo) / (r.hi - r.lo);
    f = std::clamp(f, -0.05, 1.05);
    return flip ? origin + span - f * span : origin + f * span;
  };
  auto X = [&](double v) { return map(chart.x, xr, v, left, pw, false); };
  auto Y = [&](double v) { return map(chart.y, yr, v, top, ph, true); };
  auto fmt = [](const Axis& a, double v) {
    return a.format ? a.format(v) : absl::StrFormat("%g", v);
  };

  std::string o;
  absl::StrAppend(&o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  absl::StrAppendFormat(&o,
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
                        "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
                        "font-size=\"12\">\n",
                        width, chart.height, width, chart.height);
  absl::StrAppendFormat(&o, "<title>%s</title>\n", XmlEscape(chart.title));
  absl::StrAppendFormat(&o, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
                        width, chart.height);
  absl::StrAppendFormat(&o,
                        "<text x=\"%g\" y=\"24\" font-size=\"16\" font-weight=\"bold\">%s</text>\n",
                        left, XmlEscape(chart.title));
  if (!chart.subtitle.empty()) {
    absl::StrAppendFormat(&o, "<text x=\"%g\" y=\"44\" font-size=\"11\" fill=\"#555\">%s</text>\n",
                          left, XmlEscape(chart.subtitle));
  }
  // Grid and ticks.
  o += "<g stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  for (double t : yticks)
    absl::StrAppendFormat(&o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", left,
                          Y(t), left + pw, Y(t));
  for (double t : xticks)
    absl::StrAppendFormat(&o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", X(t),
                          top, X(t), top + ph);
  o += "</g>\n";
  absl::StrAppendFormat(&o,
                        "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
                        "stroke=\"#333\"/>\n",
                        left, top, pw, ph);
  o += "<g fill=\"#333\">\n";
  for (double t : yticks) {
    absl::StrAppendFormat(&o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                          left - 6, Y(t) + 4, XmlEscape(fmt(chart.y, t)));
  }
  for (double t : xticks) {
    absl::StrAppendFormat(&o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                          X(t), top + ph + 18, XmlEscape(fmt(chart.x, t)));
  }
  absl::StrAppendFormat(&o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                        left + pw / 2, H - 14, XmlEscape(chart.x.label));
  absl::StrAppendFormat(&o,
                        "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 16 %.1f)\">%s</text>\n",
                        top + ph / 2, top + ph / 2, XmlEscape(chart.y.label));
  o += "</g>\n";

  if (xs.empty()) {
    absl::StrAppendFormat(
        &o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#999\">no data</text>\n",
        left + pw / 2, top + ph / 2);
  }
  // Series.
  int legend_row = 0;
  for (const Series& s : chart.series) {
    std::string pts;
    std::string marks;
    for (const auto& [x, y] : s.points) {
      if (!Usable(x, chart.x.log) || !Usable(y, chart.y.log)) continue;
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(x), Y(y));
      if (s.markers) {
        absl::StrAppendFormat(&marks, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>", X(x), Y(y));
      }
    }
    if (pts.empty()) continue;
    absl::StrAppendFormat(&o, "<g><title>%s</title>\n", XmlEscape(s.name));
    absl::StrAppendFormat(
        &o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"%s\"/>\n",
        XmlEscape(s.color), s.dashed ? " stroke-dasharray=\"6 4\"" : "", pts);
    if (!marks.empty())
      absl::StrAppendFormat(&o, "<g fill=\"%s\">%s</g>\n", XmlEscape(s.color), marks);
    o += "</g>\n";
    const double ly = top + 8 + legend_row * 20;
    const double lx = left + pw + 16;
    absl::StrAppendFormat(&o,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"2\"%s/>\n",
                          lx, ly, lx + 28, ly, XmlEscape(s.color),
                          s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    absl::StrAppendFormat(&o, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 36, ly + 4,
                          XmlEscape(s.name));
    ++legend_row;
  }
  o += "</svg>\n";
  return o;
}

}  // namespace redlock::bench
