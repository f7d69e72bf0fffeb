// The lock family's entry point (family_ops.h): a request checked, handed
// to its primitive's operation (a shape on the plain acquisition, the
// semaphore's or the fair lock's own), its grant made, and a waiting
// writer's intent withdrawn when its call ends. The shapes are in
// family_shapes.cc, the views in family_views.cc.

#include "redlock/internal/family_ops.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "redlock/election.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/client_impl.h"
#include "redlock/internal/context.h"
#include "redlock/internal/fair_op.h"
#include "redlock/internal/family_fan_out.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/family_shapes.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/semaphore_op.h"
#include "redlock/internal/token.h"
#include "redlock/semaphore.h"

namespace redlock::internal {
namespace {

using Kind = Client::FamilyRequest::Kind;

constexpr int kMaxPermits = Semaphore::kMaxPermits;
constexpr size_t kMaxIdentity = Election::kMaxIdentity;

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

}  // namespace

absl::Status CheckFamilyRequest(const Client::FamilyRequest& r, const Options& o) {
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

namespace {

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
  // Checked by CheckFamilyRequest.
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
  absl::Status st = CheckFamilyRequest(request, impl.options());
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
      impl.StartSet(std::move(call), ReadShape(), single(std::move(done)));
      return;
    case Kind::kLeader:
      impl.StartSet(std::move(call), LeaderShape(absl::BytesToHexString(request.identity)),
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

}  // namespace redlock::internal
