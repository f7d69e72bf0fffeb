#include "redlock/internal/context.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/jitter.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/release_watch.h"
#include "redlock/internal/renewal.h"

namespace redlock::internal {

OpContext::OpContext(Options options, std::unique_ptr<Transport> transport, const Clock* clock,
                     std::shared_ptr<ScriptingModes> modes)
    : options_(std::move(options)),
      quorum_(EffectiveQuorum(options_)),
      clusters_(ClusterNodes(options_, transport->size())),
      has_cluster_(std::find(clusters_.begin(), clusters_.end(), true) != clusters_.end()),
      transport_(std::move(transport)),
      clock_(clock),
      calls_(std::make_unique<NodeCalls>(transport_.get(), clock_, options_, std::move(modes))),
      watches_(std::make_unique<ReleaseWatches>(transport_.get())),
      renewals_(std::make_unique<Renewals>()) {}

OpContext::~OpContext() { Shutdown(); }

void OpContext::Shutdown() {
  // Renewal handles may outlive the client: detach them first.
  renewals_->DetachAll();
  // The transport completes what is in flight; the releases those
  // completions send behind their SETs still go out.
  transport_->Shutdown();
  calls_->Shutdown();
}

std::string OpContext::Key(absl::string_view resource) const {
  return absl::StrCat(options_.key_prefix, resource);
}

std::string OpContext::SharedFenceKey() const {
  if (options_.fencing_counters != Options::FencingCounters::kShared) return "";
  return absl::StrCat(options_.key_prefix, kFenceSuffix);
}

std::vector<std::string> OpContext::WithFenceKeys(const std::vector<std::string>& keys) const {
  return WithCounters(keys, SharedFenceKey());
}

std::string OpContext::FenceKey(absl::string_view key) const {
  std::string shared = SharedFenceKey();
  return shared.empty() ? absl::StrCat(key, kFenceSuffix) : shared;
}

std::string OpContext::ClusterKeysProblem(const std::vector<std::string>& keys,
                                          bool derived) const {
  if (!has_cluster_ || keys.empty()) return "";
  std::string node;
  for (size_t i = 0; i < clusters_.size(); ++i) {
    if (clusters_[i]) {
      node = transport_->NodeName(static_cast<int>(i));
      break;
    }
  }
  const std::string why = absl::StrCat(
      "node ", node,
      " is a Redis Cluster, where the keys of one call must share a hash slot; give the "
      "resources a common hash tag (\"{order42}:a\", \"{order42}:b\"; README \"A Redis "
      "Cluster as a node\")");
  if (derived) {
    for (const std::string& k : keys) {
      if (!HasHashTag(k)) {
        return absl::StrCat("the key \"", k,
                            "\" and the keys kept beside it (its fencing counter, the "
                            "reader-writer lock's, the fair lock's queue) would land in "
                            "different hash slots: ",
                            why);
      }
    }
  }
  const int slot = KeySlot(keys[0]);
  for (size_t i = 1; i < keys.size(); ++i) {
    if (KeySlot(keys[i]) != slot) {
      return absl::StrCat("the keys \"", keys[0], "\" and \"", keys[i],
                          "\" are in different hash slots: ", why);
    }
  }
  return "";
}

absl::Duration OpContext::RetryDelay() const {
  absl::Duration d = options_.retry_delay;
  if (options_.retry_jitter > absl::ZeroDuration()) {
    int64_t j = absl::ToInt64Nanoseconds(options_.retry_jitter);
    d += absl::Nanoseconds(UniformInt(-j, j));
  }
  return std::max(d, absl::ZeroDuration());
}

}  // namespace redlock::internal
