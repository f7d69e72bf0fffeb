// Exposing a client's metrics from a service: a MetricsCollector as the
// client's observer, and its Prometheus text served at /metrics. The library
// runs no HTTP server; any server the service already has does this job.
// Here a minimal one on loopback, so the example runs by itself:
//
//   metrics_exporter --nodes 127.0.0.1:7001,...   # or REDLOCK_NODES; else a local fleet
//   curl http://127.0.0.1:9464/metrics
//
// --self-check takes a few locks, fetches its own /metrics once and checks
// the counts (what the project's test runs).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/client.h"
#include "redlock/metrics.h"
#include "redlock/options.h"
#include "testkit/fleet.h"

ABSL_FLAG(std::string, nodes, "",
          "The Redis masters (default: $REDLOCK_NODES, else a local fleet).");
ABSL_FLAG(int, port, 9464, "The loopback port /metrics is served on (0: any free port).");
ABSL_FLAG(bool, self_check, false, "Take a few locks, fetch /metrics once, check it, exit.");

namespace {

// Answers every connection with the collector's text (one request each).
void Serve(int listen_fd, const redlock::MetricsCollector& metrics, int max_requests) {
  for (int served = 0; served < max_requests; ++served) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    char request[4096];
    (void)!read(fd, request, sizeof(request));  // "GET /metrics HTTP/1.1" ...
    std::string body = metrics.PrometheusText();
    std::string response = absl::StrCat(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: ",
        body.size(), "\r\nConnection: close\r\n\r\n", body);
    (void)!write(fd, response.data(), response.size());
    close(fd);
  }
}

std::string Fetch(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const char kRequest[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    (void)!write(fd, kRequest, sizeof(kRequest) - 1);
    char buf[65536];
    for (int i = 0; i < 1000; ++i) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::unique_ptr<redlock::testkit::Fleet> fleet;
  redlock::Options options;
  if (int rc = redlock::testkit::ExampleNodes("metrics_exporter", absl::GetFlag(FLAGS_nodes), 3,
                                              &fleet, &options);
      rc != 0) {
    return rc;
  }

  // The one line a service adds: the collector is the client's observer.
  auto metrics = std::make_shared<redlock::MetricsCollector>();
  options.observer = metrics;
  absl::StatusOr<std::unique_ptr<redlock::Client>> client = redlock::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "metrics_exporter: %s\n", client.status().ToString().c_str());
    return 1;
  }

  int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port =
      htons(static_cast<uint16_t>(absl::GetFlag(FLAGS_self_check) ? 0 : absl::GetFlag(FLAGS_port)));
  socklen_t len = sizeof(addr);
  if (bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd, 16) != 0 ||
      getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("metrics_exporter: bind");
    return 1;
  }
  const int port = ntohs(addr.sin_port);

  if (!absl::GetFlag(FLAGS_self_check)) {
    std::printf("serving http://127.0.0.1:%d/metrics (Ctrl-C to stop)\n", port);
    std::fflush(stdout);
    Serve(listen_fd, *metrics, 1 << 30);
    return 0;
  }
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<redlock::Lease> l =
        (*client)->TryAcquire(absl::StrCat("exporter/", i), absl::Seconds(10));
    if (l.ok()) (void)(*client)->Release(*l);
  }
  std::thread server([&] { Serve(listen_fd, *metrics, 1); });
  std::string response = Fetch(port);
  server.join();
  close(listen_fd);
  bool ok = absl::StartsWith(response, "HTTP/1.1 200 OK") &&
            absl::StrContains(response, "redlock_acquisitions_total{outcome=\"succeeded\"} 5") &&
            absl::StrContains(response, "redlock_releases_total{outcome=\"succeeded\"} 5");
  std::printf("%s", response.c_str());
  std::fprintf(stderr, "metrics_exporter: self-check %s\n", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}
