// backends/http.h against a scripted server on loopback: Content-Length and
// chunked replies, keep-alive, a server that never answers, a refused
// connection. No etcd needed (label unit).

#include "backends/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/lock_service.h"
#include "gtest/gtest.h"

namespace redlock::backends {
namespace {

// Accepts one connection and answers each request (read until the end of
// its body) with the next canned reply; an empty reply means "say nothing".
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> replies) : replies_(std::move(replies)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 4);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string endpoint() const { return absl::StrCat("127.0.0.1:", port_); }
  std::vector<std::string> requests;

 private:
  void Serve() {
    int c = accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    std::string buf;
    for (const std::string& reply : replies_) {
      // One request: headers, then Content-Length bytes.
      size_t end = std::string::npos;
      for (int i = 0; i < 1000 && (end = buf.find("\r\n\r\n")) == std::string::npos; ++i) {
        char chunk[4096];
        ssize_t n = recv(c, chunk, sizeof(chunk), 0);
        if (n <= 0) break;
        buf.append(chunk, static_cast<size_t>(n));
      }
      if (end == std::string::npos) break;
      const size_t cl = buf.find("Content-Length: ");
      const size_t body = static_cast<size_t>(std::stoi(buf.substr(cl + 16)));
      for (int i = 0; i < 1000 && buf.size() < end + 4 + body; ++i) {
        char chunk[4096];
        ssize_t n = recv(c, chunk, sizeof(chunk), 0);
        if (n <= 0) break;
        buf.append(chunk, static_cast<size_t>(n));
      }
      requests.push_back(buf.substr(0, end + 4 + body));
      buf.erase(0, end + 4 + body);
      if (reply.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        break;
      }
      (void)!send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
    }
    close(c);
  }
  int fd_ = -1;
  int port_ = 0;
  std::vector<std::string> replies_;
  std::thread thread_;
};

TEST(HttpClientTest, ContentLengthThenChunkedOnOneConnection) {
  ScriptedServer server({
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"b\"\r\n3\r\n:2}\r\n0\r\n\r\n",
  });
  HttpClient http({server.endpoint()});
  absl::StatusOr<HttpReply> r = http.Post("/v3/kv/range", "{\"key\":\"YQ==\"}", absl::Seconds(5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{\"a\":1}");
  r = http.Post("/v3/kv/txn", "{}", absl::Seconds(5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "{\"b\":2}");
  ASSERT_EQ(server.requests.size(), 2u);
  EXPECT_EQ(server.requests[0].rfind("POST /v3/kv/range HTTP/1.1\r\n", 0), 0u);
  EXPECT_NE(server.requests[0].find("{\"key\":\"YQ==\"}"), std::string::npos);
}

TEST(HttpClientTest, ErrorStatusKeepsTheBody) {
  ScriptedServer server({"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\n{}"});
  HttpClient http({server.endpoint()});
  absl::StatusOr<HttpReply> r = http.Post("/x", "{}", absl::Seconds(5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "{}");
}

TEST(HttpClientTest, SilentServerIsADeadlineAndTheNextEndpointIsTried) {
  ScriptedServer server({""});
  HttpClient http({server.endpoint(), "127.0.0.1:1"});
  absl::StatusOr<HttpReply> r = http.Post("/x", "{}", absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  EXPECT_EQ(http.current(), "127.0.0.1:1");
  r = http.Post("/x", "{}", absl::Milliseconds(500));  // port 1: refused
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
}

TEST(LockServiceNamesTest, KindsRoundTripAndInstallLinesNamePackages) {
  for (Kind k : AllKinds()) {
    absl::StatusOr<Kind> back = ParseKind(KindName(k));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, k);
  }
  EXPECT_FALSE(ParseKind("consul").ok());
  EXPECT_NE(InstallLine(ServerKind::kEtcd).find("etcd-server"), std::string::npos);
  EXPECT_NE(InstallLine(ServerKind::kZooKeeper).find("libzookeeper-mt-dev"), std::string::npos);
  EXPECT_NE(InstallLine(ServerKind::kPostgres).find("libpq-dev"), std::string::npos);
  EXPECT_EQ(ServerOf(Kind::kPgForUpdate), ServerKind::kPostgres);
}

}  // namespace
}  // namespace redlock::backends
