#include "chaos/plot/plot.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chaos/plot/timeline_parts.h"
#include "common/svg.h"

namespace redlock::chaos {
namespace {

using svg::Document;
using svg::FitText;
using svg::Font;
using svg::Paint;
using svg::TextWidth;

using namespace plot_parts;  // NOLINT: the picture's own parts

class Timeline {
 public:
  Timeline(const std::vector<Event>& history, const CheckResult& check,
           const TimelineOptions& options)
      : history_(history), check_(check), options_(options) {}

  std::string Render() {
    FindRun();
    BuildAxis();
    BuildLanes();
    PlaceFaults();
    Layout();
    DrawHeader();
    DrawLanes();
    DrawGrid();
    DrawFaults();
    DrawViolationBands();
    DrawClients();
    DrawViolations();
    DrawAxis();
    DrawLegend();
    return doc_.Render(static_cast<int>(std::ceil(kLeft + axis_.width + kRight)),
                       static_cast<int>(std::ceil(height_)), title_);
  }

 private:
  // ---- Facts --------------------------------------------------------------------------

  void FindRun() {
    for (const Event& e : history_) {
      if (e.type == EventType::kRun) run_ = &e;
      if (e.type == EventType::kFail) outcomes_seen_.insert(OutcomeOf(e.code));
      if (e.type == EventType::kUse && !e.accepted) ++refused_;
    }
    if (outcomes_seen_.empty()) outcomes_seen_.insert(0);
    size_t row = 0;
    for (size_t o : outcomes_seen_) outcome_row_[o] = row++;
    std::set<std::string> resources;
    for (const GrantInfo& g : check_.grants) resources.insert(g.resource);
    for (const std::string& r : resources) {
      const size_t i = resource_color_.size();
      resource_color_[r] = kResourceColor[i % kResourceColor.size()];
    }
  }

  void BuildAxis() {
    int64_t lo = std::numeric_limits<int64_t>::max();
    int64_t hi = std::numeric_limits<int64_t>::min();
    auto take = [&](int64_t t) {
      lo = std::min(lo, t);
      hi = std::max(hi, t);
    };
    for (const Event& e : history_) {
      switch (e.type) {
        case EventType::kInvoke:
        case EventType::kGrant:
        case EventType::kFail:
          take(e.t);
          break;
        case EventType::kUse:
        case EventType::kRelease:
          take(e.t);
          take(e.end);
          break;
        case EventType::kNemesis:
          // Heals after the clients stopped would only stretch the picture.
          if (e.phase != FaultPhase::kStop) take(e.t);
          break;
        default:
          break;
      }
    }
    for (const GrantInfo& g : check_.grants) take(g.hold_end);
    if (lo > hi) lo = hi = run_ != nullptr ? run_->start : 0;
    const int64_t span = std::max<int64_t>(hi - lo, 1000000);
    // A margin on both sides, so that what happens first or last is not
    // drawn on the frame.
    axis_.d0 = lo - span / 100;
    axis_.d1 = lo + span + span / 100;
    axis_.origin = run_ != nullptr ? run_->start : lo;
    axis_.width = std::max(300, options_.plot_width);
  }

  Lane* LaneOf(const std::string& name) {
    auto it = lane_index_.find(name);
    return it == lane_index_.end() ? nullptr : &lanes_[it->second];
  }

  void BuildLanes() {
    std::vector<std::string> clients;
    std::set<int> nodes;
    if (run_ != nullptr) {
      clients = run_->clients;
      nodes.insert(run_->nodes.begin(), run_->nodes.end());
    }
    std::set<std::string> seen(clients.begin(), clients.end());
    std::vector<std::string> more;
    for (const Event& e : history_) {
      const bool client_event = e.type == EventType::kInvoke || e.type == EventType::kGrant ||
                                e.type == EventType::kFail || e.type == EventType::kUse ||
                                e.type == EventType::kRelease;
      if (client_event && !e.process.empty() && seen.insert(e.process).second) {
        more.push_back(e.process);
      }
      if (e.type == EventType::kNemesis) {
        for (const std::string& c : e.clients) {
          if (seen.insert(c).second) more.push_back(c);
        }
      }
      if (e.type == EventType::kGrant || e.type == EventType::kNemesis) {
        for (int n : e.nodes) {
          if (n >= 0 && n < 4096) nodes.insert(n);
        }
      }
    }
    std::sort(more.begin(), more.end(), NaturalLess);
    clients.insert(clients.end(), more.begin(), more.end());
    for (const std::string& c : clients) {
      lane_index_[c] = lanes_.size();
      lanes_.push_back({.kind = Lane::Kind::kClient, .name = c});
    }
    for (int n : nodes) {
      const std::string name = absl::StrCat("n", n);
      lane_index_[name] = lanes_.size();
      lanes_.push_back({.kind = Lane::Kind::kNode, .name = name});
    }
    bool other = false;
    for (const FaultInfo& f : check_.faults) other = other || FaultLanes(f).empty();
    if (other) {
      lane_index_[kOtherLane] = lanes_.size();
      lanes_.push_back({.kind = Lane::Kind::kOther, .name = kOtherLane});
    }
  }

  // The lanes a fault is drawn on (empty: the "nemesis" lane).
  std::vector<size_t> FaultLanes(const FaultInfo& f) const {
    std::vector<size_t> out;
    for (int n : f.nodes) {
      auto it = lane_index_.find(absl::StrCat("n", n));
      if (it != lane_index_.end()) out.push_back(it->second);
    }
    for (const std::string& c : f.clients) {
      auto it = lane_index_.find(c);
      if (it != lane_index_.end()) out.push_back(it->second);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  void PlaceFaults() {
    std::vector<RowPacker> packers(lanes_.size(), RowPacker(kMaxFaultRows));
    for (const FaultInfo& f : check_.faults) {
      std::vector<size_t> lanes = FaultLanes(f);
      if (lanes.empty()) lanes.push_back(lane_index_.at(kOtherLane));
      PlacedFault p;
      p.fault = &f;
      p.x0 = axis_.X(f.t);
      const bool lasting = f.phase == FaultPhase::kStart;
      p.x1 = lasting ? axis_.X(f.stop.value_or(axis_.d1)) : p.x0;
      // A label may run past a short band, never past a long one.
      p.label = FitText(Describe(f), kFont, std::max(kMaxLabel, p.x1 - p.x0 - 6));
      const double text_end = (lasting ? p.x0 + 3 : p.x0 + 6) + TextWidth(p.label, kFont);
      for (size_t l : lanes) {
        p.row = packers[l].PlaceAnyway(lasting ? p.x0 : p.x0 - 4, std::max(p.x1 + 2, text_end));
        lanes_[l].faults.push_back(p);
      }
    }
    for (size_t l = 0; l < lanes_.size(); ++l) lanes_[l].fault_rows = packers[l].rows();
  }

  void Layout() {
    double y = 18;
    header_y_ = y;
    y += 3 * 18 + (run_ != nullptr && !run_->why.empty() ? 18 : 0);
    // The violation labels.
    strip_y_ = y + 4;
    RowPacker packer(kMaxLabelRows);
    std::map<Property, int> numbers;
    for (const Violation& v : check_.violations) {
      const double x = axis_.X(v.t);
      labels_.push_back(absl::StrCat(PropertyName(v.property), " #", ++numbers[v.property]));
      label_row_.push_back(packer.Place(x - 2, x + TextWidth(labels_.back(), kFont) + 2));
    }
    y = strip_y_ + std::max(1, packer.rows()) * kRowH + 4;
    lanes_y_ = y;
    for (Lane& lane : lanes_) {
      lane.y = y;
      double inner = lane.fault_rows * kRowH;
      if (lane.kind == Lane::Kind::kClient) {
        lane.hold_y = y + kLanePad + inner;
        lane.tick_y = lane.hold_y + kHoldH + 2;
        inner += kHoldH + 2 + static_cast<double>(outcome_row_.size()) * kTickH;
      } else {
        inner = std::max(inner, kRowH);
      }
      lane.h = inner + 2 * kLanePad;
      y += lane.h;
    }
    lanes_end_ = y;
    axis_y_ = y;
    legend_y_ = y + 44;
    height_ = legend_y_ + LegendHeight() + 10;
  }

  // ---- Drawing ----------------------------------------------------------------------

  void DrawHeader() {
    const std::string scenario = run_ != nullptr && !run_->scenario.empty() ? run_->scenario : "";
    title_ = scenario.empty() ? options_.title : scenario;
    const double x = 8;
    double y = header_y_ + 6;
    doc_.Text(x, y, title_, {.size = 16, .fill = "black", .bold = true});
    if (run_ != nullptr && !run_->verdict.empty()) {
      const bool ok = run_->verdict == "OK";
      // Bold text is wider than TextWidth's estimate.
      const double vx = x + TextWidth(title_, 16) * 1.15 + 16;
      const std::string verdict = absl::StrCat("verdict ", run_->verdict);
      doc_.Text(vx, y, verdict, {.size = 16, .fill = ok ? "#2ca02c" : "#d62728", .bold = true});
      doc_.Text(vx + TextWidth(verdict, 16) + 12, y,
                absl::StrCat("expected: ", run_->expected.empty() ? "?" : run_->expected),
                {.size = 14, .fill = "#333"});
      absl::StrAppend(&title_, ": verdict ", run_->verdict, ", expected ", run_->expected);
    }
    y += 20;
    std::string setup;
    if (run_ != nullptr) {
      setup = absl::StrCat("seed ", run_->seed, "  |  ", run_->config);
    } else {
      setup = "no run record: a hand-made or partial history";
    }
    doc_.Text(x, y, setup, {.size = 12});
    y += 18;
    std::vector<std::string> found;
    for (int p = 0; p < kNumProperties; ++p) {
      found.push_back(absl::StrCat(PropertyName(static_cast<Property>(p)), " ",
                                   check_.violation_counts[static_cast<size_t>(p)]));
    }
    if (run_ != nullptr && run_->violations.size() > 4) {
      found.push_back(absl::StrCat("S5 ", run_->violations[4]));
    }
    const CheckCounts& c = check_.counts;
    std::string counts =
        absl::StrCat("violations found: ", absl::StrJoin(found, ", "), "  |  ", c.invokes,
                     " attempts, ", c.grants, " grants, ", c.fails, " failed, ", c.uses, " uses, ",
                     c.rejected_writes, " writes refused, ", c.nemesis, " nemesis events");
    int64_t kept = static_cast<int64_t>(check_.violations.size());
    if (kept < check_.total_violations()) {
      absl::StrAppend(&counts, "  |  ", kept, " of ", check_.total_violations(),
                      " violations drawn (the checker kept no more)");
    }
    doc_.Text(x, y, counts, {.size = 12});
    if (run_ != nullptr && !run_->why.empty()) {
      y += 18;
      doc_.Text(x, y, FitText(absl::StrCat("why: ", run_->why), 12, kLeft + axis_.width),
                {.size = 12, .fill = "#d62728"});
    }
  }

  void DrawLanes() {
    doc_.Text(8, strip_y_ + 11, "violations", {.size = 11, .fill = "#555"});
    if (check_.violations.empty()) {
      doc_.Text(kLeft + 4, strip_y_ + 11, "none found", {.size = kFont, .fill = "#999"});
    }
    for (size_t i = 0; i < lanes_.size(); ++i) {
      const Lane& lane = lanes_[i];
      if (i % 2 == 0) {
        doc_.Rect(0, lane.y, kLeft + axis_.width, lane.h, {.fill = "#f4f4f4"});
      }
      if (i > 0 && lane.kind != lanes_[i - 1].kind) {
        doc_.Line(0, lane.y, kLeft + axis_.width, lane.y, {.stroke = "#999"});
      }
      const char* sub = lane.kind == Lane::Kind::kClient ? "client"
                        : lane.kind == Lane::Kind::kNode ? "node"
                                                         : "no site";
      doc_.Text(8, lane.y + kLanePad + 11, lane.name, {.size = 12, .fill = "black", .bold = true});
      doc_.Text(8 + TextWidth(lane.name, 12) + 6, lane.y + kLanePad + 11, sub,
                {.size = kFont, .fill = "#777"});
    }
  }

  void DrawGrid() {
    for (double ms : svg::NiceTicks(axis_.Ms(axis_.d0), axis_.Ms(axis_.d1), 12)) {
      const double x = XOfMs(ms);
      doc_.Line(x, lanes_y_, x, lanes_end_, {.stroke = "#dddddd"});
    }
  }

  double XOfMs(double ms) const {
    return axis_.X(axis_.origin + static_cast<int64_t>(std::llround(ms * 1e6)));
  }

  // Each lane's group, opened and closed once around everything drawn in it.
  void OpenLane(const Lane& lane) {
    doc_.Open({.cls = lane.kind == Lane::Kind::kClient ? "lane client"
                      : lane.kind == Lane::Kind::kNode ? "lane node"
                                                       : "lane other",
               .id = absl::StrCat("lane-", lane.name)});
  }

  void DrawFaults() {
    size_t instants = 0;
    for (const FaultInfo& f : check_.faults) instants += f.phase == FaultPhase::kInstant;
    for (const Lane& lane : lanes_) {
      if (lane.kind == Lane::Kind::kClient) continue;  // with the client's activity
      OpenLane(lane);
      DrawLaneFaults(lane);
      doc_.Close();
    }
    // Guides: where an instant fault happened, across every lane.
    if (instants <= kMaxGuides) {
      for (const FaultInfo& f : check_.faults) {
        if (f.phase != FaultPhase::kInstant) continue;
        const double x = axis_.X(f.t);
        doc_.Line(x, lanes_y_, x, lanes_end_,
                  {.stroke = FaultColor(f), .opacity = 0.6, .dash = "3 3"});
      }
    }
  }

  void DrawLaneFaults(const Lane& lane) {
    const double top = lane.y + kLanePad;
    for (const PlacedFault& p : lane.faults) {
      const FaultInfo& f = *p.fault;
      const std::string color = FaultColor(f);
      const double y = top + p.row * kRowH;
      std::string tip = absl::StrCat(Describe(f), " on ", lane.name, "; ");
      doc_.Open({.cls = "fault"});
      if (f.phase == FaultPhase::kStart) {
        absl::StrAppend(&tip, "from ", axis_.MsText(f.t), " to ",
                        f.stop.has_value() ? axis_.MsText(*f.stop) : "the end (never stopped)");
        if (lane.kind == Lane::Kind::kClient && f.nodes.empty()) {
          // A fault of the client alone (a pause) tints its whole lane, so
          // the holds it interrupts show through it.
          doc_.Rect(p.x0, lane.y, std::max(p.x1 - p.x0, 2.0), lane.h,
                    {.fill = color, .opacity = 0.15});
        }
        doc_.Rect(p.x0, y + 1, std::max(p.x1 - p.x0, 2.0), kRowH - 2,
                  {.fill = color, .stroke = color, .opacity = 0.45}, tip);
        doc_.Text(p.x0 + 3, y + 11, p.label, {.size = kFont, .fill = "black"});
      } else {
        absl::StrAppend(&tip, "at ", axis_.MsText(f.t));
        doc_.Polygon({{p.x0, y + 1},
                      {p.x0 + 4, y + kRowH / 2},
                      {p.x0, y + kRowH - 1},
                      {p.x0 - 4, y + kRowH / 2}},
                     {.fill = color, .stroke = "black", .stroke_width = 0.5}, tip);
        doc_.Text(p.x0 + 6, y + 11, p.label, {.size = kFont, .fill = "black"});
      }
      doc_.Close();
    }
  }

  void DrawClients() {
    // Activity by lane.
    std::map<std::string, std::vector<const GrantInfo*>> grants;
    for (const GrantInfo& g : check_.grants) grants[g.process].push_back(&g);
    std::map<std::string, std::vector<const Event*>> uses, fails;
    for (const Event& e : history_) {
      if (e.type == EventType::kUse) uses[e.process].push_back(&e);
      if (e.type == EventType::kFail) fails[e.process].push_back(&e);
    }
    for (const Lane& lane : lanes_) {
      if (lane.kind != Lane::Kind::kClient) continue;
      OpenLane(lane);
      DrawLaneFaults(lane);
      for (const GrantInfo* g : grants[lane.name]) DrawHold(lane, *g);
      for (const Event* u : uses[lane.name]) DrawUse(lane, *u);
      DrawTicks(lane, fails[lane.name]);
      doc_.Close();
    }
  }

  void DrawHold(const Lane& lane, const GrantInfo& g) {
    const std::string color = resource_color_[g.resource];
    const double x0 = axis_.X(g.granted);
    const int64_t valid_end = std::clamp(g.valid_until, g.granted, g.hold_end);
    const double xv = axis_.X(valid_end);
    const double x1 = axis_.X(g.hold_end);
    const double y = lane.hold_y;
    std::string tip = absl::StrCat(g.process, " op ", g.op, " holds ", g.resource, " from ",
                                   axis_.MsText(g.granted), " to ", axis_.MsText(g.hold_end),
                                   "; valid until ", axis_.MsText(g.valid_until));
    if (g.released.has_value()) absl::StrAppend(&tip, "; released ", axis_.MsText(*g.released));
    if (g.fencing_token.has_value()) absl::StrAppend(&tip, "; fencing token ", *g.fencing_token);
    absl::StrAppend(&tip, "; ", g.uses, " use(s)");
    if (!g.nodes.empty()) absl::StrAppend(&tip, "; nodes ", absl::StrJoin(g.nodes, ","));
    doc_.Open({.cls = "hold", .tooltip = tip});
    doc_.Rect(x0, y, std::max(xv - x0, 1.0), kHoldH, {.fill = color});
    if (x1 > xv) {
      // Held past its validity (paused or slow): S2 territory.
      doc_.Rect(xv, y + 2, x1 - xv, kHoldH - 4,
                {.fill = color, .stroke = kViolationColor[1], .opacity = 0.5, .dash = "3 2"});
    }
    if (g.fencing_token.has_value()) {
      const std::string text = absl::StrCat("#", *g.fencing_token);
      if (TextWidth(text, kFont) + 4 <= xv - x0) {
        doc_.Text(x0 + 2, y + 11, text, {.size = kFont, .fill = "white", .bold = true});
      }
    }
    doc_.Close();
  }

  void DrawUse(const Lane& lane, const Event& u) {
    const double x0 = axis_.X(u.begin);
    const double x1 = axis_.X(u.end);
    const double y = lane.hold_y + kHoldH - 4;
    doc_.Rect(x0, y, std::max(x1 - x0, 1.0), 3, {.fill = "black", .opacity = 0.45});
    if (u.accepted) return;
    std::string tip = absl::StrCat(
        u.process, " op ", u.op, ": write refused at ", axis_.MsText(u.end),
        " (stale fencing token",
        u.fencing_token.has_value() ? absl::StrCat(" ", *u.fencing_token) : std::string(), ")");
    doc_.Open({.cls = "refused", .tooltip = tip});
    const double cy = lane.hold_y + kHoldH / 2;
    const Paint cross{.stroke = "black", .stroke_width = 2};
    doc_.Line(x1 - 4, cy - 4, x1 + 4, cy + 4, cross);
    doc_.Line(x1 - 4, cy + 4, x1 + 4, cy - 4, cross);
    doc_.Close();
  }

  void DrawTicks(const Lane& lane, const std::vector<const Event*>& fails) {
    // (outcome, bin) -> count, first and last t.
    struct Bin {
      int64_t count = 0;
      int64_t first = 0;
      int64_t last = 0;
    };
    std::map<std::pair<size_t, int64_t>, Bin> bins;
    for (const Event* e : fails) {
      const int64_t b = static_cast<int64_t>((axis_.X(e->t) - kLeft) / kBin);
      Bin& bin = bins[{OutcomeOf(e->code), b}];
      if (bin.count++ == 0) bin.first = e->t;
      bin.last = e->t;
    }
    for (const auto& [key, bin] : bins) {
      const Outcome& o = kOutcomes[key.first];
      const double x = kLeft + static_cast<double>(key.second) * kBin;
      const double y = lane.tick_y + static_cast<double>(outcome_row_[key.first]) * kTickH;
      std::string tip =
          bin.count == 1
              ? absl::StrCat(lane.name, ": 1 attempt ", o.label, " at ", axis_.MsText(bin.first))
              : absl::StrCat(lane.name, ": ", bin.count, " attempts ", o.label, " from ",
                             axis_.MsText(bin.first), " to ", axis_.MsText(bin.last));
      doc_.Rect(x, y, kBin * 0.75, kTickH - 1,
                {.fill = o.color, .opacity = bin.count > 1 ? 1.0 : 0.7}, tip);
    }
  }

  // The lanes of the processes a violation involves (sorted, unique).
  std::vector<size_t> ViolationLanes(const Violation& v) const {
    std::vector<size_t> out;
    for (const GrantInfo& g : v.grants) {
      auto it = lane_index_.find(g.process);
      if (it != lane_index_.end()) out.push_back(it->second);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // Where a violation is drawn: at least 3 pixels wide, so that a tiny
  // overlap stays visible.
  std::pair<double, double> Span(const Violation& v) const {
    const double x0 = axis_.X(v.t);
    const double x1 = axis_.X(std::max(v.t, v.t_end));
    if (x1 - x0 >= 3) return {x0, x1};
    const double mid = (x0 + x1) / 2;
    return {mid - 1.5, mid + 1.5};
  }

  // The tinted band across the lanes of each violation, behind the holds so
  // that they keep their colours.
  void DrawViolationBands() {
    for (const Violation& v : check_.violations) {
      const std::vector<size_t> lanes = ViolationLanes(v);
      if (lanes.empty()) continue;
      const auto [x0, x1] = Span(v);
      const double top = lanes_[lanes.front()].y;
      const double bottom = lanes_[lanes.back()].y + lanes_[lanes.back()].h;
      doc_.Rect(x0, top, x1 - x0, bottom - top,
                {.fill = kViolationColor[static_cast<size_t>(v.property)], .opacity = 0.3});
    }
  }

  void DrawViolations() {
    for (size_t i = 0; i < check_.violations.size(); ++i) {
      const Violation& v = check_.violations[i];
      const std::string color = kViolationColor[static_cast<size_t>(v.property)];
      const std::string& label = labels_[i];
      const auto [x0, x1] = Span(v);
      std::vector<size_t> lanes = ViolationLanes(v);
      doc_.Open({.cls = absl::StrCat("violation ", PropertyName(v.property)),
                 .tooltip = absl::StrCat(label, " (", v.resource, ", ", axis_.MsText(v.t), " to ",
                                         axis_.MsText(v.t_end), "): ", v.description)});
      if (lanes.empty()) {
        // Nothing to point at (a final counter mismatch): a bar under the
        // labels.
        doc_.Rect(x0, lanes_y_ - 5, x1 - x0, 3, {.fill = color});
      } else {
        const double top = lanes_[lanes.front()].y;
        for (size_t l : lanes) {
          // A bracket on each lane involved, so a band crossing other lanes
          // still says which ones.
          const Lane& lane = lanes_[l];
          doc_.Rect(x0, lane.y + 1, x1 - x0, lane.h - 2, {.stroke = color, .stroke_width = 2.5});
        }
        doc_.Line(x0, strip_y_ + kRowH, x0, top, {.stroke = color, .dash = "2 2"});
      }
      const int row = label_row_[i];
      if (row >= 0) {
        doc_.Text(x0, strip_y_ + row * kRowH + 11, label,
                  {.size = kFont, .fill = color, .bold = true});
      }
      doc_.Close();
    }
  }

  void DrawAxis() {
    const double y = axis_y_;
    doc_.Line(kLeft, y, kLeft + axis_.width, y, {.stroke = "#333"});
    for (double ms : svg::NiceTicks(axis_.Ms(axis_.d0), axis_.Ms(axis_.d1), 12)) {
      const double x = XOfMs(ms);
      doc_.Line(x, y, x, y + 5, {.stroke = "#333"});
      doc_.Text(x, y + 17, absl::StrFormat("%g", ms), {.size = kFont, .anchor = "middle"});
    }
    doc_.Text(kLeft + axis_.width / 2, y + 33,
              "ms since the scenario started (raw monotonic host clock)",
              {.size = 11, .anchor = "middle"});
  }

  struct LegendItem {
    enum class Mark { kBox, kFaint, kTick, kCross, kDiamond, kBand };
    Mark mark;
    std::string color;
    std::string text;
  };

  std::vector<LegendItem> LegendItems() const {
    using M = LegendItem::Mark;
    std::vector<LegendItem> items;
    bool fenced = false;
    for (const GrantInfo& g : check_.grants) fenced = fenced || g.fencing_token.has_value();
    for (const auto& [resource, color] : resource_color_) {
      items.push_back(
          {M::kBox, color, absl::StrCat("hold of ", resource, fenced ? " (#fencing token)" : "")});
    }
    items.push_back({M::kFaint, kViolationColor[1], "held past its validity"});
    items.push_back({M::kBox, "#777777", "use (critical section)"});
    if (refused_ > 0) items.push_back({M::kCross, "black", "write refused (stale token)"});
    for (size_t o : outcomes_seen_) {
      items.push_back({M::kTick, kOutcomes[o].color, kOutcomes[o].label});
    }
    std::set<std::string> kinds;
    for (const FaultInfo& f : check_.faults) {
      if (kinds.insert(f.fault).second) {
        items.push_back(
            {f.phase == FaultPhase::kInstant ? M::kDiamond : M::kBand, FaultColor(f), f.fault});
      }
    }
    for (int p = 0; p < kNumProperties; ++p) {
      items.push_back({M::kBand, kViolationColor[static_cast<size_t>(p)],
                       absl::StrCat(PropertyName(static_cast<Property>(p)), " ",
                                    PropertyTitle(static_cast<Property>(p)))});
    }
    return items;
  }

  // Items flow left to right and wrap; the same walk measures and draws.
  template <typename F>
  double WalkLegend(F&& each) const {
    double x = kLeft, row = 0;
    for (const LegendItem& item : LegendItems()) {
      const double w = 22 + TextWidth(item.text, kFont) + 14;
      if (x + w > kLeft + axis_.width && x > kLeft) {
        x = kLeft;
        ++row;
      }
      each(item, x, legend_y_ + row * 18);
      x += w;
    }
    return (row + 1) * 18;
  }

  double LegendHeight() const {
    return WalkLegend([](const LegendItem&, double, double) {});
  }

  void DrawLegend() {
    using M = LegendItem::Mark;
    doc_.Text(8, legend_y_ + 10, "legend", {.size = 11, .fill = "#555"});
    WalkLegend([this](const LegendItem& item, double x, double y) {
      switch (item.mark) {
        case M::kBox:
          doc_.Rect(x, y + 1, 16, 10, {.fill = item.color});
          break;
        case M::kFaint:
          doc_.Rect(x, y + 2, 16, 8,
                    {.fill = "#4c78a8", .stroke = item.color, .opacity = 0.5, .dash = "3 2"});
          break;
        case M::kTick:
          for (int i = 0; i < 4; ++i) doc_.Rect(x + i * 4, y + 3, 1.5, 6, {.fill = item.color});
          break;
        case M::kCross:
          doc_.Line(x + 4, y + 2, x + 12, y + 10, {.stroke = item.color, .stroke_width = 2});
          doc_.Line(x + 4, y + 10, x + 12, y + 2, {.stroke = item.color, .stroke_width = 2});
          break;
        case M::kDiamond:
          doc_.Polygon({{x + 8, y}, {x + 12, y + 6}, {x + 8, y + 12}, {x + 4, y + 6}},
                       {.fill = item.color, .stroke = "black", .stroke_width = 0.5});
          break;
        case M::kBand:
          doc_.Rect(x, y + 1, 16, 10, {.fill = item.color, .stroke = item.color, .opacity = 0.5});
          break;
      }
      doc_.Text(x + 22, y + 10, item.text, {.size = kFont});
    });
  }

  static constexpr char kOtherLane[] = "nemesis";

  const std::vector<Event>& history_;
  const CheckResult& check_;
  const TimelineOptions& options_;
  Document doc_;
  std::string title_;
  const Event* run_ = nullptr;
  TimeAxis axis_;
  std::vector<Lane> lanes_;
  std::map<std::string, size_t> lane_index_;
  std::set<size_t> outcomes_seen_;
  std::map<size_t, size_t> outcome_row_;
  std::map<std::string, std::string> resource_color_;
  int64_t refused_ = 0;
  // Per kept violation: "S1 #1", and its row in the strip (-1: no room).
  std::vector<std::string> labels_;
  std::vector<int> label_row_;
  double header_y_ = 0, strip_y_ = 0, lanes_y_ = 0, lanes_end_ = 0, axis_y_ = 0, legend_y_ = 0,
         height_ = 0;
};

}  // namespace

std::string RenderTimeline(const std::vector<Event>& history, const CheckResult& check,
                           const TimelineOptions& options) {
  return Timeline(history, check, options).Render();
}

absl::Status WriteTextFile(const std::string& path, const std::string& content) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", path));
  const size_t n = std::fwrite(content.data(), 1, content.size(), f);
  const int err = errno;
  if (std::fclose(f) != 0 || n != content.size()) {
    return absl::ErrnoToStatus(err, absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace redlock::chaos
