// The Lua scripts of the fair lock (redlock/fair_mutex.h, docs/design.md
// 5.17), beside the lock family's (family_scripts.h) and loaded with them.
//
// On each node, for a resource whose lock key is W:
//   W             the holder's token, PX ttl: a plain lock key, set only when
//                 it does not exist (mutual exclusion is the mutex's, from W
//                 alone; the queue only decides who may try)
//   W:fair:q      a sorted set: waiter id -> ticket (an integer below 2^53)
//   W:fair:exp    a sorted set: waiter id -> expiry of its place (the node's
//                 ms clock, read with TIME, the clock Redis expires keys by)
//   W:fence       the fencing counter, with Options::fencing
// Both sets live PX as long as their longest place. Every script purges the
// places that expired. The head is the least (ticket, id) among the live
// places (a sorted set orders equal scores by member), the same order on
// every node.
//
// Wake-ups (one waiter per release, whatever the number of processes): a
// waiter listens on its own channel, <prefix>W:<waiter id>. A script that
// frees W (a release), removes the head (a departure, an expiry it purges)
// or finds W free with a new head publishes an empty message there for the
// head only, and only while W is free.
//
// Acquisition replies are arrays: {code, max ticket} and, for a grant with
// the counter key, {1, max ticket, counter}. code 1: W set (granted); -1:
// W is held; -2: another waiter is ahead (or, for the probe, the queue is
// not empty); -3 (acquire only): this waiter has no place on the node. The
// max ticket is the highest live ticket after the script ran ("0": none).

#ifndef REDLOCK_INTERNAL_FAIR_SCRIPTS_H_
#define REDLOCK_INTERNAL_FAIR_SCRIPTS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {

// Key suffixes of a fair lock (appended to the lock key).
inline constexpr absl::string_view kFairQueueSuffix = ":fair:q";
inline constexpr absl::string_view kFairExpirySuffix = ":fair:exp";
// Channels: kFairChannelPrefix + W + ":" + waiter id.
inline constexpr absl::string_view kFairChannelPrefix = "redlock:fair:";

// A try without a place (Client::AcquireFamily without a wait, and a
// waiter's first attempt). KEYS = W, q, exp [, counter]; ARGV = token,
// ttl_ms, channel prefix. Sets W only when W is free and no place is live.
const Script& FairProbeScript();

// Takes a place, and the lock if the place is the head and W is free.
// KEYS = W, q, exp [, counter]; ARGV = token, ttl_ms, channel prefix,
// waiter id, ticket, place_ms. Adds (or keeps) the place with `ticket` and
// an expiry place_ms from now. Any reply that is not an error means the
// place is there.
const Script& FairRegisterScript();

// The lock for a waiter with a place: W is set only when W is free and the
// waiter's place is the head. KEYS = W, q, exp [, counter]; ARGV = token,
// ttl_ms, channel prefix, waiter id.
const Script& FairAcquireScript();

// A waiter's heartbeat. KEYS = W, q, exp; ARGV = channel prefix, waiter id,
// ticket, place_ms, re-add ("1": put the place back with `ticket` when it is
// missing here: a node that lost it while a quorum kept it). Moves the
// place's expiry to place_ms from now. Returns {0 absent, 1 kept, 2 put
// back; 1 when the place is the head and W is free, else 0}.
const Script& FairRefreshScript();

// Removes what a lease or an attempt set. KEYS = W, q, exp; ARGV = token,
// channel prefix, mode. Deletes W if it holds the token. Mode "release" (a
// fair lease's release): also removes the waiter's place (its id is the
// token's part after the last '.'), then, when W is free, wakes the head.
// Mode "cleanup" (a failed attempt): keeps the place, and wakes the head
// only when W was deleted and the head is another waiter. Returns the keys
// deleted (0 or 1).
const Script& FairReleaseScript();

// A waiter leaves the queue (its call ended without the lock). KEYS = W, q,
// exp; ARGV = waiter id, channel prefix. When it was the head and W is free,
// wakes the new head. Returns the places removed (0 or 1).
const Script& FairLeaveScript();

// Read-only. KEYS = W, q, exp; ARGV = max entries. Returns {holder token or
// "", pttl of W, live places, {id, ticket, ms left, ...} of the first max
// entries in order}.
const Script& FairInspectScript();

// The scripts above, for FamilyScripts().
const std::vector<const Script*>& FairScripts();

// The waiter id a fair lease's token carries (after its last '.'), or "".
std::string FairWaiterOfToken(absl::string_view token);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_FAIR_SCRIPTS_H_
