// The reply path: bytes from a node through the reply reader, the vote
// decoding of every request kind, and the operations that act on the votes.
//
// Input: byte 0 chooses the client (nodes, fencing, durability, limits),
// byte 1 seeds the sizes of the pieces the bytes arrive in, the rest is what
// the node sends.

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz/entries.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/client_impl.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/durability.h"
#include "redlock/internal/reply_reader.h"
#include "redlock/internal/votes.h"
#include "redlock/lease.h"

namespace redlock::fuzz {
namespace {

using internal::Reply;

// RESP for `r`, as a node would send it: the reader must read it back as is.
void Encode(const Reply& r, std::string* out) {
  switch (r.type) {
    case Reply::Type::kNil:
      out->append("$-1\r\n");
      return;
    case Reply::Type::kStatus:
      absl::StrAppend(out, "+", r.str, "\r\n");
      return;
    case Reply::Type::kError:
      absl::StrAppend(out, "-", r.str, "\r\n");
      return;
    case Reply::Type::kInteger:
      absl::StrAppend(out, ":", r.integer, "\r\n");
      return;
    case Reply::Type::kString:
      absl::StrAppend(out, "$", r.str.size(), "\r\n", r.str, "\r\n");
      return;
    case Reply::Type::kArray:
      absl::StrAppend(out, "*", r.elements.size(), "\r\n");
      for (const Reply& e : r.elements) Encode(e, out);
      return;
  }
}

std::string Encoded(const Reply& r) {
  std::string s;
  Encode(r, &s);
  return s;
}

// Sizes of the pieces a stream arrives in: 1 to 64 bytes, or larger runs.
class Pieces {
 public:
  explicit Pieces(uint8_t seed) : state_(seed * 2654435761u + 1) {}
  size_t Next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    return (state_ & 7) == 0 ? 4096 : 1 + state_ % 64;
  }

 private:
  uint32_t state_;
};

struct Framed {
  std::vector<Reply> replies;
  std::string error;  // the reader's, if it failed
};

Framed Frame(absl::string_view bytes, uint8_t seed, internal::ReplyLimits limits) {
  Framed out;
  internal::ReplyReader reader(limits);
  Pieces pieces(seed);
  size_t at = 0;
  while (at < bytes.size() && out.error.empty() && out.replies.size() < 256) {
    const size_t n = std::min(pieces.Next(), bytes.size() - at);
    if (!reader.Feed(bytes.data() + at, n)) {
      out.error = reader.error();
      break;
    }
    at += n;
    for (;;) {
      Reply r;
      const int got = reader.Next(&r);
      if (got < 0) {
        out.error = reader.error();
        REDLOCK_FUZZ_CHECK(!out.error.empty(), "a reader error says why");
      }
      if (got <= 0) break;
      out.replies.push_back(std::move(r));
    }
  }
  return out;
}

// Every decoding of one reply: none may crash, each gives a vote.
void DecodeEverywhere(const Reply& reply) {
  const absl::StatusOr<Reply> r = reply;
  (void)reply.Describe();
  for (uint8_t expect : {0, 1, 2, 4, 8, 16, 3, 5, 31}) (void)internal::ReplyFits(expect, reply);
  std::vector<uint64_t> counters;
  for (auto form : {internal::AcquireForm::kSet, internal::AcquireForm::kScript,
                    internal::AcquireForm::kFencing}) {
    for (size_t keys : {1, 2, 3}) {
      internal::Vote v = internal::AcquireVote(r, form, keys, &counters);
      if (form == internal::AcquireForm::kFencing && v.vote == internal::Round::Vote::kYes) {
        REDLOCK_FUZZ_CHECK(counters.size() == keys, "a fencing grant has a counter per key");
      }
    }
  }
  (void)internal::CommitVote(r);
  (void)internal::ExtendVote(r);
  (void)internal::ReleaseVote(r);
  Options::Durability d;
  d.replicas = 1;
  (void)internal::DurabilityVote(r, d);
  d.fsync = true;
  (void)internal::DurabilityVote(r, d);
  if (reply.type == Reply::Type::kString) (void)internal::ParseCounter(reply.str);
}

class FakeClock final : public internal::Clock {
 public:
  TimePoint Now() const override { return now_; }
  void AdvanceTo(TimePoint t) { now_ = std::max(now_, t); }

 private:
  TimePoint now_ = TimePoint() + std::chrono::hours(1);
};

// Answers every request, in the order they were sent (over all nodes), with
// the next of `answers`; once they run out, with "no reply" (a timeout).
class ReplayTransport final : public internal::Transport {
 public:
  ReplayTransport(int nodes, FakeClock* clock, std::deque<absl::StatusOr<Reply>> answers)
      : clock_(clock), answers_(std::move(answers)) {
    for (int i = 0; i < nodes; ++i) names_.push_back(absl::StrCat("fuzz", i, ":6379"));
  }

  int size() const override { return static_cast<int>(names_.size()); }
  const std::string& NodeName(int node) const override { return names_[node]; }
  internal::ConnectionId Send(int node, const internal::Command& command,
                              internal::NodeCallback done) override {
    REDLOCK_FUZZ_CHECK(node >= 0 && node < size(), "a node of the client");
    pending_.push_back(std::move(done));
    return static_cast<internal::ConnectionId>(node + 1);
  }
  std::vector<NodeHealth> Health() const override {
    std::vector<NodeHealth> out(names_.size());
    for (size_t i = 0; i < names_.size(); ++i) out[i].node = names_[i];
    return out;
  }
  TimerId RunAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) override {
    const TimerId id = next_timer_++;
    timers_.emplace(std::make_pair(clock_->Now() + absl::ToChronoNanoseconds(delay), id),
                    std::move(fn));
    return id;
  }
  bool Cancel(TimerId id) override {
    for (auto it = timers_.begin(); it != timers_.end(); ++it) {
      if (it->first.second == id) {
        timers_.erase(it);
        return true;
      }
    }
    return false;
  }
  void DeliverToUser(absl::AnyInvocable<void()> fn) override { fn(); }
  bool InTransportThread() const override { return in_callback_ > 0; }
  bool stopping() const override { return stopping_; }
  void Shutdown() override {
    if (stopping_) return;
    stopping_ = true;
    for (int round = 0; round < 100 && (!pending_.empty() || !timers_.empty()); ++round) {
      auto due = std::move(timers_);
      timers_.clear();
      for (auto& [key, fn] : due) Run(fn);
      while (!pending_.empty()) {
        internal::NodeCallback done = std::move(pending_.front());
        pending_.pop_front();
        ++in_callback_;
        done(absl::CancelledError("the client is shutting down"));
        --in_callback_;
      }
    }
  }
  void SetMessageHandler(MessageHandler handler) override {}
  void Subscribe(const std::vector<std::string>&) override {}
  void Unsubscribe(const std::vector<std::string>&) override {}

  // Answers requests and runs timers until `done()` or nothing is left (or
  // the bounds are reached).
  template <typename F>
  void RunUntil(F done) {
    for (int step = 0; step < 2000 && !done(); ++step) {
      if (!pending_.empty()) {
        internal::NodeCallback cb = std::move(pending_.front());
        pending_.pop_front();
        absl::StatusOr<Reply> answer = absl::UnavailableError("no reply within 50ms");
        if (!answers_.empty()) {
          answer = std::move(answers_.front());
          answers_.pop_front();
        }
        ++in_callback_;
        cb(std::move(answer));
        --in_callback_;
      } else if (!timers_.empty()) {
        clock_->AdvanceTo(timers_.begin()->first.first);
        auto fn = std::move(timers_.begin()->second);
        timers_.erase(timers_.begin());
        Run(fn);
      } else {
        return;
      }
    }
  }

 private:
  void Run(absl::AnyInvocable<void()>& fn) {
    ++in_callback_;
    fn();
    --in_callback_;
  }

  FakeClock* clock_;
  std::deque<absl::StatusOr<Reply>> answers_;
  std::vector<std::string> names_;
  std::deque<internal::NodeCallback> pending_;
  std::map<std::pair<internal::Clock::TimePoint, TimerId>, absl::AnyInvocable<void()>> timers_;
  TimerId next_timer_ = 1;
  int in_callback_ = 0;
  bool stopping_ = false;
};

// The client's operations, each answered from the replies in turn.
void DriveClient(uint8_t choice, const Framed& framed) {
  Options o;
  const int nodes = 1 + choice % 5;
  for (int i = 0; i < nodes; ++i) {
    Endpoint e;
    e.host = absl::StrCat("fuzz", i);
    o.nodes.push_back(e);
  }
  o.fencing = (choice & 8) != 0;
  if ((choice & 16) != 0) {
    o.durability.replicas = 1;
    o.durability.fsync = (choice & 128) != 0;
  }
  o.max_attempts = 2;
  o.retry_delay = absl::Milliseconds(10);
  o.retry_jitter = absl::Milliseconds(5);
  REDLOCK_FUZZ_CHECK(ValidateOptions(o).ok(), "the fuzz client's options are valid");

  std::deque<absl::StatusOr<Reply>> answers(framed.replies.begin(), framed.replies.end());
  if (!framed.error.empty()) {
    // The engine fails the connection's requests with the reader's error.
    answers.push_back(absl::UnavailableError(absl::StrCat("protocol error: ", framed.error)));
  }
  FakeClock clock;
  auto* transport = new ReplayTransport(nodes, &clock, std::move(answers));
  {
    internal::ClientImpl client(o, std::unique_ptr<internal::Transport>(transport), &clock);
    const absl::Duration ttl = absl::Seconds(10);

    std::optional<absl::StatusOr<Lease>> one;
    client.TryAcquireAsync("r", ttl, [&](absl::StatusOr<Lease> l) { one.emplace(std::move(l)); });
    transport->RunUntil([&] { return one.has_value(); });

    std::optional<absl::StatusOr<std::vector<Lease>>> set;
    Client::SetRequest call;
    call.resources = {"a", "b", "c"};
    call.ttl = ttl;
    call.max_attempts = 2;
    if ((choice & 32) != 0) {
      // MultiLock's all-nodes mode.
      call.quorum = nodes;
      call.fail_fast_unavailable = true;
    }
    client.StartSet(std::move(call), nullptr,
                    [&](absl::StatusOr<std::vector<Lease>> l) { set.emplace(std::move(l)); });
    transport->RunUntil([&] { return set.has_value(); });
    if (set.has_value() && set->ok()) {
      REDLOCK_FUZZ_CHECK((*set)->size() == 3, "a lease per resource");
      std::optional<absl::StatusOr<std::vector<Lease>>> renewed;
      client.StartExtendSet(
          **set, ttl, (choice & 32) != 0 ? nodes : 0,
          [&](absl::StatusOr<std::vector<Lease>> l) { renewed.emplace(std::move(l)); });
      transport->RunUntil([&] { return renewed.has_value(); });
      std::optional<absl::Status> dropped;
      client.StartReleaseSet(**set, 0, [&](absl::Status st) { dropped.emplace(std::move(st)); });
      transport->RunUntil([&] { return dropped.has_value(); });
    }

    const Lease held = one.has_value() && one->ok() ? **one : Lease::ForToken("r", "tok");
    std::optional<absl::StatusOr<Lease>> extended;
    client.ExtendAsync(held, ttl, [&](absl::StatusOr<Lease> l) { extended.emplace(std::move(l)); });
    transport->RunUntil([&] { return extended.has_value(); });

    std::optional<absl::Status> released;
    client.ReleaseAsync(held, [&](absl::Status s) { released.emplace(std::move(s)); });
    transport->RunUntil([&] { return released.has_value(); });

    std::optional<absl::StatusOr<Lease>> waited;
    client.AcquireAsync("w", ttl, absl::Milliseconds(300), StopToken(),
                        [&](absl::StatusOr<Lease> l) { waited.emplace(std::move(l)); });
    transport->RunUntil([&] { return waited.has_value(); });
  }  // the client's destructor shuts the transport down: every callback runs
}

}  // namespace

int ReplyPath(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t choice = data[0];
  const absl::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  internal::ReplyLimits small;
  small.max_bytes = 512;
  small.max_elements = 8;
  const Framed tight = Frame(bytes, data[1], small);
  const Framed wide = Frame(bytes, data[1], internal::ReplyLimits());
  // Limits only ever cut a stream short: what the tight reader accepts, the
  // wide one reads alike.
  REDLOCK_FUZZ_CHECK(tight.replies.size() <= wide.replies.size(), "limits only cut short");
  for (size_t i = 0; i < tight.replies.size(); ++i) {
    REDLOCK_FUZZ_CHECK(Encoded(tight.replies[i]) == Encoded(wide.replies[i]),
                       "the same reply under both limits");
  }
  for (const Reply& r : wide.replies) {
    DecodeEverywhere(r);
    // A reply read is a reply the reader reads back identically.
    const std::string again = Encoded(r);
    const Framed round = Frame(again, 0, internal::ReplyLimits{again.size() + 1, 1 << 20});
    REDLOCK_FUZZ_CHECK(
        round.error.empty() && round.replies.size() == 1 && Encoded(round.replies[0]) == again,
        "encode, read is the identity");
  }
  DriveClient(choice, (choice & 64) != 0 ? tight : wide);
  return 0;
}

}  // namespace redlock::fuzz
