// Fake nodes and a fake clock for unit tests of the Redlock state machines.
//
// Each fake node holds a tiny key space and understands exactly the commands
// the client sends (SET NX PX, the scripts of redlock/internal/scripts.h, and
// WAIT / WAITAOF, answered from FakeNode::replicas),
// so tests can check outcomes by content, not by mocking calls. Requests are
// queued; the test decides when and how each node answers:
//
//   FakeClock clock;
//   auto* t = new FakeTransport(5, &clock);
//   ClientImpl client(options, std::unique_ptr<Transport>(t), &clock);
//   client.TryAcquireAsync("r", absl::Seconds(10), [&](auto lease) { ... });
//   t->AnswerAll(0);        // node 0 executes and replies to what it has
//   t->TimeOutAll(3);       // node 3's pending requests time out
//
// Everything runs on the test thread; callbacks run inside Answer*/TimeOut*/
// AdvanceTo, which count as "the transport thread". No caller can block on
// it (it is no internal::Blocking): a blocking call of a ClientImpl over it
// returns what is decided at once (bad input), else kFailedPrecondition.

#ifndef REDLOCK_TESTS_UNIT_FAKE_TRANSPORT_H_
#define REDLOCK_TESTS_UNIT_FAKE_TRANSPORT_H_

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/transport.h"

namespace redlock::testkit {

class FakeClock final : public internal::Clock {
 public:
  TimePoint Now() const override { return now_; }
  void Advance(absl::Duration d) { now_ += absl::ToChronoNanoseconds(d); }

 private:
  TimePoint now_ = TimePoint() + std::chrono::hours(1);
};

// Splits a RESP array of bulk strings into its arguments.
std::vector<std::string> ParseResp(const std::string& payload);
// Every command of a payload of RESP arrays written back to back.
std::vector<std::vector<std::string>> ParseRespAll(const std::string& payload);

class FakeNode {
 public:
  FakeNode();
  struct Value {
    std::string data;
    std::optional<internal::Clock::TimePoint> expires;
    bool is_list = false;  // a key of the wrong type
    bool operator==(const Value& o) const {
      return data == o.data && expires == o.expires && is_list == o.is_list;
    }
    bool operator!=(const Value& o) const { return !(*this == o); }
  };

  // Executes one command (argv) at time `now`, as Redis would, for the
  // connection `conn` (WAIT's answer depends on the connection's writes).
  internal::Reply Execute(const std::vector<std::string>& argv, internal::Clock::TimePoint now,
                          internal::ConnectionId conn = 0);

  std::map<std::string, Value> keys;
  // Sorted sets of the reader-writer lock (member -> score, the node's ms
  // clock: FakeNode::NowMs), kept apart from `keys`.
  std::map<std::string, std::map<std::string, int64_t>> zsets;
  // A fair lock's places (fair_scripts.h), by its queue key: waiter id ->
  // ticket and expiry (the node's ms clock), kept apart from `keys`. The
  // head is the least (ticket, id) among the live ones.
  struct FairPlace {
    uint64_t ticket = 0;
    int64_t expires_ms = 0;
    bool operator==(const FairPlace& o) const {
      return ticket == o.ticket && expires_ms == o.expires_ms;
    }
    bool operator!=(const FairPlace& o) const { return !(*this == o); }
  };
  std::map<std::string, std::map<std::string, FairPlace>> fair;
  // The live places of a fair queue, in the order they are served.
  std::vector<std::string> FairOrder(const std::string& queue_key, internal::Clock::TimePoint now);
  // Messages the scripts published (channel), in order.
  std::vector<std::string> published;
  // When set, every command returns this error reply (READONLY, LOADING...).
  std::string forced_error;
  // The next commands other than WAIT and WAITAOF answer these error replies,
  // one each, without running (a cluster master answering MOVED for a slot
  // it no longer serves).
  std::deque<std::string> refuse_next;
  // Replicas that have every write at once: what WAIT answers, and WAITAOF's
  // second number (Options::durability). A test lowers it to model a replica
  // that is down or lagging.
  int replicas = 0;
  // A replica that stopped after acknowledging everything: WAIT still
  // answers `replicas` until the node executes a write, then 0 (as Redis,
  // which waits for the writes before it).
  bool replica_stalled = false;
  bool unacknowledged = false;
  // The connections that wrote while the replica was stalled: their WAIT
  // answers 0 (a connection that wrote nothing since answers `replicas`, as
  // Redis's WAIT counts the replicas that have the connection's last write).
  std::set<internal::ConnectionId> unacked_connections;
  // WATCH / MULTI / EXEC (one connection per node here): the watched keys'
  // values when watched (a change, including expiry, aborts EXEC; setting a
  // key to the value it had is not seen as a change), and the queued
  // commands of an open MULTI.
  std::map<std::string, std::optional<Value>> watched;
  bool in_multi = false;
  std::vector<std::vector<std::string>> queued;
  // WATCH ran here / EXEC ran (committed) or was aborted: counts for tests.
  int watches = 0, execs = 0, exec_aborts = 0;
  // WAITAOF's first number: whether the node fsyncs its own append-only file.
  bool appendonly = true;
  // False: WAITAOF is an unknown command, as before Redis 7.2.
  bool knows_waitaof = true;
  // The SHA-1s the node's script cache holds (EVALSHA of another one
  // answers NOSCRIPT); every script of the client until FlushScripts().
  // SCRIPT LOAD and EVAL add theirs.
  std::set<std::string> scripts;
  void FlushScripts() { scripts.clear(); }
  // Commands executed, in order (argv[0] or the script's name).
  std::vector<std::string> log;

  // The node's clock in ms (what TIME gives the scripts).
  static int64_t NowMs(internal::Clock::TimePoint now) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  }
  // Live members of a sorted set (expired ones purged).
  std::map<std::string, int64_t>& Live(const std::string& key, internal::Clock::TimePoint now);

 private:
  // The lock family's scripts (family_scripts.h); nullopt when `name` is
  // not one of them.
  std::optional<internal::Reply> ExecuteFamily(const std::string& name,
                                               const std::vector<std::string>& k,
                                               const std::vector<std::string>& a,
                                               internal::Clock::TimePoint now);
  // The fair lock's scripts (fair_scripts.h); nullopt for another name.
  std::optional<internal::Reply> ExecuteFair(const std::string& name,
                                             const std::vector<std::string>& k,
                                             const std::vector<std::string>& a,
                                             internal::Clock::TimePoint now);
  const Value* Get(const std::string& key, internal::Clock::TimePoint now);
  // A write on the current connection (`conn_`): what WAIT there covers.
  void Wrote() {
    unacknowledged = replica_stalled;
    if (replica_stalled) unacked_connections.insert(conn_);
  }
  internal::Reply ExecuteScript(const internal::Script& script,
                                const std::vector<std::string>& argv,
                                internal::Clock::TimePoint now);
  // The commands of the script-free path (scriptless.h) and plain reads.
  std::optional<internal::Reply> ExecutePlain(const std::vector<std::string>& argv,
                                              internal::Clock::TimePoint now);
  internal::ConnectionId conn_ = 0;
};

class FakeTransport final : public internal::Transport {
 public:
  struct Pending {
    std::vector<std::string> argv;  // the first command
    // Command::replies > 1: every command of the payload (argv is the
    // first); the answer is the array of their replies.
    std::vector<std::vector<std::string>> batch;
    internal::ConnectionId conn = 0;
    std::string op;
    internal::NodeCallback done;
  };

  FakeTransport(int nodes, FakeClock* clock);

  // Transport.
  int size() const override { return static_cast<int>(nodes_.size()); }
  const std::string& NodeName(int node) const override { return names_[node]; }
  // Returns the node's current connection (Reconnect changes it).
  internal::ConnectionId Send(int node, const internal::Command& command,
                              internal::NodeCallback done) override;
  TimerId RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) override;
  bool Cancel(TimerId id) override;
  bool InTransportThread() const override { return in_callback_ > 0; }
  void DeliverToUser(absl::AnyInvocable<void()> fn) override { fn(); }
  bool stopping() const override { return stopping_; }
  void Shutdown() override;
  // The first moment of a shutdown: stopping() is true, and the replies in
  // flight are still to be answered (a real engine may deliver them then).
  void BeginStopping() { stopping_ = true; }
  // Every node connected, with its pending requests in flight.
  std::vector<NodeHealth> Health() const override;
  void SetMessageHandler(MessageHandler handler) override { handler_ = std::move(handler); }
  void Subscribe(const std::vector<std::string>& channels) override {
    for (const auto& c : channels) ++subscribed_[c];
  }
  void Unsubscribe(const std::vector<std::string>& channels) override {
    for (const auto& c : channels) {
      if (--subscribed_[c] <= 0) subscribed_.erase(c);
    }
  }
  // Delivers a pub/sub message as node `node` would (only if subscribed).
  void Publish(int node, const std::string& channel, const std::string& payload) {
    if (subscribed_.count(channel) == 0 || !handler_) return;
    ++in_callback_;
    handler_(node, channel, payload);
    --in_callback_;
  }
  int subscribers(const std::string& channel) const {
    auto it = subscribed_.find(channel);
    return it == subscribed_.end() ? 0 : it->second;
  }

  // Node i executes its oldest pending request and replies. Returns false if
  // it had none.
  bool AnswerOne(int node);
  // Node i executes and replies to everything pending.
  void AnswerAll(int node);
  // Node i executes its pending requests but the replies are lost (the
  // caller sees a timeout): a straggler that did the work.
  void ExecuteSilently(int node);
  // Node i's pending requests time out without executing.
  void TimeOutAll(int node);
  // Answers everything pending on every node, repeatedly, until quiet.
  void AnswerEverything();
  // Moves the clock to `d` later and runs the timers that are due.
  void Advance(absl::Duration d);

  FakeNode& node(int i) { return nodes_[static_cast<size_t>(i)]; }
  // Node i's connection is replaced: its pending requests fail (they may
  // have run: `executed`) and later ones go on a new connection.
  void Reconnect(int node, bool executed);
  // While true, node i refuses every request at once (Send returns 0; the
  // callback gets kUnavailable), as a node behind an open breaker.
  void SetDown(int node, bool down) { down_[static_cast<size_t>(node)] = down; }
  std::deque<Pending>& pending(int i) { return pending_[static_cast<size_t>(i)]; }
  int sent_count(const std::string& op) const;
  size_t timers() const { return timers_.size(); }

 private:
  void Complete(internal::NodeCallback& done, absl::StatusOr<internal::Reply> r);
  // Node `node` executes `p` (every command of a batch) and gives its reply.
  internal::Reply Run(int node, const Pending& p);

  FakeClock* clock_;
  std::vector<FakeNode> nodes_;
  std::vector<std::string> names_;
  std::vector<std::deque<Pending>> pending_;
  std::vector<internal::ConnectionId> connection_;
  std::vector<bool> down_;
  std::map<std::string, int> sent_by_op_;
  std::map<std::pair<internal::Clock::TimePoint, TimerId>, absl::AnyInvocable<void()>> timers_;
  TimerId next_timer_ = 1;
  int in_callback_ = 0;
  MessageHandler handler_;
  std::map<std::string, int> subscribed_;
  bool stopping_ = false;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTS_UNIT_FAKE_TRANSPORT_H_
