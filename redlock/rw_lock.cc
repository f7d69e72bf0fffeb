#include "redlock/rw_lock.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/family_api.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/internal/token.h"
#include "redlock/internal/votes.h"

namespace redlock {
namespace {

using internal::ClientImpl;
using internal::Command;
using internal::kFenceSuffix;
using internal::kReadersSuffix;
using internal::kWaitingSuffix;
using internal::LeaseKind;
using internal::Reply;
using internal::ScriptCommand;

// The lock key, the readers, the writers' intents and, with fencing, the
// counter (`counters`: the one counter key, or none).
std::vector<std::string> RwKeys(const std::string& w, const std::vector<std::string>& counters) {
  std::vector<std::string> k = {w, absl::StrCat(w, kReadersSuffix),
                                absl::StrCat(w, kWaitingSuffix)};
  if (!counters.empty()) k.push_back(counters[0]);
  return k;
}

class ReadShape final : public internal::AcquireShape {
 public:
  bool custom_scripts() const override { return true; }
  Command Round1(const std::vector<std::string>& keys, const std::vector<std::string>& counters,
                 const std::string& token, int64_t ttl_ms) const override {
    return ScriptCommand(internal::RwReadAcquireScript(), RwKeys(keys[0], counters),
                         {token, std::to_string(ttl_ms)});
  }
  Command Commit(const std::vector<std::string>& keys, const std::vector<std::string>& counters,
                 const std::string& token, const std::vector<uint64_t>& fences) const override {
    return ScriptCommand(internal::RwReadCommitScript(),
                         {absl::StrCat(keys[0], kReadersSuffix), counters[0]},
                         {token, std::to_string(fences[0])});
  }
  Command Cleanup(const std::vector<std::string>& keys, const std::string& token) const override {
    return internal::ReleaseCommand(LeaseKind::kShared, keys, token, "");
  }
  // Strictly above every writer before it, shared with the readers that
  // overlap it (ReaderFence, algorithm.h); written to its quorum, so that
  // every later writer reads at least that and goes above it.
  absl::StatusOr<uint64_t> Fence(const std::vector<uint64_t>& seen) const override {
    return internal::ReaderFence(seen);
  }
  LeaseKind kind() const override { return LeaseKind::kShared; }
  bool shared_wakeups() const override { return true; }
};

class WriteShape final : public internal::AcquireShape {
 public:
  WriteShape(std::string waiter, int64_t intent_ms)
      : waiter_(std::move(waiter)), intent_ms_(intent_ms) {}
  bool custom_scripts() const override { return true; }
  Command Round1(const std::vector<std::string>& keys, const std::vector<std::string>& counters,
                 const std::string& token, int64_t ttl_ms) const override {
    attempts_.fetch_add(1, std::memory_order_relaxed);
    return ScriptCommand(internal::RwWriteAcquireScript(), RwKeys(keys[0], counters),
                         {token, std::to_string(ttl_ms), waiter_, std::to_string(intent_ms_)});
  }
  // Odd: above every reader and writer before it (WriterFence, algorithm.h).
  absl::StatusOr<uint64_t> Fence(const std::vector<uint64_t>& seen) const override {
    return internal::WriterFence(seen);
  }
  // Commit and cleanup: the plain lock's (the writer's key is a lock key).
  int attempts() const { return attempts_.load(std::memory_order_relaxed); }
  const std::string& waiter() const { return waiter_; }

 private:
  const std::string waiter_;
  const int64_t intent_ms_;
  mutable std::atomic<int> attempts_{0};
};

internal::LeasesCallback Single(Client::LeaseCallback done) {
  return [done = std::move(done)](absl::StatusOr<std::vector<Lease>> r) mutable {
    if (!r.ok()) {
      done(r.status());
    } else {
      done(std::move((*r)[0]));
    }
  };
}

// How long a waiting writer's intent lives after its latest attempt: a
// waiter attempts again at least every wait_poll_max (and at every
// announcement), so twice that plus two round trips' deadlines.
int64_t IntentMs(const Options& o) {
  return std::max<int64_t>(100,
                           absl::ToInt64Milliseconds(2 * o.wait_poll_max + 2 * o.node_timeout));
}

}  // namespace

ReadWriteLock::ReadWriteLock(Client* client, std::string resource)
    : client_(client), resource_(std::move(resource)) {}

void ReadWriteLock::Start(bool shared, absl::Duration ttl, std::optional<absl::Duration> wait,
                          const StopToken& stop, Client::LeaseCallback done) {
  ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) {
    done(internal::NotACreatedClient("ReadWriteLock"));
    return;
  }
  Client::SetRequest call;
  call.resources = {resource_};
  call.ttl = ttl;
  call.wait = wait;
  call.max_attempts = 1;
  call.stop = stop;
  if (shared) {
    impl->StartSet(std::move(call), std::make_shared<ReadShape>(), Single(std::move(done)));
    return;
  }
  const bool waits = wait.has_value() && *wait > absl::ZeroDuration();
  auto shape =
      std::make_shared<WriteShape>(internal::NewToken(), waits ? IntentMs(impl->options()) : 0);
  internal::OpContext* ctx = &impl->context();
  std::string key = ctx->Key(resource_);
  impl->StartSet(
      std::move(call), shape,
      Single([ctx, shape, key, waits, done = std::move(done)](absl::StatusOr<Lease> r) mutable {
        // The intent is on the nodes that refused an attempt: withdrawn
        // everywhere (and announced, so that blocked readers go), unless
        // every node granted the only attempt.
        if (waits && (!r.ok() || shape->attempts() > 1 || r->nodes_granted() < ctx->nodes()) &&
            !ctx->transport().stopping()) {
          Command withdraw =
              ScriptCommand(internal::RwWithdrawScript(), {key, absl::StrCat(key, kWaitingSuffix)},
                            {shape->waiter(), std::string(internal::kReleaseChannelPrefix)});
          withdraw.op = "rw-withdraw";
          internal::SendToAll(*ctx, withdraw, nullptr);
        }
        done(std::move(r));
      }));
}

absl::StatusOr<Lease> ReadWriteLock::Blocking(bool shared, absl::Duration ttl,
                                              std::optional<absl::Duration> wait,
                                              const StopToken& stop) {
  ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) return internal::NotACreatedClient("ReadWriteLock");
  return impl->Block<absl::StatusOr<Lease>>(
      [&](Client::LeaseCallback cb) { Start(shared, ttl, wait, stop, std::move(cb)); });
}

void ReadWriteLock::Async(bool shared, absl::Duration ttl, absl::Duration wait,
                          const StopToken& stop, Client::LeaseCallback done) {
  ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) {
    done(internal::NotACreatedClient("ReadWriteLock"));
    return;
  }
  Start(shared, ttl, wait, stop, impl->ToUser(std::move(done)));
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
  ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) return internal::NotACreatedClient("ReadWriteLock");
  absl::Status st = internal::CheckResource(resource_, impl->options());
  if (!st.ok()) return st;
  const std::string key = impl->context().Key(resource_);
  Command command =
      ScriptCommand(internal::RwInspectScript(), RwKeys(key, {impl->context().FenceKey(key)}), {});
  command.op = "rw-inspect";
  absl::StatusOr<std::vector<absl::StatusOr<Reply>>> replies =
      internal::SendToAllAndWait(*impl, command);
  if (!replies.ok()) return replies.status();
  std::vector<ReadWriteNodeView> out;
  for (size_t i = 0; i < replies->size(); ++i) {
    ReadWriteNodeView v;
    v.node = impl->context().transport().NodeName(static_cast<int>(i));
    const absl::StatusOr<Reply>& r = (*replies)[i];
    if (!r.ok()) {
      v.status = r.status();
    } else if (r->is_error()) {
      v.status = absl::InternalError(r->str);
    } else if (r->type != Reply::Type::kArray || r->elements.size() != 5) {
      v.status = absl::InternalError(absl::StrCat("unexpected reply ", r->Describe()));
    } else {
      v.writer = r->elements[0].str;
      int64_t pttl = r->elements[1].integer;
      v.writer_ttl_left = pttl > 0 ? absl::Milliseconds(pttl) : absl::ZeroDuration();
      v.readers = static_cast<int>(r->elements[2].integer);
      v.waiting_writers = static_cast<int>(r->elements[3].integer);
      absl::StatusOr<uint64_t> c = internal::ParseCounter(r->elements[4].str);
      if (c.ok()) v.fence_counter = *c;
    }
    out.push_back(std::move(v));
  }
  return out;
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
