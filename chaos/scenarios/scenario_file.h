// chaos/scenarios/scenario_file.h: scenarios as files a person writes.
//
// One YAML file per scenario (YAML, read with Debian's yaml-cpp: it has
// comments, multi-line text for the summaries, lists written inline or as
// blocks, and yaml-cpp reports the line and column of every node, so a bad
// file gets an error that points at it). The format is documented in
// chaos/README.md ("Scenario files"); the built-in catalog is
// chaos/scenarios/*.yaml, and the explorer writes its shrunk findings in the
// same format.
//
//   absl::StatusOr<Scenario> s = ReadScenarioFile("my-test.yaml");
//   if (!s.ok()) { std::cerr << s.status().message(); }  // "my-test.yaml:12: ..."
//   ScenarioResult r = RunScenario(*s, options);
//
// Errors are kInvalidArgument with "<file>:<line>: <field>: <what is
// wrong>", naming the first problem; nothing runs. Unknown fields are errors
// (a typo must not silently change an experiment).
//
// Thread-safety: pure functions.

#ifndef REDLOCK_CHAOS_SCENARIOS_SCENARIO_FILE_H_
#define REDLOCK_CHAOS_SCENARIOS_SCENARIO_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chaos/run/scenario.h"

namespace redlock::chaos {

// Parses `text` (`source` names it in errors: a path, or "<explore>").
absl::StatusOr<Scenario> ParseScenario(absl::string_view text, absl::string_view source);
// Reads and parses one file; Scenario::file is set to `path`.
absl::StatusOr<Scenario> ReadScenarioFile(const std::string& path);
// Every *.yaml of `dir`, sorted by file name. The first
// bad file is an error (the catalog must be whole).
absl::StatusOr<std::vector<Scenario>> ReadScenarioDir(const std::string& dir);

// The file text of `s`: ParseScenario(WriteScenario(s)) gives `s` back
// (every field written explicitly where it differs from the default).
std::string WriteScenario(const Scenario& s);

// Where the built-in scenario files are: $REDLOCK_CHAOS_SCENARIOS, else the
// source tree's chaos/scenarios (compiled in), else an installed copy.
std::string DefaultScenarioDir();

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_SCENARIOS_SCENARIO_FILE_H_
