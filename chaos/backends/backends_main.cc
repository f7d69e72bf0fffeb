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

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "chaos/backends/backend_scenarios.h"
#include "chaos/base/cleanup.h"
#include "chaos/run/report.h"

int main(int argc, char** argv) {
  namespace chaos = redlock::chaos;
  std::vector<const chaos::BackendScenario*> todo;
  chaos::RunOptions options;
  std::string json_path;
  bool all = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "redlock-chaos-backends: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--list") {
      for (const auto& s : chaos::BackendCatalog()) {
        printf("%-28s expected: %-26s %s\n", s.name.c_str(), s.expect.Describe().c_str(),
               s.why.c_str());
      }
      return 0;
    } else if (a == "--all") {
      all = true;
    } else if (a == "--scenario") {
      const std::string n = value();
      const chaos::BackendScenario* s = chaos::FindBackendScenario(n);
      if (s == nullptr) {
        fprintf(stderr, "redlock-chaos-backends: no scenario \"%s\" (see --list)\n", n.c_str());
        return 2;
      }
      todo.push_back(s);
    } else if (a == "--backend") {
      const std::string n = value();
      for (const auto& s : chaos::BackendCatalog()) {
        if (s.name.rfind(n + "-", 0) == 0) todo.push_back(&s);
      }
    } else if (a == "--seed") {
      if (!absl::SimpleAtoi(value(), &options.seed)) return 2;
    } else if (a == "--plot") {
      options.plot_dir = value();
    } else if (a == "--keep") {
      options.keep_dir = value();
    } else if (a == "--json") {
      json_path = value();
    } else if (a == "--client-binary") {
      options.client_binary = value();
    } else {
      fprintf(stderr,
              "usage: redlock-chaos-backends (--list | --all | --scenario NAME... | --backend B) "
              "[--seed N] [--plot DIR] [--keep DIR] [--json FILE]\n");
      return 2;
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
