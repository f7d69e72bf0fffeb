// common/flags.h: the command line of the project's programs, parsed with
// Abseil's flags. Each program defines its flags with ABSL_FLAG
// (absl/flags/flag.h) and reads them with absl::GetFlag; this file turns argv
// into flag values through Abseil's registry (absl/flags/reflection.h): each
// value is parsed by the flag's own type (AbslParseFlag), so a bad number,
// duration or switch is refused naming the flag.
//
//   ABSL_FLAG(bool, json, false, "Print one JSON document instead of the table.");
//   ABSL_FLAG(std::vector<std::string>, scenario, {}, "Run this scenario (repeatable).");
//
//   int main(int argc, char** argv) {
//     redlock::flags::Parsed args = redlock::flags::ParseOrExit(
//         argc, argv, "redlock-check", "usage: redlock-check [flags] HISTORY.jsonl...",
//         {.files = {"chaos/check_main.cc"}});
//     for (const std::string& path : args.positional) ...
//     if (absl::GetFlag(FLAGS_json)) ...
//   }
//
// What the command line may hold (the conventions of every program):
//   --name=VALUE, --name VALUE   a flag with a value (the next argument is the
//                                value, whatever it looks like: --json -)
//   --name, --noname             a switch (bool flag); --name=true|false too
//   --a-name                     is --a_name: dashes and underscores are one
//   -h, --help                   Parsed::help (ParseOrExit prints the help)
//   --                           the rest is positional (Parsed::tail)
//   anything else                a positional argument ("-" is one)
// A flag given twice: the last value wins, except std::vector<std::string>
// flags, whose values add up (--scenario a --scenario b is {a, b}).
//
// Thread-safety: parsing sets process-wide flags; do it once, at the start
// of main, before other threads run.

#ifndef REDLOCK_COMMON_FLAGS_H_
#define REDLOCK_COMMON_FLAGS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace redlock::flags {

// Which flags a command line may set, and how it reads.
struct Options {
  // The flags it may set, by name as defined (with underscores). Together
  // with `files`; both empty: none.
  std::vector<std::string> names;
  // Every flag defined (ABSL_FLAG) in a file whose path ends with one of
  // these ("chaos/check_main.cc").
  std::vector<std::string> files;
  // The first positional argument and everything after it go to `tail` (a
  // command to run: `redlock run --ttl 10s sleep 5`).
  bool stop_at_first_positional = false;
  // "--" is allowed (and ends the flags). False: "--" is an error.
  bool double_dash = true;
  // Other spellings of flags: {"-v", "verbose"}.
  std::map<std::string, std::string> aliases;
  // Flags whose value may be left out (then ""): with no "=", the next
  // argument is their value only if it does not start with "-".
  std::vector<std::string> optional_value;
  // Names in messages and help with dashes (--shrink-runs) rather than
  // underscores (--shrink_runs).
  bool dashes = true;
  // The value's name in the help ("FILE", "DUR"); default from the type.
  std::map<std::string, std::string> value_names;
};

// What Parse found.
struct Parsed {
  // Arguments that are not flags, in order.
  std::vector<std::string> positional;
  // After "--" (or from the first positional argument with
  // stop_at_first_positional).
  std::vector<std::string> tail;
  // "--" was given.
  bool double_dash = false;
  // -h or --help was given.
  bool help = false;
  // Every flag set, in command-line order: its name as defined and the value
  // given ("true"/"false" for a switch).
  std::vector<std::pair<std::string, std::string>> given;

  // True when flag `name` (as defined) was set.
  bool Given(absl::string_view name) const;
  // The first argument that is not a flag (positional, else after "--"),
  // or nullptr when there is none: for programs that take none.
  const std::string* FirstArgument() const;
};

// Parses `args` (argv without the program name) into the flags `options`
// names. kInvalidArgument with a one-line message naming the argument for
// an unknown flag, a missing or bad value, or "--" where it is not allowed;
// the flags set before the error keep their new values.
absl::StatusOr<Parsed> Parse(const std::vector<std::string>& args, const Options& options);

// One block of help lines for the flags `options` names, sorted by name:
// "  --name VALUE   help (default: D)", wrapped at 79 columns.
std::string Help(const Options& options);

// The usual main(): parses argv[1..]. -h/--help prints `usage`, a blank line,
// "Flags:" and Help(options) on stdout and exits 0; an error prints
// "<program>: <message> (see --help)" on stderr and exits 2.
Parsed ParseOrExit(int argc, char** argv, absl::string_view program, absl::string_view usage,
                   const Options& options);

}  // namespace redlock::flags

#endif  // REDLOCK_COMMON_FLAGS_H_
