// chaos/kinds/kind_base.h: the small helpers the fault families share when
// they define their kinds (not for use outside chaos/kinds/).

#ifndef REDLOCK_CHAOS_KINDS_KIND_BASE_H_
#define REDLOCK_CHAOS_KINDS_KIND_BASE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "chaos/faults/fault_kind.h"

namespace redlock::chaos::faults {

// A kind defined by its info and a few functions: most kinds are a table
// entry, not a class.
struct KindSpec {
  KindInfo info;
  std::function<std::string(const RunShape&)> unsupported;
  std::function<PropertySet(const RunShape&, const FaultInstance&)> may_violate;
  std::function<bool(const RunShape&, const FaultInstance&)> tolerated;
  std::function<absl::Status(Run&, FaultInstance&)> inject;
  std::function<absl::Status(Run&, FaultInstance&)> heal;
};

class SpecKind final : public FaultKind {
 public:
  explicit SpecKind(KindSpec spec) : spec_(std::move(spec)) {}
  const KindInfo& info() const override { return spec_.info; }
  std::string Unsupported(const RunShape& shape) const override {
    return spec_.unsupported ? spec_.unsupported(shape) : "";
  }
  PropertySet MayViolate(const RunShape& shape, const FaultInstance& f) const override {
    return spec_.may_violate ? spec_.may_violate(shape, f) : 0;
  }
  bool Tolerated(const RunShape& shape, const FaultInstance& f) const override {
    return spec_.tolerated ? spec_.tolerated(shape, f) : false;
  }
  absl::Status Inject(Run& run, FaultInstance& f) const override { return spec_.inject(run, f); }
  absl::Status Heal(Run& run, FaultInstance& f) const override {
    return spec_.heal ? spec_.heal(run, f) : absl::OkStatus();
  }

 private:
  KindSpec spec_;
};

inline void Add(FaultKindList& out, KindSpec spec) {
  out.push_back(std::make_unique<SpecKind>(std::move(spec)));
}

// ---- Info, the parts every kind of a family shares -----------------------------

// What a kind acts on (KindInfo::takes_nodes, takes_clients).
inline constexpr int kOnNodes = 1, kOnClients = 2;

// `info` as a kind of `family` acting on `acts` (kOnNodes | kOnClients, or
// 0: the run as a whole), its targets' defaults "any" unless it names them.
inline KindInfo InFamily(std::string family, int acts, KindInfo info) {
  info.family = std::move(family);
  info.takes_nodes = (acts & kOnNodes) != 0;
  info.takes_clients = (acts & kOnClients) != 0;
  if (info.takes_nodes && info.nodes_default.empty()) info.nodes_default = "any";
  if (info.takes_clients && info.clients_default.empty()) info.clients_default = "any";
  return info;
}

// ---- Parameters, one a row -----------------------------------------------------

// A parameter of `type`; "" leaves a bound (or the explored range, the
// help) out.
inline ParamSpec Param(ParamType type, std::string name, std::string default_value,
                       std::string explore, std::string min, std::string help) {
  return {.name = std::move(name),
          .type = type,
          .default_value = std::move(default_value),
          .explore = std::move(explore),
          .min = std::move(min),
          .help = std::move(help)};
}
inline ParamSpec SpanParam(std::string name, std::string default_value, std::string explore,
                           std::string min, std::string help) {
  return Param(ParamType::kSpan, std::move(name), std::move(default_value), std::move(explore),
               std::move(min), std::move(help));
}
inline ParamSpec IntParam(std::string name, std::string default_value, std::string explore,
                          std::string min, std::string help) {
  return Param(ParamType::kInt, std::move(name), std::move(default_value), std::move(explore),
               std::move(min), std::move(help));
}
inline ParamSpec NumberParam(std::string name, std::string default_value, std::string explore,
                             std::string min, std::string max, std::string help) {
  ParamSpec p = Param(ParamType::kNumber, std::move(name), std::move(default_value),
                      std::move(explore), std::move(min), std::move(help));
  p.max = std::move(max);
  return p;
}
inline ParamSpec ChoiceParam(std::string name, std::string default_value, std::string explore,
                             std::vector<std::string> choices, std::string help) {
  ParamSpec p = Param(ParamType::kChoice, std::move(name), std::move(default_value),
                      std::move(explore), "", std::move(help));
  p.choices = std::move(choices);
  return p;
}

// ---- Acting on the targets -----------------------------------------------------

// fn(i) for each of `targets` (node or client indexes) until the first
// error.
template <typename Fn>
absl::Status ForEach(const std::vector<int>& targets, Fn fn) {
  for (int i : targets) {
    absl::Status s = fn(i);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// A minority of nodes out of service (or voting no) is what a quorum must
// ride out, when every client reaches every node.
inline bool Minority(const RunShape& s, const FaultInstance& f) {
  return !s.partial_views && static_cast<int>(f.nodes.size()) <= (s.nodes - 1) / 2;
}

// What breaks when a lock node forgets a key it granted (or grants it
// twice): mutual exclusion (for a semaphore: at most K holders), the harm it
// causes unless the store is fenced, and with fencing the counters (a
// forgetting node forgets its counter too; a leader's term is such a
// counter, whatever the client's fencing says), and so what the fence
// protects: a repeated token lets a second writer's write through (S3, a
// lost update the fence cannot refuse; S9, a deposed writer's write).
inline PropertySet ForgetsLock(const RunShape& s) {
  return Prop(kS1) | (s.permits ? Prop(kS6) : 0) | (s.leaders ? Prop(kS7) : 0) | Prop(kS3) |
         (s.fencing ? Prop(kS4) | Prop(kS9) : 0);
}

// A holder that keeps using the lock past its validity (a leader that
// still believes it leads; a permit holder beside K others).
inline PropertySet OutlivesLease(const RunShape& s) {
  return Prop(kS1) | (s.permits ? Prop(kS6) : 0) | Prop(kS2) | (s.fencing ? 0 : Prop(kS3));
}

// The shapes' common requirements ("" when met).
inline std::string NeedsProxies(const RunShape& s) {
  return s.topology == Topology::kSharedProxies ? ""
                                                : "needs shared proxies (topology shared-proxies)";
}
inline std::string NeedsLinks(const RunShape& s) {
  return s.topology == Topology::kPerClientProxies
             ? ""
             : "needs per-client proxies (topology per-client-proxies)";
}
inline std::string NeedsReplicas(const RunShape& s) {
  return s.replicas > 0 ? "" : "needs replicated nodes (replicas: 1)";
}

}  // namespace redlock::chaos::faults

#endif  // REDLOCK_CHAOS_KINDS_KIND_BASE_H_
