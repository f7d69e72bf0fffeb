// Command-line parsing for the `redlock` tool: flags, durations, exit codes,
// and the one-line JSON and error output shared by every subcommand.
//
// Every flag of the tool is an Abseil flag (ABSL_FLAG in cli_flags.cc),
// parsed by common/flags.h; each subcommand accepts its own flags and the
// global ones (FlagSpec lists them, with the help text of that subcommand).

#ifndef REDLOCK_TOOLS_CLI_FLAGS_H_
#define REDLOCK_TOOLS_CLI_FLAGS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/options.h"

namespace redlock::cli {

// The tool's own exit codes (tools/README.md). They sit above the codes
// commands commonly use, so that `redlock run` can pass the command's status
// through and still be told apart from its own failures.
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 64,        // bad flags or input; nothing was sent
  kExitHeld = 65,         // a quorum answered and someone else holds it
  kExitUnavailable = 66,  // fewer than a quorum of nodes answered
  kExitLeaseLost = 67,    // extend found the lease gone; run lost it
  kExitTimedOut = 68,     // --wait passed, or no validity was left
  kExitInternal = 70,     // unexpected replies, script or system errors
  kExitCannotExecute = 126,
  kExitNotFound = 127,
};

// The exit code for a library status (docs/design.md 7.1).
int ExitCodeFor(const absl::Status& status);

// A duration with a unit: "500ms", "30s", "2m", "1h", "1.5s", "250us".
// Rejects a bare number, negative and infinite values, and zero unless
// `allow_zero`. The error names `flag`.
absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view text,
                                                 bool allow_zero = false);

// The type of the tool's duration flags (--ttl 30s): the text as given, once
// it is a duration ParseDurationFlag takes with zero allowed (each command
// then applies its own rule with ParseDurationFlag).
struct DurationText {
  std::string text;
};
bool AbslParseFlag(absl::string_view text, DurationText* out, std::string* error);
std::string AbslUnparseFlag(const DurationText& d);

// One accepted flag: an Abseil flag of cli_flags.cc (its name with dashes)
// and how a subcommand describes it.
struct FlagSpec {
  std::string name;        // without the dashes: "ttl"
  bool takes_value;        // --name VALUE / --name=VALUE; else a switch
  std::string value_name;  // for the help text: "DUR"
  std::string help;        // one line
};

struct ParsedArgs {
  // Last value of each flag given (switches map to "true" or "false").
  std::map<std::string, std::string> values;
  // Arguments that are not flags, in order (before the command of `run`).
  std::vector<std::string> positional;
  // `run`: everything from the first positional argument or after "--".
  std::vector<std::string> command;
  bool help = false;
  bool version = false;

  bool Has(const std::string& name) const { return values.count(name) != 0; }
  std::string Get(const std::string& name, std::string fallback = "") const;
  bool Switch(const std::string& name) const;
};

// Parses `args` against `specs` with Abseil's flags (common/flags.h):
// --name VALUE, --name=VALUE, --name / --noname / --name=true|false for
// switches, dashes or underscores. --help/-h and --version are always
// accepted. With `command_tail`, the first positional argument and
// everything after it (or everything after "--") is the command to run.
// kInvalidArgument, naming the flag, for an unknown flag, a missing value or
// a bad one (a switch given something else than true/false, 1/0, yes/no; a
// duration without a unit; a count that is not a number).
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<FlagSpec>& specs,
                                     const std::vector<std::string>& args, bool command_tail);

// The flags every subcommand takes (--nodes, --all-nodes, ...).
const std::vector<FlagSpec>& GlobalFlags();

// "  --name VALUE    help" lines for `specs`.
std::string FormatFlagHelp(const std::vector<FlagSpec>& specs);

// Looks up an environment variable (std::getenv, or a table in tests); null
// when unset.
using EnvLookup = std::function<const char*(const char*)>;

// Builds the client options from the global flags, with REDLOCK_NODES
// (`env_nodes`, may be null) as the fallback node list and, when `env` is
// given, REDLOCK_TLS_CA, REDLOCK_TLS_CERT, REDLOCK_TLS_KEY,
// REDLOCK_TLS_SERVER_NAME and REDLOCK_TLS_INSECURE as the fallbacks of the
// --tls-* flags. kInvalidArgument naming the flag or the variable.
absl::StatusOr<Options> OptionsFromFlags(const ParsedArgs& args, const char* env_nodes,
                                         const EnvLookup& env = nullptr);

// `text` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view text);

// Milliseconds, truncated.
int64_t Millis(absl::Duration d);

// Prints "redlock <command>: <message>" as one line on stderr (newlines in
// the message become spaces).
void PrintError(absl::string_view command, absl::string_view message);

}  // namespace redlock::cli

#endif  // REDLOCK_TOOLS_CLI_FLAGS_H_
