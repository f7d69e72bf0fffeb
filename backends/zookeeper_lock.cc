// ZooKeeper's lock recipe with the C client (libzookeeper_mt): ephemeral
// sequential znodes under /redlock/<resource>, the lowest sequence holds, a
// waiter watches only its predecessor (no herd effect). Compiled only when
// the build found the client (REDLOCK_HAVE_ZOOKEEPER).

#ifdef REDLOCK_HAVE_ZOOKEEPER

#include <sys/random.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "backends/lock_service.h"

namespace redlock::backends {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr char kRoot[] = "/redlock";

absl::Status ZkError(int rc, absl::string_view what) {
  std::string text = absl::StrCat("zookeeper ", what, ": ", zerror(rc));
  if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED ||
      rc == ZINVALIDSTATE || rc == ZCLOSING || rc == ZSESSIONMOVED) {
    return absl::UnavailableError(text);
  }
  return absl::InternalError(text);
}

// Watches on a predecessor: a registry by id, so a watch that fires after
// its waiter gave up finds nothing instead of a dangling pointer.
struct WatchRegistry {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t next = 1;
  std::set<uint64_t> pending;  // registered, not fired
};
WatchRegistry& Watches() {
  static WatchRegistry* r = new WatchRegistry;
  return *r;
}

void OnWatch(zhandle_t*, int, int, const char*, void* ctx) {
  WatchRegistry& r = Watches();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.pending.erase(reinterpret_cast<uintptr_t>(ctx));
  }
  r.cv.notify_all();
}

void OnSession(zhandle_t*, int, int, const char*, void*) {}

// Deletes `path`, retrying through a connection loss (the session, and so
// the znode, outlives a lost connection: a delete given up on would leave
// the lock held until the session ends). Bounded by `patience`.
int DeleteRetrying(zhandle_t* zh, const std::string& path, absl::Duration patience) {
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(patience);
  int rc = ZOK;
  for (int i = 0; i < 1000; ++i) {
    rc = zoo_delete(zh, path.c_str(), -1);
    if (rc == ZOK || rc == ZNONODE) return ZOK;
    if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) return rc;
    if (zoo_state(zh) == ZOO_EXPIRED_SESSION_STATE) return ZOK;  // gone with the session
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return rc;
}

// A name unique to one attempt: a create whose reply was lost can still be
// found among the children, and removed (Curator's "protected" mode).
std::string AttemptId() {
  static std::atomic<uint64_t> counter{0};
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), 0) != static_cast<ssize_t>(sizeof(r))) r = 0;
  return absl::StrCat("p", absl::Hex(r ^ (counter.fetch_add(1) << 48), absl::kZeroPad16));
}

int64_t SequenceOf(absl::string_view name) {
  int64_t seq = -1;
  if (name.size() >= 10) (void)absl::SimpleAtoi(name.substr(name.size() - 10), &seq);
  return seq;
}

class ZooKeeperService;

// One ZooKeeper session (handle), shared by every LockSession of the
// service; replaced when the server declares it expired.
struct Handle {
  zhandle_t* zh = nullptr;
  uint64_t generation = 0;
  ~Handle() {
    if (zh != nullptr) zookeeper_close(zh);
  }
};

class ZooKeeperService final : public LockService {
 public:
  explicit ZooKeeperService(ServiceOptions options) : options_(std::move(options)) {
    hosts_ = absl::StrJoin(options_.endpoints, ",");
  }
  Kind kind() const override { return Kind::kZooKeeper; }
  std::string Describe() const override {
    return absl::StrCat("ZooKeeper ephemeral-sequential recipe (C client), ",
                        options_.endpoints.size(),
                        " servers, predecessor watch; fencing token = sequence number");
  }
  absl::StatusOr<std::unique_ptr<LockSession>> NewSession() override;

  // The live handle (connected or reconnecting), a new one when the last
  // expired.
  absl::StatusOr<std::shared_ptr<Handle>> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    if (handle_ != nullptr && zoo_state(handle_->zh) != ZOO_EXPIRED_SESSION_STATE &&
        zoo_state(handle_->zh) != ZOO_AUTH_FAILED_STATE) {
      return handle_;
    }
    static std::once_flag quiet;
    std::call_once(quiet, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR); });
    auto h = std::make_shared<Handle>();
    h->generation = ++generation_;
    h->zh = zookeeper_init(hosts_.c_str(), OnSession,
                           static_cast<int>(absl::ToInt64Milliseconds(options_.session_timeout)),
                           nullptr, nullptr, 0);
    if (h->zh == nullptr) return absl::UnavailableError("zookeeper_init failed");
    for (int i = 0; i < 1000 && zoo_state(h->zh) != ZOO_CONNECTED_STATE; ++i) {
      struct timespec ts {
        0, 10'000'000
      };
      nanosleep(&ts, nullptr);
    }
    if (zoo_state(h->zh) != ZOO_CONNECTED_STATE) {
      return absl::UnavailableError(absl::StrCat("zookeeper: no session with ", hosts_, " in 10s"));
    }
    handle_ = h;
    parents_.clear();
    return handle_;
  }

  // /redlock/<resource>, created once.
  absl::StatusOr<std::string> Parent(zhandle_t* zh, const std::string& resource) {
    const std::string parent = absl::StrCat(
        kRoot, "/", absl::StrReplaceAll(options_.key_prefix + resource, {{"/", "%2F"}}));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (parents_.count(parent)) return parent;
    }
    for (const std::string& p : {std::string(kRoot), parent}) {
      int rc = zoo_create(zh, p.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return ZkError(rc, absl::StrCat("create ", p));
    }
    std::lock_guard<std::mutex> lock(mu_);
    parents_.insert(parent);
    return parent;
  }

  const ServiceOptions& options() const { return options_; }

 private:
  const ServiceOptions options_;
  std::string hosts_;
  std::mutex mu_;
  std::shared_ptr<Handle> handle_;
  uint64_t generation_ = 0;
  std::set<std::string> parents_;
};

class ZooKeeperSession final : public LockSession {
 public:
  explicit ZooKeeperSession(ZooKeeperService* service) : service_(service) {}

  absl::StatusOr<Grant> TryAcquire(const std::string& resource, absl::Duration ttl) override {
    return Lock(resource, absl::ZeroDuration());
  }
  absl::StatusOr<Grant> Acquire(const std::string& resource, absl::Duration ttl,
                                absl::Duration wait) override {
    return Lock(resource, wait);
  }

  absl::Status Release(const Grant& grant) override {
    absl::StatusOr<std::shared_ptr<Handle>> h = service_->Get();
    if (!h.ok()) return h.status();
    auto it = held_.find(grant.token);
    const bool same_session = it != held_.end() && it->second == (*h)->generation;
    if (it != held_.end()) held_.erase(it);
    // A new session means the old one expired and took its ephemeral
    // znodes with it: nothing left to delete (and the path may be reused).
    if (!same_session) return absl::OkStatus();
    int rc = DeleteRetrying((*h)->zh, grant.token, ReleasePatience());
    if (rc == ZOK) return absl::OkStatus();
    return ZkError(rc, "delete");
  }

  absl::Duration TimeLeft(const Grant& grant) override {
    absl::StatusOr<std::shared_ptr<Handle>> h = service_->Get();
    if (!h.ok()) return absl::ZeroDuration();
    auto it = held_.find(grant.token);
    if (it == held_.end() || it->second != (*h)->generation) return absl::ZeroDuration();
    // Connected: the session (and our znode) lives. Disconnected: it may
    // expire any moment on the servers; Curator's "suspended": assume lost.
    return zoo_state((*h)->zh) == ZOO_CONNECTED_STATE ? absl::Hours(1) : absl::ZeroDuration();
  }

 private:
  absl::StatusOr<Grant> Lock(const std::string& resource, absl::Duration wait) {
    const auto start = SteadyClock::now();
    const auto deadline = start + absl::ToChronoNanoseconds(wait);
    absl::StatusOr<std::shared_ptr<Handle>> h = service_->Get();
    if (!h.ok()) return h.status();
    zhandle_t* zh = (*h)->zh;
    absl::StatusOr<std::string> parent = service_->Parent(zh, resource);
    if (!parent.ok()) return parent.status();
    char created[1024];
    const std::string id = AttemptId();
    int rc = zoo_create(zh, absl::StrCat(*parent, "/", id, "-lock-").c_str(), "", 0,
                        &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof(created));
    if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
      // The create may have been applied: find our node by its id, delete it.
      const auto deadline =
          SteadyClock::now() + absl::ToChronoNanoseconds(service_->options().session_timeout);
      for (int i = 0; i < 1000 && SteadyClock::now() < deadline; ++i) {
        String_vector children{};
        int crc = zoo_get_children(zh, parent->c_str(), 0, &children);
        if (crc == ZOK) {
          for (int k = 0; k < children.count; ++k) {
            if (absl::StartsWith(children.data[k], id)) {
              (void)DeleteRetrying(zh, absl::StrCat(*parent, "/", children.data[k]),
                                   service_->options().session_timeout);
            }
          }
          deallocate_String_vector(&children);
          break;
        }
        if (zoo_state(zh) == ZOO_EXPIRED_SESSION_STATE) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (rc != ZOK) return ZkError(rc, "create");
    const std::string mine = created;
    const int64_t my_seq = SequenceOf(mine);
    for (int round = 0; round < 100000; ++round) {
      String_vector children{};
      rc = zoo_get_children(zh, parent->c_str(), 0, &children);
      if (rc != ZOK) {
        (void)DeleteRetrying(zh, mine, ReleasePatience());
        return ZkError(rc, "get_children");
      }
      int64_t lowest = -1;
      std::string predecessor;
      int64_t pred_seq = -1;
      for (int i = 0; i < children.count; ++i) {
        const int64_t seq = SequenceOf(children.data[i]);
        if (seq < 0) continue;
        if (lowest < 0 || seq < lowest) lowest = seq;
        if (seq < my_seq && seq > pred_seq) {
          pred_seq = seq;
          predecessor = absl::StrCat(*parent, "/", children.data[i]);
        }
      }
      deallocate_String_vector(&children);
      if (lowest == my_seq) {
        held_[mine] = (*h)->generation;
        Grant g;
        g.resource = resource;
        g.token = mine;
        g.fencing_token = static_cast<uint64_t>(my_seq);
        g.acquired_at = start;
        g.valid_until = SteadyClock::time_point::max();
        return g;
      }
      if (wait <= absl::ZeroDuration() || SteadyClock::now() >= deadline) {
        (void)DeleteRetrying(zh, mine, ReleasePatience());
        if (wait <= absl::ZeroDuration()) {
          return absl::AbortedError(absl::StrCat("zookeeper lock \"", resource, "\": held (",
                                                 predecessor, " before ", mine, ")"));
        }
        return absl::DeadlineExceededError(
            absl::StrCat("zookeeper lock \"", resource, "\": not granted within wait"));
      }
      // Watch only the predecessor; if it is already gone, look again.
      WatchRegistry& reg = Watches();
      uint64_t id;
      {
        std::lock_guard<std::mutex> lock(reg.mu);
        id = reg.next++;
        reg.pending.insert(id);
      }
      Stat stat{};
      rc = zoo_wexists(zh, predecessor.c_str(), OnWatch, reinterpret_cast<void*>(id), &stat);
      if (rc == ZNONODE) {
        std::lock_guard<std::mutex> lock(reg.mu);
        reg.pending.erase(id);
        continue;
      }
      if (rc != ZOK) {
        (void)DeleteRetrying(zh, mine, ReleasePatience());
        return ZkError(rc, "exists");
      }
      std::unique_lock<std::mutex> lock(reg.mu);
      reg.cv.wait_until(lock, deadline, [&] { return reg.pending.count(id) == 0; });
      reg.pending.erase(id);
    }
    (void)DeleteRetrying(zh, mine, ReleasePatience());
    return absl::DeadlineExceededError("zookeeper: too many rounds");
  }

  // A partition can keep a session alive but unreachable for longer than
  // its timeout (no leader, no expiry): keep trying well past it, or the
  // node stays and the lock with it.
  absl::Duration ReleasePatience() const {
    return std::max(service_->options().session_timeout * 10, absl::Seconds(20));
  }

  ZooKeeperService* const service_;
  std::map<std::string, uint64_t> held_;  // znode path -> handle generation
};

absl::StatusOr<std::unique_ptr<LockSession>> ZooKeeperService::NewSession() {
  absl::StatusOr<std::shared_ptr<Handle>> h = Get();
  if (!h.ok()) return h.status();
  return std::unique_ptr<LockSession>(new ZooKeeperSession(this));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LockService>> NewZooKeeperService(ServiceOptions options) {
  auto service = std::make_unique<ZooKeeperService>(std::move(options));
  absl::StatusOr<std::shared_ptr<Handle>> h = service->Get();
  if (!h.ok()) return h.status();
  return std::unique_ptr<LockService>(std::move(service));
}

}  // namespace redlock::backends

#endif  // REDLOCK_HAVE_ZOOKEEPER
