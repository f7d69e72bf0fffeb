#include "redlock/internal/script_delivery.h"

#include <utility>

#include "absl/strings/match.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {

ScriptDelivery::ScriptDelivery(Transport* transport, std::shared_ptr<ScriptingModes> modes,
                               size_t max_waiting)
    : transport_(transport),
      modes_(modes != nullptr ? std::move(modes)
                              : std::make_shared<ScriptingModes>(transport->size())),
      runner_(transport, max_waiting),
      reloading_(static_cast<size_t>(transport->size()), false) {}

ConnectionId ScriptDelivery::Deliver(int node, const Command& command,
                                     ScriptlessRunner::Written written, NodeCallback done) {
  if (Transacted(node, command)) {
    return runner_.Run(node, command, std::move(written), std::move(done));
  }
  return transport_->Send(node, command, std::move(done));
}

ScriptDelivery::Scripting ScriptDelivery::Read(int node, const Script* script,
                                               const absl::StatusOr<Reply>& r, ConnectionId on) {
  if (!r.ok() || !r->is_error()) return Scripting::kRan;
  if (absl::StartsWith(r->str, "NOSCRIPT")) {
    Reload(node, on);
    return Scripting::kNoScript;
  }
  // A script refused by the node itself (its ACL or its commands changed
  // since the handshake): the node goes script-free from now on.
  if (script != nullptr && RefusesScripting(r->str) && !modes_->scriptless(node)) {
    modes_->SetScriptless(node, r->str);
    return Scripting::kRefused;
  }
  return Scripting::kRan;
}

Command ScriptDelivery::Again(const Command& command, Scripting why) {
  Command again = command;
  again.asking_at.clear();
  if (why == Scripting::kNoScript) again.payload = EvalFallback(again);
  return again;
}

void ScriptDelivery::Reload(int node, ConnectionId on) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reloading_[static_cast<size_t>(node)] || stopped_ || modes_->scriptless(node)) return;
    reloading_[static_cast<size_t>(node)] = true;
  }
  const std::vector<const Script*>& all = AllScripts();
  for (size_t i = 0; i < all.size(); ++i) {
    Command load;
    load.payload = EncodeCommand({"SCRIPT", "LOAD", all[i]->body});
    load.expect = kExpectString;
    load.op = "script load";
    // Where the NOSCRIPT came from (a cluster node's master; for any other
    // node its one connection), behind the command that got it.
    load.after = on;
    NodeCallback done = [](absl::StatusOr<Reply>) {};
    if (i + 1 == all.size()) {
      done = [this, node](absl::StatusOr<Reply>) {
        std::lock_guard<std::mutex> lock(mu_);
        reloading_[static_cast<size_t>(node)] = false;
      };
    }
    transport_->Send(node, load, std::move(done));
  }
}

void ScriptDelivery::AddHealth(std::vector<NodeHealth>* health) const {
  for (size_t i = 0; i < health->size() && i < reloading_.size(); ++i) {
    const int node = static_cast<int>(i);
    (*health)[i].scriptless = modes_->scriptless(node);
    (*health)[i].transactions_waiting = runner_.waiting(node);
    if ((*health)[i].scriptless) (*health)[i].scriptless_reason = modes_->reason(node);
  }
}

void ScriptDelivery::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
}

}  // namespace redlock::internal
