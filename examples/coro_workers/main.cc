// Locks from C++20 coroutines (redlock/coro.h): several workers run as
// coroutines on one event-loop thread of the application, each taking the
// same lock in turn with co_await, working while holding it (awaiting a timer
// of the loop, as real work would await I/O), extending it, and releasing it.
// Every await on the client hands the coroutine back to the loop (a Resume),
// so the workers' code always runs on the loop's thread, never on the
// library's I/O thread.
//
//   coro_workers --nodes 127.0.0.1:7001,...   # or REDLOCK_NODES; else a local fleet
//   coro_workers --self_check                 # what the project's test runs
//
// It checks that no two workers ever held the lock at once, and exits 1 if
// they did or if a worker failed.

#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/coro.h"
#include "redlock/options.h"
#include "testkit/fleet.h"

ABSL_FLAG(std::string, nodes, "",
          "The Redis masters (default: $REDLOCK_NODES, else a local fleet).");
ABSL_FLAG(int, workers, 4, "Coroutines taking the lock in turn.");
ABSL_FLAG(int, rounds, 3, "Times each worker takes the lock.");
ABSL_FLAG(bool, self_check, false, "Run briefly and check the result (exit 0 or 1).");

namespace {

using Clock = std::chrono::steady_clock;

// The application's event loop: one thread runs posted coroutines and
// timers. Post() may be called from any thread (the library's I/O thread
// calls it through the Resume below).
class Loop {
 public:
  void Post(std::coroutine_handle<> h) {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(h);
    cv_.notify_one();
  }

  // What the awaits on the client resume through: back onto this loop.
  redlock::coro::Resume resume() {
    return [this](std::coroutine_handle<> h) { Post(h); };
  }

  // co_await loop.Sleep(d): resumes on the loop after `d`.
  auto Sleep(absl::Duration d) {
    struct Awaiter {
      Loop* loop;
      Clock::time_point at;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) {
        std::lock_guard<std::mutex> lock(loop->mu_);
        loop->timers_.emplace(at, h);
      }
      void await_resume() const noexcept {}
    };
    return Awaiter{this, Clock::now() + absl::ToChronoNanoseconds(d)};
  }

  // Runs until `done()` or `timeout`; false on the timeout.
  template <typename Pred>
  bool Run(Pred done, absl::Duration timeout) {
    const Clock::time_point deadline = Clock::now() + absl::ToChronoNanoseconds(timeout);
    while (!done()) {
      std::coroutine_handle<> next;
      {
        std::unique_lock<std::mutex> lock(mu_);
        Clock::time_point wake = deadline;
        if (!timers_.empty()) wake = std::min(wake, timers_.begin()->first);
        cv_.wait_until(lock, wake, [&] { return !ready_.empty(); });
        if (!ready_.empty()) {
          next = ready_.front();
          ready_.pop_front();
        } else if (!timers_.empty() && timers_.begin()->first <= Clock::now()) {
          next = timers_.begin()->second;
          timers_.erase(timers_.begin());
        } else if (Clock::now() >= deadline) {
          return false;
        }
      }
      if (next) next.resume();
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::coroutine_handle<>> ready_;
  std::multimap<Clock::time_point, std::coroutine_handle<>> timers_;
};

struct Shared {
  int holders = 0;       // workers holding the lock right now
  int most_holders = 0;  // never above 1, or the lock failed
  int rounds_done = 0;
  int workers_done = 0;
  std::vector<std::string> errors;
};

// One worker: `rounds` times, wait for the lock, work while holding it,
// extend it once, release it. Runs on the loop's thread throughout.
redlock::coro::Detached Worker(int id, int rounds, redlock::Client& client, Loop& loop,
                               Shared& shared) {
  for (int round = 0; round < rounds; ++round) {
    absl::StatusOr<redlock::Lease> lease = co_await redlock::coro::Acquire(
        client, "coro-example/ledger", absl::Seconds(2), /*wait=*/absl::Seconds(10),
        redlock::StopToken(), loop.resume());
    if (!lease.ok()) {
      shared.errors.push_back(absl::StrCat("worker ", id, ": ", lease.status().ToString()));
      break;
    }
    shared.most_holders = std::max(shared.most_holders, ++shared.holders);
    std::printf("worker %d holds the lock (round %d)\n", id, round + 1);
    co_await loop.Sleep(absl::Milliseconds(20));  // the work, awaiting I/O
    absl::StatusOr<redlock::Lease> extended =
        co_await redlock::coro::Extend(client, *lease, absl::Seconds(2), loop.resume());
    if (!extended.ok()) {
      shared.errors.push_back(
          absl::StrCat("worker ", id, ": extend: ", extended.status().ToString()));
    }
    co_await loop.Sleep(absl::Milliseconds(10));  // more work
    --shared.holders;
    absl::Status released = co_await redlock::coro::Release(client, *lease, loop.resume());
    if (!released.ok()) {
      shared.errors.push_back(absl::StrCat("worker ", id, ": release: ", released.ToString()));
    }
    ++shared.rounds_done;
  }
  ++shared.workers_done;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::unique_ptr<redlock::testkit::Fleet> fleet;
  redlock::Options options;
  if (int rc = redlock::testkit::ExampleNodes("coro_workers", absl::GetFlag(FLAGS_nodes), 3, &fleet,
                                              &options);
      rc != 0) {
    return rc;
  }
  absl::StatusOr<std::unique_ptr<redlock::Client>> client = redlock::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "coro_workers: %s\n", client.status().ToString().c_str());
    return 1;
  }

  const int workers = std::max(1, absl::GetFlag(FLAGS_workers));
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  Loop loop;
  Shared shared;
  // The workers start on this thread, which then runs the loop: everything
  // after their first await runs here too.
  for (int i = 0; i < workers; ++i) Worker(i + 1, rounds, **client, loop, shared);
  const bool finished = loop.Run([&] { return shared.workers_done == workers; }, absl::Seconds(60));

  for (const std::string& e : shared.errors) std::fprintf(stderr, "coro_workers: %s\n", e.c_str());
  std::printf("%d rounds by %d workers; at most %d held the lock at once\n", shared.rounds_done,
              workers, shared.most_holders);
  if (!finished) std::fprintf(stderr, "coro_workers: the workers did not finish in 60 s\n");
  const bool ok = finished && shared.errors.empty() && shared.most_holders == 1 &&
                  shared.rounds_done == workers * rounds;
  if (absl::GetFlag(FLAGS_self_check)) std::printf("self-check: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
