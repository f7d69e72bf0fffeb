#include "redlock/observer.h"

namespace redlock {

const char* LeaseEventName(LeaseEvent::Kind kind) {
  switch (kind) {
    case LeaseEvent::Kind::kAtRisk:
      return "at_risk";
    case LeaseEvent::Kind::kLost:
      return "lost";
  }
  return "unknown";
}

const char* NodeEventName(NodeEvent::Kind kind) {
  switch (kind) {
    case NodeEvent::Kind::kConnected:
      return "connected";
    case NodeEvent::Kind::kDisconnected:
      return "disconnected";
    case NodeEvent::Kind::kBreakerOpened:
      return "breaker_opened";
    case NodeEvent::Kind::kBreakerClosed:
      return "breaker_closed";
  }
  return "unknown";
}

}  // namespace redlock
