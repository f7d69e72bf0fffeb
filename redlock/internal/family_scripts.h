// The Lua scripts of the lock family (redlock/rw_lock.h, semaphore.h,
// election.h), beside the plain lock's (scripts.h), loaded with them.
//
// Reader-writer lock, on each node, for a resource whose lock key is W:
//   W            the writer's key: the token, PX ttl (a plain lock key, so a
//                writer's lease extends and releases like any lease)
//   W:rw:readers a sorted set: reader token -> expiry (the node's ms clock,
//                read with TIME, the clock Redis expires keys by), PX the
//                longest reader ttl
//   W:rw:wait    a sorted set: waiting writer -> expiry of its intent. While
//                it is not empty, readers are refused (writer preference)
//   W:fence      the fencing counter, shared by writers (odd tokens) and
//                readers (even ones): WriterFence and ReaderFence, algorithm.h
// Expired members are purged by every script that reads a set.
//
// Semaphore of K permits: K plain lock keys "<W>:permit:<i>"; one script
// takes the first free one in an order the client gives.
//
// Replies of the acquisition scripts have the shapes votes.h decodes for
// the plain lock's script (an integer: 1 granted, < 0 refused) or, with a
// fencing counter key, its fencing form ({1, counter} or {-i}).

#ifndef REDLOCK_INTERNAL_FAMILY_SCRIPTS_H_
#define REDLOCK_INTERNAL_FAMILY_SCRIPTS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {

// Key suffixes of a reader-writer lock (appended to the lock key).
inline constexpr absl::string_view kReadersSuffix = ":rw:readers";
inline constexpr absl::string_view kWaitingSuffix = ":rw:wait";

// KEYS = W, readers, waiting [, counter]; ARGV = token, ttl_ms.
// Refused (-1) while W exists, (-2) while a writer waits; else adds the
// token to the readers. Returns 1, or {1, counter} with the counter key.
const Script& RwReadAcquireScript();

// KEYS = W, readers, waiting [, counter]; ARGV = token, ttl_ms, waiter id,
// intent_ms. Refused (-1) while W exists or readers hold; then, with
// intent_ms > 0, records the waiter's intent for intent_ms. Else sets W and
// withdraws the waiter's intent. Returns 1, or {1, counter}.
const Script& RwWriteAcquireScript();

// Fencing round 2 of a reader. KEYS = readers, counter; ARGV = token, T.
// Only if the token still holds a live entry, raises the counter to T (a
// reader's T: ReaderFence, algorithm.h) and writes it even when it was
// already there (what a WAIT behind it waits for). Returns 1, else 0.
const Script& RwReadCommitScript();

// KEYS = readers; ARGV = token, ttl_ms. If the token holds a live entry,
// moves its expiry to now + ttl and returns 1; else 0 (never re-adds it).
const Script& RwReadExtendScript();

// KEYS = W, readers; ARGV = token, channel prefix. Removes the token's entry
// and, when that left no live reader, publishes an empty message on
// prefix..W (a waiting writer may go; nothing with an empty prefix).
// Returns the entries removed (0 or 1).
const Script& RwReadReleaseScript();

// KEYS = W, waiting; ARGV = waiter id, channel prefix. Withdraws a writer's
// intent; when that left no live intent, publishes on prefix..W (readers
// may go). Returns the entries removed.
const Script& RwWithdrawScript();

// Read-only. KEYS = W, readers, waiting, counter. Returns {writer token or
// "", pttl of W, live readers, live waiting writers, counter or "0"}.
const Script& RwInspectScript();

// KEYS = K permit keys [, their K counter keys]; ARGV = token, ttl_ms,
// first, K. Sets the first free permit key in the order first, first+1, ...
// (mod K) and returns {i} (1-based), or {i, counter} with counter keys; {0}
// when all K are held.
const Script& SemAcquireScript();

// The scripts above and the fair lock's (fair_scripts.h), for AllScripts().
const std::vector<const Script*>& FamilyScripts();

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_FAMILY_SCRIPTS_H_
