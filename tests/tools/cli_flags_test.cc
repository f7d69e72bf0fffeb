// Flag, duration and option parsing of the `redlock` tool (no server).

#include "tools/cli_flags.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace redlock::cli {
namespace {

std::vector<FlagSpec> Specs() {
  std::vector<FlagSpec> specs = {{"resource", true, "R", ""}, {"ttl", true, "DUR", ""}};
  specs.insert(specs.end(), GlobalFlags().begin(), GlobalFlags().end());
  return specs;
}

TEST(ParseDurationFlag, AcceptsUnits) {
  EXPECT_EQ(*ParseDurationFlag("ttl", "30s"), absl::Seconds(30));
  EXPECT_EQ(*ParseDurationFlag("ttl", "500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDurationFlag("ttl", "2m"), absl::Minutes(2));
  EXPECT_EQ(*ParseDurationFlag("ttl", "1.5s"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseDurationFlag("wait", "0s", /*allow_zero=*/true), absl::ZeroDuration());
}

TEST(ParseDurationFlag, RejectsBadValues) {
  for (const char* bad : {"", "30", "abc", "-1s", "inf", "10 parsecs", "s"}) {
    absl::StatusOr<absl::Duration> d = ParseDurationFlag("ttl", bad);
    EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << bad;
    if (!d.ok()) {
      EXPECT_NE(d.status().message().find("--ttl"), absl::string_view::npos);
    }
  }
  EXPECT_FALSE(ParseDurationFlag("ttl", "0s").ok());
}

TEST(ParseArgs, FlagForms) {
  absl::StatusOr<ParsedArgs> a =
      ParseArgs(Specs(), {"--resource", "r1", "--ttl=5s", "--fencing", "--all-nodes=false"}, false);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Get("resource"), "r1");
  EXPECT_EQ(a->Get("ttl"), "5s");
  EXPECT_TRUE(a->Switch("fencing"));
  EXPECT_FALSE(a->Switch("all-nodes"));
  EXPECT_FALSE(a->help);
}

TEST(ParseArgs, Errors) {
  EXPECT_FALSE(ParseArgs(Specs(), {"--bogus"}, false).ok());
  EXPECT_FALSE(ParseArgs(Specs(), {"-x"}, false).ok());
  EXPECT_FALSE(ParseArgs(Specs(), {"--resource"}, false).ok());
  EXPECT_FALSE(ParseArgs(Specs(), {"--fencing=maybe"}, false).ok());
  EXPECT_FALSE(ParseArgs(Specs(), {"--nofencing=true"}, false).ok());
  EXPECT_FALSE(ParseArgs(Specs(), {"--", "x"}, false).ok());
  // A flag another subcommand takes is unknown here.
  EXPECT_FALSE(ParseArgs(Specs(), {"--token", "t"}, false).ok());
  // Durations are checked as they are parsed, naming the flag.
  absl::StatusOr<ParsedArgs> a = ParseArgs(Specs(), {"--ttl", "30"}, false);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(a.status()));
  EXPECT_EQ(a.status().message(),
            "--ttl: bad duration '30' (a number and a unit, e.g. 500ms, 30s, 2m)");
  a = ParseArgs(Specs(), {"--node-timeout=inf"}, false);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--node-timeout"), absl::string_view::npos) << a.status();
  a = ParseArgs(Specs(), {"--bogus"}, false);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "unknown flag '--bogus'");
}

TEST(ParseArgs, SpellingsOfOneFlag) {
  absl::StatusOr<ParsedArgs> a =
      ParseArgs(Specs(), {"--node_timeout", "20ms", "--key_prefix=p:", "--nofencing"}, false);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Get("node-timeout"), "20ms");
  EXPECT_EQ(a->Get("key-prefix"), "p:");
  EXPECT_TRUE(a->Has("fencing"));
  EXPECT_FALSE(a->Switch("fencing"));
  a = ParseArgs(Specs(), {"--fencing=yes", "--all-nodes=0", "--ttl", "1s", "--ttl", "2s"}, false);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->Switch("fencing"));
  EXPECT_FALSE(a->Switch("all-nodes"));
  EXPECT_EQ(a->Get("ttl"), "2s") << "the last one wins";
  a = ParseArgs(Specs(), {"--version", "-h"}, false);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->version);
  EXPECT_TRUE(a->help);
}

TEST(ParseArgs, CommandTail) {
  absl::StatusOr<ParsedArgs> a =
      ParseArgs(Specs(), {"--ttl", "1s", "--", "sh", "-c", "--ttl"}, true);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->command, (std::vector<std::string>{"sh", "-c", "--ttl"}));
  a = ParseArgs(Specs(), {"--ttl", "1s", "sleep", "--help"}, true);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->command, (std::vector<std::string>{"sleep", "--help"}));
  EXPECT_FALSE(a->help);
}

TEST(OptionsFromFlags, NodesFromFlagOrEnvironment) {
  ParsedArgs a = *ParseArgs(Specs(), {"--nodes", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"}, false);
  absl::StatusOr<Options> o = OptionsFromFlags(a, "127.0.0.1:9");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->nodes.size(), 3u);
  EXPECT_EQ(o->quorum, 0);

  a = *ParseArgs(
      Specs(), {"--all-nodes", "--fencing", "--node-timeout", "20ms", "--key-prefix", "p:"}, false);
  o = OptionsFromFlags(a, "redis://:pw@127.0.0.1:7001/2,127.0.0.1:7002");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->nodes.size(), 2u);
  EXPECT_EQ(o->nodes[0].password, "pw");
  EXPECT_EQ(o->nodes[0].db, 2);
  EXPECT_EQ(o->quorum, 2);
  EXPECT_TRUE(o->fencing);
  EXPECT_EQ(o->node_timeout, absl::Milliseconds(20));
  EXPECT_EQ(o->key_prefix, "p:");
}

TEST(OptionsFromFlags, TlsFromFlagsOrEnvironment) {
  std::map<std::string, std::string> vars = {{"REDLOCK_TLS_CA", "/env/ca.pem"},
                                             {"REDLOCK_TLS_CERT", "/env/c.pem"},
                                             {"REDLOCK_TLS_KEY", "/env/k.pem"},
                                             {"REDLOCK_TLS_SERVER_NAME", "env.example"},
                                             {"REDLOCK_TLS_INSECURE", "1"}};
  EnvLookup env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  ParsedArgs a = *ParseArgs(Specs(), {"--nodes", "rediss://127.0.0.1:1,127.0.0.1:2"}, false);
  absl::StatusOr<Options> o = OptionsFromFlags(a, nullptr, env);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->nodes[0].tls);
  EXPECT_FALSE(o->nodes[1].tls);
  EXPECT_EQ(o->tls.ca_file, "/env/ca.pem");
  EXPECT_EQ(o->tls.cert_file, "/env/c.pem");
  EXPECT_EQ(o->tls.key_file, "/env/k.pem");
  EXPECT_EQ(o->tls.server_name, "env.example");
  EXPECT_FALSE(o->tls.verify_peer);

  // Flags win; a directory is a CA directory.
  a = *ParseArgs(
      Specs(),
      {"--nodes", "rediss://127.0.0.1:1", "--tls-ca", "/tmp", "--tls-cert", "/f/c.pem", "--tls-key",
       "/f/k.pem", "--tls-server-name", "flag.example", "--tls-insecure=false"},
      false);
  o = OptionsFromFlags(a, nullptr, env);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->tls.ca_dir, "/tmp");
  EXPECT_EQ(o->tls.ca_file, "");
  EXPECT_EQ(o->tls.cert_file, "/f/c.pem");
  EXPECT_EQ(o->tls.server_name, "flag.example");
  EXPECT_TRUE(o->tls.verify_peer);

  vars["REDLOCK_TLS_INSECURE"] = "maybe";
  a = *ParseArgs(Specs(), {"--nodes", "rediss://127.0.0.1:1"}, false);
  absl::Status st = OptionsFromFlags(a, nullptr, env).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_NE(st.message().find("REDLOCK_TLS_INSECURE"), absl::string_view::npos) << st;
  // TLS settings without a rediss:// node: refused, not silently plaintext.
  vars.erase("REDLOCK_TLS_INSECURE");
  a = *ParseArgs(Specs(), {"--nodes", "127.0.0.1:1"}, false);
  st = OptionsFromFlags(a, nullptr, env).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_NE(st.message().find("rediss://"), absl::string_view::npos) << st;
}

TEST(OptionsFromFlags, Durability) {
  ParsedArgs a = *ParseArgs(
      Specs(), {"--nodes", "127.0.0.1:1", "--durability", "1", "--durability-timeout", "15ms"},
      false);
  absl::StatusOr<Options> o = OptionsFromFlags(a, nullptr);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->durability.replicas, 1);
  EXPECT_EQ(o->durability.timeout, absl::Milliseconds(15));
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseArgs(Specs(), {"--nodes", "127.0.0.1:1", "--durability", "one"}, false).status()));
  a = *ParseArgs(Specs(), {"--nodes", "127.0.0.1:1", "--durability", "-1"}, false);
  EXPECT_TRUE(absl::IsInvalidArgument(OptionsFromFlags(a, nullptr).status()));
  a = *ParseArgs(Specs(),
                 {"--nodes", "127.0.0.1:1", "--durability", "1", "--durability-timeout", "1s"},
                 false);
  EXPECT_TRUE(absl::IsInvalidArgument(OptionsFromFlags(a, nullptr).status()))
      << "the wait must fit in the node timeout";
}

TEST(OptionsFromFlags, BadInput) {
  ParsedArgs none = *ParseArgs(Specs(), {}, false);
  EXPECT_TRUE(absl::IsInvalidArgument(OptionsFromFlags(none, nullptr).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(OptionsFromFlags(none, "").status()));
  ParsedArgs bad = *ParseArgs(Specs(), {"--nodes", "127.0.0.1"}, false);
  absl::Status st = OptionsFromFlags(bad, nullptr).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_NE(st.message().find("--nodes"), absl::string_view::npos) << st;
  st = OptionsFromFlags(none, "127.0.0.1:1,,127.0.0.1:2").status();
  EXPECT_NE(st.message().find("REDLOCK_NODES"), absl::string_view::npos) << st;
  ParsedArgs dup = *ParseArgs(Specs(), {"--nodes", "127.0.0.1:1,127.0.0.1:1"}, false);
  EXPECT_TRUE(absl::IsInvalidArgument(OptionsFromFlags(dup, nullptr).status()));
}

TEST(ExitCodeFor, DistinctCodes) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), kExitOk);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("")), kExitUsage);
  EXPECT_EQ(ExitCodeFor(absl::AbortedError("")), kExitHeld);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("")), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(absl::FailedPreconditionError("")), kExitLeaseLost);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("")), kExitTimedOut);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("")), kExitInternal);
  EXPECT_EQ(ExitCodeFor(absl::CancelledError("")), kExitInternal);
}

TEST(JsonString, Escapes) { EXPECT_EQ(JsonString("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\""); }

}  // namespace
}  // namespace redlock::cli
