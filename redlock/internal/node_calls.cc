#include "redlock/internal/node_calls.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/durability.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {
namespace {

using V = Round::Vote;

// Releases sent again per node and retry interval, at most.
constexpr size_t kRetryBatch = 64;

bool IsNoScript(const absl::StatusOr<Reply>& r) {
  return r.ok() && r->is_error() && absl::StartsWith(r->str, "NOSCRIPT");
}

// A cluster node's redirections followed per command at most (a map that
// keeps moving, a slot nobody serves).
constexpr int kMaxRedirects = 5;

// The reply of a command sent as ASKING then itself: the second reply (or
// ASKING's own error).
absl::StatusOr<Reply> AnswerAfterAsking(absl::StatusOr<Reply> r) {
  if (!r.ok() || r->type != Reply::Type::kArray || r->elements.size() != 2) return r;
  if (r->elements[0].is_error()) return std::move(r->elements[0]);
  return std::move(r->elements[1]);
}

Command ConfirmCommand(const Options::Durability& d) {
  return DurabilityOn(d) ? DurabilityCommand(d) : Command();
}

}  // namespace

// One command in flight, with its confirmation and its resend.
struct NodeCalls::Call {
  int node = 0;
  Judge judge;
  bool durable = false;
  OnNoScript noscript = OnNoScript::kFail;
  bool probe = false;              // sent while the node's replicas are lagging
  const Script* script = nullptr;  // the command runs a script
  // The command, when it may be sent again: kResend after NOSCRIPT, or to
  // a cluster node (redirected); empty payload: none.
  Command resend;
  std::mutex mu;
  Done done;      // empty once delivered
  int round = 0;  // the sends so far, minus one
  bool noscript_resent = false;
  int redirects = 0;    // MOVED and ASK followed
  bool asking = false;  // the latest send went with ASKING (two replies)
  ConnectionId conn = 0;
  // Durable writes queued so far (one per send; a script-free transaction
  // run again writes again), and whether a confirmation followed one.
  int writes = 0;
  bool confirm_sent = false;
  Clock::TimePoint first_sent{};  // for TRYAGAIN's deadline
  bool write_answered = false;
  bool write_yes = false;
  // Read only once write_answered (no message: a Status with one is an
  // allocation per node per command).
  absl::StatusOr<Reply> write_reply;
  Vote write_vote;
  std::optional<Vote> confirmation;  // if it came before the write's answer
};

NodeCalls::NodeCalls(Transport* transport, const Clock* clock, const Options& options,
                     std::shared_ptr<ScriptingModes> modes)
    : transport_(transport),
      clock_(clock),
      modes_(modes != nullptr ? std::move(modes)
                              : std::make_shared<ScriptingModes>(transport->size())),
      runner_(transport, options.max_in_flight_per_node),
      durability_(options.durability),
      confirm_command_(ConfirmCommand(options.durability)),
      // A probe costs the node's connection at most one durability timeout
      // in four.
      probe_interval_(std::max(options.breaker_probe_interval, 4 * options.durability.timeout)),
      retry_interval_(std::max(options.breaker_probe_interval, options.node_timeout)),
      node_timeout_(options.node_timeout),
      max_pending_(options.max_in_flight_per_node),
      clusters_(ClusterNodes(options, transport->size())),
      nodes_(static_cast<size_t>(transport->size())) {}

NodeCalls::~NodeCalls() = default;

ConnectionId NodeCalls::Send(int node, const Command& command, const Judge& judge, bool durable,
                             OnNoScript noscript, Done done) {
  std::shared_ptr<Call> call = NewCall(node, command, judge, durable, noscript, std::move(done));
  if (call == nullptr) return 0;
  if (KeepsCommand(*call)) call->resend = command;
  return SendOnce(call, 0, command);
}

ConnectionId NodeCalls::Send(int node, Command&& command, const Judge& judge, bool durable,
                             OnNoScript noscript, Done done) {
  std::shared_ptr<Call> call = NewCall(node, command, judge, durable, noscript, std::move(done));
  if (call == nullptr) return 0;
  if (!KeepsCommand(*call)) return SendOnce(call, 0, command);
  // Only Send writes resend, before the command goes out.
  call->resend = std::move(command);
  return SendOnce(call, 0, call->resend);
}

bool NodeCalls::KeepsCommand(const Call& call) const {
  return (call.noscript == OnNoScript::kResend && call.script != nullptr) || cluster(call.node);
}

std::shared_ptr<NodeCalls::Call> NodeCalls::NewCall(int node, const Command& command,
                                                    const Judge& judge, bool durable,
                                                    OnNoScript noscript, Done done) {
  auto call = std::make_shared<Call>();
  call->node = node;
  call->judge = judge;
  call->durable = durable && DurabilityOn(durability_);
  call->noscript = noscript;
  call->script = command.script;
  call->done = std::move(done);
  call->first_sent = clock_->Now();
  if (call->durable) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      NodeState& s = nodes_[static_cast<size_t>(node)];
      if (s.lagging) {
        const Clock::TimePoint now = clock_->Now();
        if (!s.probe_out && now >= s.next_probe) {
          s.probe_out = true;
          call->probe = true;
        } else {
          why =
              absl::StrCat("not asked: its replicas left the last ", s.missed_in_a_row,
                           " writes unconfirmed (", s.last_miss, "); a write is tried again every ",
                           absl::FormatDuration(probe_interval_));
        }
      }
    }
    if (!why.empty()) {
      // Never inline (Transport::Send's promise, which the callers rely on).
      transport_->RunAfter(absl::ZeroDuration(), [call, why] {
        call->done(Answer{absl::UnavailableError(why), Vote{V::kUnavailable, why}});
      });
      return nullptr;
    }
  }
  return call;
}

ConnectionId NodeCalls::SendOnce(const std::shared_ptr<Call>& call, int round,
                                 const Command& command) {
  ConnectionId conn;
  if (command.script != nullptr && modes_->scriptless(call->node)) {
    // WATCH/MULTI/EXEC instead; a durable write's confirmation follows its
    // EXEC, once that is queued.
    ScriptlessRunner::Written written;
    if (call->durable) {
      written = [this, call, round](ConnectionId c) {
        {
          std::lock_guard<std::mutex> lock(call->mu);
          call->conn = c;
        }
        Wrote(call, round, c);
      };
    }
    std::lock_guard<std::mutex> lock(call->mu);
    conn = runner_.Run(
        call->node, command, std::move(written),
        [this, call, round](absl::StatusOr<Reply> r) { OnWrite(call, round, std::move(r)); });
    call->conn = conn;
    return conn;
  }
  {
    // Held across the Send, so that the answer (on another thread, maybe
    // before Send returns) knows the connection.
    std::lock_guard<std::mutex> lock(call->mu);
    conn = transport_->Send(call->node, command, [this, call, round](absl::StatusOr<Reply> r) {
      OnWrite(call, round, std::move(r));
    });
    call->conn = conn;
  }
  if (call->durable) Wrote(call, round, conn);
  return conn;
}

void NodeCalls::Wrote(const std::shared_ptr<Call>& call, int round, ConnectionId conn) {
  int write;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    write = ++call->writes;
    // A confirmation of an earlier write of this round (a WAIT behind an
    // EXEC that aborted) says nothing of this one.
    call->confirmation.reset();
    if (conn != 0) call->confirm_sent = true;
  }
  AfterWrite(call, round, write, conn);
}

void NodeCalls::AfterWrite(const std::shared_ptr<Call>& call, int round, int write,
                           ConnectionId conn) {
  if (conn == 0) {
    // Not sent: says nothing of the replicas.
    if (call->probe) CountConfirmation(call->node, Vote{V::kCancelled, ""}, /*probe=*/true);
    return;
  }
  // One confirmation in flight per connection (a node's one, or each of a
  // cluster's masters): a WAIT covers every earlier write on its
  // connection, so a write sent while one is out waits for the next, sent
  // when that one returns. A lagging replica then holds the connection for
  // one durability timeout at a time, never for a queue of them.
  auto group = std::make_shared<Confirmation>();
  group->conn = conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeState& s = nodes_[static_cast<size_t>(call->node)];
    auto [it, fresh] = s.confirming.try_emplace(conn);
    if (!fresh) {
      it->second.push_back(Waiter{call, round, write});
      return;
    }
  }
  group->writes.push_back(Waiter{call, round, write});
  SendConfirmation(call->node, std::move(group), conn);
}

void NodeCalls::SendConfirmation(int node, std::shared_ptr<Confirmation> group,
                                 ConnectionId after) {
  std::vector<Waiter> elsewhere;
  {
    std::lock_guard<std::mutex> lock(group->mu);
    // Right behind the writes, on their connection (Command::after).
    Command confirm = confirm_command_;
    confirm.after = after;
    const ConnectionId conn =
        transport_->Send(node, confirm, [this, node, group](absl::StatusOr<Reply> r) {
          OnConfirmation(node, group, std::move(r));
        });
    // A write on another connection (one that has been lost since) cannot
    // be confirmed by this WAIT.
    std::vector<Waiter> here;
    for (Waiter& w : group->writes) {
      ConnectionId on;
      {
        std::lock_guard<std::mutex> call_lock(w.call->mu);
        on = w.call->conn;
      }
      (conn != 0 && on == conn ? here : elsewhere).push_back(std::move(w));
    }
    group->writes = std::move(here);
  }
  for (Waiter& w : elsewhere) {
    OnConfirm(w.call, w.round, w.write,
              Vote{V::kUnavailable, "granted, but its connection was lost before a WAIT followed"});
  }
}

void NodeCalls::OnConfirmation(int node, const std::shared_ptr<Confirmation>& group,
                               absl::StatusOr<Reply> r) {
  const Vote cv = DurabilityVote(r, durability_);
  std::vector<Waiter> writes;
  {
    std::lock_guard<std::mutex> lock(group->mu);
    writes = std::move(group->writes);
  }
  bool probe = false;
  for (const Waiter& w : writes) probe = probe || w.call->probe;
  CountConfirmation(node, cv, probe);
  std::shared_ptr<Confirmation> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeState& s = nodes_[static_cast<size_t>(node)];
    auto it = s.confirming.find(group->conn);
    if (it != s.confirming.end()) {
      if (it->second.empty()) {
        s.confirming.erase(it);
      } else {
        next = std::make_shared<Confirmation>();
        next->conn = group->conn;
        next->writes.swap(it->second);
      }
    }
  }
  for (const Waiter& w : writes) OnConfirm(w.call, w.round, w.write, cv);
  if (next == nullptr) return;
  // Behind the last of them: every one was sent on that connection.
  SendConfirmation(node, next, next->conn);
}

void NodeCalls::OnWrite(const std::shared_ptr<Call>& call, int round, absl::StatusOr<Reply> r) {
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (round != call->round || !call->done) return;
    // Sent with ASKING in front: the command's own reply is the second.
    if (call->asking) r = AnswerAfterAsking(std::move(r));
  }
  // A master of a cluster node that does not serve the key's slot (any
  // more, or not yet: a migration): the command did not run there. It goes
  // where the node said, at the end of that master's queue, with its own
  // confirmation; what followed it on the old connection is redirected
  // behind it in the same way (a release behind its SET), so the order
  // holds on the new master too.
  if (cluster(call->node) && r.ok() && r->is_error() && absl::StartsWith(r->str, "TRYAGAIN") &&
      TryAgainLater(call, round)) {
    return;
  }
  std::optional<Redirect> redirect;
  if (cluster(call->node) && r.ok() && r->is_error()) redirect = ParseRedirect(r->str);
  if (redirect.has_value()) {
    std::optional<Command> again;
    {
      std::lock_guard<std::mutex> lock(call->mu);
      if (round != call->round || !call->done) return;
      if (call->redirects < kMaxRedirects && !call->resend.payload.empty()) {
        ++call->redirects;
        ++call->round;
        call->asking = redirect->ask;
        again = call->resend;
      }
    }
    if (again.has_value()) {
      again->after = 0;
      again->pinned = false;
      if (redirect->ask) {
        // Once, to the master importing the slot.
        std::string payload;
        AppendCommand(&payload, {"ASKING"});
        again->payload.insert(0, payload);
        again->replies = static_cast<uint16_t>(again->replies + 1);
        if (again->expect != 0) again->expect |= kExpectStatus;
        again->asking_at = redirect->address();
      }
      SendOnce(call, round + 1, *again);
      return;
    }
    r = absl::UnavailableError(
        absl::StrCat("redirected ", kMaxRedirects, " times (last: ", r->str,
                     "): the cluster's slot map keeps changing, or the slot has no master"));
  }
  const bool noscript = IsNoScript(r);
  // A script refused by the node itself (its ACL or its commands changed
  // since the handshake): the node goes script-free from now on.
  const bool refused = call->script != nullptr && r.ok() && r->is_error() &&
                       RefusesScripting(r->str) && !modes_->scriptless(call->node);
  if (refused) modes_->SetScriptless(call->node, r->str);
  if (noscript) {
    ConnectionId on;
    {
      std::lock_guard<std::mutex> lock(call->mu);
      on = call->conn;
    }
    ReloadScripts(call->node, on);
  }
  bool resend = false;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (round != call->round || !call->done) return;
    if ((noscript || refused) && !call->noscript_resent && call->noscript == OnNoScript::kResend &&
        !call->resend.payload.empty()) {
      // Its EVAL form (or its script-free form) goes at the end of the
      // queue, with its own confirmation; the WAIT already sent behind this
      // one confirms nothing.
      call->noscript_resent = true;
      ++call->round;
      call->asking = false;
      resend = true;
    }
  }
  if (resend) {
    Command again = call->resend;
    again.asking_at.clear();
    if (noscript) again.payload = EvalFallback(again);
    SendOnce(call, round + 1, again);
    return;
  }
  if (noscript) {
    r = absl::UnavailableError(
        absl::StrCat("the node's script cache was flushed (", r->str,
                     "): the command did not run; the scripts are being loaded again"));
  }
  Vote v = call->judge(r);
  Done done;
  Answer answer;
  bool probe_unasked = false;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    call->write_answered = true;
    // A probe that wrote nothing for a WAIT to follow (a script-free write
    // decided in its first phase): it asked the replicas nothing, and the
    // next write may probe.
    probe_unasked = call->probe && !call->confirm_sent;
    if (!call->durable || v.vote != V::kYes) {
      // A "no" needs no confirmation (the WAIT's answer still counts for
      // the node's replicas).
      done = std::move(call->done);
      call->done = nullptr;
      answer = Answer{std::move(r), std::move(v), false, call->conn};
    } else if (call->confirmation.has_value()) {
      const bool confirmed = call->confirmation->vote == V::kYes;
      done = std::move(call->done);
      call->done = nullptr;
      answer = Answer{std::move(r), confirmed ? std::move(v) : *call->confirmation, !confirmed,
                      call->conn};
    } else {
      call->write_yes = true;
      call->write_reply = std::move(r);
      call->write_vote = std::move(v);
    }
  }
  if (probe_unasked) CountConfirmation(call->node, Vote{V::kCancelled, ""}, /*probe=*/true);
  if (done) done(std::move(answer));
}

bool NodeCalls::TryAgainLater(const std::shared_ptr<Call>& call, int round) {
  const Clock::TimePoint now = clock_->Now();
  absl::Duration pause = std::max(absl::Milliseconds(1), node_timeout_ / 10);
  {
    std::lock_guard<std::mutex> lock(call->mu);
    if (round != call->round || !call->done || call->resend.payload.empty()) return false;
    if (now + absl::ToChronoNanoseconds(pause) >=
        call->first_sent + absl::ToChronoNanoseconds(node_timeout_)) {
      return false;
    }
    ++call->round;
    call->asking = false;
  }
  transport_->RunAfter(pause, [this, call, round] {
    Command again = call->resend;
    again.after = 0;
    again.pinned = false;
    again.asking_at.clear();
    SendOnce(call, round + 1, again);
  });
  return true;
}

void NodeCalls::OnConfirm(const std::shared_ptr<Call>& call, int round, int write, Vote cv) {
  Done done;
  Answer answer;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    // Only the confirmation behind the call's latest write counts.
    if (round != call->round || write != call->writes || !call->done) return;
    if (!call->write_answered) {
      call->confirmation = std::move(cv);
      return;
    }
    if (!call->write_yes) return;
    const bool confirmed = cv.vote == V::kYes;
    done = std::move(call->done);
    call->done = nullptr;
    answer = Answer{std::move(call->write_reply), confirmed ? std::move(call->write_vote) : cv,
                    !confirmed, call->conn};
  }
  done(std::move(answer));
}

void NodeCalls::CountConfirmation(int node, const Vote& confirmation, bool probe) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& s = nodes_[static_cast<size_t>(node)];
  const Clock::TimePoint now = clock_->Now();
  if (confirmation.vote == V::kCancelled) {
    if (probe) {
      s.probe_out = false;
      s.next_probe = now + absl::ToChronoNanoseconds(probe_interval_);
    }
    return;
  }
  if (confirmation.vote == V::kYes) {
    s.missed_in_a_row = 0;
    s.lagging = false;
    s.probe_out = false;
    return;
  }
  ++s.missed_in_a_row;
  s.last_miss = confirmation.detail;
  if (probe || (!s.lagging && s.missed_in_a_row >= kConfirmationsMissed)) {
    s.lagging = true;
    s.probe_out = false;
    s.next_probe = now + absl::ToChronoNanoseconds(probe_interval_);
  }
}

void NodeCalls::ReloadScripts(int node, ConnectionId on) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeState& s = nodes_[static_cast<size_t>(node)];
    if (s.reloading || stopped_ || modes_->scriptless(node)) return;
    s.reloading = true;
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
        nodes_[static_cast<size_t>(node)].reloading = false;
      };
    }
    transport_->Send(node, load, std::move(done));
  }
}

// ---- Releases that must not be lost ----------------------------------------------

namespace {

Command ReleaseCommand(const KeysRelease& r, ConnectionId after, bool eval) {
  // A maker that left the command empty still gets the script release.
  Command c = r.command.payload.empty() ? ScriptRelease(r) : r.command;
  if (eval) c.payload = EvalFallback(c);
  c.after = after;
  c.op = "release";
  return c;
}

}  // namespace

Command ScriptRelease(const KeysRelease& r) {
  return r.keys.size() == 1
             ? ScriptCommand(
                   ReleaseOneScript(), r.keys,
                   {r.token, r.channel_prefix.empty() ? std::string()
                                                      : absl::StrCat(r.channel_prefix, r.keys[0])})
             : ScriptCommand(ReleaseScript(), r.keys, {r.token, r.channel_prefix});
}

namespace {

// A release is done once the node answered it (0 deleted included: the key
// was gone).
bool Answered(const absl::StatusOr<Reply>& r) { return r.ok() && !r->is_error(); }

}  // namespace

void NodeCalls::Release(int node, ConnectionId after, std::shared_ptr<const KeysRelease> release,
                        Done done) {
  Pending p{std::move(release), after};
  p.until = p.release->expires;
  SendRelease(node, std::move(p), /*eval=*/false, std::move(done));
}

ConnectionId NodeCalls::SendRelease(int node, Pending p, bool eval, Done done) {
  // Behind the SET on its connection; but a release that went there already
  // and got no answer is still queued there: one sent again goes as any
  // command (on a new connection, or refused while the node is down).
  const ConnectionId after = p.queued_on == 0 ? p.after : 0;
  Command command = ReleaseCommand(*p.release, after, eval);
  return Send(node, std::move(command), ReleaseVote, /*durable=*/false, OnNoScript::kResend,
              [this, node, p = std::move(p), done = std::move(done)](Answer a) mutable {
                // A release that can never be sent (the node forbids
                // scripting, and the release has no script-free form) is
                // not kept: the keys go at their ttl.
                if (!Answered(a.reply) && a.vote.vote != V::kCancelled &&
                    !absl::IsFailedPrecondition(a.reply.status())) {
                  // Refused (not sent): the copy sent before still waits
                  // where it was queued; forgetting that would let the next
                  // round queue another behind the SET, past the breaker.
                  if (a.connection != 0) p.queued_on = a.connection;
                  Keep(node, std::move(p), a.reply.ok());
                }
                if (done) done(std::move(a));
              });
}

void NodeCalls::Keep(int node, Pending p, bool answered) {
  const Clock::TimePoint now = clock_->Now();
  if (!answered) {
    // The node may still hold a SET of these keys that it has not run yet
    // (a stopped node runs what its socket holds when it resumes): the keys
    // may live a ttl from now.
    p.until = std::max(p.until, now + absl::ToChronoNanoseconds(p.release->ttl));
  } else if (now >= p.until) {
    return;  // answered with an error, and the keys are gone by now anyway
  }
  std::vector<absl::AnyInvocable<void()>> after_unlock;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    NodeState& s = nodes_[static_cast<size_t>(node)];
    s.pending.push_back(std::move(p));
    if (s.pending.size() > max_pending_) s.pending.pop_front();  // the oldest
    ArmRetryLocked(&after_unlock);
  }
  for (auto& fn : after_unlock) fn();
}

void NodeCalls::ArmRetryLocked(std::vector<absl::AnyInvocable<void()>>* after_unlock) {
  if (retry_armed_ || stopped_) return;
  retry_armed_ = true;
  after_unlock->push_back([this] {
    Transport::TimerId id = transport_->RunAfter(retry_interval_, [this] { RetryPending(); });
    std::lock_guard<std::mutex> lock(mu_);
    retry_timer_ = id;
  });
}

void NodeCalls::RetryPending() {
  std::vector<std::vector<Pending>> batches(nodes_.size());
  const Clock::TimePoint now = clock_->Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    retry_armed_ = false;
    retry_timer_ = 0;
    if (stopped_) return;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      NodeState& s = nodes_[i];
      if (s.retrying > 0) continue;  // one batch out per node at a time
      while (!s.pending.empty() && batches[i].size() < kRetryBatch) {
        Pending p = std::move(s.pending.front());
        s.pending.pop_front();
        if (now < p.until) batches[i].push_back(std::move(p));
      }
      s.retrying = static_cast<int>(batches[i].size());
    }
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    const int node = static_cast<int>(i);
    for (size_t k = 0; k < batches[i].size(); ++k) {
      ConnectionId conn = SendRelease(node, batches[i][k], /*eval=*/true, [this, node](Answer) {
        std::lock_guard<std::mutex> lock(mu_);
        --nodes_[static_cast<size_t>(node)].retrying;
      });
      if (conn != 0) continue;
      // The node takes no commands now: the rest wait for the next round.
      std::lock_guard<std::mutex> lock(mu_);
      NodeState& s = nodes_[i];
      for (size_t j = batches[i].size(); j > k + 1; --j) {
        s.pending.push_front(std::move(batches[i][j - 1]));
        --s.retrying;
      }
      break;
    }
  }
  std::vector<absl::AnyInvocable<void()>> after_unlock;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool any = false;
    for (const NodeState& s : nodes_) any = any || !s.pending.empty();
    if (any) ArmRetryLocked(&after_unlock);
  }
  for (auto& fn : after_unlock) fn();
}

void NodeCalls::AddHealth(std::vector<NodeHealth>* health) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < health->size() && i < nodes_.size(); ++i) {
    (*health)[i].replicas_lagging = nodes_[i].lagging;
    (*health)[i].scriptless = modes_->scriptless(static_cast<int>(i));
    (*health)[i].transactions_waiting = runner_.waiting(static_cast<int>(i));
    if ((*health)[i].scriptless)
      (*health)[i].scriptless_reason = modes_->reason(static_cast<int>(i));
    (*health)[i].cleanups_pending =
        nodes_[i].pending.size() + static_cast<size_t>(std::max(nodes_[i].retrying, 0));
  }
}

void NodeCalls::Shutdown() {
  Transport::TimerId timer = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    for (NodeState& s : nodes_) s.pending.clear();
    timer = std::exchange(retry_timer_, 0);
  }
  if (timer != 0) transport_->Cancel(timer);
}

}  // namespace redlock::internal
