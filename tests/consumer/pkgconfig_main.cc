// The one-file consumer compiled with `pkg-config --cflags --libs redlock`:
// every dependency (Abseil, hiredis, threads) must resolve from redlock.pc.
//
//   pc_consumer PORT           a loopback port nobody listens on: the call
//                              fails with kUnavailable (tests/consumer/run.sh)
//   pc_consumer --nodes LIST   real servers: a MultiLock set is held and
//                              released (tests/integration/package_test.cc)

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "multilock/multi_lock.h"
#include "redlock/client.h"

namespace {

int Live(const char* list) {
  absl::StatusOr<std::vector<redlock::Endpoint>> nodes = redlock::ParseEndpointList(list);
  if (!nodes.ok()) {
    std::fprintf(stderr, "FAIL: ParseEndpointList: %s\n", nodes.status().ToString().c_str());
    return 1;
  }
  redlock::Options options;
  options.nodes = *nodes;
  absl::StatusOr<std::unique_ptr<redlock::Client>> client = redlock::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "FAIL: Client::Create: %s\n", client.status().ToString().c_str());
    return 1;
  }
  redlock::MultiLock multi(client->get());
  absl::StatusOr<redlock::MultiLease> lease =
      multi.TryAcquire({"pc/b", "pc/a", "pc/b"}, absl::Seconds(10));
  if (!lease.ok() || lease->resources() != std::vector<std::string>{"pc/a", "pc/b"}) {
    std::fprintf(stderr, "FAIL: MultiLock::TryAcquire: %s\n", lease.status().ToString().c_str());
    return 1;
  }
  const absl::Status released = multi.Release(*lease);
  if (!released.ok()) {
    std::fprintf(stderr, "FAIL: MultiLock::Release: %s\n", released.ToString().c_str());
    return 1;
  }
  std::printf("ok: pkg-config consumer held and released pc/a and pc/b\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--nodes") == 0) return Live(argv[2]);
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
