// TLS to the nodes (rediss://) against real redis-server processes on TLS
// ports, with throw-away certificates (testkit/tls.h): mutual TLS, ACL users
// over TLS, mixed plain and TLS nodes, and every way a TLS connection can go
// wrong, each a per-node error that names its cause. The core cases of the
// client (contention, release, stopped and restarted nodes, a lost lease)
// run over TLS in client_test.cc (Tls/ClientCoreTest).

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "redlock/internal/tls_stream.h"
#include "testkit/files.h"
#include "testkit/gtest_fleet.h"

namespace redlock {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testkit::Fleet;
using testkit::FleetOptions;
using testkit::RedisValue;
using testkit::TlsServerCert;

std::unique_ptr<Fleet> StartFleet(FleetOptions o) {
  auto fleet = Fleet::Start(std::move(o));
  EXPECT_TRUE(fleet.ok()) << fleet.status();
  return fleet.ok() ? *std::move(fleet) : nullptr;
}

Options OptionsFor(const Fleet& fleet) {
  Options o;
  o.nodes = fleet.endpoints();
  o.tls = fleet.ClientTls();
  o.connect_timeout = absl::Milliseconds(500);
  return o;
}

int KeysOnFleet(const Fleet& fleet) {
  int keys = 0;
  for (int i = 0; i < fleet.size(); ++i) {
    absl::StatusOr<RedisValue> v = fleet.Command(i, {"DBSIZE"});
    EXPECT_TRUE(v.ok()) << v.status();
    keys += v.ok() ? static_cast<int>(v->integer) : 1;
  }
  return keys;
}

// A client that cannot reach any node over TLS: Create still succeeds (a
// node that is down is a vote, not an error), every node's health names
// `cause` once Create returns (it waits at most the connect timeout for the
// first connections), an acquisition is refused naming it, and nothing is
// left on the nodes.
void ExpectEveryNodeRefused(const Fleet& fleet, Options o, const std::string& cause) {
  auto client = Client::Create(std::move(o));
  REDLOCK_ASSERT_OK(client.status());
  for (const NodeHealth& h : (*client)->Health()) {
    EXPECT_FALSE(h.connected) << h.node;
    EXPECT_THAT(h.last_error, HasSubstr(cause)) << h.node;
  }
  absl::StatusOr<Lease> l = (*client)->TryAcquire("r", absl::Seconds(5));
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnavailable) << l.status();
  EXPECT_THAT(std::string(l.status().message()),
              AllOf(HasSubstr("0 of "), HasSubstr(fleet.address(0)), HasSubstr(cause)));
  EXPECT_EQ(KeysOnFleet(fleet), 0);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override { REDLOCK_REQUIRE_REDIS(); }
};

TEST_F(TlsTest, LocksOnTlsNodesAndHealthShowsTheProtocol) {
  auto fleet = StartFleet({.nodes = 3, .tls = true});
  ASSERT_NE(fleet, nullptr);
  Options o = OptionsFor(*fleet);
  o.tls.cert_file.clear();  // the nodes do not ask for one
  o.tls.key_file.clear();
  auto client = Client::Create(o);
  REDLOCK_ASSERT_OK(client.status());
  absl::StatusOr<Lease> l = (*client)->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_GE(l->nodes_granted(), 2);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(testkit::Eventually(
                  [&] {
                    return fleet->Command(i, {"GET", "r"})->str;
                  },
                  l->token()),
              l->token());
  }
  for (const NodeHealth& h : (*client)->Health()) {
    EXPECT_TRUE(h.connected) << h.node;
    EXPECT_TRUE(h.tls) << h.node;
    EXPECT_THAT(h.tls_version, HasSubstr("TLSv1.")) << h.node;
  }
  REDLOCK_EXPECT_OK((*client)->Release(*l));
}

TEST_F(TlsTest, RedissUrlsWithAclUserAndPassword) {
  auto fleet = StartFleet({.nodes = 3,
                           .password = "default-password",
                           .extra_args = {"--user", "alice", "on", ">pw", "~*", "&*", "+@all"},
                           .tls = true});
  ASSERT_NE(fleet, nullptr);
  Options o = OptionsFor(*fleet);
  o.nodes.clear();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Endpoint> ep =
        ParseEndpoint(absl::StrCat("rediss://alice:pw@127.0.0.1:", fleet->port(i), "/2"));
    REDLOCK_ASSERT_OK(ep.status());
    EXPECT_TRUE(ep->tls);
    o.nodes.push_back(*ep);
  }
  auto client = Client::Create(o);
  REDLOCK_ASSERT_OK(client.status());
  absl::StatusOr<Lease> l = (*client)->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  // SELECT 2 happened over TLS.
  absl::StatusOr<RedisValue> v =
      fleet->Command(0, {"EVAL", "redis.call('select', 2) return redis.call('get', 'r')", "0"});
  REDLOCK_ASSERT_OK(v.status());
  EXPECT_EQ(v->str, l->token());
  REDLOCK_EXPECT_OK((*client)->Release(*l));

  // A wrong password over TLS fails like over TCP.
  for (Endpoint& ep : o.nodes) ep.password = "wrong";
  ExpectEveryNodeRefused(*fleet, o, "WRONGPASS");
}

TEST_F(TlsTest, MutualTlsNeedsTheClientCertificate) {
  auto fleet = StartFleet({.nodes = 3, .tls = true, .tls_auth_clients = true});
  ASSERT_NE(fleet, nullptr);
  Options o = OptionsFor(*fleet);

  Options without = o;
  without.tls.cert_file.clear();
  without.tls.key_file.clear();
  ExpectEveryNodeRefused(*fleet, without, "the node requires a client certificate");

  Options stranger = o;
  stranger.tls.cert_file = fleet->certificates()->other_client_cert;
  stranger.tls.key_file = fleet->certificates()->other_client_key;
  ExpectEveryNodeRefused(*fleet, stranger, "the node refused our client certificate");

  auto client = Client::Create(o);
  REDLOCK_ASSERT_OK(client.status());
  absl::StatusOr<Lease> l = (*client)->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  // The release announcements come over TLS too: a waiter is woken.
  auto waiter = Client::Create(o);
  REDLOCK_ASSERT_OK(waiter.status());
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    REDLOCK_EXPECT_OK((*client)->Release(*l));
  });
  absl::StatusOr<Lease> next = (*waiter)->Acquire("r", absl::Seconds(10), absl::Seconds(10));
  release.join();
  REDLOCK_ASSERT_OK(next.status());
  REDLOCK_EXPECT_OK((*waiter)->Release(*next));
}

TEST_F(TlsTest, CertificateFromAnUntrustedCa) {
  auto fleet = StartFleet({.nodes = 3, .tls = true, .tls_server_cert = TlsServerCert::kOtherCa});
  ASSERT_NE(fleet, nullptr);
  ExpectEveryNodeRefused(*fleet, OptionsFor(*fleet), "the node's certificate is not trusted");
}

TEST_F(TlsTest, ExpiredCertificate) {
  auto fleet = StartFleet({.nodes = 3, .tls = true, .tls_server_cert = TlsServerCert::kExpired});
  ASSERT_NE(fleet, nullptr);
  ExpectEveryNodeRefused(*fleet, OptionsFor(*fleet), "the node's certificate has expired");
}

TEST_F(TlsTest, ServerNameMismatch) {
  auto fleet = StartFleet({.nodes = 3, .tls = true});
  ASSERT_NE(fleet, nullptr);
  Options o = OptionsFor(*fleet);
  o.tls.server_name = "redis.example.com";
  ExpectEveryNodeRefused(*fleet, o,
                         "the node's certificate is not valid for \"redis.example.com\"");

  // The certificate lists localhost: that name works, by SNI and check.
  o.tls.server_name = "localhost";
  auto client = Client::Create(o);
  REDLOCK_ASSERT_OK(client.status());
  absl::StatusOr<Lease> l = (*client)->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  REDLOCK_EXPECT_OK((*client)->Release(*l));

  // Without verification (unsafe) the wrong name gets through.
  o.tls.server_name = "redis.example.com";
  o.tls.verify_peer = false;
  client = Client::Create(o);
  REDLOCK_ASSERT_OK(client.status());
  l = (*client)->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  REDLOCK_EXPECT_OK((*client)->Release(*l));
}

TEST_F(TlsTest, PlaintextClientToATlsPort) {
  auto fleet = StartFleet({.nodes = 3, .tls = true});
  ASSERT_NE(fleet, nullptr);
  Options o = OptionsFor(*fleet);
  o.tls = {};
  for (Endpoint& ep : o.nodes) ep.tls = false;
  ExpectEveryNodeRefused(*fleet, o, "use rediss:// for it");
}

TEST_F(TlsTest, TlsClientToAPlaintextPort) {
  auto tls_fleet = StartFleet({.nodes = 1, .tls = true});  // for its CA
  auto fleet = StartFleet({.nodes = 3});
  ASSERT_NE(tls_fleet, nullptr);
  ASSERT_NE(fleet, nullptr);
  Options o = OptionsFor(*fleet);
  o.tls = tls_fleet->ClientTls();
  for (Endpoint& ep : o.nodes) ep.tls = true;
  // A plaintext Redis waits for the end of a line that a ClientHello rarely
  // contains: the handshake times out, or the node's error reply is not TLS.
  ExpectEveryNodeRefused(*fleet, o, "use redis:// for it");
}

TEST_F(TlsTest, PlainAndTlsNodesMixed) {
  auto tls_fleet = StartFleet({.nodes = 3, .tls = true});
  auto plain_fleet = StartFleet({.nodes = 2});
  ASSERT_NE(tls_fleet, nullptr);
  ASSERT_NE(plain_fleet, nullptr);
  Options o = OptionsFor(*tls_fleet);
  for (const Endpoint& ep : plain_fleet->endpoints()) o.nodes.push_back(ep);
  o.quorum = 5;  // every node, of both kinds, must grant
  auto client = Client::Create(o);
  REDLOCK_ASSERT_OK(client.status());
  absl::StatusOr<Lease> l = (*client)->TryAcquire("r", absl::Seconds(10));
  REDLOCK_ASSERT_OK(l.status());
  EXPECT_EQ(l->nodes_granted(), 5);
  std::vector<NodeHealth> health = (*client)->Health();
  ASSERT_EQ(health.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(health[i].tls, i < 3) << health[i].node;
    EXPECT_EQ(health[i].tls_version.empty(), i >= 3) << health[i].node;
  }
  REDLOCK_EXPECT_OK((*client)->Release(*l));
}

TEST_F(TlsTest, BadTlsFilesAreInvalidArgumentsAtCreate) {
  auto fleet = StartFleet({.nodes = 1, .tls = true});
  ASSERT_NE(fleet, nullptr);
  const testkit::TestCertificates& certs = *fleet->certificates();
  testkit::TempDir dir("redlock-tls-test");
  const std::string garbage = dir.path() + "/garbage.pem";
  FILE* f = fopen(garbage.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("not a certificate\n", f);
  fclose(f);
  const std::string missing = dir.path() + "/missing.pem";

  auto expect_invalid = [&](Options o, const std::string& says) {
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Create(std::move(o));
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(says));
  };
  const Options o = OptionsFor(*fleet);
  const std::vector<std::pair<std::function<void(TlsOptions&)>, std::string>> cases = {
      {[&](TlsOptions& t) { t.ca_file = missing; },
       absl::StrCat("cannot read the CA file ", missing, ": No such file")},
      {[&](TlsOptions& t) { t.ca_file = garbage; },
       absl::StrCat("cannot load the CA file ", garbage)},
      {[&](TlsOptions& t) { t.ca_dir = missing; },
       absl::StrCat("cannot read the CA directory ", missing)},
      {[&](TlsOptions& t) { t.cert_file = missing; },
       absl::StrCat("cannot read the client certificate ", missing)},
      {[&](TlsOptions& t) { t.key_file = garbage; },
       absl::StrCat("cannot load the client key ", garbage)},
      {[&](TlsOptions& t) { t.key_file = certs.other_client_key; },
       "does not belong to the certificate"},
      {[&](TlsOptions& t) { t.key_file.clear(); }, "a TLS client certificate needs its key"},
  };
  for (const auto& [mutate, says] : cases) {
    Options bad = o;
    mutate(bad.tls);
    expect_invalid(bad, says);
  }
  // TLS settings for nodes that all speak plaintext: not silently ignored.
  Options plain = o;
  for (Endpoint& ep : plain.nodes) ep.tls = false;
  expect_invalid(plain, "no node uses TLS");
}

// Drives `stream` (a blocking test of a non-blocking stream): the
// handshake, then PING until PONG. The reply also brings the node's session
// tickets (TLS 1.3 sends them after the handshake).
void PingOver(internal::Stream& stream) {
  auto wait = [&](internal::Stream::Io io) {
    pollfd p{stream.fd(),
             static_cast<short>(io == internal::Stream::Io::kWantWrite ? POLLOUT : POLLIN), 0};
    return poll(&p, 1, 5000) == 1;
  };
  internal::Stream::Io io = internal::Stream::Io::kWantWrite;
  for (int i = 0; i < 100 && (io = stream.Establish()) != internal::Stream::Io::kDone; ++i) {
    ASSERT_TRUE(io == internal::Stream::Io::kWantRead || io == internal::Stream::Io::kWantWrite)
        << stream.error();
    ASSERT_TRUE(wait(io));
  }
  ASSERT_EQ(io, internal::Stream::Io::kDone) << stream.error();
  size_t n = 0;
  ASSERT_EQ(stream.Write("PING\r\n", 6, &n), internal::Stream::Io::kDone) << stream.error();
  ASSERT_EQ(n, 6u);
  std::string got;
  char buf[256];
  for (int i = 0; i < 100 && !absl::StrContains(got, "+PONG\r\n"); ++i) {
    io = stream.Read(buf, sizeof(buf), &n);
    if (io == internal::Stream::Io::kDone) {
      got.append(buf, n);
    } else {
      ASSERT_TRUE(io == internal::Stream::Io::kWantRead) << stream.error();
      ASSERT_TRUE(wait(io));
    }
  }
  EXPECT_EQ(got, "+PONG\r\n");
}

// A reconnection to a node resumes the session of the last connection (an
// abbreviated handshake); another node's factory never offers it.
TEST_F(TlsTest, ReconnectionsResumeTheSession) {
  auto fleet = StartFleet({.nodes = 2, .tls = true});
  ASSERT_NE(fleet, nullptr);
  TlsOptions tls = fleet->ClientTls();
  absl::StatusOr<std::shared_ptr<internal::TlsContext>> context = internal::TlsContext::Create(tls);
  REDLOCK_ASSERT_OK(context.status());
  internal::StreamFactory node0 = internal::TlsStreamFactory(*context, "127.0.0.1");
  internal::StreamFactory node1 = internal::TlsStreamFactory(*context, "127.0.0.1");
  auto connect = [&](int node, const internal::StreamFactory& factory) {
    int fd = -1;
    absl::Status st = internal::StartTcpConnect("127.0.0.1", fleet->port(node), &fd);
    EXPECT_TRUE(st.ok()) << st;
    std::string error;
    std::unique_ptr<internal::Stream> s = factory(fd, &error);
    EXPECT_NE(s, nullptr) << error;
    return s;
  };
  std::vector<bool> resumed;
  for (auto [node, factory] : {std::pair{0, &node0}, {0, &node0}, {1, &node1}, {0, &node0}}) {
    std::unique_ptr<internal::Stream> s = connect(node, *factory);
    ASSERT_NE(s, nullptr);
    PingOver(*s);
    EXPECT_EQ(s->Describe(), "TLSv1.3");
    resumed.push_back(dynamic_cast<internal::TlsStream&>(*s).resumed());
  }
  EXPECT_EQ(resumed, (std::vector<bool>{false, true, false, true}));
}

// A peer that answers the ClientHello with a Redis error line (what a
// plaintext Redis does when the hello happens to contain a newline).
TEST(TlsStreamTest, PlaintextAnswerToTheHandshakeSaysSo) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  absl::StatusOr<std::shared_ptr<internal::TlsContext>> context =
      internal::TlsContext::Create(TlsOptions{});
  REDLOCK_ASSERT_OK(context.status());
  std::string error;
  std::unique_ptr<internal::Stream> stream =
      internal::TlsStream::Create(*context, nullptr, fds[0], "localhost", &error);
  ASSERT_NE(stream, nullptr) << error;
  EXPECT_EQ(stream->Establish(), internal::Stream::Io::kWantRead);  // the hello went out
  char hello[4096];
  EXPECT_GT(read(fds[1], hello, sizeof(hello)), 0);
  const std::string reply = "-ERR unknown command\r\n";
  ASSERT_EQ(write(fds[1], reply.data(), reply.size()), static_cast<ssize_t>(reply.size()));
  EXPECT_EQ(stream->Establish(), internal::Stream::Io::kError);
  EXPECT_THAT(stream->error(), AllOf(HasSubstr("TLS handshake failed"),
                                     HasSubstr("is the node's port plaintext? use redis://")));
  EXPECT_EQ(stream->Describe(), "");
  close(fds[1]);
}

}  // namespace
}  // namespace redlock
