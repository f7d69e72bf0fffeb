#include "common/svg.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace redlock::svg {

std::string XmlEscape(absl::string_view text) {
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

std::string Num(double v) {
  if (!std::isfinite(v)) return "0";
  std::string s = absl::StrFormat("%.2f", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

namespace {

int64_t CodePoints(absl::string_view text) {
  int64_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

double TextWidth(absl::string_view text, double size) {
  return 0.6 * size * static_cast<double>(CodePoints(text));
}

std::string FitText(absl::string_view text, double size, double width) {
  if (TextWidth(text, size) <= width) return std::string(text);
  const int64_t room = static_cast<int64_t>(width / (0.6 * size)) - 3;
  if (room < 1) return "";
  // Cut at a code point boundary.
  size_t end = 0;
  for (int64_t n = 0; end < text.size() && n < room; ++n) {
    ++end;
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  }
  return absl::StrCat(text.substr(0, end), "...");
}

std::string FormatMicros(double us) {
  if (us < 1000) return absl::StrFormat("%gus", us);
  if (us < 1e6) return absl::StrFormat("%gms", us / 1e3);
  return absl::StrFormat("%gs", us / 1e6);
}

double NiceStep(double span, int target_ticks) {
  if (!(span > 0) || !std::isfinite(span) || target_ticks < 1) return 1;
  const double raw = span / target_ticks;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double nice = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10;
  return nice * mag;
}

std::vector<double> NiceTicks(double lo, double hi, int target_ticks) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return ticks;
  const double step = NiceStep(hi - lo, target_ticks);
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9 && ticks.size() < 64;
       t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

// ---- Document ----------------------------------------------------------------------

namespace {

std::string PaintAttrs(const Paint& p) {
  std::string out = absl::StrCat(" fill=\"", XmlEscape(p.fill.empty() ? "none" : p.fill), "\"");
  if (!p.stroke.empty()) {
    absl::StrAppend(&out, " stroke=\"", XmlEscape(p.stroke), "\" stroke-width=\"",
                    Num(p.stroke_width), "\"");
    if (!p.dash.empty()) absl::StrAppend(&out, " stroke-dasharray=\"", XmlEscape(p.dash), "\"");
  }
  if (p.opacity < 1) absl::StrAppend(&out, " opacity=\"", Num(std::max(0.0, p.opacity)), "\"");
  return out;
}

std::string Points(const std::vector<std::pair<double, double>>& points) {
  std::string out;
  for (const auto& [x, y] : points) {
    if (!out.empty()) out += ' ';
    absl::StrAppend(&out, Num(x), ",", Num(y));
  }
  return out;
}

std::string Tooltip(absl::string_view tooltip) {
  return tooltip.empty() ? std::string() : absl::StrCat("<title>", XmlEscape(tooltip), "</title>");
}

// A shape element: self-closing, or with a <title> child.
std::string Shape(absl::string_view open, absl::string_view name, absl::string_view tooltip) {
  if (tooltip.empty()) return absl::StrCat(open, "/>\n");
  return absl::StrCat(open, ">", Tooltip(tooltip), "</", name, ">\n");
}

}  // namespace

void Document::Rect(double x, double y, double w, double h, const Paint& paint,
                    absl::string_view tooltip) {
  absl::StrAppend(&body_, Shape(absl::StrCat("<rect x=\"", Num(x), "\" y=\"", Num(y), "\" width=\"",
                                             Num(std::max(0.0, w)), "\" height=\"",
                                             Num(std::max(0.0, h)), "\"", PaintAttrs(paint)),
                                "rect", tooltip));
}

void Document::Line(double x1, double y1, double x2, double y2, const Paint& paint) {
  absl::StrAppend(&body_, "<line x1=\"", Num(x1), "\" y1=\"", Num(y1), "\" x2=\"", Num(x2),
                  "\" y2=\"", Num(y2), "\"", PaintAttrs(paint), "/>\n");
}

void Document::Polyline(const std::vector<std::pair<double, double>>& points, const Paint& paint) {
  if (points.empty()) return;
  absl::StrAppend(&body_, "<polyline points=\"", Points(points), "\"", PaintAttrs(paint), "/>\n");
}

void Document::Polygon(const std::vector<std::pair<double, double>>& points, const Paint& paint,
                       absl::string_view tooltip) {
  if (points.empty()) return;
  absl::StrAppend(&body_,
                  Shape(absl::StrCat("<polygon points=\"", Points(points), "\"", PaintAttrs(paint)),
                        "polygon", tooltip));
}

void Document::Circle(double cx, double cy, double r, const Paint& paint) {
  absl::StrAppend(&body_, "<circle cx=\"", Num(cx), "\" cy=\"", Num(cy), "\" r=\"",
                  Num(std::max(0.0, r)), "\"", PaintAttrs(paint), "/>\n");
}

void Document::Text(double x, double y, absl::string_view text, const Font& font) {
  absl::StrAppend(&body_, "<text x=\"", Num(x), "\" y=\"", Num(y), "\" font-size=\"",
                  Num(font.size), "\" fill=\"", XmlEscape(font.fill), "\"");
  if (!font.anchor.empty()) absl::StrAppend(&body_, " text-anchor=\"", font.anchor, "\"");
  if (font.bold) body_ += " font-weight=\"bold\"";
  if (!font.transform.empty()) {
    absl::StrAppend(&body_, " transform=\"", XmlEscape(font.transform), "\"");
  }
  absl::StrAppend(&body_, ">", XmlEscape(text), "</text>\n");
}

void Document::Open(const Group& group) {
  body_ += "<g";
  if (!group.cls.empty()) absl::StrAppend(&body_, " class=\"", XmlEscape(group.cls), "\"");
  if (!group.id.empty()) absl::StrAppend(&body_, " id=\"", XmlEscape(group.id), "\"");
  absl::StrAppend(&body_, ">", Tooltip(group.tooltip), "\n");
  ++open_groups_;
}

void Document::Close() {
  if (open_groups_ == 0) return;
  body_ += "</g>\n";
  --open_groups_;
}

std::string Document::Render(int width, int height, absl::string_view title) const {
  std::string o;
  absl::StrAppend(&o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  absl::StrAppendFormat(&o,
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
                        "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
                        "font-size=\"12\">\n",
                        width, height, width, height);
  absl::StrAppend(&o, "<title>", XmlEscape(title), "</title>\n");
  absl::StrAppendFormat(&o, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
                        width, height);
  o += body_;
  for (int i = 0; i < open_groups_; ++i) o += "</g>\n";
  o += "</svg>\n";
  return o;
}

// ---- Line charts ---------------------------------------------------------------------

namespace {

struct Range {
  double lo = 0;
  double hi = 1;
};

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
  *ticks = NiceTicks(bottom, top, 5);
  return Range{bottom, top};
}

}  // namespace

std::string RenderLineChart(const LineChart& chart) {
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

  Document doc;
  doc.Text(left, 24, chart.title, {.size = 16, .fill = "black", .bold = true});
  if (!chart.subtitle.empty()) doc.Text(left, 44, chart.subtitle, {.size = 11, .fill = "#555"});
  // Grid and ticks.
  const Paint grid{.stroke = "#e0e0e0"};
  for (double t : yticks) doc.Line(left, Y(t), left + pw, Y(t), grid);
  for (double t : xticks) doc.Line(X(t), top, X(t), top + ph, grid);
  doc.Rect(left, top, pw, ph, {.stroke = "#333"});
  for (double t : yticks) doc.Text(left - 6, Y(t) + 4, fmt(chart.y, t), {.anchor = "end"});
  for (double t : xticks) doc.Text(X(t), top + ph + 18, fmt(chart.x, t), {.anchor = "middle"});
  doc.Text(left + pw / 2, H - 14, chart.x.label, {.anchor = "middle"});
  doc.Text(
      16, top + ph / 2, chart.y.label,
      {.anchor = "middle", .transform = absl::StrCat("rotate(-90 16 ", Num(top + ph / 2), ")")});
  if (xs.empty()) {
    doc.Text(left + pw / 2, top + ph / 2, "no data", {.fill = "#999", .anchor = "middle"});
  }
  // Series.
  int legend_row = 0;
  for (const Series& s : chart.series) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& [x, y] : s.points) {
      if (Usable(x, chart.x.log) && Usable(y, chart.y.log)) pts.emplace_back(X(x), Y(y));
    }
    if (pts.empty()) continue;
    const Paint line{.stroke = s.color, .stroke_width = 2, .dash = s.dashed ? "6 4" : ""};
    doc.Open({.cls = "series", .tooltip = s.name});
    doc.Polyline(pts, line);
    if (s.markers) {
      for (const auto& [x, y] : pts) doc.Circle(x, y, 3, {.fill = s.color});
    }
    doc.Close();
    const double ly = top + 8 + legend_row * 20;
    const double lx = left + pw + 16;
    doc.Line(lx, ly, lx + 28, ly, line);
    doc.Text(lx + 36, ly + 4, s.name);
    ++legend_row;
  }
  return doc.Render(width, chart.height, chart.title);
}

}  // namespace redlock::svg
