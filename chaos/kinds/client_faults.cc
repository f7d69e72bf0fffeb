// The client family: the client processes themselves stopped (a GC pause, a
// VM migration) or their clocks moved, through the clock shim they run under
// (client_clock_shim: true).

#include "absl/strings/str_cat.h"
#include "chaos/kinds/kind_base.h"
#include "chaos/run/run.h"

namespace redlock::chaos {

namespace {

KindInfo ClientKind(KindInfo info) {
  return faults::InFamily("client", faults::kOnClients, std::move(info));
}

}  // namespace

void RegisterClientFaults(FaultKindList& out) {
  using faults::Add;
  using faults::SpanParam;
  Add(out, {.info = ClientKind(
                {.name = "client_pause",
                 .summary = "SIGSTOP of the client process, SIGCONT when healed: a GC pause; past "
                            "its lease's validity the holder keeps using the lock",
                 .lasting = true,
                 .explore_weight = 3,
                 .explore_duration = "10ms..2.5ttl",
                 .color = "#7f7f7f"}),
            .may_violate = [](const RunShape& s, const FaultInstance& f) -> PropertySet {
              // A client stopped inside its critical section for longer than the
              // guard it keeps before each use may outlive its lease (Kleppmann's
              // GC pause: no lock prevents it, fencing stops the harm). Stopped
              // anywhere else (idle, waiting for replies, before its release) a
              // correct client notices the time it lost.
              return f.in_use && f.duration >= s.guard ? faults::OutlivesLease(s) : 0;
            },
            .inject =
                [](Run& run, FaultInstance& f) {
                  for (int k : f.clients) {
                    f.in_use = f.in_use || run.ClientInUse(k);
                    // A client that has exited has nothing to pause.
                    if (!run.PauseClient(k).ok()) run.Note(absl::StrCat("c", k + 1, " not paused"));
                  }
                  return absl::OkStatus();
                },
            .heal =
                [](Run& run, FaultInstance& f) {
                  return faults::ForEach(f.clients, [&](int k) { return run.ResumeClient(k); });
                }});

  Add(out, {.info = ClientKind({.name = "client_crash",
                                .summary =
                                    "SIGKILL of the client process, never started again: a crashed "
                                    "process (a fair lock's waiter leaves its place to expire)",
                                .explore_weight = 0,
                                .color = "#3f3f3f"}),
            .may_violate = [](const RunShape& s, const FaultInstance& f) -> PropertySet {
              // A dead holder's lease runs out and a dead waiter's place expires:
              // nothing is promised to either.
              return 0;
            },
            .inject =
                [](Run& run, FaultInstance& f) {
                  for (int k : f.clients) {
                    if (!run.CrashClient(k).ok())
                      run.Note(absl::StrCat("c", k + 1, " not crashed"));
                  }
                  return absl::OkStatus();
                }});

  Add(out,
      {.info = ClientKind(
           {.name = "client_clock_jump",
            .summary = "the client's wall clock jumps by `wall`, its monotonic clock forward by "
                       "`monotonic`: the library measures leases on the steady clock, so only "
                       "a wall-clock client is fooled",
            .params = {SpanParam("wall", "-3s", "-5s..5s", "",
                                 "wall-clock jump (negative: backward)"),
                       SpanParam("monotonic", "0", "0..800ms", "0",
                                 "monotonic jump, forward only (a backward one would lengthen "
                                 "every lease: outside any lock's model)")},
            .explore_weight = 2,
            .color = "#17becf"}),
       .unsupported = [](const RunShape& s) -> std::string {
         return s.client_clock_shim ? ""
                                    : "needs the clients under the clock shim (client_clock_shim)";
       },
       .inject =
           [](Run& run, FaultInstance& f) {
             for (int k : f.clients) {
               ClockControl* c = run.client_clock(k);
               if (c == nullptr) return absl::FailedPreconditionError("no client clock shim");
               absl::Duration wall = f.span("wall"), mono = f.span("monotonic");
               absl::Status s = c->JumpBy(wall, mono);
               if (!s.ok()) return s;
               run.nemesis().Instant(
                   "client_clock_jump", {.clients = {Run::ClientName(k)}},
                   absl::StrCat("wall ", absl::FormatDuration(wall),
                                mono != absl::ZeroDuration()
                                    ? absl::StrCat(", monotonic ", absl::FormatDuration(mono))
                                    : "",
                                " (offset now ", absl::FormatDuration(c->state().realtime), ")"));
             }
             return absl::OkStatus();
           }});
}

}  // namespace redlock::chaos
