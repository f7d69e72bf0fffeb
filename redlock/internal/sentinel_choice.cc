#include "redlock/internal/sentinel_choice.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "redlock/internal/url.h"

namespace redlock::internal {

int64_t ConfigEpoch(const Reply& r) {
  if (r.type != Reply::Type::kArray) return -1;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    int64_t epoch = -1;
    if (r.elements[i].str == "config-epoch" && absl::SimpleAtoi(r.elements[i + 1].str, &epoch)) {
      return epoch;
    }
  }
  return -1;
}

std::vector<MasterCandidate> Candidates(const std::vector<SentinelAnswer>& answers) {
  std::vector<MasterCandidate> out;
  for (const SentinelAnswer& a : answers) {
    const std::string address = JoinHostPort(a.host, a.port);
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const MasterCandidate& c) { return c.address == address; });
    if (it == out.end()) {
      out.push_back(
          MasterCandidate{.host = a.host, .port = a.port, .address = address, .first = a.sentinel});
      it = out.end() - 1;
    }
    it->epoch = std::max(it->epoch, a.epoch);
    ++it->votes;
  }
  return out;
}

bool Better(const MasterCandidate& a, const MasterCandidate& b) {
  if (a.epoch != b.epoch) return a.epoch > b.epoch;
  if (a.refused != b.refused) return a.refused < b.refused;
  if (a.votes != b.votes) return a.votes > b.votes;
  return a.first < b.first;
}

std::optional<MasterCandidate> ChooseInRound(const std::vector<SentinelAnswer>& answers,
                                             std::map<std::string, SentinelTime>* refused,
                                             SentinelTime now) {
  std::vector<MasterCandidate> candidates = Candidates(answers);
  if (candidates.empty()) return std::nullopt;
  for (MasterCandidate& c : candidates) {
    auto it = refused->find(c.address);
    if (it == refused->end()) continue;
    if (now - it->second < absl::ToChronoNanoseconds(kRefusalMemory)) {
      c.refused = it->second;
    } else {
      refused->erase(it);
    }
  }
  return *std::min_element(candidates.begin(), candidates.end(), Better);
}

std::optional<MasterCandidate> MoveOutsideRound(const std::vector<SentinelAnswer>& answers,
                                                const std::string& current, int64_t current_epoch,
                                                size_t sentinels, MasterCandidate* was) {
  std::vector<MasterCandidate> candidates = Candidates(answers);
  MasterCandidate cur{.address = current};
  for (const MasterCandidate& c : candidates) {
    if (c.address == current) cur = c;
  }
  // The current master keeps at least the epoch it was chosen with (its
  // Sentinels may be away).
  cur.epoch = std::max(cur.epoch, current_epoch);
  *was = cur;
  if (candidates.empty()) return std::nullopt;
  const MasterCandidate& best = *std::min_element(candidates.begin(), candidates.end(), Better);
  const int majority = static_cast<int>(sentinels / 2 + 1);
  if (best.address == current) return std::nullopt;
  if (best.epoch > cur.epoch ||
      (best.epoch == cur.epoch && best.votes > cur.votes && best.votes >= majority)) {
    return best;
  }
  return std::nullopt;
}

}  // namespace redlock::internal
