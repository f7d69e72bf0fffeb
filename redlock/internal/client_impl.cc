#include "redlock/internal/client_impl.h"

#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/family_ops.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/renewal.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/status_macros.h"
#include "redlock/internal/votes.h"

namespace redlock::internal {
namespace {

// Adapts a set callback to the single-lease callback.
LeasesCallback Single(Client::LeaseCallback done) {
  return [done = std::move(done)](absl::StatusOr<std::vector<Lease>> r) mutable {
    if (!r.ok()) {
      done(r.status());
    } else {
      done(std::move((*r)[0]));
    }
  };
}

}  // namespace

ClientImpl::ClientImpl(Options options, std::unique_ptr<Transport> transport, const Clock* clock,
                       std::shared_ptr<ScriptingModes> modes, Blocking* blocking,
                       std::shared_ptr<ServerCommands> commands)
    : ctx_(std::move(options), std::move(transport), clock, std::move(modes), commands),
      blocking_(blocking),
      commands_(std::move(commands)) {}

ClientImpl::~ClientImpl() { ctx_.Shutdown(); }

absl::Status ClientImpl::CheckQuorum(int quorum) const {
  int n = ctx_.nodes();
  if (quorum == 0 || quorum == ctx_.quorum()) return absl::OkStatus();
  if (quorum < 0 || quorum > n || quorum <= n / 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("quorum ", quorum, " is not a majority of the ", n, " nodes"));
  }
  return absl::OkStatus();
}

// ---- The operations ----------------------------------------------------------

absl::StatusOr<AcquireRequest> ClientImpl::CheckSet(SetRequest call,
                                                    std::shared_ptr<const AcquireShape> shape) {
  const Options& o = ctx_.options();
  absl::Status st = call.resources.empty() ? absl::InvalidArgumentError("no resources")
                                           : CheckQuorum(call.quorum);
  if (call.resources.size() == 1) {
    if (st.ok()) st = CheckResource(call.resources[0], o);
  } else {
    std::set<absl::string_view> seen;
    for (const auto& r : call.resources) {
      if (!st.ok()) break;
      st = CheckResource(r, o);
      if (st.ok() && !seen.insert(r).second) {
        st = absl::InvalidArgumentError(absl::StrCat("resource \"", r, "\" is listed twice"));
      }
    }
  }
  if (st.ok() && call.wait.has_value() && *call.wait < absl::ZeroDuration()) {
    st = absl::InvalidArgumentError("wait must be >= 0");
  }
  absl::StatusOr<LockTtl> ttl = CheckTtl(call.ttl, o);
  if (!st.ok() || !ttl.ok()) return !st.ok() ? st : ttl.status();
  AcquireRequest request;
  request.resources = std::move(call.resources);
  request.ttl = *ttl;
  request.quorum = ctx_.QuorumOr(call.quorum);
  request.stop = std::move(call.stop);
  request.fail_fast_unavailable = call.fail_fast_unavailable;
  request.shape = std::move(shape);
  if (call.wait.has_value() && *call.wait > absl::ZeroDuration()) {
    request.wait = call.wait;
  } else {
    // A zero wait is one attempt.
    request.max_attempts = call.wait.has_value() ? 1 : call.max_attempts.value_or(o.max_attempts);
  }
  return request;
}

void ClientImpl::StartSet(SetRequest call, std::shared_ptr<const AcquireShape> shape,
                          LeasesCallback done) {
  absl::StatusOr<AcquireRequest> request = CheckSet(std::move(call), std::move(shape));
  if (!request.ok()) {
    done(request.status());
    return;
  }
  StartAcquire(&ctx_, *std::move(request), std::move(done));
}

void ClientImpl::StartExtendSet(std::vector<Lease> leases, absl::Duration ttl, int quorum,
                                LeasesCallback done) {
  absl::Status st = CheckLeases(leases, "extend");
  if (st.ok()) st = CheckQuorum(quorum);
  absl::StatusOr<LockTtl> checked = CheckTtl(ttl, ctx_.options());
  if (!st.ok() || !checked.ok()) {
    done(!st.ok() ? st : checked.status());
    return;
  }
  StartExtend(&ctx_, std::move(leases), *checked, ctx_.QuorumOr(quorum), std::move(done));
}

void ClientImpl::StartReleaseSet(std::vector<Lease> leases, int quorum, StatusCallback done) {
  absl::Status st = CheckLeases(leases, "release");
  if (st.ok()) st = CheckQuorum(quorum);
  if (!st.ok()) {
    done(st);
    return;
  }
  ctx_.renewals().StopFor(leases[0].token());
  StartRelease(&ctx_, leases, ctx_.QuorumOr(quorum), std::move(done));
}

void ClientImpl::StartReleaseOne(const Lease& lease, StatusCallback done) {
  absl::Status st = CheckLease(lease, "release");
  if (!st.ok()) {
    done(st);
    return;
  }
  ctx_.renewals().StopFor(lease.token());
  internal::StartReleaseOne(&ctx_, lease, ctx_.quorum(), std::move(done));
}

absl::StatusOr<std::unique_ptr<Renewal>> ClientImpl::AutoRenewSet(
    std::vector<Lease> leases, int quorum, RenewOptions options,
    absl::AnyInvocable<void(absl::Status)> on_lost) {
  if (!leases.empty() && !leases[0].has_value()) {
    return absl::InvalidArgumentError("auto-renew: empty lease");
  }
  REDLOCK_RETURN_IF_ERROR(CheckLeases(leases, "auto-renew"));
  REDLOCK_RETURN_IF_ERROR(CheckQuorum(quorum));
  return ctx_.renewals().Start(&ctx_, std::move(leases), ctx_.QuorumOr(quorum), std::move(options),
                               std::move(on_lost));
}

void ClientImpl::AcquireOne(absl::string_view resource, absl::Duration ttl,
                            std::optional<int> attempts, std::optional<absl::Duration> wait,
                            const StopToken& stop, LeaseCallback done) {
  SetRequest call;
  call.resources.emplace_back(resource);  // no list of a temporary copy first
  call.ttl = ttl;
  call.max_attempts = attempts;
  call.wait = wait;
  call.stop = stop;
  absl::StatusOr<AcquireRequest> request = CheckSet(std::move(call), nullptr);
  if (!request.ok()) {
    done(request.status());
    return;
  }
  // The caller's callback given as is (no adapter around it).
  StartAcquireOne(&ctx_, *std::move(request), std::move(done));
}

// ---- The lock family -------------------------------------------------------------

void ClientImpl::AcquireFamilyAsync(FamilyRequest request, FamilyCallback done) {
  StartFamily(*this, std::move(request), ToUser(std::move(done)));
}

absl::StatusOr<Client::FamilyGrant> ClientImpl::AcquireFamily(FamilyRequest request) {
  return Block<absl::StatusOr<FamilyGrant>>(
      [&](FamilyCallback done) { StartFamily(*this, std::move(request), std::move(done)); });
}

absl::StatusOr<std::vector<FamilyNodeView>> ClientImpl::InspectFamily(FamilyRequest request) {
  using Views = absl::StatusOr<std::vector<FamilyNodeView>>;
  return Block<Views>([&](absl::AnyInvocable<void(Views)> done) {
    StartInspectFamily(ctx_, request, std::move(done));
  });
}

// ---- Sets of resources -----------------------------------------------------------

absl::StatusOr<std::vector<Lease>> ClientImpl::AcquireSet(SetRequest request) {
  return Block<absl::StatusOr<std::vector<Lease>>>(
      [&](LeasesCallback done) { StartSet(std::move(request), nullptr, std::move(done)); });
}

void ClientImpl::AcquireSetAsync(SetRequest request, LeasesCallback done) {
  StartSet(std::move(request), nullptr, ToUser(std::move(done)));
}

absl::StatusOr<std::vector<Lease>> ClientImpl::ExtendSet(std::vector<Lease> leases,
                                                         absl::Duration ttl, int quorum) {
  return Block<absl::StatusOr<std::vector<Lease>>>([&](LeasesCallback done) {
    StartExtendSet(std::move(leases), ttl, quorum, std::move(done));
  });
}

absl::Status ClientImpl::ReleaseSet(std::vector<Lease> leases, int quorum) {
  return Block<absl::Status>(
      [&](StatusCallback done) { StartReleaseSet(std::move(leases), quorum, std::move(done)); });
}

// ---- Public asynchronous forms: user callbacks run on the I/O thread -----------

void ClientImpl::TryAcquireAsync(absl::string_view resource, absl::Duration ttl,
                                 LeaseCallback done) {
  AcquireOne(resource, ttl, 1, std::nullopt, StopToken(), ToUser(std::move(done)));
}

void ClientImpl::AcquireAsync(absl::string_view resource, absl::Duration ttl, LeaseCallback done) {
  AcquireOne(resource, ttl, std::nullopt, std::nullopt, StopToken(), ToUser(std::move(done)));
}

void ClientImpl::AcquireAsync(absl::string_view resource, absl::Duration ttl, absl::Duration wait,
                              const StopToken& stop, LeaseCallback done) {
  AcquireOne(resource, ttl, std::nullopt, wait, stop, ToUser(std::move(done)));
}

void ClientImpl::ExtendAsync(const Lease& lease, absl::Duration ttl, LeaseCallback done) {
  StartExtendSet({lease}, ttl, 0, Single(ToUser(std::move(done))));
}

void ClientImpl::ReleaseAsync(const Lease& lease, StatusCallback done) {
  StartReleaseOne(lease, ToUser(std::move(done)));
}

// ---- Public blocking forms -----------------------------------------------------------

absl::StatusOr<Lease> ClientImpl::TryAcquire(absl::string_view resource, absl::Duration ttl) {
  return Block<absl::StatusOr<Lease>>([&](LeaseCallback cb) {
    AcquireOne(resource, ttl, 1, std::nullopt, StopToken(), std::move(cb));
  });
}

absl::StatusOr<Lease> ClientImpl::Acquire(absl::string_view resource, absl::Duration ttl) {
  return Block<absl::StatusOr<Lease>>([&](LeaseCallback cb) {
    AcquireOne(resource, ttl, std::nullopt, std::nullopt, StopToken(), std::move(cb));
  });
}

absl::StatusOr<Lease> ClientImpl::Acquire(absl::string_view resource, absl::Duration ttl,
                                          absl::Duration wait, const StopToken& stop) {
  return Block<absl::StatusOr<Lease>>([&](LeaseCallback cb) {
    AcquireOne(resource, ttl, std::nullopt, wait, stop, std::move(cb));
  });
}

absl::StatusOr<Lease> ClientImpl::Extend(const Lease& lease, absl::Duration ttl) {
  return Block<absl::StatusOr<Lease>>(
      [&](LeaseCallback cb) { StartExtendSet({lease}, ttl, 0, Single(std::move(cb))); });
}

absl::Status ClientImpl::Release(const Lease& lease) {
  return Block<absl::Status>([&](StatusCallback cb) { StartReleaseOne(lease, std::move(cb)); });
}

absl::StatusOr<std::unique_ptr<Renewal>> ClientImpl::AutoRenew(
    const Lease& lease, RenewOptions options, absl::AnyInvocable<void(absl::Status)> on_lost) {
  return AutoRenewSet({lease}, 0, std::move(options), std::move(on_lost));
}

// ---- Introspection -------------------------------------------------------------------

absl::StatusOr<std::vector<NodeView>> ClientImpl::Inspect(absl::string_view resource) {
  REDLOCK_RETURN_IF_ERROR(CheckResource(resource, ctx_.options()));
  struct State {
    std::mutex mu;
    std::vector<NodeView> views;
    int left;
  };
  auto state = std::make_shared<State>();
  const int n = ctx_.nodes();
  state->views.resize(static_cast<size_t>(n));
  state->left = n;
  std::string key = ctx_.Key(resource);
  Command command = ScriptCommand(InspectScript(), {key, ctx_.FenceKey(key)}, {});
  command.op = "inspect";
  // Where the key and its counter cannot go in one command (a cluster node
  // and a key without a hash tag: fencing is refused there), the second key
  // only shares the key's slot, and holds nothing.
  Command apart = ScriptCommand(InspectScript(), {key, absl::StrCat("{", key, "}")}, {});
  apart.op = "inspect";
  const std::vector<std::string> both = {key, ctx_.FenceKey(key)};
  return Block<absl::StatusOr<std::vector<NodeView>>>(
      [&](absl::AnyInvocable<void(absl::StatusOr<std::vector<NodeView>>)> done) {
        auto shared_done = std::make_shared<decltype(done)>(std::move(done));
        for (int i = 0; i < n; ++i) {
          state->views[static_cast<size_t>(i)].node = ctx_.transport().NodeName(i);
          // A read: after NOSCRIPT it is sent again, in the EVAL form.
          auto judge = [](const absl::StatusOr<Reply>&) { return Vote{}; };
          ctx_.calls().Send(
              i, ctx_.KeysProblemOn(i, both).empty() ? command : apart, judge, /*durable=*/false,
              OnNoScript::kResend, [state, shared_done, i](NodeCalls::Answer a) {
                const absl::StatusOr<Reply>& r = a.reply;
                NodeView& v = state->views[static_cast<size_t>(i)];
                if (!r.ok()) {
                  v.status = r.status();
                } else if (r->is_error()) {
                  v.status = absl::Status(VoteForErrorReply(r->str) == Round::Vote::kUnavailable
                                              ? absl::StatusCode::kUnavailable
                                              : absl::StatusCode::kInternal,
                                          r->str);
                } else if (r->type != Reply::Type::kArray || r->elements.size() != 3) {
                  v.status = absl::InternalError(absl::StrCat("unexpected reply ", r->Describe()));
                } else {
                  v.token = r->elements[0].str;
                  v.held = !v.token.empty();
                  int64_t pttl = r->elements[1].integer;
                  v.ttl_left = pttl > 0 ? absl::Milliseconds(pttl) : absl::ZeroDuration();
                  absl::StatusOr<uint64_t> c = ParseCounter(r->elements[2].str);
                  if (c.ok()) v.fence_counter = *c;
                }
                std::vector<NodeView> views;
                {
                  std::lock_guard<std::mutex> lock(state->mu);
                  if (--state->left > 0) return;
                  views = std::move(state->views);
                }
                (*shared_done)(std::move(views));
              });
        }
      });
}

std::vector<NodeHealth> ClientImpl::Health() const {
  std::vector<NodeHealth> out = ctx_.transport().Health();
  ctx_.calls().AddHealth(&out);
  if (commands_ != nullptr) {
    for (size_t i = 0; i < out.size() && static_cast<int>(i) < commands_->size(); ++i) {
      const NodeCommands c = commands_->Get(static_cast<int>(i));
      out[i].commands_known = c.known;
      out[i].has_delifeq = c.delifeq;
      out[i].has_delex_ifeq = c.delex;
      out[i].has_set_ifeq = c.set_ifeq;
    }
  }
  return out;
}

}  // namespace redlock::internal
