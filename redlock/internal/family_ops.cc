#include "redlock/internal/family_ops.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "redlock/election.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/client_impl.h"
#include "redlock/internal/context.h"
#include "redlock/internal/fair_op.h"
#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/semaphore_op.h"
#include "redlock/internal/token.h"
#include "redlock/semaphore.h"

namespace redlock::internal {
namespace {

using Kind = Client::FamilyRequest::Kind;

constexpr int kMaxPermits = Semaphore::kMaxPermits;
constexpr size_t kMaxIdentity = Election::kMaxIdentity;
// Between a leader token's random part and its identity (hex).
constexpr char kIdentitySeparator = '.';

// ---- The shapes (lock_shape.h) ----------------------------------------------------

// The lock key, the readers, the writers' intents and, with fencing, the
// counter (`counters`: the one counter key, or none).
std::vector<std::string> RwKeys(const std::string& w, const std::vector<std::string>& counters) {
  std::vector<std::string> k = {w, absl::StrCat(w, kReadersSuffix),
                                absl::StrCat(w, kWaitingSuffix)};
  if (!counters.empty()) k.push_back(counters[0]);
  return k;
}

class ReadShape final : public AcquireShape {
 public:
  bool custom_scripts() const override { return true; }
  Command Round1(const std::vector<std::string>& keys, const std::vector<std::string>& counters,
                 const std::string& token, int64_t ttl_ms) const override {
    return ScriptCommand(RwReadAcquireScript(), RwKeys(keys[0], counters),
                         {token, std::to_string(ttl_ms)});
  }
  std::vector<std::string> Keys(const std::vector<std::string>& keys,
                                const std::vector<std::string>& counters) const override {
    return RwKeys(keys[0], counters);
  }
  Command Commit(const std::vector<std::string>& keys, const std::vector<std::string>& counters,
                 const std::string& token, const std::vector<uint64_t>& fences) const override {
    return ScriptCommand(RwReadCommitScript(), {absl::StrCat(keys[0], kReadersSuffix), counters[0]},
                         {token, std::to_string(fences[0])});
  }
  Command Cleanup(const std::vector<std::string>& keys, const std::string& token) const override {
    return ReleaseCommand(LeaseKind::kShared, keys, token, "");
  }
  // Strictly above every writer before it, shared with the readers that
  // overlap it (ReaderFence, algorithm.h); written to its quorum, so that
  // every later writer reads at least that and goes above it.
  absl::StatusOr<uint64_t> Fence(const std::vector<uint64_t>& seen) const override {
    return ReaderFence(seen);
  }
  LeaseKind kind() const override { return LeaseKind::kShared; }
  bool shared_wakeups() const override { return true; }
};

class WriteShape final : public AcquireShape {
 public:
  WriteShape(std::string waiter, int64_t intent_ms)
      : waiter_(std::move(waiter)), intent_ms_(intent_ms) {}
  bool custom_scripts() const override { return true; }
  Command Round1(const std::vector<std::string>& keys, const std::vector<std::string>& counters,
                 const std::string& token, int64_t ttl_ms) const override {
    attempts_.fetch_add(1, std::memory_order_relaxed);
    return ScriptCommand(RwWriteAcquireScript(), RwKeys(keys[0], counters),
                         {token, std::to_string(ttl_ms), waiter_, std::to_string(intent_ms_)});
  }
  std::vector<std::string> Keys(const std::vector<std::string>& keys,
                                const std::vector<std::string>& counters) const override {
    return RwKeys(keys[0], counters);
  }
  // Odd: above every reader and writer before it (WriterFence, algorithm.h).
  absl::StatusOr<uint64_t> Fence(const std::vector<uint64_t>& seen) const override {
    return WriterFence(seen);
  }
  // Commit and cleanup: the plain lock's (the writer's key is a lock key).
  int attempts() const { return attempts_.load(std::memory_order_relaxed); }
  const std::string& waiter() const { return waiter_; }

 private:
  const std::string waiter_;
  const int64_t intent_ms_;
  mutable std::atomic<int> attempts_{0};
};

// A leader's token carries its identity, so that any process reading the
// lock key knows who leads; the random part keeps it unguessable. The term
// is the fencing token, whatever Options::fencing says.
class LeaderShape final : public AcquireShape {
 public:
  explicit LeaderShape(std::string identity_hex) : identity_hex_(std::move(identity_hex)) {}
  std::string Token() const override {
    std::string t = NewToken();
    if (!identity_hex_.empty())
      absl::StrAppend(&t, std::string(1, kIdentitySeparator), identity_hex_);
    return t;
  }
  bool force_fencing() const override { return true; }
  // The term counts this resource's elections: its own counter, even when
  // the namespace shares one (Options::FencingCounters::kShared).
  bool own_counters() const override { return true; }

 private:
  const std::string identity_hex_;
};

// How long a waiting writer's intent lives after its latest attempt: a
// waiter attempts again at least every wait_poll_max (and at every
// announcement), so twice that plus two round trips' deadlines.
int64_t IntentMs(const Options& o) {
  return std::max<int64_t>(100,
                           absl::ToInt64Milliseconds(2 * o.wait_poll_max + 2 * o.node_timeout));
}

// ---- Fan-out through NodeCalls ---------------------------------------------------

using Replies = std::vector<absl::StatusOr<Reply>>;

// Sends `command` to every node through NodeCalls (so a NOSCRIPT is loaded
// and resent, a script-free node runs its form or says why not, a cluster
// redirection is followed); `done` (may be null) gets every node's reply in
// node order once all have answered or failed, where the last one
// completes.
void FanOut(OpContext& ctx, const Command& command, absl::AnyInvocable<void(Replies)> done) {
  struct State {
    std::mutex mu;
    Replies replies;
    int left = 0;
    absl::AnyInvocable<void(Replies)> done;
  };
  const int n = ctx.nodes();
  auto state = std::make_shared<State>();
  state->replies.assign(static_cast<size_t>(n), absl::UnavailableError("no reply"));
  state->left = n;
  state->done = std::move(done);
  static const NodeCalls::Judge kAnyAnswer = [](const absl::StatusOr<Reply>&) {
    return Vote{Round::Vote::kYes, ""};
  };
  for (int i = 0; i < n; ++i) {
    ctx.calls().Send(i, command, kAnyAnswer, /*durable=*/false, OnNoScript::kResend,
                     [state, i](NodeCalls::Answer a) {
                       absl::AnyInvocable<void(Replies)> fire;
                       Replies replies;
                       {
                         std::lock_guard<std::mutex> lock(state->mu);
                         state->replies[static_cast<size_t>(i)] = std::move(a.reply);
                         if (--state->left > 0) return;
                         fire = std::move(state->done);
                         replies = std::move(state->replies);
                       }
                       if (fire) fire(std::move(replies));
                     });
  }
}

// ---- Checks -----------------------------------------------------------------------

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kReader:
    case Kind::kWriter:
      return "reader-writer lock";
    case Kind::kPermit:
      return "semaphore";
    case Kind::kLeader:
      return "election";
    case Kind::kFair:
      return "fair lock";
  }
  return "lock";
}

absl::Status Check(const Client::FamilyRequest& r, const Options& o) {
  if (r.resource.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(KindName(r.kind), ": empty resource name"));
  }
  if (r.wait.has_value() && *r.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must be >= 0");
  }
  switch (r.kind) {
    case Kind::kPermit:
      if (r.permits < 1 || r.permits > kMaxPermits) {
        return absl::InvalidArgumentError(absl::StrCat("semaphore \"", r.resource,
                                                       "\": permits must be in [1, ", kMaxPermits,
                                                       "], not ", r.permits));
      }
      // The longest permit name stands for all of them.
      return CheckResource(PermitResource(r.resource, r.permits - 1), o);
    case Kind::kLeader:
      if (r.identity.size() > kMaxIdentity) {
        return absl::InvalidArgumentError(absl::StrCat("election \"", r.resource,
                                                       "\": identity of ", r.identity.size(),
                                                       " bytes (at most ", kMaxIdentity, ")"));
      }
      return CheckResource(r.resource, o);
    case Kind::kFair: {
      absl::StatusOr<absl::Duration> place = CheckPlaceTtl(r.place_ttl, o);
      if (!place.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("fair lock \"", r.resource, "\": ", place.status().message()));
      }
      return CheckResource(r.resource, o);
    }
    default:
      return CheckResource(r.resource, o);
  }
}

Client::FamilyGrant Grant(Lease lease, int slot = -1) {
  Client::FamilyGrant g;
  g.lease = std::move(lease);
  g.slot = slot;
  return g;
}

// ---- Acquisitions -------------------------------------------------------------------

void StartFair(ClientImpl& impl, Client::FamilyRequest r, Client::FamilyCallback done) {
  absl::StatusOr<LockTtl> ttl = CheckTtl(r.ttl, impl.options());
  if (!ttl.ok()) {
    done(ttl.status());
    return;
  }
  FairRequest request;
  request.resource = std::move(r.resource);
  request.ttl = *ttl;
  request.quorum = impl.context().quorum();
  request.stop = std::move(r.stop);
  // Checked by Check.
  request.place_ttl = *CheckPlaceTtl(r.place_ttl, impl.options());
  request.on_queued = std::move(r.on_queued);
  if (r.wait.has_value() && *r.wait > absl::ZeroDuration()) request.wait = r.wait;
  StartFairAcquire(&impl.context(), std::move(request),
                   [done = std::move(done)](absl::StatusOr<Lease> l) mutable {
                     if (!l.ok()) {
                       done(l.status());
                     } else {
                       done(Grant(*std::move(l)));
                     }
                   });
}

void StartPermit(ClientImpl& impl, Client::FamilyRequest r, Client::FamilyCallback done) {
  absl::StatusOr<LockTtl> ttl = CheckTtl(r.ttl, impl.options());
  if (!ttl.ok()) {
    done(ttl.status());
    return;
  }
  SemaphoreRequest request;
  request.resource = std::move(r.resource);
  request.permits = r.permits;
  request.ttl = *ttl;
  request.quorum = impl.context().quorum();
  request.stop = std::move(r.stop);
  if (r.wait.has_value() && *r.wait > absl::ZeroDuration()) request.wait = r.wait;
  StartSemaphoreAcquire(&impl.context(), std::move(request),
                        [done = std::move(done)](absl::StatusOr<std::pair<Lease, int>> p) mutable {
                          if (!p.ok()) {
                            done(p.status());
                          } else {
                            done(Grant(std::move(p->first), p->second));
                          }
                        });
}

}  // namespace

void StartFamily(ClientImpl& impl, Client::FamilyRequest request, Client::FamilyCallback done) {
  absl::Status st = Check(request, impl.options());
  if (!st.ok()) {
    done(st);
    return;
  }
  if (request.kind == Kind::kPermit) {
    StartPermit(impl, std::move(request), std::move(done));
    return;
  }
  if (request.kind == Kind::kFair) {
    StartFair(impl, std::move(request), std::move(done));
    return;
  }
  Client::SetRequest call;
  call.resources = {request.resource};
  call.ttl = request.ttl;
  call.wait = request.wait;
  call.max_attempts = 1;
  call.stop = std::move(request.stop);
  auto single = [](Client::FamilyCallback cb) {
    return [cb = std::move(cb)](absl::StatusOr<std::vector<Lease>> r) mutable {
      if (!r.ok()) {
        cb(r.status());
      } else {
        cb(Grant(std::move((*r)[0])));
      }
    };
  };
  switch (request.kind) {
    case Kind::kReader:
      impl.StartSet(std::move(call), std::make_shared<ReadShape>(), single(std::move(done)));
      return;
    case Kind::kLeader:
      impl.StartSet(std::move(call),
                    std::make_shared<LeaderShape>(absl::BytesToHexString(request.identity)),
                    single(std::move(done)));
      return;
    default:
      break;
  }
  // A writer: with a wait, an intent on the nodes that refuse it keeps new
  // readers out (writer preference); it is withdrawn when the call ends.
  const bool waits = request.wait.has_value() && *request.wait > absl::ZeroDuration();
  auto shape = std::make_shared<WriteShape>(NewToken(), waits ? IntentMs(impl.options()) : 0);
  OpContext* ctx = &impl.context();
  std::string key = ctx->Key(request.resource);
  impl.StartSet(
      std::move(call), shape,
      single([ctx, shape, key, waits,
              done = std::move(done)](absl::StatusOr<Client::FamilyGrant> r) mutable {
        // The intent is on the nodes that refused an attempt: withdrawn
        // everywhere (and announced, so that blocked readers go), unless
        // every node granted the only attempt.
        if (waits &&
            (!r.ok() || shape->attempts() > 1 || r->lease.nodes_granted() < ctx->nodes()) &&
            !ctx->transport().stopping()) {
          Command withdraw =
              ScriptCommand(RwWithdrawScript(), {key, absl::StrCat(key, kWaitingSuffix)},
                            {shape->waiter(), std::string(kReleaseChannelPrefix)});
          withdraw.op = "rw-withdraw";
          FanOut(*ctx, withdraw, nullptr);
        }
        done(std::move(r));
      }));
}

// ---- Views --------------------------------------------------------------------------

namespace {

// Reads a {value, pttl, counter} reply (the inspect script) into `v`.
void ReadLeaderView(const Reply& r, FamilyNodeView* v) {
  if (r.type != Reply::Type::kArray || r.elements.size() != 3) {
    v->status = absl::InternalError(absl::StrCat("unexpected reply ", r.Describe()));
    return;
  }
  v->holder = r.elements[0].str;
  const int64_t pttl = r.elements[1].integer;
  v->holder_ttl_left = pttl > 0 ? absl::Milliseconds(pttl) : absl::ZeroDuration();
  absl::StatusOr<uint64_t> c = ParseCounter(r.elements[2].str);
  if (c.ok()) v->fence_counter = *c;
}

// Reads a {writer, pttl, readers, waiting, counter} reply (RwInspectScript).
void ReadRwView(const Reply& r, FamilyNodeView* v) {
  if (r.type != Reply::Type::kArray || r.elements.size() != 5) {
    v->status = absl::InternalError(absl::StrCat("unexpected reply ", r.Describe()));
    return;
  }
  v->holder = r.elements[0].str;
  const int64_t pttl = r.elements[1].integer;
  v->holder_ttl_left = pttl > 0 ? absl::Milliseconds(pttl) : absl::ZeroDuration();
  v->readers = static_cast<int>(r.elements[2].integer);
  v->waiting_writers = static_cast<int>(r.elements[3].integer);
  absl::StatusOr<uint64_t> c = ParseCounter(r.elements[4].str);
  if (c.ok()) v->fence_counter = *c;
}

// Reads a {holder, pttl, live, {id, ticket, ms left, ...}} reply
// (FairInspectScript).
void ReadFairView(const Reply& r, FamilyNodeView* v) {
  if (r.type != Reply::Type::kArray || r.elements.size() != 4 ||
      r.elements[3].type != Reply::Type::kArray || r.elements[3].elements.size() % 3 != 0) {
    v->status = absl::InternalError(absl::StrCat("unexpected reply ", r.Describe()));
    return;
  }
  v->holder = r.elements[0].str;
  const int64_t pttl = r.elements[1].integer;
  v->holder_ttl_left = pttl > 0 ? absl::Milliseconds(pttl) : absl::ZeroDuration();
  v->waiting = static_cast<int>(r.elements[2].integer);
  const std::vector<Reply>& e = r.elements[3].elements;
  for (size_t i = 0; i + 2 < e.size(); i += 3) {
    FamilyNodeView::Place p;
    p.waiter = e[i].str;
    int64_t ms = 0;
    if (!absl::SimpleAtoi(e[i + 1].str, &p.ticket) || !absl::SimpleAtoi(e[i + 2].str, &ms)) {
      v->status = absl::InternalError(absl::StrCat("unexpected reply ", r.Describe()));
      return;
    }
    p.ttl_left = absl::Milliseconds(ms);
    v->queue.push_back(std::move(p));
  }
}

// Reads an MGET of the permit keys.
void ReadPermitView(const Reply& r, int permits, FamilyNodeView* v) {
  if (r.type != Reply::Type::kArray || r.elements.size() != static_cast<size_t>(permits)) {
    v->status = absl::InternalError(absl::StrCat("unexpected reply ", r.Describe()));
    return;
  }
  for (const Reply& e : r.elements) {
    v->permits.push_back(e.type == Reply::Type::kString ? e.str : std::string());
  }
}

}  // namespace

void StartInspectFamily(OpContext& ctx, const Client::FamilyRequest& request,
                        FamilyViewsCallback done) {
  absl::Status st = Check(request, ctx.options());
  if (!st.ok()) {
    done(st);
    return;
  }
  const std::string key = ctx.Key(request.resource);
  Command command;
  switch (request.kind) {
    case Kind::kReader:
    case Kind::kWriter:
      command = ScriptCommand(RwInspectScript(), RwKeys(key, {ctx.FenceKey(key)}), {});
      command.op = "rw-inspect";
      break;
    case Kind::kLeader:
      // The election's own counter (LeaderShape::own_counters).
      command = ScriptCommand(InspectScript(), {key, absl::StrCat(key, kFenceSuffix)}, {});
      command.op = "inspect";
      break;
    case Kind::kFair:
      command =
          ScriptCommand(FairInspectScript(), FairKeys(key), {std::to_string(kFairViewPlaces)});
      command.op = "fair-inspect";
      break;
    case Kind::kPermit: {
      AppendArrayHeader(&command.payload, 1 + static_cast<size_t>(request.permits));
      AppendBulk(&command.payload, "MGET");
      for (int i = 0; i < request.permits; ++i) {
        AppendBulk(&command.payload, ctx.Key(PermitResource(request.resource, i)));
      }
      command.expect = kExpectArray;
      command.op = "inspect";
      break;
    }
  }
  Transport* t = &ctx.transport();
  const Kind kind = request.kind;
  const int permits = request.permits;
  FanOut(ctx, command, [t, kind, permits, done = std::move(done)](Replies replies) mutable {
    std::vector<FamilyNodeView> out;
    for (size_t i = 0; i < replies.size(); ++i) {
      FamilyNodeView v;
      v.node = t->NodeName(static_cast<int>(i));
      const absl::StatusOr<Reply>& r = replies[i];
      if (!r.ok()) {
        v.status = r.status();
      } else if (r->is_error()) {
        v.status = absl::InternalError(r->str);
      } else if (kind == Kind::kLeader) {
        ReadLeaderView(*r, &v);
      } else if (kind == Kind::kPermit) {
        ReadPermitView(*r, permits, &v);
      } else if (kind == Kind::kFair) {
        ReadFairView(*r, &v);
      } else {
        ReadRwView(*r, &v);
      }
      out.push_back(std::move(v));
    }
    done(std::move(out));
  });
}

}  // namespace redlock::internal
