// The Lua scripts the client runs on the nodes, named by SHA-1 for EVALSHA.
//
// Every script takes the lock keys first in KEYS (one or more: a single
// resource is a set of one), so the same script serves Client and MultiLock.
// Fencing scripts take the counter keys after the lock keys. Counters are
// decimal strings without leading zeros, compared by (length, bytes) in Lua so
// that 64-bit values never pass through Lua's double-precision numbers.

#ifndef REDLOCK_INTERNAL_SCRIPTS_H_
#define REDLOCK_INTERNAL_SCRIPTS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace redlock::internal {

struct Script {
  const char* name;
  std::string body;
  std::string sha;      // lowercase hex SHA-1 of body
  uint8_t replies = 0;  // the reply types it returns (reply.h, kExpect*)
};

// A script whose body is `parts` in order (pieces of Lua the family's
// scripts share, then its own), with its SHA-1.
Script MakeScript(const char* name, uint8_t replies, std::initializer_list<const char*> parts);

// One file's scripts (a struct of Script members, each made by its
// initializer), built together, and their SHA-1s taken, on the first use of
// any of them.
template <typename Set>
const Set& BuiltScripts() {
  static const Set set;
  return set;
}

// A piece of Lua that sets `now` to the node's clock in ms: the clock it
// expires keys by, so an entry scored by it lapses exactly when a key set
// at the same moment would.
extern const char* const kLuaNow;

// KEYS = lock keys; ARGV = token, ttl_ms.
// Sets every key to the token with PX ttl only if none of them exists.
// Returns 1 when set, -i when KEYS[i] exists (the first one found).
const Script& AcquireSetScript();

// KEYS = lock keys; ARGV = token, channel prefix.
// Deletes each key that still holds the token and publishes an empty
// message on channel prefix..key (nothing is published when the prefix is
// empty: the cleanup after a failed attempt must not wake waiters). The
// message carries no token: after a partial release the token still holds
// on other nodes, and any subscriber could extend or release it. Returns the
// number of keys deleted (0 is a success: the lease was already gone).
const Script& ReleaseScript();

// KEYS = one lock key; ARGV = token, the whole channel name ("" for none).
// ReleaseScript for one key, without the loop and the concatenation: the
// release of a single lock is most of the traffic, and the servers' cost of
// the script was most of their time per cycle (bench/README.md).
const Script& ReleaseOneScript();

// KEYS = lock keys; ARGV = token, ttl_ms.
// If every key holds the token, sets their ttl and returns 1; else returns 0
// and changes nothing (never re-creates a key).
const Script& ExtendScript();

// Fencing round 1. KEYS = n lock keys then their n counter keys;
// ARGV = token, ttl_ms. If none of the lock keys exists, sets them all and
// returns {1, counter_1, ..., counter_n} (counters as strings, "0" when
// absent, cut to 21 bytes: a longer value is no counter anyway); else
// returns {-i}.
const Script& FenceAcquireScript();

// Fencing round 2. KEYS = n lock keys then their n counter keys;
// ARGV = token, T_1, ..., T_n. Only if every lock key still holds the token,
// sets counter_i to max(counter_i, T_i) (a write even when unchanged) and
// returns 1; else returns 0.
const Script& FenceCommitScript();

// Read-only. KEYS = lock key, counter key. Returns {value or "", pttl,
// counter or "0"}.
const Script& InspectScript();

// Every script above, then the lock family's (family_scripts.h), in the
// order the engine loads them on connect.
const std::vector<const Script*>& AllScripts();

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SCRIPTS_H_
