#include "redlock/internal/keys_op.h"

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/lease_factory.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/outcome_payload.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/votes.h"
#include "redlock/observer.h"

namespace redlock::internal {
namespace {

using Decision = Round::Outcome;

class KeysOp : public std::enable_shared_from_this<KeysOp> {
 public:
  enum class Kind { kRelease, kExtend };

  KeysOp(OpContext* ctx, Kind kind, std::vector<Lease> leases, const LockTtl& ttl, int quorum,
         LeasesCallback done)
      : ctx_(ctx),
        kind_(kind),
        leases_(std::move(leases)),
        ttl_(ttl),
        done_(std::move(done)),
        round_(ctx->nodes(), quorum),
        nodes_(static_cast<size_t>(ctx->nodes())) {
    keys_.reserve(leases_.size());
    for (const Lease& l : leases_) keys_.push_back(ctx_->Key(l.resource()));
    for (int i = 0; i < ctx_->nodes(); ++i) {
      nodes_[static_cast<size_t>(i)].result.node = ctx_->transport().NodeName(i);
    }
  }

  void Start() {
    {
      // Before the first reply can arrive; the sends themselves go out
      // without mu_ (they may write to a socket).
      std::lock_guard<std::mutex> lock(mu_);
      start_ = ctx_->clock().Now();
    }
    const std::string& token = leases_[0].token();
    NodeCalls& calls = ctx_->calls();
    auto self = shared_from_this();
    // A reader's lease lives in its lock's readers set (lock_shape.h).
    const LeaseKind lease_kind = LeaseFactory::Kind(leases_[0]);
    if (kind_ == Kind::kExtend) {
      Command command = ExtendCommand(lease_kind, keys_, token, ttl_.ms);
      command.op = "extend";
      for (int i = 0; i < ctx_->nodes(); ++i) {
        // An extension counts only where the replicas have it (durable); one
        // that got NOSCRIPT may run later than sent (it never creates a
        // key): sent again with its own confirmation.
        calls.Send(
            i, command, ExtendVote, /*durable=*/true, OnNoScript::kResend,
            [self](NodeCalls::Answer a) { self->OnReply(static_cast<int>(a.tag), std::move(a)); },
            static_cast<uint64_t>(i));
      }
      return;
    }
    auto release = std::make_shared<KeysRelease>();
    // The op needs its keys no more: the release (shared with the retries)
    // takes them.
    release->keys = std::move(keys_);
    release->token = token;
    release->channel_prefix = kReleaseChannelPrefix;
    release->ttl = leases_[0].ttl();
    release->expires = leases_[0].acquired_at() + absl::ToChronoNanoseconds(release->ttl);
    release->command = lease_kind != LeaseKind::kPlain
                           ? ReleaseCommand(lease_kind, release->keys, token, kReleaseChannelPrefix)
                           : ScriptRelease(*release);
    std::vector<int> never_set;
    for (int i = 0; i < ctx_->nodes(); ++i) {
      // Behind the SET on its connection; a release that does not get
      // through is sent again (NodeCalls::Release).
      std::optional<ConnectionId> set_on = LeaseFactory::ConnectionOf(leases_[0], i);
      if (set_on == ConnectionId{0}) {
        never_set.push_back(i);
        continue;
      }
      // The callback holds only the op (inline in AnyInvocable): the node
      // comes back as the answer's tag.
      calls.Release(
          i, set_on.value_or(0), release,
          [self](NodeCalls::Answer a) { self->OnReply(static_cast<int>(a.tag), std::move(a)); },
          static_cast<uint64_t>(i));
    }
    // A node that never took the SET holds no key: released, without
    // asking it (a node behind a breaker or whose replicas lag would only
    // queue it).
    for (int i : never_set) {
      std::unique_lock<std::mutex> lock(mu_);
      if (!done_) break;
      RecordLocked(i, Vote{Round::Vote::kYes, ""}, std::move(lock));
    }
  }

 private:
  // Names the call in messages ("release \"r\""), only when one is needed.
  std::string What() const {
    std::vector<std::string> resources;
    resources.reserve(leases_.size());
    for (const Lease& l : leases_) resources.push_back(l.resource());
    return absl::StrCat(kind_ == Kind::kRelease ? "release " : "extend ",
                        DescribeResources(resources));
  }
  struct NodeState {
    NodeResult result;  // for the Outcome
  };

  // A node's vote (for an extension with Options::durability, once its
  // replicas confirmed it, or did not).
  void OnReply(int node, NodeCalls::Answer a) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!done_) return;  // decided already
    RecordLocked(node, std::move(a.vote), std::move(lock));
  }

  // Counts the node's vote; once the round is decided, completes the
  // operation outside mu_.
  void RecordLocked(int node, Vote v, std::unique_lock<std::mutex> lock) {
    RecordAnswer(v, absl::FromChrono(ctx_->clock().Now() - start_),
                 &nodes_[static_cast<size_t>(node)].result);
    Decision outcome = round_.Record(ctx_->transport().NodeName(node), v.vote, v.detail);
    if (outcome == Decision::kPending) return;
    std::optional<absl::StatusOr<std::vector<Lease>>> result;
    if (kind_ == Kind::kRelease) {
      if (outcome == Decision::kSucceeded) {
        result.emplace(std::vector<Lease>{});
      } else {
        result.emplace(round_.Failure(What(), "confirmed", "", absl::StatusCode::kUnavailable));
      }
    } else if (outcome == Decision::kFailed) {
      // Lost only when the refusals alone leave fewer nodes than a quorum
      // that may still hold the token. Nodes that did not answer may hold
      // it: with them a quorum may still, and the lease is not known lost.
      const bool lost = round_.refused() >= round_.nodes() - round_.quorum() + 1;
      result.emplace(round_.Failure(
          What(), "still held the lease", "lease lost",
          lost ? absl::StatusCode::kFailedPrecondition : absl::StatusCode::kUnavailable));
    } else {
      result.emplace(Extended());
    }
    LeasesCallback done = std::move(done_);
    done_ = nullptr;
    // The outcome goes with a failure and to the observer; a success with
    // no observer needs none (its per-node list was an allocation per call).
    Outcome reported;
    if (!result->ok() || ctx_->observer() != nullptr) reported = OutcomeLocked(&*result);
    lock.unlock();
    // The observer runs outside mu_, like the callback.
    Observe(result->status(), std::move(reported));
    done(*std::move(result));
  }

  // The round's outcome, attached to a failure.
  Outcome OutcomeLocked(absl::StatusOr<std::vector<Lease>>* result) {
    std::vector<NodeResult> results;
    results.reserve(nodes_.size());
    for (const NodeState& s : nodes_) results.push_back(s.result);
    Outcome outcome = MakeOutcome(KindOf(result->status()), round_.quorum(), std::move(results));
    outcome.attempts = 1;
    outcome.elapsed = absl::FromChrono(ctx_->clock().Now() - start_);
    if (!result->ok()) {
      absl::Status st = result->status();
      AttachOutcome(&st, outcome);
      *result = std::move(st);
    }
    return outcome;
  }

  void Observe(const absl::Status& status, Outcome outcome) {
    Observer* observer = ctx_->observer();
    if (observer == nullptr) return;
    std::vector<std::string> resources;
    for (const Lease& l : leases_) resources.push_back(l.resource());
    if (kind_ == Kind::kRelease) {
      observer->OnRelease(ReleaseEvent{std::move(resources), status, std::move(outcome)});
    } else {
      observer->OnExtend(ExtendEvent{std::move(resources), status, std::move(outcome)});
    }
  }

  absl::StatusOr<std::vector<Lease>> Extended() {
    Clock::TimePoint now = ctx_->clock().Now();
    absl::Duration elapsed = absl::FromChrono(now - start_);
    absl::Duration validity = Validity(ttl_.ttl, elapsed, ttl_.drift);
    if (validity <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          What(), ": ", round_.Summary("still held the lease", "lease lost"),
          " but no validity was left: the extend took ", absl::FormatDuration(elapsed)));
    }
    Clock::TimePoint valid_until = now + absl::ToChronoNanoseconds(validity);
    std::vector<Lease> out;
    out.reserve(leases_.size());
    for (const Lease& l : leases_) {
      out.push_back(LeaseFactory::Make(l.resource(), l.token(), ttl_.ttl, start_,
                                       LeaseFactory::AllConnections(l), valid_until, round_.yes(),
                                       l.fencing_token(), LeaseFactory::Kind(l)));
    }
    return out;
  }

  OpContext* const ctx_;
  const Kind kind_;
  const std::vector<Lease> leases_;
  const LockTtl ttl_;
  std::vector<std::string> keys_;

  std::mutex mu_;
  LeasesCallback done_;
  Clock::TimePoint start_;
  Round round_;
  std::vector<NodeState> nodes_;
};

}  // namespace

absl::Status CheckLeases(const std::vector<Lease>& leases, absl::string_view what) {
  if (leases.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no leases"));
  std::set<std::string> seen;
  for (const Lease& l : leases) {
    if (!l.has_value()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty lease"));
    if (l.shared() && leases.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": a shared lease is held alone"));
    }
    if (LeaseFactory::Kind(l) == LeaseKind::kFair && leases.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": a fair lease is held alone"));
    }
    if (l.token() != leases[0].token()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": leases of different acquisitions"));
    }
    // One lease cannot repeat a name: no set of names for it.
    if (leases.size() > 1 && !seen.insert(l.resource()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": resource \"", l.resource(), "\" twice"));
    }
  }
  return absl::OkStatus();
}

void StartExtend(OpContext* ctx, std::vector<Lease> leases, const LockTtl& ttl, int quorum,
                 LeasesCallback done) {
  auto op = std::make_shared<KeysOp>(ctx, KeysOp::Kind::kExtend, std::move(leases), ttl, quorum,
                                     std::move(done));
  op->Start();
}

void StartRelease(OpContext* ctx, std::vector<Lease> leases, int quorum, StatusCallback done) {
  auto op = std::make_shared<KeysOp>(
      ctx, KeysOp::Kind::kRelease, std::move(leases), LockTtl{}, quorum,
      [done = std::move(done)](absl::StatusOr<std::vector<Lease>> r) mutable { done(r.status()); });
  op->Start();
}

}  // namespace redlock::internal
