#include "redlock/mutex.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace redlock {

// Shared with the renewal's lost-lease callback, which may run after the
// Mutex is gone.
struct Mutex::State {
  mutable std::mutex mu;
  bool held = false;
  bool lost = false;
  Lease lease;
  std::unique_ptr<Renewal> renewal;
  absl::Status status;

  // lock() was cancelled: "held" for the lock protocol, but nothing is.
  bool cancelled = false;

  // The lease with the validity of its latest extension. REQUIRES: mu held.
  Lease CurrentLease() const { return renewal != nullptr ? renewal->lease() : lease; }
};

Mutex::Mutex(Client* client, std::string resource, MutexOptions options)
    : Mutex(client, std::move(resource), std::move(options), nullptr) {}

Mutex::Mutex(Client* client, std::string resource, MutexOptions options, AcquireFn acquire)
    : client_(client),
      resource_(std::move(resource)),
      options_(std::move(options)),
      acquire_(std::move(acquire)),
      state_(std::make_shared<State>()) {}

Mutex::~Mutex() {
  bool held;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    held = state_->held;
  }
  if (held) unlock();
}

bool Mutex::Adopt(absl::StatusOr<Lease> acquired) {
  if (!acquired.ok()) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->status = acquired.status();
    return false;
  }
  // Renewed (or, without auto_renew, only watched) while held: the renewal
  // carries the current validity and the lost signal.
  RenewOptions renew = options_.renew;
  if (renew.ttl == absl::ZeroDuration()) renew.ttl = options_.ttl;
  renew.extend = options_.auto_renew;
  std::weak_ptr<State> weak = state_;
  std::string token = acquired->token();
  absl::StatusOr<std::unique_ptr<Renewal>> renewal =
      client_->AutoRenew(*acquired, renew, [weak, token](absl::Status why) {
        auto s = weak.lock();
        if (s == nullptr) return;
        std::lock_guard<std::mutex> lock(s->mu);
        if (!s->held || s->lease.token() != token) return;
        s->lost = true;
        s->status = absl::Status(why.code(), absl::StrCat("lock lost while held: ", why.message()));
      });
  if (!renewal.ok()) {
    (void)client_->Release(*acquired);
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->status = renewal.status();
    return false;
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->held = true;
  state_->lost = false;
  state_->lease = *std::move(acquired);
  state_->renewal = *std::move(renewal);
  state_->status = absl::OkStatus();
  return true;
}

bool Mutex::try_lock() {
  if (acquire_) return Adopt(acquire_(std::nullopt, options_.stop));
  return Adopt(client_->TryAcquire(resource_, options_.ttl));
}

bool Mutex::TryLockFor(absl::Duration wait) {
  if (wait <= absl::ZeroDuration()) return try_lock();
  if (acquire_) return Adopt(acquire_(wait, options_.stop));
  return Adopt(client_->Acquire(resource_, options_.ttl, wait, options_.stop));
}

void Mutex::lock() {
  for (;;) {
    if (TryLockFor(absl::InfiniteDuration())) return;
    absl::Status st = status();
    if (absl::IsCancelled(st) && options_.stop.stop_requested()) {
      // Cancelled: return "locked" but lost (see the file comment).
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->held = true;
      state_->lost = true;
      state_->lease = Lease();
      state_->renewal.reset();
      state_->cancelled = true;
      return;
    }
    // Contention, unavailable nodes and a fair waiter's lost place are
    // retried forever; these cannot succeed by waiting (kUnimplemented: a
    // Client that does not take the fair lock's calls), and lock() has no
    // way to report them.
    if (absl::IsInvalidArgument(st) || absl::IsCancelled(st) || absl::IsFailedPrecondition(st) ||
        absl::IsUnimplemented(st)) {
      std::fprintf(stderr, "redlock::Mutex::lock(\"%s\"): cannot ever succeed: %s\n",
                   resource_.c_str(), st.ToString().c_str());
      std::abort();
    }
  }
}

void Mutex::unlock() noexcept {
  Lease lease;
  std::unique_ptr<Renewal> renewal;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->held) {
      state_->status = absl::FailedPreconditionError(
          absl::StrCat("unlock of redlock::Mutex \"", resource_, "\", which is not held"));
      return;
    }
    state_->held = false;
    if (state_->cancelled) {
      // lock() was cancelled: nothing was taken, and status() keeps saying so.
      state_->cancelled = false;
      return;
    }
    lease = std::move(state_->lease);
    state_->lease = Lease();
    renewal = std::move(state_->renewal);
  }
  renewal.reset();  // stop renewing first
  absl::Status released = client_->Release(lease);
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!released.ok()) {
    state_->status = absl::Status(released.code(), absl::StrCat("unlock: ", released.message(),
                                                                " (the lock runs out at its ttl)"));
  } else if (!state_->lost) {
    state_->status = absl::OkStatus();
  }
}

absl::Status Mutex::status() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->status;
}

bool Mutex::held_ok() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  // The validity of the lease as last extended, not as first acquired.
  return state_->held && !state_->lost && state_->CurrentLease().TimeLeft() > absl::ZeroDuration();
}

StopToken Mutex::lost() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->cancelled) return options_.stop;
  return state_->held && state_->renewal != nullptr ? state_->renewal->lost() : StopToken();
}

Lease Mutex::lease() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->held ? state_->CurrentLease() : Lease();
}

// ---------------------------------------------------------------------------

void RecursiveMutex::lock() {
  if (owner_.load() == std::this_thread::get_id()) {
    depth_.fetch_add(1);
    SetStatus(absl::OkStatus());
    return;
  }
  mutex_.lock();
  owner_.store(std::this_thread::get_id());
  depth_.store(1);
  SetStatus(absl::OkStatus());
}

bool RecursiveMutex::try_lock() {
  return Enter([&] { return mutex_.try_lock(); });
}

void RecursiveMutex::unlock() noexcept {
  if (owner_.load() != std::this_thread::get_id() || depth_.load() <= 0) {
    SetStatus(absl::FailedPreconditionError(absl::StrCat("unlock of redlock::RecursiveMutex \"",
                                                         mutex_.resource(),
                                                         "\" from a thread that does not own it")));
    return;
  }
  if (depth_.fetch_sub(1) > 1) {
    SetStatus(absl::OkStatus());
    return;
  }
  owner_.store(std::thread::id());
  mutex_.unlock();
  SetStatus(mutex_.status());
}

void RecursiveMutex::SetStatus(absl::Status s) {
  std::lock_guard<std::mutex> lock(status_mu_);
  status_ = std::move(s);
}

absl::Status RecursiveMutex::status() const {
  std::lock_guard<std::mutex> lock(status_mu_);
  return status_;
}

}  // namespace redlock
