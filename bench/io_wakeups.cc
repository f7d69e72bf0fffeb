// redlock-io-wakeups: how often a client's I/O thread wakes (issue 41 item
// 2). Starts a fleet of --nodes local servers (testkit/fleet.h), makes a
// client, finds its I/O thread (the one thread Client::Create added), and
// reads that thread's context switches (voluntary and not, from
// /proc/self/task/<tid>/status) over four phases of --seconds each: idle,
// a lone synchronous caller cycling back to back, the same caller with a
// 10 ms pause after each acquire+release, and idle again. Prints the
// thread's wake-ups per second in each phase.

#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "common/flags.h"
#include "redlock/client.h"
#include "testkit/fleet.h"

ABSL_FLAG(int, nodes, 1, "Local redis-server processes to start (the client's nodes).");
ABSL_FLAG(int, seconds, 3, "Length of each of the four phases, in seconds.");

namespace {

using Clock = std::chrono::steady_clock;

std::set<int> Threads() {
  std::set<int> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    int tid = 0;
    if (absl::SimpleAtoi(e->d_name, &tid)) out.insert(tid);
  }
  closedir(dir);
  return out;
}

// Voluntary plus involuntary context switches of thread `tid`.
long Switches(int tid) {
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  long total = 0;
  while (std::getline(status, line)) {
    const bool counter = line.rfind("voluntary_ctxt_switches", 0) == 0 ||
                         line.rfind("nonvoluntary_ctxt_switches", 0) == 0;
    long value = 0;
    if (counter && absl::SimpleAtoi(line.substr(line.find(':') + 1), &value)) total += value;
  }
  return total;
}

// One acquire+release; a failure is counted, not fatal (the figure is the
// thread's wake-ups, not the calls'), and the first of a phase is printed.
absl::Status Cycle(redlock::Client& client) {
  absl::StatusOr<redlock::Lease> lease = client.TryAcquire("io-wakeups", absl::Seconds(10));
  if (!lease.ok()) return lease.status();
  return client.Release(*lease);
}

}  // namespace

int main(int argc, char** argv) {
  const redlock::flags::Parsed args = redlock::flags::ParseOrExit(
      argc, argv, "redlock-io-wakeups",
      "usage: redlock-io-wakeups [--nodes N] [--seconds S]\n"
      "The client's I/O thread's wake-ups per second: idle, with a lone synchronous\n"
      "caller back to back, with one pausing 10 ms between cycles, idle again.",
      {.files = {"bench/io_wakeups.cc"}, .value_names = {{"nodes", "N"}, {"seconds", "S"}}});
  const int nodes = absl::GetFlag(FLAGS_nodes);
  const int seconds = absl::GetFlag(FLAGS_seconds);
  if (!args.positional.empty() || !args.tail.empty() || nodes < 1 || nodes > 15 || seconds < 1 ||
      seconds > 600) {
    std::fprintf(stderr,
                 "redlock-io-wakeups: --nodes 1..15 and --seconds 1..600, no other argument "
                 "(see --help)\n");
    return 2;
  }
  auto fleet = redlock::testkit::Fleet::Start({.nodes = nodes});
  if (!fleet.ok()) {
    std::fprintf(stderr, "the fleet did not start: %s\n", fleet.status().ToString().c_str());
    return 1;
  }
  redlock::Options options;
  options.nodes = (*fleet)->endpoints();
  const std::set<int> before = Threads();
  auto client = redlock::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  int io = -1;
  int added = 0;
  for (int tid : Threads()) {
    if (before.count(tid) == 0) {
      io = tid;
      ++added;
    }
  }
  if (added != 1) {
    std::fprintf(stderr, "expected one new thread (the I/O thread), found %d\n", added);
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto phase = Clock::duration(std::chrono::seconds(seconds));
  auto measure = [&](const char* what, const std::function<long()>& body) {
    const long s0 = Switches(io);
    const Clock::time_point t0 = Clock::now();
    const long cycles = body();
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    const long wakeups = Switches(io) - s0;
    std::printf("N=%d %-44s %8.1f wake-ups/s", nodes, what, wakeups / elapsed);
    if (cycles > 0) {
      std::printf("  (%ld cycles, %.2f per cycle)", cycles, static_cast<double>(wakeups) / cycles);
    }
    std::printf("\n");
  };
  auto caller = [&](std::chrono::milliseconds pause) {
    long cycles = 0;
    long failed = 0;
    const Clock::time_point end = Clock::now() + phase;
    while (Clock::now() < end) {
      const absl::Status status = Cycle(**client);
      if (!status.ok() && failed++ == 0) {
        std::fprintf(stderr, "first failed cycle: %s\n", status.ToString().c_str());
      }
      ++cycles;
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
    }
    if (failed > 0) std::fprintf(stderr, "%ld of %ld cycles failed\n", failed, cycles);
    return cycles;
  };
  auto idle = [&] {
    std::this_thread::sleep_for(phase);
    return 0L;
  };
  measure("idle", idle);
  measure("one synchronous caller, back to back", [&] { return caller({}); });
  measure("one synchronous caller, 10 ms between cycles",
          [&] { return caller(std::chrono::milliseconds(10)); });
  measure("idle again", idle);
  return 0;
}
