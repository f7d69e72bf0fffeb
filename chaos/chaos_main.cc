// redlock-chaos: runs the chaos scenarios (chaos/scenarios.h) and prints the
// verdict table. See chaos/README.md.
//
//   redlock-chaos --list
//   redlock-chaos --quick                 the CI subset
//   redlock-chaos --full                  the whole catalog
//   redlock-chaos --scenario NAME [--scenario NAME ...]
//   options: --seed N  --json FILE  --keep DIR  --plot DIR  --client-binary PATH  --verbose
//
// --plot DIR writes DIR/<scenario>.svg, a timeline picture of each run
// (chaos/plot.h), and with --quick or --full DIR/index.html, every verdict
// with its picture.
//
// Exit status: 0 when every verdict is as expected (skipped scenarios
// included), 1 when one is not, 2 on a usage error, 130 when interrupted.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "chaos/cleanup.h"
#include "chaos/plot.h"
#include "chaos/scenarios.h"

namespace {

void Usage(FILE* out) {
  fprintf(out,
          "usage: redlock-chaos (--list | --quick | --full | --scenario NAME...) [--seed N]\n"
          "                     [--json FILE] [--keep DIR] [--plot DIR] [--client-binary PATH]\n"
          "                     [--verbose]\n");
}

}  // namespace

int main(int argc, char** argv) {
  namespace chaos = redlock::chaos;
  std::vector<std::string> names;
  bool list = false, quick = false, full = false, verbose = false;
  chaos::RunOptions options;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    auto take = [&](const char* flag) -> bool {
      std::string f = flag;
      if (a == f) {
        if (i + 1 >= argc) {
          fprintf(stderr, "redlock-chaos: %s needs a value\n", flag);
          exit(2);
        }
        value = argv[++i];
        return true;
      }
      if (a.rfind(f + "=", 0) == 0) {
        value = a.substr(f.size() + 1);
        return true;
      }
      return false;
    };
    if (a == "--list") {
      list = true;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--full") {
      full = true;
    } else if (a == "--verbose" || a == "-v") {
      verbose = true;
    } else if (a == "--help" || a == "-h") {
      Usage(stdout);
      return 0;
    } else if (take("--scenario")) {
      names.push_back(value);
    } else if (take("--seed")) {
      if (!absl::SimpleAtoi(value, &options.seed)) {
        fprintf(stderr, "redlock-chaos: bad --seed %s\n", value.c_str());
        return 2;
      }
    } else if (take("--json")) {
      json_path = value;
    } else if (take("--keep")) {
      options.keep_dir = value;
    } else if (take("--plot")) {
      options.plot_dir = value;
    } else if (take("--client-binary")) {
      options.client_binary = value;
    } else {
      fprintf(stderr, "redlock-chaos: unknown argument %s\n", a.c_str());
      Usage(stderr);
      return 2;
    }
  }
  options.verbose = verbose;
  if (list) {
    fputs(chaos::FormatList().c_str(), stdout);
    return 0;
  }
  std::vector<const chaos::Scenario*> todo;
  for (const std::string& n : names) {
    const chaos::Scenario* s = chaos::FindScenario(n);
    if (s == nullptr) {
      fprintf(stderr, "redlock-chaos: no scenario \"%s\" (see --list)\n", n.c_str());
      return 2;
    }
    todo.push_back(s);
  }
  for (const chaos::Scenario& s : chaos::Catalog()) {
    if (full || (quick && s.quick)) {
      bool dup = false;
      for (const auto* t : todo) dup = dup || t == &s;
      if (!dup) todo.push_back(&s);
    }
  }
  if (todo.empty()) {
    Usage(stderr);
    return 2;
  }
  if (!options.plot_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.plot_dir, ec);
    if (ec) {
      fprintf(stderr, "redlock-chaos: cannot create %s: %s\n", options.plot_dir.c_str(),
              ec.message().c_str());
      return 2;
    }
  }
  chaos::InstallSignalCleanup();
  fprintf(stderr, "redlock-chaos: %zu scenario(s), seed %llu, client %s\n", todo.size(),
          static_cast<unsigned long long>(options.seed),
          (options.client_binary.empty() ? chaos::DefaultClientBinary() : options.client_binary)
              .c_str());
  absl::Time start = absl::Now();
  bool plots_missing = false;
  std::vector<chaos::ScenarioResult> results;
  for (const chaos::Scenario* s : todo) {
    if (chaos::Interrupted()) break;
    fprintf(stderr, "[%s] %s ... ", s->name.c_str(), s->config.c_str());
    fflush(stderr);
    chaos::ScenarioResult r = chaos::RunScenario(*s, options);
    fprintf(stderr, "%s\n", chaos::ProgressLine(r, chaos::kNumHarnessProperties).c_str());
    if (verbose || !r.ok) {
      for (const std::string& e : r.examples) fprintf(stderr, "    %s\n", e.c_str());
      for (const std::string& n : r.notes) fprintf(stderr, "    note: %s\n", n.c_str());
    }
    if (!options.plot_dir.empty() && !r.skipped && r.plot_path.empty()) {
      fprintf(stderr, "    no picture of %s was written (see the notes)\n", r.name.c_str());
      plots_missing = true;
    }
    results.push_back(std::move(r));
  }
  absl::Duration total = absl::Now() - start;
  fputs(chaos::FormatTable(results).c_str(), stdout);
  bool all_ok = true;
  int skipped = 0;
  for (const auto& r : results) {
    all_ok = all_ok && r.ok;
    skipped += r.skipped;
  }
  printf("%zu scenarios, %d skipped, %s in %.1fs (seed %llu)\n", results.size(), skipped,
         all_ok ? "every verdict as expected" : "SOME VERDICTS NOT AS EXPECTED",
         absl::ToDoubleSeconds(total), static_cast<unsigned long long>(options.seed));
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << chaos::FormatJson(results, options.seed, total);
    if (!out) {
      fprintf(stderr, "redlock-chaos: cannot write %s\n", json_path.c_str());
      return 2;
    }
  }
  if (!options.plot_dir.empty() && (quick || full)) {
    const std::string index = options.plot_dir + "/index.html";
    absl::Status s =
        chaos::WriteTextFile(index, chaos::FormatIndexHtml(results, options.seed, total));
    if (!s.ok()) {
      fprintf(stderr, "redlock-chaos: %s\n", s.ToString().c_str());
      return 2;
    }
    fprintf(stderr, "redlock-chaos: pictures and %s written\n", index.c_str());
  }
  if (chaos::Interrupted()) return 130;
  return all_ok && !plots_missing ? 0 : 1;
}
