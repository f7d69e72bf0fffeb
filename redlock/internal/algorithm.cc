#include "redlock/internal/algorithm.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace redlock::internal {
namespace {

constexpr size_t kMaxErrors = 3;

std::string Plural(int n, absl::string_view word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

}  // namespace

absl::StatusOr<LockTtl> CheckTtl(absl::Duration ttl, const Options& options) {
  if (ttl == absl::InfiniteDuration() || ttl == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("ttl must be finite");
  }
  int64_t ms = absl::ToInt64Milliseconds(ttl);
  if (ms > kMaxTtlMs) {
    return absl::InvalidArgumentError(absl::StrCat("ttl ", absl::FormatDuration(ttl),
                                                   " is above the maximum of ", kMaxTtlMs, "ms"));
  }
  absl::Duration whole = absl::Milliseconds(ms);
  absl::Duration drift = DriftAllowance(whole, options);
  if (whole <= drift) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ttl ", absl::FormatDuration(ttl), " is not larger than the clock drift allowance ",
        absl::FormatDuration(drift), " (ttl * ", options.clock_drift_factor, " + ",
        absl::FormatDuration(options.clock_drift_floor), "); no validity could ever be left"));
  }
  return LockTtl{whole, ms, drift};
}

absl::Status CheckResource(absl::string_view resource, const Options& options) {
  if (resource.empty()) return absl::InvalidArgumentError("empty resource name");
  if (resource.size() > kMaxResourceLength) {
    return absl::InvalidArgumentError(absl::StrCat("resource name of ", resource.size(),
                                                   " bytes is longer than the maximum of ",
                                                   kMaxResourceLength));
  }
  // Reserved with fencing off too: an election always keeps a counter
  // (<resource>:fence), and a plain lock of that name would write a token
  // into it.
  (void)options;
  if (absl::EndsWith(resource, kFenceSuffix)) {
    return absl::InvalidArgumentError(absl::StrCat("resource \"", resource,
                                                   "\": names ending in \"", kFenceSuffix,
                                                   "\" are reserved for fencing counters"));
  }
  return absl::OkStatus();
}

std::string AttemptCount(int n) { return absl::StrCat(n, n == 1 ? " attempt" : " attempts"); }

std::string DescribeResources(const std::vector<std::string>& resources) {
  auto quote = [](const std::string& r) {
    return absl::StrCat("\"", r.size() > 80 ? r.substr(0, 77) + "..." : r, "\"");
  };
  if (resources.size() == 1) return quote(resources[0]);
  std::vector<std::string> shown;
  for (size_t i = 0; i < resources.size() && i < 4; ++i) shown.push_back(quote(resources[i]));
  if (resources.size() > 4) shown.push_back(absl::StrCat("... (", resources.size(), " in all)"));
  return absl::StrCat("{", absl::StrJoin(shown, ", "), "}");
}

Round::Outcome Round::Record(const std::string& node, Vote vote, absl::string_view detail) {
  switch (vote) {
    case Vote::kYes:
      ++yes_;
      break;
    case Vote::kRefused:
      ++refused_;
      break;
    case Vote::kUnavailable:
      ++unavailable_;
      break;
    case Vote::kInternal:
      ++internal_;
      break;
    case Vote::kCancelled:
      ++cancelled_;
      break;
  }
  if (vote != Vote::kYes && vote != Vote::kRefused) {
    if (errors_.size() < kMaxErrors) {
      errors_.push_back(absl::StrCat(node, ": ", detail));
    } else {
      ++more_errors_;
    }
  }
  return outcome();
}

Round::Outcome Round::outcome() const {
  if (yes_ >= quorum_) return Outcome::kSucceeded;
  if (answered() - yes_ >= nodes_ - quorum_ + 1) return Outcome::kFailed;
  return Outcome::kPending;
}

std::string Round::Summary(absl::string_view yes_verb, absl::string_view refused_verb) const {
  std::string out =
      absl::StrCat(yes_, " of ", nodes_, " nodes ", yes_verb, " (quorum ", quorum_, ")");
  if (refused_ > 0) absl::StrAppend(&out, "; ", refused_verb, " on ", Plural(refused_, "node"));
  for (const auto& e : errors_) absl::StrAppend(&out, "; ", e);
  if (more_errors_ > 0) absl::StrAppend(&out, "; and ", Plural(more_errors_, "more error"));
  return out;
}

absl::Status Round::Failure(absl::string_view what, absl::string_view yes_verb,
                            absl::string_view refused_verb, absl::StatusCode refused_code) const {
  // Name what made the quorum impossible: if the nodes that could not answer
  // (or answered garbage) would not have sufficed on their own, the refusals
  // decided it. With a majority quorum this reads "a quorum answered and the
  // resource is held elsewhere" (docs/design.md 7.1); in the all-nodes mode a
  // single refusal is enough.
  const int impossible = nodes_ - quorum_ + 1;
  absl::StatusCode code;
  if (cancelled_ > 0) {
    code = absl::StatusCode::kCancelled;
  } else if (refused_ > 0 && unavailable_ + internal_ < impossible) {
    code = refused_code;
  } else if (unavailable_ >= impossible) {
    code = absl::StatusCode::kUnavailable;
  } else if (internal_ > 0) {
    code = absl::StatusCode::kInternal;
  } else {
    code = absl::StatusCode::kUnavailable;
  }
  return absl::Status(code, absl::StrCat(what, ": ", Summary(yes_verb, refused_verb)));
}

Round::Vote VoteForErrorReply(absl::string_view error) {
  for (const char* p : {"NOAUTH", "WRONGPASS", "NOPERM", "LOADING", "READONLY", "OOM", "MASTERDOWN",
                        "BUSY", "CLUSTERDOWN", "TRYAGAIN", "MISCONF"}) {
    if (absl::StartsWith(error, p)) return Round::Vote::kUnavailable;
  }
  return Round::Vote::kInternal;
}

absl::StatusOr<uint64_t> ParseCounter(absl::string_view text) {
  uint64_t v = 0;
  if (text.empty() || text.size() > 20 ||
      text.find_first_not_of("0123456789") != absl::string_view::npos ||
      (text.size() > 1 && text[0] == '0') || !absl::SimpleAtoi(text, &v)) {
    return absl::InternalError(
        absl::StrCat("fencing counter holds \"", text.substr(0, 40), "\", not a decimal number"));
  }
  return v;
}

int FencedQuorum(int nodes, int quorum, int lost_counters) {
  return std::max(quorum, (nodes + lost_counters + 2) / 2);
}

std::string FencedQuorumNote(int fenced, int quorum, int lost_counters) {
  if (fenced == quorum) return "";
  return absl::StrCat("; fenced acquisitions need ", fenced,
                      " nodes (Options::fencing_lost_counters ", lost_counters, ")");
}

absl::Status WithFencedQuorumNote(absl::Status failed, int fenced, int quorum, int lost_counters) {
  if (fenced == quorum) return failed;
  return absl::Status(failed.code(), absl::StrCat(failed.message(),
                                                  FencedQuorumNote(fenced, quorum, lost_counters)));
}

int CounterLossesSurvived(int nodes, int fenced_quorum) { return 2 * fenced_quorum - nodes - 1; }

absl::StatusOr<uint64_t> NextFence(const std::vector<uint64_t>& counters) {
  uint64_t max = 0;
  for (uint64_t c : counters) max = std::max(max, c);
  if (max == std::numeric_limits<uint64_t>::max()) {
    return absl::InternalError("fencing counter is at its maximum value");
  }
  return max + 1;
}

namespace {

uint64_t MaxOf(const std::vector<uint64_t>& counters) {
  uint64_t max = 0;
  for (uint64_t c : counters) max = std::max(max, c);
  return max;
}

}  // namespace

absl::StatusOr<uint64_t> WriterFence(const std::vector<uint64_t>& counters) {
  const uint64_t max = MaxOf(counters);
  // The least odd number above max: max + 1 when max is even, else max + 2.
  const uint64_t step = max % 2 == 0 ? 1 : 2;
  if (max > std::numeric_limits<uint64_t>::max() - step) {
    return absl::InternalError("fencing counter is at its maximum value");
  }
  return max + step;
}

absl::StatusOr<uint64_t> ReaderFence(const std::vector<uint64_t>& counters) {
  const uint64_t max = MaxOf(counters);
  if (max < 2) return 2;
  if (max % 2 == 0) return max;
  // max is odd, so below the maximum (which is odd too only if it is max
  // itself).
  if (max == std::numeric_limits<uint64_t>::max()) {
    return absl::InternalError("fencing counter is at its maximum value");
  }
  return max + 1;
}

}  // namespace redlock::internal
