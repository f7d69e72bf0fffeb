// The chaos scenario files: any bytes through the YAML reader and the
// scenario checks (ParseScenario); what parses is written back
// (WriteScenario) and must parse again to the same text.

#include "chaos/scenarios/scenario_file.h"

#include <string>

#include "fuzz/entries.h"

namespace redlock::fuzz {

int ScenarioText(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<chaos::Scenario> s = chaos::ParseScenario(text, "fuzz");
  if (!s.ok()) {
    REDLOCK_FUZZ_CHECK(absl::IsInvalidArgument(s.status()), "a bad file is kInvalidArgument");
    return 0;
  }
  const std::string written = chaos::WriteScenario(*s);
  absl::StatusOr<chaos::Scenario> again = chaos::ParseScenario(written, "fuzz-written");
  REDLOCK_FUZZ_CHECK(again.ok(), "a written scenario parses");
  REDLOCK_FUZZ_CHECK(chaos::WriteScenario(*again) == written, "write, parse, write is stable");
  return 0;
}

}  // namespace redlock::fuzz
