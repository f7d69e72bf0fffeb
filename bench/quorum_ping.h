// The model of the `spread` scenario: the least a quorum decision can cost
// on these nodes, with no lock at all. A round sends PING to every node at
// once, over one non-blocking connection per node (plain sockets, RESP by
// hand, nothing from the library), and ends when the q-th PONG is in: the
// q-th smallest round trip of the round, which no client deciding at a
// quorum can beat. The replies of the other nodes are read during the
// rounds that follow (replies come back in order on each connection) and
// give every node's own round-trip distribution.
//
//   BaselineOptions o;                      // nodes (behind their proxies), node_timeout
//   auto model = QuorumPing::Connect(o);    // StatusOr<unique_ptr<QuorumPing>>
//   RunWorkload({LockCycle((*model)->NewLocker(), ttl)}, limits, {});
//   (*model)->NodeRoundTrips();             // one distribution per node
//
// As a Locker: Acquire is one round and Release another, so its acquire
// and acquire+release compare with a lock's (one quorum round each).
// A node that does not answer within node_timeout does not count for the
// round (its late PONG is still matched in order). Thread-safety: one
// caller at a time; NodeRoundTrips after the workload.

#ifndef REDLOCK_BENCH_QUORUM_PING_H_
#define REDLOCK_BENCH_QUORUM_PING_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/baselines.h"
#include "bench/locker.h"
#include "bench/stats.h"

namespace redlock::bench {

class QuorumPing {
 public:
  // Connects to every node (options.connect_timeout) and sends its
  // handshake (AUTH, SELECT) as the endpoints say.
  static absl::StatusOr<std::unique_ptr<QuorumPing>> Connect(const BaselineOptions& options);
  ~QuorumPing();
  QuorumPing(const QuorumPing&) = delete;
  QuorumPing& operator=(const QuorumPing&) = delete;

  // One round: OK once a quorum answered, kUnavailable when the round's
  // deadline passed first.
  absl::Status Round();

  // A Locker whose Acquire and Release are one Round each. REQUIRES: this
  // outlives it.
  std::unique_ptr<Locker> NewLocker();

  // Every PONG's round trip, per node (in the order of options.nodes), since
  // Connect or the last ResetRoundTrips.
  std::vector<Distribution> NodeRoundTrips() const;
  void ResetRoundTrips();

  // Each node's round trip when it is the only one asked: waits (up to
  // node_timeout) for the PONGs still due, then PINGs node after node, one
  // PING in flight at a time, up to `count` per node and `budget` per node.
  // What a client asking one node at a time (the sequential baseline) meets;
  // on a machine with few cores, asking every node at once makes each
  // round trip longer.
  std::vector<Distribution> RoundTripsAlone(int count, absl::Duration budget);

 private:
  struct Node;
  explicit QuorumPing(const BaselineOptions& options);
  // Reads what `node` has; returns false on a broken connection.
  bool ReadReplies(Node& node, int64_t round, int* answered);
  // Reads `node` until every PING sent to it is answered or the deadline
  // (steady ns) passes; true when all were answered.
  bool AwaitAll(Node& node, int64_t deadline_ns);

  const BaselineOptions options_;
  const int quorum_;
  std::vector<std::unique_ptr<Node>> nodes_;
  int64_t round_ = 0;
};

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_QUORUM_PING_H_
