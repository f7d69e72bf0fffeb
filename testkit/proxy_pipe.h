// testkit/proxy_pipe.h: one direction of one proxied connection, and what
// each fault of testkit/fault_proxy.h does to the bytes read into it
// (truncation, black hole, hold, latency with jitter, coalescing). No
// sockets and no clock of its own: the connection table
// (testkit/proxy_conns.h) reads into a Pipe and writes out of it. Internal
// to the fault proxy; loop thread only.

#ifndef REDLOCK_TESTKIT_PROXY_PIPE_H_
#define REDLOCK_TESTKIT_PROXY_PIPE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <random>
#include <string>

#include "testkit/fault_proxy.h"

namespace redlock::testkit::proxy_internal {

// Bytes read in one go (or coalesced with the next), delivered from `due`
// on; a held chunk waits for a release.
struct Chunk {
  std::string data;
  size_t offset = 0;
  int64_t due = 0;
  bool held = false;
  size_t remaining() const { return data.size() - offset; }
};

// One direction of one connection: bytes read from the source side, waiting
// to be written to the destination side.
struct Pipe {
  std::deque<Chunk> chunks;
  size_t queued = 0;  // bytes of non-held chunks not yet written
  size_t held = 0;    // bytes of held chunks
  int64_t last_due = 0;
  int64_t next_slice = 0;
  int64_t timer_at = 0;        // pending timer entry for this pipe, 0 if none
  int64_t truncate_left = -1;  // < 0: no truncation
  bool src_eof = false;        // nothing more will be read from the source
  bool stop_reading = false;   // truncation reached: read no more
  bool close_when_drained = false;
  bool dst_shut = false;    // shutdown(dst, SHUT_WR) done
  bool dst_dead = false;    // writing to the destination failed
  bool want_write = false;  // destination returned EAGAIN

  // Takes `n` bytes just read from the source at `now` (ns) under `fault`:
  // drops what truncation or a black hole discards (counted in
  // flow.dropped), holds, or queues with a delivery time (latency, drawn
  // jitter from `rng`), never before the previous chunk's.
  void Ingest(const FaultSpec& fault, const char* data, size_t n, int64_t now, std::mt19937_64& rng,
              ProxyStats::Flow& flow);

  // Lets `bytes` more through, then closes the connection ("truncate").
  void StartTruncation(size_t bytes);

  // Held bytes become deliverable, in order, no earlier than queued ones.
  void ReleaseHeld();

  // Discards everything queued and held (counted in flow.dropped).
  void Drop(ProxyStats::Flow& flow);
};

}  // namespace redlock::testkit::proxy_internal

#endif  // REDLOCK_TESTKIT_PROXY_PIPE_H_
