// `redlock run`: holds a lock, auto-renewed, while a command runs
// (tools/supervise.h: the signals, the at-risk and lost reactions).

#include <signal.h>
#include <string.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "tools/cli_flags.h"
#include "tools/commands.h"
#include "tools/interruptible.h"
#include "tools/supervise.h"

namespace redlock::cli {
namespace {

constexpr absl::string_view kName = "run";

}  // namespace

std::unique_ptr<Client> MakeSupervisingClient(absl::string_view command, const ParsedArgs& args,
                                              int* exit_code) {
  const sigset_t handled = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  absl::StatusOr<std::unique_ptr<Client>> client = MakeClient(args);
  if (!client.ok()) {
    PrintError(command, client.status().message());
    *exit_code = ExitCodeFor(client.status());
    return nullptr;
  }
  return *std::move(client);
}

absl::StatusOr<SuperviseFlags> ParseSuperviseFlags(const ParsedArgs& args,
                                                   absl::Duration default_ttl,
                                                   absl::Duration default_wait,
                                                   absl::string_view usage) {
  if (!args.positional.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional[0], "'"));
  }
  absl::StatusOr<std::string> resource = ResourceFlag(args, false);
  absl::StatusOr<absl::Duration> ttl =
      DurationFlag(args, "ttl", default_ttl == absl::ZeroDuration(), default_ttl, false);
  absl::StatusOr<absl::Duration> wait = DurationFlag(args, "wait", false, default_wait, true);
  absl::StatusOr<absl::Duration> grace =
      DurationFlag(args, "grace", false, absl::Seconds(10), true);
  absl::StatusOr<absl::Duration> max_hold =
      DurationFlag(args, "max-hold", false, absl::InfiniteDuration(), false);
  absl::StatusOr<int> at_risk_signal =
      ParseSignal(args.Has("at-risk-signal") ? args.Get("at-risk-signal") : "TERM");
  for (const absl::Status& st : {resource.status(), ttl.status(), wait.status(), grace.status(),
                                 max_hold.status(), at_risk_signal.status()}) {
    if (!st.ok()) return st;
  }
  if (args.command.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("missing the command: ", usage));
  }
  return SuperviseFlags{*resource, *ttl, *wait, *grace, *max_hold, *at_risk_signal};
}

int RunRun(const ParsedArgs& args) {
  absl::StatusOr<SuperviseFlags> flags =
      ParseSuperviseFlags(args, absl::ZeroDuration(), absl::ZeroDuration(),
                          "redlock run --resource R --ttl DUR -- CMD [ARGS...]");
  if (!flags.ok()) {
    PrintError(kName, flags.status().message());
    return kExitUsage;
  }
  const std::string& resource = flags->resource;

  // While waiting for the lock, SIGINT and SIGTERM cancel the wait.
  InterruptSignals interrupts;
  const sigset_t original = interrupts.original_mask();
  int exit_code = 0;
  std::unique_ptr<Client> client = MakeSupervisingClient(kName, args, &exit_code);
  if (client == nullptr) return exit_code;
  const bool fencing = client->options().fencing;

  int signo = 0;
  // With --fair, a place in the resource's queue while it waits; the lease's
  // release then also takes the place out and wakes the next waiter.
  absl::StatusOr<Lease> lease = AcquireInterruptibly(*client, resource, flags->ttl, flags->wait,
                                                     interrupts, &signo, args.Switch("fair"));
  if (std::optional<int> code = WaitFailed(
          kName, signo, lease.status(), " while waiting for the lock; the command was not run")) {
    return *code;
  }

  absl::StatusOr<std::shared_ptr<LossReport>> loss = LossReport::Create();
  if (!loss.ok()) {
    (void)client->Release(*lease);
    PrintError(kName, loss.status().message());
    return kExitInternal;
  }
  std::shared_ptr<LossReport> report = *loss;
  RenewOptions renew;
  renew.max_hold = flags->max_hold;
  renew.on_at_risk = [report](const Lease&, const absl::Status& why) {
    report->Report(why, false);
  };
  absl::StatusOr<std::unique_ptr<Renewal>> renewal = client->AutoRenew(
      *lease, std::move(renew), [report](absl::Status why) { report->Report(why, true); });
  if (!renewal.ok()) {
    (void)client->Release(*lease);
    PrintError(kName, renewal.status().message());
    return ExitCodeFor(renewal.status());
  }

  Supervision s;
  s.name = kName;
  s.held = absl::StrCat("the lock on ", JsonString(resource));
  s.command = args.command;
  s.env = {{"REDLOCK_RESOURCE", lease->resource()}, {"REDLOCK_TOKEN", lease->token()}};
  if (fencing) s.env.emplace_back("REDLOCK_FENCING_TOKEN", std::to_string(lease->fencing_token()));
  s.command_mask = original;
  s.grace = flags->grace;
  s.at_risk_signal = flags->at_risk_signal;
  return Supervise(s, *report, [&] {
    renewal->reset();
    return client->Release(*lease);
  });
}

}  // namespace redlock::cli
