#include "tests/chaos/broken_client.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/random.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chaos/history/history.h"

namespace redlock::chaos {
namespace {

using Steady = std::chrono::steady_clock;
using Wall = std::chrono::system_clock;

constexpr char kReleaseScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

// kMajorityCount: each node admits a holder while it counts fewer than K
// (live entries of a sorted set scored by expiry on the node's clock).
// ARGV = token, ttl_ms, K. Returns 1 when admitted, 0 when full.
constexpr char kCountAcquireScript[] = R"lua(
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
local ttl = tonumber(ARGV[2])
redis.call('zadd', KEYS[1], now + ttl, ARGV[1])
if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end
return 1
)lua";
constexpr char kCountReleaseScript[] = "return redis.call('zrem', KEYS[1], ARGV[1])";

std::string HoldersKey(const std::string& resource) { return resource + ":holders"; }

std::string NewToken() {
  unsigned char raw[20];
  size_t got = 0;
  for (int i = 0; i < 100 && got < sizeof(raw); ++i) {
    ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

struct Node {
  std::string host;
  int port = 0;
  redisContext* c = nullptr;
  int stale = 0;                     // replies owed for commands we gave up on
  Steady::time_point stale_since{};  // when the oldest owed reply was given up
  Steady::time_point retry_at{};     // next connection attempt
};

enum class Result { kNone, kOk, kNil, kInteger, kError, kTimeout, kDown };

struct NodeResult {
  Result result = Result::kNone;
  long long integer = 0;
  std::string error;
};

class BrokenRedlock : public LockBackend {
 public:
  explicit BrokenRedlock(const ClientConfig& config) : config_(config) {
    for (const std::string& n : config.nodes) {
      std::vector<std::string> hp = absl::StrSplit(n, absl::MaxSplits(':', 1));
      Node node;
      node.host = hp[0];
      if (hp.size() > 1 && !absl::SimpleAtoi(hp[1], &node.port)) node.port = 0;
      nodes_.push_back(std::move(node));
    }
    quorum_ = static_cast<int>(nodes_.size()) / 2 + 1;
    timeout_ = std::chrono::milliseconds(config.node_timeout_ms);
  }

  ~BrokenRedlock() override {
    for (Node& n : nodes_) Drop(n);
  }

  absl::StatusOr<HeldLock> Acquire(const std::string& resource, int64_t ttl_ms) override {
    if (config_.variant == ClientVariant::kMajorityCount) return AcquireCounted(resource, ttl_ms);
    const std::string token = NewToken();
    const Steady::time_point start = Steady::now();
    const Wall::time_point start_wall = Wall::now();
    const int64_t start_raw = RawMonotonicNanos();
    const int n = static_cast<int>(nodes_.size());
    std::vector<NodeResult> results =
        Round({"SET", resource, token, "NX", "PX", std::to_string(ttl_ms)},
              DecidedOnceQuorum([](const NodeResult& x) { return x.result == Result::kOk; }));
    std::vector<int> granted;
    int refused = 0;
    for (int i = 0; i < n; ++i) {
      if (results[static_cast<size_t>(i)].result == Result::kOk) granted.push_back(i);
      if (results[static_cast<size_t>(i)].result == Result::kNil) ++refused;
    }
    const Steady::time_point now = Steady::now();
    const Wall::time_point now_wall = Wall::now();
    const auto ttl = std::chrono::milliseconds(ttl_ms);
    const Steady::duration drift = Drift(ttl_ms);
    HeldLock h = Granted(resource, token, start_raw, drift, granted);
    bool valid = false;
    if (config_.variant == ClientVariant::kWallClock) {
      // THE DEFECT: elapsed time and the end of validity on the wall clock.
      Wall::duration validity = ttl - (now_wall - start_wall) - drift;
      valid = validity > Wall::duration::zero();
      h.valid_until_wall = now_wall + validity;
      h.valid_until_raw =
          RawMonotonicNanos() +
          std::chrono::duration_cast<std::chrono::nanoseconds>(h.valid_until_wall - Wall::now())
              .count();
    } else {
      Steady::duration validity = config_.variant == ClientVariant::kNoElapsedCheck
                                      ? ttl - drift  // THE DEFECT: the round's duration is ignored
                                      : ttl - (now - start) - drift;
      valid = validity > Steady::duration::zero();
      h.valid_until_steady = now + validity;
      h.valid_until_raw = RawFromSteady(h.valid_until_steady);
    }
    if (static_cast<int>(granted.size()) >= quorum_ && valid) return h;

    if (config_.variant != ClientVariant::kNoPartialRelease) {
      ReleaseToken(resource, token);
    }  // else THE DEFECT: the partial grants stay until their ttl.
    std::string tally = absl::StrCat("acquire \"", resource, "\": ", granted.size(), " of ", n,
                                     " nodes granted (quorum ", quorum_, ")");
    if (static_cast<int>(granted.size()) >= quorum_) {
      return absl::DeadlineExceededError(absl::StrCat(tally, " but no validity was left"));
    }
    if (refused > 0) return absl::AbortedError(absl::StrCat(tally, "; held by another client"));
    return absl::UnavailableError(tally);
  }

  absl::Duration TimeLeft(const HeldLock& lock) override {
    if (config_.variant == ClientVariant::kWallClock) {
      auto left = lock.valid_until_wall - Wall::now();
      return left > Wall::duration::zero() ? absl::FromChrono(left) : absl::ZeroDuration();
    }
    auto left = lock.valid_until_steady - Steady::now();
    return left > Steady::duration::zero() ? absl::FromChrono(left) : absl::ZeroDuration();
  }

  absl::Status Release(const HeldLock& lock) override {
    int confirmed = 0;
    if (config_.variant == ClientVariant::kMajorityCount) {
      confirmed = ReleaseCounted(lock.resource, lock.token);
    } else if (config_.variant == ClientVariant::kPlainDelRelease) {
      // THE DEFECT: deletes the key whoever holds it now.
      std::vector<NodeResult> r = Round({"DEL", lock.resource}, nullptr);
      for (const auto& x : r) confirmed += x.result == Result::kInteger;
    } else {
      confirmed = ReleaseToken(lock.resource, lock.token);
    }
    if (confirmed >= quorum_) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("release \"", lock.resource, "\": ", confirmed,
                                               " of ", nodes_.size(), " nodes confirmed"));
  }

 private:
  // THE DEFECT of kMajorityCount: a holder count per node, granted on a
  // majority. With N=5 and K=2, three holders can each get 3 of 5 nodes
  // while no node counts more than 2. Otherwise correct (validity, cleanup).
  absl::StatusOr<HeldLock> AcquireCounted(const std::string& resource, int64_t ttl_ms) {
    const std::string token = NewToken();
    const Steady::time_point start = Steady::now();
    const int64_t start_raw = RawMonotonicNanos();
    const int n = static_cast<int>(nodes_.size());
    std::vector<NodeResult> results =
        Round({"EVAL", kCountAcquireScript, "1", HoldersKey(resource), token,
               std::to_string(ttl_ms), std::to_string(config_.permits)},
              DecidedOnceQuorum([](const NodeResult& x) {
                return x.result == Result::kInteger && x.integer == 1;
              }));
    std::vector<int> granted;
    int full = 0;
    for (int i = 0; i < n; ++i) {
      const NodeResult& r = results[static_cast<size_t>(i)];
      if (r.result == Result::kInteger && r.integer == 1) granted.push_back(i);
      if (r.result == Result::kInteger && r.integer == 0) ++full;
    }
    const Steady::time_point now = Steady::now();
    const Steady::duration drift = Drift(ttl_ms);
    const Steady::duration validity = std::chrono::milliseconds(ttl_ms) - (now - start) - drift;
    if (static_cast<int>(granted.size()) >= quorum_ && validity > Steady::duration::zero()) {
      HeldLock h = Granted(resource, token, start_raw, drift, granted);
      h.valid_until_steady = now + validity;
      h.valid_until_raw = RawFromSteady(h.valid_until_steady);
      h.mode = "slot";
      h.permits = config_.permits;
      h.read_only = true;
      return h;
    }
    ReleaseCounted(resource, token);
    std::string tally = absl::StrCat("acquire a permit of \"", resource, "\": ", granted.size(),
                                     " of ", n, " nodes admitted (quorum ", quorum_, ")");
    if (static_cast<int>(granted.size()) >= quorum_) {
      return absl::DeadlineExceededError(absl::StrCat(tally, " but no validity was left"));
    }
    if (full > 0) return absl::AbortedError(absl::StrCat(tally, "; full on ", full, " nodes"));
    return absl::UnavailableError(tally);
  }

  int ReleaseCounted(const std::string& resource, const std::string& token) {
    std::vector<NodeResult> r =
        Round({"EVAL", kCountReleaseScript, "1", HoldersKey(resource), token}, nullptr);
    int confirmed = 0;
    for (const auto& x : r) confirmed += x.result == Result::kInteger;
    return confirmed;
  }

  int ReleaseToken(const std::string& resource, const std::string& token) {
    std::vector<NodeResult> r = Round({"EVAL", kReleaseScript, "1", resource, token}, nullptr);
    int confirmed = 0;
    for (const auto& x : r) confirmed += x.result == Result::kInteger;
    return confirmed;
  }

  static void Owe(Node& n) {
    if (n.stale++ == 0) n.stale_since = Steady::now();
  }

  void Drop(Node& n) {
    if (n.c != nullptr) redisFree(n.c);
    n.c = nullptr;
    n.stale = 0;
    n.retry_at = Steady::now() + std::chrono::milliseconds(100);
  }

  bool Connected(Node& n) {
    if (n.c != nullptr) return true;
    if (Steady::now() < n.retry_at) return false;
    timeval tv = absl::ToTimeval(
        absl::FromChrono(std::max<Steady::duration>(timeout_, std::chrono::milliseconds(50))));
    redisContext* c = redisConnectWithTimeout(n.host.c_str(), n.port, tv);
    if (c == nullptr || c->err) {
      if (c != nullptr) redisFree(c);
      n.retry_at = Steady::now() + std::chrono::milliseconds(100);
      return false;
    }
    redisSetTimeout(c, tv);
    n.c = c;
    n.stale = 0;
    return true;
  }

  // The clock drift allowance of a lock of `ttl_ms`.
  Steady::duration Drift(int64_t ttl_ms) const {
    return std::chrono::duration_cast<Steady::duration>(
        absl::ToChronoNanoseconds(DriftOf(config_, ttl_ms)));
  }

  // A lock on `resource` with `token`, granted by `nodes` in a round that
  // started at `start_raw` (its validity is the caller's).
  static HeldLock Granted(const std::string& resource, const std::string& token, int64_t start_raw,
                          Steady::duration drift, const std::vector<int>& nodes) {
    HeldLock h;
    h.resource = resource;
    h.token = token;
    h.start_raw = start_raw;
    h.drift_ms = std::chrono::duration_cast<std::chrono::milliseconds>(drift).count() + 1;
    h.nodes = nodes;
    return h;
  }

  // A round's `done`: a quorum of nodes said yes (`yes`), or so many answered
  // otherwise that no quorum can.
  std::function<bool(const std::vector<NodeResult>&)> DecidedOnceQuorum(
      std::function<bool(const NodeResult&)> yes) const {
    return [this, yes = std::move(yes)](const std::vector<NodeResult>& r) {
      const int n = static_cast<int>(nodes_.size());
      int granted = 0, refused = 0;
      for (const auto& x : r) {
        if (yes(x))
          ++granted;
        else if (x.result != Result::kNone)
          ++refused;
      }
      return granted >= quorum_ || refused >= n - quorum_ + 1;
    };
  }

  // Sends `args` to every node, then collects replies until `done` says the
  // outcome is known (null: until every node answered or timed out).
  std::vector<NodeResult> Round(const std::vector<std::string>& args,
                                const std::function<bool(const std::vector<NodeResult>&)>& done) {
    const size_t n = nodes_.size();
    std::vector<NodeResult> results(n);
    std::vector<bool> pending(n, false);
    std::vector<Steady::time_point> deadline(n);
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    for (size_t i = 0; i < n; ++i) {
      Node& node = nodes_[i];
      if (!Connected(node)) {
        results[i].result = Result::kDown;
        continue;
      }
      if (redisAppendCommandArgv(node.c, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
          REDIS_OK) {
        Drop(node);
        results[i].result = Result::kDown;
        continue;
      }
      int written = 0;
      bool failed = false;
      for (int k = 0; k < 1000 && !written; ++k) {
        if (redisBufferWrite(node.c, &written) != REDIS_OK) {
          failed = true;
          break;
        }
      }
      if (failed || !written) {
        Drop(node);
        results[i].result = Result::kDown;
        continue;
      }
      pending[i] = true;
      deadline[i] = Steady::now() + timeout_;
    }
    auto any_pending = [&] {
      for (size_t i = 0; i < n; ++i) {
        if (pending[i]) return true;
      }
      return false;
    };
    for (int round = 0; round < 100000 && any_pending(); ++round) {
      if (done && done(results)) break;
      Steady::time_point first = Steady::time_point::max();
      std::vector<pollfd> fds;
      std::vector<size_t> which;
      for (size_t i = 0; i < n; ++i) {
        if (!pending[i]) continue;
        first = std::min(first, deadline[i]);
        fds.push_back({nodes_[i].c->fd, POLLIN, 0});
        which.push_back(i);
      }
      auto wait =
          std::chrono::duration_cast<std::chrono::milliseconds>(first - Steady::now()).count();
      int r = poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait) + 1));
      // Read first, then expire deadlines: replies that are there count.
      if (r > 0) {
        for (size_t k = 0; k < fds.size(); ++k) {
          if (fds[k].revents == 0) continue;
          size_t i = which[k];
          Node& node = nodes_[i];
          if (redisBufferRead(node.c) != REDIS_OK) {
            Drop(node);
            pending[i] = false;
            results[i].result = Result::kDown;
            continue;
          }
          for (int j = 0; j < 10000 && pending[i]; ++j) {
            void* raw = nullptr;
            if (redisGetReplyFromReader(node.c, &raw) != REDIS_OK) {
              Drop(node);
              pending[i] = false;
              results[i].result = Result::kDown;
              break;
            }
            if (raw == nullptr) break;
            redisReply* reply = static_cast<redisReply*>(raw);
            if (node.stale > 0) {
              // The late answer to a command we gave up on.
              if (--node.stale == 0) node.stale_since = Steady::time_point{};
            } else {
              pending[i] = false;
              NodeResult& res = results[i];
              switch (reply->type) {
                case REDIS_REPLY_STATUS:
                  res.result = Result::kOk;
                  break;
                case REDIS_REPLY_NIL:
                  res.result = Result::kNil;
                  break;
                case REDIS_REPLY_INTEGER:
                  res.result = Result::kInteger;
                  res.integer = reply->integer;
                  break;
                case REDIS_REPLY_ERROR:
                  res.result = Result::kError;
                  res.error.assign(reply->str, reply->len);
                  break;
                default:
                  res.result = Result::kError;
              }
            }
            freeReplyObject(reply);
          }
        }
      }
      Steady::time_point now = Steady::now();
      for (size_t i = 0; i < n; ++i) {
        if (pending[i] && now >= deadline[i]) {
          pending[i] = false;
          results[i].result = Result::kTimeout;
          Owe(nodes_[i]);
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (!pending[i]) continue;
      results[i].result = Result::kTimeout;  // decided without it
      Owe(nodes_[i]);
    }
    // Replies owed for more than a second (lost: a black hole, a reset)
    // never come: a fresh connection, as any client would make, instead of a
    // connection that answers every later request with an older reply.
    const Steady::time_point now = Steady::now();
    for (Node& node : nodes_) {
      if (node.stale > 64 || (node.stale > 0 && now - node.stale_since > std::chrono::seconds(1))) {
        Drop(node);
      }
    }
    return results;
  }

  ClientConfig config_;
  std::vector<Node> nodes_;
  int quorum_ = 1;
  Steady::duration timeout_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LockBackend>> MakeBrokenBackend(const ClientConfig& config) {
  if (config.variant == ClientVariant::kLibrary) {
    return absl::InvalidArgumentError("the library is not a broken variant");
  }
  return std::unique_ptr<LockBackend>(new BrokenRedlock(config));
}

}  // namespace redlock::chaos
