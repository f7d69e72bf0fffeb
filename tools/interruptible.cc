#include "tools/interruptible.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/fair_mutex.h"
#include "redlock/stop_token.h"

namespace redlock::cli {
namespace {

// The asynchronous call's result, handed from the client's I/O thread.
struct Completion {
  explicit Completion(int fd) : event_fd(fd) {}
  ~Completion() { close(event_fd); }
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  void Set(absl::StatusOr<Lease> r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      result.emplace(std::move(r));
    }
    uint64_t one = 1;
    (void)!write(event_fd, &one, sizeof(one));
  }
  std::optional<absl::StatusOr<Lease>> Take() {
    std::lock_guard<std::mutex> lock(mu);
    return std::move(result);
  }

  const int event_fd;
  std::mutex mu;
  std::optional<absl::StatusOr<Lease>> result;
};

}  // namespace

InterruptSignals::InterruptSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &original_);
  fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

InterruptSignals::~InterruptSignals() {
  if (fd_ >= 0) close(fd_);
  pthread_sigmask(SIG_SETMASK, &original_, nullptr);
}

int InterruptSignals::Take() {
  signalfd_siginfo info;
  if (fd_ < 0 || read(fd_, &info, sizeof(info)) != static_cast<ssize_t>(sizeof(info))) return 0;
  return static_cast<int>(info.ssi_signo);
}

absl::StatusOr<Lease> AcquireInterruptibly(Client& client, const std::string& resource,
                                           absl::Duration ttl, absl::Duration wait,
                                           InterruptSignals& signals, int* signo, bool fair) {
  *signo = 0;
  FairLock fair_lock(&client, resource);
  int event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd < 0 || signals.fd() < 0) {
    if (event_fd >= 0) close(event_fd);
    // Uninterruptible, but works.
    return fair ? fair_lock.Acquire(ttl, wait) : client.Acquire(resource, ttl, wait);
  }
  auto completion = std::make_shared<Completion>(event_fd);
  StopSource stop;
  auto done = [completion](absl::StatusOr<Lease> r) { completion->Set(std::move(r)); };
  if (fair) {
    fair_lock.AcquireAsync(ttl, wait, stop.token(), std::move(done));
  } else {
    client.AcquireAsync(resource, ttl, wait, stop.token(), std::move(done));
  }
  // Bounded: the call completes by its wait (or at once once stopped); each
  // turn waits at most 100 ms, so a missed wake-up costs no more than that.
  for (;;) {
    if (std::optional<absl::StatusOr<Lease>> r = completion->Take(); r.has_value()) {
      if (*signo != 0 && r->ok()) {
        // Granted just before the stop took effect: give it back.
        (void)client.Release(**r);
        return absl::CancelledError(absl::StrCat("acquire \"", resource, "\": interrupted"));
      }
      return *std::move(r);
    }
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {completion->event_fd, POLLIN, 0}};
    (void)poll(fds, 2, 100);
    if (int sig = signals.Take(); sig != 0 && *signo == 0) {
      *signo = sig;
      stop.RequestStop();
    }
  }
}

}  // namespace redlock::cli
