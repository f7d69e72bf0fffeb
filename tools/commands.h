// The subcommands of the `redlock` tool (see tools/README.md).

#ifndef REDLOCK_TOOLS_COMMANDS_H_
#define REDLOCK_TOOLS_COMMANDS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/observer.h"
#include "tools/cli_flags.h"

namespace redlock::cli {

struct CommandSpec {
  std::string name;
  std::string summary;          // one line for `redlock --help`
  std::string usage;            // "redlock acquire --resource R --ttl DUR [--wait DUR]"
  std::string details;          // what it does, output, exit codes
  std::vector<FlagSpec> flags;  // its own flags (the global ones are added)
  bool command_tail = false;    // `run`, `elect`: take a command after their flags
  // Returns the process exit code. Errors are printed, one line each.
  int (*run)(const ParsedArgs& args) = nullptr;
};

// Every subcommand, in help order.
const std::vector<CommandSpec>& Commands();
const CommandSpec* FindCommand(const std::string& name);

// The flags `spec` accepts: its own, then the global ones.
std::vector<FlagSpec> AcceptedFlags(const CommandSpec& spec);

// Help of one subcommand.
std::string CommandHelp(const CommandSpec& spec);

int RunAcquire(const ParsedArgs& args);
int RunRelease(const ParsedArgs& args);
int RunExtend(const ParsedArgs& args);
int RunStatus(const ParsedArgs& args);
int RunRun(const ParsedArgs& args);    // tools/run_command.cc
int RunElect(const ParsedArgs& args);  // tools/elect_command.cc

// Shared by the subcommands.

// --resource (or, for `status`, the one positional argument); checks the
// length limits. kInvalidArgument otherwise.
absl::StatusOr<std::string> ResourceFlag(const ParsedArgs& args, bool allow_positional);
// A required duration flag (`name`), or `fallback` when absent and a fallback
// is given.
absl::StatusOr<absl::Duration> DurationFlag(const ParsedArgs& args, const std::string& name,
                                            bool required, absl::Duration fallback,
                                            bool allow_zero);
// The flags `redlock run` and `redlock elect` share: --resource, --ttl
// (required when `default_ttl` is zero), --wait, --grace, --max-hold and
// --at-risk-signal, and the command after "--" (`usage` is the line a
// missing one prints). kInvalidArgument naming the bad one otherwise.
struct SuperviseFlags {
  std::string resource;
  absl::Duration ttl;
  absl::Duration wait;
  absl::Duration grace;
  absl::Duration max_hold;
  int at_risk_signal = 0;
};
absl::StatusOr<SuperviseFlags> ParseSuperviseFlags(const ParsedArgs& args,
                                                   absl::Duration default_ttl,
                                                   absl::Duration default_wait,
                                                   absl::string_view usage);
// Options from the flags and REDLOCK_NODES (with `observer`, if given), then
// Client::Create.
absl::StatusOr<std::unique_ptr<Client>> MakeClient(const ParsedArgs& args,
                                                   std::shared_ptr<Observer> observer = nullptr);
// The client of a command that supervises a child (run, elect), or null
// with the error printed as `command` and its exit code in *exit_code. Made
// with every signal of HandledSignals() blocked (tools/supervise.h): its I/O
// thread inherits the mask at its creation, so only the main thread takes
// them. Open an InterruptSignals before, so that SIGINT and SIGTERM cancel
// the wait that follows (for the lock, for the leadership).
std::unique_ptr<Client> MakeSupervisingClient(absl::string_view command, const ParsedArgs& args,
                                              int* exit_code);
// The lease as the one JSON line `acquire` and `extend` print.
std::string LeaseJson(const Lease& lease, bool with_fencing_token);

}  // namespace redlock::cli

#endif  // REDLOCK_TOOLS_COMMANDS_H_
