// redlock/metrics.h: counters and latency histograms of a client, rendered
// in the Prometheus text exposition format.
//
//   auto metrics = std::make_shared<redlock::MetricsCollector>();
//   options.observer = metrics;
//   auto client = redlock::Client::Create(options);
//   ...
//   // in the service's /metrics handler (the library runs no HTTP server):
//   response.body = metrics->PrometheusText();
//
// Metrics (every name starts with redlock_):
//   acquisitions_total{outcome}                 counter
//   acquisition_duration_seconds{outcome}       histogram, the whole call (waits included)
//   acquisition_attempts_total                  counter, attempts of all acquisitions
//   extensions_total{outcome}, releases_total{outcome}   counters
//   node_answers_total{node,answer}             counter, every node of every round
//   node_latency_seconds{node}                  histogram, round start to the node's answer
//   lease_events_total{event}                   counter: at_risk, lost
//   node_events_total{node,event}               counter: connected, disconnected,
//                                               breaker_opened, breaker_closed
//   node_up{node}, node_breaker_open{node}      gauges (1 or 0), from the node events
// Outcome labels are OutcomeKindName() values (redlock/outcome.h).
//
// Thread-safety: every method may be called from any thread.

#ifndef REDLOCK_METRICS_H_
#define REDLOCK_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "redlock/observer.h"

namespace redlock {

// MetricsCollector: an Observer that counts every event and renders the counts
// as Prometheus text (see the top of this file). Set it as Options::observer.
class MetricsCollector : public Observer {
 public:
  MetricsCollector();
  ~MetricsCollector() override;

  // Counts the acquisition: its outcome, attempts, duration and every node's
  // answer and latency.
  void OnAcquire(const AcquireEvent& event) override;
  // Counts the extension, its outcome and its round's node answers and latencies.
  void OnExtend(const ExtendEvent& event) override;
  // Counts the release, its outcome and its round's node answers and latencies.
  void OnRelease(const ReleaseEvent& event) override;
  // Counts the lease event (at_risk, lost).
  void OnLease(const LeaseEvent& event) override;
  // Counts the node event and updates the node's up and breaker gauges.
  void OnNode(const NodeEvent& event) override;

  // Every metric, in the Prometheus text exposition format (version 0.0.4).
  std::string PrometheusText() const;

  // Counts, for code that reads them directly.
  int64_t acquisitions(Outcome::Kind outcome) const;
  // Extensions counted with this outcome.
  int64_t extensions(Outcome::Kind outcome) const;
  // Releases counted with this outcome.
  int64_t releases(Outcome::Kind outcome) const;
  // Lease events of this kind counted.
  int64_t lease_events(LeaseEvent::Kind event) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace redlock

#endif  // REDLOCK_METRICS_H_
