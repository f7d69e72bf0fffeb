// redlock/fencing.h: the protected resource's side of fencing tokens.
//
// With Options::fencing, every lease carries fencing_token(): a number that
// strictly increases across successive holders of a resource, even when
// node clocks jump, as long as no node's counter goes back (or no more than
// Options::fencing_lost_counters nodes' do; docs/design.md 5.10, README
// "Fencing tokens"). A lock alone cannot stop a holder that was paused past its lease
// (GC, SIGSTOP, a slow disk) from acting on stale belief; the resource can,
// by refusing any operation that carries a token lower than one it has
// already seen:
//
//   // In the service that owns the data:
//   redlock::FenceGuard guard;
//   absl::Status Write(uint64_t fencing_token, Row row) {
//     if (!guard.Admit(fencing_token)) return absl::AbortedError("stale lock holder");
//     return db.Write(row);
//   }
//
// Both reads and writes of a read-modify-write must be fenced: a stale holder
// that read before a newer holder's write must not be able to write after
// it, and a newer holder's read must raise the fence so the stale write is
// refused. Admit() is therefore called for every operation of the critical
// section, and it raises the fence every time.
//
// For data kept in Redis (on a server that is not one of the lock nodes),
// FencedReadScript() and FencedWriteScript() do the same atomically on the
// server; they compare tokens as decimal strings so no 64-bit value passes
// through Lua's doubles:
//
//   EVAL <FencedReadScript()>  2 <data key> <fence key> <token>          -> value or nil
//   EVAL <FencedWriteScript()> 2 <data key> <fence key> <token> <value>  -> OK
//   Both reply with the error "STALE token <t> < fence <f>" (and change
//   nothing) when the token is lower than the fence.
//
// Tokens are only comparable for one resource (one counter per resource).

#ifndef REDLOCK_FENCING_H_
#define REDLOCK_FENCING_H_

#include <atomic>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace redlock {

// Thread-safe, lock-free fence for an in-process resource.
class FenceGuard {
 public:
  FenceGuard() = default;
  // Starts from a fence persisted elsewhere (the fence must survive restarts
  // of the resource just as the data does).
  explicit FenceGuard(uint64_t highest) : highest_(highest) {}

  // True, and the fence raised to `token`, if token >= the highest admitted
  // so far; false (nothing changes) for a stale token. Token 0 (no fencing)
  // is always stale once any token was admitted.
  bool Admit(uint64_t token) {
    uint64_t seen = highest_.load(std::memory_order_acquire);
    while (token >= seen) {
      if (highest_.compare_exchange_weak(seen, token, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  // The highest token admitted so far (0 before any): what to persist for the
  // FenceGuard(highest) of the next start.
  uint64_t highest() const { return highest_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> highest_{0};
};

// Lua for a fenced read of a Redis-held value (see the file comment).
absl::string_view FencedReadScript();
// Lua for a fenced write of a Redis-held value (see the file comment).
absl::string_view FencedWriteScript();

}  // namespace redlock

#endif  // REDLOCK_FENCING_H_
