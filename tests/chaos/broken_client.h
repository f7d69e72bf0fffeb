// tests/chaos/broken_client.h: deliberately broken Redlock clients.
//
// A small Redlock over hiredis (blocking contexts, one ordered connection per
// node, all N requests written before any reply is read, a per-node deadline,
// a majority quorum, validity = ttl - elapsed - drift, compare-and-delete
// release, failed attempts released on every node) that is correct except
// for exactly ONE defect, chosen by ClientConfig::variant:
//
//   kNoElapsedCheck    validity = ttl - drift: the time the round took (a GC
//                      pause, a SIGSTOP with replies in flight, slow nodes)
//                      is not subtracted, so the client can believe it holds
//                      a lock whose keys have already expired.
//   kPlainDelRelease   release sends DEL key: a late release (the client was
//                      paused past its lease) deletes the NEXT holder's key.
//   kWallClock         start and now are read from system_clock: a backward
//                      jump of the client's wall clock lengthens the lease.
//   kNoPartialRelease  a failed attempt leaves its partial grants on the nodes
//                      until they expire (availability loss, leftover keys).
//   kMajorityCount     a semaphore (--primitive=semaphore --permits=K) that
//                      counts holders per node (admitted while fewer than K)
//                      and grants on a majority: with N=5 and K=2, three
//                      clients can each get 3 of 5 nodes while no node
//                      counts more than 2 (S6). The library's Semaphore
//                      takes K permits, each with a majority, instead.
//
// redlock-chaos-broken-client --variant=<name> runs them (broken_client_main.cc
// next to this file, built only with the tests, never part of the shipped
// redlock-chaos-client); the chaos harness has one scenario per variant whose
// expected verdict is "violations found". They are test code: never use them
// for anything else.
//
// Late replies: a node that misses its deadline keeps its connection (for a
// second: replies owed longer are lost, and the connection is replaced); the
// number of replies still owed is remembered and they are skipped when they
// arrive, so the stream stays ordered (a release never overtakes its SET).
// After a wait the client first reads whatever has arrived, then expires the
// deadlines (so replies that arrived while the process was stopped count).

#ifndef REDLOCK_TESTS_CHAOS_BROKEN_CLIENT_H_
#define REDLOCK_TESTS_CHAOS_BROKEN_CLIENT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "chaos/clients/workload.h"

namespace redlock::chaos {

// REQUIRES: config.variant != ClientVariant::kLibrary.
[[nodiscard]] absl::StatusOr<std::unique_ptr<LockBackend>> MakeBrokenBackend(
    const ClientConfig& config);

}  // namespace redlock::chaos

#endif  // REDLOCK_TESTS_CHAOS_BROKEN_CLIENT_H_
