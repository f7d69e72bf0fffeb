// The cost of one command on a simulated node (sim/README.md "The node"):
//
//   build/sim/sim_node_benchmark
//
// Every call is a grant: 1024 resources in turn, the node's clock moving
// 20 ms a call, so a key has expired (ttl 10 s) when its resource comes
// round again.

#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "redlock/internal/scripts.h"
#include "sim/node.h"

namespace redlock::sim {
namespace {

constexpr int kResources = 1024;

std::vector<Argv> Commands(const std::vector<std::string>& prefix, bool with_fence) {
  std::vector<Argv> out;
  for (int i = 0; i < kResources; ++i) {
    Argv a = prefix;
    const std::string r = std::to_string(i);
    if (with_fence) {
      a.insert(a.end(), {"lock:" + r, "fence:" + r, "token-" + r, "10000"});
    } else {
      a.insert(a.end(), {"lock:" + r, "token-" + r, "NX", "PX", "10000"});
    }
    out.push_back(std::move(a));
  }
  return out;
}

// Runs `commands` in turn on `node`, one per iteration, the node's clock
// 20 ms further each time; returns the clock after the last.
int64_t ExecuteInTurn(benchmark::State& state, Node& node, Session& session,
                      const std::vector<Argv>& commands) {
  int64_t now = 1'000'000;
  size_t i = 0;
  for (auto _ : state) {
    Result r = node.Execute(session, commands[i], now);
    benchmark::DoNotOptimize(r);
    i = (i + 1) % commands.size();
    now += 20;
  }
  return now;
}

void BM_SetNxPx(benchmark::State& state) {
  Node node(Node::Config{.name = "n0"});
  Session session;
  ExecuteInTurn(state, node, session, Commands({"SET"}, false));
}
BENCHMARK(BM_SetNxPx);

void BM_EvalShaFenceAcquire(benchmark::State& state) {
  Node node(Node::Config{.name = "n0"});
  Session session;
  const internal::Script& script = internal::FenceAcquireScript();
  node.Execute(session, {"SCRIPT", "LOAD", script.body}, 0);
  const std::vector<Argv> commands = Commands({"EVALSHA", script.sha, "2"}, true);
  const int64_t now = ExecuteInTurn(state, node, session, commands);
  if (node.Execute(session, commands[0], now).reply.type != Reply::Type::kArray) {
    state.SkipWithError("the fence-acquire script did not answer an array");
  }
}
BENCHMARK(BM_EvalShaFenceAcquire);

// A grant then its release (the release-one script): the library's
// commonest pair.
void BM_SetThenReleaseOne(benchmark::State& state) {
  Node node(Node::Config{.name = "n0"});
  Session session;
  const internal::Script& release = internal::ReleaseOneScript();
  node.Execute(session, {"SCRIPT", "LOAD", release.body}, 0);
  const std::vector<Argv> sets = Commands({"SET"}, false);
  std::vector<Argv> releases;
  for (int i = 0; i < kResources; ++i) {
    const std::string r = std::to_string(i);
    releases.push_back({"EVALSHA", release.sha, "1", "lock:" + r, "token-" + r, ""});
  }
  int64_t now = 1'000'000;
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(node.Execute(session, sets[i], now));
    benchmark::DoNotOptimize(node.Execute(session, releases[i], now));
    i = (i + 1) % sets.size();
    now += 20;
  }
}
BENCHMARK(BM_SetThenReleaseOne);

// A node made, then one connection's handshake: INFO server and a SCRIPT
// LOAD of every script of the library (the cost a run pays per node and
// connection).
void BM_NewNodeAndHandshake(benchmark::State& state) {
  std::vector<Argv> handshake = {{"INFO", "server"}};
  for (const internal::Script* s : internal::AllScripts()) {
    handshake.push_back({"SCRIPT", "LOAD", s->body});
  }
  for (auto _ : state) {
    Node node(Node::Config{.name = "n0"});
    Session session;
    for (const Argv& a : handshake) benchmark::DoNotOptimize(node.Execute(session, a, 0));
  }
}
BENCHMARK(BM_NewNodeAndHandshake);

}  // namespace
}  // namespace redlock::sim

BENCHMARK_MAIN();
