// Unit tests of the chaos history format and the S1..S4 checker, on synthetic
// histories built in code (no server).

#include "chaos/check/checker.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chaos/history/history.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/chaos/history_builder.h"

namespace redlock::chaos {
namespace {

using synthetic::Builder;
using synthetic::Ms;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

std::vector<const Violation*> Of(const CheckResult& r, Property p) {
  std::vector<const Violation*> out;
  for (const Violation& v : r.violations) {
    if (v.property == p) out.push_back(&v);
  }
  return out;
}

std::vector<std::string> Tokens(const Violation& v) {
  std::vector<std::string> out;
  for (const GrantInfo& g : v.grants) out.push_back(g.token);
  return out;
}

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/redlock_checker_test_", ::getpid(), "_", name);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// ---- History format
// -------------------------------------------------------------

TEST(HistoryTest, RawMonotonicNanosAdvances) {
  const int64_t a = RawMonotonicNanos();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int64_t b = RawMonotonicNanos();
  EXPECT_GT(a, 0);
  EXPECT_GE(b - a, 1'000'000);
  const int64_t mapped = RawFromSteady(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  EXPECT_NEAR(static_cast<double>(mapped - RawMonotonicNanos()), 1e9, 1e8);
}

TEST(HistoryTest, WriterReaderRoundTrip) {
  const std::string path = TempPath("roundtrip.jsonl");
  std::remove(path.c_str());
  int64_t before = 0;
  {
    absl::StatusOr<std::unique_ptr<HistoryWriter>> w = HistoryWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    HistoryWriter& writer = **w;
    ASSERT_TRUE(
        writer.WriteInvoke({.t = 10, .process = "c1", .op = 1, .resource = "r\"q", .ttl_ms = 500})
            .ok());
    ASSERT_TRUE(writer
                    .WriteGrant({.t = 20,
                                 .process = "c1",
                                 .op = 1,
                                 .resource = "r\"q",
                                 .token = "abc",
                                 .start = 11,
                                 .valid_until = 400,
                                 .ttl_ms = 500,
                                 .drift_ms = 7,
                                 .nodes = {0, 2, 4},
                                 .fencing_token = uint64_t{18446744073709551615u}})
                    .ok());
    ASSERT_TRUE(writer
                    .WriteFail({.t = 21,
                                .process = "c2",
                                .op = 9,
                                .resource = "r\"q",
                                .code = "ABORTED",
                                .error = "2 of 5 nodes granted\n(quorum 3)"})
                    .ok());
    ASSERT_TRUE(writer
                    .WriteUse({.t = 30,
                               .process = "c1",
                               .op = 1,
                               .resource = "r\"q",
                               .token = "abc",
                               .begin = 25,
                               .end = 30,
                               .read = -4,
                               .wrote = -3,
                               .accepted = false,
                               .fencing_token = 7})
                    .ok());
    ASSERT_TRUE(writer
                    .WriteRelease({.t = 31,
                                   .process = "c1",
                                   .op = 1,
                                   .resource = "r\"q",
                                   .token = "abc",
                                   .end = 35,
                                   .ok = false})
                    .ok());
    ASSERT_TRUE(writer
                    .WriteNemesis({.t = 40,
                                   .fault = "clock_jump",
                                   .target = "n2",
                                   .detail = "+20s",
                                   .phase = FaultPhase::kStop})
                    .ok());
    ASSERT_TRUE(writer.WriteFinal({.t = 50, .resource = "r\"q", .counter = 3, .initial = 1}).ok());
    // t == 0 is stamped now.
    before = RawMonotonicNanos();
    NemesisRecord kill;
    kill.fault = "kill";
    kill.target = "n1";
    ASSERT_TRUE(writer.WriteNemesis(kill).ok());
    ASSERT_TRUE(writer.Sync().ok());
  }
  absl::StatusOr<std::vector<Event>> read = ReadHistory(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_THAT(*read, SizeIs(8));
  const std::vector<Event>& e = *read;

  EXPECT_EQ(e[0].type, EventType::kInvoke);
  EXPECT_EQ(e[0].t, 10);
  EXPECT_EQ(e[0].resource, "r\"q");
  EXPECT_EQ(e[0].ttl_ms, 500);
  EXPECT_EQ(e[0].source, path + ":1");

  EXPECT_EQ(e[1].type, EventType::kGrant);
  EXPECT_EQ(e[1].token, "abc");
  EXPECT_EQ(e[1].start, 11);
  EXPECT_EQ(e[1].valid_until, 400);
  EXPECT_EQ(e[1].drift_ms, 7);
  EXPECT_THAT(e[1].nodes, ElementsAre(0, 2, 4));
  EXPECT_EQ(e[1].fencing_token, uint64_t{18446744073709551615u});

  EXPECT_EQ(e[2].type, EventType::kFail);
  EXPECT_EQ(e[2].code, "ABORTED");
  EXPECT_EQ(e[2].error, "2 of 5 nodes granted\n(quorum 3)");

  EXPECT_EQ(e[3].type, EventType::kUse);
  EXPECT_EQ(e[3].begin, 25);
  EXPECT_EQ(e[3].end, 30);
  EXPECT_EQ(e[3].read, -4);
  EXPECT_EQ(e[3].wrote, -3);
  EXPECT_FALSE(e[3].accepted);
  EXPECT_EQ(e[3].fencing_token, 7u);

  EXPECT_EQ(e[4].type, EventType::kRelease);
  EXPECT_EQ(e[4].end, 35);
  EXPECT_FALSE(e[4].ok);

  EXPECT_EQ(e[5].type, EventType::kNemesis);
  EXPECT_EQ(e[5].fault, "clock_jump");
  EXPECT_EQ(e[5].target, "n2");
  EXPECT_EQ(e[5].detail, "+20s");
  EXPECT_EQ(e[5].phase, FaultPhase::kStop);

  EXPECT_EQ(e[6].type, EventType::kFinal);
  EXPECT_EQ(e[6].counter, 3);
  EXPECT_EQ(e[6].initial, 1);

  EXPECT_EQ(e[7].type, EventType::kNemesis);
  EXPECT_GE(e[7].t, before);
  EXPECT_LE(e[7].t, RawMonotonicNanos());
  EXPECT_EQ(e[7].phase, FaultPhase::kInstant);

  // Formatting what was read gives back the same lines.
  std::string again;
  for (const Event& ev : e) again += FormatEventLine(ev);
  absl::StatusOr<std::vector<Event>> reparsed = ParseHistory(again, "again");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  for (size_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(FormatEventLine((*reparsed)[i]), FormatEventLine(e[i]));
  }
  std::remove(path.c_str());
}

TEST(HistoryTest, SeveralWritersShareOneFile) {
  const std::string path = TempPath("shared.jsonl");
  std::remove(path.c_str());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  {
    absl::StatusOr<std::unique_ptr<HistoryWriter>> a = HistoryWriter::Open(path);
    absl::StatusOr<std::unique_ptr<HistoryWriter>> b = HistoryWriter::Open(path);
    ASSERT_TRUE(a.ok() && b.ok());
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      HistoryWriter* w = (i % 2 == 0 ? *a : *b).get();
      threads.emplace_back([w, i] {
        for (int k = 0; k < kPerThread; ++k) {
          EXPECT_TRUE(w->WriteInvoke({.process = absl::StrCat("c", i),
                                      .op = k,
                                      .resource = std::string(200, 'x'),
                                      .ttl_ms = 1})
                          .ok());
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  absl::StatusOr<std::vector<Event>> read = ReadHistory(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(*read, SizeIs(kThreads * kPerThread));
  std::remove(path.c_str());
}

TEST(HistoryTest, MergesFilesByTimeStably) {
  const std::string a = TempPath("merge_a.jsonl");
  const std::string b = TempPath("merge_b.jsonl");
  WriteFile(a,
            R"({"t":10,"type":"nemesis","fault":"kill","target":"a1","phase":"instant"}
{"t":30,"type":"nemesis","fault":"kill","target":"a3","phase":"instant"}
{"t":30,"type":"nemesis","fault":"kill","target":"a4","phase":"instant"}
)");
  WriteFile(b,
            R"({"t":5,"type":"nemesis","fault":"kill","target":"b0","phase":"instant"}

{"t":20,"type":"nemesis","fault":"kill","target":"b2","phase":"instant"}
{"t":30,"type":"nemesis","fault":"kill","target":"b5","phase":"instant"})");
  absl::StatusOr<std::vector<Event>> read = ReadHistory({a, b});
  ASSERT_TRUE(read.ok()) << read.status();
  std::vector<std::string> targets;
  for (const Event& e : *read) targets.push_back(e.target);
  EXPECT_THAT(targets, ElementsAre("b0", "a1", "b2", "a3", "a4", "b5"));
  EXPECT_EQ((*read)[0].source, b + ":1");
  EXPECT_EQ((*read)[2].source, b + ":3");
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(HistoryTest, MalformedLineReportsFileAndLine) {
  const std::string path = TempPath("malformed.jsonl");
  WriteFile(path,
            R"({"t":1,"type":"invoke","process":"c1","op":1,"resource":"r"}
{"t":2,"type":"grant","process":"c1","op":1,"resource":"r","token":"x"}
{"t":3,"type":"use","process":"c1","op":1,"resource":"r","token":"x","begin":1,"end":"soon","read":0}
{"t":4,"type":"release","process":"c1","op":1,"resou
{"t":5,"type":"future_event","whatever":[1,2,3]}
[1,2]
{"t":6,"type":"nemesis","fault":"pause","target":"c1","phase":"sometimes"}
{"t":7.5,"type":"final","resource":"r","counter":1}
{"t":8,"type":"final","resource":"r","counter":1,"extra":{"ignored":true}}
)");
  absl::StatusOr<std::vector<Event>> strict = ReadHistory(path);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(strict.status().message()),
              HasSubstr(path + ":2: grant: missing field \"valid_until\""));

  std::vector<std::string> malformed;
  absl::StatusOr<std::vector<Event>> lenient = ReadHistory(path, &malformed);
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  ASSERT_THAT(malformed, SizeIs(6));
  EXPECT_THAT(malformed[0], HasSubstr(path + ":2:"));
  EXPECT_THAT(malformed[1], HasSubstr(path + ":3: use: field \"end\" must be an integer"));
  EXPECT_THAT(malformed[2], HasSubstr(path + ":4: not valid JSON"));
  EXPECT_THAT(malformed[3], HasSubstr(path + ":6: not a JSON object"));
  EXPECT_THAT(malformed[4], HasSubstr(path + ":7: nemesis: field \"phase\""));
  EXPECT_THAT(malformed[5], HasSubstr(path + ":8:"));
  ASSERT_THAT(*lenient, SizeIs(3));
  EXPECT_EQ((*lenient)[1].type, EventType::kUnknown);
  EXPECT_EQ((*lenient)[1].type_name, "future_event");
  EXPECT_EQ((*lenient)[2].type, EventType::kFinal);

  // The checker survives what was left, and says what it ignored.
  CheckResult r = Check(*lenient);
  EXPECT_EQ(r.counts.unknown, 1);
  EXPECT_EQ(r.counts.indeterminate, 1);
  EXPECT_THAT(r.warnings, Contains(HasSubstr("future_event")));
  std::remove(path.c_str());
}

// A history read while its writers append: each Update parses only what was
// completed since the last, a line in the middle of being written waits for
// its newline, and the result equals one ReadHistory of the whole.
TEST(HistoryTest, TailParsesEachLineOnceAsTheFilesGrow) {
  const std::string a = TempPath("tail_a.jsonl");
  const std::string b = TempPath("tail_b.jsonl");
  const std::string a1 = R"({"t":10,"type":"nemesis","fault":"kill","target":"a1"})"
                         "\n";
  const std::string a2 = R"({"t":40,"type":"nemesis","fault":"kill","target":"a2"})"
                         "\n";
  const std::string b1 = R"({"t":20,"type":"nemesis","fault":"kill","target":"b1"})"
                         "\n\n";
  const std::string bad = "{\"t\":30,\"type\":\"nemesis\"}\n";
  const std::string torn = R"({"t":50,"type":"nem)";
  WriteFile(a, a1 + a2.substr(0, 20));
  WriteFile(b, "");
  HistoryTail tail({a, b});
  ASSERT_TRUE(tail.Update().ok());
  std::vector<Event> events = tail.Events();
  ASSERT_THAT(events, SizeIs(1)) << "the half-written line waits";
  EXPECT_EQ(events[0].source, a + ":1");

  WriteFile(a, a1 + a2);
  WriteFile(b, b1 + bad + torn);
  ASSERT_TRUE(tail.Update().ok());
  events = tail.Events();
  std::vector<std::string> sources;
  for (const Event& e : events) sources.push_back(e.source);
  EXPECT_THAT(sources, ElementsAre(a + ":1", b + ":1", a + ":2"));
  EXPECT_THAT(tail.malformed(), ElementsAre(HasSubstr(b + ":3: nemesis: missing field")));

  // The writers are done: the torn last line is read, and is malformed.
  ASSERT_TRUE(tail.Update(/*to_end=*/true).ok());
  ASSERT_THAT(tail.malformed(), SizeIs(2));
  EXPECT_THAT(tail.malformed()[1], HasSubstr(b + ":4: not valid JSON"));
  std::vector<std::string> whole_malformed;
  absl::StatusOr<std::vector<Event>> whole = ReadHistory({a, b}, &whole_malformed);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(tail.Events().size(), whole->size());
  for (size_t i = 0; i < whole->size(); ++i) {
    EXPECT_EQ(FormatEventLine(tail.Events()[i]), FormatEventLine((*whole)[i]));
    EXPECT_EQ(tail.Events()[i].source, (*whole)[i].source);
  }
  EXPECT_EQ(tail.malformed(), whole_malformed);

  std::remove(b.c_str());
  EXPECT_EQ(tail.Update().code(), absl::StatusCode::kNotFound);
  std::remove(a.c_str());
}

TEST(HistoryTest, MissingFileIsNotFound) {
  absl::StatusOr<std::vector<Event>> read = ReadHistory(TempPath("no_such_file"));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
}

TEST(HistoryTest, HostileLinesNeverCrash) {
  const std::vector<std::string> lines = {
      "",
      "{",
      "}",
      "null",
      "\"str\"",
      "{\"t\":null,\"type\":\"grant\"}",
      "{\"t\":1,\"type\":7}",
      "{\"t\":-1,\"type\":\"use\"}",
      "{\"t\":99999999999999999999,\"type\":\"final\"}",
      "{\"t\":1,\"type\":\"grant\",\"process\":\"p\",\"op\":1,\"resource\":"
      "\"r\","
      "\"token\":\"x\",\"valid_until\":5,\"nodes\":[1,\"a\"]}",
      "{\"t\":1,\"type\":\"grant\",\"process\":\"p\",\"op\":1,\"resource\":"
      "\"r\","
      "\"token\":\"x\",\"valid_until\":5,\"fencing_token\":-3}",
      "{\"t\":1,\"type\":\"grant\",\"process\":\"p\",\"op\":1,\"resource\":"
      "\"r\","
      "\"token\":\"x\",\"valid_until\":5,\"nodes\":[99999999999]}",
      std::string(10000, '[') + std::string(10000, ']'),
      "{\"t\":1,\"type\":\"fail\",\"process\":\"\xff\xfe\",\"op\":1,"
      "\"resource\":\"r\"}",
  };
  for (const std::string& line : lines) {
    absl::StatusOr<Event> e = ParseEventLine(line);
    if (e.ok()) {
      // Whatever parses formats back (invalid UTF-8 replaced).
      EXPECT_FALSE(FormatEventLine(*e).empty());
    }
  }
  EXPECT_FALSE(ParseEventLine("{\"t\":1,\"type\":7}").ok());
}

// ---- Checker
// ----------------------------------------------------------------------

TEST(CheckerTest, EmptyHistoryIsClean) {
  CheckResult r = Check({});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.counts.events, 0);
  EXPECT_THAT(FormatReport(r), HasSubstr("PASS"));
}

TEST(CheckerTest, CleanSequentialHistory) {
  Builder h;
  int64_t t = 0;
  for (int i = 0; i < 5; ++i) {
    const std::string p = absl::StrCat("c", i % 3);
    const std::string tok = h.Grant(p, i, t, t + 2, t + 900);
    h.Use(p, i, tok, t + 3, t + 8, /*read=*/i);
    h.Release(p, i, tok, t + 10);
    t += 11;
  }
  h.Fail("c2", 100, 3, 5);
  h.Final(t + 1, 5);
  CheckResult r = Check(h.events);
  EXPECT_TRUE(r.ok()) << FormatReport(r);
  EXPECT_THAT(r.violations, IsEmpty());
  EXPECT_THAT(r.warnings, IsEmpty());
  EXPECT_EQ(r.counts.grants, 5);
  EXPECT_EQ(r.counts.fails, 1);
  EXPECT_EQ(r.counts.uses, 5);
  EXPECT_EQ(r.counts.accepted_writes, 5);
  EXPECT_EQ(r.counts.releases, 5);
  EXPECT_EQ(r.counts.indeterminate, 0);
  EXPECT_EQ(r.counts.lost_updates, 0);
}

TEST(CheckerTest, OverlapIsOneS1WithBothGrants) {
  Builder h;
  const std::string a = h.Grant("c1", 1, 0, 1, 100);
  const std::string b = h.Grant("c2", 1, 40, 50, 150);
  h.Release("c1", 1, a, 80);
  h.Release("c2", 1, b, 120);
  CheckResult r = Check(h.events);
  EXPECT_EQ(r.count(Property::kMutualExclusion), 1);
  EXPECT_EQ(r.total_violations(), 1);
  ASSERT_THAT(r.violations, SizeIs(1));
  const Violation& v = r.violations[0];
  EXPECT_EQ(v.property, Property::kMutualExclusion);
  EXPECT_EQ(v.resource, "r");
  EXPECT_EQ(v.t, Ms(50));
  EXPECT_EQ(v.t_end, Ms(80));
  EXPECT_THAT(Tokens(v), ElementsAre(a, b));
  EXPECT_THAT(v.grants[0].nodes, ElementsAre(0, 1, 2));
  EXPECT_EQ(v.grants[0].hold_end, Ms(80));
  const std::string report = FormatReport(r);
  EXPECT_THAT(report, HasSubstr("FAIL"));
  EXPECT_THAT(report, HasSubstr(a));
  EXPECT_THAT(report, HasSubstr(b));
  // The JSON report is valid JSON with the same content.
  nlohmann::json j = nlohmann::json::parse(FormatReportJson(r), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["properties"]["S1"]["violations"], 1);
  EXPECT_EQ(j["violations"][0]["grants"][1]["token"], b);
}

TEST(CheckerTest, OtherResourcesDoNotOverlap) {
  Builder h;
  h.Grant("c1", 1, 0, 1, 100, std::nullopt, "r1");
  h.Grant("c2", 1, 0, 1, 100, std::nullopt, "r2");
  EXPECT_TRUE(Check(h.events).ok());
}

TEST(CheckerTest, TouchingGrantsAreClean) {
  Builder h;
  h.Grant("c1", 1, 0, 1, 100);  // never released, never used: holds to 100
  const std::string b = h.Grant("c2", 1, 90, 100, 200);
  h.Use("c2", 1, b, 150, 200, 0);  // a use ending exactly at valid_until
  h.Grant("c3", 1, 195, 200, 300);
  CheckResult r = Check(h.events);
  EXPECT_TRUE(r.ok()) << FormatReport(r);
}

TEST(CheckerTest, ReleaseShortensTheHold) {
  Builder released;
  const std::string a = released.Grant("c1", 1, 0, 1, 1000);
  released.Use("c1", 1, a, 2, 5, 0);
  released.Release("c1", 1, a, 10);
  released.Grant("c2", 1, 11, 20, 1000);
  EXPECT_TRUE(Check(released.events).ok());

  Builder kept;
  const std::string k = kept.Grant("c1", 1, 0, 1, 1000);
  kept.Use("c1", 1, k, 2, 5, 0);
  kept.Grant("c2", 1, 11, 20, 1000);
  CheckResult r = Check(kept.events);
  EXPECT_EQ(r.count(Property::kMutualExclusion), 1);
  ASSERT_THAT(r.violations, SizeIs(1));
  EXPECT_EQ(r.violations[0].t_end, Ms(1000));
}

TEST(CheckerTest, UsePastValidityIsS2AndS1WhenItOverlapsTheNextHolder) {
  {
    Builder h;
    const std::string a = h.Grant("c1", 1, 0, 1, 10);
    h.Use("c1", 1, a, 5, 15, 0);
    h.Release("c1", 1, a, 16);
    h.Grant("c2", 1, 17, 20, 100);
    CheckResult r = Check(h.events);
    EXPECT_EQ(r.count(Property::kValidity), 1);
    EXPECT_EQ(r.count(Property::kMutualExclusion), 0);
    ASSERT_THAT(Of(r, Property::kValidity), SizeIs(1));
    const Violation& v = *Of(r, Property::kValidity)[0];
    EXPECT_EQ(v.t, Ms(10));
    EXPECT_EQ(v.t_end, Ms(15));
    EXPECT_THAT(Tokens(v), ElementsAre(a));
  }
  {
    Builder h;
    const std::string a = h.Grant("c1", 1, 0, 1, 10);
    h.Use("c1", 1, a, 5, 15, 0);
    h.Release("c1", 1, a, 16);
    const std::string b = h.Grant("c2", 1, 8, 12, 100);
    CheckResult r = Check(h.events);
    EXPECT_EQ(r.count(Property::kValidity), 1);
    EXPECT_EQ(r.count(Property::kMutualExclusion), 1);
    ASSERT_THAT(Of(r, Property::kMutualExclusion), SizeIs(1));
    const Violation& v = *Of(r, Property::kMutualExclusion)[0];
    EXPECT_THAT(Tokens(v), ElementsAre(a, b));
    EXPECT_EQ(v.t, Ms(12));
    EXPECT_EQ(v.t_end, Ms(15));
  }
}

TEST(CheckerTest, SameReadIsALostUpdate) {
  Builder h;
  const std::string a = h.Grant("c1", 1, 0, 1, 100);
  const std::string b = h.Grant("c2", 1, 0, 2, 100);
  h.Use("c1", 1, a, 10, 30, /*read=*/7);
  h.Use("c2", 1, b, 20, 40, /*read=*/7);
  h.Release("c1", 1, a, 50);
  h.Release("c2", 1, b, 50);
  CheckResult r = Check(h.events);
  EXPECT_EQ(r.count(Property::kHarm), 1);
  EXPECT_EQ(r.counts.lost_updates, 1);
  ASSERT_THAT(Of(r, Property::kHarm), SizeIs(1));
  const Violation& v = *Of(r, Property::kHarm)[0];
  EXPECT_THAT(Tokens(v), UnorderedElementsAre(a, b));
  EXPECT_EQ(v.t, Ms(20));
  EXPECT_EQ(v.t_end, Ms(30));
  EXPECT_THAT(v.description, HasSubstr("both read 7"));
}

TEST(CheckerTest, FinalCounterMismatchIsS3) {
  Builder h;
  const std::string a = h.Grant("c1", 1, 0, 1, 100);
  h.Use("c1", 1, a, 10, 20, 10);
  h.Release("c1", 1, a, 21);
  const std::string b = h.Grant("c2", 1, 22, 23, 100);
  h.Use("c2", 1, b, 30, 40, 11);
  h.Release("c2", 1, b, 41);
  {
    Builder ok = h;
    ok.Final(50, 12, 10);
    EXPECT_TRUE(Check(ok.events).ok());
  }
  Builder lost = h;
  lost.Final(50, 11, 10);
  CheckResult r = Check(lost.events);
  EXPECT_EQ(r.count(Property::kHarm), 1);
  ASSERT_THAT(Of(r, Property::kHarm), SizeIs(1));
  EXPECT_THAT(Of(r, Property::kHarm)[0]->description, HasSubstr("1 acknowledged update(s) lost"));

  Builder extra = h;
  extra.Final(50, 13, 10);
  EXPECT_EQ(Check(extra.events).count(Property::kHarm), 1);
}

TEST(CheckerTest, FencingRejectsTheStaleWriteSoS3StaysCleanWhileS1Fires) {
  // Kleppmann's pause: c1 is paused past its validity; c2 gets the lock with
  // a higher token and writes; c1 wakes up and writes with its stale token,
  // which the store rejects.
  Builder h;
  const std::string a = h.Grant("c1", 1, 0, 1, 100, /*fencing=*/5);
  h.Nemesis(10, "pause", "c1", FaultPhase::kStart, "SIGSTOP");
  const std::string b = h.Grant("c2", 1, 110, 120, 300, /*fencing=*/6);
  h.Use("c2", 1, b, 130, 140, /*read=*/0, /*accepted=*/true, /*fencing=*/6);
  h.Release("c2", 1, b, 150);
  h.Nemesis(200, "pause", "c1", FaultPhase::kStop);
  h.Use("c1", 1, a, 5, 210, /*read=*/0, /*accepted=*/false, /*fencing=*/5);
  h.Release("c1", 1, a, 220);
  h.Final(400, 1);
  CheckResult r = Check(h.events);
  EXPECT_EQ(r.count(Property::kMutualExclusion), 1) << FormatReport(r);
  EXPECT_EQ(r.count(Property::kValidity), 1);
  EXPECT_EQ(r.count(Property::kHarm), 0);
  EXPECT_EQ(r.count(Property::kFencing), 0);
  EXPECT_EQ(r.counts.rejected_writes, 1);
  EXPECT_EQ(r.counts.accepted_writes, 1);
  ASSERT_THAT(Of(r, Property::kMutualExclusion), SizeIs(1));
  const Violation& v = *Of(r, Property::kMutualExclusion)[0];
  EXPECT_THAT(Tokens(v), ElementsAre(a, b));
  ASSERT_THAT(v.faults, SizeIs(1));
  EXPECT_EQ(v.faults[0].fault, "pause");
  EXPECT_EQ(v.faults[0].stop, Ms(200));

  // Without fencing the stale write is accepted and loses c2's update.
  Builder unfenced;
  const std::string ua = unfenced.Grant("c1", 1, 0, 1, 100);
  const std::string ub = unfenced.Grant("c2", 1, 110, 120, 300);
  unfenced.Use("c2", 1, ub, 130, 140, 0);
  unfenced.Use("c1", 1, ua, 5, 210, 0);
  unfenced.Final(400, 1);
  CheckResult u = Check(unfenced.events);
  EXPECT_EQ(u.count(Property::kMutualExclusion), 1);
  EXPECT_EQ(u.count(Property::kHarm), 2);  // same read + final mismatch
  EXPECT_EQ(u.counts.lost_updates, 1);
}

TEST(CheckerTest, EqualFencingTokensAreS4) {
  Builder h;
  const std::string a = h.Grant("c1", 1, 0, 1, 100, 7);
  h.Release("c1", 1, a, 10);
  const std::string b = h.Grant("c2", 1, 20, 21, 100, 7);
  CheckResult r = Check(h.events);
  EXPECT_EQ(r.count(Property::kFencing), 1);
  EXPECT_EQ(r.total_violations(), 1);
  ASSERT_THAT(Of(r, Property::kFencing), SizeIs(1));
  EXPECT_THAT(Tokens(*Of(r, Property::kFencing)[0]), ElementsAre(a, b));
  EXPECT_THAT(Of(r, Property::kFencing)[0]->description, HasSubstr("same fencing token 7"));
}

TEST(CheckerTest, DecreasingFencingTokenIsS4) {
  Builder h;
  const std::string a = h.Grant("c1", 1, 0, 1, 100, 9);
  h.Release("c1", 1, a, 10);
  const std::string b = h.Grant("c2", 1, 20, 21, 100, 4);
  h.Release("c2", 1, b, 30);
  // c3's attempt began before c2 was granted: its token only has to exceed
  // c1's (concurrent attempts may be granted in any token order).
  h.Grant("c3", 1, 15, 40, 100, 10);
  CheckResult r = Check(h.events);
  EXPECT_EQ(r.count(Property::kFencing), 1) << FormatReport(r);
  ASSERT_THAT(Of(r, Property::kFencing), SizeIs(1));
  const Violation& v = *Of(r, Property::kFencing)[0];
  EXPECT_THAT(Tokens(v), ElementsAre(a, b));
  EXPECT_EQ(v.t, Ms(20));
}

TEST(CheckerTest, StoreAcceptingAStaleTokenIsS4) {
  Builder h;
  const std::string a = h.Grant("c1", 1, 0, 1, 100, 1);
  const std::string b = h.Grant("c2", 1, 0, 2, 100, 2);
  h.Use("c2", 1, b, 3, 5, 0, true, 2);
  h.Use("c1", 1, a, 3, 6, 1, true, 1);  // accepted after token 2: stale
  CheckResult r = Check(h.events);
  EXPECT_EQ(r.count(Property::kFencing), 1) << FormatReport(r);
  ASSERT_THAT(Of(r, Property::kFencing), SizeIs(1));
  EXPECT_THAT(Tokens(*Of(r, Property::kFencing)[0]), ElementsAre(b, a));
  EXPECT_THAT(Of(r, Property::kFencing)[0]->description, HasSubstr("accepted fencing token 1"));
}

// ---- The lock family -------------------------------------------------------------

TEST(CheckerTest, ReadersShareAWriterBesideAnyHolderIsS1) {
  synthetic::Builder b;
  const std::string r1 = b.FamilyGrant("c1", 1, 0, 10, 1000, "shared");
  const std::string r2 = b.FamilyGrant("c2", 1, 5, 20, 1000, "shared");
  b.ReadUse("c1", 1, r1, 30, 60, 0);
  b.ReadUse("c2", 1, r2, 40, 70, 0);
  b.Release("c1", 1, r1, 100);
  b.Release("c2", 1, r2, 110);
  const std::string w = b.FamilyGrant("c3", 1, 100, 120, 1000, "exclusive");
  b.Release("c3", 1, w, 200);
  CheckResult clean = Check(b.events);
  EXPECT_TRUE(clean.ok()) << FormatReport(clean);
  EXPECT_EQ(clean.counts.shared_grants, 2);
  EXPECT_EQ(clean.counts.read_uses, 2);
  EXPECT_EQ(clean.counts.lost_updates, 0) << "readers read the same value: no write, no loss";

  const std::string r3 = b.FamilyGrant("c1", 2, 150, 160, 1000, "shared");  // beside the writer
  b.Release("c1", 2, r3, 300);
  CheckResult r = Check(b.events);
  ASSERT_EQ(r.count(Property::kMutualExclusion), 1) << FormatReport(r);
  EXPECT_THAT(Tokens(*Of(r, Property::kMutualExclusion)[0]), UnorderedElementsAre(w, r3));
}

// S9 (issue 36 item 2): writer W (fencing token 7) is paused between its
// read and its write past its validity; reader R, granted after W's
// validity ended, carries W's token (the last writer's), reads through the
// fence, and then reads the value W's late write put there: the fence
// (token < fence refused) let it through.
TEST(CheckerTest, StaleFencedWriteSeenByALaterReaderIsS9) {
  synthetic::Builder b;
  const std::string w = b.FamilyGrant("c1", 1, 0, 10, 100, "exclusive", 7);
  const std::string r = b.FamilyGrant("c2", 1, 150, 160, 1000, "shared", 7);
  b.Use("c2", 1, r, 170, 180, /*read=*/5, true, 7);
  b.events.back().write = false;
  b.events.back().wrote = 5;
  b.Use("c1", 1, w, 50, 200, /*read=*/5, /*accepted=*/true, 7);  // written at 200
  b.Use("c2", 1, r, 210, 220, /*read=*/6, true, 7);
  b.events.back().write = false;
  b.events.back().wrote = 6;
  CheckResult res = Check(b.events);
  ASSERT_EQ(res.count(Property::kStaleWriteSeen), 1) << FormatReport(res);
  const Violation& v = *Of(res, Property::kStaleWriteSeen)[0];
  EXPECT_THAT(Tokens(v), UnorderedElementsAre(w, r));
  EXPECT_EQ(v.t, synthetic::Ms(200));
  EXPECT_THAT(FormatReport(res), HasSubstr("S9    stale write seen"));

  // The same with a successor holding a higher token: the fence refuses
  // the late write (accepted false), so nothing stale is seen.
  synthetic::Builder m;
  const std::string w1 = m.FamilyGrant("c1", 1, 0, 10, 100, "exclusive", 7);
  const std::string w2 = m.FamilyGrant("c2", 1, 150, 160, 1000, "exclusive", 8);
  m.Use("c2", 1, w2, 170, 180, 5, true, 8);
  m.Use("c1", 1, w1, 50, 200, 5, /*accepted=*/false, 7);
  m.Use("c2", 1, w2, 210, 220, 6, true, 8);
  EXPECT_EQ(Check(m.events).count(Property::kStaleWriteSeen), 0);

  // A late write before the newer holder first touched the store is the
  // fence's limit, not S9: the reader's first read comes after it.
  synthetic::Builder early;
  const std::string ew = early.FamilyGrant("c1", 1, 0, 10, 100, "exclusive", 7);
  const std::string er = early.FamilyGrant("c2", 1, 150, 160, 1000, "shared", 7);
  early.Use("c1", 1, ew, 50, 165, 5, true, 7);
  early.Use("c2", 1, er, 170, 180, 6, true, 7);
  early.events.back().write = false;
  early.events.back().wrote = 6;
  EXPECT_EQ(Check(early.events).count(Property::kStaleWriteSeen), 0);
}

TEST(CheckerTest, MoreThanKPermitHoldersIsS6NotS1) {
  synthetic::Builder b;
  const std::string a = b.FamilyGrant("c1", 1, 0, 10, 1000, "slot", std::nullopt, 2, 0);
  const std::string c = b.FamilyGrant("c2", 1, 0, 20, 1000, "slot", std::nullopt, 2, 1);
  b.Release("c1", 1, a, 500);
  b.Release("c2", 1, c, 500);
  CheckResult two = Check(b.events);
  EXPECT_TRUE(two.ok()) << "two holders of two permits: " << FormatReport(two);
  const std::string d = b.FamilyGrant("c3", 1, 0, 30, 1000, "slot", std::nullopt, 2, -1);
  b.Release("c3", 1, d, 400);
  CheckResult three = Check(b.events);
  EXPECT_EQ(three.count(Property::kMutualExclusion), 0);
  ASSERT_EQ(three.count(Property::kAtMostK), 1) << FormatReport(three);
  const Violation& v = *Of(three, Property::kAtMostK)[0];
  EXPECT_THAT(Tokens(v), UnorderedElementsAre(a, c, d));
  EXPECT_EQ(v.t, synthetic::Ms(30));
  EXPECT_EQ(v.t_end, synthetic::Ms(400));
  EXPECT_THAT(v.description, HasSubstr("3 holders of a semaphore of 2 permits"));
  EXPECT_THAT(FormatReport(three), HasSubstr("S6"));
}

TEST(CheckerTest, LeaderTermsMustIncreaseAndTwoLeadersAreS1) {
  synthetic::Builder b;
  const std::string l1 = b.FamilyGrant("c1", 1, 0, 10, 1000, "leader", 5);
  b.Release("c1", 1, l1, 100);
  const std::string l2 = b.FamilyGrant("c2", 1, 150, 160, 1000, "leader", 6);
  b.Release("c2", 1, l2, 300);
  CheckResult clean = Check(b.events);
  EXPECT_TRUE(clean.ok()) << FormatReport(clean);
  EXPECT_EQ(clean.counts.leader_grants, 2);

  const std::string l3 = b.FamilyGrant("c3", 1, 400, 410, 1000, "leader", 6);  // repeated
  b.Release("c3", 1, l3, 500);
  const std::string l4 = b.FamilyGrant("c1", 2, 600, 610, 1000, "leader", 4);  // lower
  const std::string l5 = b.FamilyGrant("c2", 2, 605, 650, 1000, "leader", 9);  // beside l4
  CheckResult r = Check(b.events);
  EXPECT_EQ(r.count(Property::kLeaderTerms), 2) << FormatReport(r);
  EXPECT_EQ(r.count(Property::kFencing), 0) << "a leader's term is judged by S7";
  ASSERT_EQ(r.count(Property::kMutualExclusion), 1);
  EXPECT_THAT(Tokens(*Of(r, Property::kMutualExclusion)[0]), UnorderedElementsAre(l4, l5));
}

TEST(CheckerTest, ReadersAreAboveTheLastWriterAndOnlyReadersShareAToken) {
  synthetic::Builder b;
  const std::string w1 = b.FamilyGrant("c1", 1, 0, 10, 1000, "exclusive", 7);
  b.Release("c1", 1, w1, 100);
  const std::string r1 = b.FamilyGrant("c2", 1, 150, 160, 1000, "shared", 8);
  const std::string r2 = b.FamilyGrant("c3", 1, 155, 165, 1000, "shared", 8);
  b.Release("c2", 1, r1, 200);
  b.Release("c3", 1, r2, 210);
  const std::string w2 = b.FamilyGrant("c1", 2, 300, 310, 1000, "exclusive", 9);
  b.Release("c1", 2, w2, 400);
  CheckResult clean = Check(b.events);
  EXPECT_TRUE(clean.ok()) << FormatReport(clean);

  // A reader with the last writer's own token (a stale writer could then
  // write under it), and a writer not above that reader.
  const std::string r3 = b.FamilyGrant("c2", 2, 500, 510, 1000, "shared", 9);
  b.Release("c2", 2, r3, 600);
  const std::string w3 = b.FamilyGrant("c3", 2, 700, 710, 1000, "exclusive", 9);
  b.Release("c3", 2, w3, 800);
  CheckResult r = Check(b.events);
  ASSERT_EQ(r.count(Property::kFencing), 3) << FormatReport(r);  // w2-r3, w2-w3, r3-w3
}

TEST(CheckerTest, PermitTokensAreComparedPerPermit) {
  synthetic::Builder b;
  const std::string a = b.FamilyGrant("c1", 1, 0, 10, 1000, "slot", 9, 2, 0);
  b.Release("c1", 1, a, 100);
  const std::string c = b.FamilyGrant("c2", 1, 200, 210, 1000, "slot", 3, 2, 1);  // other permit
  b.Release("c2", 1, c, 300);
  const std::string d = b.FamilyGrant("c3", 1, 400, 410, 1000, "slot", 10, 2, 0);
  b.Release("c3", 1, d, 500);
  CheckResult r = Check(b.events);
  EXPECT_TRUE(r.ok()) << FormatReport(r);
}

TEST(HistoryTest, FamilyFieldsRoundTripAndOldReadersDefaults) {
  synthetic::Builder b;
  b.FamilyGrant("c1", 1, 0, 10, 1000, "slot", 4, 16, 3);
  b.ReadUse("c1", 1, "tok-c1-1", 20, 30, 5);
  std::string text;
  for (const Event& e : b.events) text += FormatEventLine(e);
  EXPECT_THAT(text, HasSubstr("\"mode\":\"slot\",\"permits\":16,\"slot\":3"));
  EXPECT_THAT(text, HasSubstr("\"write\":false"));
  absl::StatusOr<std::vector<Event>> back = ParseHistory(text, "t");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[1].mode, "slot");
  EXPECT_EQ((*back)[1].permits, 16);
  EXPECT_EQ((*back)[1].slot, 3);
  EXPECT_FALSE((*back)[2].write);
  absl::StatusOr<Event> plain = ParseEventLine(
      R"({"t":1,"type":"grant","process":"p","op":1,"resource":"r","token":"x","valid_until":5})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->mode, "");
  EXPECT_EQ(plain->slot, -1);
  EXPECT_FALSE(ParseEventLine(R"({"t":1,"type":"grant","process":"p","op":1,"resource":"r",)"
                              R"("token":"x","valid_until":5,"mode":"bogus"})")
                   .ok());
}

// A client stopped between its write and the record of the use's end: its
// `end` is late, but the write was sent (write_at) before the higher token's
// write was done, so the store may well have taken it first. Not S4; the
// same write sent after the other one's was done is.
TEST(CheckerTest, AWriteSentBeforeTheHigherTokensIsNotAStaleAcceptance) {
  for (const bool sent_late : {false, true}) {
    Builder h;
    const std::string a = h.Grant("c1", 1, 0, 1, 100, 1);
    const std::string b = h.Grant("c2", 1, 0, 2, 100, 2);
    h.Use("c2", 1, b, 30, 40, 0, true, 2);
    h.events.push_back(ToEvent(UseRecord{.t = Ms(90),
                                         .process = "c1",
                                         .op = 1,
                                         .resource = "r",
                                         .token = a,
                                         .begin = Ms(3),
                                         .end = Ms(90),
                                         .read = 1,
                                         .wrote = 2,
                                         .accepted = true,
                                         .fencing_token = 1,
                                         .write_at = Ms(sent_late ? 50 : 5)}));
    CheckResult r = Check(h.events);
    EXPECT_EQ(r.count(Property::kFencing), sent_late ? 1 : 0) << FormatReport(r);
  }
}

TEST(CheckerTest, FaultsActiveAtAViolationAreListed) {
  Builder h;
  h.Nemesis(0, "kill", "n1", FaultPhase::kInstant);  // 80 s before: too old
  h.Nemesis(70'000, "partition", "n4", FaultPhase::kStart, "n4 | rest");
  h.Nemesis(70'500, "partition", "n4", FaultPhase::kStop);  // over before
  h.Nemesis(75'000, "latency", "n3", FaultPhase::kStart,
            "50ms");  // never stops
  h.Nemesis(79'000, "clock_jump", "n2", FaultPhase::kInstant, "+20s");
  h.Nemesis(79'500, "pause", "c1", FaultPhase::kStart);
  h.Nemesis(80'100, "pause", "c1", FaultPhase::kStop);
  h.Nemesis(90'000, "restart", "n1", FaultPhase::kInstant);  // after
  h.Grant("c1", 1, 79'000, 79'001, 80'090);
  h.Grant("c2", 1, 80'000, 80'001, 81'000);
  CheckResult r = Check(h.events);
  ASSERT_EQ(r.count(Property::kMutualExclusion), 1);
  const Violation& v = r.violations[0];
  std::vector<std::string> faults;
  for (const FaultInfo& f : v.faults) faults.push_back(f.fault + " " + f.target);
  EXPECT_THAT(faults, ElementsAre("latency n3", "clock_jump n2", "pause c1"));
  EXPECT_FALSE(v.faults[0].stop.has_value());
  EXPECT_THAT(FormatReport(r), HasSubstr("clock_jump n2 \"+20s\""));

  CheckOptions narrow;
  narrow.fault_window = absl::Milliseconds(500);
  CheckResult n = Check(h.events, narrow);
  faults.clear();
  for (const FaultInfo& f : n.violations[0].faults) faults.push_back(f.fault);
  EXPECT_THAT(faults, ElementsAre("latency", "pause"));
}

TEST(CheckerTest, MissingAndDuplicateEventsAreWarningsNotCrashes) {
  Builder h;
  const std::string a = h.Grant("c1", 1, 0, 1, 100);
  h.events.push_back(h.events.back());  // duplicate grant line
  h.Use("c1", 1, a, 2, 3, 0);
  h.events.push_back(h.events.back());  // duplicate use line
  h.Use("c9", 4, "tok-never-granted", 2, 3, 1);
  h.Release("c8", 2, "tok-other", 5);
  h.Nemesis(6, "pause", "c1", FaultPhase::kStop);
  h.events.push_back(
      ToEvent(InvokeRecord{.t = Ms(7), .process = "c7", .op = 1, .resource = "r"}));  // killed
  h.Final(200, 2);
  CheckResult r = Check(h.events);
  EXPECT_TRUE(r.ok()) << FormatReport(r);
  EXPECT_EQ(r.counts.duplicates, 2);
  EXPECT_EQ(r.counts.grants, 1);
  EXPECT_EQ(r.counts.uses, 2);
  EXPECT_EQ(r.counts.indeterminate, 1);
  EXPECT_THAT(r.warnings, Contains(HasSubstr("use by c9 op 4 without a grant")));
  EXPECT_THAT(r.warnings, Contains(HasSubstr("release by c8 op 2 without a grant")));
  EXPECT_THAT(r.warnings, Contains(HasSubstr("stop of pause c1 without a start")));
  EXPECT_EQ(r.warning_count, static_cast<int64_t>(r.warnings.size()));
}

TEST(CheckerTest, ExtremeValuesNeverCrash) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // Grants and uses of "r" whose every number is given.
  auto grant = [](int64_t t, const std::string& process, int64_t op, const std::string& token,
                  int64_t start_and_valid_until, uint64_t fencing) {
    return ToEvent(GrantRecord{.t = t,
                               .process = process,
                               .op = op,
                               .resource = "r",
                               .token = token,
                               .start = start_and_valid_until,
                               .valid_until = start_and_valid_until,
                               .fencing_token = fencing});
  };
  auto use = [](const std::string& process, int64_t op, const std::string& token, int64_t begin,
                int64_t end, int64_t read, int64_t wrote, uint64_t fencing) {
    return ToEvent(UseRecord{.t = 0,
                             .process = process,
                             .op = op,
                             .resource = "r",
                             .token = token,
                             .begin = begin,
                             .end = end,
                             .read = read,
                             .wrote = wrote,
                             .fencing_token = fencing});
  };
  std::vector<Event> h;
  h.push_back(grant(kMin, "a", kMin, "x", kMax, ~uint64_t{0}));
  h.push_back(grant(kMax, "b", kMax, "y", kMin, 0));
  h.push_back(use("a", kMin, "x", kMax, kMin, kMax, kMin, 0));
  h.push_back(use("b", kMax, "y", kMin, kMax, kMax, kMax, ~uint64_t{0}));
  h.push_back(ToEvent(FinalRecord{.t = kMax, .resource = "r", .counter = kMin, .initial = kMax}));
  h.push_back(ToEvent(NemesisRecord{.t = kMin, .fault = "kill"}));
  h.push_back(ToEvent(NemesisRecord{.t = kMin, .fault = "pause", .phase = FaultPhase::kStart}));
  Event unknown;
  unknown.t = kMax;
  h.push_back(unknown);
  CheckOptions options;
  options.fault_window = absl::InfiniteDuration();
  CheckResult r = Check(h, options);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(FormatReport(r).empty());
  EXPECT_FALSE(FormatReportJson(r).empty());
  options.fault_window = -absl::InfiniteDuration();
  EXPECT_FALSE(Check(h, options).ok());
}

TEST(CheckerTest, ManyOverlapsAreCountedExactlyAndKeptUpToTheLimit) {
  Builder h;
  constexpr int kGrants = 300;  // all overlapping: C(300, 2) pairs
  for (int i = 0; i < kGrants; ++i) h.Grant("c1", i, i, i + 1, 10'000);
  CheckOptions options;
  options.max_violations_per_property = 10;
  CheckResult r = Check(h.events, options);
  EXPECT_EQ(r.count(Property::kMutualExclusion), kGrants * (kGrants - 1) / 2);
  EXPECT_THAT(r.violations, SizeIs(10));
}

TEST(CheckerTest, HundredThousandGrants) {
  Builder h;
  constexpr int kGrants = 100'000;
  h.events.reserve(kGrants * 4 + 1);
  for (int i = 0; i < kGrants; ++i) {
    const int64_t t = int64_t{i} * 10;
    const std::string p = absl::StrCat("c", i % 16);
    const std::string tok = h.Grant(p, i, t, t + 1, t + 20, uint64_t(i) + 1);
    h.Use(p, i, tok, t + 2, t + 8, i, true, uint64_t(i) + 1);
    h.Release(p, i, tok, t + 9);
  }
  h.Final(int64_t{kGrants} * 10 + 5, kGrants);
  const auto start = std::chrono::steady_clock::now();
  CheckResult r = Check(h.events);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("checked %lld events in %.3f s\n", static_cast<long long>(r.counts.events), seconds);
  EXPECT_TRUE(r.ok()) << FormatReport(r);
  EXPECT_EQ(r.counts.grants, kGrants);
  EXPECT_EQ(r.counts.fenced_grants, kGrants);
}

// ---- S8: first come, first served ------------------------------------------------

// Calls served in the order they took their places, and calls that overlapped
// while taking them (either may go first): clean.
TEST(CheckerTest, FairCallsServedInTheOrderTheyQueuedAreClean) {
  synthetic::Builder b;
  const std::string a = b.FairCall("c1", 1, 0, 5, 100);
  b.Release("c1", 1, a, 150);
  // c3 began while c2 took its place: it may be served first.
  const std::string c2 = b.FairCall("c2", 1, 10, 30, 400);
  const std::string c3 = b.FairCall("c3", 1, 20, 40, 200);
  b.Release("c3", 1, c3, 300);
  b.Release("c2", 1, c2, 500);
  // Granted at once (nobody waited): no place.
  const std::string d = b.FairCall("c1", 2, 600, std::nullopt, 610);
  b.Release("c1", 2, d, 650);
  CheckResult r = Check(b.events);
  EXPECT_TRUE(r.ok()) << FormatReport(r);
  EXPECT_EQ(r.counts.fair_calls, 4);
  EXPECT_EQ(r.counts.fair_queued, 3);
  EXPECT_EQ(r.counts.max_overtakes, 1) << "c3 overtook c2, allowed";
  EXPECT_EQ(r.counts.overtaken_beyond_bound, 0);
  EXPECT_THAT(FormatReport(r), HasSubstr("S8"));
}

// A recorded overtaking: c3 began after c2 had its place and was granted
// while c2 still waited.
TEST(CheckerTest, ALaterCallGrantedWhileAnEarlierWaiterWaitsIsS8) {
  synthetic::Builder b;
  const std::string held = b.FairCall("c1", 1, 0, std::nullopt, 5);
  b.FairCall("c2", 1, 10, 20, std::nullopt, 10000);
  const std::string c3 = b.FairCall("c3", 1, 30, 40, 200);
  b.Release("c1", 1, held, 150);
  b.Release("c3", 1, c3, 300);
  b.FairEnd("c2", 1, 10030, "wait_expired", "DEADLINE_EXCEEDED");
  CheckResult r = Check(b.events);
  ASSERT_EQ(r.count(Property::kFirstCome), 1) << FormatReport(r);
  const Violation& v = *Of(r, Property::kFirstCome)[0];
  EXPECT_THAT(v.description, HasSubstr("c3 op 1"));
  EXPECT_THAT(v.description, HasSubstr("c2 op 1 still waited"));
  EXPECT_THAT(Tokens(v), ElementsAre(c3));
  EXPECT_EQ(r.count(Property::kMutualExclusion), 0);

  // The same overtaking of a waiter granted later.
  synthetic::Builder g;
  const std::string g1 = g.FairCall("c1", 1, 0, 10, 500);
  const std::string g2 = g.FairCall("c2", 1, 20, 30, 100);
  g.Release("c2", 1, g2, 200);
  g.Release("c1", 1, g1, 600);
  CheckResult late = Check(g.events);
  EXPECT_EQ(late.count(Property::kFirstCome), 1) << FormatReport(late);
}

// Excused: a waiter that lost its place, or was cancelled, or whose wait had
// run out; a waiter whose process was killed, from the kill on.
TEST(CheckerTest, AWaiterThatLeftLostItsPlaceOrDiedExcusesLaterGrants) {
  for (const std::string outcome : {"place_lost", "cancelled"}) {
    synthetic::Builder b;
    b.FairCall("c2", 1, 10, 20, std::nullopt, 10000);
    const std::string c3 = b.FairCall("c3", 1, 30, 40, 200);
    b.Release("c3", 1, c3, 300);
    b.FairEnd("c2", 1, 400, outcome);
    CheckResult r = Check(b.events);
    EXPECT_TRUE(r.ok()) << outcome << "\n" << FormatReport(r);
  }
  {
    // Its wait of 100 ms ran out at 110, before c3's grant at 200.
    synthetic::Builder b;
    b.FairCall("c2", 1, 10, 20, std::nullopt, 100);
    const std::string c3 = b.FairCall("c3", 1, 30, 40, 200);
    b.Release("c3", 1, c3, 300);
    b.FairEnd("c2", 1, 250, "wait_expired", "DEADLINE_EXCEEDED");
    CheckResult r = Check(b.events);
    EXPECT_TRUE(r.ok()) << FormatReport(r);
    // ... but a grant before its deadline is an overtaking.
    synthetic::Builder early;
    early.FairCall("c2", 1, 10, 20, std::nullopt, 1000);
    const std::string e3 = early.FairCall("c3", 1, 30, 40, 200);
    early.Release("c3", 1, e3, 300);
    early.FairEnd("c2", 1, 1100, "wait_expired", "DEADLINE_EXCEEDED");
    EXPECT_EQ(Check(early.events).count(Property::kFirstCome), 1);
  }
  {
    // Killed at 100: no end recorded; a grant after the kill is excused, one
    // before it is not.
    synthetic::Builder b;
    b.FairCall("c2", 1, 10, 20, std::nullopt, 10000);
    const std::string c3 = b.FairCall("c3", 1, 30, 40, 60);
    b.Release("c3", 1, c3, 70);
    b.Nemesis(100, "client_crash", "c2", FaultPhase::kInstant, "SIGKILL", {}, {"c2"});
    const std::string c4 = b.FairCall("c4", 1, 110, 120, 200);
    b.Release("c4", 1, c4, 300);
    CheckResult r = Check(b.events);
    ASSERT_EQ(r.count(Property::kFirstCome), 1) << FormatReport(r);
    EXPECT_THAT(Tokens(*Of(r, Property::kFirstCome)[0]), ElementsAre(c3));
  }
  {
    // Paused from 100 to 3000 while it waited (its heartbeat stopped: its
    // place lapsed), it woke past its deadline and failed wait_expired: a
    // grant after the pause began is excused, one before it is not (the
    // simulator's hour run, seed 20262055).
    synthetic::Builder b;
    b.FairCall("c2", 1, 10, 20, std::nullopt, 1000);
    const std::string c3 = b.FairCall("c3", 1, 30, 40, 60);
    b.Release("c3", 1, c3, 70);
    b.Nemesis(100, "client_pause", "c2", FaultPhase::kStart, "SIGSTOP", {}, {"c2"});
    const std::string c4 = b.FairCall("c4", 1, 110, 120, 200);
    b.Release("c4", 1, c4, 300);
    b.FairEnd("c2", 1, 3000, "wait_expired", "DEADLINE_EXCEEDED");
    CheckResult r = Check(b.events);
    ASSERT_EQ(r.count(Property::kFirstCome), 1) << FormatReport(r);
    EXPECT_THAT(Tokens(*Of(r, Property::kFirstCome)[0]), ElementsAre(c3));
  }
}

// The bound: a waiter overtaken by more calls than began while it took its
// place (here two calls of one process that overtook it, one after the
// other: the second began after the waiter had its place) is counted, and
// its second overtaker is an S8 violation.
TEST(CheckerTest, AWaiterOvertakenMoreOftenThanCallsOverlappedItsPlaceIsCounted) {
  synthetic::Builder b;
  const std::string a = b.FairCall("c1", 1, 0, 50, 400);
  const std::string x1 = b.FairCall("c2", 1, 10, 20, 100);  // overlapped c1's enqueue
  b.Release("c2", 1, x1, 150);
  const std::string x2 = b.FairCall("c2", 2, 160, 170, 200);  // after it: (a)
  b.Release("c2", 2, x2, 250);
  b.Release("c1", 1, a, 500);
  CheckResult r = Check(b.events);
  EXPECT_EQ(r.counts.max_overtakes, 2);
  EXPECT_EQ(r.counts.overtaken_beyond_bound, 1);
  ASSERT_EQ(r.count(Property::kFirstCome), 1) << FormatReport(r);
  EXPECT_THAT(Tokens(*Of(r, Property::kFirstCome)[0]), ElementsAre(x2, a)) << "overtaker, waiter";
  EXPECT_THAT(FormatReport(r), HasSubstr("1 waiters overtaken beyond the bound"));
}

TEST(HistoryTest, FairFieldsRoundTrip) {
  synthetic::Builder b;
  b.FairCall("c1", 1, 0, 5, std::nullopt, 2500);
  b.FairEnd("c1", 1, 3000, "place_lost");
  std::string text;
  for (const Event& e : b.events) text += FormatEventLine(e);
  EXPECT_THAT(text, HasSubstr("\"mode\":\"fair\",\"wait_ms\":2500"));
  EXPECT_THAT(text, HasSubstr("\"type\":\"queued\""));
  EXPECT_THAT(text, HasSubstr("\"outcome\":\"place_lost\""));
  absl::StatusOr<std::vector<Event>> back = ParseHistory(text, "t");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[0].mode, "fair");
  EXPECT_EQ((*back)[0].wait_ms, 2500);
  EXPECT_EQ((*back)[1].type, EventType::kQueued);
  EXPECT_EQ((*back)[2].outcome, "place_lost");
  EXPECT_FALSE(ParseEventLine(R"({"t":1,"type":"invoke","process":"p","op":1,"resource":"r",)"
                              R"("mode":"shared"})")
                   .ok());
}

}  // namespace
}  // namespace redlock::chaos
