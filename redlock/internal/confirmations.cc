#include "redlock/internal/confirmations.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/durability.h"

namespace redlock::internal {

using V = Round::Vote;

Confirmations::Confirmations(Transport* transport, const Clock* clock, const Options& options)
    : transport_(transport),
      clock_(clock),
      durability_(options.durability),
      on_(DurabilityOn(options.durability)),
      command_(on_ ? DurabilityCommand(options.durability) : Command()),
      // A probe costs the node's connection at most one durability timeout
      // in four.
      probe_interval_(std::max(options.breaker_probe_interval, 4 * options.durability.timeout)),
      nodes_(static_cast<size_t>(transport->size())) {}

Confirmations::~Confirmations() = default;

std::string Confirmations::Admit(int node, bool* probe) {
  *probe = false;
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& s = nodes_[static_cast<size_t>(node)];
  if (!s.lagging) return "";
  if (!s.probe_out && clock_->Now() >= s.next_probe) {
    s.probe_out = true;
    *probe = true;
    return "";
  }
  return absl::StrCat("not asked: its replicas left the last ", s.missed_in_a_row,
                      " writes unconfirmed (", s.last_miss, "); a write is tried again every ",
                      absl::FormatDuration(probe_interval_));
}

void Confirmations::ProbeUnasked(int node) { Count(node, Vote{V::kCancelled, ""}, true); }

void Confirmations::Follow(int node, ConnectionId conn, bool probe, Confirmed confirmed) {
  if (conn == 0) {
    // Not sent: says nothing of the replicas.
    if (probe) ProbeUnasked(node);
    return;
  }
  auto group = std::make_shared<Group>();
  group->conn = conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeState& s = nodes_[static_cast<size_t>(node)];
    auto [it, fresh] = s.confirming.try_emplace(conn);
    if (!fresh) {
      it->second.push_back(Waiter{conn, probe, std::move(confirmed)});
      return;
    }
  }
  group->writes.push_back(Waiter{conn, probe, std::move(confirmed)});
  Send(node, std::move(group));
}

void Confirmations::Send(int node, std::shared_ptr<Group> group) {
  std::vector<Waiter> elsewhere;
  {
    std::lock_guard<std::mutex> lock(group->mu);
    // Right behind the writes, on their connection (Command::after).
    Command confirm = command_;
    confirm.after = group->conn;
    const ConnectionId conn = transport_->Send(
        node, confirm,
        [this, node, group](absl::StatusOr<Reply> r) { OnAnswer(node, group, std::move(r)); });
    // A write on another connection (one that has been lost since) cannot
    // be confirmed by this WAIT.
    std::vector<Waiter> here;
    for (Waiter& w : group->writes) {
      (conn != 0 && w.conn == conn ? here : elsewhere).push_back(std::move(w));
    }
    group->writes = std::move(here);
  }
  for (Waiter& w : elsewhere) {
    w.confirmed(
        Vote{V::kUnavailable, "granted, but its connection was lost before a WAIT followed"});
  }
}

void Confirmations::OnAnswer(int node, const std::shared_ptr<Group>& group,
                             absl::StatusOr<Reply> r) {
  const Vote cv = DurabilityVote(r, durability_);
  std::vector<Waiter> writes;
  {
    std::lock_guard<std::mutex> lock(group->mu);
    writes = std::move(group->writes);
  }
  bool probe = false;
  for (const Waiter& w : writes) probe = probe || w.probe;
  Count(node, cv, probe);
  std::shared_ptr<Group> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeState& s = nodes_[static_cast<size_t>(node)];
    auto it = s.confirming.find(group->conn);
    if (it != s.confirming.end()) {
      if (it->second.empty()) {
        s.confirming.erase(it);
      } else {
        next = std::make_shared<Group>();
        next->conn = group->conn;
        next->writes.swap(it->second);
      }
    }
  }
  for (Waiter& w : writes) w.confirmed(cv);
  // Behind the last of them: every one was sent on that connection.
  if (next != nullptr) Send(node, std::move(next));
}

void Confirmations::Count(int node, const Vote& confirmation, bool probe) {
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

void Confirmations::AddHealth(std::vector<NodeHealth>* health) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < health->size() && i < nodes_.size(); ++i) {
    (*health)[i].replicas_lagging = nodes_[i].lagging;
  }
}

}  // namespace redlock::internal
