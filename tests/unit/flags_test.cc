// common/flags.h: argv into Abseil flags, the conventions every program of
// the project follows (no server).

#include "common/flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

ABSL_FLAG(bool, test_switch, false, "A switch.");
ABSL_FLAG(int, test_count, 3, "A count.");
ABSL_FLAG(absl::Duration, test_wait, absl::Seconds(1), "A duration.");
ABSL_FLAG(std::string, test_name, "", "A text.");
ABSL_FLAG(std::string, test_kinds, "", "A text whose value may be left out.");
ABSL_FLAG(std::vector<std::string>, test_item, {}, "Repeatable.");
ABSL_FLAG(uint64_t, test_other_file, 0, "Accepted only when named.");

namespace redlock::flags {
namespace {

// Every flag of this file, back at its default before each test.
class FlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::SetFlag(&FLAGS_test_switch, false);
    absl::SetFlag(&FLAGS_test_count, 3);
    absl::SetFlag(&FLAGS_test_wait, absl::Seconds(1));
    absl::SetFlag(&FLAGS_test_name, "");
    absl::SetFlag(&FLAGS_test_kinds, "");
    absl::SetFlag(&FLAGS_test_item, {});
  }

  static Options ThisFile() {
    Options o;
    o.names = {"test_switch", "test_count", "test_wait", "test_name", "test_kinds", "test_item"};
    return o;
  }
};

TEST_F(FlagsTest, FormsOfAFlag) {
  absl::StatusOr<Parsed> p = Parse(
      {"--test-count=7", "--test_wait", "250ms", "--test-switch", "pos", "--test-name", "-", "-"},
      ThisFile());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 7);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_wait), absl::Milliseconds(250));
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_switch));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_name), "-") << "a value is the next argument, whatever it is";
  EXPECT_EQ(p->positional, (std::vector<std::string>{"pos", "-"}));
  EXPECT_TRUE(p->Given("test_count"));
  EXPECT_FALSE(p->Given("test_kinds"));
  ASSERT_EQ(p->given.size(), 4u);
  EXPECT_EQ(p->given[0].first, "test_count");
  EXPECT_EQ(p->given[0].second, "7");

  p = Parse({"--notest_switch", "--test-count", "1", "--test-count", "2"}, ThisFile());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(absl::GetFlag(FLAGS_test_switch));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 2) << "the last one wins";
}

TEST_F(FlagsTest, RepeatedListsAddUp) {
  absl::StatusOr<Parsed> p =
      Parse({"--test-item", "a", "--test-item=b,c", "--test-item", "d"}, ThisFile());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_test_item), (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST_F(FlagsTest, ErrorsNameTheArgument) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--bogus"}, "unknown flag '--bogus'"},
      {{"--bogus=1"}, "unknown flag '--bogus'"},
      {{"-x"}, "unknown flag '-x'"},
      {{"--test-other-file=1"}, "unknown flag '--test-other-file'"},
      {{"--test-count"}, "--test-count needs a value"},
      {{"--test-count", "many"}, "--test-count: bad value 'many'"},
      {{"--test-switch=maybe"}, "--test-switch: bad value 'maybe'"},
      {{"--notest-switch=1"}, "--notest-switch takes no value (it is --test-switch=false)"},
      {{"--test-wait", "soon"}, "--test-wait: bad value 'soon'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Parsed> p = Parse(c.args, ThisFile());
    ASSERT_FALSE(p.ok()) << c.args[0];
    EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
    EXPECT_EQ(p.status().message(), c.message);
  }
  // Names in messages as the program writes them.
  Options underscores = ThisFile();
  underscores.dashes = false;
  EXPECT_EQ(Parse({"--test-count"}, underscores).status().message(), "--test_count needs a value");
}

TEST_F(FlagsTest, DoubleDashAndTheCommandTail) {
  absl::StatusOr<Parsed> p = Parse({"a", "--", "--test-count", "9"}, ThisFile());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->positional, (std::vector<std::string>{"a"}));
  EXPECT_EQ(p->tail, (std::vector<std::string>{"--test-count", "9"}));
  EXPECT_TRUE(p->double_dash);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 3);

  Options command = ThisFile();
  command.stop_at_first_positional = true;
  p = Parse({"--test-switch", "sleep", "--help", "--test-count=1"}, command);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tail, (std::vector<std::string>{"sleep", "--help", "--test-count=1"}));
  EXPECT_FALSE(p->help);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 3);

  Options no_dash = ThisFile();
  no_dash.double_dash = false;
  EXPECT_EQ(Parse({"--"}, no_dash).status().message(), "unexpected '--'");
}

TEST_F(FlagsTest, HelpAliasesAndOptionalValues) {
  Options o = ThisFile();
  o.aliases = {{"-s", "test_switch"}};
  o.optional_value = {"test_kinds"};
  absl::StatusOr<Parsed> p = Parse({"-h", "-s", "--test-kinds"}, o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->help);
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_switch));
  EXPECT_TRUE(p->Given("test_kinds"));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_kinds), "");
  p = Parse({"--test-kinds", "a,b", "x"}, o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_test_kinds), "a,b");
  EXPECT_EQ(p->positional, (std::vector<std::string>{"x"}));
  absl::SetFlag(&FLAGS_test_kinds, "");
  p = Parse({"--test-kinds", "--test-switch"}, o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_test_kinds), "");
}

TEST_F(FlagsTest, FlagsOfAFileAndTheirHelp) {
  Options o;
  o.files = {"tests/unit/flags_test.cc"};
  absl::StatusOr<Parsed> p = Parse({"--test-other-file", "5"}, o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_test_other_file), 5u);
  o.files = {"unit/flags_test.cc"};
  EXPECT_TRUE(Parse({"--test-count=4"}, o).ok());
  o.files = {"s_test.cc"};
  EXPECT_FALSE(Parse({"--test-count=4"}, o).ok()) << "a file is matched by whole path parts";

  o.files = {"tests/unit/flags_test.cc"};
  o.value_names = {{"test_name", "NAME"}};
  const std::string help = Help(o);
  EXPECT_NE(help.find("  --test-count N"), std::string::npos) << help;
  EXPECT_NE(help.find("A count. (default: 3)"), std::string::npos) << help;
  EXPECT_NE(help.find("  --test-name NAME"), std::string::npos) << help;
  EXPECT_NE(help.find("  --test-switch "), std::string::npos) << help;
  EXPECT_NE(help.find("  --test-wait DURATION"), std::string::npos) << help;
  EXPECT_EQ(help.find("A switch. (default"), std::string::npos) << help;
  EXPECT_LT(help.find("--test-count"), help.find("--test-wait")) << "sorted by name";
}

TEST_F(FlagsTest, AnUndefinedNameIsTheProgramsBug) {
  Options o;
  o.names = {"no_such_flag_anywhere"};
  EXPECT_EQ(Parse({}, o).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace redlock::flags
