#include "redlock/internal/sync_waiter.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace redlock::internal {

namespace {

// The futex word is the atomic's value (std::atomic<uint32_t> is a plain
// 32-bit word on Linux).
uint32_t* FutexWord(std::atomic<uint32_t>* a) { return reinterpret_cast<uint32_t*>(a); }

}  // namespace

namespace {
thread_local bool t_sync_call = false;
}  // namespace

SyncCallScope::SyncCallScope() : saved_(t_sync_call) { t_sync_call = true; }

SyncCallScope::~SyncCallScope() { t_sync_call = saved_; }

bool SyncCallScope::Active() { return t_sync_call; }

void SyncWaiter::Wake() {
  syscall(SYS_futex, FutexWord(&state_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

thread_local std::vector<std::shared_ptr<SyncWaiter>>* t_deferred_wakes = nullptr;

SyncWaiter::DeferWakes::DeferWakes() : saved_(t_deferred_wakes) { t_deferred_wakes = &pending_; }

SyncWaiter::DeferWakes::~DeferWakes() {
  t_deferred_wakes = saved_;
  Flush();
}

void SyncWaiter::DeferWakes::Flush() {
  for (auto& w : pending_) w->Wake();
  pending_.clear();
}

// The futex wake is a system call: made only when the waiter sleeps (a
// caller polling for itself completes its own wait without one).
void SyncWaiter::SetReady() {
  if ((state_.fetch_or(kReady, std::memory_order_acq_rel) & kSleeping) == 0) return;
  if (t_deferred_wakes != nullptr) {
    t_deferred_wakes->push_back(shared_from_this());
  } else {
    Wake();
  }
}

void SyncWaiter::Nudge() {
  if (state_.fetch_or(kNudged, std::memory_order_acq_rel) & kSleeping) Wake();
}

void SyncWaiter::Sleep(const timespec* timeout) {
  uint32_t s = state_.fetch_or(kSleeping, std::memory_order_acq_rel) | kSleeping;
  if ((s & (kReady | kNudged)) == 0) {
    syscall(SYS_futex, FutexWord(&state_), FUTEX_WAIT_PRIVATE, s, timeout, nullptr, 0);
  }
  state_.fetch_and(~kSleeping, std::memory_order_acq_rel);
}

void SyncWaiter::Wait(absl::Duration timeout) {
  if ((state_.load(std::memory_order_acquire) & (kReady | kNudged)) == 0) {
    timespec ts = absl::ToTimespec(timeout);
    Sleep(&ts);
  }
  state_.fetch_and(~kNudged, std::memory_order_acq_rel);
}

void SyncWaiter::WaitReady() {
  while (!ready()) Sleep(nullptr);
}

}  // namespace redlock::internal
