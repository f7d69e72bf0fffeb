// testkit/proxy_conns.h: the fault proxy's connections: accepting a client
// and connecting its upstream leg, reading each side into its Pipe
// (testkit/proxy_pipe.h), writing what is due to the other side (slices,
// delays, reset after delivery), end-of-stream and closing, the epoll
// interest of each socket and the per-pipe delivery timers. The faults and
// the counters are the proxy's (testkit/fault_proxy.cc), read and updated
// here. Internal to the fault proxy; loop thread only.

#ifndef REDLOCK_TESTKIT_PROXY_CONNS_H_
#define REDLOCK_TESTKIT_PROXY_CONNS_H_

#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <random>
#include <vector>

#include "testkit/fault_proxy.h"
#include "testkit/proxy_pipe.h"
#include "testkit/proxy_reactor.h"

namespace redlock::testkit::proxy_internal {

class ConnTable {
 public:
  // `options`, `faults` (indexed by Direction), `stats` and `reactor`
  // belong to the caller and outlive the table.
  ConnTable(const ProxyOptions& options, const FaultSpec (&faults)[2], ProxyStats& stats,
            Reactor& reactor);
  // Closes every socket (no RST).
  ~ConnTable();
  ConnTable(const ConnTable&) = delete;
  ConnTable& operator=(const ConnTable&) = delete;

  // Where new connections go (existing ones keep their upstream).
  void SetUpstream(const sockaddr_in& upstream) { upstream_ = upstream; }
  const sockaddr_in& upstream() const { return upstream_; }

  // Accepts what the listening socket has (a bounded number per call).
  void Accept(int listen_fd);
  // Whether `token` is one of the table's ((connection id << 2) | side, ids
  // from 1: the tokens below 4 are the reactor's and the listener's), and
  // its readiness.
  static bool Owns(uint64_t token) { return (token >> 2) != 0; }
  void OnReady(uint64_t token, uint32_t events);
  // The earliest pending delivery time (0: none), and the deliveries due.
  int64_t NextDeadline();
  void OnTimer();

  // The fault of `d` changed from `old` to the current one: held bytes go
  // on, truncation and slicing restart; a kReset fault aborts every
  // connection, anything else flushes what became due.
  void FaultChanged(Direction d, const FaultSpec& old);
  // Every held byte becomes deliverable (ReleaseHeld()).
  void ReleaseHeld();
  // Every connection aborted with RST, or closed (queued and held bytes
  // dropped).
  void ResetAll();
  void CloseAll();

  // Open connections and their queued and held bytes, into `stats`.
  void AddTo(ProxyStats& stats) const;

 private:
  struct Conn {
    uint64_t id = 0;
    int fd[2] = {-1, -1};             // [kClientSide], [kServerSide]
    uint32_t registered[2] = {0, 0};  // current epoll interest, 0 = not added
    bool server_connected = false;
    Pipe pipe[2];  // indexed by Direction
  };
  struct TimerEntry {
    int64_t at;
    uint64_t id;
    int dir;
    bool operator>(const TimerEntry& o) const { return at > o.at; }
  };

  ProxyStats::Flow& FlowOf(int dir) { return dir == 0 ? stats_.to_server : stats_.to_client; }
  bool ResetFaultSet() const;
  Conn* Find(uint64_t id);
  std::vector<uint64_t> ConnIds() const;
  void Schedule(Conn& c, int dir, int64_t at);
  void Read(Conn& c, int dir);
  void MarkDstDead(Conn& c, int dir);
  void FlushAll();
  // Writes what is due of pipe `dir` to its destination, then re-evaluates
  // the connection (which may close it: callers re-find by id afterwards).
  void Flush(Conn& c, int dir);
  // Applies end-of-stream rules; returns false if the connection was closed.
  bool MaybeFinish(Conn& c);
  // Registers exactly the events the connection can act on; a side with
  // nothing to do is removed from epoll, so hang-ups on it cannot spin.
  void UpdateInterest(Conn& c);
  void CloseConn(Conn& c, bool abort);

  const ProxyOptions& options_;
  const FaultSpec (&faults_)[2];
  ProxyStats& stats_;
  Reactor& reactor_;
  sockaddr_in upstream_{};
  std::map<uint64_t, Conn> conns_;
  uint64_t next_id_ = 1;
  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<TimerEntry>> timers_;
  std::mt19937_64 rng_;
  std::vector<char> read_buffer_;
};

}  // namespace redlock::testkit::proxy_internal

#endif  // REDLOCK_TESTKIT_PROXY_CONNS_H_
