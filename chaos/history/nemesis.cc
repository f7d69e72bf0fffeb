#include "chaos/history/nemesis.h"

#include <atomic>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace redlock::chaos {

std::string FaultSite::Name() const {
  std::vector<std::string> parts;
  for (int n : nodes) parts.push_back(absl::StrCat("n", n));
  for (const std::string& c : clients) parts.push_back(c);
  return absl::StrJoin(parts, ",");
}

namespace {
std::atomic<FaultColorLookup> color_lookup{nullptr};
}  // namespace

void SetFaultColorLookup(FaultColorLookup lookup) { color_lookup.store(lookup); }

void NemesisLog::Write(absl::string_view kind, absl::string_view key, const FaultSite& site,
                       absl::string_view label, FaultPhase phase) {
  if (history_ == nullptr) return;
  const FaultColorLookup lookup = color_lookup.load();
  absl::Status s = history_->WriteNemesis({.fault = std::string(kind),
                                           .target = std::string(key),
                                           .detail = std::string(label),
                                           .phase = phase,
                                           .nodes = site.nodes,
                                           .clients = site.clients,
                                           .color = lookup != nullptr ? lookup(kind) : ""});
  // The history is what is judged; a lost fault only loses its timing.
  if (!s.ok()) fprintf(stderr, "redlock-chaos: nemesis log: %s\n", s.ToString().c_str());
}

void NemesisLog::Instant(absl::string_view kind, const FaultSite& site, absl::string_view label) {
  Write(kind, site.Name(), site, label, FaultPhase::kInstant);
}

void NemesisLog::Start(absl::string_view kind, const FaultSite& site, absl::string_view label,
                       absl::string_view key) {
  Write(kind, key.empty() ? site.Name() : std::string(key), site, label, FaultPhase::kStart);
}

void NemesisLog::Stop(absl::string_view kind, absl::string_view key, absl::string_view label) {
  Write(kind, key, FaultSite(), label, FaultPhase::kStop);
}

ScopedFault NemesisLog::Scoped(absl::string_view kind, const FaultSite& site,
                               absl::string_view label) {
  Start(kind, site, label);
  return ScopedFault(this, std::string(kind), site.Name());
}

ScopedFault::ScopedFault(ScopedFault&& other) noexcept
    : log_(std::exchange(other.log_, nullptr)),
      kind_(std::move(other.kind_)),
      key_(std::move(other.key_)) {}

void ScopedFault::Stop(absl::string_view label) {
  if (log_ == nullptr) return;
  std::exchange(log_, nullptr)->Stop(kind_, key_, label);
}

}  // namespace redlock::chaos
