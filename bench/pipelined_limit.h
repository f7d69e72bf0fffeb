// The pipelined limit: what the servers on this machine can take, measured
// by the smallest asynchronous Redlock client that does the library's work
// (nothing from the library; plain sockets, RESP written by hand, replies
// parsed by hiredis's redisReader).
//
//   BaselineOptions o;
//   o.nodes = ...;
//   absl::StatusOr<std::unique_ptr<PipelinedLimit>> limit = PipelinedLimit::Start(o);
//   std::unique_ptr<AsyncLocker> chain = (*limit)->NewLocker("rb:1:2:t0");
//   RunChains({LockChain(std::move(chain), ttl)}, limits, {});
//
// One thread runs an epoll loop over one non-blocking TCP connection per
// node. A chain's acquire appends `SET key token NX PX ttl` to every node's
// output buffer, and its release `EVALSHA <compare-and-delete> 1 key token`;
// each decides as soon as a quorum has answered yes (or can no longer), with
// the library's validity rule, and never waits for the other nodes (their
// replies are matched to the command in order and dropped). Everything the
// loop appends while it handles one batch of events goes out in one write(2)
// per node: with C chains, commands are pipelined C deep. A failed acquire
// sends the release to every node without waiting for it.
//
// A node that does not answer a command within node_timeout counts as a "no"
// for it; a node with kMaxInFlightPerNode unanswered commands (a stopped
// node) gets no more and counts as a "no" at once. A broken connection is
// not re-established: its node stays a "no" until the limit is destroyed.
//
// Thread-safety: NewLocker and the lockers' calls may come from any thread;
// callbacks run on the loop thread. Destroying the limit stops the loop;
// callbacks not yet run are destroyed without being called. The lockers
// must not be used afterwards.

#ifndef REDLOCK_BENCH_PIPELINED_LIMIT_H_
#define REDLOCK_BENCH_PIPELINED_LIMIT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bench/baselines.h"
#include "bench/locker.h"

namespace redlock::bench {

class PipelinedLimit {
 public:
  // The library's default Options::max_in_flight_per_node.
  static constexpr size_t kMaxInFlightPerNode = 4096;

  // Connects to every node (options.connect_timeout), sends AUTH/SELECT as
  // the endpoints say, loads the script, and starts the loop.
  static absl::StatusOr<std::unique_ptr<PipelinedLimit>> Start(const BaselineOptions& options);
  ~PipelinedLimit();

  // A chain locking `resource`. At most 2^31 chains.
  std::unique_ptr<AsyncLocker> NewLocker(std::string resource);

  // Since Start: commands sent, write(2) calls that sent them, replies read.
  struct Counters {
    int64_t commands = 0;
    int64_t writes = 0;
    int64_t replies = 0;
  };
  Counters counters() const;

  class Loop;

 private:
  explicit PipelinedLimit(std::unique_ptr<Loop> loop);
  std::unique_ptr<Loop> loop_;
};

}  // namespace redlock::bench

#endif  // REDLOCK_BENCH_PIPELINED_LIMIT_H_
