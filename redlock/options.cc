#include "redlock/options.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace redlock {
namespace {

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed endpoint \"", text, "\": ", why));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<std::string> PercentDecode(absl::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return absl::InvalidArgumentError("truncated percent escape");
    int hi = HexValue(in[i + 1]);
    int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("bad percent escape");
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

bool ValidHostChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

// Parses "host:port", "[v6]:port" or, when `port_optional`, also "host".
absl::Status ParseHostPort(absl::string_view original, absl::string_view hp, bool port_optional,
                           Endpoint* out) {
  absl::string_view host;
  absl::string_view port;
  bool has_port = false;
  if (absl::StartsWith(hp, "[")) {
    size_t close = hp.find(']');
    if (close == absl::string_view::npos) return Bad(original, "missing ']' after IPv6 address");
    host = hp.substr(1, close - 1);
    absl::string_view rest = hp.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return Bad(original, "expected ':' after ']'");
      port = rest.substr(1);
      has_port = true;
    }
    for (char c : host) {
      if (!(absl::ascii_isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) {
        return Bad(original, "invalid IPv6 address");
      }
    }
  } else {
    size_t colon = hp.rfind(':');
    if (colon != absl::string_view::npos) {
      host = hp.substr(0, colon);
      port = hp.substr(colon + 1);
      has_port = true;
      if (absl::StrContains(host, ':')) {
        return Bad(original, "IPv6 addresses must be written in brackets: [::1]:6379");
      }
    } else {
      host = hp;
    }
    for (char c : host) {
      if (!ValidHostChar(c))
        return Bad(original, absl::StrCat("invalid character '", std::string(1, c), "' in host"));
    }
  }
  if (host.empty()) return Bad(original, "empty host");
  out->host = std::string(host);
  if (!has_port) {
    if (!port_optional) return Bad(original, "expected host:port");
    out->port = 6379;
    return absl::OkStatus();
  }
  int p = 0;
  if (port.empty() || !absl::SimpleAtoi(port, &p) ||
      port.find_first_not_of("0123456789") != absl::string_view::npos) {
    return Bad(original, absl::StrCat("port \"", port, "\" is not a number"));
  }
  if (p < 1 || p > 65535)
    return Bad(original, absl::StrCat("port ", p, " is out of range 1..65535"));
  out->port = p;
  return absl::OkStatus();
}

}  // namespace

std::string Endpoint::ToString() const {
  auto host_port = [](const std::string& h, int p) {
    if (h.find(':') != std::string::npos) return absl::StrCat("[", h, "]:", p);
    return absl::StrCat(h, ":", p);
  };
  if (!uses_sentinel()) return host_port(host, port);
  std::string out = absl::StrCat("sentinel:", sentinel_master, "@");
  for (size_t i = 0; i < sentinels.size(); ++i) {
    if (i > 0) out.push_back('+');
    absl::StrAppend(&out, host_port(sentinels[i].host, sentinels[i].port));
  }
  return out;
}

absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.empty()) return Bad(text, "empty");
  Endpoint ep;
  size_t scheme_end = s.find("://");
  if (scheme_end == absl::string_view::npos) {
    absl::Status st = ParseHostPort(text, s, /*port_optional=*/false, &ep);
    if (!st.ok()) return st;
    return ep;
  }
  std::string scheme = absl::AsciiStrToLower(s.substr(0, scheme_end));
  if (scheme == "rediss+sentinel") {
    return Bad(text, "Sentinel discovery over TLS is not supported yet (use redis+sentinel://)");
  }
  if (scheme != "redis" && scheme != "rediss" && scheme != "redis+sentinel") {
    return Bad(text, absl::StrCat("unknown scheme \"", scheme,
                                  "://\" (expected redis://, rediss:// or redis+sentinel://)"));
  }
  ep.tls = scheme == "rediss";
  absl::string_view rest = s.substr(scheme_end + 3);
  if (absl::StrContains(rest, '?') || absl::StrContains(rest, '#')) {
    return Bad(text, "query strings and fragments are not supported");
  }
  size_t at = rest.rfind('@');
  if (at != absl::string_view::npos) {
    absl::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (colon == absl::string_view::npos) {
      return Bad(text, "credentials must be user:password or :password");
    }
    auto user = PercentDecode(userinfo.substr(0, colon));
    auto pass = PercentDecode(userinfo.substr(colon + 1));
    if (!user.ok()) return Bad(text, user.status().message());
    if (!pass.ok()) return Bad(text, pass.status().message());
    if (pass->empty()) return Bad(text, "empty password");
    ep.username = *std::move(user);
    ep.password = *std::move(pass);
  }
  absl::string_view hp = rest;
  absl::string_view path;  // after the first '/'
  size_t slash = rest.find('/');
  if (slash != absl::string_view::npos) {
    hp = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  if (scheme == "redis+sentinel") {
    // path: master[/db]
    size_t db_slash = path.find('/');
    absl::string_view master = path.substr(0, db_slash);
    if (master.empty()) {
      return Bad(text, "expected the master's name after the Sentinels: .../mymaster");
    }
    auto name = PercentDecode(master);
    if (!name.ok()) return Bad(text, name.status().message());
    ep.sentinel_master = *std::move(name);
    path = db_slash == absl::string_view::npos ? absl::string_view() : path.substr(db_slash + 1);
    for (absl::string_view one : absl::StrSplit(hp, '+')) {
      Endpoint sentinel;
      absl::Status st = ParseHostPort(text, one, /*port_optional=*/true, &sentinel);
      if (!st.ok()) return st;
      if (one.find(':') == absl::string_view::npos || absl::EndsWith(one, "]")) {
        sentinel.port = 26379;  // Sentinel's default port, not Redis's
      }
      ep.sentinels.push_back(SentinelAddress{sentinel.host, sentinel.port});
    }
    ep.host.clear();
  }
  if (!path.empty()) {
    int v = 0;
    if (path.find_first_not_of("0123456789") != absl::string_view::npos ||
        !absl::SimpleAtoi(path, &v) || v < 0) {
      return Bad(text, absl::StrCat("database \"", path, "\" is not a non-negative number"));
    }
    ep.db = v;
  }
  if (ep.uses_sentinel()) return ep;
  absl::Status st = ParseHostPort(text, hp, /*port_optional=*/true, &ep);
  if (!st.ok()) return st;
  return ep;
}

absl::StatusOr<std::vector<Endpoint>> ParseEndpointList(absl::string_view text) {
  std::vector<Endpoint> out;
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError("empty node list");
  }
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    absl::StatusOr<Endpoint> ep = ParseEndpoint(item);
    if (!ep.ok()) return ep.status();
    out.push_back(*std::move(ep));
  }
  return out;
}

int EffectiveQuorum(const Options& options) {
  if (options.quorum > 0) return options.quorum;
  return static_cast<int>(options.nodes.size()) / 2 + 1;
}

absl::Status ValidateOptions(const Options& o) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("invalid options: ", parts...));
  };
  const int n = static_cast<int>(o.nodes.size());
  if (n == 0) return bad("no nodes");
  std::set<std::string> seen;  // one key per server a node names
  for (const Endpoint& ep : o.nodes) {
    if (ep.uses_sentinel()) {
      if (ep.sentinels.empty()) return bad("node ", ep.ToString(), ": no Sentinels to ask");
      for (const SentinelAddress& s : ep.sentinels) {
        if (s.host.empty()) return bad("node ", ep.ToString(), ": a Sentinel has an empty host");
        if (s.port < 1 || s.port > 65535) {
          return bad("node ", ep.ToString(), ": a Sentinel's port is out of range 1..65535");
        }
      }
      if (ep.tls) {
        return bad("node ", ep.ToString(),
                   ": Sentinel discovery over TLS is not supported yet (the name to check the "
                   "certificate against would change with every failover)");
      }
      if (!ep.sentinel_username.empty() && ep.sentinel_password.empty()) {
        return bad("node ", ep.ToString(), ": a Sentinel username needs a password");
      }
    } else {
      if (!ep.sentinels.empty() || !ep.sentinel_password.empty() || !ep.sentinel_username.empty()) {
        return bad("node ", ep.ToString(), ": Sentinels are given without sentinel_master");
      }
      if (ep.host.empty()) return bad("a node has an empty host");
      if (ep.port < 1 || ep.port > 65535)
        return bad("node ", ep.ToString(), ": port out of range 1..65535");
    }
    if (ep.db < 0) return bad("node ", ep.ToString(), ": negative database number");
    if (!ep.username.empty() && ep.password.empty()) {
      return bad("node ", ep.ToString(), ": a username needs a password");
    }
    // Host names are case-insensitive; a Sentinel's master name is not.
    // (Two names or addresses of one server are caught at Create and by
    // run_id, see internal/node_identity.h.)
    const std::string key =
        ep.uses_sentinel() ? ep.ToString() : absl::AsciiStrToLower(ep.ToString());
    if (!seen.insert(key).second) {
      return bad("node ", ep.ToString(),
                 " is listed twice (each node must be an independent master)");
    }
  }
  if (o.quorum < 0 || o.quorum > n)
    return bad("quorum ", o.quorum, " is outside 0..", n, " (N = ", n, ")");
  if (o.quorum != 0 && o.quorum <= n / 2) {
    return bad("quorum ", o.quorum, " is not a majority of ", n,
               " nodes: two clients could both hold a lock");
  }
  if (o.fencing_lost_counters < 0 || o.fencing_lost_counters > n - 1) {
    return bad("fencing_lost_counters ", o.fencing_lost_counters, " is outside 0..", n - 1,
               " (N = ", n,
               "; N - 1 already makes every fenced acquisition read and commit on "
               "all nodes)");
  }
  if (o.fencing_counters != Options::FencingCounters::kPerResource && !o.fencing) {
    return bad("fencing_counters is set but fencing is off");
  }
  if (o.fencing_lost_counters > 0 && !o.fencing) {
    return bad("fencing_lost_counters ", o.fencing_lost_counters, " is set but fencing is off");
  }
  auto positive = [](absl::Duration d) {
    return d > absl::ZeroDuration() && d != absl::InfiniteDuration();
  };
  auto non_negative = [](absl::Duration d) {
    return d >= absl::ZeroDuration() && d != absl::InfiniteDuration();
  };
  if (!positive(o.node_timeout)) return bad("node_timeout must be positive and finite");
  if (!(o.clock_drift_factor >= 0.0 && o.clock_drift_factor < 1.0)) {
    return bad("clock_drift_factor ", o.clock_drift_factor, " is outside [0, 1)");
  }
  if (!non_negative(o.clock_drift_floor)) return bad("clock_drift_floor must be >= 0 and finite");
  if (o.max_attempts < 1) return bad("max_attempts must be >= 1");
  if (!non_negative(o.retry_delay)) return bad("retry_delay must be >= 0 and finite");
  if (!non_negative(o.retry_jitter)) return bad("retry_jitter must be >= 0 and finite");
  if (!positive(o.connect_timeout)) return bad("connect_timeout must be positive and finite");
  if (!positive(o.reconnect_backoff_min))
    return bad("reconnect_backoff_min must be positive and finite");
  if (!positive(o.reconnect_backoff_max) || o.reconnect_backoff_max < o.reconnect_backoff_min) {
    return bad("reconnect_backoff_max must be finite and >= reconnect_backoff_min");
  }
  if (!positive(o.breaker_probe_interval))
    return bad("breaker_probe_interval must be positive and finite");
  if (!positive(o.wait_poll_max)) return bad("wait_poll_max must be positive and finite");
  if (o.max_in_flight_per_node < 16) return bad("max_in_flight_per_node must be >= 16");
  if (o.max_reply_bytes < kMinReplyBytes) {
    return bad("max_reply_bytes ", o.max_reply_bytes, " is below the minimum of ", kMinReplyBytes);
  }
  if (o.max_reply_elements < kMinReplyElements) {
    return bad("max_reply_elements ", o.max_reply_elements, " is below the minimum of ",
               kMinReplyElements);
  }
  if (o.durability.replicas < 0) {
    return bad("durability.replicas ", o.durability.replicas, " is negative");
  }
  if (o.durability.replicas > 0) {
    const absl::Duration t = o.durability.timeout;
    // WAIT 0 would block forever; below a millisecond WAIT cannot express it.
    if (t == absl::InfiniteDuration() || t < absl::Milliseconds(1)) {
      return bad("durability.timeout must be at least 1ms and finite (WAIT's timeout)");
    }
    if (t >= o.node_timeout) {
      return bad("durability.timeout ", absl::FormatDuration(t),
                 " must be shorter than node_timeout ", absl::FormatDuration(o.node_timeout),
                 " (the wait is part of the node's round trip)");
    }
  } else if (o.durability.fsync) {
    return bad("durability.fsync needs durability.replicas > 0");
  }
  const TlsOptions& tls = o.tls;
  const bool any_tls_node =
      std::any_of(o.nodes.begin(), o.nodes.end(), [](const Endpoint& ep) { return ep.tls; });
  if (!any_tls_node && (!tls.ca_file.empty() || !tls.ca_dir.empty() || !tls.cert_file.empty() ||
                        !tls.key_file.empty() || !tls.server_name.empty() || !tls.verify_peer)) {
    return bad("TLS settings are given but no node uses TLS (write its endpoint as rediss://)");
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return bad(tls.cert_file.empty() ? "a TLS client key needs its certificate (cert_file)"
                                     : "a TLS client certificate needs its key (key_file)");
  }
  if (o.key_prefix.size() > kMaxResourceLength) {
    return bad("key_prefix is longer than ", kMaxResourceLength, " bytes");
  }
  return absl::OkStatus();
}

}  // namespace redlock
