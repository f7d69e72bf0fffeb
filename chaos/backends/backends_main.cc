// redlock-chaos-backends: the chaos harness's workload and checker against
// each lock service (chaos/backends/backend_scenarios.h): this library's Redlock,
// etcd, ZooKeeper and PostgreSQL, under a client pause, a member restart, a
// partition and a clock jump. See backends/README.md.
//
//   redlock-chaos-backends --list
//   redlock-chaos-backends --all [--plot DIR] [--keep DIR] [--json FILE] [--seed N]
//   redlock-chaos-backends --scenario etcd-client-pause [--scenario ...]
//   redlock-chaos-backends --backend zookeeper          every fault, one backend
//
// Exit status: 0 when every verdict is as expected (skipped included), 1
// otherwise, 2 on a usage error.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "chaos/backends/backend_scenarios.h"
#include "chaos/base/cleanup.h"
#include "chaos/run/report.h"
#include "common/flags.h"

ABSL_FLAG(bool, list, false, "List the scenarios and exit.");
ABSL_FLAG(bool, all, false, "Run every scenario.");
ABSL_FLAG(std::vector<std::string>, scenario, {}, "Run this scenario (repeatable; see --list).");
ABSL_FLAG(std::vector<std::string>, backend, {},
          "Run every scenario whose name starts with B- (redis, redlock, etcd, zookeeper, "
          "pg-advisory, pg-unique, pg-for-update, or pg for all three; repeatable).");
ABSL_FLAG(uint64_t, seed, redlock::chaos::RunOptions().seed,
          "Seed of the fault schedules' randomness.");
ABSL_FLAG(std::string, plot, "", "Write every scenario's timeline picture into this directory.");
ABSL_FLAG(std::string, keep, "", "Keep every scenario's histories in DIR/<scenario>/.");
ABSL_FLAG(std::string, json, "", "Write the results as JSON to this file.");
ABSL_FLAG(std::string, client_binary, "",
          "The client process binary (default: redlock-chaos-backend-client next to this one).");

int main(int argc, char** argv) {
  namespace chaos = redlock::chaos;
  const std::string usage =
      "usage: redlock-chaos-backends (--list | --all | --scenario NAME... | --backend B) "
      "[--seed N] [--plot DIR] [--keep DIR] [--json FILE]\nSee backends/README.md.";
  const redlock::flags::Parsed args =
      redlock::flags::ParseOrExit(argc, argv, "redlock-chaos-backends", usage,
                                  {.files = {"chaos/backends/backends_main.cc"},
                                   .value_names = {{"scenario", "NAME"},
                                                   {"backend", "B"},
                                                   {"plot", "DIR"},
                                                   {"keep", "DIR"},
                                                   {"json", "FILE"},
                                                   {"client_binary", "PATH"}}});
  if (const std::string* extra = args.FirstArgument()) {
    fprintf(stderr, "redlock-chaos-backends: unexpected argument '%s'\n%s\n", extra->c_str(),
            usage.c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_list)) {
    for (const auto& s : chaos::BackendCatalog()) {
      printf("%-28s expected: %-26s %s\n", s.name.c_str(), s.expect.Describe().c_str(),
             s.why.c_str());
    }
    return 0;
  }
  chaos::RunOptions options;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.plot_dir = absl::GetFlag(FLAGS_plot);
  options.keep_dir = absl::GetFlag(FLAGS_keep);
  options.client_binary = absl::GetFlag(FLAGS_client_binary);
  const std::string json_path = absl::GetFlag(FLAGS_json);
  const bool all = absl::GetFlag(FLAGS_all);
  // --scenario and --backend in the order given.
  std::vector<const chaos::BackendScenario*> todo;
  for (const auto& [flag, value] : args.given) {
    if (flag != "scenario" && flag != "backend") continue;
    for (absl::string_view n : absl::StrSplit(value, ',', absl::SkipEmpty())) {
      if (flag == "scenario") {
        const chaos::BackendScenario* s = chaos::FindBackendScenario(std::string(n));
        if (s == nullptr) {
          fprintf(stderr, "redlock-chaos-backends: no scenario \"%s\" (see --list)\n",
                  std::string(n).c_str());
          return 2;
        }
        todo.push_back(s);
      } else {
        for (const auto& s : chaos::BackendCatalog()) {
          if (s.name.rfind(absl::StrCat(n, "-"), 0) == 0) todo.push_back(&s);
        }
      }
    }
  }
  if (all) {
    for (const auto& s : chaos::BackendCatalog()) todo.push_back(&s);
  }
  if (todo.empty()) {
    fprintf(stderr, "redlock-chaos-backends: nothing to run (--all, --scenario, --backend)\n");
    return 2;
  }
  if (!options.plot_dir.empty()) std::filesystem::create_directories(options.plot_dir);
  chaos::InstallSignalCleanup();
  const absl::Time start = absl::Now();
  std::vector<chaos::ScenarioResult> results;
  for (const auto* s : todo) {
    if (chaos::Interrupted()) break;
    fprintf(stderr, "[%s] ... ", s->name.c_str());
    fflush(stderr);
    chaos::ScenarioResult r = chaos::RunBackendScenario(*s, options);
    // S5 (leftover Redis keys) means nothing for the other backends.
    fprintf(stderr, "%s\n", chaos::ProgressLine(r).c_str());
    for (const std::string& e : r.examples) fprintf(stderr, "    %s\n", e.c_str());
    for (const std::string& n : r.notes) fprintf(stderr, "    note: %s\n", n.c_str());
    results.push_back(std::move(r));
  }
  const absl::Duration total = absl::Now() - start;
  fputs(chaos::FormatTable(results, chaos::kS5).c_str(), stdout);
  bool ok = true;
  for (const auto& r : results) ok = ok && r.ok;
  printf("%zu scenarios, %s in %.1fs (seed %llu)\n", results.size(),
         ok ? "every verdict as expected" : "SOME VERDICTS NOT AS EXPECTED",
         absl::ToDoubleSeconds(total), static_cast<unsigned long long>(options.seed));
  if (!json_path.empty())
    std::ofstream(json_path) << chaos::FormatJson(results, options.seed, total);
  return ok ? 0 : 1;
}
