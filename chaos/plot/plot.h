// chaos/plot/plot.h: a timeline picture of a chaos run, as one self-contained SVG
// (common/svg.h: no script, no external font, image or stylesheet).
//
//   absl::StatusOr<std::vector<redlock::chaos::Event>> history =
//       redlock::chaos::ReadHistory(paths);
//   redlock::chaos::CheckResult check = redlock::chaos::Check(*history);
//   std::string svg = redlock::chaos::RenderTimeline(*history, check);
//
// What it shows, on the raw monotonic host clock the histories record, as ms
// from the scenario's start (the history's `run` event, else its first
// event):
//
//   title     scenario, seed, configuration, verdict and expected verdict
//             (from the `run` event), the violations of S1..S4 found by
//             `check` (and S5 as the run recorded it)
//   a lane per client
//             each hold from grant to its end (release, or the end of its
//             validity, or its last use if later; past the validity hatched),
//             its fencing token where there is room (always in its tooltip),
//             its uses, writes refused by the fenced store (x), and failed
//             attempts as ticks, one row per outcome (held elsewhere,
//             unavailable, no validity left, other). Ticks are aggregated per
//             2 pixels (the tooltip gives the count) so thousands stay legible
//   a lane per node
//             the nemesis's faults on that node as labelled bands (lasting
//             faults) or marks (instants), whatever their kind: the label is
//             the kind and the recorded detail; only the colour depends on
//             the kind. Faults on clients go on the client lanes, faults on
//             neither on a "nemesis" lane
//   markers   every kept violation (S1..S4) as a band across the lanes of the
//             grants it involves, with a numbered label above the lanes;
//             none is aggregated away
//
// Elements tests can count: <g class="lane client" id="lane-c1">, <g
// class="lane node" id="lane-n0">, <g class="violation S1">, <g
// class="refused">, <g class="fault">.
//
// Thread-safety: pure functions.

#ifndef REDLOCK_CHAOS_PLOT_PLOT_H_
#define REDLOCK_CHAOS_PLOT_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "chaos/check/checker.h"
#include "chaos/history/history.h"

namespace redlock::chaos {

struct TimelineOptions {
  // Width of the time axis in pixels; the picture adds the lane labels.
  // Default: 1200.
  int plot_width = 1200;
  // The title when the history has no `run` event (a hand-made history).
  // Default: "chaos history".
  std::string title = "chaos history";
};

// The SVG document. `check` must be Check() of `history`.
std::string RenderTimeline(const std::vector<Event>& history, const CheckResult& check,
                           const TimelineOptions& options = TimelineOptions());

// Writes `content` to `path` (replacing it). Errors carry the errno's code.
[[nodiscard]] absl::Status WriteTextFile(const std::string& path, const std::string& content);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_PLOT_PLOT_H_
