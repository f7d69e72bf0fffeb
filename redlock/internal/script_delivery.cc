#include "redlock/internal/script_delivery.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {

ScriptDelivery::ScriptDelivery(Transport* transport, std::shared_ptr<ScriptingModes> modes,
                               std::shared_ptr<ServerCommands> commands, size_t max_waiting,
                               absl::Duration turn_wait)
    : transport_(transport),
      modes_(modes != nullptr ? std::move(modes)
                              : std::make_shared<ScriptingModes>(transport->size())),
      commands_(std::move(commands)),
      runner_(transport, max_waiting, turn_wait),
      reloading_(static_cast<size_t>(transport->size()), false) {}

namespace {

// ScratchCommand's kind: a release or an extension by the node's own commands.
struct NativeSend;

// The single-key release script, which has native forms (the extension's
// is chosen in FormFor, by its number of keys).
bool ReleasesOneKey(const Command& c) { return c.script == &ReleaseOneScript(); }

bool UnknownCommand(const absl::StatusOr<Reply>& r) {
  return r.ok() && r->is_error() && absl::StartsWith(r->str, "ERR unknown command");
}

}  // namespace

ScriptDelivery::Form ScriptDelivery::FormFor(int node, const Command& command) const {
  if (command.script == nullptr) return Form::kAsIs;
  if (commands_ != nullptr && node < commands_->size() &&
      (command.script == &ReleaseOneScript() || command.script == &ExtendScript())) {
    const NodeCommands c = commands_->Get(node);
    if (command.script == &ReleaseOneScript() ? (c.delifeq || c.delex) : c.set_ifeq) {
      // The extension of a set of keys stays a script (one atomic check).
      if (command.script == &ReleaseOneScript()) return Form::kNative;
      ScriptCallViews keys, args;
      if (DecodeScriptCallViews(command.payload, &keys, &args) && keys.size() == 1) {
        return Form::kNative;
      }
    }
  }
  return modes_->scriptless(node) ? Form::kTransaction : Form::kAsIs;
}

ConnectionId ScriptDelivery::Deliver(int node, const Command& command,
                                     ScriptlessRunner::Written written, NodeCallback done) {
  switch (FormFor(node, command)) {
    case Form::kNative:
      return SendNative(node, command, std::move(done));
    case Form::kTransaction:
      return runner_.Run(node, command, std::move(written), std::move(done));
    case Form::kAsIs:
      break;
  }
  return transport_->Send(node, command, std::move(done));
}

ConnectionId ScriptDelivery::SendNative(int node, const Command& command, NodeCallback done) {
  ScriptCallViews keys, args;
  if (!DecodeScriptCallViews(command.payload, &keys, &args) || keys.empty() || args.size() < 2) {
    return transport_->Send(node, command, std::move(done));  // not one of ours: as it is
  }
  const NodeCommands has = commands_->Get(node);
  // Built in the thread's scratch command: every field set here, the
  // payload's buffer kept.
  ScratchCommand<NativeSend> scratch;
  Command& c = *scratch;
  c.payload.clear();
  c.script = nullptr;
  c.after = command.after;
  c.pinned = command.pinned;
  c.replies = 1;
  c.drain = command.drain;
  c.slot = command.slot;
  c.asking_at = command.asking_at;
  c.op = command.op;
  const bool release = ReleasesOneKey(command);
  if (release) {
    // ARGV: token, the whole channel ("" announces nothing).
    if (has.delifeq) {
      AppendCommand(&c.payload, {"DELIFEQ", keys[0], args[0]});
    } else {
      // Without IFEQ, DELEX is a plain DEL: the condition is always sent.
      AppendCommand(&c.payload, {"DELEX", keys[0], "IFEQ", args[0]});
    }
    c.expect = kExpectInteger;
    if (!args[1].empty()) {
      AppendCommand(&c.payload, {"PUBLISH", args[1], ""});
      c.replies = 2;
    }
  } else {
    // ARGV: token, ttl_ms. Sets the value it already has, with the new ttl,
    // only where it is the token: never re-creates a missing key. Never with
    // GET, whose reply would not say whether the set happened.
    AppendCommand(&c.payload, {"SET", keys[0], args[0], "IFEQ", args[0], "PX", args[1]});
    c.expect = kExpectStatus | kExpectNil;
  }
  if (command.asking_at.empty() == false) {
    // Sent to the master importing the slot: ASKING goes first again.
    std::string asking;
    AppendCommand(&asking, {"ASKING"});
    c.payload.insert(0, asking);
    c.replies = static_cast<uint16_t>(c.replies + 1);
    c.expect |= kExpectStatus;
  }
  return SendNativeCommand(node, c, release, std::move(done));
}

ConnectionId ScriptDelivery::SendNativeCommand(int node, const Command& c, bool release,
                                               NodeCallback done) {
  const bool asking = !c.asking_at.empty();
  return transport_->Send(
      node, c,
      [this, node, release, asking, done = std::move(done)](absl::StatusOr<Reply> r) mutable {
        // The replies of ASKING and the PUBLISH are not the command's.
        if (r.ok() && r->type == Reply::Type::kArray && !r->elements.empty()) {
          Reply first =
              std::move(r->elements[asking ? std::min<size_t>(1, r->elements.size() - 1) : 0]);
          if (asking && r->elements[0].is_error()) first = std::move(r->elements[0]);
          r = std::move(first);
        }
        if (UnknownCommand(r) && commands_ != nullptr) {
          // The node is another server than its handshake found: scripts
          // from now on (the caller's retry or next call uses them).
          NodeCommands none;
          none.known = true;
          commands_->Set(node, none);
        } else if (!release && r.ok() && !r->is_error()) {
          // The extension script's reply: 1 extended, 0 not held.
          r = Reply::Integer(r->IsStatus("OK") ? 1 : 0);
        }
        done(std::move(r));
      });
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
    NodeHealth& h = (*health)[i];
    h.scriptless = modes_->scriptless(node);
    h.transactions_waiting = runner_.waiting(node);
    if (h.scriptless) h.scriptless_reason = modes_->reason(node);
    NodeCommands has;
    if (commands_ != nullptr && node < commands_->size()) has = commands_->Get(node);
    const char* rest = h.scriptless ? "transactions (WATCH/MULTI/EXEC)" : "scripts";
    std::string native;
    if (has.delifeq || has.delex) {
      absl::StrAppend(&native, "release by ", has.delifeq ? "DELIFEQ" : "DELEX IFEQ", ", ");
    }
    if (has.set_ifeq) absl::StrAppend(&native, "extend by SET IFEQ, ");
    h.path = native.empty() ? rest : absl::StrCat(native, "the rest by ", rest);
  }
}

void ScriptDelivery::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
}

}  // namespace redlock::internal
