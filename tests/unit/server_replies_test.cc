// What servers answer that decides a node's path: the refusals of scripting
// that send a node to the script-free path (RefusesScripting), and the
// command descriptions that say which script-free commands it has
// (server_commands.h). The replies are the real servers' (docs/compat.md);
// the integration suites check them against the servers themselves.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/scriptless.h"
#include "redlock/internal/server_commands.h"

namespace redlock::internal {
namespace {

Reply S(std::string s) { return Reply::String(std::move(s)); }
Reply A(std::vector<Reply> e) { return Reply::Array(std::move(e)); }

TEST(RefusesScriptingTest, AclDenials) {
  EXPECT_TRUE(
      RefusesScripting("NOPERM this user has no permissions to run the 'script|load' command"));
  EXPECT_TRUE(
      RefusesScripting("NOPERM User locker has no permissions to run the 'evalsha' command"));
}

TEST(RefusesScriptingTest, RenamedCommands) {
  EXPECT_TRUE(RefusesScripting("ERR unknown command 'EVALSHA', with args beginning with: 'abc' "));
  EXPECT_TRUE(RefusesScripting("ERR unknown command 'SCRIPT', with args beginning with: 'LOAD' "));
}

TEST(RefusesScriptingTest, NoLuaEngine) {
  // Valkey 9.1 without its Lua module, to EVAL, EVALSHA and SCRIPT LOAD.
  EXPECT_TRUE(RefusesScripting("ERR Could not find scripting engine 'lua'"));
  EXPECT_TRUE(RefusesScripting("ERR could not find scripting engine 'LUA'"));
}

TEST(RefusesScriptingTest, ScriptFailuresAreNotRefusals) {
  EXPECT_FALSE(RefusesScripting("NOSCRIPT No matching script. Please use EVAL."));
  EXPECT_FALSE(RefusesScripting(
      "ERR user_script:1: Script attempted to access nonexistent global variable 'x'"));
  EXPECT_FALSE(RefusesScripting("ERR unknown command 'DELIFEQ', with args beginning with: 'k' "));
  EXPECT_FALSE(RefusesScripting("WRONGTYPE Operation against a key holding the wrong kind"));
  EXPECT_FALSE(RefusesScripting("ERR Error running script: could not find scripting engine"));
  EXPECT_FALSE(RefusesScripting(""));
}

// COMMAND INFO's entry for a command: its name first, then arity, flags...
Reply Described(const std::string& name) {
  return A({S(name), Reply::Integer(3), A({S("write")}), Reply::Integer(1), Reply::Integer(1),
            Reply::Integer(1)});
}

TEST(ServerCommandsTest, CommandInfo) {
  NodeCommands c;
  ASSERT_TRUE(ParseCommandInfo(A({Described("delifeq"), Reply::Nil()}), &c));
  EXPECT_TRUE(c.delifeq);
  EXPECT_FALSE(c.delex);
  ASSERT_TRUE(ParseCommandInfo(A({Reply::Nil(), Described("delex")}), &c));
  EXPECT_FALSE(c.delifeq);
  EXPECT_TRUE(c.delex);
  ASSERT_TRUE(ParseCommandInfo(A({Reply::Nil(), Reply::Nil()}), &c));
  EXPECT_FALSE(c.delifeq);
  EXPECT_FALSE(c.delex);
  // An empty entry is no command either.
  ASSERT_TRUE(ParseCommandInfo(A({A({}), A({})}), &c));
  EXPECT_FALSE(c.delifeq || c.delex);
  EXPECT_FALSE(ParseCommandInfo(A({Reply::Nil()}), &c));
  EXPECT_FALSE(ParseCommandInfo(Reply::Error("ERR unknown subcommand"), &c));
}

// An argument of COMMAND DOCS: name, type, and optionally a token.
Reply Argument(const std::string& name, const std::string& token) {
  std::vector<Reply> e = {S("name"), S(name), S("type"), S("pure-token")};
  if (!token.empty()) {
    e.push_back(S("token"));
    e.push_back(S(token));
  }
  return A(std::move(e));
}

Reply SetDocs(std::vector<Reply> condition_arguments) {
  Reply condition = A({S("name"), S("condition"), S("type"), S("oneof"), S("flags"),
                       A({S("optional")}), S("arguments"), A(std::move(condition_arguments))});
  return A({S("set"), A({S("summary"), S("Sets the string value of a key"), S("since"), S("1.0.0"),
                         S("arguments"),
                         A({Argument("key", ""), Argument("value", ""), std::move(condition),
                            Argument("get", "GET")})})});
}

TEST(ServerCommandsTest, SetDocsIfeqAtAnyDepth) {
  EXPECT_TRUE(SetDocsHaveIfeq(
      SetDocs({Argument("nx", "NX"), Argument("xx", "XX"), Argument("comparison-value", "IFEQ")})));
  EXPECT_TRUE(SetDocsHaveIfeq(SetDocs({Argument("ifeq", "ifeq")})));
  EXPECT_FALSE(SetDocsHaveIfeq(SetDocs({Argument("nx", "NX"), Argument("xx", "XX")})));
  // IFEQ as a name or a summary word is not the token.
  EXPECT_FALSE(SetDocsHaveIfeq(A({S("set"), A({S("summary"), S("IFEQ"), S("name"), S("IFEQ")})})));
  EXPECT_FALSE(SetDocsHaveIfeq(A({})));
  EXPECT_FALSE(SetDocsHaveIfeq(Reply::Error("ERR unknown subcommand 'DOCS'")));
}

TEST(ServerCommandsTest, HandshakeStepsStoreWhatTheServerSaid) {
  auto commands = std::make_shared<ServerCommands>(2);
  EXPECT_FALSE(commands->Get(1).known);
  EXPECT_EQ(commands->Get(1).Describe(), "unknown");
  std::vector<HandshakeStep> steps = ServerCommandSteps(commands, 1);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_NE(steps[0].payload.find("DELIFEQ"), std::string::npos);
  EXPECT_NE(steps[1].payload.find("DOCS"), std::string::npos);
  EXPECT_EQ(steps[0].check(A({Described("delifeq"), Reply::Nil()})), "");
  EXPECT_EQ(steps[1].check(SetDocs({Argument("comparison-value", "IFEQ")})), "");
  NodeCommands c = commands->Get(1);
  EXPECT_TRUE(c.known && c.delifeq && !c.delex && c.set_ifeq);
  EXPECT_EQ(c.Describe(), "DELIFEQ, SET IFEQ");
  EXPECT_FALSE(commands->Get(0).known);

  // A reconnection to a server that refuses COMMAND: none, and no failure.
  EXPECT_EQ(steps[0].check(Reply::Error("NOPERM this user has no permissions")), "");
  EXPECT_EQ(steps[1].check(Reply::Error("NOPERM this user has no permissions")), "");
  c = commands->Get(1);
  EXPECT_TRUE(c.known);
  EXPECT_FALSE(c.delifeq || c.delex || c.set_ifeq);
  EXPECT_EQ(c.Describe(), "none");
}

}  // namespace
}  // namespace redlock::internal
