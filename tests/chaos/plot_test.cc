// Unit tests of the timeline picture (chaos/plot/plot.h), the nemesis log
// (chaos/history/nemesis.h) and the shared SVG writer (common/svg.h), on histories
// built in code with known violations (no server).

#include "chaos/plot/plot.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "chaos/check/checker.h"
#include "chaos/history/history.h"
#include "chaos/history/nemesis.h"
#include "common/svg.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pugixml.hpp"
#include "tests/chaos/history_builder.h"

namespace redlock::chaos {
namespace {

using synthetic::Builder;
using synthetic::Ms;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---- The SVG as XML (pugixml) ----------------------------------------------------
//
// pugixml checks that tags balance and nest, that attributes are quoted and
// that no bare '<' is in text; it leaves three things to the caller, which
// ParseSvg checks itself: every '&' starts a reference the writer may use, no
// element has an attribute twice, and the document has one root element.

bool IsReference(absl::string_view raw) {
  for (absl::string_view named : {"&lt;", "&gt;", "&amp;", "&quot;", "&apos;"}) {
    if (absl::StartsWith(raw, named)) return true;
  }
  size_t i = 2;
  const bool hex = absl::StartsWith(raw, "&#x");
  if (!hex && !absl::StartsWith(raw, "&#")) return false;
  if (hex) i = 3;
  const size_t digits_from = i;
  while (i < raw.size() && (hex ? absl::ascii_isxdigit(raw[i]) : absl::ascii_isdigit(raw[i]))) ++i;
  return i > digits_from && i < raw.size() && raw[i] == ';';
}

// What pugixml read with its escapes left as written (parse_escapes off).
std::string BadEscapes(const pugi::xml_node& raw) {
  std::vector<absl::string_view> values;
  if (raw.type() == pugi::node_pcdata) values.push_back(raw.value());
  for (const pugi::xml_attribute& a : raw.attributes()) values.push_back(a.value());
  std::set<std::string> names;
  for (const pugi::xml_attribute& a : raw.attributes()) {
    if (!names.insert(a.name()).second) {
      return absl::StrCat("<", raw.name(), "> has attribute ", a.name(), " twice");
    }
  }
  for (absl::string_view v : values) {
    for (size_t at = v.find('&'); at != absl::string_view::npos; at = v.find('&', at + 1)) {
      if (!IsReference(v.substr(at))) return absl::StrCat("a bare '&' in \"", v, "\"");
    }
  }
  for (const pugi::xml_node& child : raw.children()) {
    std::string wrong = BadEscapes(child);
    if (!wrong.empty()) return wrong;
  }
  return "";
}

absl::Status ParseSvg(const std::string& text, pugi::xml_document* doc) {
  // `raw` keeps escapes as written and, as a fragment, text outside the root.
  pugi::xml_document raw;
  for (auto [into, options] :
       {std::pair{doc, pugi::parse_default},
        std::pair{&raw, (pugi::parse_default & ~pugi::parse_escapes) | pugi::parse_fragment}}) {
    const pugi::xml_parse_result r = into->load_buffer(text.data(), text.size(), options);
    if (!r) {
      return absl::InvalidArgumentError(
          absl::StrCat("not well-formed at byte ", r.offset, ": ", r.description()));
    }
  }
  int roots = 0;
  for (const pugi::xml_node& top : raw.children()) {
    if (top.type() == pugi::node_element) ++roots;
    if (top.type() == pugi::node_pcdata || top.type() == pugi::node_cdata) {
      return absl::InvalidArgumentError("text outside the root element");
    }
  }
  if (roots != 1) return absl::InvalidArgumentError(absl::StrCat(roots, " root elements"));
  const std::string wrong = BadEscapes(raw);
  if (!wrong.empty()) return absl::InvalidArgumentError(wrong);
  return absl::OkStatus();
}

// True when the element's class attribute lists `cls` (space-separated).
bool HasClass(const pugi::xml_node& e, absl::string_view cls) {
  for (absl::string_view c : absl::StrSplit(e.attribute("class").value(), ' ', absl::SkipEmpty())) {
    if (c == cls) return true;
  }
  return false;
}

// The elements of the tree under `root` (itself included) for which `match`
// is true, in document order.
std::vector<pugi::xml_node> FindAll(const pugi::xml_node& root,
                                    const std::function<bool(const pugi::xml_node&)>& match) {
  std::vector<pugi::xml_node> out;
  if (root.type() == pugi::node_element && match(root)) out.push_back(root);
  for (const pugi::xml_node& child : root.children()) {
    std::vector<pugi::xml_node> below = FindAll(child, match);
    out.insert(out.end(), below.begin(), below.end());
  }
  return out;
}

int Count(const pugi::xml_node& root, const std::function<bool(const pugi::xml_node&)>& match) {
  return static_cast<int>(FindAll(root, match).size());
}

bool IsNamed(const pugi::xml_node& e, absl::string_view name) {
  return absl::string_view(e.name()) == name;
}

struct Picture {
  CheckResult check;
  std::string text;
  std::unique_ptr<pugi::xml_document> doc = std::make_unique<pugi::xml_document>();
  pugi::xml_node root;
};

Picture Draw(const std::vector<Event>& history) {
  Picture p;
  p.check = Check(history);
  p.text = RenderTimeline(history, p.check);
  absl::Status parsed = ParseSvg(p.text, p.doc.get());
  EXPECT_TRUE(parsed.ok()) << parsed;
  p.root = p.doc->document_element();
  return p;
}

// <g> elements whose class lists every one of `classes`.
std::vector<pugi::xml_node> Groups(const Picture& p, const std::vector<std::string>& classes) {
  return FindAll(p.root, [&](const pugi::xml_node& e) {
    if (!IsNamed(e, "g")) return false;
    for (const std::string& c : classes) {
      if (!HasClass(e, c)) return false;
    }
    return true;
  });
}

int64_t CountOf(const Picture& p, const std::vector<std::string>& classes) {
  return static_cast<int64_t>(Groups(p, classes).size());
}

std::vector<std::string> LaneIds(const Picture& p, const std::string& kind) {
  std::vector<std::string> ids;
  for (const pugi::xml_node& e : Groups(p, {"lane", kind}))
    ids.push_back(e.attribute("id").value());
  return ids;
}

// The run record the harness appends to nemesis.jsonl.
void AddRun(Builder& b, int64_t t, int nodes, const std::vector<std::string>& clients) {
  RunRecord r{.t = Ms(t),
              .scenario = "hand-made",
              .seed = 7,
              .config = "3 clients, 5 nodes",
              .expected = "S1 found",
              .verdict = "OK",
              .start = Ms(0),
              .clients = clients,
              .violations = {1, 0, 0, 0, 0}};
  for (int i = 0; i < nodes; ++i) r.nodes.push_back(i);
  b.events.push_back(ToEvent(r));
}

// ---- The shared writer ---------------------------------------------------------------

TEST(SvgTest, EscapesAndFitsText) {
  EXPECT_EQ(svg::XmlEscape("a<b & \"c\" 'd'>\x01"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  EXPECT_EQ(svg::Num(12.5), "12.5");
  EXPECT_EQ(svg::Num(3.0), "3");
  EXPECT_EQ(svg::Num(-0.001), "0");
  EXPECT_EQ(svg::FitText("short", 10, 100), "short");
  const std::string cut = svg::FitText("a rather long label for a narrow band", 10, 60);
  EXPECT_TRUE(absl::EndsWith(cut, "...")) << cut;
  EXPECT_LE(svg::TextWidth(cut, 10), 60);
  EXPECT_EQ(svg::FitText("abc", 10, 5), "");
  EXPECT_THAT(svg::NiceTicks(0, 10, 5), ElementsAre(0, 2, 4, 6, 8, 10));
  EXPECT_THAT(svg::NiceTicks(-3, 3, 3), ElementsAre(-2, 0, 2));
}

// What ParseSvg adds to pugixml's checks fails the documents it must.
TEST(SvgTest, StrictParsingRefusesWhatAnEscapingBugWouldWrite) {
  pugi::xml_document xml;
  EXPECT_TRUE(ParseSvg(R"(<svg a="&lt;&#38;&#x26;"><t>x &amp; y</t></svg>)", &xml).ok());
  for (const char* bad :
       {R"(<svg><t>x & y</t></svg>)", R"(<svg a="&nope;"/>)", R"(<svg a="1" a="2"/>)",
        R"(<svg/><svg/>)", R"(<svg/>text)", R"(<svg><t>x < y</t></svg>)", R"(<svg><t></svg>)"}) {
    EXPECT_FALSE(ParseSvg(bad, &xml).ok()) << bad;
  }
}

TEST(SvgTest, DocumentAndLineChartAreWellFormed) {
  svg::Document doc;
  doc.Open({.cls = "a b", .id = "x", .tooltip = "tip <1>"});
  doc.Rect(1, 2, 3, 4, {.fill = "red"}, "rect & tip");
  doc.Text(5, 6, "text <&>", {.anchor = "middle"});
  // Left open on purpose: Render closes it.
  pugi::xml_document xml;
  absl::Status parsed = ParseSvg(doc.Render(100, 50, "t"), &xml);
  ASSERT_TRUE(parsed.ok()) << parsed;
  EXPECT_STREQ(xml.document_element().name(), "svg");
  EXPECT_EQ(Count(xml, [](const auto& e) { return HasClass(e, "b"); }), 1);

  svg::LineChart chart;
  chart.title = "latency & more";
  chart.x = {.label = "N", .log = false};
  chart.y = {.label = "latency", .log = true, .format = svg::FormatMicros};
  chart.series.push_back({.name = "p50", .points = {{1, 40}, {3, 52}, {5, 60}}});
  chart.series.push_back({.name = "p99", .dashed = true, .points = {{1, 0}, {3, 90}}});
  parsed = ParseSvg(svg::RenderLineChart(chart), &xml);
  ASSERT_TRUE(parsed.ok()) << parsed;
  EXPECT_EQ(Count(xml, [](const auto& e) { return IsNamed(e, "polyline"); }), 2);
  EXPECT_EQ(Count(xml, [](const auto& e) { return HasClass(e, "series"); }), 2);
}

// ---- History format and the nemesis log ----------------------------------------------

TEST(NemesisLogTest, RecordsSitesInstantsAndScopedFaults) {
  char dir[] = "/tmp/redlock-plot-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = absl::StrCat(dir, "/nemesis.jsonl");
  {
    absl::StatusOr<std::unique_ptr<HistoryWriter>> writer = HistoryWriter::Open(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    NemesisLog log(writer->get());
    log.Instant("failover", {.nodes = {0, 1}}, "n1 promoted");
    { ScopedFault lag = log.Scoped("replica_lag", {.nodes = {1}, .clients = {"c2"}}, "paused"); }
    log.Start("latency", {.nodes = {2}}, "+30ms to-server", "n2:to-server");
    log.Stop("latency", "n2:to-server", "cleared");
    NemesisLog(nullptr).Instant("ignored", {}, "no history: nothing recorded");
  }
  absl::StatusOr<std::vector<Event>> events = ReadHistory(path);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 5u);
  EXPECT_EQ((*events)[0].fault, "failover");
  EXPECT_EQ((*events)[0].target, "n0,n1");
  EXPECT_THAT((*events)[0].nodes, ElementsAre(0, 1));
  EXPECT_EQ((*events)[1].phase, FaultPhase::kStart);
  EXPECT_THAT((*events)[1].clients, ElementsAre("c2"));
  EXPECT_EQ((*events)[2].phase, FaultPhase::kStop);
  EXPECT_EQ((*events)[2].target, (*events)[1].target);
  CheckResult check = Check(*events);
  ASSERT_EQ(check.faults.size(), 3u);
  EXPECT_TRUE(check.faults[1].stop.has_value());
  EXPECT_THAT(check.faults[1].nodes, ElementsAre(1));
  EXPECT_TRUE(check.warnings.empty());
  std::remove(path.c_str());
  rmdir(dir);
}

TEST(HistoryTest, RunEventRoundTripsAndTheCheckerIgnoresIt) {
  Builder b;
  AddRun(b, 100, 3, {"c1", "c2"});
  const Event& run = b.events.back();
  absl::StatusOr<Event> back = ParseEventLine(FormatEventLine(run));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->type, EventType::kRun);
  EXPECT_EQ(back->scenario, "hand-made");
  EXPECT_EQ(back->seed, 7u);
  EXPECT_EQ(back->verdict, "OK");
  EXPECT_EQ(back->start, Ms(0));
  EXPECT_THAT(back->nodes, ElementsAre(0, 1, 2));
  EXPECT_THAT(back->clients, ElementsAre("c1", "c2"));
  EXPECT_THAT(back->violations, ElementsAre(1, 0, 0, 0, 0));
  CheckResult check = Check(b.events);
  EXPECT_TRUE(check.warnings.empty());
  EXPECT_EQ(check.counts.unknown, 0);
  EXPECT_FALSE(ParseEventLine(R"({"t":1,"type":"run","clients":[1]})").ok());
}

// ---- The timeline ---------------------------------------------------------------------

TEST(TimelineTest, CleanHistoryHasItsLanesAndNoMarker) {
  Builder b;
  for (int i = 0; i < 6; ++i) {
    const std::string c = absl::StrCat("c", i % 3 + 1);
    const std::string tok = b.Grant(c, i, 100 * i, 100 * i + 5, 100 * i + 90, 10 + i);
    b.Use(c, i, tok, 100 * i + 10, 100 * i + 40, i, true, 10 + i);
    b.Release(c, i, tok, 100 * i + 50);
    b.Fail(absl::StrCat("c", (i + 1) % 3 + 1), 100 + i, 100 * i + 20, 100 * i + 22);
  }
  b.Nemesis(150, "pause", "n1", FaultPhase::kStart, "SIGSTOP", {1});
  b.Nemesis(250, "pause", "n1", FaultPhase::kStop, "SIGCONT");
  b.Final(700, 6);
  AddRun(b, 800, 5, {"c1", "c2", "c3"});
  Picture p = Draw(b.events);
  ASSERT_TRUE(p.check.ok());
  EXPECT_THAT(LaneIds(p, "client"), ElementsAre("lane-c1", "lane-c2", "lane-c3"));
  EXPECT_THAT(LaneIds(p, "node"),
              ElementsAre("lane-n0", "lane-n1", "lane-n2", "lane-n3", "lane-n4"));
  EXPECT_EQ(CountOf(p, {"violation"}), 0);
  EXPECT_EQ(CountOf(p, {"refused"}), 0);
  EXPECT_EQ(CountOf(p, {"hold"}), 6);
  EXPECT_EQ(CountOf(p, {"fault"}), 1);
  // The title names the scenario, seed, configuration, verdict and expectation.
  EXPECT_THAT(p.text, HasSubstr("hand-made"));
  EXPECT_THAT(p.text, HasSubstr("seed 7"));
  EXPECT_THAT(p.text, HasSubstr("3 clients, 5 nodes"));
  EXPECT_THAT(p.text, HasSubstr("verdict OK"));
  EXPECT_THAT(p.text, HasSubstr("expected: S1 found"));
  EXPECT_THAT(p.text, HasSubstr("#15"));  // a fencing token on its hold
}

TEST(TimelineTest, OneMarkerPerOverlapAcrossTheLanesInvolved) {
  Builder b;
  // c1 and c2 overlap; c3 overlaps both; c4 never overlaps.
  const std::string t1 = b.Grant("c1", 1, 0, 10, 400);
  const std::string t2 = b.Grant("c2", 1, 100, 200, 600);
  const std::string t3 = b.Grant("c3", 1, 300, 350, 700);
  b.Release("c1", 1, t1, 390);
  b.Release("c2", 1, t2, 580);
  b.Release("c3", 1, t3, 690);
  const std::string t4 = b.Grant("c4", 1, 800, 810, 900);
  b.Release("c4", 1, t4, 890);
  b.Nemesis(150, "clock_jump", "n2", FaultPhase::kInstant, "+6s", {2});
  b.Nemesis(160, "client_pause", "c1", FaultPhase::kStart, "SIGSTOP", {}, {"c1"});
  b.Nemesis(260, "client_pause", "c1", FaultPhase::kStop, "SIGCONT");
  b.Nemesis(300, "storm", "somewhere", FaultPhase::kInstant, "a fault with no site");
  Picture p = Draw(b.events);
  ASSERT_EQ(p.check.count(Property::kMutualExclusion), 3);
  EXPECT_EQ(CountOf(p, {"violation", "S1"}), 3);
  EXPECT_EQ(CountOf(p, {"violation"}), p.check.total_violations());
  EXPECT_THAT(LaneIds(p, "client"), ElementsAre("lane-c1", "lane-c2", "lane-c3", "lane-c4"));
  // No run record: the nodes are those the history names (grants: 0-2).
  EXPECT_THAT(LaneIds(p, "node"), ElementsAre("lane-n0", "lane-n1", "lane-n2"));
  EXPECT_THAT(LaneIds(p, "other"), ElementsAre("lane-nemesis"));
  EXPECT_EQ(CountOf(p, {"fault"}), 3);
  // Every fault is labelled with its kind and detail, whatever the kind.
  EXPECT_THAT(p.text, HasSubstr("clock_jump: +6s"));
  EXPECT_THAT(p.text, HasSubstr("storm: a fault with no site"));
  // The clock jump is on n2's lane, the pause on c1's.
  for (const pugi::xml_node& lane : Groups(p, {"lane"})) {
    const int faults = Count(lane, [](const auto& e) { return HasClass(e, "fault"); });
    const std::string id = lane.attribute("id").value();
    EXPECT_EQ(faults, id == "lane-n2" || id == "lane-c1" || id == "lane-nemesis" ? 1 : 0) << id;
  }
}

TEST(TimelineTest, LostUpdatesStaleTokensAndRefusedWritesAreMarked) {
  Builder b;
  // S3: c1 and c2 both read 0 and both writes are accepted (no fencing).
  const std::string t1 = b.Grant("c1", 1, 0, 10, 500);
  const std::string t2 = b.Grant("c2", 1, 100, 110, 600);
  b.Use("c1", 1, t1, 20, 300, 0);
  b.Use("c2", 1, t2, 120, 200, 0);
  b.Release("c1", 1, t1, 310);
  b.Release("c2", 1, t2, 210);
  // S4 (c): on resource f, the store accepts token 5 after 6; one refused.
  const std::string f1 = b.Grant("c3", 2, 1000, 1010, 1400, 5, "f");
  const std::string f2 = b.Grant("c4", 2, 1100, 1110, 1500, 6, "f");
  b.Use("c4", 2, f2, 1120, 1150, 0, true, 6, "f");
  b.Use("c3", 2, f1, 1020, 1200, 1, true, 5, "f");
  b.Use("c3", 2, f1, 1210, 1250, 1, false, 5, "f");
  b.Release("c3", 2, f1, 1260, "f");
  b.Release("c4", 2, f2, 1300, "f");
  Picture p = Draw(b.events);
  ASSERT_GT(p.check.count(Property::kHarm), 0);
  ASSERT_GT(p.check.count(Property::kFencing), 0);
  EXPECT_EQ(CountOf(p, {"violation", "S1"}), p.check.count(Property::kMutualExclusion));
  EXPECT_EQ(CountOf(p, {"violation", "S3"}), p.check.count(Property::kHarm));
  EXPECT_EQ(CountOf(p, {"violation", "S4"}), p.check.count(Property::kFencing));
  EXPECT_EQ(CountOf(p, {"refused"}), p.check.counts.rejected_writes);
  EXPECT_EQ(CountOf(p, {"refused"}), 1);
}

TEST(TimelineTest, FinalCounterMismatchIsMarkedWithoutLanes) {
  Builder b;
  const std::string t1 = b.Grant("c1", 1, 0, 10, 500);
  b.Use("c1", 1, t1, 20, 30, 0);
  b.Release("c1", 1, t1, 40);
  b.Final(600, 5);  // one accepted write, counter moved by 5
  Picture p = Draw(b.events);
  ASSERT_EQ(p.check.count(Property::kHarm), 1);
  EXPECT_EQ(CountOf(p, {"violation", "S3"}), 1);
}

TEST(TimelineTest, DenseHistoryIsAggregatedButEveryViolationIsDrawn) {
  Builder b;
  std::vector<std::string> clients;
  for (int c = 1; c <= 10; ++c) clients.push_back(absl::StrCat("c", c));
  // 10 clients x 2000 failed attempts over 8 s, of three outcomes.
  const char* codes[] = {"ABORTED", "UNAVAILABLE", "DEADLINE_EXCEEDED"};
  int64_t op = 0;
  for (int i = 0; i < 2000; ++i) {
    for (int c = 0; c < 10; ++c) {
      const int64_t t = i * 4;
      b.Fail(clients[static_cast<size_t>(c)], ++op, t, t + 1, codes[(i / 50 + c) % 3]);
    }
  }
  // Short holds, and three tiny overlaps among them.
  for (int i = 0; i < 300; ++i) {
    const std::string c = clients[static_cast<size_t>(i % 10)];
    const int64_t t = i * 26;
    const std::string tok = b.Grant(c, ++op, t, t + 1, t + 20);
    b.Release(c, op, tok, t + 20);
  }
  for (int k = 0; k < 3; ++k) {
    const std::string tok =
        b.Grant("c10", ++op, 1000 + 2000 * k, 1000 + 2000 * k + 5, 1000 + 2000 * k + 40);
    b.Release("c10", op, tok, 1000 + 2000 * k + 40);
  }
  AddRun(b, 9000, 5, clients);
  Picture p = Draw(b.events);
  ASSERT_EQ(p.check.counts.fails, 20000);
  ASSERT_GT(p.check.count(Property::kMutualExclusion), 0);
  EXPECT_EQ(CountOf(p, {"violation", "S1"}), p.check.count(Property::kMutualExclusion));
  EXPECT_EQ(LaneIds(p, "client").size(), 10u);
  // Failed attempts: at most one tick per 2 pixels, outcome and lane.
  const int ticks = Count(p.root, [](const pugi::xml_node& e) {
    const pugi::xml_node first =
        e.find_child([](const pugi::xml_node& c) { return c.type() == pugi::node_element; });
    return IsNamed(e, "rect") && first && absl::StrContains(first.child_value(), "attempt");
  });
  EXPECT_GT(ticks, 0);
  EXPECT_LE(ticks, 10 * 3 * 1200 / 2);
  EXPECT_LT(ticks, 20000 / 2);
  EXPECT_LT(p.text.size(), 4u << 20);
}

TEST(TimelineTest, EmptyHistoryStillDraws) {
  Picture p = Draw({});
  EXPECT_TRUE(IsNamed(p.root, "svg"));
  EXPECT_EQ(CountOf(p, {"lane"}), 0);
}

}  // namespace
}  // namespace redlock::chaos
