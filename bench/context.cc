#include "bench/context.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/workload.h"

namespace redlock::bench {

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kSmoke:
      return "smoke";
    case Mode::kQuick:
      return "quick";
    case Mode::kFull:
      return "full";
  }
  return "?";
}

NodeSet::NodeSet(std::unique_ptr<testkit::Fleet> fleet)
    : fleet_(std::move(fleet)), nodes_(fleet_->endpoints()) {}
NodeSet::NodeSet(std::vector<Endpoint> nodes) : nodes_(std::move(nodes)) {}
NodeSet::~NodeSet() = default;

std::vector<Endpoint> NodeSet::First(int n) const {
  return std::vector<Endpoint>(nodes_.begin(), nodes_.begin() + std::min(n, size()));
}

Progress::Progress(int total_groups)
    : total_(total_groups), tty_(isatty(STDERR_FILENO) == 1), start_ns_(NowNs()) {}

Progress::~Progress() { Done(); }

void Progress::Group(int index, const std::string& label) {
  index_ = index;
  group_ = label;
  Print("");
}

void Progress::Row(const std::string& label) { Print(label); }

void Progress::Print(const std::string& text) {
  const int64_t secs = (NowNs() - start_ns_) / 1'000'000'000;
  std::string line = absl::StrFormat("[%2d/%d %d:%02d] %s%s%s", index_, total_, secs / 60,
                                     secs % 60, group_, text.empty() ? "" : ": ", text);
  if (tty_) {
    fprintf(stderr, "\r\033[K%s", line.c_str());
    dirty_ = true;
  } else {
    fprintf(stderr, "%s\n", line.c_str());
  }
  fflush(stderr);
}

void Progress::Done() {
  if (tty_ && dirty_) {
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
  }
  dirty_ = false;
}

std::string Context::RowKey() { return absl::StrCat("rb:", settings.run_id, ":", ++next_row); }

}  // namespace redlock::bench
