#include "bench/system_info.h"

#include <hiredis/hiredis.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "testkit/process.h"

#ifndef REDLOCK_BENCH_BUILD_TYPE
#define REDLOCK_BENCH_BUILD_TYPE "unknown"
#endif
#ifndef REDLOCK_BENCH_SANITIZE
#define REDLOCK_BENCH_SANITIZE ""
#endif
#ifndef REDLOCK_BENCH_PROJECT_VERSION
#define REDLOCK_BENCH_PROJECT_VERSION "unknown"
#endif

namespace redlock::bench {
namespace {

// The first line `argv` prints on stdout, within a few seconds ("" if none).
std::string FirstLineOf(std::vector<std::string> argv) {
  testkit::ProcessOptions o;
  o.argv = std::move(argv);
  o.stdout_to = testkit::Stream::kPipe;
  absl::StatusOr<testkit::ProcessResult> r = testkit::RunProcess(std::move(o), absl::Seconds(5));
  if (!r.ok() || r->timed_out) return "";
  return std::string(absl::StripAsciiWhitespace(r->out.substr(0, r->out.find('\n'))));
}

}  // namespace

MachineInfo GetMachineInfo() {
  MachineInfo m;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line)) {
    if (absl::StartsWith(line, "model name")) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        m.cpu_model = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
      break;
    }
  }
  if (m.cpu_model.empty()) m.cpu_model = "unknown";
  m.cores_online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  m.cores_usable = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : m.cores_online;
  utsname u{};
  if (uname(&u) == 0) m.kernel = absl::StrCat(u.sysname, " ", u.release, " ", u.machine);
  std::ifstream mem("/proc/meminfo");
  while (std::getline(mem, line)) {
    if (absl::StartsWith(line, "MemTotal:")) {
      m.mem_total_kb = std::strtoll(line.c_str() + 9, nullptr, 10);
      break;
    }
  }
  return m;
}

VersionInfo GetVersionInfo(const std::string& redis_server) {
  VersionInfo v;
  v.redis_server = FirstLineOf({redis_server, "--version"});
  if (v.redis_server.empty()) v.redis_server = absl::StrCat(redis_server, ": not found");
  v.hiredis = absl::StrCat(HIREDIS_MAJOR, ".", HIREDIS_MINOR, ".", HIREDIS_PATCH);
#if defined(__clang__)
  v.compiler =
      absl::StrCat("clang++ ", __clang_major__, ".", __clang_minor__, ".", __clang_patchlevel__);
#elif defined(__GNUC__)
  v.compiler = absl::StrCat("g++ ", __GNUC__, ".", __GNUC_MINOR__, ".", __GNUC_PATCHLEVEL__);
#else
  v.compiler = "unknown";
#endif
  v.build_type = REDLOCK_BENCH_BUILD_TYPE;
  if (v.build_type.empty()) v.build_type = "(none)";
  v.sanitizer = REDLOCK_BENCH_SANITIZE;
#ifdef NDEBUG
  v.assertions = false;
#else
  v.assertions = true;
#endif
  v.redlock = REDLOCK_BENCH_PROJECT_VERSION;
  return v;
}

std::vector<std::string> BuildWarnings(const VersionInfo& v) {
  std::vector<std::string> out;
  if (!v.sanitizer.empty()) {
    out.push_back(
        absl::StrCat("sanitizer build (", v.sanitizer, "): figures are not representative"));
  }
  if (v.build_type == "Debug" || v.build_type == "(none)") {
    out.push_back(absl::StrCat("build type ", v.build_type,
                               ": compile with -DCMAKE_BUILD_TYPE=Release or RelWithDebInfo"));
  }
  return out;
}

}  // namespace redlock::bench
