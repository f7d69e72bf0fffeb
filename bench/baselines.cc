#include "bench/baselines.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "testkit/redis.h"

namespace redlock::bench {

const char kCompareAndDeleteScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

namespace {

using Clock = std::chrono::steady_clock;

// The library's drift rule (the one piece of library code a baseline uses:
// the rule it must judge validity by), at the baseline's factor and floor.
absl::Duration DriftOf(const BaselineOptions& o, absl::Duration ttl) {
  Options drift;
  drift.clock_drift_factor = o.clock_drift_factor;
  drift.clock_drift_floor = o.clock_drift_floor;
  return DriftAllowance(ttl, drift);
}

}  // namespace

std::string NewBaselineToken() {
  unsigned char raw[20];
  size_t got = 0;
  for (int tries = 0; got < sizeof(raw) && tries < 8; ++tries) {
    ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  if (got < sizeof(raw)) {
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    urandom.read(reinterpret_cast<char*>(raw), sizeof(raw));
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out(2 * sizeof(raw), '0');
  for (size_t i = 0; i < sizeof(raw); ++i) {
    out[2 * i] = kHex[raw[i] >> 4];
    out[2 * i + 1] = kHex[raw[i] & 15];
  }
  return out;
}

int EffectiveQuorumOf(const BaselineOptions& o) {
  const int n = static_cast<int>(o.nodes.size());
  return o.quorum > 0 ? o.quorum : n / 2 + 1;
}

absl::Status AcquireDecision(const char* what, const Tally& t, int n, int quorum,
                             std::chrono::steady_clock::time_point start, absl::Duration ttl,
                             const BaselineOptions& options) {
  const absl::Duration validity =
      ttl - absl::FromChrono(Clock::now() - start) - DriftOf(options, ttl);
  if (t.yes >= quorum && validity > absl::ZeroDuration()) return absl::OkStatus();
  std::string msg =
      absl::StrCat(what, " acquire: ", t.yes, " of ", n, " nodes granted (quorum ", quorum, ")");
  if (!t.first_error.empty()) absl::StrAppend(&msg, "; ", t.first_error);
  if (t.yes >= quorum) {
    return absl::DeadlineExceededError(absl::StrCat(msg, "; no validity left"));
  }
  if (t.yes + t.refused >= quorum) return absl::AbortedError(msg);
  return absl::UnavailableError(msg);
}

absl::Status ReleaseDecision(const char* what, const Tally& t, int n, int quorum) {
  if (t.yes >= quorum) return absl::OkStatus();
  std::string msg =
      absl::StrCat(what, " release: ", t.yes, " of ", n, " nodes confirmed (quorum ", quorum, ")");
  if (!t.first_error.empty()) absl::StrAppend(&msg, "; ", t.first_error);
  return t.failed > 0 ? absl::UnavailableError(msg) : absl::InternalError(msg);
}

namespace {

// Arguments of one command, as hiredis wants them.
struct Args {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  explicit Args(const std::vector<std::string>& args) {
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
  }
  int argc() const { return static_cast<int>(argv.size()); }
};

// The floor and sequential baselines talk through the test kit's blocking
// connection (testkit/redis.h): plain hiredis, nothing from the library, and
// on the hot path exactly the calls a hand-written blocking baseline makes
// (redisCommandArgv with pre-split arguments, one reply converted). The
// wait-for-all baseline needs non-blocking contexts driven by poll(2): it
// keeps its own (NbConn below), as that engine is what it measures.

void TallySet(const absl::StatusOr<testkit::RedisValue>& r, const std::string& node, Tally* t) {
  if (!r.ok()) {
    t->Fail(std::string(r.status().message()));
  } else if (r->type == testkit::RedisValue::Type::kStatus && r->str == "OK") {
    ++t->yes;
  } else if (r->type == testkit::RedisValue::Type::kNil) {
    ++t->refused;
  } else {
    t->Fail(absl::StrCat(node, ": ", r->str));
  }
}

void TallyRelease(const absl::StatusOr<testkit::RedisValue>& r, const std::string& node, Tally* t) {
  if (!r.ok()) {
    t->Fail(std::string(r.status().message()));
  } else if (r->type == testkit::RedisValue::Type::kInteger) {
    ++t->yes;  // 1 deleted, 0 already gone: both are a confirmed release
  } else {
    t->Fail(absl::StrCat(node, ": ", r->str));
  }
}

// The commands of one cycle, built once per acquire.
struct LockCommands {
  std::string key;
  std::string token;
  std::string ttl_ms;
  std::string sha;
  std::vector<std::string> Set() const { return {"SET", key, token, "NX", "PX", ttl_ms}; }
  // A new cycle: a fresh token and `ttl`; returns its Set().
  std::vector<std::string> NextSet(absl::Duration ttl) {
    token = NewBaselineToken();
    ttl_ms = std::to_string(absl::ToInt64Milliseconds(ttl));
    return Set();
  }
  std::vector<std::string> EvalSha() const { return {"EVALSHA", sha, "1", key, token}; }
  std::vector<std::string> Eval() const {
    return {"EVAL", kCompareAndDeleteScript, "1", key, token};
  }
};

bool IsNoScript(const absl::StatusOr<testkit::RedisValue>& r) {
  return r.ok() && r->type == testkit::RedisValue::Type::kError &&
         absl::StartsWith(r->str, "NOSCRIPT");
}

absl::StatusOr<std::string> LoadScript(testkit::RedisConnection& conn) {
  absl::StatusOr<testkit::RedisValue> r = conn.Command({"SCRIPT", "LOAD", kCompareAndDeleteScript});
  if (!r.ok()) return r.status();
  if (r->type != testkit::RedisValue::Type::kString) {
    return absl::InternalError(absl::StrCat(conn.name(), ": SCRIPT LOAD: ", r->str));
  }
  return r->str;
}

// ---- floor ----------------------------------------------------------------------

class FloorLocker final : public Locker {
 public:
  FloorLocker(const BaselineOptions& o, std::string resource) : options_(o), conn_(o.nodes.at(0)) {
    cmd_.key = std::move(resource);
  }

  absl::Status Init() {
    absl::Status st = conn_.Connect(options_.connect_timeout, options_.node_timeout);
    if (!st.ok()) return st;
    absl::StatusOr<std::string> sha = LoadScript(conn_);
    if (!sha.ok()) return sha.status();
    cmd_.sha = *sha;
    return absl::OkStatus();
  }

  absl::Status Acquire(absl::Duration ttl) override {
    if (!conn_.connected()) {
      absl::Status st = conn_.Connect(options_.node_timeout, options_.node_timeout);
      if (!st.ok()) return st;
    }
    absl::StatusOr<testkit::RedisValue> r = conn_.Command(cmd_.NextSet(ttl));
    if (!r.ok()) {
      // The SET may have run with its reply lost (a timeout): remove it, or
      // the key would stay held for the whole ttl.
      (void)Release();
      return r.status();
    }
    if (r->type == testkit::RedisValue::Type::kNil) return absl::AbortedError("floor: held");
    if (r->type != testkit::RedisValue::Type::kStatus) return absl::InternalError(r->str);
    return absl::OkStatus();
  }

  absl::Status Release() override {
    if (!conn_.connected()) {
      absl::Status st = conn_.Connect(options_.node_timeout, options_.node_timeout);
      if (!st.ok()) return st;
    }
    absl::StatusOr<testkit::RedisValue> r = conn_.Command(cmd_.EvalSha());
    if (IsNoScript(r)) r = conn_.Command(cmd_.Eval());
    if (!r.ok()) return r.status();
    if (r->type != testkit::RedisValue::Type::kInteger) return absl::InternalError(r->str);
    return absl::OkStatus();
  }

 private:
  const BaselineOptions options_;
  testkit::RedisConnection conn_;
  LockCommands cmd_;
};

// The sequential and wait-for-all baselines: a `Conn` per node, the
// commands of a cycle, the quorum, and the verdicts on a round's tally
// (`what` names the baseline in them).
template <typename Conn>
class QuorumLocker : public Locker {
 protected:
  QuorumLocker(const BaselineOptions& o, std::string resource, const char* what)
      : options_(o), quorum_(EffectiveQuorumOf(o)), what_(what) {
    for (const Endpoint& ep : o.nodes) conns_.push_back(std::make_unique<Conn>(ep));
    cmd_.key = std::move(resource);
  }

  // The acquire's verdict; a failed acquire is released at once.
  absl::Status AcquireVerdict(const Tally& t, Clock::time_point start, absl::Duration ttl) {
    absl::Status st =
        AcquireDecision(what_, t, static_cast<int>(conns_.size()), quorum_, start, ttl, options_);
    if (!st.ok()) (void)Release();
    return st;
  }
  absl::Status ReleaseVerdict(const Tally& t) {
    return ReleaseDecision(what_, t, static_cast<int>(conns_.size()), quorum_);
  }

  const BaselineOptions options_;
  const int quorum_;
  const char* const what_;
  std::vector<std::unique_ptr<Conn>> conns_;
  LockCommands cmd_;
};

// ---- sequential -------------------------------------------------------------------

class SequentialLocker final : public QuorumLocker<testkit::RedisConnection> {
 public:
  SequentialLocker(const BaselineOptions& o, std::string resource)
      : QuorumLocker(o, std::move(resource), "sequential") {}

  absl::Status Init() {
    for (auto& c : conns_) {
      absl::Status st = c->Connect(options_.connect_timeout, options_.node_timeout);
      if (!st.ok()) return st;
      absl::StatusOr<std::string> sha = LoadScript(*c);
      if (!sha.ok()) return sha.status();
      cmd_.sha = *sha;
    }
    return absl::OkStatus();
  }

  absl::Status Acquire(absl::Duration ttl) override {
    const Clock::time_point start = Clock::now();
    const std::vector<std::string> set = cmd_.NextSet(ttl);
    Args args(set);
    Tally t;
    for (auto& c : conns_) {
      TallySet(Run(*c, args), c->name(), &t);
    }
    return AcquireVerdict(t, start, ttl);
  }

  absl::Status Release() override {
    const std::vector<std::string> evalsha = cmd_.EvalSha();
    Args args(evalsha);
    Tally t;
    for (auto& c : conns_) {
      absl::StatusOr<testkit::RedisValue> r = Run(*c, args);
      if (IsNoScript(r)) r = c->Command(cmd_.Eval());
      TallyRelease(r, c->name(), &t);
    }
    return ReleaseVerdict(t);
  }

 private:
  absl::StatusOr<testkit::RedisValue> Run(testkit::RedisConnection& c, Args& args) {
    if (!c.connected()) {
      absl::Status st = c.Connect(options_.node_timeout, options_.node_timeout);
      if (!st.ok()) return st;
    }
    return c.Command(args.argc(), args.argv.data(), args.lens.data());
  }
};

// ---- wait-for-all -------------------------------------------------------------------

// One non-blocking hiredis context per node, driven by poll(2).
class NbConn {
 public:
  explicit NbConn(Endpoint ep) : ep_(std::move(ep)), name_(ep_.ToString()) {}
  ~NbConn() { Close(); }
  NbConn(const NbConn&) = delete;
  NbConn& operator=(const NbConn&) = delete;

  const std::string& name() const { return name_; }

  // Queues `args` (connecting first if needed, with AUTH/SELECT pipelined in
  // front) and tries to write at once. Returns an error if the node cannot
  // even be tried.
  absl::Status Send(const Args& args) {
    if (c_ == nullptr) {
      redisContext* c = redisConnectNonBlock(ep_.host.c_str(), ep_.port);
      if (c == nullptr) return absl::UnavailableError(absl::StrCat(name_, ": out of memory"));
      if (c->err != 0) {
        std::string err = c->errstr;
        redisFree(c);
        return absl::UnavailableError(absl::StrCat(name_, ": ", err));
      }
      c_ = c;
      connecting_ = true;
      handshake_left_ = 0;
      for (const auto& cmd : testkit::HandshakeCommands(ep_)) {
        Args h(cmd);
        redisAppendCommandArgv(c_, h.argc(), h.argv.data(), h.lens.data());
        ++handshake_left_;
      }
    }
    if (redisAppendCommandArgv(c_, args.argc(), const_cast<const char**>(args.argv.data()),
                               args.lens.data()) != REDIS_OK) {
      return Fail("cannot format the command");
    }
    if (!connecting_) return Write();
    return absl::OkStatus();
  }

  int fd() const { return c_ == nullptr ? -1 : c_->fd; }
  short events() const {
    if (c_ == nullptr) return 0;
    short ev = POLLIN;
    if (connecting_ || sdslen(c_->obuf) > 0) ev |= POLLOUT;
    return ev;
  }

  // Handles poll results. Returns true with *reply set once the reply to the
  // last Send has arrived (or an error status when the node failed).
  bool Handle(short revents, absl::StatusOr<testkit::RedisValue>* reply) {
    if (c_ == nullptr) return false;
    if (connecting_ && (revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      int err = 0;
      socklen_t len = sizeof(err);
      if (getsockopt(c_->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        *reply = Fail(absl::StrCat("connect: ", strerror(err)));
        return true;
      }
      connecting_ = false;
    }
    if (!connecting_ && (revents & POLLOUT) != 0) {
      absl::Status st = Write();
      if (!st.ok()) {
        *reply = st;
        return true;
      }
    }
    if (!connecting_ && (revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
      if (redisBufferRead(c_) != REDIS_OK) {
        *reply = Fail(c_->errstr);
        return true;
      }
      for (int guard = 0; guard < 64; ++guard) {
        void* raw = nullptr;
        if (redisGetReplyFromReader(c_, &raw) != REDIS_OK) {
          *reply = Fail(c_->errstr);
          return true;
        }
        if (raw == nullptr) break;
        testkit::RedisValue v = testkit::RedisValueFromReply(static_cast<redisReply*>(raw));
        freeReplyObject(raw);
        if (handshake_left_ > 0) {
          --handshake_left_;
          if (v.type == testkit::RedisValue::Type::kError) {
            *reply = Fail(absl::StrCat("handshake: ", v.str));
            return true;
          }
          continue;
        }
        *reply = std::move(v);
        return true;
      }
    }
    return false;
  }

  // The node missed its deadline: its reply would arrive late and be taken
  // for the next command's, so the connection is dropped.
  absl::Status TimedOut(absl::Duration timeout) {
    return Fail(absl::StrCat("no reply within ", absl::FormatDuration(timeout)));
  }

  void Close() {
    if (c_ != nullptr) redisFree(c_);
    c_ = nullptr;
    connecting_ = false;
    handshake_left_ = 0;
  }

 private:
  absl::Status Write() {
    int done = 0;
    for (int guard = 0; guard < 64 && done == 0; ++guard) {
      if (redisBufferWrite(c_, &done) != REDIS_OK) return Fail(c_->errstr);
      if (sdslen(c_->obuf) > 0 && done == 0) break;  // EAGAIN: poll for POLLOUT
    }
    return absl::OkStatus();
  }

  absl::Status Fail(absl::string_view why) {
    std::string msg = absl::StrCat(name_, ": ", why);
    Close();
    return absl::UnavailableError(msg);
  }

  const Endpoint ep_;
  const std::string name_;
  redisContext* c_ = nullptr;
  bool connecting_ = false;
  int handshake_left_ = 0;
};

class WaitForAllLocker final : public QuorumLocker<NbConn> {
 public:
  WaitForAllLocker(const BaselineOptions& o, std::string resource)
      : QuorumLocker(o, std::move(resource), "wait-for-all") {}

  absl::Status Init() {
    // The script's SHA from one node; every node gets it loaded by the round.
    std::vector<std::string> load = {"SCRIPT", "LOAD", kCompareAndDeleteScript};
    Args args(load);
    std::vector<absl::StatusOr<testkit::RedisValue>> replies;
    Round(args, options_.connect_timeout, &replies);
    for (auto& r : replies) {
      if (!r.ok()) return r.status();
      if (r->type != testkit::RedisValue::Type::kString) return absl::InternalError(r->str);
      cmd_.sha = r->str;
    }
    return absl::OkStatus();
  }

  absl::Status Acquire(absl::Duration ttl) override {
    const Clock::time_point start = Clock::now();
    const std::vector<std::string> set = cmd_.NextSet(ttl);
    Args args(set);
    Round(args, options_.node_timeout, &replies_);
    Tally t;
    for (size_t i = 0; i < conns_.size(); ++i) TallySet(replies_[i], conns_[i]->name(), &t);
    return AcquireVerdict(t, start, ttl);
  }

  absl::Status Release() override {
    const std::vector<std::string> evalsha = cmd_.EvalSha();
    Args args(evalsha);
    Round(args, options_.node_timeout, &replies_);
    bool noscript = false;
    for (auto& r : replies_) noscript = noscript || IsNoScript(r);
    if (noscript) {
      const std::vector<std::string> eval = cmd_.Eval();
      Args eval_args(eval);
      Round(eval_args, options_.node_timeout, &replies_);
    }
    Tally t;
    for (size_t i = 0; i < conns_.size(); ++i) TallyRelease(replies_[i], conns_[i]->name(), &t);
    return ReleaseVerdict(t);
  }

 private:
  // Sends `args` to every node, then polls until every node has answered or
  // `timeout` has passed since the send.
  void Round(const Args& args, absl::Duration timeout,
             std::vector<absl::StatusOr<testkit::RedisValue>>* out) {
    const size_t n = conns_.size();
    out->assign(n, absl::UnavailableError("not asked"));
    pending_.assign(n, false);
    const Clock::time_point deadline = Clock::now() + absl::ToChronoNanoseconds(timeout);
    size_t left = 0;
    for (size_t i = 0; i < n; ++i) {
      absl::Status st = conns_[i]->Send(args);
      if (!st.ok()) {
        (*out)[i] = st;
      } else {
        pending_[i] = true;
        ++left;
      }
    }
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    // Bounded: every pass either handles an event or waits until the deadline.
    for (int pass = 0; left > 0 && pass < 100000; ++pass) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      fds.clear();
      which.clear();
      for (size_t i = 0; i < n; ++i) {
        if (!pending_[i]) continue;
        fds.push_back(pollfd{conns_[i]->fd(), conns_[i]->events(), 0});
        which.push_back(i);
      }
      const timespec ts = absl::ToTimespec(absl::FromChrono(deadline - now));
      int ready = ppoll(fds.data(), fds.size(), &ts, nullptr);
      if (ready < 0 && errno != EINTR) break;
      for (size_t k = 0; k < fds.size() && ready > 0; ++k) {
        if (fds[k].revents == 0) continue;
        const size_t i = which[k];
        if (conns_[i]->Handle(fds[k].revents, &(*out)[i])) {
          pending_[i] = false;
          --left;
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (pending_[i]) (*out)[i] = conns_[i]->TimedOut(timeout);
    }
  }

  std::vector<bool> pending_;
  std::vector<absl::StatusOr<testkit::RedisValue>> replies_;
};

}  // namespace

namespace {

template <typename T>
absl::StatusOr<std::unique_ptr<Locker>> NewLocker(const BaselineOptions& options,
                                                  std::string resource) {
  if (options.nodes.empty()) return absl::InvalidArgumentError("no nodes");
  auto locker = std::make_unique<T>(options, std::move(resource));
  absl::Status st = locker->Init();
  if (!st.ok()) return st;
  return std::unique_ptr<Locker>(std::move(locker));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Locker>> NewFloorLocker(const BaselineOptions& options,
                                                       std::string resource) {
  return NewLocker<FloorLocker>(options, std::move(resource));
}

absl::StatusOr<std::unique_ptr<Locker>> NewSequentialLocker(const BaselineOptions& options,
                                                            std::string resource) {
  return NewLocker<SequentialLocker>(options, std::move(resource));
}

absl::StatusOr<std::unique_ptr<Locker>> NewWaitForAllLocker(const BaselineOptions& options,
                                                            std::string resource) {
  return NewLocker<WaitForAllLocker>(options, std::move(resource));
}

}  // namespace redlock::bench
