#include "testkit/proxy_pipe.h"

#include <algorithm>

#include "absl/time/time.h"

namespace redlock::testkit::proxy_internal {
namespace {

// Appending to the last chunk is cheaper than a chunk per read, up to this.
constexpr size_t kCoalesceLimit = 64 * 1024;

}  // namespace

void Pipe::Ingest(const FaultSpec& f, const char* data, size_t n, int64_t now, std::mt19937_64& rng,
                  ProxyStats::Flow& flow) {
  if (truncate_left >= 0) {
    const size_t take = std::min(n, static_cast<size_t>(truncate_left));
    flow.dropped += n - take;
    truncate_left -= static_cast<int64_t>(take);
    n = take;
    if (truncate_left == 0) {
      stop_reading = true;
      close_when_drained = true;
    }
    if (n == 0) return;
  }
  if (f.kind == FaultKind::kBlackHole) {
    flow.dropped += n;
    return;
  }
  if (f.kind == FaultKind::kHold) {
    chunks.push_back(Chunk{std::string(data, n), 0, now, true});
    held += n;
    return;
  }
  int64_t due = now;
  if (f.kind == FaultKind::kLatency) {
    int64_t extra = 0;
    const int64_t jitter = absl::ToInt64Nanoseconds(f.jitter);
    if (jitter > 0) {
      extra = std::uniform_int_distribution<int64_t>(0, jitter)(rng);
    }
    due = now + absl::ToInt64Nanoseconds(f.latency) + extra;
  }
  due = std::max(due, last_due);
  last_due = due;
  if (!chunks.empty()) {
    // Appending to the last chunk delivers with it: only when that does not
    // move this chunk's delivery time.
    Chunk& last = chunks.back();
    if (!last.held && (last.due == due || (due <= now && last.due <= now)) &&
        last.data.size() + n <= kCoalesceLimit) {
      last.data.append(data, n);
      queued += n;
      return;
    }
  }
  chunks.push_back(Chunk{std::string(data, n), 0, due, false});
  queued += n;
}

void Pipe::StartTruncation(size_t bytes) {
  truncate_left = static_cast<int64_t>(bytes);
  if (bytes == 0) {
    stop_reading = true;
    close_when_drained = true;
  }
}

void Pipe::ReleaseHeld() {
  if (held == 0) return;
  for (Chunk& chunk : chunks) {
    if (chunk.held) {
      chunk.held = false;
      chunk.due = std::max(chunk.due, last_due);
      last_due = chunk.due;
    }
  }
  queued += held;
  held = 0;
}

void Pipe::Drop(ProxyStats::Flow& flow) {
  flow.dropped += queued + held;
  chunks.clear();
  queued = 0;
  held = 0;
  want_write = false;
}

}  // namespace redlock::testkit::proxy_internal
