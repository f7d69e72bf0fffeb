#include "redlock/internal/votes.h"

#include "absl/strings/str_cat.h"

namespace redlock::internal {
namespace {

using V = Round::Vote;

// The vote for a reply that did not arrive or is an error reply; false when
// `r` is a reply to decode.
bool Undecodable(const absl::StatusOr<Reply>& r, Vote* out) {
  if (!r.ok()) {
    out->vote = absl::IsCancelled(r.status())  ? V::kCancelled
                : absl::IsInternal(r.status()) ? V::kInternal
                                               : V::kUnavailable;
    out->detail = std::string(r.status().message());
    return true;
  }
  if (r->is_error()) {
    out->vote = VoteForErrorReply(r->str);
    out->detail = r->str;
    return true;
  }
  return false;
}

Vote Unexpected(const Reply& reply) {
  return Vote{V::kInternal, absl::StrCat("unexpected reply ", reply.Describe())};
}

}  // namespace

Vote AcquireVote(const absl::StatusOr<Reply>& r, AcquireForm form, size_t keys,
                 std::vector<uint64_t>* counters) {
  Vote v;
  if (Undecodable(r, &v)) return v;
  const Reply& reply = *r;
  switch (form) {
    case AcquireForm::kSet:
      if (reply.IsStatus("OK")) return Vote{V::kYes, ""};
      if (reply.is_nil()) return Vote{V::kRefused, ""};
      break;
    case AcquireForm::kScript:
      if (reply.type != Reply::Type::kInteger) break;
      if (reply.integer == 1) return Vote{V::kYes, ""};
      if (reply.integer < 0) return Vote{V::kRefused, ""};
      break;
    case AcquireForm::kFencing: {
      if (reply.type != Reply::Type::kArray || reply.elements.empty() ||
          reply.elements[0].type != Reply::Type::kInteger) {
        break;
      }
      if (reply.elements[0].integer < 0) return Vote{V::kRefused, ""};
      if (reply.elements[0].integer != 1 || reply.elements.size() != keys + 1) break;
      counters->clear();
      for (size_t j = 1; j < reply.elements.size(); ++j) {
        absl::StatusOr<uint64_t> c = ParseCounter(reply.elements[j].str);
        // The key was set; it is released with the attempt or the lease.
        if (!c.ok()) return Vote{V::kInternal, std::string(c.status().message())};
        counters->push_back(*c);
      }
      return Vote{V::kYes, ""};
    }
  }
  return Unexpected(reply);
}

Vote CommitVote(const absl::StatusOr<Reply>& r) { return ExtendVote(r); }

Vote ExtendVote(const absl::StatusOr<Reply>& r) {
  Vote v;
  if (Undecodable(r, &v)) return v;
  if (r->type == Reply::Type::kInteger && r->integer == 1) return Vote{V::kYes, ""};
  if (r->type == Reply::Type::kInteger && r->integer == 0) return Vote{V::kRefused, ""};
  return Unexpected(*r);
}

Vote ReleaseVote(const absl::StatusOr<Reply>& r) {
  Vote v;
  if (Undecodable(r, &v)) return v;
  // Deleted, or already gone: either way not held by us.
  if (r->type == Reply::Type::kInteger) return Vote{V::kYes, ""};
  return Unexpected(*r);
}

void RecordAnswer(const Vote& vote, absl::Duration latency, NodeResult* out) {
  switch (vote.vote) {
    case V::kYes:
      out->answer = NodeResult::Answer::kYes;
      break;
    case V::kRefused:
      out->answer = NodeResult::Answer::kRefused;
      break;
    case V::kUnavailable:
    case V::kCancelled:
      out->answer = NodeResult::Answer::kUnavailable;
      break;
    case V::kInternal:
      out->answer = NodeResult::Answer::kError;
      break;
  }
  out->latency = latency;
  out->detail = vote.detail;
}

Outcome::Kind KindOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return Outcome::Kind::kSucceeded;
    case absl::StatusCode::kAborted:
      return Outcome::Kind::kHeldElsewhere;
    case absl::StatusCode::kUnavailable:
      return Outcome::Kind::kQuorumUnreachable;
    case absl::StatusCode::kDeadlineExceeded:
      return Outcome::Kind::kNoValidityLeft;
    case absl::StatusCode::kCancelled:
      return Outcome::Kind::kCancelled;
    case absl::StatusCode::kFailedPrecondition:
      return Outcome::Kind::kLeaseLost;
    default:
      return Outcome::Kind::kInternal;
  }
}

Outcome MakeOutcome(Outcome::Kind kind, int quorum, std::vector<NodeResult> nodes) {
  Outcome o;
  o.kind = kind;
  o.quorum = quorum;
  for (const NodeResult& n : nodes) {
    switch (n.answer) {
      case NodeResult::Answer::kYes:
        ++o.yes;
        break;
      case NodeResult::Answer::kRefused:
        ++o.refused;
        break;
      case NodeResult::Answer::kUnavailable:
        ++o.unavailable;
        break;
      case NodeResult::Answer::kError:
        ++o.errors;
        break;
      case NodeResult::Answer::kNone:
        break;
    }
  }
  o.nodes = std::move(nodes);
  return o;
}

Vote PermitVote(const absl::StatusOr<Reply>& r, int permits, bool fencing, int* pick,
                uint64_t* counter) {
  *pick = -1;
  if (!r.ok()) {
    return Vote{absl::IsCancelled(r.status()) ? V::kCancelled : V::kUnavailable,
                std::string(r.status().message())};
  }
  if (r->is_error()) return Vote{VoteForErrorReply(r->str), r->str};
  const Reply& reply = *r;
  if (reply.type == Reply::Type::kArray && !reply.elements.empty() &&
      reply.elements[0].type == Reply::Type::kInteger) {
    const int64_t i = reply.elements[0].integer;
    if (i == 0 && reply.elements.size() == 1) return Vote{V::kRefused, ""};
    if (i >= 1 && i <= permits && reply.elements.size() == (fencing ? 2u : 1u)) {
      *pick = static_cast<int>(i - 1);
      if (!fencing) return Vote{V::kYes, ""};
      absl::StatusOr<uint64_t> c = ParseCounter(reply.elements[1].str);
      // The key was set: it is released with the attempt.
      if (!c.ok()) return Vote{V::kInternal, std::string(c.status().message())};
      *counter = *c;
      return Vote{V::kYes, ""};
    }
  }
  return Vote{V::kInternal, absl::StrCat("unexpected reply ", reply.Describe())};
}

}  // namespace redlock::internal
