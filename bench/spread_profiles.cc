#include "bench/spread_profiles.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace redlock::bench {

const std::vector<SpreadProfile>& BuiltInSpreadProfiles() {
  static const std::vector<SpreadProfile>* const kProfiles = [] {
    auto ms = [](std::vector<double> v) {
      std::vector<absl::Duration> out;
      for (double d : v) out.push_back(absl::Microseconds(d * 1000));
      return out;
    };
    return new std::vector<SpreadProfile>{
        {"one-zone", ms({0.1, 0.1, 0.1, 0.1, 0.1})},
        {"three-zones", ms({0.1, 0.1, 1, 1, 2})},
        {"two-regions", ms({1, 1, 1, 40, 40})},
        {"far-minority", ms({0.1, 0.1, 0.1, 20, 60})},
    };
  }();
  return *kProfiles;
}

std::vector<SpreadProfile> SpreadProfilesFor(const BenchSettings& settings) {
  if (settings.latency_profile.empty()) return BuiltInSpreadProfiles();
  return {SpreadProfile{"custom", settings.latency_profile, false}};
}

absl::StatusOr<std::vector<absl::Duration>> ParseLatencyProfile(absl::string_view text) {
  std::vector<absl::Duration> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    absl::Duration d;
    double ms = 0;
    if (absl::SimpleAtod(part, &ms)) {
      d = absl::Microseconds(ms * 1000);
    } else if (!absl::ParseDuration(part, &d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part, "' is not a delay (milliseconds, or a duration like 250us)"));
    }
    if (d < absl::ZeroDuration() || d > absl::Seconds(10)) {
      return absl::InvalidArgumentError(absl::StrCat("'", part, "' is not within [0, 10s]"));
    }
    out.push_back(d);
  }
  if (out.empty() || out.size() > 15) {
    return absl::InvalidArgumentError("give 1 to 15 delays, one per node");
  }
  return out;
}

}  // namespace redlock::bench
