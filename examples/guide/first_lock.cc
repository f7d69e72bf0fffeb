// examples/guide/first_lock.cc: the README's first lock, a complete program.
// It takes "orders/42" on three local masters, then releases it:
//
//   build/examples/guide/guide_first_lock
#include <cstdio>

#include "redlock/client.h"

int main() {
  redlock::Options options;
  options.nodes = *redlock::ParseEndpointList("127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003");
  absl::StatusOr<std::unique_ptr<redlock::Client>> client = redlock::Client::Create(options);
  if (!client.ok()) return 1;

  absl::StatusOr<redlock::Lease> lease = (*client)->Acquire("orders/42", absl::Seconds(10));
  if (!lease.ok()) {  // kAborted: held by someone else; kUnavailable: too few nodes answered
    std::fprintf(stderr, "%s\n", std::string(lease.status().message()).c_str());
    return 2;
  }
  // ... work that must finish before lease->valid_until() ...
  return (*client)->Release(*lease).ok() ? 0 : 3;
}
