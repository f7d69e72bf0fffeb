#include "bench/locker.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "multilock/multi_lock.h"
#include "redlock/internal/status_macros.h"

namespace redlock::bench {

CycleFn LockCycle(std::unique_ptr<Locker> locker, absl::Duration ttl) {
  return [locker = std::move(locker), ttl]() -> CycleSample {
    CycleSample s;
    const int64_t t0 = NowNs();
    s.acquire_status = locker->Acquire(ttl);
    const int64_t t1 = NowNs();
    s.acquire_ns = t1 - t0;
    if (!s.acquire_status.ok()) return s;
    s.release_status = locker->Release();
    s.cycle_ns = NowNs() - t0;
    return s;
  };
}

ChainFn LockChain(std::unique_ptr<AsyncLocker> locker, absl::Duration ttl) {
  std::shared_ptr<AsyncLocker> shared = std::move(locker);
  return [locker = std::move(shared), ttl](CycleDone done) {
    const int64_t t0 = NowNs();
    AsyncLocker* l = locker.get();
    l->AcquireAsync(ttl, [l, t0, done = std::move(done)](absl::Status acquired) mutable {
      CycleSample s;
      s.acquire_ns = NowNs() - t0;
      s.acquire_status = std::move(acquired);
      if (!s.acquire_status.ok()) {
        done(std::move(s));
        return;
      }
      l->ReleaseAsync(
          [t0, s = std::move(s), done = std::move(done)](absl::Status released) mutable {
            s.release_status = std::move(released);
            s.cycle_ns = NowNs() - t0;
            done(std::move(s));
          });
    });
  };
}

namespace {

class AsyncClientLocker final : public AsyncLocker {
 public:
  AsyncClientLocker(Client* client, std::string resource)
      : client_(client), resource_(std::move(resource)) {}

  void AcquireAsync(absl::Duration ttl, Done done) override {
    client_->TryAcquireAsync(resource_, ttl,
                             [this, done = std::move(done)](absl::StatusOr<Lease> lease) mutable {
                               if (lease.ok()) lease_ = *std::move(lease);
                               done(lease.status());
                             });
  }
  void ReleaseAsync(Done done) override { client_->ReleaseAsync(lease_, std::move(done)); }

 private:
  Client* const client_;
  const std::string resource_;
  Lease lease_;
};

class ClientLocker final : public Locker {
 public:
  ClientLocker(Client* client, std::string resource, bool extend)
      : client_(client), resource_(std::move(resource)), extend_(extend) {}

  absl::Status Acquire(absl::Duration ttl) override {
    REDLOCK_ASSIGN_OR_RETURN(lease_, client_->TryAcquire(resource_, ttl));
    if (extend_) {
      absl::StatusOr<Lease> longer = client_->Extend(lease_, ttl);
      if (!longer.ok()) {
        // The cycle releases only after a successful acquire: let go here.
        (void)client_->Release(lease_);
        return absl::Status(longer.status().code(),
                            absl::StrCat("Extend: ", longer.status().message()));
      }
      lease_ = *std::move(longer);
    }
    return absl::OkStatus();
  }
  absl::Status Release() override { return client_->Release(lease_); }

 private:
  Client* const client_;
  const std::string resource_;
  const bool extend_;
  Lease lease_;
};

class MultiLocker final : public Locker {
 public:
  MultiLocker(Client* client, bool all_nodes, std::vector<std::string> resources)
      : multi_(client, all_nodes ? MultiLock::Mode::kAllNodes : MultiLock::Mode::kQuorum),
        resources_(std::move(resources)) {}

  absl::Status Acquire(absl::Duration ttl) override {
    REDLOCK_ASSIGN_OR_RETURN(lease_, multi_.TryAcquire(resources_, ttl));
    return absl::OkStatus();
  }
  absl::Status Release() override { return multi_.Release(lease_); }

 private:
  MultiLock multi_;
  const std::vector<std::string> resources_;
  MultiLease lease_;
};

}  // namespace

std::unique_ptr<Locker> NewClientLocker(Client* client, std::string resource, bool extend) {
  return std::make_unique<ClientLocker>(client, std::move(resource), extend);
}

std::unique_ptr<AsyncLocker> NewAsyncClientLocker(Client* client, std::string resource) {
  return std::make_unique<AsyncClientLocker>(client, std::move(resource));
}

std::unique_ptr<Locker> NewMultiLocker(Client* client, bool all_nodes,
                                       std::vector<std::string> resources) {
  return std::make_unique<MultiLocker>(client, all_nodes, std::move(resources));
}

// ---- HotResource -------------------------------------------------------------

struct HotResource::State {
  std::mutex mu;
  std::condition_variable cv;
  int callers = 0;                    // Cycle() calls
  int in_acquire = 0;                 // callers inside Acquire now
  int64_t acquisitions = 0;           // successful acquisitions so far
  int64_t releases = 0;               // sequence number of the last Release that returned
  int64_t last_release_start_ns = 0;  // when that Release was called
  int64_t last_release_ns = 0;        // when it returned
  int last_holder = -1;
  bool stopping = false;
  int64_t overlaps = 0;
  int64_t not_waiting = 0;
};

HotResource::HotResource(Client* client, Config config)
    : HotResource([client](int) { return std::make_unique<WaiterOf<Client*, Lease>>(client); },
                  std::move(config)) {}

HotResource::HotResource(std::function<std::unique_ptr<Waiter>(int id)> make_waiter, Config config)
    : make_waiter_(std::move(make_waiter)),
      config_(std::move(config)),
      state_(std::make_shared<State>()) {}

HotResource::~HotResource() { Stop(); }

void HotResource::Stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
}

int64_t HotResource::overlaps() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->overlaps;
}

void HotResource::ResetCounters() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->overlaps = 0;
  state_->not_waiting = 0;
}

int64_t HotResource::not_waiting() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->not_waiting;
}

CycleFn HotResource::Cycle(int id) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    ++state_->callers;
  }
  return [this, id, state = state_, waiter = std::shared_ptr<Waiter>()]() mutable -> CycleSample {
    CycleSample s;
    if (waiter == nullptr) waiter = make_waiter_(id);
    const auto wait = absl::ToChronoNanoseconds(config_.wait);
    {
      std::lock_guard<std::mutex> lock(state->mu);
      ++state->in_acquire;
    }
    state->cv.notify_all();
    const int64_t t0 = NowNs();
    const absl::Status acquired = waiter->Acquire(config_.resource, config_.ttl, config_.wait);
    const int64_t t1 = NowNs();
    {
      std::lock_guard<std::mutex> lock(state->mu);
      --state->in_acquire;
    }
    s.acquire_ns = t1 - t0;
    s.acquire_status = acquired;
    if (!acquired.ok()) return s;
    int64_t seq = 0;
    {
      std::unique_lock<std::mutex> lock(state->mu);
      seq = ++state->acquisitions;
      state->cv.notify_all();  // the previous holder may contend again
      // The previous holder's Release may not have returned yet (its DEL ran
      // on the nodes before its reply came back): wait for it, bounded.
      state->cv.wait_for(lock, wait, [&] { return state->releases >= seq - 1 || state->stopping; });
      if (seq > 1 && state->releases == seq - 1 && state->last_holder != id) {
        if (t0 <= state->last_release_start_ns) {
          // A hand-off: this caller was already waiting in Acquire when the
          // holder started its Release.
          int64_t h = t1 - state->last_release_ns;
          if (h < 0) {
            ++state->overlaps;
            h = 0;
          }
          s.handoff_ns = h;
          s.handoff_call_ns = t1 - state->last_release_start_ns;
        } else {
          ++state->not_waiting;  // it came to a free lock: not a hand-off
        }
      }
      // Release only once every other caller is inside Acquire, so the
      // release finds them waiting rather than about to try.
      state->cv.wait_for(
          lock, wait, [&] { return state->in_acquire >= state->callers - 1 || state->stopping; });
    }
    if (config_.hold > absl::ZeroDuration()) {
      std::this_thread::sleep_for(absl::ToChronoNanoseconds(config_.hold));
    }
    const int64_t release_start = NowNs();
    s.release_status = waiter->Release();
    const int64_t t2 = NowNs();
    s.cycle_ns = t2 - t0;
    {
      std::unique_lock<std::mutex> lock(state->mu);
      if (seq > state->releases) {
        state->releases = seq;
        state->last_release_start_ns = release_start;
        state->last_release_ns = t2;
        state->last_holder = id;
      }
      state->cv.notify_all();
      // Do not contend again before someone else has taken the lock, so the
      // next acquisition is a hand-off to a waiter.
      state->cv.wait_for(lock, wait, [&] { return state->acquisitions > seq || state->stopping; });
    }
    return s;
  };
}

}  // namespace redlock::bench
