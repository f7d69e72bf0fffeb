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
#include "redlock/internal/scheme.h"
#include "redlock/internal/url.h"

namespace redlock {

// Each scheme parses, checks and names its own endpoints
// (internal/scheme_*.cc); what is common to all is here.

std::string Endpoint::ToString() const { return internal::SchemeOf(*this).Name(*this); }

absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text) {
  absl::StatusOr<internal::UrlParts> url = internal::SplitUrl(text);
  if (!url.ok()) return url.status();
  const internal::EndpointScheme* scheme = internal::SchemeForUrl(url->scheme);
  if (scheme == nullptr) {
    return internal::BadEndpoint(text,
                                 absl::StrCat("unknown scheme \"", url->scheme, "://\" (expected ",
                                              internal::KnownUrlSchemes(), ")"));
  }
  Endpoint ep;
  ep.username = url->username;
  ep.password = url->password;
  ep.tls_server_name = url->tls_server_name;
  absl::Status st = scheme->Parse(*url, &ep);
  if (!st.ok()) return st;
  if (!ep.tls_server_name.empty() && !ep.tls) {
    return internal::BadEndpoint(text, "tls_server_name is for TLS endpoints (rediss://)");
  }
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

absl::Duration DriftAllowance(absl::Duration ttl, const Options& options) {
  return ttl * options.clock_drift_factor + options.clock_drift_floor;
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
    const internal::EndpointScheme& scheme = internal::SchemeOf(ep);
    const std::string wrong = scheme.Check(ep);
    if (!wrong.empty()) return bad("node ", ep.ToString(), ": ", wrong);
    if (ep.db < 0) return bad("node ", ep.ToString(), ": negative database number");
    if (!ep.username.empty() && ep.password.empty()) {
      return bad("node ", ep.ToString(), ": a username needs a password");
    }
    if (!ep.tls_server_name.empty() && !ep.tls) {
      return bad("node ", ep.ToString(), ": tls_server_name is set but the node is not TLS");
    }
    // (Two names or addresses of one server are caught at Create and by
    // run_id, see internal/node_identity.h.)
    if (!seen.insert(scheme.Key(ep)).second) {
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
  if (o.fencing_counters == Options::FencingCounters::kShared) {
    for (const Endpoint& ep : o.nodes) {
      if (!ep.uses_cluster()) continue;
      // A cluster keeps a key and its counter on one master only when they
      // share a hash slot; one counter for every resource cannot.
      return bad("node ", ep.ToString(),
                 " is a cluster: fencing_counters = kShared keeps one counter for every "
                 "resource, which cannot share each resource's hash slot; use kPerResource");
    }
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
