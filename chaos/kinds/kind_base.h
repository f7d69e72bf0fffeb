// chaos/kinds/kind_base.h: the small helpers the fault families share when
// they define their kinds (not for use outside chaos/kinds/).

#ifndef REDLOCK_CHAOS_KINDS_KIND_BASE_H_
#define REDLOCK_CHAOS_KINDS_KIND_BASE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

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
