#include "redlock/rw_lock.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/family_node_views.h"

namespace redlock {
namespace {

using Kind = Client::FamilyRequest::Kind;

}  // namespace

ReadWriteLock::ReadWriteLock(Client* client, std::string resource)
    : LeaseCalls(client), resource_(std::move(resource)) {}

Client::FamilyRequest ReadWriteLock::Request(bool shared, absl::Duration ttl,
                                             std::optional<absl::Duration> wait,
                                             const StopToken& stop) const {
  return Client::FamilyRequest::Of(shared ? Kind::kReader : Kind::kWriter, resource_, ttl, wait,
                                   stop);
}

absl::StatusOr<Lease> ReadWriteLock::Blocking(bool shared, absl::Duration ttl,
                                              std::optional<absl::Duration> wait,
                                              const StopToken& stop) {
  return LeaseOf(Request(shared, ttl, wait, stop));
}

void ReadWriteLock::Async(bool shared, absl::Duration ttl, absl::Duration wait,
                          const StopToken& stop, Client::LeaseCallback done) {
  LeaseOfAsync(Request(shared, ttl, wait, stop), std::move(done));
}

absl::StatusOr<Lease> ReadWriteLock::TryAcquireShared(absl::Duration ttl) {
  return Blocking(true, ttl, std::nullopt, StopToken());
}

absl::StatusOr<Lease> ReadWriteLock::AcquireShared(absl::Duration ttl, absl::Duration wait,
                                                   const StopToken& stop) {
  return Blocking(true, ttl, wait, stop);
}

void ReadWriteLock::AcquireSharedAsync(absl::Duration ttl, absl::Duration wait,
                                       const StopToken& stop, Client::LeaseCallback done) {
  Async(true, ttl, wait, stop, std::move(done));
}

absl::StatusOr<Lease> ReadWriteLock::TryAcquireExclusive(absl::Duration ttl) {
  return Blocking(false, ttl, std::nullopt, StopToken());
}

absl::StatusOr<Lease> ReadWriteLock::AcquireExclusive(absl::Duration ttl, absl::Duration wait,
                                                      const StopToken& stop) {
  return Blocking(false, ttl, wait, stop);
}

void ReadWriteLock::AcquireExclusiveAsync(absl::Duration ttl, absl::Duration wait,
                                          const StopToken& stop, Client::LeaseCallback done) {
  Async(false, ttl, wait, stop, std::move(done));
}

absl::StatusOr<std::vector<ReadWriteNodeView>> ReadWriteLock::Inspect() {
  return internal::FamilyViewsAs<ReadWriteNodeView>(
      client_->InspectFamily(Request(false, absl::ZeroDuration(), std::nullopt, StopToken())),
      [](FamilyNodeView& f, ReadWriteNodeView& v) {
        v.writer = std::move(f.holder);
        v.writer_ttl_left = f.holder_ttl_left;
        v.readers = f.readers;
        v.waiting_writers = f.waiting_writers;
        v.fence_counter = f.fence_counter;
      });
}

// ---- SharedMutex -------------------------------------------------------------------

// One held lease (the writer's, or one thread's reader lease), shared with
// its renewal's lost callback, which may run after the SharedMutex is gone.
struct SharedMutex::Hold {
  mutable std::mutex mu;
  Lease lease;
  std::unique_ptr<Renewal> renewal;
  bool lost = false;
  bool cancelled = false;  // lock()/lock_shared() cancelled: "held", nothing is

  Lease Current() const { return renewal != nullptr ? renewal->lease() : lease; }
};

SharedMutex::SharedMutex(Client* client, std::string resource, MutexOptions options)
    : client_(client), rw_(client, std::move(resource)), options_(std::move(options)) {}

SharedMutex::~SharedMutex() {
  std::vector<std::shared_ptr<Hold>> holds;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (writer_ != nullptr) holds.push_back(std::move(writer_));
    for (auto& [id, h] : readers_) holds.push_back(std::move(h));
    readers_.clear();
  }
  for (auto& h : holds) {
    std::unique_ptr<Renewal> renewal;
    Lease lease;
    {
      std::lock_guard<std::mutex> lock(h->mu);
      renewal = std::move(h->renewal);
      lease = h->lease;
      if (h->cancelled) continue;
    }
    renewal.reset();
    (void)client_->Release(lease);
  }
}

void SharedMutex::SetStatus(absl::Status s) const { status_->Set(std::move(s)); }

absl::Status SharedMutex::status() const { return status_->Get(); }

std::shared_ptr<SharedMutex::Hold> SharedMutex::Find(bool shared) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!shared) return writer_;
  auto it = readers_.find(std::this_thread::get_id());
  return it == readers_.end() ? nullptr : it->second;
}

bool SharedMutex::Adopt(bool shared, absl::StatusOr<Lease> acquired) {
  if (!acquired.ok()) {
    SetStatus(acquired.status());
    return false;
  }
  RenewOptions renew = options_.renew;
  if (renew.ttl == absl::ZeroDuration()) renew.ttl = options_.ttl;
  renew.extend = options_.auto_renew;
  auto hold = std::make_shared<Hold>();
  std::weak_ptr<Hold> weak = hold;
  const std::string what = shared ? "shared lock" : "lock";
  // The callback may run after this object is gone: it holds both weakly.
  std::weak_ptr<StatusCell> cell = status_;
  absl::StatusOr<std::unique_ptr<Renewal>> renewal =
      client_->AutoRenew(*acquired, renew, [cell, weak, what](absl::Status why) {
        auto h = weak.lock();
        if (h == nullptr) return;
        {
          std::lock_guard<std::mutex> lock(h->mu);
          if (h->renewal == nullptr) return;  // released meanwhile
          h->lost = true;
        }
        if (auto c = cell.lock()) {
          c->Set(absl::Status(why.code(), absl::StrCat(what, " lost while held: ", why.message())));
        }
      });
  if (!renewal.ok()) {
    (void)client_->Release(*acquired);
    SetStatus(renewal.status());
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(hold->mu);
    hold->lease = *std::move(acquired);
    hold->renewal = *std::move(renewal);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shared) {
      readers_[std::this_thread::get_id()] = std::move(hold);
    } else {
      writer_ = std::move(hold);
    }
  }
  SetStatus(absl::OkStatus());
  return true;
}

bool SharedMutex::LockFor(bool shared, absl::Duration wait) {
  if (Find(shared) != nullptr) {
    SetStatus(absl::FailedPreconditionError(
        absl::StrCat(shared ? "lock_shared" : "lock", " of redlock::SharedMutex \"", rw_.resource(),
                     "\": already held by ", shared ? "this thread" : "this object")));
    return false;
  }
  if (wait <= absl::ZeroDuration()) {
    return Adopt(shared, shared ? rw_.TryAcquireShared(options_.ttl)
                                : rw_.TryAcquireExclusive(options_.ttl));
  }
  return Adopt(shared, shared ? rw_.AcquireShared(options_.ttl, wait, options_.stop)
                              : rw_.AcquireExclusive(options_.ttl, wait, options_.stop));
}

void SharedMutex::LockBlocking(bool shared) {
  for (;;) {
    if (LockFor(shared, absl::InfiniteDuration())) return;
    absl::Status st = status();
    if (absl::IsCancelled(st) && options_.stop.stop_requested()) {
      auto hold = std::make_shared<Hold>();
      hold->lost = true;
      hold->cancelled = true;
      std::lock_guard<std::mutex> lock(mu_);
      if (shared) {
        readers_[std::this_thread::get_id()] = std::move(hold);
      } else {
        writer_ = std::move(hold);
      }
      return;
    }
    if (absl::IsInvalidArgument(st) || absl::IsCancelled(st) || absl::IsFailedPrecondition(st)) {
      std::fprintf(stderr, "redlock::SharedMutex::%s(\"%s\"): cannot ever succeed: %s\n",
                   shared ? "lock_shared" : "lock", rw_.resource().c_str(), st.ToString().c_str());
      std::abort();
    }
  }
}

void SharedMutex::Unlock(bool shared) noexcept {
  std::shared_ptr<Hold> hold;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shared) {
      auto it = readers_.find(std::this_thread::get_id());
      if (it != readers_.end()) {
        hold = std::move(it->second);
        readers_.erase(it);
      }
    } else {
      hold = std::move(writer_);
    }
  }
  if (hold == nullptr) {
    SetStatus(absl::FailedPreconditionError(absl::StrCat(
        shared ? "unlock_shared" : "unlock", " of redlock::SharedMutex \"", rw_.resource(),
        "\", which ", shared ? "this thread does not hold" : "is not held")));
    return;
  }
  std::unique_ptr<Renewal> renewal;
  Lease lease;
  bool lost;
  {
    std::lock_guard<std::mutex> lock(hold->mu);
    if (hold->cancelled) return;  // nothing was taken; status() still says why
    renewal = std::move(hold->renewal);
    lease = hold->lease;
    lost = hold->lost;
  }
  renewal.reset();
  absl::Status released = client_->Release(lease);
  if (!released.ok()) {
    SetStatus(absl::Status(released.code(), absl::StrCat("unlock: ", released.message(),
                                                         " (the lock runs out at its ttl)")));
  } else if (!lost) {
    SetStatus(absl::OkStatus());
  }
}

void SharedMutex::lock() { LockBlocking(false); }
bool SharedMutex::try_lock() { return LockFor(false, absl::ZeroDuration()); }
void SharedMutex::unlock() noexcept { Unlock(false); }
void SharedMutex::lock_shared() { LockBlocking(true); }
bool SharedMutex::try_lock_shared() { return LockFor(true, absl::ZeroDuration()); }
void SharedMutex::unlock_shared() noexcept { Unlock(true); }

bool SharedMutex::HeldOk(bool shared) const {
  std::shared_ptr<Hold> h = Find(shared);
  if (h == nullptr) return false;
  std::lock_guard<std::mutex> lock(h->mu);
  return !h->lost && h->Current().TimeLeft() > absl::ZeroDuration();
}

StopToken SharedMutex::Lost(bool shared) const {
  std::shared_ptr<Hold> h = Find(shared);
  if (h == nullptr) return StopToken();
  std::lock_guard<std::mutex> lock(h->mu);
  if (h->cancelled) return options_.stop;
  return h->renewal != nullptr ? h->renewal->lost() : StopToken();
}

Lease SharedMutex::LeaseOf(bool shared) const {
  std::shared_ptr<Hold> h = Find(shared);
  if (h == nullptr) return Lease();
  std::lock_guard<std::mutex> lock(h->mu);
  return h->Current();
}

bool SharedMutex::held_ok() const { return HeldOk(false); }
StopToken SharedMutex::lost() const { return Lost(false); }
Lease SharedMutex::lease() const { return LeaseOf(false); }
bool SharedMutex::shared_held_ok() const { return HeldOk(true); }
StopToken SharedMutex::shared_lost() const { return Lost(true); }
Lease SharedMutex::shared_lease() const { return LeaseOf(true); }

}  // namespace redlock
