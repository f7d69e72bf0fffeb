// redlock-chaos: runs chaos scenarios (files: chaos/scenarios/*.yaml, or a
// user's) and prints the verdict table; or explores random fault schedules.
// See chaos/README.md.
//
//   redlock-chaos --list
//   redlock-chaos --kinds                 every fault kind, its parameters and ranges
//   redlock-chaos --quick                 the CI subset of the catalog
//   redlock-chaos --full                  the whole catalog
//   redlock-chaos --core                  the core scenarios (kCoreScenarios), e.g.
//                                         with --server valkey-9.1
//   redlock-chaos --scenario NAME [--scenario NAME ...]
//   redlock-chaos --file PATH [--file PATH ...]
//   redlock-chaos --explore [--runs K] [--duration T] [--topology NAME ...]
//                 [--kinds a,b] [--out DIR] [--shrink-runs N]
//   redlock-chaos --compare library,node-redlock,redis-py --scenario NAME...
//                                         the same scenarios per client, side by side
//   options: --seed N  --client NAME  --scenarios DIR  --json FILE  --keep DIR
//            --plot DIR  --client-binary PATH  --verbose
//            --server NAME   the servers the scenarios start: redis-7.0 (Debian's,
//                            the default), valkey-8.0, valkey-9.1, redis-8.0
//                            (testkit/servers.h; default $REDLOCK_SERVER)
//
// Exit status: 0 when every verdict is as expected (skipped scenarios
// included) and, with --explore, when no run violated a property its
// configuration is documented to keep; 1 otherwise; 2 on a usage error or a
// bad scenario file (nothing runs); 130 when interrupted.

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chaos/base/cleanup.h"
#include "chaos/explore/explore.h"
#include "chaos/plot/plot.h"
#include "chaos/run/report.h"
#include "chaos/scenarios/scenario_file.h"
#include "common/flags.h"
#include "testkit/servers.h"

ABSL_FLAG(bool, list, false, "List the scenarios of the catalog and exit.");
ABSL_FLAG(std::string, kinds, "",
          "Alone: print every fault kind, its parameters and ranges, and exit. With --explore "
          "and a value (a,b): draw only these kinds.");
ABSL_FLAG(bool, quick, false, "Run the CI subset of the catalog.");
ABSL_FLAG(bool, full, false, "Run the whole catalog.");
ABSL_FLAG(bool, core, false,
          "Run the catalog's core (clock jump, restart, pause, partition, failover), on any "
          "--server.");
ABSL_FLAG(std::vector<std::string>, scenario, {},
          "Run this scenario of the catalog (repeatable, or comma-separated).");
ABSL_FLAG(std::vector<std::string>, file, {}, "Run the scenario in this file (repeatable).");
ABSL_FLAG(std::string, scenarios, "",
          "Read the catalog from this directory instead of chaos/scenarios.");
ABSL_FLAG(std::string, client, "",
          "Put every client of the scenarios under this client: library (default), a broken "
          "variant, or an external client (node-redlock, redis-py).");
ABSL_FLAG(std::string, server, "",
          "Start this server in every fleet (redis-7.0, valkey-8.0, valkey-9.1, redis-8.0; "
          "default: $REDLOCK_SERVER or Debian's redis-server).");
ABSL_FLAG(std::string, compare, "",
          "Run the scenarios once per client of this list (comma-separated), side by side.");
ABSL_FLAG(uint64_t, seed, redlock::chaos::RunOptions().seed,
          "Seed of the fault schedules' randomness (--explore: run i gets seed+i).");
ABSL_FLAG(bool, explore, false, "Random fault schedules instead of scenarios (chaos/explore/).");
ABSL_FLAG(int, runs, redlock::chaos::ExploreOptions().runs, "--explore: how many runs.");
ABSL_FLAG(absl::Duration, duration, redlock::chaos::ExploreOptions().duration,
          "--explore: each run's schedule.");
ABSL_FLAG(std::vector<std::string>, topology, {},
          "--explore: a topology preset to draw from (repeatable; default: every preset this "
          "machine can run).");
ABSL_FLAG(std::string, out, redlock::chaos::ExploreOptions().out_dir,
          "--explore: where shrunk findings are written.");
ABSL_FLAG(int, shrink_runs, redlock::chaos::ExploreOptions().shrink_runs,
          "--explore: reruns spent shrinking each finding.");
ABSL_FLAG(std::string, json, "", "Write the results as JSON to this file.");
ABSL_FLAG(std::string, keep, "",
          "Keep every scenario's histories and checker report in DIR/<scenario>/.");
ABSL_FLAG(std::string, plot, "",
          "Write every scenario's timeline picture to DIR/<scenario>.svg (and an index.html).");
ABSL_FLAG(std::string, client_binary, "",
          "The client process binary (default: redlock-chaos-client next to this one).");
ABSL_FLAG(bool, verbose, false, "Print every fault injected and every note (also -v).");

namespace {

namespace chaos = redlock::chaos;
namespace testkit = redlock::testkit;

// The catalog's core: the clock jump of Kleppmann's critique, a restart
// without persistence, a client paused in its critical section, a
// majority/minority partition, and a replicated node's failover without and
// with the durability vote. --core runs them (on any --server).
const char* const kCoreScenarios[] = {
    "kleppmann-clock-jump",        "restart-no-persistence",
    "client-pause-in-cs",          "partition-majority-minority",
    "redlock-replicated-failover", "redlock-replicated-failover-durable",
};

std::string Usage() {
  return absl::StrCat(
      "usage: redlock-chaos (--list | --kinds | --quick | --full | --core | --scenario NAME... "
      "|\n"
      "                      --file PATH...)\n"
      "                     [--seed N] [--client NAME | --compare NAME,NAME...]\n"
      "                     [--server NAME]\n"
      "                     [--scenarios DIR] [--json FILE]\n"
      "                     [--keep DIR] [--plot DIR] [--client-binary PATH] [--verbose]\n"
      "       redlock-chaos --explore [--runs K] [--seed S] [--duration T]\n"
      "                     [--topology NAME]... [--kinds KIND,...] [--client NAME]\n"
      "                     [--out DIR] [--shrink-runs N] [--keep DIR] [--plot DIR]\n"
      "topologies: ",
      absl::StrJoin(chaos::TopologyPresets(), ", "), "\nSee chaos/README.md.");
}

// Sets every client of `s` to the client under test `name`.
absl::Status SetClient(chaos::Scenario& s, const std::string& name) {
  for (chaos::ClientConfig& c : s.setup.clients) {
    c.variant = chaos::ClientVariant::kLibrary;
    c.client = "library";
    absl::StatusOr<chaos::ClientVariant> v = chaos::ParseVariant(name);
    if (v.ok()) {
      c.variant = *v;
    } else if (name != "library") {
      // An external client: fencing and the durability vote are this
      // library's; the other clients have neither.
      c.client = name;
      c.fencing = false;
      c.durability_replicas = 0;
    }
  }
  return absl::OkStatus();
}

// SetClient, then the scenario checked; false, after saying why (naming
// `flag`, the option that chose the client), when it cannot run so.
bool UnderClient(chaos::Scenario& s, const std::string& client, const char* flag) {
  absl::Status st = SetClient(s, client);
  if (st.ok()) st = chaos::ValidateScenario(s);
  if (st.ok()) return true;
  fprintf(stderr, "redlock-chaos: %s %s: %s: %s\n", flag, client.c_str(), s.name.c_str(),
          std::string(st.message()).c_str());
  return false;
}

int RunCatalog(const std::vector<chaos::Scenario>& todo, const chaos::RunOptions& options,
               const std::string& json_path, bool index_page) {
  chaos::InstallSignalCleanup();
  fprintf(stderr, "redlock-chaos: %zu scenario(s), seed %llu, server %s, client %s\n", todo.size(),
          static_cast<unsigned long long>(options.seed), testkit::SelectedServerName().c_str(),
          (options.client_binary.empty() ? chaos::DefaultClientBinary() : options.client_binary)
              .c_str());
  absl::Time start = absl::Now();
  bool plots_missing = false;
  std::vector<chaos::ScenarioResult> results;
  for (const chaos::Scenario& s : todo) {
    if (chaos::Interrupted()) break;
    fprintf(stderr, "[%s] %s ... ", s.name.c_str(), s.config.c_str());
    fflush(stderr);
    chaos::ScenarioResult r = chaos::RunScenario(s, options);
    fprintf(stderr, "%s\n", chaos::ProgressLine(r).c_str());
    if (options.verbose || !r.ok) {
      for (const std::string& e : r.examples) fprintf(stderr, "    %s\n", e.c_str());
      for (const std::string& n : r.notes) fprintf(stderr, "    note: %s\n", n.c_str());
    }
    if (options.verbose) {
      for (const auto& f : r.injected_faults) {
        fprintf(stderr, "    fault at %s: %s%s%s\n", absl::FormatDuration(f.at).c_str(),
                chaos::DescribeTemplate(f.fault).c_str(),
                f.may_violate
                    ? absl::StrCat(
                          " (may break ", chaos::DescribeProperties(f.may_violate),
                          f.scope.empty() ? "" : absl::StrCat(" for ", absl::StrJoin(f.scope, ",")),
                          ")")
                          .c_str()
                    : " (breaks nothing documented)",
                "");
      }
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
  printf("%zu scenarios, %d skipped, %s in %.1fs (seed %llu, server %s)\n", results.size(), skipped,
         all_ok ? "every verdict as expected" : "SOME VERDICTS NOT AS EXPECTED",
         absl::ToDoubleSeconds(total), static_cast<unsigned long long>(options.seed),
         testkit::SelectedServerName().c_str());
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << chaos::FormatJson(results, options.seed, total);
    if (!out) {
      fprintf(stderr, "redlock-chaos: cannot write %s\n", json_path.c_str());
      return 2;
    }
  }
  if (!options.plot_dir.empty() && index_page) {
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

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = Usage();
  const redlock::flags::Parsed args =
      redlock::flags::ParseOrExit(argc, argv, "redlock-chaos", usage,
                                  {.files = {"chaos/chaos_main.cc"},
                                   .aliases = {{"-v", "verbose"}},
                                   .optional_value = {"kinds"},
                                   .value_names = {{"client", "NAME"},
                                                   {"client_binary", "PATH"},
                                                   {"compare", "NAME,..."},
                                                   {"file", "PATH"},
                                                   {"json", "FILE"},
                                                   {"keep", "DIR"},
                                                   {"kinds", "KIND,..."},
                                                   {"out", "DIR"},
                                                   {"plot", "DIR"},
                                                   {"scenario", "NAME"},
                                                   {"scenarios", "DIR"},
                                                   {"server", "NAME"},
                                                   {"topology", "NAME"}}});
  if (const std::string* extra = args.FirstArgument()) {
    fprintf(stderr, "redlock-chaos: unknown argument %s\n", extra->c_str());
    fprintf(stderr, "%s\n", usage.c_str());
    return 2;
  }
  if (args.Given("kinds") && absl::GetFlag(FLAGS_kinds).empty()) {
    fputs(chaos::FormatKinds().c_str(), stdout);
    return 0;
  }
  std::vector<std::string> names = absl::GetFlag(FLAGS_scenario);
  const std::vector<std::string> files = absl::GetFlag(FLAGS_file);
  const std::vector<std::string> topologies = absl::GetFlag(FLAGS_topology);
  const bool list = absl::GetFlag(FLAGS_list);
  const bool quick = absl::GetFlag(FLAGS_quick);
  const bool full = absl::GetFlag(FLAGS_full);
  const bool core = absl::GetFlag(FLAGS_core);
  const bool verbose = absl::GetFlag(FLAGS_verbose);
  const bool explore = absl::GetFlag(FLAGS_explore);
  const std::string json_path = absl::GetFlag(FLAGS_json);
  const std::string client = absl::GetFlag(FLAGS_client);
  const std::string dir = absl::GetFlag(FLAGS_scenarios);
  const std::string kinds = absl::GetFlag(FLAGS_kinds);
  const std::string compare = absl::GetFlag(FLAGS_compare);
  const std::string server = absl::GetFlag(FLAGS_server);
  chaos::RunOptions options;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.keep_dir = absl::GetFlag(FLAGS_keep);
  options.plot_dir = absl::GetFlag(FLAGS_plot);
  options.client_binary = absl::GetFlag(FLAGS_client_binary);
  chaos::ExploreOptions eo;
  eo.runs = absl::GetFlag(FLAGS_runs);
  eo.shrink_runs = absl::GetFlag(FLAGS_shrink_runs);
  eo.duration = absl::GetFlag(FLAGS_duration);
  eo.out_dir = absl::GetFlag(FLAGS_out);
  if (eo.duration <= absl::ZeroDuration() || eo.duration == absl::InfiniteDuration()) {
    fprintf(stderr, "redlock-chaos: bad --duration %s (e.g. 10s)\n",
            absl::FormatDuration(eo.duration).c_str());
    return 2;
  }
  options.verbose = verbose;
  // --server is the test kit's REDLOCK_SERVER: every fleet, replica and
  // Sentinel of the run starts that server. A name given here must be
  // installed: a run that skipped for a missing server would prove nothing.
  if (!server.empty()) setenv(testkit::kServerEnv, server.c_str(), 1);
  if (absl::StatusOr<testkit::ServerBuild> sb =
          testkit::LocateServer(testkit::SelectedServerName());
      !sb.ok()) {
    fprintf(stderr, "redlock-chaos: %s\n", std::string(sb.status().message()).c_str());
    return 2;
  } else if (!server.empty() && !sb->installed) {
    fprintf(stderr, "redlock-chaos: %s is not installed (run %s)\n", server.c_str(),
            sb->install.c_str());
    return 1;
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

  if (explore) {
    eo.seed = options.seed;
    eo.topologies = topologies;
    eo.client = client;
    eo.kinds = absl::StrSplit(kinds, ',', absl::SkipEmpty());
    eo.run = options;
    eo.progress = [](const std::string& line) { fprintf(stderr, "%s\n", line.c_str()); };
    chaos::InstallSignalCleanup();
    absl::StatusOr<chaos::ExploreReport> report = chaos::Explore(eo);
    if (!report.ok()) {
      fprintf(stderr, "redlock-chaos: %s\n", std::string(report.status().message()).c_str());
      return 2;
    }
    fputs(chaos::FormatExploreReport(*report).c_str(), stdout);
    if (chaos::Interrupted()) return 130;
    for (const chaos::ExploreRun& r : report->runs) {
      if (r.violated != 0 || !r.result.error.empty()) return 1;
    }
    return 0;
  }

  // The catalog, read only when it is needed (--list, --quick, --full,
  // --scenario): a bad catalog file is an error naming it.
  std::vector<chaos::Scenario> catalog;
  if (core) names.insert(names.end(), std::begin(kCoreScenarios), std::end(kCoreScenarios));
  if (list || quick || full || !names.empty()) {
    const std::string from = dir.empty() ? chaos::DefaultScenarioDir() : dir;
    absl::StatusOr<std::vector<chaos::Scenario>> c = chaos::ReadScenarioDir(from);
    if (!c.ok()) {
      fprintf(stderr, "redlock-chaos: %s\n", std::string(c.status().message()).c_str());
      return 2;
    }
    catalog = *std::move(c);
  }
  if (list) {
    fputs(chaos::FormatList(catalog).c_str(), stdout);
    return 0;
  }
  std::vector<chaos::Scenario> todo;
  auto add = [&](const chaos::Scenario& s) {
    for (const auto& t : todo) {
      if (t.name == s.name) return;
    }
    todo.push_back(s);
  };
  for (const std::string& n : names) {
    auto it = std::find_if(catalog.begin(), catalog.end(),
                           [&](const chaos::Scenario& s) { return s.name == n; });
    if (it == catalog.end()) {
      fprintf(stderr, "redlock-chaos: no scenario \"%s\" (see --list)\n", n.c_str());
      return 2;
    }
    add(*it);
  }
  for (const std::string& f : files) {
    absl::StatusOr<chaos::Scenario> s = chaos::ReadScenarioFile(f);
    if (!s.ok()) {
      fprintf(stderr, "redlock-chaos: %s\n", std::string(s.status().message()).c_str());
      return 2;
    }
    add(*s);
  }
  for (const chaos::Scenario& s : catalog) {
    if (full || (quick && s.quick)) add(s);
  }
  if (todo.empty()) {
    fprintf(stderr, "%s\n", usage.c_str());
    return 2;
  }
  if (!compare.empty()) {
    // The same scenarios once per client under test, side by side.
    const std::vector<std::string> clients = absl::StrSplit(compare, ',', absl::SkipEmpty());
    chaos::InstallSignalCleanup();
    std::vector<std::vector<chaos::ScenarioResult>> all;
    bool ran = true;
    for (const std::string& c : clients) {
      std::vector<chaos::ScenarioResult> col;
      for (chaos::Scenario s : todo) {
        if (chaos::Interrupted()) break;
        if (!UnderClient(s, c, "--compare")) return 2;
        fprintf(stderr, "[%s, %s] ... ", s.name.c_str(), c.c_str());
        fflush(stderr);
        chaos::ScenarioResult r = chaos::RunScenario(s, options);
        fprintf(stderr, "%s\n", chaos::ProgressLine(r).c_str());
        ran = ran && (r.skipped || r.error.empty());
        col.push_back(std::move(r));
      }
      all.push_back(std::move(col));
    }
    if (chaos::Interrupted()) return 130;
    fputs(chaos::FormatComparison(clients, all).c_str(), stdout);
    printf("\n(seed %llu; fencing and the durability vote off for the clients that have none)\n",
           static_cast<unsigned long long>(options.seed));
    return ran ? 0 : 1;
  }
  if (!client.empty()) {
    for (chaos::Scenario& s : todo) {
      if (!UnderClient(s, client, "--client")) return 2;
    }
  }
  return RunCatalog(todo, options, json_path, quick || full);
}
