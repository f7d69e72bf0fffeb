// acquire, release, extend and status.

#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "redlock/client.h"
#include "redlock/fair_mutex.h"
#include "redlock/lease.h"
#include "redlock/metrics.h"
#include "redlock/options.h"
#include "tools/cli_flags.h"
#include "tools/commands.h"
#include "tools/interruptible.h"

namespace redlock::cli {

absl::StatusOr<std::string> ResourceFlag(const ParsedArgs& args, bool allow_positional) {
  std::string resource;
  if (args.Has("resource")) {
    if (allow_positional && !args.positional.empty()) {
      return absl::InvalidArgumentError(
          "give the resource either as --resource or as an argument, not both");
    }
    resource = args.Get("resource");
  } else if (allow_positional && args.positional.size() == 1) {
    resource = args.positional[0];
  } else {
    return absl::InvalidArgumentError("missing --resource");
  }
  if (resource.empty()) return absl::InvalidArgumentError("--resource: empty resource name");
  if (resource.size() > kMaxResourceLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resource: longer than ", kMaxResourceLength, " bytes"));
  }
  return resource;
}

absl::StatusOr<absl::Duration> DurationFlag(const ParsedArgs& args, const std::string& name,
                                            bool required, absl::Duration fallback,
                                            bool allow_zero) {
  if (!args.Has(name)) {
    if (required) return absl::InvalidArgumentError(absl::StrCat("missing --", name));
    return fallback;
  }
  return ParseDurationFlag(name, args.Get(name), allow_zero);
}

absl::StatusOr<std::unique_ptr<Client>> MakeClient(const ParsedArgs& args,
                                                   std::shared_ptr<Observer> observer) {
  absl::StatusOr<Options> options = OptionsFromFlags(
      args, std::getenv("REDLOCK_NODES"), [](const char* name) { return std::getenv(name); });
  if (!options.ok()) return options.status();
  options->observer = std::move(observer);
  return Client::Create(*std::move(options));
}

std::string LeaseJson(const Lease& lease, bool with_fencing_token) {
  std::string out = absl::StrCat(
      "{\"resource\":", JsonString(lease.resource()), ",\"token\":", JsonString(lease.token()),
      ",\"validity_ms\":", Millis(lease.TimeLeft()), ",\"ttl_ms\":", Millis(lease.ttl()),
      ",\"nodes_granted\":", lease.nodes_granted());
  if (with_fencing_token) absl::StrAppend(&out, ",\"fencing_token\":", lease.fencing_token());
  out += "}";
  return out;
}

namespace {

// The script-free compare-and-set commands a node's server has
// (NodeHealth::has_*), as `status` prints them.
std::vector<const char*> ServerCommandNames(const NodeHealth& h) {
  std::vector<const char*> out;
  if (h.has_delifeq) out.push_back("DELIFEQ");
  if (h.has_delex_ifeq) out.push_back("DELEX IFEQ");
  if (h.has_set_ifeq) out.push_back("SET IFEQ");
  return out;
}

// Positional arguments are an error for every command but `status`.
absl::Status NoPositional(const ParsedArgs& args) {
  if (args.positional.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args.positional[0], "'"));
}

// Reports `status` on stderr and returns its exit code.
int Fail(absl::string_view command, const absl::Status& status) {
  PrintError(command, status.message());
  return ExitCodeFor(status);
}

void PrintLine(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// release, extend: the lease acquire printed, named by --resource and
// --token (no positional argument).
absl::Status HeldArgs(const ParsedArgs& args, std::string* resource, std::string* token) {
  if (absl::Status st = NoPositional(args); !st.ok()) return st;
  absl::StatusOr<std::string> r = ResourceFlag(args, false);
  if (!r.ok()) return r.status();
  *resource = *std::move(r);
  *token = args.Get("token");
  if (token->empty()) return absl::InvalidArgumentError("missing --token");
  return absl::OkStatus();
}

}  // namespace

int RunAcquire(const ParsedArgs& args) {
  constexpr absl::string_view kName = "acquire";
  if (absl::Status st = NoPositional(args); !st.ok()) return Fail(kName, st);
  absl::StatusOr<std::string> resource = ResourceFlag(args, false);
  if (!resource.ok()) return Fail(kName, resource.status());
  absl::StatusOr<absl::Duration> ttl = DurationFlag(args, "ttl", true, absl::ZeroDuration(), false);
  if (!ttl.ok()) return Fail(kName, ttl.status());
  absl::StatusOr<absl::Duration> wait =
      DurationFlag(args, "wait", false, absl::ZeroDuration(), true);
  if (!wait.ok()) return Fail(kName, wait.status());
  // Before the client: its I/O thread must not take SIGINT/SIGTERM.
  InterruptSignals signals;
  absl::StatusOr<std::unique_ptr<Client>> client = MakeClient(args);
  if (!client.ok()) return Fail(kName, client.status());

  // A zero wait makes exactly one attempt (with --fair: only when the lock
  // is free and nobody waits).
  int signo = 0;
  absl::StatusOr<Lease> lease =
      AcquireInterruptibly(**client, *resource, *ttl, *wait, signals, &signo, args.Switch("fair"));
  if (signo != 0) {
    PrintError(kName, absl::StrCat("interrupted by ", strsignal(signo),
                                   "; gave up waiting, nothing is held"));
    return 128 + signo;
  }
  if (!lease.ok()) return Fail(kName, lease.status());
  PrintLine(LeaseJson(*lease, true));
  return kExitOk;
}

int RunRelease(const ParsedArgs& args) {
  constexpr absl::string_view kName = "release";
  std::string resource, token;
  if (absl::Status st = HeldArgs(args, &resource, &token); !st.ok()) return Fail(kName, st);
  absl::StatusOr<std::unique_ptr<Client>> client = MakeClient(args);
  if (!client.ok()) return Fail(kName, client.status());

  // A fair lease's release also takes the holder's place out of the queue
  // and wakes the next waiter.
  const Lease lease = args.Switch("fair") ? FairLock(client->get(), resource).ForToken(token)
                                          : Lease::ForToken(resource, token);
  absl::Status st = (*client)->Release(lease);
  if (!st.ok()) return Fail(kName, st);
  return kExitOk;
}

int RunExtend(const ParsedArgs& args) {
  constexpr absl::string_view kName = "extend";
  std::string resource, token;
  if (absl::Status st = HeldArgs(args, &resource, &token); !st.ok()) return Fail(kName, st);
  absl::StatusOr<absl::Duration> ttl = DurationFlag(args, "ttl", true, absl::ZeroDuration(), false);
  if (!ttl.ok()) return Fail(kName, ttl.status());
  absl::StatusOr<std::unique_ptr<Client>> client = MakeClient(args);
  if (!client.ok()) return Fail(kName, client.status());

  absl::StatusOr<Lease> extended = (*client)->Extend(Lease::ForToken(resource, token), *ttl);
  if (!extended.ok()) return Fail(kName, extended.status());
  // The fencing token is not known from the command line: not printed.
  PrintLine(LeaseJson(*extended, false));
  return kExitOk;
}

int RunStatus(const ParsedArgs& args) {
  constexpr absl::string_view kName = "status";
  if (args.positional.size() > 1) {
    return Fail(kName, absl::InvalidArgumentError(
                           absl::StrCat("unexpected argument '", args.positional[1], "'")));
  }
  absl::StatusOr<std::string> resource = ResourceFlag(args, true);
  if (!resource.ok()) return Fail(kName, resource.status());
  std::shared_ptr<MetricsCollector> metrics;
  if (args.Switch("metrics")) metrics = std::make_shared<MetricsCollector>();
  absl::StatusOr<std::unique_ptr<Client>> client = MakeClient(args, metrics);
  if (!client.ok()) return Fail(kName, client.status());
  const int n = static_cast<int>((*client)->options().nodes.size());
  const int quorum = EffectiveQuorum((*client)->options());

  absl::StatusOr<std::vector<NodeView>> views = (*client)->Inspect(*resource);
  if (!views.ok()) return Fail(kName, views.status());
  // Per node: TLS or not, and the protocol its connection negotiated.
  const std::vector<NodeHealth> health = (*client)->Health();
  auto tls_of = [&](size_t i) -> const NodeHealth* {
    return i < health.size() ? &health[i] : nullptr;
  };

  int answered = 0;
  uint64_t fence = 0;
  std::map<std::string, int> holders;  // token -> nodes
  for (const NodeView& v : *views) {
    if (!v.status.ok()) continue;
    ++answered;
    fence = std::max(fence, v.fence_counter);
    if (v.held) ++holders[v.token];
  }
  std::string top_token;
  int top = 0;
  for (const auto& [token, count] : holders) {
    if (count > top) {
      top = count;
      top_token = token;
    }
  }
  const bool held = top >= quorum;

  if (args.Switch("json")) {
    std::vector<std::string> nodes;
    for (size_t i = 0; i < views->size(); ++i) {
      const NodeView& v = (*views)[i];
      const NodeHealth* h = tls_of(i);
      std::string node = absl::StrCat("{\"node\":", JsonString(v.node));
      // Where the node is reached (for a Sentinel-managed node, the master
      // the Sentinels named last).
      absl::StrAppend(&node, ",\"address\":",
                      h != nullptr && !h->address.empty() ? JsonString(h->address) : "null");
      // How it is found: redis, rediss, redis+sentinel, rediss+sentinel.
      absl::StrAppend(&node, ",\"scheme\":",
                      h != nullptr && !h->scheme.empty() ? JsonString(h->scheme) : "null");
      absl::StrAppend(
          &node, ",\"tls\":", h != nullptr && h->tls ? "true" : "false", ",\"tls_version\":",
          h != nullptr && !h->tls_version.empty() ? JsonString(h->tls_version) : "null");
      // How compare-and-set runs there: Lua scripts, or WATCH/MULTI/EXEC on
      // a node that forbids scripting (with what the node said).
      const bool tx = h != nullptr && h->scriptless;
      absl::StrAppend(&node, ",\"path\":", tx ? "\"transactions\"" : "\"scripts\"");
      if (tx) absl::StrAppend(&node, ",\"scripting_refused\":", JsonString(h->scriptless_reason));
      // How a lock's release and extension go there (NodeHealth::path).
      if (h != nullptr && !h->path.empty()) {
        absl::StrAppend(&node, ",\"release_extend\":", JsonString(h->path));
      }
      // The script-free compare-and-set commands the server has (null until
      // a handshake read them).
      absl::StrAppend(&node, ",\"commands\":",
                      h == nullptr || !h->commands_known
                          ? std::string("null")
                          : absl::StrCat("[",
                                         absl::StrJoin(ServerCommandNames(*h), ",",
                                                       [](std::string* out, const char* c) {
                                                         out->append(JsonString(c));
                                                       }),
                                         "]"));
      if (h != nullptr && !h->sentinels.empty()) {
        // A Sentinel-managed node: what each of its Sentinels says.
        std::vector<std::string> sentinels;
        for (const SentinelHealth& sh : h->sentinels) {
          sentinels.push_back(absl::StrCat(
              "{\"address\":", JsonString(sh.address),
              ",\"connected\":", sh.connected ? "true" : "false",
              ",\"master\":", sh.master.empty() ? "null" : JsonString(sh.master),
              ",\"config_epoch\":", sh.config_epoch,
              ",\"error\":", sh.last_error.empty() ? "null" : JsonString(sh.last_error), "}"));
        }
        absl::StrAppend(&node, ",\"sentinels\":[", absl::StrJoin(sentinels, ","), "]");
      }
      if (h != nullptr && !h->shards.empty()) {
        // A Redis Cluster: its masters, the slots each serves, their
        // connections.
        std::vector<std::string> shards;
        for (const ShardHealth& sh : h->shards) {
          shards.push_back(absl::StrCat(
              "{\"address\":", JsonString(sh.address), ",\"slots\":", sh.slots,
              ",\"connected\":", sh.connected ? "true" : "false",
              ",\"error\":", sh.last_error.empty() ? "null" : JsonString(sh.last_error), "}"));
        }
        absl::StrAppend(&node, ",\"masters\":[", absl::StrJoin(shards, ","),
                        "],\"slots_uncovered\":", h->slots_uncovered);
      }
      if (!v.status.ok()) {
        absl::StrAppend(&node, ",\"error\":", JsonString(v.status.message()));
      } else {
        absl::StrAppend(&node, ",\"held\":", v.held ? "true" : "false");
        if (v.held) {
          absl::StrAppend(&node, ",\"token\":", JsonString(v.token),
                          ",\"ttl_ms\":", Millis(v.ttl_left));
        }
        absl::StrAppend(&node, ",\"fence_counter\":", v.fence_counter);
      }
      node += "}";
      nodes.push_back(std::move(node));
    }
    PrintLine(absl::StrCat(
        "{\"resource\":", JsonString(*resource), ",\"nodes_total\":", n, ",\"quorum\":", quorum,
        ",\"nodes_answered\":", answered, ",\"held\":", held ? "true" : "false",
        ",\"holder\":", held ? JsonString(top_token) : "null", ",\"holder_nodes\":", top,
        ",\"fence_counter\":", fence, ",\"nodes\":[", absl::StrJoin(nodes, ","), "]}"));
  } else {
    std::string summary;
    if (held) {
      summary = absl::StrCat("held by token ", top_token, " on ", top, " of ", n, " nodes");
    } else if (top > 0) {
      summary =
          absl::StrCat("not held by a quorum: the most nodes one token has is ", top, " of ", n);
    } else {
      summary = absl::StrCat("not held on any of the ", answered, " nodes that answered");
    }
    PrintLine(absl::StrCat("resource ", JsonString(*resource), ": ", summary, " (quorum ", quorum,
                           "); fencing counter ", fence));
    PrintLine(absl::StrFormat("%-22s %-5s %-42s %10s %8s  %-8s %-4s %s", "NODE", "HELD", "TOKEN",
                              "TTL_LEFT", "FENCE", "TLS", "PATH", "SCHEME"));
    for (size_t i = 0; i < views->size(); ++i) {
      const NodeView& v = (*views)[i];
      const NodeHealth* h = tls_of(i);
      // "-" plain TCP; the protocol, or "yes" while not connected.
      const std::string tls = h == nullptr || !h->tls   ? "-"
                              : !h->tls_version.empty() ? h->tls_version
                                                        : "yes";
      const std::string scheme = h == nullptr || h->scheme.empty() ? "-" : h->scheme;
      // A Sentinel-managed node: where its master is now, under its row (a
      // cluster: its masters, below).
      const std::string master_at =
          h == nullptr || h->address == v.node || !h->shards.empty()
              ? ""
              : absl::StrCat("  master at ", h->address.empty() ? "unknown" : h->address);
      if (!v.status.ok()) {
        PrintLine(absl::StrFormat("%-22s error: %s", v.node, v.status.message()));
      } else {
        // "lua", or "tx" where the node forbids scripting (WATCH/MULTI/EXEC).
        const char* path = h != nullptr && h->scriptless ? "tx" : "lua";
        PrintLine(absl::StrFormat(
            "%-22s %-5s %-42s %10s %8d  %-8s %-4s %s", v.node, v.held ? "yes" : "no",
            v.held ? v.token : "-",
            v.held ? absl::FormatDuration(absl::Milliseconds(Millis(v.ttl_left))) : "-",
            v.fence_counter, tls, path, scheme));
      }
      if (!master_at.empty()) PrintLine(master_at);
      // A server with script-free compare-and-set commands says which,
      // and how the client uses them.
      if (h != nullptr && h->commands_known && !ServerCommandNames(*h).empty()) {
        PrintLine(absl::StrCat("  commands: ", absl::StrJoin(ServerCommandNames(*h), ", "), " (",
                               h->path, ")"));
      }
      for (const SentinelHealth& sh : h == nullptr ? std::vector<SentinelHealth>{} : h->sentinels) {
        std::string said =
            sh.master.empty() ? "names no master yet" : absl::StrCat("names ", sh.master);
        if (!sh.master.empty() && sh.config_epoch >= 0) {
          absl::StrAppend(&said, " (config epoch ", sh.config_epoch, ")");
        }
        if (!sh.connected && !sh.last_error.empty()) absl::StrAppend(&said, "; ", sh.last_error);
        PrintLine(absl::StrCat("  sentinel ", sh.address, ": ", said));
      }
      for (const ShardHealth& sh : h == nullptr ? std::vector<ShardHealth>{} : h->shards) {
        PrintLine(absl::StrCat("  master ", sh.address, ": ", sh.slots, " slots, ",
                               sh.connected            ? std::string("connected")
                               : sh.last_error.empty() ? std::string("connecting")
                                                       : absl::StrCat("down: ", sh.last_error)));
      }
      if (h != nullptr && !h->shards.empty() && h->slots_uncovered > 0) {
        PrintLine(absl::StrCat("  ", h->slots_uncovered, " slots served by no master"));
      }
    }
  }
  if (metrics != nullptr) {
    // A probe of the whole path (acquire, release) on a resource of its own.
    char host[256] = "host";
    gethostname(host, sizeof(host) - 1);
    std::string probe = absl::StrCat("redlock-probe/", host, "/", getpid());
    absl::StatusOr<Lease> l = (*client)->TryAcquire(probe, absl::Seconds(10));
    if (l.ok()) (void)(*client)->Release(*l);
    std::fputs(metrics->PrometheusText().c_str(), stdout);
    std::fflush(stdout);
  }
  if (answered < quorum) {
    return Fail(kName, absl::UnavailableError(
                           absl::StrCat("status \"", *resource, "\": only ", answered, " of ", n,
                                        " nodes answered (quorum ", quorum, ")")));
  }
  return kExitOk;
}

}  // namespace redlock::cli
