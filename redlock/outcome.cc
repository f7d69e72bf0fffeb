#include "redlock/outcome.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "redlock/internal/outcome_payload.h"

namespace redlock {
namespace {

constexpr char kTypeUrl[] = "type.googleapis.com/redlock.Outcome";

// Tabs and newlines frame the payload: keep them out of free text.
std::string Clean(absl::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\t' || c == '\n') c = ' ';
  }
  return out;
}

}  // namespace

const char* OutcomeKindName(Outcome::Kind kind) {
  switch (kind) {
    case Outcome::Kind::kSucceeded:
      return "succeeded";
    case Outcome::Kind::kHeldElsewhere:
      return "held_elsewhere";
    case Outcome::Kind::kQuorumUnreachable:
      return "quorum_unreachable";
    case Outcome::Kind::kNoValidityLeft:
      return "no_validity_left";
    case Outcome::Kind::kWaitExpired:
      return "wait_expired";
    case Outcome::Kind::kCancelled:
      return "cancelled";
    case Outcome::Kind::kLeaseLost:
      return "lease_lost";
    case Outcome::Kind::kInternal:
      return "internal";
    case Outcome::Kind::kPlaceLost:
      return "place_lost";
  }
  return "unknown";
}

const char* AnswerName(NodeResult::Answer answer) {
  switch (answer) {
    case NodeResult::Answer::kNone:
      return "none";
    case NodeResult::Answer::kYes:
      return "yes";
    case NodeResult::Answer::kRefused:
      return "refused";
    case NodeResult::Answer::kUnavailable:
      return "unavailable";
    case NodeResult::Answer::kError:
      return "error";
  }
  return "unknown";
}

namespace internal {

void AttachOutcome(absl::Status* status, const Outcome& o) {
  if (status->ok()) return;
  std::string text = absl::StrCat(static_cast<int>(o.kind), "\t", o.quorum, "\t", o.yes, "\t",
                                  o.refused, "\t", o.unavailable, "\t", o.errors, "\t", o.attempts,
                                  "\t", absl::ToInt64Nanoseconds(o.elapsed));
  for (const NodeResult& n : o.nodes) {
    absl::StrAppend(&text, "\n", Clean(n.node), "\t", static_cast<int>(n.answer), "\t",
                    absl::ToInt64Nanoseconds(n.latency), "\t", Clean(n.detail));
  }
  status->SetPayload(kTypeUrl, absl::Cord(text));
}

}  // namespace internal

std::optional<Outcome> GetOutcome(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kTypeUrl);
  if (!payload.has_value()) return std::nullopt;
  std::string text(*payload);
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  std::vector<absl::string_view> head = absl::StrSplit(lines[0], '\t');
  if (head.size() != 8) return std::nullopt;
  int64_t v[8];
  for (int i = 0; i < 8; ++i) {
    if (!absl::SimpleAtoi(head[static_cast<size_t>(i)], &v[i])) return std::nullopt;
  }
  Outcome o;
  o.kind = static_cast<Outcome::Kind>(v[0]);
  o.quorum = static_cast<int>(v[1]);
  o.yes = static_cast<int>(v[2]);
  o.refused = static_cast<int>(v[3]);
  o.unavailable = static_cast<int>(v[4]);
  o.errors = static_cast<int>(v[5]);
  o.attempts = static_cast<int>(v[6]);
  o.elapsed = absl::Nanoseconds(v[7]);
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], absl::MaxSplits('\t', 3));
    if (f.size() != 4) return std::nullopt;
    NodeResult n;
    n.node = std::string(f[0]);
    int answer = 0;
    int64_t latency = 0;
    if (!absl::SimpleAtoi(f[1], &answer) || !absl::SimpleAtoi(f[2], &latency)) {
      return std::nullopt;
    }
    n.answer = static_cast<NodeResult::Answer>(answer);
    n.latency = absl::Nanoseconds(latency);
    n.detail = std::string(f[3]);
    o.nodes.push_back(std::move(n));
  }
  return o;
}

}  // namespace redlock
