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

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chaos/check/checker.h"
#include "chaos/history/history.h"
#include "chaos/plot/plot.h"

namespace {

constexpr int kExitClean = 0;
constexpr int kExitViolations = 1;
constexpr int kExitBadInput = 2;

void Usage(std::FILE* out) {
  std::fputs(
      "usage: redlock-check HISTORY.jsonl [MORE.jsonl ...] [--json]\n"
      "                     [--skip-malformed] [--fault-window-s=SECONDS]\n"
      "                     [--max-violations=N] [--plot FILE]\n"
      "Checks a chaos history (JSON Lines) for S1 mutual exclusion, S2\n"
      "validity, S3 lost updates and S4 fencing. Files are merged by t.\n"
      "--plot FILE: also write the timeline picture (SVG) of the history.\n"
      "Exit status: 0 clean, 1 violations, 2 bad input.\n",
      out);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  bool json = false;
  bool skip_malformed = false;
  std::string plot_path;
  redlock::chaos::CheckOptions options;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "--skip-malformed") {
      skip_malformed = true;
    } else if (arg == "--plot" || absl::StartsWith(arg, "--plot=")) {
      if (arg == "--plot") {
        if (i + 1 >= argc) {
          std::fprintf(stderr, "redlock-check: --plot needs a file\n");
          return kExitBadInput;
        }
        plot_path = argv[++i];
      } else {
        plot_path = std::string(arg.substr(7));
      }
    } else if (arg == "-h" || arg == "--help") {
      Usage(stdout);
      return kExitClean;
    } else if (absl::StartsWith(arg, "--fault-window-s=")) {
      double seconds = 0;
      if (!absl::SimpleAtod(arg.substr(17), &seconds) || seconds < 0) {
        std::fprintf(stderr, "redlock-check: bad %s\n", argv[i]);
        return kExitBadInput;
      }
      options.fault_window = absl::Seconds(seconds);
    } else if (absl::StartsWith(arg, "--max-violations=")) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(arg.substr(17), &n) || n < 0) {
        std::fprintf(stderr, "redlock-check: bad %s\n", argv[i]);
        return kExitBadInput;
      }
      options.max_violations_per_property = n;
    } else if (absl::StartsWith(arg, "-") && arg != "-") {
      std::fprintf(stderr, "redlock-check: unknown option %s\n", argv[i]);
      Usage(stderr);
      return kExitBadInput;
    } else {
      paths.emplace_back(arg);
    }
  }
  if (paths.empty()) {
    Usage(stderr);
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
