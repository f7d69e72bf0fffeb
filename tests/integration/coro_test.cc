// redlock/coro.h: co_await on acquire, extend and release against five real
// redis-server processes; where the coroutine resumes (the I/O thread, or
// the caller's executor through a Resume); errors, cancellation and the
// client's destruction while awaiting.

#include "redlock/coro.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "redlock/stop_token.h"
#include "testkit/fleet_suite.h"

namespace redlock {
namespace {

// Counts coroutines that finished; waits with a bound.
class Done {
 public:
  void Add() {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
    cv_.notify_all();
  }
  bool WaitFor(int count, absl::Duration timeout = absl::Seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return count_ >= count; });
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

// A single-threaded executor: what "the caller's executor" stands for. The
// test thread drains it.
class Executor {
 public:
  coro::Resume resume() {
    return [this](std::coroutine_handle<> h) {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(h);
      cv_.notify_all();
    };
  }
  // Runs queued coroutines on this thread until `done` has `count` or the
  // timeout passes.
  bool RunUntil(Done& done, int count, absl::Duration timeout = absl::Seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    while (done.count() < count) {
      std::coroutine_handle<> next;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!cv_.wait_until(lock, deadline, [&] { return !queue_.empty(); })) return false;
        next = queue_.front();
        queue_.pop_front();
      }
      next.resume();
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::coroutine_handle<>> queue_;
};

// The coroutines of the tests. Free functions, not lambdas with captures: a
// coroutine lambda's captures live in the closure, which dies with the full
// expression that called it, while its parameters are copied into the frame.

// Acquire, extend and release, hopping to `executor` after each await;
// between them, blocking checks with `other` (fine on the caller's thread).
coro::Detached AcquireExtendRelease(Client& client, Client& other, Executor& executor, Done& done,
                                    std::thread::id test_thread,
                                    std::vector<std::string>& failures) {
  auto check = [&failures](bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  };
  absl::StatusOr<Lease> lease =
      co_await coro::TryAcquire(client, "r", absl::Seconds(10), executor.resume());
  check(lease.ok(), absl::StrCat("acquire: ", lease.status().ToString()));
  check(std::this_thread::get_id() == test_thread, "acquire resumed off the executor");
  if (lease.ok()) {
    check(absl::IsAborted(other.TryAcquire("r", absl::Seconds(1)).status()),
          "another client took the held resource");
    absl::StatusOr<Lease> extended =
        co_await coro::Extend(client, *lease, absl::Seconds(20), executor.resume());
    check(extended.ok(), absl::StrCat("extend: ", extended.status().ToString()));
    check(extended.ok() && extended->ttl() == absl::Seconds(20), "extend: ttl");
    check(std::this_thread::get_id() == test_thread, "extend resumed off the executor");
    absl::Status released =
        co_await coro::Release(client, extended.ok() ? *extended : *lease, executor.resume());
    check(released.ok(), absl::StrCat("release: ", released.ToString()));
    check(std::this_thread::get_id() == test_thread, "release resumed off the executor");
  }
  done.Add();
}

struct Seen {
  std::thread::id after_acquire;
  std::thread::id after_release;
  absl::Status acquired;
  absl::Status released;
};

coro::Detached AcquireReleaseOnIoThread(Client& client, Seen& seen, Done& done) {
  absl::StatusOr<Lease> lease = co_await coro::TryAcquire(client, "r", absl::Seconds(10));
  seen.after_acquire = std::this_thread::get_id();
  seen.acquired = lease.status();
  if (lease.ok()) {
    // A second await from the I/O thread: the call completes after this
    // callback returns, and the coroutine resumes there again.
    seen.released = co_await coro::Release(client, *lease);
    seen.after_release = std::this_thread::get_id();
  }
  done.Add();
}

struct Errors {
  absl::Status empty_name;
  absl::Status held;
  absl::Status waited;
  absl::Status foreign_release;
};

coro::Detached CollectErrors(Client& client, Errors& errors, Done& done) {
  errors.empty_name = (co_await coro::TryAcquire(client, "", absl::Seconds(10))).status();
  errors.held = (co_await coro::TryAcquire(client, "held", absl::Seconds(10))).status();
  errors.waited =
      (co_await coro::Acquire(client, "held", absl::Seconds(10), absl::Milliseconds(50))).status();
  // Releasing what is not ours is not an error (idempotent).
  errors.foreign_release = co_await coro::Release(client, Lease::ForToken("held", "not-the-token"));
  done.Add();
}

coro::Detached WaitForHeld(Client& client, StopToken stop, absl::Status& result, Done& done) {
  result = (co_await coro::Acquire(client, "held", absl::Seconds(10), absl::InfiniteDuration(),
                                   std::move(stop)))
               .status();
  done.Add();
}

coro::Detached Cycles(Client& client, std::string resource, int cycles, std::atomic<int>& ok,
                      std::atomic<int>& failed, Done& done) {
  for (int k = 0; k < cycles; ++k) {
    absl::StatusOr<Lease> lease = co_await coro::TryAcquire(client, resource, absl::Seconds(10));
    if (!lease.ok()) {
      ++failed;
      continue;
    }
    if ((co_await coro::Release(client, *lease)).ok()) {
      ++ok;
    } else {
      ++failed;
    }
  }
  done.Add();
}

// A fair lock's waiter: co_await its place and the lock, hold, release.
coro::Detached FairTurn(FairLock& lock, Client& client, std::atomic<int>& inside,
                        std::atomic<int>& overlaps, std::atomic<int>& ok, Done& done) {
  absl::StatusOr<Lease> lease = co_await coro::Acquire(lock, absl::Seconds(10), absl::Seconds(30));
  if (lease.ok()) {
    if (++inside > 1) ++overlaps;
    --inside;
    if ((co_await coro::Release(client, *lease)).ok()) ++ok;
  }
  done.Add();
}

coro::Detached FairTry(FairLock& lock, absl::Status& result, Done& done) {
  result = (co_await coro::TryAcquire(lock, absl::Seconds(10))).status();
  done.Add();
}

class CoroTest : public testkit::FleetSuite {
 protected:
  // The id of the client's I/O thread, as a plain async callback sees it.
  std::thread::id IoThreadOf(Client& client) {
    std::promise<std::thread::id> id;
    client.ReleaseAsync(Lease::ForToken("probe", "nobody"),
                        [&id](absl::Status) { id.set_value(std::this_thread::get_id()); });
    return id.get_future().get();
  }
  // A client in `client`, and "held" held by another.
  void ClientFacingAHeldLock(std::unique_ptr<Client>& client) {
    client = MakeClient();
    ASSERT_NE(client, nullptr);
    ASSERT_NO_FATAL_FAILURE(HoldElsewhere("held"));
  }
};

TEST_F(CoroTest, AcquireExtendReleaseResumingOnTheCallersExecutor) {
  auto client = MakeClient();
  auto other = MakeClient();
  ASSERT_NE(client, nullptr);
  ASSERT_NE(other, nullptr);
  Executor executor;
  Done done;
  std::vector<std::string> failures;
  AcquireExtendRelease(*client, *other, executor, done, std::this_thread::get_id(), failures);
  ASSERT_TRUE(executor.RunUntil(done, 1));
  EXPECT_TRUE(failures.empty()) << absl::StrJoin(failures, "; ");
  // Released: free for the other client.
  absl::StatusOr<Lease> after = other->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(after);
  REDLOCK_EXPECT_OK(other->Release(*after));
}

TEST_F(CoroTest, ResumesOnTheClientsIoThreadByDefault) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  const std::thread::id io = IoThreadOf(*client);
  ASSERT_NE(io, std::this_thread::get_id());
  Done done;
  Seen seen;
  AcquireReleaseOnIoThread(*client, seen, done);
  ASSERT_TRUE(done.WaitFor(1));
  REDLOCK_EXPECT_OK(seen.acquired);
  REDLOCK_EXPECT_OK(seen.released);
  EXPECT_EQ(seen.after_acquire, io);
  EXPECT_EQ(seen.after_release, io);
}

TEST_F(CoroTest, ErrorsComeBackAsTheAsyncCallsReturnThem) {
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(ClientFacingAHeldLock(client));
  Done done;
  Errors errors;
  CollectErrors(*client, errors, done);
  ASSERT_TRUE(done.WaitFor(1));
  EXPECT_TRUE(absl::IsInvalidArgument(errors.empty_name)) << errors.empty_name;
  EXPECT_TRUE(absl::IsAborted(errors.held)) << errors.held;
  EXPECT_TRUE(absl::IsDeadlineExceeded(errors.waited)) << errors.waited;
  REDLOCK_EXPECT_OK(errors.foreign_release);
}

TEST_F(CoroTest, AStopTokenCancelsAWaitingAcquire) {
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(ClientFacingAHeldLock(client));
  StopSource stop;
  Done done;
  absl::Status result;
  WaitForHeld(*client, stop.token(), result, done);
  EXPECT_FALSE(done.WaitFor(1, absl::Milliseconds(100)));  // still waiting: the lock is held
  stop.RequestStop();
  ASSERT_TRUE(done.WaitFor(1));
  EXPECT_TRUE(absl::IsCancelled(result)) << result;
}

TEST_F(CoroTest, DestroyingTheClientResumesTheAwaitingCoroutineWithCancelled) {
  std::unique_ptr<Client> client;
  ASSERT_NO_FATAL_FAILURE(ClientFacingAHeldLock(client));
  Done done;
  absl::Status result;
  WaitForHeld(*client, StopToken(), result, done);
  EXPECT_FALSE(done.WaitFor(1, absl::Milliseconds(100)));
  client.reset();
  // Before the destructor returned (redlock/client.h).
  EXPECT_EQ(done.count(), 1);
  EXPECT_TRUE(absl::IsCancelled(result)) << result;
}

TEST_F(CoroTest, AnAwaitableNeverAwaitedSendsNothing) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  const long long sets = CommandCalls(0, "set");
  ASSERT_GE(sets, 0);
  {
    auto unused = coro::TryAcquire(*client, "r", absl::Seconds(10));
    (void)unused;
  }
  // A plain call after it: the count moves by its SET only.
  absl::StatusOr<Lease> lease = client->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(lease);
  EXPECT_EQ(testkit::Eventually([&] { return CommandCalls(0, "set"); }, sets + 1), sets + 1);
  REDLOCK_EXPECT_OK(client->Release(*lease));
}

TEST_F(CoroTest, ManyCoroutinesChainOnOneClient) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  constexpr int kCoroutines = 32;
  constexpr int kCycles = 20;
  Done done;
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  for (int i = 0; i < kCoroutines; ++i) {
    Cycles(*client, absl::StrCat("r", i), kCycles, ok, failed, done);
  }
  ASSERT_TRUE(done.WaitFor(kCoroutines, absl::Seconds(60)));
  EXPECT_EQ(ok.load(), kCoroutines * kCycles);
  EXPECT_EQ(failed.load(), 0);
}

TEST_F(CoroTest, FairLockWaitersAreAwaitedAndServedOneAtATime) {
  auto client = MakeClient();
  auto holder_client = MakeClient();
  ASSERT_NE(client, nullptr);
  FairLock lock(client.get(), "fair");
  FairLock holder(holder_client.get(), "fair");
  absl::StatusOr<Lease> held = holder.TryAcquire(absl::Seconds(30));
  REDLOCK_ASSERT_OK(held);
  Done done;
  absl::Status tried;
  FairTry(lock, tried, done);
  ASSERT_TRUE(done.WaitFor(1));
  EXPECT_TRUE(absl::IsAborted(tried)) << tried;
  std::atomic<int> inside{0}, overlaps{0}, ok{0};
  for (int i = 0; i < 3; ++i) FairTurn(lock, *client, inside, overlaps, ok, done);
  EXPECT_FALSE(done.WaitFor(2, absl::Milliseconds(100)));  // all wait: the lock is held
  REDLOCK_ASSERT_OK(holder.Release(*held));
  ASSERT_TRUE(done.WaitFor(4));
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(overlaps.load(), 0);
}

}  // namespace
}  // namespace redlock
