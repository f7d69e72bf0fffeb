// The one-file consumer compiled with `pkg-config --cflags --libs redlock`
// (tests/consumer/run.sh): every dependency (Abseil, hiredis, threads) must
// resolve from redlock.pc. argv[1]: a loopback port nobody listens on.

#include <cstdio>
#include <memory>
#include <string>

#include "multilock/multi_lock.h"
#include "redlock/client.h"

int main(int argc, char** argv) {
  const std::string port = argc > 1 ? argv[1] : "1";
  absl::StatusOr<redlock::Endpoint> node =
      redlock::ParseEndpoint("redis://:pw@127.0.0.1:" + port + "/2");
  if (!node.ok() || node->db != 2 || node->password != "pw") {
    std::fprintf(stderr, "FAIL: ParseEndpoint: %s\n", node.status().ToString().c_str());
    return 1;
  }
  redlock::Options options;
  options.nodes = {*node};
  options.node_timeout = absl::Milliseconds(20);
  options.connect_timeout = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<redlock::Client>> client = redlock::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "FAIL: Client::Create: %s\n", client.status().ToString().c_str());
    return 1;
  }
  redlock::MultiLock multi(client->get());
  absl::StatusOr<redlock::MultiLease> lease = multi.TryAcquire({"b", "a", "b"}, absl::Seconds(5));
  if (!absl::IsUnavailable(lease.status())) {
    std::fprintf(stderr, "FAIL: MultiLock::TryAcquire: %s\n", lease.status().ToString().c_str());
    return 1;
  }
  std::printf("ok: pkg-config consumer (%s)\n", lease.status().ToString().c_str());
  return 0;
}
