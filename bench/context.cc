#include "bench/context.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/workload.h"
#include "testkit/redis.h"

namespace redlock::bench {
namespace {

// user+sys of one process, in microseconds; -1 when unreadable.
int64_t ProcessCpuUs(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(f, line)) return -1;
  // The command name (field 2) is in parentheses and may hold spaces.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields = absl::StrSplit(line.substr(close + 2), ' ');
  // fields[0] is field 3 (state): utime is field 14, stime field 15.
  int64_t utime = 0;
  int64_t stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return -1;
  }
  const long ticks = sysconf(_SC_CLK_TCK);
  return (utime + stime) * 1'000'000 / (ticks > 0 ? ticks : 100);
}

// used_cpu_user + used_cpu_sys from INFO cpu (the server's own
// getrusage), in microseconds; -1 when unavailable.
int64_t InfoCpuUs(const Endpoint& ep) {
  absl::StatusOr<testkit::RedisValue> info =
      testkit::RunCommand(ep, {"INFO", "cpu"}, absl::Seconds(2));
  if (!info.ok() || info->type == testkit::RedisValue::Type::kError) return -1;
  double user = -1;
  double sys = -1;
  for (absl::string_view line : absl::StrSplit(info->str, "\r\n")) {
    if (absl::ConsumePrefix(&line, "used_cpu_user:")) (void)absl::SimpleAtod(line, &user);
    if (absl::ConsumePrefix(&line, "used_cpu_sys:")) (void)absl::SimpleAtod(line, &sys);
  }
  if (user < 0 || sys < 0) return -1;
  return std::llround((user + sys) * 1e6);
}

}  // namespace

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

int64_t NodeSet::ServersCpuUs(int n) const {
  int64_t total = 0;
  for (int i = 0; i < std::min(n, size()); ++i) {
    const int64_t us = fleet_ != nullptr ? ProcessCpuUs(fleet_->pid(i))
                                         : InfoCpuUs(nodes_[static_cast<size_t>(i)]);
    if (us < 0) return -1;
    total += us;
  }
  return total;
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
