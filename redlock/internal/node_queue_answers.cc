// One node's queue, its answers (node_queue.h): replies matched to the
// requests in order, deadlines, and the circuit breaker with its probes.
// Sending and writing are in node_queue.cc.

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/node_queue.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// ---- Replies --------------------------------------------------------------------------

bool NodeQueue::ResyncLocked(const Reply& reply, std::vector<NodeCallback>* lost) {
  Requests& q = requests_;
  if (reply.type != Reply::Type::kString || !absl::StartsWith(reply.str, "redlock-")) return false;
  size_t at = 0;
  while (at < q.fifo.size() &&
         (q.fifo[at]->kind == Request::Kind::kRequest || q.fifo[at]->echo != reply.str)) {
    ++at;
  }
  if (at == 0 || at == q.fifo.size()) return false;  // in step, or no nonce of ours
  for (size_t i = 0; i < at; ++i) {
    Request* r = q.fifo.front();
    q.fifo.pop_front();
    if (q.expired > 0) --q.expired;
    if (r->kind == Request::Kind::kProbe) breaker_.probe_in_flight = false;
    if (r->done) lost->push_back(std::move(r->done));
    FreeRequestLocked(r);
  }
  q.unwritten = std::min(q.unwritten, q.fifo.size());
  return true;
}

void NodeQueue::Dispatch(std::vector<Reply>& replies, bool redirects, std::string* failure) {
  std::vector<std::pair<NodeCallback, Reply>> ready;
  std::vector<NodeCallback> lost;
  {
    std::unique_lock<std::mutex> lock(mu_);
    Requests& q = requests_;
    ready.swap(q.ready);
    breaker_.last_reply_at = Clock::now();
    for (Reply& reply : replies) {
      if (q.fifo.empty()) {
        *failure = absl::StrCat("unexpected reply from the node: ", reply.Describe());
        break;
      }
      // The nonce of a marker or probe further on: what is ahead of it
      // will never be answered.
      ResyncLocked(reply, &lost);
      Request* r = q.fifo.front();
      if (!Fits(*r, reply)) {
        // Left in the FIFO, so Disconnected fails its request with this message.
        *failure = absl::StrCat("the node sent ", reply.Describe(), ", which cannot answer ", r->op,
                                " (not a Redis server, or its replies are out of step "
                                "with the requests): reconnecting");
        break;
      }
      if (r->parts_left > 1) {
        // A command of several (Command::replies): the last reply completes
        // it. Their array is sized once, at the first.
        if (r->parts.empty()) r->parts.reserve(r->parts_left);
        --r->parts_left;
        r->parts.push_back(std::move(reply));
        continue;
      }
      if (!r->parts.empty()) {
        r->parts.push_back(std::move(reply));
        reply = Reply::Array(std::move(r->parts));
        r->parts.clear();
      }
      q.fifo.pop_front();
      // Answered, so written (its writer may not have said so yet).
      q.unwritten = std::min(q.unwritten, q.fifo.size());
      if (q.expired > 0) {
        // Its deadline passed: the caller has counted it as a "no" already.
        // But the node answers again, in step with its requests: it is not
        // silent, so its breaker closes now (waiting for a probe would fail
        // every request meanwhile, thousands under load, for a node that
        // only stalled).
        --q.expired;
        if (r->kind == Request::Kind::kProbe) breaker_.probe_in_flight = false;
        // Passed over by a shutdown (Command::drain), not by its deadline
        // (which takes `done`): it still gets its answer.
        if (r->drain && r->done) ready.emplace_back(std::move(r->done), std::move(reply));
        CloseBreakerLocked("answering again");
        FreeRequestLocked(r);
        continue;
      }
      switch (r->kind) {
        case Request::Kind::kProbe:
          breaker_.probe_in_flight = false;
          CloseBreakerLocked("probe answered");
          breaker_.last_error.clear();
          break;
        case Request::Kind::kMarker:
          break;  // in step
        case Request::Kind::kRequest:
          // Whatever it is (a NOSCRIPT included): its caller decides.
          if (r->done) ready.emplace_back(std::move(r->done), std::move(reply));
          break;
      }
      FreeRequestLocked(r);
    }
  }
  for (NodeCallback& done : lost) {
    done(LostReplyError());
  }
  for (auto& [done, reply] : ready) {
    // A cluster's master redirecting the command: its locator learns where
    // the slot is before the command's caller decides what to do.
    if (redirects) host_.BeforeDelivery(index_, reply);
    done(std::move(reply));
  }
  ready.clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (requests_.ready.capacity() < ready.capacity()) requests_.ready.swap(ready);
}

// ---- Deadlines and the breaker ------------------------------------------------------

bool NodeQueue::DeadlineDue(TimePoint now) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Requests& q = requests_;
  return state_ == State::kReady && q.expired + q.unwritten < q.fifo.size() &&
         q.fifo[q.expired]->deadline <= now;
}

void NodeQueue::Expire(TimePoint now, std::vector<NodeCallback>* expired) {
  std::lock_guard<std::mutex> lock(mu_);
  Requests& q = requests_;
  bool missed = false;
  // Requests still waiting for this process to write them do not expire:
  // their deadline starts when they are on the wire.
  const size_t written = q.fifo.size() - q.unwritten;
  while (q.expired < written && q.fifo[q.expired]->deadline <= now) {
    Request& r = *q.fifo[q.expired];
    ++q.expired;
    if (r.done) expired->push_back(std::move(r.done));
    // An expired probe stays outstanding until its late reply: a new one
    // could not be answered before it anyway (one ordered stream).
    missed = true;
  }
  // Late, or lost: the next request goes behind a marker that tells.
  if (missed) q.resync = true;
  for (auto& w : q.waiting) {
    if (w.first->done && w.first->deadline <= now) expired->push_back(std::move(w.first->done));
  }
  // The breaker means "this node is silent": a node that keeps answering,
  // only late (CPU starved, or slower than node_timeout), misses those
  // deadlines (each a "no" vote) but is not shut out.
  //
  // Silent means from the last reply *read*: a late reply read only when
  // the deadline came (nobody polled in between) would make the node look
  // alive at the expiry. So the check is also made later, while an expired
  // request still awaits its reply (NextWake: node_timeout after the last
  // reply), until a reply comes or the breaker opens.
  const bool silent =
      now - breaker_.last_reply_at >= absl::ToChronoNanoseconds(limits_.node_timeout);
  if (silent && (missed || (q.expired > 0 && !breaker_.open))) {
    OpenBreakerLocked(absl::StrCat("no reply within ", absl::FormatDuration(limits_.node_timeout)));
  }
}

NodeQueue::Maintenance NodeQueue::Maintain(TimePoint now) const {
  std::lock_guard<std::mutex> lock(mu_);
  Maintenance m;
  m.write_error = output_.write_error;
  // A probe counts against max_in_flight_per_node like any request; a node
  // with that many unanswered commands is not probed until it answers some
  // (each late reply triggers a probe).
  m.probe = state_ == State::kReady && breaker_.open && !breaker_.probe_in_flight &&
            now >= breaker_.next_probe && LoadLocked() < limits_.max_in_flight;
  m.stale = state_ == State::kReady && breaker_.open && !requests_.fifo.empty() &&
            now - std::max(breaker_.last_reply_at, breaker_.opened_at) >=
                absl::ToChronoNanoseconds(kStaleConnection);
  return m;
}

void NodeQueue::SendProbe(uint64_t probe_id) {
  std::unique_lock<std::mutex> lock(mu_);
  Request* r = NewRequestLocked();
  r->kind = Request::Kind::kProbe;
  r->op = "a PING probe";
  r->deadline = Clock::now() + absl::ToChronoNanoseconds(limits_.node_timeout);
  r->echo = absl::StrCat("redlock-probe-", probe_id);
  breaker_.probe_in_flight = true;
  breaker_.next_probe = Clock::now() + absl::ToChronoNanoseconds(limits_.probe_interval);
  std::string ping = EncodeCommand({"PING", r->echo});
  EnqueueLocked(lock, r, ping);
}

NodeQueue::TimePoint NodeQueue::NextWake(TimePoint now, TimePoint wake) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Requests& q = requests_;
  if (q.expired + q.unwritten < q.fifo.size()) wake = std::min(wake, q.fifo[q.expired]->deadline);
  for (auto& w : q.waiting) {
    if (w.first->done) {
      wake = std::min(wake, w.first->deadline);
      break;
    }
  }
  if (!output_.write_error.empty()) wake = now;
  // Expire's later silence check (an expired request still unanswered).
  if (q.expired > 0 && !breaker_.open) {
    wake = std::min(wake, breaker_.last_reply_at + absl::ToChronoNanoseconds(limits_.node_timeout));
  }
  // Maintain's stale check: silent for kStaleConnection with the breaker
  // open and requests waiting (expired ones have no deadline left).
  if (state_ == State::kReady && breaker_.open && !q.fifo.empty()) {
    wake = std::min(wake, std::max(breaker_.last_reply_at, breaker_.opened_at) +
                              absl::ToChronoNanoseconds(kStaleConnection));
  }
  if (state_ == State::kReady && breaker_.open && !breaker_.probe_in_flight &&
      LoadLocked() < limits_.max_in_flight) {
    wake = std::min(wake, breaker_.next_probe);
  }
  return wake;
}

void NodeQueue::OpenBreaker(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  OpenBreakerLocked(why);
}

void NodeQueue::OpenBreakerLocked(const std::string& why) {
  breaker_.last_error = why;
  if (!breaker_.open) {
    EventLocked(NodeEvent::Kind::kBreakerOpened, why);
    breaker_.open = true;
    breaker_.opened_at = Clock::now();
    breaker_.next_probe = breaker_.opened_at + absl::ToChronoNanoseconds(limits_.probe_interval);
  }
}

void NodeQueue::CloseBreakerLocked(absl::string_view why) {
  if (!breaker_.open) return;
  EventLocked(NodeEvent::Kind::kBreakerClosed, std::string(why));
  breaker_.open = false;
  breaker_.last_error.clear();
}

}  // namespace redlock::internal
