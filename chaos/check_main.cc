// redlock-check: checks a chaos history for S1..S4 (see chaos/check/checker.h).
//
//   redlock-check HISTORY.jsonl [MORE.jsonl ...] [--json] [--skip-malformed]
//                 [--fault-window-s=SECONDS] [--max-violations=N] [--plot FILE]
//
// Several files are merged by t. Prints the verdict table and every violation
// (or one JSON document with --json). --plot FILE also writes the timeline
// picture of the history (chaos/plot/plot.h); a kept run's directory has what it
// needs: redlock-check DIR/<scenario>/*.jsonl --plot picture.svg. Exit status: 0 clean, 1
// violations, 2 bad input (unreadable file, malformed line without --skip-malformed, bad
// arguments).

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "chaos/check/checker.h"
#include "chaos/history/history.h"
#include "chaos/plot/plot.h"
#include "common/flags.h"

ABSL_FLAG(bool, json, false, "Print one JSON document instead of the verdict table.");
ABSL_FLAG(bool, skip_malformed, false,
          "Skip malformed lines (counted as warnings) instead of failing with exit status 2.");
ABSL_FLAG(double, fault_window_s,
          absl::ToDoubleSeconds(redlock::chaos::CheckOptions().fault_window),
          "Seconds before a violation during which an instant fault (a clock jump, a kill, "
          "a restart) is still listed as active at it.");
ABSL_FLAG(int64_t, max_violations, redlock::chaos::CheckOptions().max_violations_per_property,
          "At most this many violations reported per property.");
ABSL_FLAG(std::string, plot, "", "Also write the timeline picture (SVG) of the history here.");

namespace {

constexpr int kExitClean = 0;
constexpr int kExitViolations = 1;
constexpr int kExitBadInput = 2;

constexpr char kUsage[] =
    "usage: redlock-check HISTORY.jsonl [MORE.jsonl ...] [--json]\n"
    "                     [--skip-malformed] [--fault-window-s=SECONDS]\n"
    "                     [--max-violations=N] [--plot FILE]\n"
    "Checks a chaos history (JSON Lines; - for stdin) for S1 mutual exclusion, S2\n"
    "validity, S3 lost updates and S4 fencing. Files are merged by t.\n"
    "Exit status: 0 clean, 1 violations, 2 bad input.";

int BadInput(const std::string& message) {
  std::fprintf(stderr, "redlock-check: %s\n", message.c_str());
  return kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  const redlock::flags::Parsed args = redlock::flags::ParseOrExit(
      argc, argv, "redlock-check", kUsage,
      {.files = {"chaos/check_main.cc"},
       .value_names = {{"fault_window_s", "SECONDS"}, {"plot", "FILE"}}});
  std::vector<std::string> paths = args.positional;
  paths.insert(paths.end(), args.tail.begin(), args.tail.end());
  const bool json = absl::GetFlag(FLAGS_json);
  const bool skip_malformed = absl::GetFlag(FLAGS_skip_malformed);
  const std::string plot_path = absl::GetFlag(FLAGS_plot);
  redlock::chaos::CheckOptions options;
  const double seconds = absl::GetFlag(FLAGS_fault_window_s);
  if (seconds < 0) return BadInput(absl::StrCat("bad --fault-window-s=", seconds));
  options.fault_window = absl::Seconds(seconds);
  const int64_t max_violations = absl::GetFlag(FLAGS_max_violations);
  if (max_violations < 0) return BadInput(absl::StrCat("bad --max-violations=", max_violations));
  options.max_violations_per_property = max_violations;
  if (paths.empty()) {
    std::fprintf(stderr, "%s\n", kUsage);
    return kExitBadInput;
  }
  if (paths.size() == 1 && paths.front() == "-") paths.front() = "/dev/stdin";

  std::vector<std::string> malformed;
  absl::StatusOr<std::vector<redlock::chaos::Event>> history =
      redlock::chaos::ReadHistory(paths, skip_malformed ? &malformed : nullptr);
  if (!history.ok()) {
    std::fprintf(stderr, "redlock-check: %s%s\n", std::string(history.status().message()).c_str(),
                 history.status().code() == absl::StatusCode::kInvalidArgument
                     ? " (--skip-malformed checks the rest)"
                     : "");
    return kExitBadInput;
  }
  redlock::chaos::CheckResult result = redlock::chaos::Check(*history, options);
  if (!malformed.empty()) {
    std::vector<std::string> warnings;
    warnings.reserve(malformed.size() + result.warnings.size());
    for (std::string& m : malformed) {
      warnings.push_back(absl::StrCat("malformed line skipped: ", m));
    }
    for (std::string& w : result.warnings) warnings.push_back(std::move(w));
    result.warnings = std::move(warnings);
    result.warning_count += static_cast<int64_t>(malformed.size());
  }
  const std::string report =
      json ? redlock::chaos::FormatReportJson(result) : redlock::chaos::FormatReport(result);
  std::fwrite(report.data(), 1, report.size(), stdout);
  if (!plot_path.empty()) {
    const absl::Status s =
        redlock::chaos::WriteTextFile(plot_path, redlock::chaos::RenderTimeline(*history, result));
    if (!s.ok()) {
      std::fprintf(stderr, "redlock-check: %s\n", std::string(s.message()).c_str());
      return kExitBadInput;
    }
  }
  return result.ok() ? kExitClean : kExitViolations;
}
