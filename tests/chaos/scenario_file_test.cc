// Scenario files (chaos/scenarios/scenario_file.h) and the fault kinds'
// registry (chaos/faults/fault_kind.h), without servers: every built-in file
// parses and round-trips, and a malformed file gets an error naming the file,
// the line and the field.

#include "chaos/scenarios/scenario_file.h"

#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chaos/faults/fault_kind.h"
#include "chaos/run/scenario.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace redlock::chaos {
namespace {

using ::testing::HasSubstr;

// ---- Spans and targets ---------------------------------------------------------------

TEST(SpanTest, ParsesAbsoluteRelativeAndSums) {
  SpanScale scale{.ttl_ms = 2000, .drift_factor = 0.01};  // drift 22 ms
  struct Case {
    const char* text;
    absl::Duration want;
  } cases[] = {
      {"250ms", absl::Milliseconds(250)},
      {"1.5s", absl::Milliseconds(1500)},
      {"0", absl::ZeroDuration()},
      {"-3s", absl::Seconds(-3)},
      {"3ttl", absl::Seconds(6)},
      {"-1.5ttl", absl::Seconds(-3)},
      {"4drift", absl::Milliseconds(88)},
      {"1ttl+500ms", absl::Milliseconds(2500)},
      {"2ttl-100ms", absl::Milliseconds(3900)},
      {"ttl", absl::Seconds(2)},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Span> s = Span::Parse(c.text);
    ASSERT_TRUE(s.ok()) << c.text << ": " << s.status();
    EXPECT_EQ(s->Resolve(scale), c.want) << c.text;
    // The printed form reads back to the same span.
    absl::StatusOr<Span> back = Span::Parse(s->ToString());
    ASSERT_TRUE(back.ok()) << s->ToString();
    EXPECT_TRUE(*back == *s) << c.text << " -> " << s->ToString();
  }
  for (const char* bad : {"", "fast", "3 parsecs", "1ttx", "ms"}) {
    EXPECT_FALSE(Span::Parse(bad).ok()) << bad;
  }
}

TEST(TargetTest, ParsesAndResolves) {
  std::mt19937_64 rng(7);
  absl::StatusOr<TargetSel> list = TargetSel::Parse("[n0, 2]", false);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list->Resolve(5, -1, rng), (std::vector<int>{0, 2}));
  absl::StatusOr<TargetSel> maj = TargetSel::Parse("majority", false);
  ASSERT_TRUE(maj.ok());
  EXPECT_EQ(maj->Resolve(5, -1, rng)->size(), 3u);
  absl::StatusOr<TargetSel> c = TargetSel::Parse("c2", true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->Resolve(3, -1, rng), std::vector<int>{1});
  absl::StatusOr<TargetSel> marker = TargetSel::Parse("marker", true);
  ASSERT_TRUE(marker.ok());
  EXPECT_EQ(*marker->Resolve(3, 2, rng), std::vector<int>{2});
  EXPECT_FALSE(marker->Resolve(3, -1, rng).ok());
  EXPECT_FALSE(TargetSel::Parse("random 0", false).ok());
  EXPECT_FALSE(TargetSel::Parse("[n0, x]", false).ok());
  EXPECT_FALSE(list->Resolve(2, -1, rng).ok());  // n2 of two nodes
}

// ---- The registry ------------------------------------------------------------------

TEST(FaultKindTest, EveryKindIsComplete) {
  std::set<std::string> names;
  ASSERT_GE(AllFaultKinds().size(), 20u);
  for (const FaultKind* k : AllFaultKinds()) {
    const KindInfo& i = k->info();
    EXPECT_TRUE(names.insert(i.name).second) << "kind registered twice: " << i.name;
    EXPECT_FALSE(i.family.empty()) << i.name;
    EXPECT_FALSE(i.summary.empty()) << i.name;
    EXPECT_EQ(i.color.size(), 7u) << i.name << " colour " << i.color;
    EXPECT_EQ(FaultKindColor(i.name), i.color);
    if (i.lasting && i.explore_weight > 0) {
      EXPECT_FALSE(i.explore_duration.empty()) << i.name;
    }
    // Every parameter's default and explore range parse.
    const SpanScale scale;
    for (const ParamSpec& p : i.params) {
      if (!p.default_value.empty()) {
        EXPECT_TRUE(ParseParamValue(p, p.default_value, scale).ok()) << i.name << "." << p.name;
      }
      ParamText range = ParamText::Parse(p.explore);
      for (const std::string& v : {range.value, range.lo, range.hi}) {
        if (!v.empty()) {
          EXPECT_TRUE(ParseParamValue(p, v, scale).ok()) << i.name << "." << p.name;
        }
      }
      for (const std::string& v : range.pick) {
        EXPECT_TRUE(ParseParamValue(p, v, scale).ok()) << i.name << "." << p.name << "=" << v;
      }
    }
  }
  // A fault's parameters sit beside its entry's trigger fields in a file:
  // no parameter may take one of their names.
  for (const FaultKind* k : AllFaultKinds()) {
    for (const ParamSpec& p : k->info().params) {
      for (const char* field :
           {"at",        "repeat", "on",     "client", "lock_free", "since_start", "within",
            "otherwise", "delay",  "settle", "times",  "gap",       "until",       "until_any",
            "pick",      "faults", "after",  "fault",  "nodes",     "clients",     "for"}) {
        EXPECT_NE(p.name, field) << k->name();
      }
    }
  }
  for (const char* required :
       {"script_flush", "client_kill", "reset_after_reply", "stale_sentinel", "replication_stall",
        "slow_replies", "failover", "clock_jump", "restart", "client_pause", "partition"}) {
    EXPECT_NE(FindFaultKind(required), nullptr) << required;
  }
}

TEST(FaultKindTest, WhatAFaultMayBreakFollowsTheConfiguration) {
  const FaultKind* jump = FindFaultKind("clock_jump");
  RunShape s;
  s.node_clock_shim = true;
  s.scale = {.ttl_ms = 1000, .drift_factor = 0.01};  // drift 12 ms
  FaultInstance f;
  f.kind = jump;
  f.params["by"].span = absl::Milliseconds(6);  // within the drift allowance
  EXPECT_EQ(jump->MayViolate(s, f), 0u);
  f.params["by"].span = absl::Seconds(3);
  EXPECT_EQ(jump->MayViolate(s, f), Prop(kS1) | Prop(kS3));
  s.fencing = true;  // a fenced store keeps the harm out
  EXPECT_EQ(jump->MayViolate(s, f), Prop(kS1));
  const FaultKind* restart = FindFaultKind("restart");
  FaultInstance r;
  r.kind = restart;
  // Counters lost too: a repeated token (S4), which lets a second writer's
  // write through the fence (S3, S9).
  EXPECT_EQ(restart->MayViolate(s, r), Prop(kS1) | Prop(kS3) | Prop(kS4) | Prop(kS9));
  s.aof = true;
  EXPECT_EQ(restart->MayViolate(s, r), 0u);
  // A client paused outside its critical section breaks nothing.
  const FaultKind* pause = FindFaultKind("client_pause");
  FaultInstance p;
  p.kind = pause;
  p.duration = absl::Seconds(5);
  EXPECT_EQ(pause->MayViolate(s, p), 0u);
  p.in_use = true;
  EXPECT_EQ(pause->MayViolate(s, p), Prop(kS1) | Prop(kS2));
  EXPECT_FALSE(restart->Unsupported(s).size() > 0);
  s.replicas = 1;
  EXPECT_THAT(restart->Unsupported(s), HasSubstr("failover"));
}

// ---- Files ------------------------------------------------------------------------

TEST(ScenarioFileTest, EveryBuiltInFileParsesAndRoundTrips) {
  absl::StatusOr<std::vector<Scenario>> all = ReadScenarioDir(DefaultScenarioDir());
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_FALSE(all->empty());
  for (const Scenario& s : *all) {
    const std::string text = WriteScenario(s);
    absl::StatusOr<Scenario> back = ParseScenario(text, s.name);
    ASSERT_TRUE(back.ok()) << s.name << ": " << back.status() << "\n" << text;
    EXPECT_EQ(WriteScenario(*back), text) << s.name;
    EXPECT_EQ(back->schedule.entries.size(), s.schedule.entries.size()) << s.name;
    EXPECT_EQ(back->setup.clients.size(), s.setup.clients.size()) << s.name;
    EXPECT_EQ(back->expect.Describe(), s.expect.Describe()) << s.name;
  }
}

constexpr const char* kGood = R"(name: hand-written
expect:
  clean: all
setup:
  topology: shared-proxies
  duration: 3s
clients:
  - count: 2
    ttl: 1s
schedule:
  - at: 500ms
    fault: latency
    nodes: random 2
    latency: 10ms..40ms
    for: 1s
  - on: grant
    times: 2
    settle: 1ttl
    fault: client_pause
    clients: marker
    for: 50ms
)";

TEST(ScenarioFileTest, AHandWrittenFile) {
  absl::StatusOr<Scenario> s = ParseScenario(kGood, "good.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->setup.clients.size(), 2u);
  ASSERT_EQ(s->schedule.entries.size(), 2u);
  EXPECT_EQ(s->schedule.entries[1].trigger.type, Trigger::Type::kOnMarker);
  EXPECT_EQ(s->schedule.entries[1].faults[0].clients.mode, TargetSel::Mode::kMarker);
  EXPECT_EQ(s->expect.clean, kAllProperties);
}

// `text` with `from` replaced by `to` must be refused with an error that
// contains each of `want`.
void ExpectError(const std::string& from, const std::string& to,
                 const std::vector<std::string>& want) {
  std::string text = kGood;
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  absl::StatusOr<Scenario> s = ParseScenario(text, "bad.yaml");
  ASSERT_FALSE(s.ok()) << "accepted:\n" << text;
  EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
  for (const std::string& w : want) EXPECT_THAT(std::string(s.status().message()), HasSubstr(w));
}

TEST(ScenarioFileTest, MalformedFilesAreRefusedWithFileLineAndField) {
  // An unknown kind, naming the known ones.
  ExpectError("fault: latency", "fault: lateness", {"bad.yaml:12:", "lateness", "known kinds"});
  // A bad duration.
  ExpectError("for: 1s", "for: soon", {"bad.yaml:15:", "for", "soon"});
  // An unknown field at the top, in the setup, in a client, in an entry.
  ExpectError("name: hand-written", "name: hand-written\ncolour: red", {"bad.yaml:2:", "colour"});
  ExpectError("  duration: 3s", "  duraton: 3s", {"bad.yaml:6:", "setup.duraton", "unknown field"});
  ExpectError("    ttl: 1s", "    tll: 1s", {"bad.yaml:9:", "clients[1].tll"});
  ExpectError("    times: 2", "    tims: 2", {"bad.yaml:17:", "tims"});
  // A parameter the kind does not take.
  ExpectError("    latency: 10ms..40ms", "    latncy: 10ms",
              {"bad.yaml:14:", "latncy", "latency, jitter"});
  // The wrong type.
  ExpectError("    times: 2", "    times: twice", {"bad.yaml:17:", "times", "integer"});
  ExpectError("  - count: 2", "  - count: [2]", {"bad.yaml:8:", "count"});
  // A lasting fault without a duration; an instant with one.
  ExpectError("    for: 50ms\n", "", {"bad.yaml:16:", "client_pause", "for"});
  ExpectError("    fault: client_pause", "    fault: script_flush", {"script_flush"});
  // A kind the topology cannot run.
  ExpectError("topology: shared-proxies", "topology: direct", {"latency", "proxies"});
  // Not YAML at all.
  ExpectError("expect:\n", "expect: [\n", {"bad.yaml:", "not valid YAML"});
}

}  // namespace
}  // namespace redlock::chaos
