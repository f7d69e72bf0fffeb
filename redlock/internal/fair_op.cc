// A fair acquisition's entry (fair_op.h): the place's ttl checked, a
// node's answer decoded into its vote, the operation built (its own wake-up
// channel) and started, and the hooks the attempt loop asks of it. The
// attempts are in fair_attempts.cc, the place in fair_place.cc.

#include "redlock/internal/fair_op.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/fair_op_impl.h"
#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/token.h"

namespace redlock::internal {

absl::StatusOr<absl::Duration> CheckPlaceTtl(absl::Duration place_ttl, const Options& options) {
  if (place_ttl == absl::ZeroDuration()) return kDefaultPlaceTtl;
  const absl::Duration floor = std::max(kMinPlaceTtl, 3 * options.node_timeout);
  if (place_ttl < floor || place_ttl > absl::Milliseconds(kMaxTtlMs)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "place_ttl ", absl::FormatDuration(place_ttl), " is out of range: at least ",
        absl::FormatDuration(floor), " (30ms and 3 x node_timeout, so that a heartbeat every ",
        "third of it can come back), at most 2^40 ms"));
  }
  return absl::Milliseconds(absl::ToInt64Milliseconds(place_ttl));
}

namespace {

using V = Round::Vote;

absl::StatusOr<uint64_t> ParseTicket(const Reply& r) {
  uint64_t t = 0;
  if (r.type != Reply::Type::kString || !absl::SimpleAtoi(r.str, &t)) {
    return absl::InternalError(absl::StrCat("a ticket that is no number: ", r.Describe()));
  }
  return t;
}

}  // namespace

Vote FairVote(const absl::StatusOr<Reply>& r, bool fencing, FairReply* out) {
  *out = FairReply{};
  if (!r.ok()) {
    return Vote{absl::IsCancelled(r.status()) ? V::kCancelled : V::kUnavailable,
                std::string(r.status().message())};
  }
  if (r->is_error()) return Vote{VoteForErrorReply(r->str), r->str};
  const Reply& reply = *r;
  if (reply.type != Reply::Type::kArray || reply.elements.size() < 2 ||
      reply.elements[0].type != Reply::Type::kInteger) {
    return Vote{V::kInternal, absl::StrCat("unexpected reply ", reply.Describe())};
  }
  const int64_t code = reply.elements[0].integer;
  absl::StatusOr<uint64_t> max = ParseTicket(reply.elements[1]);
  if (!max.ok()) return Vote{V::kInternal, std::string(max.status().message())};
  out->code = code;
  out->max_ticket = *max;
  if (code < 0 && code >= -3 && reply.elements.size() == 2) return Vote{V::kRefused, ""};
  if (code == 1 && reply.elements.size() == (fencing ? 3u : 2u)) {
    if (!fencing) return Vote{V::kYes, ""};
    absl::StatusOr<uint64_t> c = ParseCounter(reply.elements[2].str);
    // The key was set: it goes with the attempt's cleanup.
    if (!c.ok()) return Vote{V::kInternal, std::string(c.status().message())};
    out->counter = *c;
    return Vote{V::kYes, ""};
  }
  out->code = 0;
  return Vote{V::kInternal, absl::StrCat("unexpected reply ", reply.Describe())};
}

FairOp::FairOp(OpContext* ctx, FairRequest request, std::string waiter, FairCallback done)
    : AttemptLoop(ctx,
                  {.keys = {ctx->Key(request.resource)},
                   .ttl = request.ttl.ttl,
                   .wait = request.wait,
                   .max_attempts = 1,
                   .stop = request.stop,
                   // Its own channel: only the head is woken.
                   .watch_channels = {absl::StrCat(kFairChannelPrefix, ctx->Key(request.resource),
                                                   ":", waiter)}},
                  [this, done = std::move(done)](absl::StatusOr<Lease> r) mutable {
                    Finish(r.ok());
                    done(std::move(r));
                  }),
      request_(std::move(request)),
      key_(keys_[0]),
      fair_keys_(FairKeys(key_)),
      fencing_(ctx->options().fencing),
      counter_(fencing_ ? ctx->FenceKey(key_) : std::string()),
      waiter_(std::move(waiter)),
      quorum_(fencing_ ? FencedQuorum(ctx->nodes(), request_.quorum,
                                      ctx->options().fencing_lost_counters)
                       : request_.quorum),
      place_quorum_(request_.quorum),
      ttl_ms_(request_.ttl.ms),
      drift_(request_.ttl.drift),
      place_ttl_(request_.place_ttl),
      place_drift_(DriftAllowance(place_ttl_, ctx->options())),
      period_(std::max(place_ttl_ / 3, absl::Milliseconds(1))),
      placed_(static_cast<size_t>(ctx->nodes()), false),
      absent_(static_cast<size_t>(ctx->nodes()), false),
      round_(ctx->nodes(), quorum_) {}

// A failed attempt's cleanup keeps the place (fair-release, "cleanup").
void FairOp::FillRelease(KeysRelease* release) const {
  release->command = ScriptCommand(FairReleaseScript(), fair_keys_,
                                   {token_, std::string(kFairChannelPrefix), "cleanup"});
}

void FairOp::FillEvent(const absl::StatusOr<Lease>& result, AcquireEvent* event) const {
  event->resources = {request_.resource};
  if (result.ok()) event->fencing_token = result->fencing_token();
}

void StartFairAcquire(OpContext* ctx, FairRequest request, FairCallback done) {
  // The lock key, its queue, the expiries (and the counter) go in one
  // script: every node must take them in one command (a Redis Cluster's
  // keys share a hash slot: scheme.h); refused before anything is sent.
  const std::string key = ctx->Key(request.resource);
  std::vector<std::string> keys = FairKeys(key);  // the lock key first
  if (ctx->options().fencing) keys.push_back(ctx->FenceKey(key));
  const std::string problem = ctx->KeysProblem(keys);
  if (!problem.empty()) {
    done(absl::InvalidArgumentError(
        absl::StrCat("fair acquire \"", request.resource, "\": ", problem)));
    return;
  }
  auto op = std::make_shared<FairOp>(ctx, std::move(request), NewToken(), std::move(done));
  op->Start();
}

}  // namespace redlock::internal
