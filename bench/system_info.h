// What redlock-bench prints about the machine and the software it ran on,
// so figures are never read without their context.

#ifndef REDLOCK_BENCH_SYSTEM_INFO_H_
#define REDLOCK_BENCH_SYSTEM_INFO_H_

#include <string>
#include <vector>

namespace redlock::bench {

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name"
  int cores_online = 0;   // sysconf(_SC_NPROCESSORS_ONLN)
  int cores_usable = 0;   // sched_getaffinity
  std::string kernel;     // uname: sysname release machine
  long long mem_total_kb = 0;
};

struct VersionInfo {
  std::string redis_server;  // `redis-server --version`, or why not
  std::string hiredis;       // from the hiredis headers, e.g. "0.14.1"
  std::string compiler;      // e.g. "g++ 12.2.0"
  std::string build_type;    // CMAKE_BUILD_TYPE
  std::string sanitizer;     // REDLOCK_SANITIZE ("" for none)
  bool assertions = false;   // built without NDEBUG
  std::string redlock;       // project version
  std::string benchmark;     // Google Benchmark (redlock_benchmarks only)
};

MachineInfo GetMachineInfo();
// `redis_server` is the binary the fleet starts (looked up on PATH).
VersionInfo GetVersionInfo(const std::string& redis_server);

// Non-empty when the build makes figures unrepresentative (Debug,
// sanitizers, assertions on).
std::vector<std::string> BuildWarnings(const VersionInfo& v);

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_SYSTEM_INFO_H_
