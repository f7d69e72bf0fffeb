// `redlock elect`: campaigns for leadership of a resource and runs a
// command only while leader (tools/supervise.h: the same signals, at-risk
// and lost reactions and exit codes as `redlock run`).

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/election.h"
#include "tools/cli_flags.h"
#include "tools/commands.h"
#include "tools/interruptible.h"
#include "tools/supervise.h"

namespace redlock::cli {
namespace {

constexpr absl::string_view kName = "elect";

using LeadershipResult = absl::StatusOr<std::unique_ptr<Leadership>>;

// The campaign's result, handed from the client's I/O thread.
struct Campaigned {
  explicit Campaigned(int fd) : event_fd(fd) {}
  ~Campaigned() { close(event_fd); }
  Campaigned(const Campaigned&) = delete;
  Campaigned& operator=(const Campaigned&) = delete;
  void Set(LeadershipResult r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      result.emplace(std::move(r));
    }
    uint64_t one = 1;
    (void)!write(event_fd, &one, sizeof(one));
  }
  std::optional<LeadershipResult> Take() {
    std::lock_guard<std::mutex> lock(mu);
    return std::move(result);
  }
  const int event_fd;
  std::mutex mu;
  std::optional<LeadershipResult> result;
};

// Election::CampaignAsync, cancelled by the first SIGINT or SIGTERM (in
// *signo): as AcquireInterruptibly does for a lock.
LeadershipResult CampaignInterruptibly(Election& election, const std::string& identity,
                                       absl::Duration wait, CampaignOptions options,
                                       InterruptSignals& signals, int* signo) {
  *signo = 0;
  int event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd < 0 || signals.fd() < 0) {
    if (event_fd >= 0) close(event_fd);
    return election.Campaign(identity, wait, StopToken(), std::move(options));
  }
  auto done = std::make_shared<Campaigned>(event_fd);
  StopSource stop;
  election.CampaignAsync(identity, wait, stop.token(), std::move(options),
                         [done](LeadershipResult r) { done->Set(std::move(r)); });
  for (;;) {
    if (std::optional<LeadershipResult> r = done->Take(); r.has_value()) {
      if (*signo != 0 && r->ok()) {
        (void)(**r)->Resign();  // elected just before the stop took effect
        return absl::CancelledError(
            absl::StrCat("elect \"", election.resource(), "\": interrupted"));
      }
      return *std::move(r);
    }
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {done->event_fd, POLLIN, 0}};
    (void)poll(fds, 2, 100);
    if (int sig = signals.Take(); sig != 0 && *signo == 0) {
      *signo = sig;
      stop.RequestStop();
    }
  }
}

std::string DefaultIdentity() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] != '\0' ? host : "unknown", ":", getpid());
}

}  // namespace

int RunElect(const ParsedArgs& args) {
  absl::StatusOr<SuperviseFlags> flags =
      ParseSuperviseFlags(args, absl::Seconds(10), absl::InfiniteDuration(),
                          "redlock elect --resource R [--id NAME] -- CMD [ARGS...]");
  if (!flags.ok()) {
    PrintError(kName, flags.status().message());
    return kExitUsage;
  }
  const std::string& resource = flags->resource;
  const std::string identity = args.Has("id") ? args.Get("id") : DefaultIdentity();
  if (identity.size() > Election::kMaxIdentity) {
    PrintError(kName, absl::StrCat("--id: at most ", Election::kMaxIdentity, " bytes"));
    return kExitUsage;
  }

  // While campaigning, SIGINT and SIGTERM cancel.
  InterruptSignals interrupts;
  const sigset_t original = interrupts.original_mask();
  int exit_code = 0;
  std::unique_ptr<Client> client = MakeSupervisingClient(kName, args, &exit_code);
  if (client == nullptr) return exit_code;
  absl::StatusOr<std::shared_ptr<LossReport>> loss = LossReport::Create();
  if (!loss.ok()) {
    PrintError(kName, loss.status().message());
    return kExitInternal;
  }
  std::shared_ptr<LossReport> report = *loss;

  Election election(client.get(), resource);
  CampaignOptions campaign;
  campaign.ttl = flags->ttl;
  campaign.renew.max_hold = flags->max_hold;
  campaign.renew.on_at_risk = [report](const Lease&, const absl::Status& why) {
    report->Report(why, false);
  };
  campaign.on_lost = [report](const absl::Status& why) { report->Report(why, true); };
  int signo = 0;
  LeadershipResult leadership = CampaignInterruptibly(election, identity, flags->wait,
                                                      std::move(campaign), interrupts, &signo);
  if (std::optional<int> code = WaitFailed(kName, signo, leadership.status(),
                                           " while campaigning; the command was not run")) {
    return *code;
  }
  Leadership& leader = **leadership;
  const std::string term = std::to_string(leader.term());
  Supervision s;
  s.name = kName;
  s.held = absl::StrCat("leadership of ", JsonString(resource));
  s.command = args.command;
  s.env = {{"REDLOCK_RESOURCE", resource},
           {"REDLOCK_TOKEN", leader.lease().token()},
           {"REDLOCK_LEADER_ID", identity},
           {"REDLOCK_TERM", term},
           {"REDLOCK_FENCING_TOKEN", term}};
  s.command_mask = original;
  s.grace = flags->grace;
  s.at_risk_signal = flags->at_risk_signal;
  return Supervise(s, *report, [&] { return leader.Resign(); });
}

}  // namespace redlock::cli
