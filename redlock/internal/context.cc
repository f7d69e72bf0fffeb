#include "redlock/internal/context.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/jitter.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/release_watch.h"
#include "redlock/internal/renewal.h"
#include "redlock/internal/scheme.h"

namespace redlock::internal {

OpContext::OpContext(Options options, std::unique_ptr<Transport> transport, const Clock* clock,
                     std::shared_ptr<ScriptingModes> modes,
                     std::shared_ptr<ServerCommands> commands)
    : options_(std::move(options)),
      quorum_(EffectiveQuorum(options_)),
      transport_(std::move(transport)),
      clock_(clock),
      calls_(std::make_unique<NodeCalls>(transport_.get(), clock_, options_, std::move(modes),
                                         std::move(commands))),
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

std::string OpContext::KeysProblem(const std::vector<std::string>& keys) const {
  return internal::KeysProblem(options_, keys);
}

std::string OpContext::KeysProblemOn(int node, const std::vector<std::string>& keys) const {
  if (node < 0 || static_cast<size_t>(node) >= options_.nodes.size()) return "";
  const Endpoint& e = options_.nodes[static_cast<size_t>(node)];
  return SchemeOf(e).KeysProblem(e, keys);
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
