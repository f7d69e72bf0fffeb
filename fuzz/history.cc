// The chaos history reader: ParseHistory (and so ParseEventLine), the line
// writer it must agree with, and the checker that reads what it parsed.

#include "chaos/history/history.h"

#include <string>
#include <vector>

#include "chaos/check/checker.h"
#include "fuzz/entries.h"

namespace redlock::fuzz {

int HistoryText(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<chaos::Event>> strict = chaos::ParseHistory(text, "fuzz");
  std::vector<std::string> malformed;
  absl::StatusOr<std::vector<chaos::Event>> lenient = chaos::ParseHistory(text, "fuzz", &malformed);
  REDLOCK_FUZZ_CHECK(lenient.ok(), "a lenient parse always succeeds");
  REDLOCK_FUZZ_CHECK(strict.ok() == malformed.empty(), "strict fails exactly on a malformed line");
  for (const chaos::Event& e : *lenient) {
    // What is read can be written, and the written line reads back the same.
    const std::string line = chaos::FormatEventLine(e);
    absl::StatusOr<chaos::Event> again = chaos::ParseEventLine(line, e.source);
    REDLOCK_FUZZ_CHECK(again.ok(), "a formatted event parses");
    REDLOCK_FUZZ_CHECK(chaos::FormatEventLine(*again) == line, "format, parse, format is stable");
  }
  if (lenient->size() <= 256) {
    chaos::CheckResult result = chaos::Check(*lenient);
    (void)chaos::FormatReport(result);
    (void)chaos::FormatReportJson(result);
  }
  return 0;
}

}  // namespace redlock::fuzz
