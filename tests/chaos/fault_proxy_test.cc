// Tests of FaultProxy against an in-test TCP server on 127.0.0.1, of the
// redlock-proxy binary's control protocol, and (when installed) of a real
// redis-server behind the proxy.
//
// Timing assertions only use lower bounds (a fault must delay by at least its
// latency); upper bounds are generous deadlines, since the machine is noisy.

#include "testkit/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "testkit/gtest_fleet.h"
#include "testkit/process.h"

namespace redlock::testkit {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(20);  // generous
constexpr absl::Duration kQuiet = absl::Milliseconds(300);

// ---- a small non-blocking TCP server (echo or sink) on 127.0.0.1:0 ----

class TestServer {
 public:
  enum class Mode { kEcho, kSink };

  static std::unique_ptr<TestServer> Start(Mode mode) {
    auto server = std::unique_ptr<TestServer>(new TestServer(mode));
    if (!server->Init()) return nullptr;
    return server;
  }

  ~TestServer() {
    const char wake = 'x';
    ssize_t n = ::write(wake_[1], &wake, 1);
    (void)n;
    if (thread_.joinable()) thread_.join();
    for (Conn& c : conns_) {
      if (c.fd >= 0) ::close(c.fd);
    }
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  uint16_t port() const { return port_; }

  size_t connections() {
    std::lock_guard<std::mutex> lock(mu_);
    return records_.size();
  }

  std::string Received(size_t conn) {
    std::lock_guard<std::mutex> lock(mu_);
    return conn < records_.size() ? records_[conn].received : "";
  }

  bool Closed(size_t conn) {
    std::lock_guard<std::mutex> lock(mu_);
    return conn < records_.size() && records_[conn].closed;
  }

  // Waits until connection `conn` received at least `bytes` bytes.
  bool WaitForReceived(size_t conn, size_t bytes, absl::Duration timeout = kDeadline) {
    return Await(timeout,
                 [&] { return conn < records_.size() && records_[conn].received.size() >= bytes; });
  }

  // Waits until connection `conn` was closed by the peer (EOF or error).
  bool WaitForClosed(size_t conn, absl::Duration timeout = kDeadline) {
    return Await(timeout, [&] { return conn < records_.size() && records_[conn].closed; });
  }

  bool WaitForConnections(size_t n, absl::Duration timeout = kDeadline) {
    return Await(timeout, [&] { return records_.size() >= n; });
  }

 private:
  struct Conn {
    int fd = -1;
    size_t index = 0;
    std::string out;
    bool eof = false;
  };
  struct Record {
    std::string received;
    bool closed = false;
  };

  explicit TestServer(Mode mode) : mode_(mode) {}

  // Waits (with mu_ held while evaluating) until `ready()` or `timeout`.
  template <typename Pred>
  bool Await(absl::Duration timeout, Pred ready) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), ready);
  }

  bool Init() {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return false;
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::listen(listen_fd_, 64) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      return false;
    }
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { Run(); });
    return true;
  }

  void Run() {
    for (;;) {
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      for (const Conn& c : conns_) {
        short events = 0;
        if (!c.eof && c.out.size() < (1u << 20)) events |= POLLIN;
        if (!c.out.empty()) events |= POLLOUT;
        fds.push_back({c.fd, events, 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents != 0) return;
      if (fds[1].revents != 0) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          std::lock_guard<std::mutex> lock(mu_);
          conns_.push_back(Conn{fd, records_.size(), "", false});
          records_.emplace_back();
          cv_.notify_all();
        }
      }
      for (size_t i = 0; i < conns_.size(); ++i) {
        if (i + 2 >= fds.size()) break;  // accepted in this round
        Conn& c = conns_[i];
        const short rev = fds[i + 2].revents;
        bool dead = false;
        if ((rev & (POLLIN | POLLHUP | POLLERR)) != 0 && !c.eof) {
          char buf[65536];
          ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
          if (n > 0) {
            std::lock_guard<std::mutex> lock(mu_);
            records_[c.index].received.append(buf, static_cast<size_t>(n));
            cv_.notify_all();
            if (mode_ == Mode::kEcho) c.out.append(buf, static_cast<size_t>(n));
          } else if (n == 0) {
            c.eof = true;
          } else if (errno != EAGAIN && errno != EINTR) {
            dead = true;
          }
        }
        if (!dead && !c.out.empty() && (rev & (POLLOUT | POLLERR)) != 0) {
          ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
          if (n > 0) {
            c.out.erase(0, static_cast<size_t>(n));
          } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            dead = true;
          }
        }
        if (dead || (c.eof && c.out.empty())) {
          ::close(c.fd);
          c.fd = -1;
          std::lock_guard<std::mutex> lock(mu_);
          records_[c.index].closed = true;
          cv_.notify_all();
        }
      }
      std::vector<Conn> keep;
      for (Conn& c : conns_) {
        if (c.fd >= 0) keep.push_back(std::move(c));
      }
      conns_.swap(keep);
    }
  }

  const Mode mode_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::thread thread_;
  std::vector<Conn> conns_;  // server thread only
  // std::mutex: ThreadSanitizer cannot see Debian's uninstrumented absl::Mutex.
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Record> records_;  // guarded by mu_
};

// ---- blocking client helpers ----

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    Close();
    fd_ = std::exchange(o.fd_, -1);
    return *this;
  }
  ~Socket() { Close(); }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Connects to 127.0.0.1:port; on failure returns an invalid socket and sets
// *err to errno.
Socket Connect(uint16_t port, int* err = nullptr) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    if (err != nullptr) *err = errno;
    ::close(fd);
    return Socket();
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (err != nullptr) *err = 0;
  return Socket(fd);
}

bool SendAll(const Socket& s, absl::string_view data) {
  size_t off = 0;
  for (int i = 0; i < 1000000 && off < data.size(); ++i) {
    ssize_t n = ::send(s.fd(), data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return off == data.size();
}

enum class ReadEnd { kBytes, kEof, kReset, kError, kTimeout };

struct ReadResult {
  std::string data;
  ReadEnd end = ReadEnd::kTimeout;
  int reads = 0;  // recv calls that returned data
};

// Reads until `want` bytes arrived, the peer closed, or `timeout` passed.
ReadResult ReadUpTo(const Socket& s, size_t want, absl::Duration timeout = kDeadline) {
  ReadResult r;
  const absl::Time deadline = absl::Now() + timeout;
  for (int i = 0; i < 10000000; ++i) {
    if (r.data.size() >= want) {
      r.end = ReadEnd::kBytes;
      return r;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd p{s.fd(), POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) break;
    char buf[65536];
    const size_t cap = std::min(sizeof(buf), want - r.data.size());
    ssize_t n = ::recv(s.fd(), buf, cap, 0);
    if (n > 0) {
      r.data.append(buf, static_cast<size_t>(n));
      ++r.reads;
    } else if (n == 0) {
      r.end = ReadEnd::kEof;
      return r;
    } else if (errno != EINTR && errno != EAGAIN) {
      r.end = errno == ECONNRESET ? ReadEnd::kReset : ReadEnd::kError;
      return r;
    }
  }
  r.end = ReadEnd::kTimeout;
  return r;
}

// Reads until the peer closes (EOF or reset) or the timeout passes.
ReadResult ReadToEnd(const Socket& s, absl::Duration timeout = kDeadline) {
  return ReadUpTo(s, SIZE_MAX, timeout);
}

bool Closed(ReadEnd end) {
  return end == ReadEnd::kEof || end == ReadEnd::kReset || end == ReadEnd::kError;
}

// Expects nothing (no data, no close) for `quiet`.
void ExpectSilent(const Socket& s, absl::Duration quiet = kQuiet) {
  ReadResult r = ReadUpTo(s, 1, quiet);
  EXPECT_EQ(r.end, ReadEnd::kTimeout);
  EXPECT_EQ(r.data, "");
}

// Sends `text` on `s` (through an echoing server) and expects it back.
// Use with ASSERT_NO_FATAL_FAILURE.
void ExpectEchoed(const Socket& s, const std::string& text) {
  ASSERT_TRUE(SendAll(s, text));
  EXPECT_EQ(ReadUpTo(s, text.size()).data, text);
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Waits until `pred(stats)` holds.
template <typename Pred>
bool WaitForStats(FaultProxy& proxy, Pred pred, absl::Duration timeout = kDeadline) {
  const absl::Time deadline = absl::Now() + timeout;
  for (int i = 0; i < 100000; ++i) {
    if (pred(proxy.Stats())) return true;
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

class FaultProxyTest : public ::testing::Test {
 protected:
  void StartWith(TestServer::Mode mode) {
    server_ = TestServer::Start(mode);
    ASSERT_NE(server_, nullptr);
    ProxyOptions options;
    options.upstream_port = server_->port();
    options.seed = 42;
    auto proxy = FaultProxy::Start(options);
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = *std::move(proxy);
  }

  // Connects through the proxy and waits until the server has the upstream
  // leg (so server connection indexes follow client order).
  Socket ConnectThrough() {
    const size_t before = server_->connections();
    Socket s = Connect(proxy_->listen_port());
    EXPECT_TRUE(s.valid());
    EXPECT_TRUE(server_->WaitForConnections(before + 1));
    return s;
  }

  // Destroyed in reverse order: the proxy first, then the server.
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<FaultProxy> proxy_;
};

// ---- FaultSpec ----

TEST(FaultSpecTest, ParsesTextForms) {
  auto spec = FaultSpec::Parse("latency 20ms jitter 5ms");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, FaultKind::kLatency);
  EXPECT_EQ(spec->latency, absl::Milliseconds(20));
  EXPECT_EQ(spec->jitter, absl::Milliseconds(5));

  spec = FaultSpec::Parse("  LATENCY 1.5s ");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->latency, absl::Milliseconds(1500));
  EXPECT_EQ(spec->jitter, absl::ZeroDuration());

  spec = FaultSpec::Parse("slice 1 delay 1ms");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, FaultKind::kSlice);
  EXPECT_EQ(spec->slice_bytes, 1u);
  EXPECT_EQ(spec->slice_delay, absl::Milliseconds(1));

  spec = FaultSpec::Parse("truncate 10");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, FaultKind::kTruncate);
  EXPECT_EQ(spec->truncate_bytes, 10u);

  EXPECT_EQ(FaultSpec::Parse("blackhole")->kind, FaultKind::kBlackHole);
  EXPECT_EQ(FaultSpec::Parse("hold")->kind, FaultKind::kHold);
  EXPECT_EQ(FaultSpec::Parse("reset")->kind, FaultKind::kReset);
  EXPECT_EQ(FaultSpec::Parse("clear")->kind, FaultKind::kNone);
  EXPECT_EQ(FaultSpec::Parse("none")->kind, FaultKind::kNone);
}

TEST(FaultSpecTest, RoundTripsThroughText) {
  for (const FaultSpec& spec :
       {FaultSpec::None(), FaultSpec::Latency(absl::Milliseconds(20), absl::Microseconds(250)),
        FaultSpec::BlackHole(), FaultSpec::Hold(), FaultSpec::Reset(),
        FaultSpec::Slice(3, absl::Milliseconds(2)), FaultSpec::Truncate(7)}) {
    auto parsed = FaultSpec::Parse(spec.ToString());
    ASSERT_TRUE(parsed.ok()) << spec.ToString() << ": " << parsed.status();
    EXPECT_EQ(parsed->ToString(), spec.ToString());
    EXPECT_EQ(parsed->kind, spec.kind);
  }
}

TEST(FaultSpecTest, RejectsBadText) {
  for (const char* text :
       {"", "   ", "latency", "latency abc", "latency -5ms", "latency 5ms jitter",
        "latency 5ms bogus", "slice 0", "slice x", "slice 1 delay", "truncate", "truncate -1",
        "truncate 1 2", "hold on", "down", "explode", "latency 2h"}) {
    auto spec = FaultSpec::Parse(text);
    EXPECT_FALSE(spec.ok()) << "'" << text << "' parsed as " << spec->ToString();
    if (!spec.ok()) {
      EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

// ---- Start ----

TEST(FaultProxyStartTest, RefusesNonLoopbackAddresses) {
  ProxyOptions options;
  options.upstream_port = 6379;
  options.listen_host = "10.0.0.1";
  EXPECT_EQ(FaultProxy::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.listen_host = "0.0.0.0";
  EXPECT_EQ(FaultProxy::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.listen_host = "127.0.0.1";
  options.upstream_host = "192.168.1.1";
  EXPECT_EQ(FaultProxy::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.upstream_host = "example.com";
  EXPECT_EQ(FaultProxy::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.upstream_host = "127.0.0.1";
  options.upstream_port = 0;
  EXPECT_EQ(FaultProxy::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FaultProxyStartTest, ListensOnEphemeralLoopbackPort) {
  ProxyOptions options;
  options.listen_host = "localhost";
  options.upstream_port = 1;  // never contacted: no client connects
  auto proxy = FaultProxy::Start(options);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  EXPECT_NE((*proxy)->listen_port(), 0);
  EXPECT_EQ((*proxy)->listen_address(), absl::StrCat("localhost:", (*proxy)->listen_port()));
}

TEST(FaultProxyStartTest, BusyPortIsUnavailable) {
  auto server = TestServer::Start(TestServer::Mode::kEcho);
  ASSERT_NE(server, nullptr);
  ProxyOptions options;
  options.listen_port = server->port();  // already listening
  options.upstream_port = server->port();
  EXPECT_EQ(FaultProxy::Start(options).status().code(), absl::StatusCode::kUnavailable);
}

TEST(FaultProxyStartTest, RefusedUpstreamClosesClient) {
  // A port nobody listens on: bind one, note it, close it.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  ::close(fd);
  ProxyOptions options;
  options.upstream_port = ntohs(sa.sin_port);
  auto proxy = FaultProxy::Start(options);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  Socket s = Connect((*proxy)->listen_port());
  ASSERT_TRUE(s.valid());
  EXPECT_TRUE(Closed(ReadToEnd(s).end));
  EXPECT_TRUE(WaitForStats(**proxy, [](const ProxyStats& st) {
    return st.upstream_failures >= 1 && st.connections_open == 0;
  }));
}

// ---- pass-through ----

TEST_F(FaultProxyTest, PassesManyBytesBothWays) {
  StartWith(TestServer::Mode::kEcho);
  Socket s = ConnectThrough();
  const std::string payload = RandomBytes(4 << 20, 1);
  // Write and read concurrently: the echo comes back while we still send.
  std::thread writer([&] { EXPECT_TRUE(SendAll(s, payload)); });
  ReadResult r = ReadUpTo(s, payload.size());
  writer.join();
  ASSERT_EQ(r.end, ReadEnd::kBytes);
  EXPECT_TRUE(r.data == payload) << "echo differs from what was sent";
  EXPECT_EQ(server_->Received(0).size(), payload.size());

  // Half-close travels through: the echo server sees EOF and closes, and the
  // client then sees EOF.
  ASSERT_EQ(::shutdown(s.fd(), SHUT_WR), 0);
  EXPECT_TRUE(server_->WaitForClosed(0));
  EXPECT_EQ(ReadToEnd(s).end, ReadEnd::kEof);
  EXPECT_TRUE(WaitForStats(*proxy_, [&](const ProxyStats& st) {
    return st.connections_open == 0 && st.to_server.delivered == payload.size() &&
           st.to_client.delivered == payload.size();
  }));
  const ProxyStats st = proxy_->Stats();
  EXPECT_EQ(st.connections_accepted, 1u);
  EXPECT_EQ(st.to_server.dropped, 0u);
  EXPECT_EQ(st.to_client.dropped, 0u);
}

TEST_F(FaultProxyTest, ManyConcurrentConnections) {
  StartWith(TestServer::Mode::kEcho);
  constexpr int kConns = 16;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kConns; ++i) {
    threads.emplace_back([&, i] {
      Socket s = Connect(proxy_->listen_port());
      if (!s.valid()) return;
      const std::string payload = RandomBytes(64 * 1024, 100 + i);
      std::thread w([&] { SendAll(s, payload); });
      ReadResult r = ReadUpTo(s, payload.size());
      w.join();
      if (r.data == payload) ok.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kConns);
}

// ---- latency ----

TEST_F(FaultProxyTest, LatencyDelaysEachDirection) {
  StartWith(TestServer::Mode::kEcho);
  Socket s = ConnectThrough();
  ASSERT_TRUE(
      proxy_->SetFault(Direction::kToServer, FaultSpec::Latency(absl::Milliseconds(100))).ok());
  absl::Time start = absl::Now();
  ASSERT_TRUE(SendAll(s, "ping"));
  ReadResult r = ReadUpTo(s, 4);
  ASSERT_EQ(r.data, "ping");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));

  ASSERT_TRUE(
      proxy_->SetFault(Direction::kToClient, FaultSpec::Latency(absl::Milliseconds(60))).ok());
  start = absl::Now();
  ASSERT_TRUE(SendAll(s, "pong"));
  r = ReadUpTo(s, 4);
  ASSERT_EQ(r.data, "pong");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(160));

  // A new connection gets the faults too.
  Socket s2 = ConnectThrough();
  start = absl::Now();
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(s2, "new"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(160));

  proxy_->ClearFaults();
  EXPECT_EQ(proxy_->fault(Direction::kToServer).kind, FaultKind::kNone);
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(s, "fast"));
}

TEST_F(FaultProxyTest, JitterKeepsOrder) {
  StartWith(TestServer::Mode::kEcho);
  Socket s = ConnectThrough();
  ASSERT_TRUE(
      proxy_->SetFaultBoth(FaultSpec::Latency(absl::Milliseconds(1), absl::Milliseconds(20))).ok());
  std::string expected;
  const absl::Time start = absl::Now();
  for (int i = 0; i < 200; ++i) {
    const std::string msg = absl::StrCat("m", i, ";");
    expected += msg;
    ASSERT_TRUE(SendAll(s, msg));
    if (i % 10 == 0) absl::SleepFor(absl::Milliseconds(1));
  }
  ReadResult r = ReadUpTo(s, expected.size());
  EXPECT_EQ(r.data, expected);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(2));
}

// ---- black-hole ----

TEST_F(FaultProxyTest, BlackHoleToServer) {
  StartWith(TestServer::Mode::kEcho);
  Socket s = ConnectThrough();
  ASSERT_TRUE(proxy_->SetFault(Direction::kToServer, FaultSpec::BlackHole()).ok());
  ASSERT_TRUE(SendAll(s, "lost!"));
  ExpectSilent(s);
  EXPECT_EQ(server_->Received(0), "");
  EXPECT_FALSE(server_->Closed(0));
  EXPECT_TRUE(
      WaitForStats(*proxy_, [](const ProxyStats& st) { return st.to_server.dropped == 5; }));
  proxy_->ClearFaults();
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(s, "back"));
  EXPECT_EQ(server_->Received(0), "back");
}

TEST_F(FaultProxyTest, BlackHoleToClientIsAckLoss) {
  StartWith(TestServer::Mode::kEcho);
  Socket s = ConnectThrough();
  ASSERT_TRUE(proxy_->SetFault(Direction::kToClient, FaultSpec::BlackHole()).ok());
  ASSERT_TRUE(SendAll(s, "SET k v"));
  EXPECT_TRUE(server_->WaitForReceived(0, 7));  // the server executes...
  ExpectSilent(s);                              // ...the client never hears
  EXPECT_TRUE(
      WaitForStats(*proxy_, [](const ProxyStats& st) { return st.to_client.dropped == 7; }));
  proxy_->ClearFaults();
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(s, "x"));
}

// ---- hold ----

TEST_F(FaultProxyTest, HeldBytesReachServerAfterClientClosed) {
  StartWith(TestServer::Mode::kSink);
  Socket s = ConnectThrough();
  ASSERT_TRUE(proxy_->SetFault(Direction::kToServer, FaultSpec::Hold()).ok());
  ASSERT_TRUE(SendAll(s, "SET lock token PX 30000\r\n"));
  EXPECT_TRUE(WaitForStats(*proxy_, [](const ProxyStats& st) { return st.to_server.held == 25; }));
  s.Close();  // the client gives up
  absl::SleepFor(kQuiet);
  EXPECT_EQ(server_->Received(0), "");
  EXPECT_FALSE(server_->Closed(0)) << "upstream closed while bytes were held";
  EXPECT_EQ(proxy_->Stats().connections_open, 1u);

  proxy_->ReleaseHeld();
  ASSERT_TRUE(server_->WaitForReceived(0, 25));
  EXPECT_EQ(server_->Received(0), "SET lock token PX 30000\r\n");
  // Then the upstream leg is closed too.
  EXPECT_TRUE(server_->WaitForClosed(0));
  EXPECT_TRUE(WaitForStats(*proxy_, [](const ProxyStats& st) {
    return st.connections_open == 0 && st.to_server.held == 0 && st.to_server.delivered == 25;
  }));
}

TEST_F(FaultProxyTest, ClearingHoldReleasesInOrder) {
  StartWith(TestServer::Mode::kEcho);
  Socket s = ConnectThrough();
  ASSERT_TRUE(proxy_->SetFault(Direction::kToClient, FaultSpec::Hold()).ok());
  ASSERT_TRUE(SendAll(s, "one,"));
  ASSERT_TRUE(server_->WaitForReceived(0, 4));
  ASSERT_TRUE(SendAll(s, "two,"));
  ASSERT_TRUE(server_->WaitForReceived(0, 8));
  ExpectSilent(s);
  // Still holding after a release of what was held: new bytes are held again.
  proxy_->ReleaseHeld();
  EXPECT_EQ(ReadUpTo(s, 8).data, "one,two,");
  ASSERT_TRUE(SendAll(s, "three"));
  ASSERT_TRUE(server_->WaitForReceived(0, 13));
  ExpectSilent(s);
  proxy_->ClearFaults();
  EXPECT_EQ(ReadUpTo(s, 5).data, "three");
}

// ---- reset ----

TEST_F(FaultProxyTest, ResetAbortsOpenAndNewConnections) {
  StartWith(TestServer::Mode::kEcho);
  Socket s = ConnectThrough();
  ASSERT_TRUE(SendAll(s, "hi"));
  ASSERT_EQ(ReadUpTo(s, 2).data, "hi");
  ASSERT_TRUE(proxy_->SetFault(Direction::kToServer, FaultSpec::Reset()).ok());
  ReadResult r = ReadToEnd(s);
  EXPECT_TRUE(r.end == ReadEnd::kReset || r.end == ReadEnd::kEof) << static_cast<int>(r.end);
  EXPECT_TRUE(server_->WaitForClosed(0));

  // While set: accepted and reset at once.
  for (int i = 0; i < 3; ++i) {
    int err = 0;
    Socket n = Connect(proxy_->listen_port(), &err);
    if (!n.valid()) {
      EXPECT_EQ(err, ECONNRESET);
      continue;
    }
    SendAll(n, "x");  // may fail once the RST arrived
    r = ReadToEnd(n);
    EXPECT_TRUE(r.end == ReadEnd::kReset || r.end == ReadEnd::kEof) << static_cast<int>(r.end);
    EXPECT_EQ(r.data, "");
  }
  EXPECT_GE(proxy_->Stats().connections_reset, 4u);
  EXPECT_EQ(server_->connections(), 1u);

  proxy_->ClearFaults();
  Socket ok = ConnectThrough();
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(ok, "again"));
}

TEST_F(FaultProxyTest, ResetAllIsOneShot) {
  StartWith(TestServer::Mode::kEcho);
  Socket a = ConnectThrough();
  Socket b = ConnectThrough();
  proxy_->ResetAll();
  EXPECT_TRUE(Closed(ReadToEnd(a).end));
  EXPECT_TRUE(Closed(ReadToEnd(b).end));
  EXPECT_EQ(proxy_->Stats().connections_reset, 2u);
  Socket c = ConnectThrough();
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(c, "alive"));
}

// ---- slicer ----

TEST_F(FaultProxyTest, SlicerDeliversEveryByteInOrder) {
  StartWith(TestServer::Mode::kEcho);
  Socket s = ConnectThrough();
  ASSERT_TRUE(
      proxy_->SetFault(Direction::kToClient, FaultSpec::Slice(1, absl::Milliseconds(2))).ok());
  const std::string payload = RandomBytes(100, 7);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(SendAll(s, payload));
  ReadResult r = ReadUpTo(s, payload.size());
  ASSERT_EQ(r.end, ReadEnd::kBytes);
  EXPECT_TRUE(r.data == payload);
  // 99 pauses of >= 2 ms between 100 one-byte slices.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(198));
  EXPECT_GE(r.reads, 10) << "bytes were not delivered in slices";

  // Towards the server, with larger slices and no pause.
  proxy_->ClearFaults();
  ASSERT_TRUE(
      proxy_->SetFault(Direction::kToServer, FaultSpec::Slice(7, absl::ZeroDuration())).ok());
  const std::string more = RandomBytes(10000, 8);
  ASSERT_TRUE(SendAll(s, more));
  r = ReadUpTo(s, more.size());
  EXPECT_TRUE(r.data == more);
}

// ---- truncation ----

TEST_F(FaultProxyTest, TruncationToServerClosesAfterK) {
  StartWith(TestServer::Mode::kSink);
  Socket s = ConnectThrough();
  ASSERT_TRUE(SendAll(s, "before:"));  // not counted: sent before the fault
  ASSERT_TRUE(server_->WaitForReceived(0, 7));
  ASSERT_TRUE(proxy_->SetFault(Direction::kToServer, FaultSpec::Truncate(10)).ok());
  ASSERT_TRUE(SendAll(s, std::string(100, 'a')));
  EXPECT_TRUE(server_->WaitForClosed(0));
  EXPECT_EQ(server_->Received(0), "before:" + std::string(10, 'a'));
  EXPECT_TRUE(Closed(ReadToEnd(s).end));
}

TEST_F(FaultProxyTest, TruncationToClientClosesAfterK) {
  StartWith(TestServer::Mode::kEcho);
  ASSERT_TRUE(proxy_->SetFault(Direction::kToClient, FaultSpec::Truncate(5)).ok());
  Socket s = ConnectThrough();
  ASSERT_TRUE(SendAll(s, "0123456789abcdef"));
  ReadResult r = ReadToEnd(s);
  EXPECT_TRUE(Closed(r.end));
  EXPECT_EQ(r.data, "01234");
}

// ---- down / up ----

TEST_F(FaultProxyTest, DownRefusesAndUpAcceptsOnSamePort) {
  StartWith(TestServer::Mode::kEcho);
  const uint16_t port = proxy_->listen_port();
  Socket s = ConnectThrough();
  proxy_->Down();
  proxy_->Down();  // idempotent
  EXPECT_TRUE(Closed(ReadToEnd(s).end));
  int err = 0;
  Socket refused = Connect(port, &err);
  EXPECT_FALSE(refused.valid());
  EXPECT_EQ(err, ECONNREFUSED);
  EXPECT_TRUE(proxy_->Stats().down);

  ASSERT_TRUE(proxy_->Up().ok());
  ASSERT_TRUE(proxy_->Up().ok());  // already up
  EXPECT_EQ(proxy_->listen_port(), port);
  Socket again = Connect(port);
  ASSERT_TRUE(again.valid());
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(again, "up"));
  EXPECT_FALSE(proxy_->Stats().down);
}

TEST_F(FaultProxyTest, RetargetClosesConnectionsAndSendsNewOnesToTheNewUpstream) {
  StartWith(TestServer::Mode::kEcho);
  auto other = TestServer::Start(TestServer::Mode::kEcho);
  ASSERT_NE(other, nullptr);
  Socket s = ConnectThrough();
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(s, "old"));
  ASSERT_TRUE(
      proxy_->SetFault(Direction::kToClient, FaultSpec::Latency(absl::Milliseconds(1))).ok());
  EXPECT_FALSE(proxy_->Retarget("10.0.0.1", other->port()).ok()) << "loopback only";
  EXPECT_FALSE(proxy_->Retarget("127.0.0.1", 0).ok());
  ASSERT_TRUE(proxy_->Retarget("127.0.0.1", other->port()).ok());
  EXPECT_EQ(proxy_->upstream(), absl::StrCat("127.0.0.1:", other->port()));
  EXPECT_TRUE(Closed(ReadToEnd(s).end)) << "the client must reconnect to reach the new upstream";
  Socket again = Connect(proxy_->listen_port());
  ASSERT_TRUE(again.valid());
  ASSERT_TRUE(other->WaitForConnections(1));
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(again, "new"));
  EXPECT_EQ(other->Received(0), "new");
  EXPECT_EQ(server_->connections(), 1u) << "nothing more reached the old upstream";
  EXPECT_EQ(proxy_->fault(Direction::kToClient).kind, FaultKind::kLatency) << "faults stay";
}

// ---- changing faults under traffic ----

TEST_F(FaultProxyTest, FaultsChangeWhileTrafficFlows) {
  StartWith(TestServer::Mode::kEcho);
  Socket s = ConnectThrough();
  const std::string payload = RandomBytes(256 * 1024, 3);
  std::atomic<bool> sent{false};
  std::thread writer([&] {
    for (size_t off = 0; off < payload.size(); off += 1024) {
      if (!SendAll(s, absl::string_view(payload).substr(off, 1024))) break;
      if ((off / 1024) % 2 == 0) absl::SleepFor(absl::Milliseconds(2));
    }
    sent = true;
  });
  ReadResult r;
  std::thread reader([&] { r = ReadUpTo(s, payload.size(), absl::Seconds(60)); });
  // Only faults that lose nothing: every byte must come back, in order.
  const std::vector<FaultSpec> faults = {
      FaultSpec::Latency(absl::Milliseconds(5), absl::Milliseconds(5)),
      FaultSpec::Slice(512, absl::Microseconds(200)),
      FaultSpec::Hold(),
      FaultSpec::None(),
      FaultSpec::Latency(absl::Milliseconds(1)),
  };
  int rounds = 0;
  for (; rounds < 200 && !sent.load(); ++rounds) {
    const int round = rounds;
    const FaultSpec& f = faults[round % faults.size()];
    const Direction d = round % 2 == 0 ? Direction::kToServer : Direction::kToClient;
    ASSERT_TRUE(proxy_->SetFault(d, f).ok());
    absl::SleepFor(absl::Milliseconds(10));
    if (round % 3 == 0) proxy_->ReleaseHeld();
  }
  proxy_->ClearFaults();
  EXPECT_GE(rounds, 5) << "traffic ended before the faults changed much";
  writer.join();
  reader.join();
  ASSERT_EQ(r.end, ReadEnd::kBytes);
  EXPECT_TRUE(r.data == payload) << "stream corrupted by fault changes";
}

// ---- shutdown ----

TEST_F(FaultProxyTest, DestructorClosesOpenConnections) {
  StartWith(TestServer::Mode::kEcho);
  std::vector<Socket> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(ConnectThrough());
  // clients[0]'s echo is held, clients[1]'s bytes wait in a 30 s queue.
  ASSERT_TRUE(proxy_->SetFault(Direction::kToClient, FaultSpec::Hold()).ok());
  ASSERT_TRUE(SendAll(clients[0], "held"));
  ASSERT_TRUE(server_->WaitForReceived(0, 4));
  ASSERT_TRUE(proxy_->SetFault(Direction::kToServer, FaultSpec::Latency(absl::Seconds(30))).ok());
  ASSERT_TRUE(SendAll(clients[1], "queued"));
  EXPECT_TRUE(WaitForStats(*proxy_, [](const ProxyStats& st) {
    return st.to_client.held == 4 && st.to_server.queued == 6;
  }));
  proxy_.reset();
  for (Socket& c : clients) EXPECT_TRUE(Closed(ReadToEnd(c).end));
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(server_->WaitForClosed(i));
}

// ---- helpers for child processes (redlock-proxy, redis-server) ----

// A child process with its stdout piped (or discarded); null if it could
// not start.
std::unique_ptr<redlock::testkit::Process> StartChild(std::vector<std::string> argv,
                                                      bool capture_stdout) {
  redlock::testkit::ProcessOptions o;
  o.argv = std::move(argv);
  if (capture_stdout) o.stdout_to = redlock::testkit::Stream::kPipe;
  absl::StatusOr<std::unique_ptr<redlock::testkit::Process>> p =
      redlock::testkit::Process::Start(std::move(o));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

// Sends one line and reads one reply line.
std::string Exchange(const Socket& s, const std::string& line) {
  if (!SendAll(s, line + "\n")) return "<send failed>";
  std::string reply;
  const absl::Time deadline = absl::Now() + kDeadline;
  for (int i = 0; i < 100000 && reply.find('\n') == std::string::npos; ++i) {
    if (absl::Now() > deadline) return "<timeout>";
    ReadResult r = ReadUpTo(s, 1, deadline - absl::Now());
    if (r.data.empty()) return "<closed>";
    reply += r.data;
  }
  return reply.substr(0, reply.find('\n'));
}

TEST(RedlockProxyBinaryTest, HelpAndBadArguments) {
  auto help = StartChild({REDLOCK_PROXY_PATH, "--help"}, true);
  ASSERT_NE(help, nullptr);
  auto first = help->ReadLine(kDeadline);
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(first->find("usage: redlock-proxy"), std::string::npos);
  int status = help->Wait(kDeadline).value_or(-1);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {REDLOCK_PROXY_PATH},
           {REDLOCK_PROXY_PATH, "--map", "127.0.0.1:0=127.0.0.1:1"},
           {REDLOCK_PROXY_PATH, "--map", "10.1.1.1:0=127.0.0.1:1", "--control", "127.0.0.1:0"},
           {REDLOCK_PROXY_PATH, "--map", "127.0.0.1:0", "--control", "127.0.0.1:0"},
           {REDLOCK_PROXY_PATH, "--bogus"}}) {
    auto bad = StartChild(argv, false);
    ASSERT_NE(bad, nullptr);
    status = bad->Wait(kDeadline).value_or(-1);
    ASSERT_TRUE(WIFEXITED(status)) << argv.size();
    EXPECT_EQ(WEXITSTATUS(status), 2) << argv.back();
  }
}

TEST(RedlockProxyBinaryTest, ControlProtocol) {
  auto server = TestServer::Start(TestServer::Mode::kEcho);
  ASSERT_NE(server, nullptr);
  const std::string upstream = absl::StrCat("127.0.0.1:", server->port());
  auto proxy = StartChild({REDLOCK_PROXY_PATH, "--map", "127.0.0.1:0=" + upstream, "--map",
                           "127.0.0.1:0=" + upstream, "--control", "127.0.0.1:0", "--seed", "9"},
                          true);
  ASSERT_NE(proxy, nullptr);
  auto ready = proxy->ReadLine(kDeadline);
  ASSERT_TRUE(ready.has_value()) << "no READY line";
  // READY control=127.0.0.1:P map0=127.0.0.1:P0->... map1=...
  std::vector<std::string> fields = absl::StrSplit(*ready, ' ');
  ASSERT_EQ(fields.size(), 4u) << *ready;
  ASSERT_EQ(fields[0], "READY");
  auto port_of = [](absl::string_view field) -> uint16_t {
    const size_t eq = field.find('=');
    absl::string_view addr = field.substr(eq + 1);
    addr = addr.substr(0, addr.find("->"));
    uint32_t port = 0;
    if (!absl::SimpleAtoi(addr.substr(addr.rfind(':') + 1), &port)) return 0;
    return static_cast<uint16_t>(port);
  };
  const uint16_t control_port = port_of(fields[1]);
  const uint16_t map0 = port_of(fields[2]);
  const uint16_t map1 = port_of(fields[3]);
  ASSERT_NE(control_port, 0);
  ASSERT_NE(map0, 0);
  ASSERT_NE(map1, 0);

  Socket control = Connect(control_port);
  ASSERT_TRUE(control.valid());
  EXPECT_EQ(Exchange(control, "help").rfind("OK ", 0), 0u);
  EXPECT_EQ(Exchange(control, "bogus").rfind("ERR ", 0), 0u);
  EXPECT_EQ(Exchange(control, "7 down").rfind("ERR ", 0), 0u);
  EXPECT_EQ(Exchange(control, "0 sideways hold").rfind("ERR ", 0), 0u);
  EXPECT_EQ(Exchange(control, "0 to-server latency fast").rfind("ERR ", 0), 0u);
  EXPECT_EQ(Exchange(control, "0 to-server latency 80ms jitter 1ms"),
            "OK to-server latency 80ms jitter 1ms");

  Socket c0 = Connect(map0);
  ASSERT_TRUE(c0.valid());
  absl::Time start = absl::Now();
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(c0, "slow"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(80));

  EXPECT_EQ(Exchange(control, "all both blackhole"), "OK both blackhole");
  Socket c1 = Connect(map1);
  ASSERT_TRUE(c1.valid());
  ASSERT_TRUE(SendAll(c1, "gone"));
  ExpectSilent(c1);
  const std::string faults = Exchange(control, "faults");
  EXPECT_NE(faults.find("map1 to-server=blackhole to-client=blackhole"), std::string::npos)
      << faults;
  EXPECT_EQ(Exchange(control, "all clear"), "OK cleared");
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(c1, "here"));

  const std::string stats = Exchange(control, "stats");
  EXPECT_EQ(stats.rfind("OK map0 accepted=1", 0), 0u) << stats;
  EXPECT_NE(stats.find("map1 accepted=1"), std::string::npos) << stats;

  EXPECT_EQ(Exchange(control, "1 down"), "OK down");
  int err = 0;
  EXPECT_FALSE(Connect(map1, &err).valid());
  EXPECT_EQ(err, ECONNREFUSED);
  EXPECT_EQ(Exchange(control, "1 up"), "OK up");
  EXPECT_TRUE(Connect(map1).valid());
  EXPECT_EQ(Exchange(control, "0 to-client hold"), "OK to-client hold");
  EXPECT_EQ(Exchange(control, "0 release"), "OK released");
  EXPECT_EQ(Exchange(control, "all reset"), "OK reset");
  auto other = TestServer::Start(TestServer::Mode::kEcho);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(Exchange(control, "all retarget 127.0.0.1:1").rfind("ERR ", 0), 0u);
  EXPECT_EQ(Exchange(control, "1 retarget nowhere").rfind("ERR ", 0), 0u);
  EXPECT_EQ(Exchange(control, absl::StrCat("1 retarget 127.0.0.1:", other->port())),
            absl::StrCat("OK retarget 127.0.0.1:", other->port()));
  Socket moved = Connect(map1);
  ASSERT_TRUE(moved.valid());
  ASSERT_NO_FATAL_FAILURE(ExpectEchoed(moved, "moved"));
  EXPECT_TRUE(other->WaitForReceived(0, 5));
  EXPECT_EQ(Exchange(control, "quit"), "OK bye");

  ASSERT_TRUE(proxy->Signal(SIGTERM).ok());
  const int status = proxy->Wait(kDeadline).value_or(-1);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// ---- a real redis-server behind the proxy ----

// The node comes from the project's fleet fixture.
class RedisBehindProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLOCK_REQUIRE_REDIS();
    auto fleet = redlock::testkit::Fleet::Start({.nodes = 1});
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = *std::move(fleet);
    port_ = static_cast<uint16_t>(fleet_->port(0));
    ProxyOptions options;
    options.upstream_port = port_;
    auto proxy = FaultProxy::Start(options);
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = *std::move(proxy);
  }

  void TearDown() override {
    proxy_.reset();
    fleet_.reset();  // SIGKILL + reap by pid
  }

  static std::string RoundTrip(const Socket& s, absl::string_view command, size_t reply_bytes) {
    if (!SendAll(s, command)) return "";
    return ReadUpTo(s, reply_bytes, absl::Seconds(5)).data;
  }

  std::string DirectGet(const std::string& key) {
    Socket s = Connect(port_);
    return RoundTrip(s, absl::StrCat("GET ", key, "\r\n"), 5);
  }

  std::unique_ptr<redlock::testkit::Fleet> fleet_;
  uint16_t port_ = 0;
  std::unique_ptr<FaultProxy> proxy_;
};

TEST_F(RedisBehindProxyTest, AckLossAndLateWrite) {
  Socket client = Connect(proxy_->listen_port());
  ASSERT_TRUE(client.valid());
  EXPECT_EQ(RoundTrip(client, "PING\r\n", 7), "+PONG\r\n");

  // Ack loss: the SET executes, the client hears nothing.
  ASSERT_TRUE(proxy_->SetFault(Direction::kToClient, FaultSpec::BlackHole()).ok());
  ASSERT_TRUE(SendAll(client, "SET proxy:ack v\r\n"));
  ExpectSilent(client);
  EXPECT_EQ(DirectGet("proxy:ack"), "$1\r\nv");

  // Late write: the SET is held, the client gives up, the SET lands later.
  proxy_->ClearFaults();
  Socket late = Connect(proxy_->listen_port());
  ASSERT_TRUE(late.valid());
  ASSERT_TRUE(proxy_->SetFault(Direction::kToServer, FaultSpec::Hold()).ok());
  ASSERT_TRUE(SendAll(late, "SET proxy:late v\r\n"));
  EXPECT_TRUE(WaitForStats(*proxy_, [](const ProxyStats& st) { return st.to_server.held == 18; }));
  late.Close();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(DirectGet("proxy:late"), "$-1\r\n");
  proxy_->ReleaseHeld();
  std::string got;
  const absl::Time deadline = absl::Now() + kDeadline;
  for (int i = 0; i < 1000 && absl::Now() < deadline; ++i) {
    got = DirectGet("proxy:late");
    if (got == "$1\r\nv") break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(got, "$1\r\nv");

  // Slicing a RESP stream byte by byte does not confuse the server's parser.
  ASSERT_TRUE(
      proxy_->SetFault(Direction::kToServer, FaultSpec::Slice(1, absl::ZeroDuration())).ok());
  Socket sliced = Connect(proxy_->listen_port());
  ASSERT_TRUE(sliced.valid());
  EXPECT_EQ(RoundTrip(sliced, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nok\r\n", 5), "+OK\r\n");
}

}  // namespace
}  // namespace redlock::testkit
