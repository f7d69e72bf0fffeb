// Tests of the chaos harness: the pieces without servers (AOF surgery, the
// nft rule builder, expectations, S5, the client command line), the
// supervisor's amnesia restart on a real node, and the --quick subset of
// redlock-chaos run through the same runner (label chaos).

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "chaos/base/cleanup.h"
#include "chaos/clients/external_client.h"
#include "chaos/clients/workload.h"
#include "chaos/faults/partition.h"
#include "chaos/faults/replication.h"
#include "chaos/faults/supervisor.h"
#include "chaos/run/report.h"
#include "chaos/run/scenario.h"
#include "chaos/scenarios/scenario_file.h"
#include "gtest/gtest.h"
#include "testkit/files.h"
#include "testkit/fleet.h"
#include "testkit/gtest_fleet.h"
#include "testkit/replication.h"
#include "tests/chaos/scoped_env.h"

namespace redlock::chaos {
namespace {

std::string Resp(const std::vector<std::string>& args) {
  std::string out = absl::StrCat("*", args.size(), "\r\n");
  for (const auto& a : args) absl::StrAppend(&out, "$", a.size(), "\r\n", a, "\r\n");
  return out;
}

using testkit::TempDir;

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

using testkit::ReadFile;

// A node directory as Redis 7 lays it out with appendonly yes.
std::string MakeNodeDir(const TempDir& t, const std::string& incr) {
  std::string node = t.path() + "/node0";
  std::filesystem::create_directories(node + "/appendonlydir");
  WriteFile(
      node + "/appendonlydir/appendonly.aof.manifest",
      "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n");
  WriteFile(node + "/appendonlydir/appendonly.aof.1.base.rdb", "REDIS0010");
  WriteFile(node + "/appendonlydir/appendonly.aof.1.incr.aof", incr);
  WriteFile(node + "/redis.log", "log");
  return node;
}

// Starts the supervisor `sup` of one node (`aof`: appendonly always), its
// nemesis log `log` at `dir`/nemesis.jsonl. Fatal failures: call it within
// ASSERT_NO_FATAL_FAILURE.
void StartOneNode(const TempDir& dir, bool aof, std::unique_ptr<HistoryWriter>& log,
                  std::unique_ptr<NodeSupervisor>& sup) {
  absl::StatusOr<std::unique_ptr<HistoryWriter>> h =
      HistoryWriter::Open(dir.path() + "/nemesis.jsonl");
  ASSERT_TRUE(h.ok());
  log = *std::move(h);
  SupervisorOptions so;
  so.nodes = 1;
  so.aof = aof;
  so.history = log.get();
  absl::StatusOr<std::unique_ptr<NodeSupervisor>> started = NodeSupervisor::Start(so);
  ASSERT_TRUE(started.ok()) << started.status();
  sup = *std::move(started);
}

// ---- AOF surgery ---------------------------------------------------------------------

TEST(AofTest, ParsesCommandsMultiBlocksAndATornTail) {
  std::string data = Resp({"SELECT", "0"}) + Resp({"SET", "r", "tok1", "PXAT", "123"}) +
                     Resp({"MULTI"}) + Resp({"del", "r"}) + Resp({"SET", "x", "1"}) +
                     Resp({"EXEC"}) + Resp({"SET", "r", "tok2", "PXAT", "456"});
  std::string torn = Resp({"SET", "q", "v"}).substr(0, 9);
  int64_t complete = 0;
  absl::StatusOr<std::vector<AofUnit>> units = ParseAofUnits(data + torn, &complete);
  ASSERT_TRUE(units.ok()) << units.status();
  ASSERT_EQ(units->size(), 4u);
  EXPECT_EQ((*units)[0].commands[0][0], "SELECT");
  EXPECT_EQ((*units)[2].commands.size(), 4u);  // MULTI del SET EXEC, one unit
  EXPECT_EQ((*units)[3].commands[0][2], "tok2");
  EXPECT_EQ(complete, static_cast<int64_t>(data.size()));
  EXPECT_FALSE(ParseAofUnits("garbage").ok());
}

TEST(AofTest, CutsFromTheLastWriteOfTheKey) {
  TempDir t;
  std::string keep =
      Resp({"SELECT", "0"}) + Resp({"SET", "r", "tok1", "PXAT", "1"}) + Resp({"del", "r"});
  std::string lost = Resp({"SET", "r", "tok2", "PXAT", "2"}) + Resp({"SET", "other", "v"});
  std::string node = MakeNodeDir(t, keep + lost);
  AmnesiaSpec spec;
  spec.mode = AmnesiaSpec::Mode::kSinceLastWriteOfKey;
  spec.key = "r";
  absl::StatusOr<AofTruncation> cut = TruncateAofTail(node, spec);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->old_size, static_cast<int64_t>((keep + lost).size()));
  EXPECT_EQ(cut->new_size, static_cast<int64_t>(keep.size()));
  EXPECT_EQ(cut->dropped_units, 2);
  EXPECT_EQ(ReadFile(node + "/appendonlydir/appendonly.aof.1.incr.aof"), keep);

  spec.key = "never-written";
  EXPECT_TRUE(absl::IsNotFound(TruncateAofTail(node, spec).status()));
}

TEST(AofTest, DropsTheLastUnitsAndTheDataDir) {
  TempDir t;
  std::string a = Resp({"SELECT", "0"}), b = Resp({"SET", "k", "1"}),
              m = Resp({"MULTI"}) + Resp({"SET", "k", "2"}) + Resp({"EXEC"});
  std::string node = MakeNodeDir(t, a + b + m);
  AmnesiaSpec spec;
  spec.mode = AmnesiaSpec::Mode::kLastUnits;
  spec.drop_units = 1;  // the whole MULTI block goes
  ASSERT_TRUE(TruncateAofTail(node, spec).ok());
  EXPECT_EQ(ReadFile(node + "/appendonlydir/appendonly.aof.1.incr.aof"), a + b);

  spec.mode = AmnesiaSpec::Mode::kDropDataDir;
  ASSERT_TRUE(TruncateAofTail(node, spec).ok());
  EXPECT_FALSE(std::filesystem::exists(node + "/appendonlydir"));
  EXPECT_TRUE(std::filesystem::exists(node + "/redis.log"));  // logs are kept
}

TEST(AofTest, NoAofIsNotFound) {
  TempDir t;
  std::filesystem::create_directories(t.path() + "/n");
  AmnesiaSpec spec;
  spec.key = "r";
  EXPECT_TRUE(absl::IsNotFound(TruncateAofTail(t.path() + "/n", spec).status()));
}

// The supervisor on a real node: AOF always keeps a key across kill -9;
// the amnesia restart loses it.
TEST(SupervisorTest, AmnesiaRestartForgetsTheLastWrite) {
  REDLOCK_REQUIRE_REDIS();
  TempDir t;
  std::unique_ptr<HistoryWriter> h;
  std::unique_ptr<NodeSupervisor> sup;
  ASSERT_NO_FATAL_FAILURE(StartOneNode(t, /*aof=*/true, h, sup));
  testkit::Fleet& fleet = sup->fleet();
  ASSERT_TRUE(fleet.Command(0, {"SET", "kept", "1"}).ok());
  ASSERT_TRUE(fleet.Command(0, {"SET", "r", "tok", "PX", "60000"}).ok());
  ASSERT_TRUE(sup->RestartNow(0).ok());
  EXPECT_EQ(fleet.Command(0, {"GET", "r"})->str, "tok");  // AOF always: survives kill -9

  AmnesiaSpec spec;
  spec.key = "r";
  ASSERT_TRUE(sup->RestartAmnesia(0, spec).ok());
  EXPECT_EQ(fleet.Command(0, {"GET", "r"})->type, testkit::RedisValue::Type::kNil);
  EXPECT_EQ(fleet.Command(0, {"GET", "kept"})->str, "1");
  std::string log = ReadFile(t.path() + "/nemesis.jsonl");
  EXPECT_NE(log.find("\"amnesia\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"restart\""), std::string::npos) << log;
}

// ---- Replicated nodes ------------------------------------------------------------------

// Issue 25 item 17: a master stalled during setup for longer than the
// Sentinels' down-after (what a Sentinel blocked in fsync of its rewritten
// config on a slow disk, or a loaded machine, amounts to) was failed over
// before the run began, unknown to the harness: the clients were left on a
// master without a replica, and every durable grant was refused ("only 0
// replicas of 1 confirmed the write", then "only 0 grants").
TEST(ReplicatedNodesTest, AMasterStalledDuringSetupIsNotFailedOver) {
  REDLOCK_REQUIRE_SENTINEL();
  TempDir t;
  std::unique_ptr<HistoryWriter> h;
  std::unique_ptr<NodeSupervisor> sup;
  ASSERT_NO_FATAL_FAILURE(StartOneNode(t, /*aof=*/false, h, sup));
  testkit::Fleet& fleet = sup->fleet();
  NemesisLog log(h.get());
  ReplicationOptions ro;
  ro.replicas = 1;
  ro.sentinels = 1;
  ro.sentinel_down_after = absl::Seconds(1);
  ro.dir = t.path();
  ro.during_setup = [&fleet] {
    // The stall is the fault: three times the down-after.
    ASSERT_TRUE(fleet.Stop(0).ok());
    absl::SleepFor(absl::Seconds(3));
    ASSERT_TRUE(fleet.Continue(0).ok());
  };
  absl::StatusOr<std::unique_ptr<ReplicatedNodes>> rep =
      ReplicatedNodes::Start(sup.get(), ro, &log);
  ASSERT_TRUE(rep.ok()) << rep.status();
  const testkit::Sentinel& sentinel = (*rep)->sentinel(0);
  EXPECT_EQ(sentinel.MasterAddress("n0").value_or(""), (*rep)->WatchedAddress(0));
  EXPECT_EQ(sentinel.MasterField("n0", "config-epoch").value_or(""), "0") << "a failover";
  EXPECT_TRUE((*rep)->UnexpectedFailovers().empty());
  // The run's down-after applies once setup is over.
  EXPECT_EQ(sentinel.MasterField("n0", "down-after-milliseconds").value_or(""), "1000");
  // The master confirms a write with its replica, as a durable grant needs.
  testkit::RedisConnection conn(fleet.endpoint(0));
  ASSERT_TRUE(conn.Connect(absl::Seconds(2), absl::Seconds(5)).ok());
  ASSERT_TRUE(conn.Command({"SET", "k", "v"}).ok());
  absl::StatusOr<testkit::RedisValue> wait = conn.Command({"WAIT", "1", "2000"});
  ASSERT_TRUE(wait.ok()) << wait.status();
  EXPECT_EQ(wait->integer, 1);
}

// ---- Partition rule builder -----------------------------------------------------------

RuleContext Ctx() {
  RuleContext ctx;
  ctx.table = "redlock_chaos_1_2";
  ctx.client_uids = {61001, 61002};
  ctx.nodes = {{"127.0.0.11", 7001}, {"127.0.0.12", 7002}, {"127.0.0.13", 7003}};
  return ctx;
}

TEST(PartitionRulesTest, SetupMarksClientConnectionsByUid) {
  absl::StatusOr<std::string> s = BuildNftSetup(Ctx());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s,
            "table ip redlock_chaos_1_2 {\n"
            "  chain rl_mark {\n"
            "    type filter hook output priority -150; policy accept;\n"
            "    meta skuid 61001 ct mark set 1\n"
            "    meta skuid 61002 ct mark set 2\n"
            "  }\n"
            "  chain rl_cut {\n"
            "    type filter hook output priority 0; policy accept;\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(BuildNftHeal(Ctx()), "flush chain ip redlock_chaos_1_2 rl_cut\n");
  EXPECT_EQ(BuildNftTeardown(Ctx()), "delete table ip redlock_chaos_1_2\n");
}

TEST(PartitionRulesTest, CutsOneOrBothDirections) {
  PartitionSpec spec = CutClient(0, {1}, CutDirection::kBoth);
  PartitionSpec one_way = CutClient(1, {2}, CutDirection::kFromNode);
  spec.cuts.insert(spec.cuts.end(), one_way.cuts.begin(), one_way.cuts.end());
  PartitionSpec to_node = CutClient(1, {0}, CutDirection::kToNode);
  spec.cuts.insert(spec.cuts.end(), to_node.cuts.begin(), to_node.cuts.end());
  absl::StatusOr<std::string> s = BuildNftCut(Ctx(), spec);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s,
            "flush chain ip redlock_chaos_1_2 rl_cut\n"
            "add rule ip redlock_chaos_1_2 rl_cut meta skuid 61001 ip daddr 127.0.0.12 tcp dport "
            "7002 drop comment \"c1 to n1\"\n"
            "add rule ip redlock_chaos_1_2 rl_cut ct mark 1 ip saddr 127.0.0.12 tcp sport 7002 "
            "drop comment \"n1 to c1\"\n"
            "add rule ip redlock_chaos_1_2 rl_cut ct mark 2 ip saddr 127.0.0.13 tcp sport 7003 "
            "drop comment \"n2 to c2\"\n"
            "add rule ip redlock_chaos_1_2 rl_cut meta skuid 61002 ip daddr 127.0.0.11 tcp dport "
            "7001 drop comment \"c2 to n0\"\n");
}

TEST(PartitionRulesTest, RejectsAnythingOutsideLoopbackAndBadIndexes) {
  RuleContext ctx = Ctx();
  ctx.nodes[0].host = "10.0.0.1";
  EXPECT_FALSE(BuildNftSetup(ctx).ok());
  EXPECT_FALSE(BuildNftCut(ctx, IsolateNode(0, 3, 2)).ok());
  ctx = Ctx();
  ctx.table = "bad name; flush ruleset";
  EXPECT_FALSE(BuildNftSetup(ctx).ok());
  EXPECT_FALSE(BuildNftCut(Ctx(), CutClient(5, {0}, CutDirection::kBoth)).ok());
  EXPECT_FALSE(BuildNftCut(Ctx(), CutClient(0, {9}, CutDirection::kBoth)).ok());
}

TEST(PartitionRulesTest, Shapes) {
  PartitionSpec iso = IsolateNode(2, 5, 3);
  EXPECT_EQ(iso.cuts.size(), 3u);
  for (const LinkCut& c : iso.cuts) EXPECT_EQ(c.node, 2);

  // {n0,n1,n2}+{c1,c2} | {n3,n4}+{c3}: 2 clients x 2 nodes + 1 client x 3 nodes.
  PartitionSpec split = SplitBrain({0, 1, 2}, {0, 1}, 5, 3);
  EXPECT_EQ(split.cuts.size(), 7u);
  EXPECT_EQ(split.name, "split {n0,n1,n2,c1,c2} | {n3,n4,c3}");

  PartitionSpec views = FromViews({{0, 1, 2}, {2, 3, 4}}, 5);
  EXPECT_EQ(views.cuts.size(), 4u);
  EXPECT_EQ(views.Describe(),
            "c1 sees {n0,n1,n2}; c2 sees {n2,n3,n4}: c1-x-n3 c1-x-n4 c2-x-n0 c2-x-n1");
}

// ---- Expectations, S5, client flags --------------------------------------------------

// A partition scenario on a machine without nft (or without root) is skipped
// on a developer's machine, and fails under CI=true: CI must never stay
// green without running it.
TEST(PartitionSupportTest, AMissingToolIsASkipLocallyAndAFailureUnderCi) {
  const std::vector<std::pair<std::string, std::string>> tools = {{"ip", "-V"},
                                                                  {"redlock-no-such-tool", "-v"}};
  {
    ScopedEnv ci("CI", nullptr);
    EXPECT_TRUE(absl::IsFailedPrecondition(PartitionSupport(tools)));
  }
  {
    ScopedEnv ci("CI", "true");
    absl::Status s = PartitionSupport(tools);
    EXPECT_TRUE(absl::IsNotFound(s)) << s;
    EXPECT_NE(s.message().find("CI=true"), absl::string_view::npos) << s;
  }
}

TEST(ExpectationTest, Verdicts) {
  std::array<int64_t, kNumHarnessProperties> none{}, s1{1, 0, 0, 0, 0}, s3{0, 0, 2, 0, 0};
  std::string why;
  EXPECT_TRUE(JudgeExpectation(ExpectClean(), none, 10, &why)) << why;
  EXPECT_FALSE(JudgeExpectation(ExpectClean(), s1, 10, &why));
  EXPECT_NE(why.find("S1 violated"), std::string::npos);
  EXPECT_FALSE(JudgeExpectation(ExpectClean(), none, 0, &why));  // nothing tested

  Expectation fenced;
  fenced.violated_all = Prop(kS1);
  fenced.clean = Prop(kS3) | Prop(kS4);
  EXPECT_TRUE(JudgeExpectation(fenced, s1, 10, &why)) << why;
  EXPECT_FALSE(JudgeExpectation(fenced, none, 10, &why));  // the checker would be too weak
  std::array<int64_t, kNumHarnessProperties> both{1, 0, 1, 0, 0};
  EXPECT_FALSE(JudgeExpectation(fenced, both, 10, &why));
  EXPECT_EQ(fenced.Describe(), "S1 found; S3,S4 clean");

  Expectation any;
  any.violated_any = Prop(kS1) | Prop(kS3);
  EXPECT_TRUE(JudgeExpectation(any, s3, 10, &why));
  EXPECT_FALSE(JudgeExpectation(any, none, 10, &why));
  EXPECT_EQ(any.Describe(), "S1|S3 found");
  EXPECT_EQ(ExpectClean().Describe(), "clean");
}

TEST(S5Test, KeysOfFailedAttemptsAreLeftovers) {
  std::vector<KeyState> keys = {
      {0, "r", "granted-token", 500}, {1, "r", "failed-token", 800}, {2, "r", "", -2}};
  std::vector<LeftoverKey> left = FailedAttemptLeftovers(keys, {"granted-token"});
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].state.node, 1);
  EXPECT_NE(left[0].why.find("failed attempt"), std::string::npos);
}

TEST(ClientArgsTest, RoundTrip) {
  ClientConfig c;
  c.name = "c7";
  c.variant = ClientVariant::kPlainDelRelease;
  c.nodes = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
  c.data = "127.0.0.1:9";
  c.history = "/tmp/x.jsonl";
  c.resources = {"a", "b"};
  c.ttl_ms = 1234;
  c.fencing = true;
  c.release = false;
  c.pre_release_ms = 60;
  c.drift_factor = 0.02;
  c.durability_replicas = 2;
  c.durability_timeout_ms = 35;
  absl::StatusOr<ClientConfig> back = ParseClientArgs(ClientArgs(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, "c7");
  EXPECT_EQ(back->variant, ClientVariant::kPlainDelRelease);
  EXPECT_EQ(back->nodes, c.nodes);
  EXPECT_EQ(back->resources, c.resources);
  EXPECT_EQ(back->ttl_ms, 1234);
  EXPECT_TRUE(back->fencing);
  EXPECT_FALSE(back->release);
  EXPECT_EQ(back->pre_release_ms, 60);
  EXPECT_DOUBLE_EQ(back->drift_factor, 0.02);
  EXPECT_EQ(back->tls_ca, "");
  c.nodes = {"rediss://127.0.0.1:1"};
  c.tls_ca = "/tmp/ca.crt";
  c.tls_server_name = "localhost";
  back = ParseClientArgs(ClientArgs(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->nodes, c.nodes);
  EXPECT_EQ(back->tls_ca, "/tmp/ca.crt");
  EXPECT_EQ(back->tls_server_name, "localhost");
  EXPECT_EQ(back->durability_replicas, 2);
  EXPECT_EQ(back->durability_timeout_ms, 35);
  EXPECT_FALSE(ParseClientArgs({"--bogus=1"}).ok());
  // Every seed goes through, the largest included; bounded flags keep their bounds.
  c.seed = std::numeric_limits<uint64_t>::max();
  back = ParseClientArgs(ClientArgs(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->seed, c.seed);
  EXPECT_FALSE(ParseClientArgs({"--permits=0"}).ok());
  EXPECT_FALSE(ParseClientArgs({"--permits=1025"}).ok());
  EXPECT_FALSE(ParseClientArgs({"--wait-ms=-1"}).ok());
  EXPECT_FALSE(ParseClientArgs({"--fencing=maybe"}).ok());
  for (ClientVariant v : AllVariants()) EXPECT_EQ(*ParseVariant(VariantName(v)), v);
}

// The built-in catalog, read from its files (chaos/scenarios/*.yaml).
const std::vector<Scenario>& Catalog() {
  static const std::vector<Scenario>* catalog = [] {
    absl::StatusOr<std::vector<Scenario>> c = ReadScenarioDir(DefaultScenarioDir());
    EXPECT_TRUE(c.ok()) << c.status();
    return new std::vector<Scenario>(c.ok() ? *std::move(c) : std::vector<Scenario>());
  }();
  return *catalog;
}

const Scenario* FindScenario(const std::string& name) {
  for (const Scenario& s : Catalog()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(CatalogTest, EveryScenarioIsWellFormed) {
  std::set<std::string> names;
  int quick = 0;
  ASSERT_GE(Catalog().size(), 45u);
  for (const Scenario& s : Catalog()) {
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate " << s.name;
    EXPECT_TRUE(ValidateScenario(s).ok()) << s.name << ": " << ValidateScenario(s);
    EXPECT_FALSE(s.setup.clients.empty()) << s.name;
    EXPECT_LE(s.setup.budget, absl::Seconds(15)) << s.name;
    // The file is named after the scenario.
    EXPECT_EQ(std::filesystem::path(s.file).stem().string(), s.name);
    // Clients follow a failover through their own proxies, or through the
    // Sentinels (the library's discovery).
    if (s.setup.replicas > 0) {
      EXPECT_TRUE(s.setup.topology == Topology::kPerClientProxies ||
                  (s.setup.topology == Topology::kSentinelDiscovery && s.setup.sentinels > 0))
          << s.name;
    }
    quick += s.quick;
  }
  EXPECT_GE(quick, 8);
  for (ClientVariant v : AllVariants()) {
    if (v == ClientVariant::kLibrary) continue;
    bool covered = false;
    for (const Scenario& s : Catalog()) {
      for (const ClientConfig& c : s.setup.clients) covered = covered || c.variant == v;
    }
    EXPECT_TRUE(covered) << "no scenario for variant " << VariantName(v);
  }
}

// ---- The broken clients stay out of the shipped client ------------------------------------

TEST(BrokenClientTest, TheShippedClientRunsTheLibraryOnly) {
  ClientConfig c;
  c.nodes = {"127.0.0.1:1"};
  c.variant = ClientVariant::kPlainDelRelease;
  absl::StatusOr<std::unique_ptr<LockBackend>> b = MakeLibraryBackend(c);
  EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
}

TEST(BrokenClientTest, BrokenScenariosAreSkippedWithoutTheBrokenClient) {
  const Scenario* s = FindScenario("broken-plain-del");
  ASSERT_NE(s, nullptr);
  RunOptions options;
  options.broken_client_binary = "/nonexistent/redlock-chaos-broken-client";
  ScenarioResult r = RunScenario(*s, options);
  // A skip everywhere but under CI=true, where a scenario that cannot run fails.
  const bool ci = testkit::UnderCi();
  EXPECT_EQ(r.skipped, !ci);
  EXPECT_EQ(r.ok, !ci);
  EXPECT_NE(r.skip_reason.find("REDLOCK_BUILD_TESTS"), std::string::npos) << r.skip_reason;
  EXPECT_EQ(r.skip_reason.find("CI=true") != std::string::npos, ci) << r.skip_reason;
}

// ---- The --quick subset through the runner -----------------------------------------------

class QuickScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(QuickScenarioTest, VerdictAsExpected) {
  REDLOCK_REQUIRE_REDIS();
  const Scenario* s = FindScenario(GetParam());
  ASSERT_NE(s, nullptr);
  RunOptions options;
  options.seed = 1;
  if (const char* keep = getenv("REDLOCK_CHAOS_KEEP")) options.keep_dir = keep;
  ScenarioResult r = RunScenario(*s, options);
  if (r.skipped) GTEST_SKIP() << r.skip_reason;
  // A violation that must be found depends on a fault landing in a window a
  // few milliseconds wide; on two cores shared with other suites it can miss
  // (broken-no-elapsed did once in CI). Such a miss, and only that (never a
  // violation where none is allowed), is run again with the next seeds, at
  // most twice; the output says so.
  std::vector<std::string> missed;
  for (int rerun = 0; rerun < 2 && !r.ok && absl::StrContains(r.why, "fault missed") &&
                      !absl::StrContains(r.why, "documented as safe");
       ++rerun) {
    missed.push_back(absl::StrCat("seed ", options.seed, ": ", r.why));
    ++options.seed;
    r = RunScenario(*s, options);
  }
  for (const std::string& m : missed) std::printf("rerun after a miss (%s)\n", m.c_str());
  std::string detail;
  for (const auto& e : r.examples) detail += "\n  " + e;
  for (const auto& n : r.notes) detail += "\n  note: " + n;
  EXPECT_TRUE(r.ok) << r.name << ": " << r.why << detail << "\n" << FormatTable({r});
}

std::vector<std::string> QuickNames() {
  std::vector<std::string> out;
  for (const Scenario& s : Catalog()) {
    if (s.quick) out.push_back(s.name);
  }
  return out;
}

// One scenario of the full catalog on TLS nodes, through the fault proxies
// (the rest of the TLS variants run with --full).
INSTANTIATE_TEST_SUITE_P(Tls, QuickScenarioTest, ::testing::Values("restart-aof-always-tls"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return absl::StrReplaceAll(info.param, {{"-", "_"}});
                         });

INSTANTIATE_TEST_SUITE_P(Quick, QuickScenarioTest, ::testing::ValuesIn(QuickNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return absl::StrReplaceAll(info.param, {{"-", "_"}});
                         });

// ---- Other Redlock clients under the same runner --------------------------------------

// A catalog scenario with every client replaced by an external client
// (ClientConfig::client, chaos/clients/external_client.h). Without fencing: neither
// adapter has fencing tokens. A missing client is a skip (naming
// scripts/lab-clients.sh), a failure under CI=true.
class ExternalClientScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExternalClientScenarioTest, NoFaultsIsClean) {
  REDLOCK_REQUIRE_REDIS();
  absl::Status available = CheckExternalClientAvailable(GetParam());
  if (absl::IsFailedPrecondition(available)) GTEST_SKIP() << available;
  ASSERT_TRUE(available.ok()) << available;
  const Scenario* catalog = FindScenario("no-faults");
  ASSERT_NE(catalog, nullptr);
  Scenario s = *catalog;
  for (ClientConfig& c : s.setup.clients) {
    c.client = GetParam();
    c.fencing = false;
  }
  RunOptions options;
  options.seed = 1;
  if (const char* keep = getenv("REDLOCK_CHAOS_KEEP")) options.keep_dir = keep;
  ScenarioResult r = RunScenario(s, options);
  ASSERT_FALSE(r.skipped) << r.skip_reason;
  std::string detail;
  for (const auto& e : r.examples) detail += "\n  " + e;
  for (const auto& n : r.notes) detail += "\n  note: " + n;
  EXPECT_TRUE(r.ok) << GetParam() << ": " << r.why << " " << r.error << detail << "\n"
                    << FormatTable({r});
  EXPECT_GT(r.counts.grants, 10) << FormatTable({r});
}

INSTANTIATE_TEST_SUITE_P(Clients, ExternalClientScenarioTest,
                         ::testing::Values("node-redlock", "redis-py"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return absl::StrReplaceAll(info.param, {{"-", "_"}});
                         });

}  // namespace
}  // namespace redlock::chaos
