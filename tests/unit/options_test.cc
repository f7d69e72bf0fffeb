#include "redlock/options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace redlock {
namespace {

using ::testing::HasSubstr;

TEST(ParseEndpoint, HostPort) {
  absl::StatusOr<Endpoint> ep = ParseEndpoint("127.0.0.1:7001");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 7001);
  EXPECT_EQ(ep->db, 0);
  EXPECT_TRUE(ep->password.empty());
  EXPECT_EQ(ep->ToString(), "127.0.0.1:7001");
}

TEST(ParseEndpoint, HostNameAndWhitespace) {
  absl::StatusOr<Endpoint> ep = ParseEndpoint("  redis-1.internal:6380 ");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->host, "redis-1.internal");
  EXPECT_EQ(ep->port, 6380);
}

TEST(ParseEndpoint, Ipv6InBrackets) {
  absl::StatusOr<Endpoint> ep = ParseEndpoint("[::1]:7001");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->host, "::1");
  EXPECT_EQ(ep->ToString(), "[::1]:7001");
}

TEST(ParseEndpoint, RedisUrlWithPasswordAndDb) {
  absl::StatusOr<Endpoint> ep = ParseEndpoint("redis://:s3cret@127.0.0.1:7003/2");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 7003);
  EXPECT_EQ(ep->username, "");
  EXPECT_EQ(ep->password, "s3cret");
  EXPECT_EQ(ep->db, 2);
  EXPECT_EQ(ep->ToString().find("s3cret"), std::string::npos) << "names must not leak passwords";
}

TEST(ParseEndpoint, RedisUrlWithAclUserAndEscapes) {
  absl::StatusOr<Endpoint> ep = ParseEndpoint("REDIS://alice:p%40ss%3Aword@localhost:6379");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->username, "alice");
  EXPECT_EQ(ep->password, "p@ss:word");
  EXPECT_EQ(ep->host, "localhost");
}

TEST(ParseEndpoint, RedisUrlDefaultPort) {
  absl::StatusOr<Endpoint> ep = ParseEndpoint("redis://10.0.0.1");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->port, 6379);
}

TEST(ParseEndpoint, RedissUrlIsTls) {
  absl::StatusOr<Endpoint> ep = ParseEndpoint("rediss://alice:pw@redis-1.example:6380/3");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_TRUE(ep->tls);
  EXPECT_EQ(ep->host, "redis-1.example");
  EXPECT_EQ(ep->port, 6380);
  EXPECT_EQ(ep->username, "alice");
  EXPECT_EQ(ep->db, 3);
  EXPECT_EQ(ep->ToString(), "redis-1.example:6380");
  EXPECT_EQ(ParseEndpoint("RedisS://h")->port, 6379);
  EXPECT_FALSE(ParseEndpoint("redis://h:1")->tls);
  EXPECT_FALSE(ParseEndpoint("h:1")->tls);
}

TEST(ParseEndpoint, SentinelUrl) {
  absl::StatusOr<Endpoint> ep =
      ParseEndpoint("redis+sentinel://:pw@10.0.0.1:26380+sentinel-2+[::1]/my%20master/4");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_TRUE(ep->uses_sentinel());
  EXPECT_EQ(ep->sentinel.master, "my master");
  ASSERT_EQ(ep->sentinel.sentinels.size(), 3u);
  EXPECT_EQ(ep->sentinel.sentinels[0].host, "10.0.0.1");
  EXPECT_EQ(ep->sentinel.sentinels[0].port, 26380);
  EXPECT_EQ(ep->sentinel.sentinels[1].host, "sentinel-2");
  EXPECT_EQ(ep->sentinel.sentinels[1].port, 26379) << "Sentinel's default port, not Redis's";
  EXPECT_EQ(ep->sentinel.sentinels[2].host, "::1");
  EXPECT_EQ(ep->sentinel.sentinels[2].port, 26379);
  // The credentials and the database are the master's; the Sentinels' own
  // credentials are Endpoint fields only.
  EXPECT_EQ(ep->password, "pw");
  EXPECT_TRUE(ep->sentinel.password.empty());
  EXPECT_EQ(ep->db, 4);
  EXPECT_TRUE(ep->host.empty()) << "the master's address is learnt, not given";
  EXPECT_FALSE(ep->tls);
  EXPECT_EQ(ep->ToString(), "sentinel:my master@10.0.0.1:26380+sentinel-2:26379+[::1]:26379");
  EXPECT_EQ(ep->ToString().find("pw"), std::string::npos);
  EXPECT_TRUE(ValidateOptions(Options{.nodes = {*ep}}).ok());

  absl::StatusOr<Endpoint> one = ParseEndpoint("REDIS+SENTINEL://127.0.0.1/mymaster");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->db, 0);
  EXPECT_EQ(one->ToString(), "sentinel:mymaster@127.0.0.1:26379");
  EXPECT_EQ(*one, *ParseEndpoint("redis+sentinel://127.0.0.1:26379/mymaster"));
  EXPECT_FALSE(*one == *ParseEndpoint("redis+sentinel://127.0.0.1:26379/other"));
}

TEST(ParseEndpoint, SentinelOverTlsUrl) {
  absl::StatusOr<Endpoint> ep = ParseEndpoint(
      "rediss+sentinel://:pw@10.0.0.1:26380+sentinel-2/mymaster/2?tls_server_name=redis.example");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_TRUE(ep->uses_sentinel());
  EXPECT_TRUE(ep->tls) << "Sentinels and master over TLS";
  EXPECT_EQ(ep->tls_server_name, "redis.example");
  EXPECT_EQ(ep->sentinel.master, "mymaster");
  ASSERT_EQ(ep->sentinel.sentinels.size(), 2u);
  EXPECT_EQ(ep->sentinel.sentinels[1].port, 26379);
  EXPECT_EQ(ep->db, 2);
  EXPECT_EQ(ep->password, "pw");
  EXPECT_EQ(ep->ToString(), "sentinel:mymaster@10.0.0.1:26380+sentinel-2:26379");
  Options o{.nodes = {*ep}};
  o.tls.ca_file = "ca.pem";
  EXPECT_TRUE(ValidateOptions(o).ok()) << ValidateOptions(o);
  // Without the name: the master's certificate is checked against the
  // address the Sentinels name.
  absl::StatusOr<Endpoint> plain_name = ParseEndpoint("REDISS+SENTINEL://127.0.0.1/m");
  ASSERT_TRUE(plain_name.ok()) << plain_name.status();
  EXPECT_TRUE(plain_name->tls);
  EXPECT_TRUE(plain_name->tls_server_name.empty());
  EXPECT_FALSE(*plain_name == *ParseEndpoint("redis+sentinel://127.0.0.1/m"));
}

TEST(ParseEndpoint, TlsServerNameIsForTlsForms) {
  absl::StatusOr<Endpoint> ep =
      ParseEndpoint("rediss://10.0.0.7:6380?tls_server_name=redis%2D7.example");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->host, "10.0.0.7");
  EXPECT_EQ(ep->tls_server_name, "redis-7.example");
  EXPECT_EQ(ep->ToString(), "10.0.0.7:6380") << "the node's name is its address";
  for (const char* bad : {"redis://h:1?tls_server_name=x", "rediss://h:1?tls_server_name=",
                          "rediss://h:1?server_name=x", "rediss://h:1?tls_server_name=x&db=1",
                          "rediss://h:1?tls_server_name=%zz", "rediss://h:1#frag"}) {
    absl::StatusOr<Endpoint> r = ParseEndpoint(bad);
    EXPECT_FALSE(r.ok()) << "accepted \"" << bad << "\"";
    if (!r.ok()) {
      EXPECT_THAT(std::string(r.status().message()), HasSubstr("malformed endpoint"));
    }
  }
}

TEST(ParseEndpoint, UnknownSchemesListTheKnownOnes) {
  absl::StatusOr<Endpoint> ep = ParseEndpoint("redis+tls://h:1");
  ASSERT_FALSE(ep.ok());
  EXPECT_THAT(std::string(ep.status().message()),
              HasSubstr("expected redis://, rediss://, redis+cluster://, rediss+cluster://, "
                        "redis+sentinel://, rediss+sentinel://"));
}

TEST(ParseEndpoint, RejectsMalformedSentinelUrls) {
  for (const char* bad :
       {"redis+sentinel://127.0.0.1:26379", "redis+sentinel://127.0.0.1:26379/",
        "redis+sentinel://127.0.0.1:26379//2", "redis+sentinel://127.0.0.1:0/m",
        "redis+sentinel://127.0.0.1:x/m", "redis+sentinel://127.0.0.1++127.0.0.2/m",
        "redis+sentinel://127.0.0.1/m/x", "redis+sentinel://127.0.0.1/m%zz",
        "rediss+sentinel://127.0.0.1/", "redis+sentinel://h/m?tls_server_name=x"}) {
    absl::StatusOr<Endpoint> ep = ParseEndpoint(bad);
    EXPECT_FALSE(ep.ok()) << "accepted \"" << bad << "\"";
    if (!ep.ok()) {
      EXPECT_EQ(ep.status().code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(ep.status().message().find("malformed endpoint"), absl::string_view::npos);
    }
  }
  EXPECT_NE(ParseEndpoint("redis+sentinel://h:1").status().message().find("master's name"),
            absl::string_view::npos);
}

TEST(ParseEndpoint, RejectsMalformed) {
  for (const char* bad : {"",
                          "   ",
                          "localhost",
                          "127.0.0.1:",
                          ":7001",
                          "127.0.0.1:0",
                          "127.0.0.1:65536",
                          "127.0.0.1:70x",
                          "127.0.0.1:-1",
                          "::1:7001",
                          "[::1:7001",
                          "[::1]7001",
                          "host name:1",
                          "redis+tls://h:1",
                          "http://h:1",
                          "redis://user@h:1",
                          "redis://:@h:1",
                          "redis://h:1/x",
                          "redis://h:1/-1",
                          "redis://h:1?db=2",
                          "redis://:%zz@h:1",
                          "redis://:a%2@h:1"}) {
    absl::StatusOr<Endpoint> ep = ParseEndpoint(bad);
    EXPECT_FALSE(ep.ok()) << "accepted \"" << bad << "\"";
    if (!ep.ok()) {
      EXPECT_EQ(ep.status().code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(ep.status().message().find("malformed endpoint"), absl::string_view::npos);
    }
  }
}

TEST(ParseEndpointList, ParsesAndRejectsEmptyItems) {
  auto list = ParseEndpointList("127.0.0.1:1,127.0.0.1:2,redis://:pw@127.0.0.1:3");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[2].password, "pw");
  EXPECT_FALSE(ParseEndpointList("").ok());
  EXPECT_FALSE(ParseEndpointList("127.0.0.1:1,,127.0.0.1:2").ok());
}

Options FiveNodes() {
  Options o;
  for (int i = 0; i < 5; ++i)
    o.nodes.push_back(*ParseEndpoint("127.0.0.1:" + std::to_string(7001 + i)));
  return o;
}

TEST(EffectiveQuorum, MajorityByDefault) {
  Options o;
  for (int n = 1; n <= 8; ++n) {
    o.nodes.clear();
    for (int i = 0; i < n; ++i)
      o.nodes.push_back(*ParseEndpoint("127.0.0.1:" + std::to_string(7001 + i)));
    EXPECT_EQ(EffectiveQuorum(o), n / 2 + 1) << n;
  }
  o.quorum = 8;
  EXPECT_EQ(EffectiveQuorum(o), 8);
}

TEST(ValidateOptions, AcceptsDefaults) {
  EXPECT_TRUE(ValidateOptions(FiveNodes()).ok());
  // Plain and TLS nodes mixed; TLS settings for the TLS ones (the files are
  // loaded by Client::Create, not here).
  Options o = FiveNodes();
  o.nodes[0].tls = true;
  EXPECT_TRUE(ValidateOptions(o).ok());
  o.tls.ca_file = "/nonexistent/ca.pem";
  o.tls.cert_file = "c.pem";
  o.tls.key_file = "k.pem";
  EXPECT_TRUE(ValidateOptions(o).ok());
}

TEST(ValidateOptions, QuorumMustBeAMajorityOrN) {
  Options o = FiveNodes();
  for (int q : {0, 3, 4, 5}) {
    o.quorum = q;
    EXPECT_TRUE(ValidateOptions(o).ok()) << q;
  }
  for (int q : {-1, 1, 2, 6}) {
    o.quorum = q;
    absl::Status st = ValidateOptions(o);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << q;
  }
}

TEST(ValidateOptions, FencingLostCountersNeedFencingAndFewerThanN) {
  Options o = FiveNodes();
  o.fencing = true;
  for (int f : {0, 1, 2, 4}) {
    o.fencing_lost_counters = f;
    EXPECT_TRUE(ValidateOptions(o).ok()) << f;
  }
  for (int f : {-1, 5}) {
    o.fencing_lost_counters = f;
    absl::Status st = ValidateOptions(o);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << f;
    EXPECT_NE(st.message().find("fencing_lost_counters"), absl::string_view::npos) << st;
  }
  o.nodes.resize(1);
  o.fencing_lost_counters = 1;
  EXPECT_EQ(ValidateOptions(o).code(), absl::StatusCode::kInvalidArgument)
      << "one node cannot survive losing its counter";
  o.fencing_lost_counters = 0;
  EXPECT_TRUE(ValidateOptions(o).ok());
  o = FiveNodes();
  o.fencing_lost_counters = 1;
  absl::Status st = ValidateOptions(o);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("fencing is off"), absl::string_view::npos) << st;
}

TEST(ValidateOptions, RejectsBadFields) {
  auto check = [](auto mutate, absl::string_view needle) {
    Options o = FiveNodes();
    mutate(o);
    absl::Status st = ValidateOptions(o);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(st.message().find(needle), absl::string_view::npos) << st;
  };
  check([](Options& o) { o.nodes.clear(); }, "no nodes");
  check([](Options& o) { o.nodes.push_back(o.nodes[0]); }, "listed twice");
  check(
      [](Options& o) {
        o.nodes[1].host = "127.0.0.1";
        o.nodes[1].port = 7001;
      },
      "listed twice");
  check([](Options& o) { o.nodes[0].port = 0; }, "port");
  check([](Options& o) { o.nodes[0].username = "u"; }, "username needs a password");
  check([](Options& o) { o.node_timeout = absl::ZeroDuration(); }, "node_timeout");
  check([](Options& o) { o.node_timeout = absl::InfiniteDuration(); }, "node_timeout");
  check([](Options& o) { o.clock_drift_factor = 1.0; }, "clock_drift_factor");
  check([](Options& o) { o.clock_drift_factor = -0.1; }, "clock_drift_factor");
  check([](Options& o) { o.clock_drift_floor = absl::Milliseconds(-1); }, "clock_drift_floor");
  check([](Options& o) { o.max_attempts = 0; }, "max_attempts");
  check([](Options& o) { o.retry_delay = absl::Milliseconds(-5); }, "retry_delay");
  check([](Options& o) { o.retry_jitter = absl::InfiniteDuration(); }, "retry_jitter");
  check([](Options& o) { o.reconnect_backoff_max = absl::Milliseconds(1); },
        "reconnect_backoff_max");
  check([](Options& o) { o.max_in_flight_per_node = 3; }, "max_in_flight_per_node");
  check([](Options& o) { o.max_reply_bytes = kMinReplyBytes - 1; }, "max_reply_bytes");
  check([](Options& o) { o.max_reply_elements = 16; }, "max_reply_elements");
  check([](Options& o) { o.key_prefix = std::string(kMaxResourceLength + 1, 'p'); }, "key_prefix");
  // TLS: certificate and key come in pairs; TLS settings need a TLS node.
  check(
      [](Options& o) {
        o.nodes[0].tls = true;
        o.tls.cert_file = "c.pem";
      },
      "needs its key");
  check(
      [](Options& o) {
        o.nodes[0].tls = true;
        o.tls.key_file = "k.pem";
      },
      "needs its certificate");
  check([](Options& o) { o.tls.ca_file = "ca.pem"; }, "no node uses TLS");
  // Sentinel discovery: Sentinels need a master's name and the other way
  // round; a TLS name needs TLS; each master named once.
  const Endpoint via_sentinel = *ParseEndpoint("redis+sentinel://127.0.0.1:26379/m1");
  check([&](Options& o) { o.nodes[0] = via_sentinel, o.nodes[0].sentinel.sentinels.clear(); },
        "no Sentinels");
  check([&](Options& o) { o.nodes[0] = via_sentinel, o.nodes[0].sentinel.sentinels[0].port = 0; },
        "Sentinel's port");
  check(
      [&](Options& o) { o.nodes[0] = via_sentinel, o.nodes[0].sentinel.sentinels[0].host.clear(); },
      "empty host");
  check([&](Options& o) { o.nodes[0] = via_sentinel, o.nodes[0].tls_server_name = "x"; },
        "not TLS");
  check(
      [&](Options& o) {
        o.nodes[0] = via_sentinel, o.nodes[0].sentinel.sentinels.resize(4097, {"h", 1});
      },
      "at most 4096");
  check([&](Options& o) { o.nodes[0] = via_sentinel, o.nodes[0].sentinel.username = "u"; },
        "Sentinel username needs a password");
  check([&](Options& o) { o.nodes[0] = o.nodes[1] = via_sentinel; }, "listed twice");
  check(
      [](Options& o) {
        o.nodes[0].sentinel.sentinels.push_back({"127.0.0.1", 26379});
      },
      "without sentinel.master");
  check([](Options& o) { o.nodes[0].sentinel.password = "pw"; }, "without sentinel.master");
  check([](Options& o) { o.tls.verify_peer = false; }, "no node uses TLS");
}

}  // namespace
}  // namespace redlock
