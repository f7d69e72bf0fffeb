#include "redlock/metrics.h"

#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace redlock {
namespace {

// Seconds: from 100 us (a round trip on loopback) to 10 s (long waits).
constexpr std::array<double, 14> kBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                            0.025,  0.05,    0.1,    0.25,  0.5,    1,     10};

struct Histogram {
  std::array<int64_t, kBounds.size()> buckets{};  // not cumulative
  int64_t count = 0;
  double sum = 0;
  void Add(double seconds) {
    for (size_t i = 0; i < kBounds.size(); ++i) {
      if (seconds <= kBounds[i]) {
        ++buckets[i];
        break;
      }
    }
    ++count;
    sum += seconds;
  }
};

// A label value in the exposition format: backslash, quote and newline escaped.
std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string Render(const Labels& labels, const std::string& extra = "") {
  std::string out;
  for (const auto& [k, v] : labels) {
    absl::StrAppend(&out, out.empty() ? "" : ",", k, "=\"", Escape(v), "\"");
  }
  if (!extra.empty()) absl::StrAppend(&out, out.empty() ? "" : ",", extra);
  return out.empty() ? "" : absl::StrCat("{", out, "}");
}

void Header(std::string* out, const std::string& name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

std::string Number(double v) { return absl::StrFormat("%.9g", v); }

}  // namespace

constexpr size_t kKinds = 9;    // Outcome::Kind
constexpr size_t kAnswers = 5;  // NodeResult::Answer
constexpr size_t kLeaseEvents = 2;
constexpr size_t kNodeEvents = 4;

constexpr Outcome::Kind kAllKinds[kKinds] = {
    Outcome::Kind::kSucceeded,         Outcome::Kind::kHeldElsewhere,
    Outcome::Kind::kQuorumUnreachable, Outcome::Kind::kNoValidityLeft,
    Outcome::Kind::kWaitExpired,       Outcome::Kind::kCancelled,
    Outcome::Kind::kLeaseLost,         Outcome::Kind::kInternal,
    Outcome::Kind::kPlaceLost};

// Fixed arrays indexed by enum values: recording an event allocates nothing.
struct NodeStats {
  std::string name;
  std::array<int64_t, kAnswers> answers{};
  Histogram latency;
  std::array<int64_t, kNodeEvents> events{};
  int up = -1;  // unknown until the first connection event
  int breaker_open = -1;
};

struct MetricsCollector::State {
  mutable std::mutex mu;
  std::array<int64_t, kKinds> acquisitions{}, extensions{}, releases{};
  std::array<Histogram, kKinds> acquisition_duration;
  int64_t attempts = 0;
  std::array<int64_t, kLeaseEvents> lease_events{};
  std::vector<NodeStats> nodes;  // in the order events name them

  NodeStats& Node(size_t hint, const std::string& name) {
    if (hint < nodes.size() && nodes[hint].name == name) return nodes[hint];
    for (NodeStats& n : nodes) {
      if (n.name == name) return n;
    }
    nodes.emplace_back();
    nodes.back().name = name;
    return nodes.back();
  }

  void CountRound(const Outcome& outcome) {
    for (size_t i = 0; i < outcome.nodes.size(); ++i) {
      const NodeResult& r = outcome.nodes[i];
      NodeStats& n = Node(i, r.node);
      ++n.answers[static_cast<size_t>(r.answer)];
      if (r.answer == NodeResult::Answer::kYes || r.answer == NodeResult::Answer::kRefused) {
        n.latency.Add(absl::ToDoubleSeconds(r.latency));
      }
    }
  }
};

namespace {

void PerOutcome(std::string* out, const char* name, const char* help,
                const std::array<int64_t, kKinds>& counts) {
  Header(out, name, "counter", help);
  for (size_t k = 0; k < kKinds; ++k) {
    if (counts[k] == 0) continue;
    absl::StrAppend(out, name, Render({{"outcome", OutcomeKindName(kAllKinds[k])}}), " ", counts[k],
                    "\n");
  }
}

void HistogramLines(std::string* out, const std::string& name, const Labels& labels,
                    const Histogram& h) {
  int64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += h.buckets[i];
    absl::StrAppend(out, name, "_bucket",
                    Render(labels, absl::StrCat("le=\"", Number(kBounds[i]), "\"")), " ",
                    cumulative, "\n");
  }
  absl::StrAppend(out, name, "_bucket", Render(labels, "le=\"+Inf\""), " ", h.count, "\n");
  absl::StrAppend(out, name, "_sum", Render(labels), " ", Number(h.sum), "\n");
  absl::StrAppend(out, name, "_count", Render(labels), " ", h.count, "\n");
}

}  // namespace

MetricsCollector::MetricsCollector() : state_(std::make_unique<State>()) {}
MetricsCollector::~MetricsCollector() = default;

void MetricsCollector::OnAcquire(const AcquireEvent& event) {
  const size_t k = static_cast<size_t>(event.outcome.kind);
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->acquisitions[k];
  state_->acquisition_duration[k].Add(absl::ToDoubleSeconds(event.outcome.elapsed));
  state_->attempts += event.outcome.attempts;
  state_->CountRound(event.outcome);
}

void MetricsCollector::OnExtend(const ExtendEvent& event) {
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->extensions[static_cast<size_t>(event.outcome.kind)];
  state_->CountRound(event.outcome);
}

void MetricsCollector::OnRelease(const ReleaseEvent& event) {
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->releases[static_cast<size_t>(event.outcome.kind)];
  state_->CountRound(event.outcome);
}

void MetricsCollector::OnLease(const LeaseEvent& event) {
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->lease_events[static_cast<size_t>(event.kind)];
}

void MetricsCollector::OnNode(const NodeEvent& event) {
  std::lock_guard<std::mutex> lock(state_->mu);
  NodeStats& n = state_->Node(state_->nodes.size(), event.node);
  ++n.events[static_cast<size_t>(event.kind)];
  switch (event.kind) {
    case NodeEvent::Kind::kConnected:
      n.up = 1;
      break;
    case NodeEvent::Kind::kDisconnected:
      n.up = 0;
      break;
    case NodeEvent::Kind::kBreakerOpened:
      n.breaker_open = 1;
      break;
    case NodeEvent::Kind::kBreakerClosed:
      n.breaker_open = 0;
      break;
  }
}

std::string MetricsCollector::PrometheusText() const {
  std::string out;
  const State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  PerOutcome(&out, "redlock_acquisitions_total", "Acquisitions finished, by outcome.",
             s.acquisitions);
  const char* duration = "redlock_acquisition_duration_seconds";
  Header(&out, duration, "histogram", "Duration of acquisitions (waits included), by outcome.");
  for (size_t k = 0; k < kKinds; ++k) {
    if (s.acquisition_duration[k].count == 0) continue;
    HistogramLines(&out, duration, {{"outcome", OutcomeKindName(kAllKinds[k])}},
                   s.acquisition_duration[k]);
  }
  Header(&out, "redlock_acquisition_attempts_total", "counter",
         "Attempts made by all acquisitions.");
  absl::StrAppend(&out, "redlock_acquisition_attempts_total ", s.attempts, "\n");
  PerOutcome(&out, "redlock_extensions_total", "Extensions finished, by outcome.", s.extensions);
  PerOutcome(&out, "redlock_releases_total", "Releases finished, by outcome.", s.releases);

  Header(&out, "redlock_node_answers_total", "counter", "Answers of the nodes in every round.");
  for (const NodeStats& n : s.nodes) {
    for (size_t a = 0; a < kAnswers; ++a) {
      if (n.answers[a] == 0) continue;
      absl::StrAppend(
          &out, "redlock_node_answers_total",
          Render({{"node", n.name}, {"answer", AnswerName(static_cast<NodeResult::Answer>(a))}}),
          " ", n.answers[a], "\n");
    }
  }
  const char* latency = "redlock_node_latency_seconds";
  Header(&out, latency, "histogram", "Time from a round's start to a node's answer.");
  for (const NodeStats& n : s.nodes) {
    if (n.latency.count > 0) HistogramLines(&out, latency, {{"node", n.name}}, n.latency);
  }
  Header(&out, "redlock_lease_events_total", "counter", "Leases at risk or lost while renewed.");
  for (size_t e = 0; e < kLeaseEvents; ++e) {
    if (s.lease_events[e] == 0) continue;
    absl::StrAppend(&out, "redlock_lease_events_total",
                    Render({{"event", LeaseEventName(static_cast<LeaseEvent::Kind>(e))}}), " ",
                    s.lease_events[e], "\n");
  }
  Header(&out, "redlock_node_events_total", "counter", "Node connection state changes.");
  for (const NodeStats& n : s.nodes) {
    for (size_t e = 0; e < kNodeEvents; ++e) {
      if (n.events[e] == 0) continue;
      absl::StrAppend(
          &out, "redlock_node_events_total",
          Render({{"node", n.name}, {"event", NodeEventName(static_cast<NodeEvent::Kind>(e))}}),
          " ", n.events[e], "\n");
    }
  }
  Header(&out, "redlock_node_up", "gauge", "1 while the node's connection is established.");
  for (const NodeStats& n : s.nodes) {
    if (n.up >= 0)
      absl::StrAppend(&out, "redlock_node_up", Render({{"node", n.name}}), " ", n.up, "\n");
  }
  Header(&out, "redlock_node_breaker_open", "gauge", "1 while the node's circuit breaker is open.");
  for (const NodeStats& n : s.nodes) {
    if (n.breaker_open >= 0) {
      absl::StrAppend(&out, "redlock_node_breaker_open", Render({{"node", n.name}}), " ",
                      n.breaker_open, "\n");
    }
  }
  return out;
}

int64_t MetricsCollector::acquisitions(Outcome::Kind outcome) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->acquisitions[static_cast<size_t>(outcome)];
}
int64_t MetricsCollector::extensions(Outcome::Kind outcome) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->extensions[static_cast<size_t>(outcome)];
}
int64_t MetricsCollector::releases(Outcome::Kind outcome) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->releases[static_cast<size_t>(outcome)];
}
int64_t MetricsCollector::lease_events(LeaseEvent::Kind event) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->lease_events[static_cast<size_t>(event)];
}

}  // namespace redlock
