#include "redlock/internal/scriptless.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scriptless_forms.h"

namespace redlock::internal {
namespace {

using Kind = ScriptlessKind;

// Runs of a transaction whose EXEC was aborted by a change of a watched key.
constexpr int kMaxRuns = 3;

}  // namespace

// ---- The runner ------------------------------------------------------------------------

struct ScriptlessRunner::Tx {
  int node = 0;
  ScriptlessCall call;  // the script's keys and arguments, and which script
  ConnectionId after = 0;
  const char* op = "";
  Written written;
  NodeCallback done;
  int runs = 0;
  bool queued = false;                // waited for its turn: `after` no longer matters
  Transport::TimerId turn_timer = 0;  // while it waits (the runner's mu_)
  std::mutex mu;                      // held across phase 1's Send
  ConnectionId conn = 0;              // phase 1's connection
};

absl::Duration ScriptlessTurnWait(absl::Duration node_timeout) {
  return std::max(10 * node_timeout, absl::Seconds(1));
}

ScriptlessRunner::ScriptlessRunner(Transport* transport, size_t max_waiting,
                                   absl::Duration turn_wait)
    : transport_(transport),
      max_waiting_(max_waiting),
      turn_wait_(turn_wait),
      nodes_(static_cast<size_t>(transport->size())) {}

size_t ScriptlessRunner::waiting(int node) const {
  std::lock_guard<std::mutex> lock(mu_);
  const NodeQueue& q = nodes_[static_cast<size_t>(node)];
  return q.waiting.size();
}

ScriptlessRunner::~ScriptlessRunner() = default;

ConnectionId ScriptlessRunner::Run(int node, const Command& command, Written written,
                                   NodeCallback done) {
  auto tx = std::make_shared<Tx>();
  tx->node = node;
  ScriptlessCall& call = tx->call;
  call.kind = ScriptlessKindOf(command.script);
  call.whole_channel = command.script == &ReleaseOneScript();
  tx->after = command.after;
  tx->op = command.op;
  tx->written = std::move(written);
  tx->done = std::move(done);
  std::string why;
  if (!DecodeScriptCall(command.payload, &call.keys, &call.args) ||
      (call.kind != Kind::kInspect && (call.args.empty() || call.keys.empty())) ||
      (call.kind == Kind::kInspect && call.keys.size() < 2)) {
    why = "the client could not read its own script call (a bug)";
  } else if (call.kind == Kind::kNone) {
    why = absl::StrCat(transport_->NodeName(node), " forbids scripting (",
                       command.script != nullptr ? command.script->name : "?",
                       " script refused), and that script has no script-free form: give this "
                       "client an ACL user with +@scripting on that node");
    // For as long as the node forbids scripting: never worth sending again.
    transport_->RunAfter(absl::ZeroDuration(),
                         [tx, why] { tx->done(absl::FailedPreconditionError(why)); });
    return 0;
  }
  if (call.kind == Kind::kInspect && why.empty()) {
    // A read: no transaction, so no place in the node's queue.
    Command c;
    c.payload = InspectPayload(call);
    c.replies = 3;
    c.expect = kScriptlessExpect;
    c.op = command.op;
    return transport_->Send(
        node, c, [tx](absl::StatusOr<Reply> r) { tx->done(InspectReplyOf(std::move(r))); });
  }
  if (!why.empty()) {
    transport_->RunAfter(absl::ZeroDuration(),
                         [tx, why] { tx->done(absl::UnavailableError(why)); });
    return 0;
  }
  call.locks = Fenced(call.kind) ? call.keys.size() / 2 : call.keys.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeQueue& q = nodes_[static_cast<size_t>(node)];
    if (q.busy && q.waiting.size() >= max_waiting_) {
      why = absl::StrCat(q.waiting.size(),
                         " transactions already waiting for this node (it forbids scripting: "
                         "one WATCH ... EXEC at a time)");
    } else if (q.busy && tx->after == 0 && !transport_->Accepts(node)) {
      // Its turn would come only after the one in flight times out, to be
      // refused then: a node known down fails at once, as for scripts.
      why = "not asked: the node is down (its circuit breaker is open)";
    } else if (q.busy) {
      tx->queued = true;
      q.waiting.push_back(tx);
      std::weak_ptr<Tx> weak = tx;
      tx->turn_timer = transport_->RunAfter(turn_wait_, [this, weak] {
        if (std::shared_ptr<Tx> t = weak.lock()) TurnMissed(t);
      });
      return kQueued;
    } else {
      q.busy = true;
    }
  }
  if (!why.empty()) {
    transport_->RunAfter(absl::ZeroDuration(),
                         [tx, why] { tx->done(absl::UnavailableError(why)); });
    return 0;
  }
  return SendPhase1(tx);
}

ConnectionId ScriptlessRunner::SendPhase1(const std::shared_ptr<Tx>& tx) {
  Command c;
  c.payload = Phase1Payload(tx->call);
  c.replies = static_cast<uint16_t>(1 + tx->call.watched());
  c.expect = kScriptlessExpect;
  // Behind the command it must follow (a release behind its SET), past the
  // circuit breaker as that one. One that waited for its turn goes later on
  // the same connection anyway; refused while the node is down, a release
  // is kept and sent again (NodeCalls::Release). While the transport shuts
  // down, each follows the one before it, so that what was queued goes out.
  c.after = !tx->queued || transport_->stopping() ? tx->after : 0;
  c.drain = tx->call.kind == Kind::kRelease;
  c.op = tx->op;
  ++tx->runs;
  std::lock_guard<std::mutex> lock(tx->mu);
  tx->conn = transport_->Send(tx->node, c,
                              [this, tx](absl::StatusOr<Reply> r) { OnPhase1(tx, std::move(r)); });
  return tx->conn;
}

void ScriptlessRunner::Unwatch(const Tx& tx) {
  Command c;
  AppendArgs(&c.payload, "UNWATCH", {});
  c.expect = kExpectStatus;
  c.after = tx.conn;
  c.pinned = true;
  c.op = "unwatch";
  transport_->Send(tx.node, c, [](absl::StatusOr<Reply>) {});
}

void ScriptlessRunner::OnPhase1(const std::shared_ptr<Tx>& tx, absl::StatusOr<Reply> r) {
  {
    std::lock_guard<std::mutex> lock(tx->mu);  // tx->conn is set
  }
  std::optional<absl::StatusOr<Reply>> result;  // decided without writing
  const bool replied = r.ok();
  if (!r.ok() || r->type != Reply::Type::kArray || r->elements.size() != 1 + tx->call.watched()) {
    result = std::move(r);
  } else {
    for (const Reply& e : r->elements) {
      if (e.is_error()) {
        result = e;  // as the script's error (WRONGTYPE, NOPERM on a key...)
        break;
      }
    }
  }
  std::vector<std::string> writes;  // RESP commands
  if (!result.has_value()) result = PlanWrites(tx->call, r->elements, &writes);
  if (result.has_value()) {
    // The next transaction's EXEC would clear the watch too; until then a
    // change of these keys would abort it for nothing. No reply at all
    // (a timeout, a lost connection): the next command there is no sooner.
    if (tx->conn != 0 && replied) Unwatch(*tx);
    Next(tx->node, tx->conn);
    tx->done(std::move(*result));
    return;
  }
  Command c;
  AppendArgs(&c.payload, "MULTI", {});
  for (const std::string& w : writes) c.payload += w;
  AppendArgs(&c.payload, "EXEC", {});
  c.replies = static_cast<uint16_t>(writes.size() + 2);
  c.expect = kScriptlessExpect;
  c.after = tx->conn;
  c.pinned = true;
  c.drain = tx->call.kind == Kind::kRelease;
  c.op = tx->op;
  const ConnectionId conn = transport_->Send(
      tx->node, c, [this, tx](absl::StatusOr<Reply> r2) { OnPhase2(tx, std::move(r2)); });
  if (conn != 0 && tx->written) tx->written(conn);
  Next(tx->node, tx->conn);
}

void ScriptlessRunner::OnPhase2(const std::shared_ptr<Tx>& tx, absl::StatusOr<Reply> r) {
  if (!r.ok() || r->type != Reply::Type::kArray || r->elements.empty()) {
    tx->done(std::move(r));
    return;
  }
  for (const Reply& e : r->elements) {
    if (e.is_error()) {
      tx->done(e);  // MULTI or a write refused (EXEC then says EXECABORT)
      return;
    }
  }
  const Reply& exec = r->elements.back();
  if (exec.is_nil()) {
    // A watched key changed between the reads and EXEC: nothing was written.
    if (Acquires(tx->call.kind)) {
      // A lock key changed after the read: someone set it (and may have
      // removed it since). Not run again (an acquisition must not run
      // later than sent: its release may be queued behind it), and no
      // "held": a "no" that says what happened.
      tx->done(absl::UnavailableError(
          "the transaction was aborted: a lock key changed between its read and EXEC"));
      return;
    }
    if (tx->runs < kMaxRuns) {
      bool now = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        NodeQueue& q = nodes_[static_cast<size_t>(tx->node)];
        tx->queued = true;
        if (transport_->stopping()) tx->after = tx->conn;
        if (q.busy) {
          q.waiting.push_back(tx);
        } else {
          q.busy = true;
          now = true;
        }
      }
      if (now) SendPhase1(tx);
      return;
    }
    tx->done(Reply::Error(
        absl::StrCat("EXEC aborted ", kMaxRuns, " times: the keys kept changing under WATCH")));
    return;
  }
  tx->done(ScriptReplyOf(tx->call, exec.elements));
}

void ScriptlessRunner::TurnMissed(const std::shared_ptr<Tx>& tx) {
  size_t ahead = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<std::shared_ptr<Tx>>& waiting = nodes_[static_cast<size_t>(tx->node)].waiting;
    auto it = std::find(waiting.begin(), waiting.end(), tx);
    if (it == waiting.end()) return;                        // its turn came as the timer ran
    ahead = static_cast<size_t>(it - waiting.begin()) + 1;  // and the one in flight
    tx->turn_timer = 0;
    waiting.erase(it);
  }
  // Never sent: nothing of it ran on the node (a release is retried as any
  // release that did not get through).
  tx->done(absl::UnavailableError(absl::StrCat(
      "not sent within ", absl::FormatDuration(turn_wait_), ": ", ahead,
      " transaction(s) were ahead of it (the node forbids scripting: one WATCH ... EXEC at a "
      "time)")));
}

void ScriptlessRunner::Next(int node, ConnectionId previous) {
  std::shared_ptr<Tx> next;
  Transport::TimerId timer = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeQueue& q = nodes_[static_cast<size_t>(node)];
    if (q.waiting.empty()) {
      q.busy = false;
      return;
    }
    next = std::move(q.waiting.front());
    q.waiting.pop_front();
    timer = std::exchange(next->turn_timer, 0);
  }
  if (timer != 0) transport_->Cancel(timer);
  if (transport_->stopping() && previous != 0) next->after = previous;
  SendPhase1(next);
}

}  // namespace redlock::internal
