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

namespace redlock::internal {
namespace {

enum class Kind { kNone, kAcquire, kRelease, kExtend, kFenceAcquire, kFenceCommit, kInspect };

Kind KindOf(const Script* s) {
  if (s == &AcquireSetScript()) return Kind::kAcquire;
  if (s == &ReleaseScript() || s == &ReleaseOneScript()) return Kind::kRelease;
  if (s == &ExtendScript()) return Kind::kExtend;
  if (s == &FenceAcquireScript()) return Kind::kFenceAcquire;
  if (s == &FenceCommitScript()) return Kind::kFenceCommit;
  if (s == &InspectScript()) return Kind::kInspect;
  return Kind::kNone;
}

bool Fenced(Kind k) { return k == Kind::kFenceAcquire || k == Kind::kFenceCommit; }
bool Acquires(Kind k) { return k == Kind::kAcquire || k == Kind::kFenceAcquire; }

// Runs of a transaction whose EXEC was aborted by a change of a watched key.
constexpr int kMaxRuns = 3;

// Counters as the scripts compare them: decimal strings by (length, bytes).
bool CounterLess(absl::string_view a, absl::string_view b) {
  return a.size() < b.size() || (a.size() == b.size() && a < b);
}

// The reply types of the two phases (every command in them).
constexpr uint8_t kPhaseExpect =
    kExpectStatus | kExpectInteger | kExpectString | kExpectNil | kExpectArray;

void AppendArgs(std::string* out, absl::string_view cmd, const std::vector<absl::string_view>& a) {
  AppendArrayHeader(out, 1 + a.size());
  AppendBulk(out, cmd);
  for (absl::string_view s : a) AppendBulk(out, s);
}

}  // namespace

// ---- The runner ------------------------------------------------------------------------

struct ScriptlessRunner::Tx {
  int node = 0;
  Kind kind = Kind::kNone;
  std::vector<std::string> keys;
  std::vector<std::string> args;
  ConnectionId after = 0;
  const char* op = "";
  Written written;
  NodeCallback done;
  // ReleaseOneScript: ARGV[2] is the whole channel, not a prefix of it.
  bool whole_channel = false;
  int runs = 0;
  bool queued = false;                // waited for its turn: `after` no longer matters
  Transport::TimerId turn_timer = 0;  // while it waits (the runner's mu_)
  size_t locks = 0;                   // lock keys (the rest are counters)
  std::mutex mu;                      // held across phase 1's Send
  ConnectionId conn = 0;              // phase 1's connection
};

absl::Duration ScriptlessTurnWait(absl::Duration node_timeout) {
  return std::max(10 * node_timeout, absl::Seconds(1));
}

size_t ScriptlessRunner::Watched(const Tx& tx) {
  return Acquires(tx.kind) ? tx.locks : tx.keys.size();
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
  tx->kind = KindOf(command.script);
  tx->whole_channel = command.script == &ReleaseOneScript();
  tx->after = command.after;
  tx->op = command.op;
  tx->written = std::move(written);
  tx->done = std::move(done);
  std::string why;
  if (!DecodeScriptCall(command.payload, &tx->keys, &tx->args) ||
      (tx->kind != Kind::kInspect && (tx->args.empty() || tx->keys.empty()))) {
    why = "the client could not read its own script call (a bug)";
  } else if (tx->kind == Kind::kNone) {
    why = absl::StrCat(transport_->NodeName(node), " forbids scripting (",
                       command.script != nullptr ? command.script->name : "?",
                       " script refused), and that script has no script-free form: give this "
                       "client an ACL user with +@scripting on that node");
    // For as long as the node forbids scripting: never worth sending again.
    transport_->RunAfter(absl::ZeroDuration(),
                         [tx, why] { tx->done(absl::FailedPreconditionError(why)); });
    return 0;
  }
  if (tx->kind == Kind::kInspect && why.empty()) {
    // A read: no transaction, so no place in the node's queue.
    Command c;
    AppendArgs(&c.payload, "GET", {tx->keys[0]});
    AppendArgs(&c.payload, "PTTL", {tx->keys[0]});
    AppendArgs(&c.payload, "GETRANGE", {tx->keys[1], "0", "20"});
    c.replies = 3;
    c.expect = kPhaseExpect;
    c.op = command.op;
    return transport_->Send(node, c, [tx](absl::StatusOr<Reply> r) {
      if (r.ok() && r->type == Reply::Type::kArray && r->elements.size() == 3) {
        for (const Reply& e : r->elements) {
          if (e.is_error()) {
            tx->done(e);
            return;
          }
        }
        std::string counter = r->elements[2].str.empty() ? "0" : r->elements[2].str;
        r = Reply::Array(
            {Reply::String(r->elements[0].str), r->elements[1], Reply::String(std::move(counter))});
      }
      tx->done(std::move(r));
    });
  }
  if (!why.empty()) {
    transport_->RunAfter(absl::ZeroDuration(),
                         [tx, why] { tx->done(absl::UnavailableError(why)); });
    return 0;
  }
  tx->locks = Fenced(tx->kind) ? tx->keys.size() / 2 : tx->keys.size();
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
  std::string& p = c.payload;
  // An acquisition watches its lock keys only and reads the counters inside
  // its MULTI (phase 2), at EXEC: watching a counter that other resources'
  // holders raise (Options::FencingCounters::kShared) would make unrelated
  // acquisitions abort each other.
  const size_t watched = Watched(*tx);
  AppendArrayHeader(&p, 1 + watched);
  AppendBulk(&p, "WATCH");
  for (size_t i = 0; i < watched; ++i) AppendBulk(&p, tx->keys[i]);
  const std::string& token = tx->args[0];
  const std::string token_range = std::to_string(token.size());  // one byte more than a token
  for (size_t i = 0; i < tx->locks; ++i) {
    if (Acquires(tx->kind)) {
      AppendArgs(&p, "EXISTS", {tx->keys[i]});
    } else {
      // Bounded: a foreign value is never read whole.
      AppendArgs(&p, "GETRANGE", {tx->keys[i], "0", token_range});
    }
  }
  // Counters: 21 bytes tell garbage from any 64-bit number, as the scripts do.
  for (size_t i = tx->locks; i < watched; ++i) {
    AppendArgs(&p, "GETRANGE", {tx->keys[i], "0", "20"});
  }
  c.replies = static_cast<uint16_t>(1 + watched);
  c.expect = kPhaseExpect;
  // Behind the command it must follow (a release behind its SET), past the
  // circuit breaker as that one. One that waited for its turn goes later on
  // the same connection anyway; refused while the node is down, a release
  // is kept and sent again (NodeCalls::Release). While the transport shuts
  // down, each follows the one before it, so that what was queued goes out.
  c.after = !tx->queued || transport_->stopping() ? tx->after : 0;
  c.drain = tx->kind == Kind::kRelease;
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
  const size_t n = tx->locks;
  const std::string& token = tx->args[0];
  std::optional<absl::StatusOr<Reply>> result;  // decided without writing
  const bool replied = r.ok();
  if (!r.ok() || r->type != Reply::Type::kArray || r->elements.size() != 1 + Watched(*tx)) {
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
  static const std::vector<Reply> kNone;
  const std::vector<Reply>& e = result.has_value() ? kNone : r->elements;
  if (!result.has_value()) {
    std::string w;
    switch (tx->kind) {
      case Kind::kAcquire:
      case Kind::kFenceAcquire:
        for (size_t i = 0; i < n && !result.has_value(); ++i) {
          if (e[1 + i].integer != 0) {
            Reply held = Reply::Integer(-static_cast<int64_t>(i + 1));
            result = tx->kind == Kind::kAcquire ? held : Reply::Array({held});
          }
        }
        if (result.has_value()) break;
        for (size_t i = 0; i < n; ++i) {
          w.clear();
          AppendArgs(&w, "SET", {tx->keys[i], token, "PX", tx->args[1]});
          writes.push_back(w);
        }
        // The counters, read at EXEC, after the SETs (OnPhase2).
        for (size_t i = n; i < tx->keys.size(); ++i) {
          w.clear();
          AppendArgs(&w, "GETRANGE", {tx->keys[i], "0", "20"});
          writes.push_back(w);
        }
        break;
      case Kind::kRelease:
        for (size_t i = 0; i < n; ++i) {
          if (e[1 + i].str != token) continue;
          w.clear();
          AppendArgs(&w, "DEL", {tx->keys[i]});
          writes.push_back(w);
          if (!tx->args[1].empty()) {
            w.clear();
            AppendArgs(
                &w, "PUBLISH",
                {tx->whole_channel ? tx->args[1] : absl::StrCat(tx->args[1], tx->keys[i]), ""});
            writes.push_back(w);
          }
        }
        if (writes.empty()) result = Reply::Integer(0);
        break;
      case Kind::kExtend:
      case Kind::kFenceCommit:
        for (size_t i = 0; i < n && !result.has_value(); ++i) {
          if (e[1 + i].str != token) result = Reply::Integer(0);
        }
        if (result.has_value()) break;
        if (tx->kind == Kind::kExtend) {
          for (size_t i = 0; i < n; ++i) {
            w.clear();
            AppendArgs(&w, "PEXPIRE", {tx->keys[i], tx->args[1]});
            writes.push_back(w);
          }
        } else {
          // Per counter key (one key may serve several resources), the
          // highest token wanted, if above what it holds.
          std::map<std::string, std::pair<std::string, std::string>> raise;  // key: cur, want
          for (size_t i = 0; i < n && i + 1 < tx->args.size(); ++i) {
            const std::string& key = tx->keys[n + i];
            std::string cur = e[1 + n + i].str.empty() ? "0" : e[1 + n + i].str;
            auto [it, fresh] = raise.emplace(key, std::make_pair(cur, cur));
            if (CounterLess(it->second.second, tx->args[i + 1])) {
              it->second.second = tx->args[i + 1];
            }
          }
          // Written even when not raised, as the script does (scripts.h):
          // the write is what the WAIT behind this EXEC waits for. The
          // counter is watched, so the value written back is the value
          // read, and EXEC certifies that the keys still held the token.
          for (const auto& [key, cw] : raise) {
            w.clear();
            AppendArgs(&w, "SET", {key, cw.second});
            writes.push_back(w);
          }
        }
        break;
      default:
        result = absl::InternalError("unreachable");
    }
  }
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
  c.expect = kPhaseExpect;
  c.after = tx->conn;
  c.pinned = true;
  c.drain = tx->kind == Kind::kRelease;
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
    if (Acquires(tx->kind)) {
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
  const std::vector<Reply>& out = exec.elements;
  switch (tx->kind) {
    case Kind::kAcquire:
      tx->done(Reply::Integer(1));
      return;
    case Kind::kFenceAcquire: {
      // The SETs' answers, then the counters as EXEC read them.
      std::vector<Reply> a{Reply::Integer(1)};
      for (size_t i = tx->locks; i < out.size(); ++i) {
        a.push_back(Reply::String(out[i].str.empty() ? "0" : out[i].str));
      }
      tx->done(Reply::Array(std::move(a)));
      return;
    }
    case Kind::kRelease: {
      // DEL, then its PUBLISH when announcing: the DELs' answers.
      const size_t stride = tx->args[1].empty() ? 1 : 2;
      int64_t deleted = 0;
      for (size_t i = 0; i < out.size(); i += stride) deleted += out[i].integer == 1 ? 1 : 0;
      tx->done(Reply::Integer(deleted));
      return;
    }
    case Kind::kExtend: {
      bool all = true;
      for (const Reply& x : out) all = all && x.type == Reply::Type::kInteger && x.integer == 1;
      tx->done(Reply::Integer(all ? 1 : 0));
      return;
    }
    case Kind::kFenceCommit:
      tx->done(Reply::Integer(1));
      return;
    default:
      tx->done(absl::InternalError("unreachable"));
  }
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
