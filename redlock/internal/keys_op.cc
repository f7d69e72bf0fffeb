#include "redlock/internal/keys_op.h"

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
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

  // An extension of `leases`.
  KeysOp(OpContext* ctx, std::vector<Lease> leases, const LockTtl& ttl, int quorum,
         LeasesCallback done)
      : ctx_(ctx),
        kind_(Kind::kExtend),
        leases_(std::move(leases)),
        ttl_(ttl),
        lease_kind_(LeaseFactory::Kind(leases_[0])),
        extended_(std::move(done)),
        round_(ctx->nodes(), quorum),
        nodes_(static_cast<size_t>(ctx->nodes())) {
    keys_.reserve(leases_.size());
    for (const Lease& l : leases_) keys_.push_back(ctx_->Key(l.resource()));
  }

  // A release of the `count` leases at `leases`, read here and not kept:
  // the op holds only what the release needs (its command, built here).
  KeysOp(OpContext* ctx, const Lease* leases, size_t count, int quorum, StatusCallback done)
      : ctx_(ctx),
        kind_(Kind::kRelease),
        ttl_{},
        lease_kind_(LeaseFactory::Kind(leases[0])),
        connections_(LeaseFactory::AllConnections(leases[0])),
        released_(std::move(done)),
        round_(ctx->nodes(), quorum),
        nodes_(static_cast<size_t>(ctx->nodes())) {
    const Lease& first = leases[0];
    release_.channel_prefix = kReleaseChannelPrefix;
    release_.ttl = first.ttl();
    release_.expires = first.acquired_at() + absl::ToChronoNanoseconds(release_.ttl);
    const std::string& prefix = ctx_->options().key_prefix;
    if (count == 1 && lease_kind_ == LeaseKind::kPlain) {
      // ScriptRelease's command for the one key, encoded from views of the
      // lease (no key, channel, token or key list built first); the
      // resource's name stays readable in it, for the messages.
      size_t key_at = 0;
      release_.command = ScriptCommandOfPieces(ReleaseOneScript(), 1,
                                               {{prefix, first.resource()},
                                                {first.token()},
                                                {kReleaseChannelPrefix, prefix, first.resource()}},
                                               &key_at);
      resource_at_ = key_at + prefix.size();
      resource_size_ = first.resource().size();
      return;
    }
    release_.keys.reserve(count);
    for (size_t i = 0; i < count; ++i) release_.keys.push_back(ctx_->Key(leases[i].resource()));
    release_.token = first.token();
    release_.command =
        lease_kind_ != LeaseKind::kPlain
            ? ReleaseCommand(lease_kind_, release_.keys, release_.token, kReleaseChannelPrefix)
            : ScriptRelease(release_);
  }

  void Start() {
    {
      // Before the first reply can arrive; the sends themselves go out
      // without mu_ (they may write to a socket).
      std::lock_guard<std::mutex> lock(mu_);
      start_ = ctx_->clock().Now();
    }
    NodeCalls& calls = ctx_->calls();
    auto self = shared_from_this();
    if (kind_ == Kind::kExtend) {
      // A reader's lease lives in its lock's readers set (lock_shape.h).
      Command command = ExtendCommand(lease_kind_, keys_, leases_[0].token(), ttl_.ms);
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
    // The release shared with the retries is the op's own (no allocation of
    // its own): it keeps the op alive while a retry holds it. release_ is
    // not written after this point.
    std::shared_ptr<const KeysRelease> release(self, &release_);
    absl::InlinedVector<int, kInlineNodes> never_set;
    for (int i = 0; i < ctx_->nodes(); ++i) {
      // Behind the SET on its connection; a release that does not get
      // through is sent again (NodeCalls::Release).
      std::optional<ConnectionId> set_on = LeaseFactory::ConnectionIn(connections_, i);
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
      if (decided_) break;
      RecordLocked(i, Vote{Round::Vote::kYes, ""}, std::move(lock));
    }
  }

 private:
  // The per-node state lives in the op for up to this many nodes.
  static constexpr size_t kInlineNodes = 7;

  // The resources' names, only when a message or the observer needs them.
  std::vector<std::string> Resources() const {
    std::vector<std::string> resources;
    if (kind_ == Kind::kExtend) {
      resources.reserve(leases_.size());
      for (const Lease& l : leases_) resources.push_back(l.resource());
    } else if (release_.keys.empty()) {
      resources.emplace_back(release_.command.payload, resource_at_, resource_size_);
    } else {
      const size_t prefix = ctx_->options().key_prefix.size();
      resources.reserve(release_.keys.size());
      for (const std::string& key : release_.keys) resources.push_back(key.substr(prefix));
    }
    return resources;
  }

  // Names the call in messages ("release \"r\""), only when one is needed.
  std::string What() const {
    return absl::StrCat(kind_ == Kind::kRelease ? "release " : "extend ",
                        DescribeResources(Resources()));
  }
  struct NodeState {
    NodeResult result;  // for the Outcome (its node named only there)
  };

  // A node's vote (for an extension with Options::durability, once its
  // replicas confirmed it, or did not).
  void OnReply(int node, NodeCalls::Answer a) {
    std::unique_lock<std::mutex> lock(mu_);
    if (decided_) return;
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
    decided_ = true;
    LeasesCallback extended = std::move(extended_);
    extended_ = nullptr;
    StatusCallback released = std::move(released_);
    released_ = nullptr;
    // The outcome goes with a failure and to the observer; a success with
    // no observer needs none (its per-node list was an allocation per call).
    Outcome reported;
    if (!result->ok() || ctx_->observer() != nullptr) reported = OutcomeLocked(&*result);
    lock.unlock();
    // The observer runs outside mu_, like the callback.
    Observe(result->status(), std::move(reported));
    if (kind_ == Kind::kRelease) {
      released(result->status());
    } else {
      extended(*std::move(result));
    }
  }

  // The round's outcome, attached to a failure.
  Outcome OutcomeLocked(absl::StatusOr<std::vector<Lease>>* result) {
    std::vector<NodeResult> results;
    results.reserve(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) {
      results.push_back(nodes_[i].result);
      results.back().node = ctx_->transport().NodeName(static_cast<int>(i));
    }
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
    if (kind_ == Kind::kRelease) {
      observer->OnRelease(ReleaseEvent{Resources(), status, std::move(outcome)});
    } else {
      observer->OnExtend(ExtendEvent{Resources(), status, std::move(outcome)});
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
  // An extension's: the leases, their new ttl and their keys.
  const std::vector<Lease> leases_;
  const LockTtl ttl_;
  std::vector<std::string> keys_;
  const LeaseKind lease_kind_;
  // A release's: what the retries share (keys and token left empty when
  // the command was encoded from views: the resource's name is then
  // payload[resource_at_, +resource_size_)), and the SETs' connections.
  KeysRelease release_;
  size_t resource_at_ = 0;
  size_t resource_size_ = 0;
  LeaseFactory::Connections connections_;

  std::mutex mu_;
  bool decided_ = false;
  LeasesCallback extended_;  // an extension's callback
  StatusCallback released_;  // a release's callback
  Clock::TimePoint start_;
  Round round_;
  absl::InlinedVector<NodeState, kInlineNodes> nodes_;
};

}  // namespace

absl::Status CheckLease(const Lease& lease, absl::string_view what) {
  if (!lease.has_value()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty lease"));
  return absl::OkStatus();
}

absl::Status CheckLeases(const std::vector<Lease>& leases, absl::string_view what) {
  if (leases.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no leases"));
  std::set<std::string> seen;
  for (const Lease& l : leases) {
    if (absl::Status st = CheckLease(l, what); !st.ok()) return st;
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
  auto op = std::make_shared<KeysOp>(ctx, std::move(leases), ttl, quorum, std::move(done));
  op->Start();
}

void StartRelease(OpContext* ctx, const std::vector<Lease>& leases, int quorum,
                  StatusCallback done) {
  auto op = std::make_shared<KeysOp>(ctx, leases.data(), leases.size(), quorum, std::move(done));
  op->Start();
}

void StartReleaseOne(OpContext* ctx, const Lease& lease, int quorum, StatusCallback done) {
  auto op = std::make_shared<KeysOp>(ctx, &lease, 1, quorum, std::move(done));
  op->Start();
}

}  // namespace redlock::internal
