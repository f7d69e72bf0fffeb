// redlock: the command-line tool (tools/README.md).
//
//   redlock run --resource nightly-report --ttl 30s -- ./report.sh
//   redlock elect --resource scheduler --id host-a -- ./scheduler
//   redlock acquire --resource orders/42 --ttl 30s --wait 5s
//   redlock status orders/42

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/cli_flags.h"
#include "tools/commands.h"

#ifndef REDLOCK_VERSION
#define REDLOCK_VERSION "unknown"
#endif

namespace redlock::cli {
namespace {

constexpr char kExitCodes[] =
    R"(Exit codes:
  0    success (run, elect: the command's own exit status)
  64   usage: bad flags or input (no nodes, malformed endpoint, bad duration,
       missing --resource); nothing was sent to the nodes
  65   held elsewhere: a quorum answered and someone else holds the resource
  66   unavailable: fewer than a quorum of nodes answered
  67   lease lost: extend found the lock gone, or run (elect) lost the lock
       (leadership) while the command was running (the command got
       SIGTERM, then SIGKILL)
  68   timed out: the --wait deadline passed (or no validity was left)
  70   internal error: unexpected replies, script or system errors
  126  run, elect: the command cannot be executed
  127  run, elect: the command was not found
  128+N  run, elect: the command died of signal N
  130, 143  acquire --wait, run, elect: interrupted by SIGINT or SIGTERM while
       waiting for the lock (or leadership); the wait was cancelled and
       nothing is held
)";

std::string ToolHelp() {
  std::string out =
      "usage: redlock [global flags] <command> [flags]\n"
      "\n"
      "Distributed locks on N independent Redis masters (the Redlock algorithm).\n"
      "\n"
      "Commands:\n";
  for (const CommandSpec& c : Commands()) {
    absl::StrAppend(&out, absl::StrFormat("  %-9s %s\n", c.name, c.summary));
  }
  absl::StrAppend(
      &out,
      "\n'redlock <command> --help' (or 'redlock help <command>') describes one command.\n"
      "\nGlobal flags (before or after the command):\n",
      FormatFlagHelp(GlobalFlags()),
      FormatFlagHelp(
          {{"help, -h", false, "", "this help"}, {"version", false, "", "print the version"}}),
      "\nDurations are a number and a unit: 500ms, 30s, 2m, 1h, 1.5s.\n"
      "Errors are printed on stderr, one line each.\n\n",
      kExitCodes);
  return out;
}

int Usage(const std::string& message) {
  PrintError("", absl::StrCat(message, " (see 'redlock --help')"));
  return kExitUsage;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // Global flags may come before the command name.
  size_t i = 0;
  std::vector<std::string> leading;
  while (i < args.size() && args[i].size() > 1 && args[i][0] == '-' && args[i] != "--") {
    leading.push_back(args[i]);
    const std::string& a = args[i];
    ++i;
    // A value-taking global flag written as "--flag value" owns the next word
    // (--node-timeout and --node_timeout are one flag).
    if (a.find('=') == std::string::npos && i < args.size()) {
      std::string dashed = a;
      std::replace(dashed.begin(), dashed.end(), '_', '-');
      for (const FlagSpec& f : GlobalFlags()) {
        if (f.takes_value && dashed == "--" + f.name) {
          leading.push_back(args[i]);
          ++i;
          break;
        }
      }
    }
  }
  absl::StatusOr<ParsedArgs> global = ParseArgs(GlobalFlags(), leading, false);
  if (!global.ok()) return Usage(std::string(global.status().message()));
  if (global->version) {
    std::printf("redlock %s\n", REDLOCK_VERSION);
    return kExitOk;
  }
  if (i >= args.size()) {
    if (global->help) {
      std::fputs(ToolHelp().c_str(), stdout);
      return kExitOk;
    }
    std::fputs(ToolHelp().c_str(), stderr);
    return kExitUsage;
  }
  std::string name = args[i++];
  if (global->help && name != "help") {
    const CommandSpec* spec = FindCommand(name);
    if (spec == nullptr) return Usage(absl::StrCat("unknown command '", name, "'"));
    std::fputs(CommandHelp(*spec).c_str(), stdout);
    return kExitOk;
  }
  if (name == "help") {
    if (i >= args.size()) {
      std::fputs(ToolHelp().c_str(), stdout);
      return kExitOk;
    }
    const CommandSpec* spec = FindCommand(args[i]);
    if (spec == nullptr) return Usage(absl::StrCat("unknown command '", args[i], "'"));
    std::fputs(CommandHelp(*spec).c_str(), stdout);
    return kExitOk;
  }
  const CommandSpec* spec = FindCommand(name);
  if (spec == nullptr) return Usage(absl::StrCat("unknown command '", name, "'"));

  std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(AcceptedFlags(*spec), rest, spec->command_tail);
  if (!parsed.ok()) {
    PrintError(spec->name,
               absl::StrCat(parsed.status().message(), " (see 'redlock ", spec->name, " --help')"));
    return kExitUsage;
  }
  if (parsed->help) {
    std::fputs(CommandHelp(*spec).c_str(), stdout);
    return kExitOk;
  }
  if (parsed->version) {
    std::printf("redlock %s\n", REDLOCK_VERSION);
    return kExitOk;
  }
  // Global flags given before the command; those after it win.
  for (const auto& [flag, value] : global->values) parsed->values.emplace(flag, value);
  return spec->run(*parsed);
}

}  // namespace

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec>* const commands = new std::vector<CommandSpec>{
      {"run",
       "hold a lock while a command runs (auto-renewed); exit with its status",
       "redlock run --resource R --ttl DUR [--wait DUR] [--fair] [--grace DUR] [--] CMD [ARGS...]",
       R"(Takes the lock, runs CMD with it held and renews it every ttl/3 while CMD
runs (Client::AutoRenew); releases it when CMD exits, and exits with CMD's
status (128+N if CMD died of signal N). The command is the first argument
that is not a flag, or everything after "--".

CMD gets REDLOCK_RESOURCE, REDLOCK_TOKEN and, with --fencing,
REDLOCK_FENCING_TOKEN in its environment: pass the fencing token to the
resource you protect.

With --fair, the fair lock (redlock/fair_mutex.h): while it waits, redlock
holds a place in R's queue, and the lock goes to the waiters in the order
they took their places, one woken per release, across processes; a zero
--wait takes the lock only when it is free and nobody waits. A waiter whose
place was lost (it was paused or cut off longer than the place's 2 s ttl)
exits 65. Mix fair and plain callers of one R only knowingly: they exclude
each other, but a plain caller ignores the queue.

When the lease is at risk (renewals keep failing and less than ttl/3 of
validity is left, or --max-hold is reached), redlock sends CMD the
--at-risk-signal (default SIGTERM) so it can stop before the lock is gone.
If the lease is then lost (a renewal finds a quorum no longer holds the
token, or the validity runs out), redlock says so on stderr, sends that
signal if it has not yet, SIGKILLs CMD if it still runs --grace after the
loss, and exits 67 whatever CMD's status: 67 always means "the lock was
lost", CMD's own status means "the lock held throughout".

SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to redlock are forwarded to CMD
(redlock then waits for CMD to exit). Signals from the terminal (Ctrl-C)
already reach CMD, which runs in redlock's process group, and are not sent
twice. While redlock is still waiting for the lock, SIGINT and SIGTERM
cancel the wait (exit 130 or 143; CMD is not run, nothing is held).
)",
       {{"resource", true, "R", "the lock name (the Redis key, after --key-prefix)"},
        {"ttl", true, "DUR", "lease ttl; renewed every ttl/3 while CMD runs (required)"},
        {"wait", true, "DUR", "wait up to DUR for the lock if it is held (default 0: one attempt)"},
        {"fair", false, "", "the fair lock: waiters are served first come, first served"},
        {"grace", true, "DUR",
         "after losing the lease, SIGKILL CMD if it still runs DUR later (default 10s)"},
        {"at-risk-signal", true, "SIG",
         "sent to CMD when the lease is at risk (default TERM; 'none' to send nothing)"},
        {"max-hold", true, "DUR",
         "renew no longer than this in all: then the lease runs out (default: no limit)"}},
       true,
       &RunRun},
      {"elect",
       "campaign for leadership of a resource; run a command only while leader",
       "redlock elect --resource R [--id NAME] [--ttl DUR] [--wait DUR] [--] CMD [ARGS...]",
       R"(Campaigns for leadership of R (redlock/election.h): waits until no other
candidate leads (woken when the leader resigns; a leader that died is
replaced when its lease runs out, about --ttl later), then runs CMD while
leading, renewing the leadership every ttl/3, and resigns when CMD exits
(the next candidate takes over at once). Exits with CMD's status.

CMD gets REDLOCK_RESOURCE, REDLOCK_TOKEN, REDLOCK_LEADER_ID (the --id),
and REDLOCK_TERM (also as REDLOCK_FENCING_TOKEN): the leader's term, a
fencing token that strictly increases across leaders whatever --fencing
says. Pass it to what the leader acts on, so a deposed leader (paused past
its lease) is refused there. `redlock status R` shows the leader's token;
its identity is the hex after the '.' in it.

Signals, at-risk and loss as for `run`: the --at-risk-signal (default
SIGTERM) when the leadership is at risk, SIGKILL --grace after it is lost,
and exit 67 whatever CMD's status when it was lost. SIGINT, SIGTERM, SIGHUP
and SIGQUIT are forwarded to CMD; while campaigning, SIGINT and SIGTERM
cancel the campaign (exit 130 or 143; CMD is not run).
)",
       {{"resource", true, "R", "the election's name (the Redis key, after --key-prefix)"},
        {"id", true, "NAME", "this candidate's identity, as others see it (default: host:pid)"},
        {"ttl", true, "DUR", "the leader's lease, renewed every ttl/3 (default 10s)"},
        {"wait", true, "DUR", "campaign at most this long (default: until leader)"},
        {"grace", true, "DUR",
         "after losing leadership, SIGKILL CMD if it still runs DUR later (default 10s)"},
        {"at-risk-signal", true, "SIG",
         "sent to CMD when leadership is at risk (default TERM; 'none' to send nothing)"},
        {"max-hold", true, "DUR",
         "lead no longer than this in all: then the lease runs out (default: no limit)"}},
       true,
       &RunElect},
      {"acquire",
       "take a lock and print the lease as one JSON line; it expires at its ttl",
       "redlock acquire --resource R --ttl DUR [--wait DUR] [--fair]",
       R"(Takes the lock and prints the lease on stdout as one JSON line:
  {"resource":"R","token":"...","validity_ms":29690,"ttl_ms":30000,
   "nodes_granted":5,"fencing_token":0}
validity_ms is how long the lock is guaranteed (ttl minus the time the
acquisition took and the clock-drift allowance); fencing_token is 0 without
--fencing. The lock is not released when redlock exits: it expires after
its ttl unless you release or extend it with the token.

With --fair, the fair lock (redlock/fair_mutex.h): while it waits, redlock
holds a place in R's queue, kept alive every 2/3 s, and the lock goes to
the waiters in the order they took their places, across processes; a zero
--wait takes the lock only when it is free and nobody waits (exit 65
otherwise). Release its lease with `redlock release --fair`, which also
takes the holder's place out and wakes the next waiter (a plain release
frees the lock, but the next waiter learns of it only at its next
heartbeat, within 2/3 s). A waiter whose place was lost exits 65.
)",
       {{"resource", true, "R", "the lock name (required)"},
        {"ttl", true, "DUR", "lease ttl (required)"},
        {"wait", true, "DUR", "wait up to DUR for the lock if it is held (default 0: one attempt)"},
        {"fair", false, "", "the fair lock: waiters are served first come, first served"}},
       false,
       &RunAcquire},
      {"release",
       "release a lock taken by acquire (needs its token)",
       "redlock release --resource R --token T [--fair]",
       R"(Deletes the lock on every node where it still holds token T (a Lua
compare-and-delete) and announces the release to waiters. Idempotent:
releasing an expired, already released or foreign lock succeeds (exit 0)
and touches nothing. Exit 66 when fewer than a quorum confirmed: the lock
then stays until its ttl. With --fair (a lease of `acquire --fair`), also
takes the holder's place out of R's queue and wakes the next waiter.
)",
       {{"resource", true, "R", "the lock name (required)"},
        {"token", true, "T", "the token printed by acquire (required)"},
        {"fair", false, "", "the lease is a fair lock's (acquire --fair)"}},
       false,
       &RunRelease},
      {"extend",
       "extend a lock taken by acquire (needs its token)",
       "redlock extend --resource R --token T --ttl DUR",
       R"(Sets the lock's ttl to DUR again on every node that still holds token T
(never re-creates a missing key), and prints the lease as one JSON line
(without fencing_token, which the command line does not know). Exit 67 when
a quorum no longer holds T: the lock is lost.
)",
       {{"resource", true, "R", "the lock name (required)"},
        {"token", true, "T", "the token printed by acquire (required)"},
        {"ttl", true, "DUR", "the new ttl, counted from now (required)"}},
       false,
       &RunExtend},
      {"status",
       "show, per node, who holds a resource and for how long",
       "redlock status [--json] R    (or --resource R)",
       R"(Asks every node whether it holds R, with which token, how much ttl is
left, and its fencing counter (read-only). Prints a summary line and one
line per node, or one JSON object with --json. Exit 0 when a quorum of
nodes answered, whether R is held or not; 66 otherwise.

With --metrics, also takes and releases a probe lock (a resource of its own,
"redlock-probe/<host>/<pid>", never R) and prints the client's metrics in the
Prometheus text format (redlock/metrics.h) after the status.
)",
       {{"resource", true, "R", "the lock name (or give it as the argument)"},
        {"json", false, "", "print one JSON object instead of the table"},
        {"metrics", false, "",
         "then a probe acquire+release, and the metrics in Prometheus text format"}},
       false,
       &RunStatus},
  };
  return *commands;
}

const CommandSpec* FindCommand(const std::string& name) {
  for (const CommandSpec& c : Commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::vector<FlagSpec> AcceptedFlags(const CommandSpec& spec) {
  std::vector<FlagSpec> flags = spec.flags;
  flags.insert(flags.end(), GlobalFlags().begin(), GlobalFlags().end());
  return flags;
}

std::string CommandHelp(const CommandSpec& spec) {
  std::string summary = spec.summary;
  if (!summary.empty()) summary[0] = absl::ascii_toupper(static_cast<unsigned char>(summary[0]));
  return absl::StrCat("usage: ", spec.usage, "\n\n", summary, ".\n\n", spec.details, "\nFlags:\n",
                      FormatFlagHelp(spec.flags), "\nGlobal flags:\n",
                      FormatFlagHelp(GlobalFlags()), "\n", kExitCodes);
}

}  // namespace redlock::cli

int main(int argc, char** argv) { return redlock::cli::Main(argc, argv); }
