// Which master a Sentinel-managed node uses, from what its Sentinels say
// (docs/design.md 6.8), without I/O: the locator (sentinel_locator.cc)
// gathers the answers, this decides.
//
// A discovery round chooses among the answers, in order:
//   1. the highest config epoch (a later failover; a Sentinel cut off from
//      the others keeps the epoch of the view it was left with);
//   2. then masters not refused lately before those that were (a failed
//      connection or ROLE check), least recently refused first: a stale
//      Sentinel's answer is tried once, then the others', in turn;
//   3. then the answer of the most Sentinels;
//   4. then the order of the endpoint.
// Outside a round (a Sentinel reconnected after a silence), the answers move
// a working node only if they beat its master by epoch, or by a majority of
// all the Sentinels at equal epoch: a stale Sentinel (an older epoch, a
// minority) never pulls a working node away.

#ifndef REDLOCK_INTERNAL_SENTINEL_CHOICE_H_
#define REDLOCK_INTERNAL_SENTINEL_CHOICE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "redlock/internal/reply.h"

namespace redlock::internal {

using SentinelTime = std::chrono::steady_clock::time_point;

// A refusal older than this no longer counts against an answer.
inline constexpr absl::Duration kRefusalMemory = absl::Seconds(60);

// The config-epoch field of a SENTINEL MASTER reply (-1 when absent).
int64_t ConfigEpoch(const Reply& r);

// One Sentinel's answer: the master it names and its config epoch.
struct SentinelAnswer {
  size_t sentinel = 0;  // in the endpoint's order
  std::string host;
  int port = 0;
  int64_t epoch = -1;
};

// One master named by some Sentinels.
struct MasterCandidate {
  std::string host;
  int port = 0;
  std::string address;
  int64_t epoch = -1;                          // the highest epoch it was named with
  int votes = 0;                               // Sentinels naming it
  size_t first = 0;                            // the first of them in the endpoint's order
  SentinelTime refused = SentinelTime::min();  // min: not lately
};

// The answers grouped by master.
std::vector<MasterCandidate> Candidates(const std::vector<SentinelAnswer>& answers);

// The order of a round's choice (file comment): true when `a` goes first.
bool Better(const MasterCandidate& a, const MasterCandidate& b);

// A round's choice, or nullopt without answers. `refused`: masters the
// client could not use, and when; those older than kRefusalMemory are
// forgotten.
std::optional<MasterCandidate> ChooseInRound(const std::vector<SentinelAnswer>& answers,
                                             std::map<std::string, SentinelTime>* refused,
                                             SentinelTime now);

// Outside a round: the master the answers of the connected Sentinels move
// the node to, away from `current` (named with `current_epoch`), or nullopt
// to stay. `*was` gets the current master as they see it.
std::optional<MasterCandidate> MoveOutsideRound(const std::vector<SentinelAnswer>& answers,
                                                const std::string& current, int64_t current_epoch,
                                                size_t sentinels, MasterCandidate* was);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SENTINEL_CHOICE_H_
