#include "testkit/replication.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "testkit/redis.h"

namespace redlock::testkit {
namespace {

using SteadyClock = std::chrono::steady_clock;

SteadyClock::time_point After(absl::Duration d) {
  return SteadyClock::now() + absl::ToChronoNanoseconds(d);
}

// The value of `field` in an INFO reply ("" when absent).
std::string InfoField(const std::string& info, absl::string_view field) {
  for (absl::string_view line : absl::StrSplit(info, '\n')) {
    line = absl::StripSuffix(line, "\r");
    if (absl::ConsumePrefix(&line, field) && absl::ConsumePrefix(&line, ":")) {
      return std::string(line);
    }
  }
  return "";
}

// Calls `probe` (which says why not in *why) every `every` until it returns
// true or `timeout` passed. False at the timeout.
template <typename F>
bool PollUntil(absl::Duration timeout, absl::Duration every, std::string* why, F probe) {
  auto deadline = After(timeout);
  for (int tries = 0; tries < 100000 && SteadyClock::now() < deadline; ++tries) {
    if (probe(why)) return true;
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(every));
  }
  return false;
}

// PollUntil on `SENTINEL <list> <name>` asked of `sentinel`: `enough` gets the
// entries of each array answer (and says why not in *why).
template <typename F>
bool PollSentinelList(const Endpoint& sentinel, const std::string& list, const std::string& name,
                      absl::Duration timeout, absl::Duration every, std::string* why, F enough) {
  return PollUntil(timeout, every, why, [&](std::string* why_not) {
    absl::StatusOr<RedisValue> r = RunCommand(sentinel, {"SENTINEL", list, name}, absl::Seconds(1));
    if (!r.ok() || r->type != RedisValue::Type::kArray) {
      *why_not = r.ok() ? r->str : r.status().ToString();
      return false;
    }
    return enough(r->elements, why_not);
  });
}

// The value of `field` in a reply that is a flat list of field, value pairs
// (SENTINEL MASTER, one entry of SENTINEL REPLICAS); "" when absent.
std::string Field(const RedisValue& pairs, absl::string_view field) {
  for (size_t i = 0; i + 1 < pairs.elements.size(); i += 2) {
    if (pairs.elements[i].str == field) return pairs.elements[i + 1].str;
  }
  return "";
}

absl::Status CheckReply(const absl::StatusOr<RedisValue>& r, const std::string& what) {
  if (!r.ok())
    return absl::Status(r.status().code(), absl::StrCat(what, ": ", r.status().message()));
  if (r->is_error()) return absl::UnavailableError(absl::StrCat(what, ": ", r->str));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Endpoint> EndpointOf(const std::string& address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("not host:port: \"", address, "\""));
  }
  Endpoint ep;
  ep.host = address.substr(0, colon);
  ep.port = port;
  return ep;
}

// ---- Replicas -----------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Replicas>> Replicas::Start(ReplicaOptions options) {
  if (options.upstreams.empty() || options.per_group < 1) {
    return absl::InvalidArgumentError("replicas need at least one upstream and one per group");
  }
  std::unique_ptr<Replicas> r(new Replicas(std::move(options)));
  const ReplicaOptions& o = r->options_;
  FleetOptions fo;
  fo.nodes = static_cast<int>(o.upstreams.size()) * o.per_group;
  fo.aof = o.aof;
  fo.extra_args = o.extra_args;
  fo.node_env = o.node_env;
  fo.enable_debug = false;
  if (o.tls.has_value()) {
    fo.tls = true;
    fo.tls_certificates = o.tls;
    fo.extra_args.insert(fo.extra_args.end(), {"--tls-replication", "yes"});
  }
  absl::StatusOr<std::unique_ptr<Fleet>> fleet = Fleet::Start(std::move(fo));
  if (!fleet.ok()) return fleet.status();
  r->fleet_ = *std::move(fleet);
  for (int g = 0; g < r->groups(); ++g) {
    absl::StatusOr<Endpoint> up = EndpointOf(o.upstreams[static_cast<size_t>(g)]);
    if (!up.ok()) return up.status();
    TlsOptions tls;
    if (o.tls.has_value()) {
      up->tls = true;
      tls.ca_file = o.tls->ca_cert;
      tls.cert_file = o.tls->client_cert;
      tls.key_file = o.tls->client_key;
      tls.verify_peer = false;
    }
    absl::Status st = CheckReply(
        RunCommand(*up, {"CONFIG", "SET", "repl-diskless-sync-delay", "0"}, absl::Seconds(5), tls),
        absl::StrCat("upstream ", up->ToString()));
    if (!st.ok()) return st;
    for (int j = 0; j < o.per_group; ++j) {
      st = r->Follow(g, j, o.upstreams[static_cast<size_t>(g)]);
      if (!st.ok()) return st;
    }
  }
  for (int g = 0; g < r->groups(); ++g) {
    for (int j = 0; j < o.per_group; ++j) {
      absl::Status st = r->WaitSynced(g, j, o.sync_timeout);
      if (!st.ok()) return st;
    }
  }
  return r;
}

absl::Status Replicas::Follow(int group, int j, const std::string& upstream) {
  absl::StatusOr<Endpoint> up = EndpointOf(upstream);
  if (!up.ok()) return up.status();
  return CheckReply(
      fleet_->Command(index(group, j), {"REPLICAOF", up->host, std::to_string(up->port)}),
      absl::StrCat("REPLICAOF ", upstream, " on ", address(group, j)));
}

absl::Status Replicas::WaitSynced(int group, int j, absl::Duration timeout) {
  std::string last = "no answer";
  if (PollUntil(timeout, absl::Milliseconds(10), &last, [&](std::string* why) {
        absl::StatusOr<RedisValue> info =
            fleet_->Command(index(group, j), {"INFO", "replication"}, absl::Milliseconds(500));
        if (!info.ok() || info->is_error()) {
          *why = info.ok() ? info->str : info.status().ToString();
          return false;
        }
        *why = absl::StrCat("master_link_status:", InfoField(info->str, "master_link_status"));
        return InfoField(info->str, "master_link_status") == "up";
      })) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat("replica ", address(group, j),
                                                  " did not sync within ",
                                                  absl::FormatDuration(timeout), ": ", last));
}

absl::Status Replicas::Promote(int group, int j) {
  return CheckReply(fleet_->Command(index(group, j), {"REPLICAOF", "NO", "ONE"}),
                    absl::StrCat("REPLICAOF NO ONE on ", address(group, j)));
}

// ---- Sentinel -----------------------------------------------------------------

absl::Status CheckRedisSentinelAvailable() {
  absl::StatusOr<ServerBuild> server = SelectedServer();
  if (!server.ok()) return server.status();
  return RequireSentinel(*server).status();
}

absl::StatusOr<std::unique_ptr<Sentinel>> Sentinel::Start(SentinelOptions options) {
  std::string binary;
  if (options.binary.empty()) {
    absl::StatusOr<ServerBuild> server =
        RequireServer(options.server.empty() ? SelectedServerName() : options.server);
    if (!server.ok()) return server.status();
    absl::StatusOr<std::string> sentinel = RequireSentinel(*server);
    if (!sentinel.ok()) return sentinel.status();
    binary = *sentinel;
  } else {
    binary = FindExecutable(options.binary);
    if (binary.empty()) return absl::NotFoundError(absl::StrCat(options.binary, " not found"));
  }
  std::unique_ptr<Sentinel> s(new Sentinel());
  std::string dir = options.dir;
  if (dir.empty()) {
    s->dir_.emplace("redlock-sentinel");
    dir = s->dir_->path();
    if (dir.empty()) return absl::InternalError("cannot create a temp dir (mkdtemp)");
  }
  s->host_ = options.host;
  s->log_ = dir + "/sentinel.log";
  const std::string conf = dir + "/sentinel.conf";
  absl::Status st;
  for (int tries = 0; tries < 5; ++tries) {
    absl::StatusOr<int> port = PickFreePort(options.host);
    if (!port.ok()) return port.status();
    s->port_ = *port;
    if (options.tls.has_value()) {
      absl::StatusOr<int> tls_port = PickFreePort(options.host);
      if (!tls_port.ok()) return tls_port.status();
      s->tls_port_ = *tls_port;
    }
    {
      std::ofstream out(conf, std::ios::trunc);
      out << "port " << s->port_ << "\nbind " << options.host
          << "\ndaemonize no\nprotected-mode no\ndir " << dir << "\nlogfile " << s->log_ << "\n";
      if (options.tls.has_value()) {
        const TestCertificates& c = *options.tls;
        out << "tls-port " << s->tls_port_ << "\ntls-cert-file " << c.server_cert
            << "\ntls-key-file " << c.server_key << "\ntls-ca-cert-file " << c.ca_cert
            << "\ntls-auth-clients no\ntls-replication yes\n";
      }
      for (const SentinelOptions::Master& m : options.masters) {
        absl::StatusOr<Endpoint> ep = EndpointOf(m.address);
        if (!ep.ok()) return ep.status();
        out << "sentinel monitor " << m.name << " " << ep->host << " " << ep->port << " "
            << m.quorum << "\nsentinel down-after-milliseconds " << m.name << " "
            << absl::ToInt64Milliseconds(options.down_after) << "\nsentinel failover-timeout "
            << m.name << " " << absl::ToInt64Milliseconds(options.failover_timeout) << "\n";
      }
      for (const std::string& line : options.extra_config) out << line << "\n";
      if (!out) return absl::InternalError(absl::StrCat("cannot write ", conf));
    }
    if (options.uid >= 0) {
      const uid_t u = static_cast<uid_t>(options.uid);
      for (const std::string& path : {dir, conf}) {
        if (chown(path.c_str(), u, static_cast<gid_t>(u)) != 0) {
          return absl::InternalError(absl::StrCat("chown ", path, ": ", strerror(errno)));
        }
      }
    }
    ProcessOptions p;
    p.argv = {binary, conf};
    p.stdout_to = Stream::kLogFile;
    p.stderr_to = Stream::kLogFile;
    p.log_path = dir + "/sentinel-stdout.log";
    p.keep_signal_mask = true;
    p.uid = options.uid;
    absl::StatusOr<std::unique_ptr<Process>> process = Process::Start(std::move(p));
    if (!process.ok()) return process.status();
    s->process_ = *std::move(process);
    auto deadline = After(options.start_timeout);
    st = absl::DeadlineExceededError("no answer");
    for (int i = 0; i < 100000 && SteadyClock::now() < deadline; ++i) {
      if (!s->process_->Running()) {
        st = absl::InternalError(absl::StrCat(
            binary, " exited at start: ", absl::StrJoin(LastLines(s->log_, 6), " | ")));
        break;
      }
      absl::StatusOr<RedisValue> pong =
          RunCommand(s->endpoint(), {"PING"}, absl::Milliseconds(200));
      if (pong.ok() && !pong->is_error()) {
        st = absl::OkStatus();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (st.ok()) return s;
    s->process_.reset();
  }
  return st;
}

Sentinel::~Sentinel() { process_.reset(); }

std::string Sentinel::address() const { return absl::StrCat(host_, ":", port_); }

Endpoint Sentinel::endpoint() const {
  Endpoint ep;
  ep.host = host_;
  ep.port = port_;
  return ep;
}

Endpoint Sentinel::tls_endpoint() const {
  Endpoint ep;
  ep.host = host_;
  ep.port = tls_port_;
  ep.tls = true;
  return ep;
}

absl::StatusOr<std::string> Sentinel::MasterAddress(const std::string& name) const {
  absl::StatusOr<RedisValue> r =
      RunCommand(endpoint(), {"SENTINEL", "get-master-addr-by-name", name}, absl::Seconds(1));
  absl::Status st = CheckReply(r, absl::StrCat("sentinel ", address()));
  if (!st.ok()) return st;
  if (r->type != RedisValue::Type::kArray || r->elements.size() != 2) {
    return absl::NotFoundError(absl::StrCat("sentinel ", address(), " does not know ", name));
  }
  return absl::StrCat(r->elements[0].str, ":", r->elements[1].str);
}

absl::Status Sentinel::WaitReplicas(const std::string& name, int count,
                                    absl::Duration timeout) const {
  std::string last = "no answer";
  if (PollSentinelList(endpoint(), "replicas", name, timeout, absl::Milliseconds(20), &last,
                       [&](const std::vector<RedisValue>& replicas, std::string* why) {
                         int linked = 0;
                         for (const RedisValue& replica : replicas) {
                           linked += Field(replica, "master-link-status") == "ok";
                         }
                         *why = absl::StrCat(linked, " of ", replicas.size(),
                                             " known replicas linked");
                         return linked >= count;
                       })) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat("sentinel ", address(), " did not see ", count,
                                                  " linked replicas of ", name, " within ",
                                                  absl::FormatDuration(timeout), ": ", last));
}

absl::Status Sentinel::WaitPeers(const std::string& name, int count, absl::Duration timeout) const {
  std::string last = "no answer";
  if (PollSentinelList(endpoint(), "sentinels", name, timeout, absl::Milliseconds(50), &last,
                       [&](const std::vector<RedisValue>& peers, std::string* why) {
                         *why = absl::StrCat(peers.size(), " other Sentinels known");
                         return static_cast<int>(peers.size()) >= count;
                       })) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "sentinel ", address(), " did not learn of ", count, " other Sentinels watching ", name,
      " within ", absl::FormatDuration(timeout), ": ", last));
}

absl::Status Sentinel::SetDownAfter(const std::string& name, absl::Duration down_after) const {
  return CheckReply(
      RunCommand(endpoint(),
                 {"SENTINEL", "SET", name, "down-after-milliseconds",
                  std::to_string(absl::ToInt64Milliseconds(down_after))},
                 absl::Seconds(2)),
      absl::StrCat("sentinel ", address(), " SENTINEL SET ", name, " down-after-milliseconds"));
}

absl::StatusOr<std::string> Sentinel::MasterField(const std::string& name,
                                                  const std::string& field) const {
  absl::StatusOr<RedisValue> r =
      RunCommand(endpoint(), {"SENTINEL", "MASTER", name}, absl::Seconds(2));
  absl::Status st = CheckReply(r, absl::StrCat("sentinel ", address(), " SENTINEL MASTER ", name));
  if (!st.ok()) return st;
  if (r->type != RedisValue::Type::kArray) {
    return absl::NotFoundError(absl::StrCat("sentinel ", address(), " does not know ", name));
  }
  return Field(*r, field);
}

absl::StatusOr<std::string> Sentinel::AwaitFailover(const std::string& name,
                                                    const std::string& from,
                                                    absl::Duration timeout) const {
  std::string last = "no answer";
  std::string now;
  if (PollUntil(timeout, absl::Milliseconds(10), &last, [&](std::string* why) {
        absl::StatusOr<RedisValue> r =
            RunCommand(endpoint(), {"SENTINEL", "MASTER", name}, absl::Seconds(1));
        if (!r.ok() || r->type != RedisValue::Type::kArray) {
          *why = r.ok() ? r->str : r.status().ToString();
          return false;
        }
        // Done when the address moved and the failover is over (flags back
        // to exactly "master": Sentinel has switched, +switch-master).
        now = absl::StrCat(Field(*r, "ip"), ":", Field(*r, "port"));
        *why = absl::StrCat(now, " flags ", Field(*r, "flags"));
        return now != from && Field(*r, "flags") == "master";
      })) {
    return now;
  }
  return absl::DeadlineExceededError(
      absl::StrCat("sentinel ", address(), " did not fail ", name, " over within ",
                   absl::FormatDuration(timeout), " (last: ", last,
                   "); its log ends: ", absl::StrJoin(LastLines(log_, 8), " | ")));
}

}  // namespace redlock::testkit
