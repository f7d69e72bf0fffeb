// The `tls` scenario: the library on N TLS nodes (rediss://, a fleet with a
// throw-away CA started for the group) side by side with the same library
// on the run's N plain nodes, 1 and many callers, plus what connections
// cost: a fresh Client (N connections: TCP, the TLS handshake, AUTH, INFO
// and the scripts) taking its first lock, and one node's reconnection as
// the engine makes it (the connection type of the engine: TCP, the TLS
// handshake resuming the node's session, then a PING). The group's notes
// give the TLS/plain ratios.

#include <poll.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/locker.h"
#include "bench/report.h"
#include "bench/rows.h"
#include "bench/scenarios.h"
#include "redlock/client.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/tls_stream.h"
#include "testkit/fleet.h"

namespace redlock::bench {
namespace {

// `callers` threads sharing one client on `options`' nodes.
RowResult LockRow(Context& ctx, const Options& options, const std::string& variant, int callers) {
  RowResult identity = LibraryRowIdentity(
      variant.empty() ? "library" : absl::StrCat("library ", variant), variant, callers);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  if (!client.ok())
    return HarnessErrorRow(ctx, std::move(identity), "Client::Create", client.status());
  Client* c = client->get();
  const std::string key = ctx.RowKey();
  const absl::Duration ttl = ctx.settings.ttl;
  return MeasureRow(
      ctx, std::move(identity), [c, key, ttl, callers]() -> absl::StatusOr<std::vector<CycleFn>> {
        std::vector<CycleFn> out;
        for (int i = 0; i < callers; ++i) {
          out.push_back(LockCycle(NewClientLocker(c, absl::StrCat(key, ":t", i)), ttl));
        }
        return out;
      });
}

// One caller: a new Client on `options`' nodes (acquire = Client::Create,
// which returns once every node's connection is ready), its first lock and
// release (cycle), then the client is destroyed (not timed).
RowResult ConnectRow(Context& ctx, const Options& options, const std::string& variant) {
  RowResult identity =
      LibraryRowIdentity(absl::StrCat("connect", variant.empty() ? "" : " ", variant),
                         absl::StrCat("connect", variant.empty() ? "" : " ", variant), 1);
  const std::string resource = ctx.RowKey() + ":t0";
  const absl::Duration ttl = ctx.settings.ttl;
  return MeasureRow(ctx, std::move(identity),
                    [options, resource, ttl]() -> absl::StatusOr<std::vector<CycleFn>> {
                      std::vector<CycleFn> out;
                      out.push_back([options, resource, ttl]() -> CycleSample {
                        CycleSample s;
                        const int64_t start = NowNs();
                        absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
                        if (!client.ok()) {
                          s.acquire_status = client.status();
                          return s;
                        }
                        s.acquire_ns = NowNs() - start;
                        absl::StatusOr<Lease> lease = (*client)->TryAcquire(resource, ttl);
                        if (!lease.ok()) {
                          s.acquire_status = lease.status();
                          return s;
                        }
                        s.release_status = (*client)->Release(*lease);
                        s.cycle_ns = NowNs() - start;
                        return s;
                      });
                      return out;
                    });
}

// One caller: a connection to `node` as the engine makes one (with
// `make_stream`: TLS), ready once a PING is answered (acquire = cycle).
// `fresh_sessions`: a new session cache per cycle (no resumption).
RowResult ReconnectRow(Context& ctx, const Endpoint& node, const std::string& variant,
                       std::shared_ptr<internal::TlsContext> tls, bool fresh_sessions) {
  RowResult identity =
      LibraryRowIdentity(absl::StrCat("reconnect", variant.empty() ? "" : " ", variant),
                         absl::StrCat("reconnect", variant.empty() ? "" : " ", variant), 1);
  const absl::Duration timeout = ctx.settings.node_timeout * 40;
  return MeasureRow(ctx, std::move(identity), [=]() -> absl::StatusOr<std::vector<CycleFn>> {
    internal::StreamFactory shared =
        tls != nullptr ? internal::TlsStreamFactory(tls, node.host) : nullptr;
    std::vector<CycleFn> out;
    out.push_back([=]() -> CycleSample {
      CycleSample s;
      internal::Connection::Settings settings;
      settings.endpoint = node;
      settings.connect_timeout = timeout;
      settings.make_stream =
          tls != nullptr && fresh_sessions ? internal::TlsStreamFactory(tls, node.host) : shared;
      internal::Connection conn(std::move(settings));
      internal::HandshakeStep ping;
      ping.payload = internal::EncodeCommand({"PING"});
      ping.check = [](const internal::Reply& r) -> std::string {
        return r.IsStatus("PONG") ? "" : "PING returned " + r.Describe();
      };
      const int64_t start = NowNs();
      std::string why;
      if (!conn.Start({ping}, &why)) {
        s.acquire_status = absl::UnavailableError(why);
        return s;
      }
      std::vector<internal::Reply> replies;
      bool want_write = true;  // connecting
      const int64_t deadline = start + absl::ToInt64Nanoseconds(timeout);
      while (!conn.ready() && NowNs() < deadline) {
        pollfd p{conn.fd(), static_cast<short>(POLLIN | (want_write ? POLLOUT : 0)), 0};
        if (poll(&p, 1, 100) <= 0) continue;
        internal::Connection::Progress progress =
            conn.HandleIo(static_cast<uint32_t>(p.revents), &replies);
        if (!progress.failure.empty()) {
          s.acquire_status = absl::UnavailableError(progress.failure);
          return s;
        }
        want_write =
            conn.state() == internal::Connection::State::kConnecting || progress.want_write;
      }
      if (!conn.ready()) {
        s.acquire_status = absl::DeadlineExceededError("not connected in time");
        return s;
      }
      s.acquire_ns = s.cycle_ns = NowNs() - start;
      return s;
    });
    return out;
  });
}

std::string P50Ratio(const RowResult* tls, const RowResult* plain, bool connect) {
  if (tls == nullptr || plain == nullptr) return "n/a";
  const Distribution& t = connect ? tls->acquire : tls->cycle;
  const Distribution& p = connect ? plain->acquire : plain->cycle;
  if (t.empty() || p.empty() || p.Quantile(0.5) <= 0) return "n/a";
  return absl::StrFormat(
      "%.2fx (%s vs %s)",
      static_cast<double>(t.Quantile(0.5)) / static_cast<double>(p.Quantile(0.5)),
      FormatLatency(t.Quantile(0.5)), FormatLatency(p.Quantile(0.5)));
}

}  // namespace

void RunTls(Context& ctx, int n, GroupResult* g) {
  const std::vector<Endpoint> plain_nodes = ctx.nodes.First(n);
  g->title = absl::StrCat(n, " TLS nodes (rediss://, TLS 1.3, a fleet started for this group) vs ",
                          n, " plain nodes");
  g->settings.emplace_back("ttl", absl::FormatDuration(ctx.settings.ttl));
  g->settings.emplace_back("node_timeout", absl::FormatDuration(ctx.settings.node_timeout));
  g->settings.emplace_back("quorum", absl::StrCat(n / 2 + 1));
  // Every row needs the floor first (RunGroup merges it with a second one).
  g->rows.push_back(FloorRow(ctx, plain_nodes));

  absl::StatusOr<std::unique_ptr<testkit::Fleet>> fleet =
      testkit::Fleet::Start({.nodes = n, .tls = true});
  if (!fleet.ok()) {
    ctx.harness_errors.push_back(
        absl::StrCat("tls N=", n, ": starting the TLS fleet: ", fleet.status().ToString()));
    g->skipped = true;
    g->skip_reason = absl::StrCat("the TLS fleet did not start: ", fleet.status().ToString());
    return;
  }
  Options plain;
  plain.nodes = plain_nodes;
  plain.node_timeout = ctx.settings.node_timeout;
  Options tls = plain;
  tls.nodes = (*fleet)->endpoints();
  tls.tls.ca_file = (*fleet)->certificates()->ca_cert;

  const int many = ctx.settings.callers_many;
  for (int callers : {1, many}) {
    g->rows.push_back(LockRow(ctx, plain, "", callers));
    g->rows.push_back(LockRow(ctx, tls, "tls", callers));
  }
  g->rows.push_back(ConnectRow(ctx, plain, ""));
  g->rows.push_back(ConnectRow(ctx, tls, "tls"));
  absl::StatusOr<std::shared_ptr<internal::TlsContext>> context =
      internal::TlsContext::Create(tls.tls);
  if (!context.ok()) {
    ctx.harness_errors.push_back(
        absl::StrCat("tls N=", n, ": the TLS context: ", context.status().ToString()));
  } else {
    g->rows.push_back(ReconnectRow(ctx, plain.nodes[0], "", nullptr, false));
    g->rows.push_back(ReconnectRow(ctx, tls.nodes[0], "tls", *context, false));
    g->rows.push_back(ReconnectRow(ctx, tls.nodes[0], "tls full", *context, true));
  }

  const RowResult* plain_many = g->Find(kLibrary, "", many);
  const RowResult* tls_many = g->Find(kLibrary, "tls", many);
  g->notes.push_back(
      absl::StrCat("TLS / plain, acquire+release p50, 1 caller: ",
                   P50Ratio(g->Find(kLibrary, "tls", 1), g->Find(kLibrary, "", 1), false)));
  if (plain_many != nullptr && tls_many != nullptr && plain_many->throughput() > 0) {
    g->notes.push_back(
        absl::StrFormat("TLS / plain, throughput with %d callers: %.2fx (%.0f vs %.0f cycles/s)",
                        many, tls_many->throughput() / plain_many->throughput(),
                        tls_many->throughput(), plain_many->throughput()));
  }
  g->notes.push_back(absl::StrCat(
      "TLS / plain, connecting (Client::Create: N connections, full TLS handshakes, "
      "AUTH/INFO/SCRIPT LOAD) p50: ",
      P50Ratio(g->Find(kLibrary, "connect tls", 1), g->Find(kLibrary, "connect", 1), true)));
  g->notes.push_back(absl::StrCat(
      "TLS / plain, one node's reconnection (TCP, TLS handshake resuming the session, PING) p50: ",
      P50Ratio(g->Find(kLibrary, "reconnect tls", 1), g->Find(kLibrary, "reconnect", 1), true),
      "; with a full handshake: ",
      P50Ratio(g->Find(kLibrary, "reconnect tls full", 1), g->Find(kLibrary, "reconnect", 1),
               true)));
  g->notes.push_back(
      "the floor and the plain rows use the run's nodes, the tls rows a TLS fleet of the same "
      "redis-server with the same settings");
}

}  // namespace redlock::bench
