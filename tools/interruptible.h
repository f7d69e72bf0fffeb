// Acquisition that SIGINT and SIGTERM cancel: `redlock acquire --wait` and
// `redlock run` while waiting for the lock.
//
// Usage (the order matters: the client's I/O thread must be created with the
// signals blocked, so that only the signalfd sees them):
//
//   InterruptSignals signals;            // blocks SIGINT/SIGTERM, opens a signalfd
//   auto client = MakeClient(args);
//   int signo = 0;
//   absl::StatusOr<Lease> lease = AcquireInterruptibly(*client, r, ttl, wait, signals, &signo);
//   if (signo != 0) return 128 + signo;  // cancelled: nothing left on the nodes

#ifndef REDLOCK_TOOLS_INTERRUPTIBLE_H_
#define REDLOCK_TOOLS_INTERRUPTIBLE_H_

#include <signal.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/client.h"

namespace redlock::cli {

// Blocks SIGINT and SIGTERM in the calling thread (and in threads it creates
// afterwards) and reads them from a signalfd. The destructor restores the
// signal mask.
class InterruptSignals {
 public:
  InterruptSignals();
  ~InterruptSignals();
  InterruptSignals(const InterruptSignals&) = delete;
  InterruptSignals& operator=(const InterruptSignals&) = delete;

  // -1 if the signalfd could not be opened (then signals act as usual).
  int fd() const { return fd_; }
  // The signal mask before the constructor.
  const sigset_t& original_mask() const { return original_; }
  // The next pending signal, or 0.
  int Take();

 private:
  int fd_ = -1;
  sigset_t original_;
};

// Client::AcquireAsync with a stop token, waiting for its result while
// watching `signals`: the first SIGINT or SIGTERM cancels the acquisition
// (promptly; an attempt in flight is released behind it) and is returned in
// *signo (0 when none came). A lease granted just before the signal is
// released again, and the result is then kCancelled too. With `fair`, the
// fair lock's call (redlock/fair_mutex.h: a place in the resource's queue
// while it waits; a zero wait is its TryAcquire, which never jumps the
// queue); a cancelled call leaves the queue.
absl::StatusOr<Lease> AcquireInterruptibly(Client& client, const std::string& resource,
                                           absl::Duration ttl, absl::Duration wait,
                                           InterruptSignals& signals, int* signo,
                                           bool fair = false);

}  // namespace redlock::cli

#endif  // REDLOCK_TOOLS_INTERRUPTIBLE_H_
