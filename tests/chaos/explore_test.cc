// The explorer's pure parts (chaos/explore/explore.h): schedules are
// deterministic in their seed and use only what the topology supports, and
// shrinking reduces a failing schedule to the faults that matter.

#include "chaos/explore/explore.h"

#include <set>
#include <string>

#include "chaos/scenarios/scenario_file.h"
#include "gtest/gtest.h"

namespace redlock::chaos {
namespace {

RunShape ShapeOfPreset(const std::string& name) {
  absl::StatusOr<Scenario> s = TopologyPreset(name, absl::Seconds(10));
  EXPECT_TRUE(s.ok()) << s.status();
  return ShapeOf(s->setup);
}

TEST(GenerateTest, TheSameSeedGivesTheSameSchedule) {
  for (const std::string& t : TopologyPresets()) {
    const RunShape shape = ShapeOfPreset(t);
    std::mt19937_64 a(42), b(42), c(43);
    const std::string one = DescribeSchedule(GenerateSchedule(shape, absl::Seconds(10), a));
    const std::string two = DescribeSchedule(GenerateSchedule(shape, absl::Seconds(10), b));
    const std::string other = DescribeSchedule(GenerateSchedule(shape, absl::Seconds(10), c));
    EXPECT_EQ(one, two) << t;
    EXPECT_NE(one, other) << t;
    EXPECT_FALSE(one.empty()) << t;
  }
}

TEST(GenerateTest, SchedulesUseOnlyWhatTheTopologySupportsAndFitTheBudget) {
  for (const std::string& t : TopologyPresets()) {
    absl::StatusOr<Scenario> s = TopologyPreset(t, absl::Seconds(8));
    ASSERT_TRUE(s.ok());
    std::set<std::string> kinds;
    for (uint64_t seed = 1; seed <= 30; ++seed) {
      std::mt19937_64 rng(seed);
      s->schedule = GenerateSchedule(ShapeOf(s->setup), absl::Seconds(8), rng);
      // ValidateScenario checks every fault against the shape.
      ASSERT_TRUE(ValidateScenario(*s).ok())
          << t << " seed " << seed << ": " << ValidateScenario(*s);
      for (const ScheduleEntry& e : s->schedule.entries) {
        kinds.insert(e.faults[0].kind);
        const absl::Duration end =
            e.trigger.at.Resolve(ShapeOf(s->setup).scale) +
            (e.faults[0].duration_lo ? e.faults[0].duration_lo->Resolve(ShapeOf(s->setup).scale)
                                     : absl::ZeroDuration());
        EXPECT_LE(end, absl::Seconds(8)) << t << " " << DescribeTemplate(e.faults[0]);
      }
      // A generated run is a file like any other.
      absl::StatusOr<Scenario> back = ParseScenario(WriteScenario(*s), "generated");
      ASSERT_TRUE(back.ok()) << back.status();
    }
    // Over 30 seeds every kind the topology supports shows up at least once
    // (no kind is starved by the weights).
    for (const FaultKind* k : ExplorableKinds(ShapeOf(s->setup))) {
      EXPECT_TRUE(kinds.count(k->name())) << t << " never drew " << k->name();
    }
  }
}

// A synthetic failure: the run "fails" while the schedule keeps a clock jump
// on n2 and a pause on n4 (the essential faults); the rest is noise.
TEST(ShrinkTest, ReducesASyntheticFailureToItsEssentialFaults) {
  absl::StatusOr<Scenario> s = TopologyPreset("direct", absl::Seconds(10));
  ASSERT_TRUE(s.ok());
  std::mt19937_64 rng(5);
  // Noise of other kinds than the two essential faults.
  Schedule noisy = GenerateSchedule(ShapeOf(s->setup), absl::Seconds(10), rng,
                                    {"restart", "kill", "client_pause", "script_flush"});
  auto entry = [](const std::string& kind, int node, const std::string& dur) {
    ScheduleEntry e;
    e.trigger.at = *Span::Parse("1s");
    FaultTemplate f;
    f.kind = kind;
    f.nodes = TargetSel::List({node});
    if (!dur.empty()) f.duration_lo = f.duration_hi = *Span::Parse(dur);
    e.faults.push_back(f);
    return e;
  };
  noisy.entries.insert(noisy.entries.begin() + 1, entry("clock_jump", 2, ""));
  noisy.entries.push_back(entry("pause", 4, "1600ms"));
  ASSERT_GE(noisy.entries.size(), 4u);
  int runs = 0;
  auto fails = [&](const Schedule& c) {
    ++runs;
    bool jump = false, pause = false;
    for (const ScheduleEntry& e : c.entries) {
      const FaultTemplate& f = e.faults[0];
      jump = jump || (f.kind == "clock_jump" && f.nodes.list == std::vector<int>{2});
      // The pause matters only while it lasts 400 ms or more.
      pause = pause || (f.kind == "pause" && f.nodes.list == std::vector<int>{4} &&
                        f.duration_lo->ms >= 400);
    }
    return jump && pause;
  };
  std::vector<ShrinkStep> log;
  Schedule shrunk = Shrink(noisy, fails, 100, &log);
  ASSERT_EQ(shrunk.entries.size(), 2u) << DescribeSchedule(shrunk);
  EXPECT_TRUE(fails(shrunk));
  // Halved twice: 1600 -> 800 -> 400 ms, and no further (200 ms passes).
  for (const ScheduleEntry& e : shrunk.entries) {
    if (e.faults[0].kind == "pause") {
      EXPECT_EQ(e.faults[0].duration_lo->ms, 400);
    }
  }
  EXPECT_FALSE(log.empty());
  // Bounded: never more reruns than asked.
  runs = 0;
  Shrink(noisy, fails, 3, nullptr);
  EXPECT_EQ(runs, 3);
}

// A run's result with one violation and one fault, for the judging tests.
ScenarioResult OneViolation(int property, std::vector<std::string> processes, int64_t t_s) {
  ScenarioResult r;
  r.max_ttl_ms = 1000;
  r.violations[static_cast<size_t>(property)] = 1;
  if (property < kS5) {
    r.violation_refs.push_back({.property = property,
                                .processes = std::move(processes),
                                .t = t_s * 1000000000,
                                .t_end = t_s * 1000000000 + 1000000});
  }
  return r;
}

ScenarioResult::InjectedFault Fault(PropertySet may, std::vector<std::string> scope, int64_t from_s,
                                    int64_t to_s) {
  return {.may_violate = may,
          .scope = std::move(scope),
          .begin_raw = from_s * 1000000000,
          .end_raw = to_s * 1000000000};
}

TEST(JudgeTest, AFaultExplainsWhatItMayBreakWhereAndWhenItActed) {
  // No fault: every violation is a finding.
  ScenarioResult r = OneViolation(kS1, {"c1", "c2"}, 10);
  EXPECT_EQ(Unexplained(r), Prop(kS1));
  // A run-wide fault that may break S1, acting at the time: explained.
  r.injected_faults = {Fault(Prop(kS1), {}, 9, 9)};
  EXPECT_EQ(Unexplained(r), 0u);
  // ... or within a lease (1 s) plus a second after its end.
  r.injected_faults = {Fault(Prop(kS1), {}, 7, 8)};
  EXPECT_EQ(Unexplained(r), 0u);
  // Long before: a finding.
  r.injected_faults = {Fault(Prop(kS1), {}, 1, 2)};
  EXPECT_EQ(Unexplained(r), Prop(kS1));
  // After it: a finding.
  r.injected_faults = {Fault(Prop(kS1), {}, 11, 12)};
  EXPECT_EQ(Unexplained(r), Prop(kS1));
  // A fault that may break another property only: a finding.
  r.injected_faults = {Fault(Prop(kS3), {}, 9, 10)};
  EXPECT_EQ(Unexplained(r), Prop(kS1));
  // A client's fault explains only violations its client takes part in, and
  // only when its client held the lock when it began (the history says).
  r.holds = {{.process = "c2", .from = 8500000000, .to = 9500000000},
             {.process = "c3", .from = 8500000000, .to = 9500000000}};
  r.injected_faults = {Fault(Prop(kS1), {"c3"}, 9, 10)};
  EXPECT_EQ(Unexplained(r), Prop(kS1));
  r.injected_faults = {Fault(Prop(kS1), {"c2"}, 9, 10)};
  EXPECT_EQ(Unexplained(r), 0u);
  r.injected_faults = {Fault(Prop(kS1), {"c2"}, 8, 10)};  // began before c2 held the lock
  EXPECT_EQ(Unexplained(r), Prop(kS1));
  // S5 and L1 have no processes: any fault that may break them explains them.
  ScenarioResult l = OneViolation(kL1, {}, 0);
  EXPECT_EQ(Unexplained(l), Prop(kL1));
  l.injected_faults = {Fault(Prop(kL1), {}, 1, 2)};
  EXPECT_EQ(Unexplained(l), 0u);
}

TEST(ExploreTest, DocumentedSafeIsTheComplement) {
  EXPECT_EQ(DocumentedSafe(0), kAllProperties);
  EXPECT_EQ(DocumentedSafe(Prop(kS1) | Prop(kS3)) & (Prop(kS1) | Prop(kS3)), 0u);
  EXPECT_TRUE(DocumentedSafe(Prop(kS1)) & Prop(kL1));
}

}  // namespace
}  // namespace redlock::chaos
