// Client::Create: the real client, over the engine.

#include "redlock/client.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/client_impl.h"
#include "redlock/internal/cluster_slots.h"
#include "redlock/internal/durability.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/node_calls.h"
#include "redlock/internal/node_identity.h"
#include "redlock/internal/scheme.h"
#include "redlock/internal/scriptless.h"
#include "redlock/internal/server_commands.h"
#include "redlock/internal/status_macros.h"
#include "redlock/internal/tls_stream.h"
#include "redlock/observer.h"

namespace redlock {

absl::StatusOr<std::unique_ptr<Client>> Client::Create(Options options) {
  REDLOCK_RETURN_IF_ERROR(ValidateOptions(options));
  REDLOCK_RETURN_IF_ERROR(internal::CheckDistinctAddresses(options.nodes));
  internal::Engine::Config config;
  config.nodes = options.nodes;
  config.node_timeout = options.node_timeout;
  config.connect_timeout = options.connect_timeout;
  config.reconnect_backoff_min = options.reconnect_backoff_min;
  config.reconnect_backoff_max = options.reconnect_backoff_max;
  config.breaker_probe_interval = options.breaker_probe_interval;
  config.max_in_flight_per_node = options.max_in_flight_per_node;
  config.require_identity = options.require_node_identity;
  config.reply_limits.max_bytes = options.max_reply_bytes;
  config.reply_limits.max_elements = options.max_reply_elements;
  // Every connection loads the scripts before its first request, and so
  // learns whether its node forbids scripting (scriptless.h).
  auto modes = std::make_shared<internal::ScriptingModes>(static_cast<int>(options.nodes.size()));
  // And which script-free compare-and-set commands it has
  // (server_commands.h), from what the server says of them.
  auto commands =
      std::make_shared<internal::ServerCommands>(static_cast<int>(options.nodes.size()));
  // A cluster node must run them: the script-free transactions cannot
  // follow a key that moves between masters.
  config.setup = [modes, commands, ask = options.server_commands,
                  clusters = internal::KeyRoutedNodes(
                      options, static_cast<int>(options.nodes.size()))](int node) {
    std::vector<internal::HandshakeStep> steps =
        internal::ScriptLoadSteps(modes, node, clusters[static_cast<size_t>(node)]);
    if (!ask) return steps;  // never learned: the scripts for every node
    std::vector<internal::HandshakeStep> more = internal::ServerCommandSteps(commands, node);
    steps.insert(steps.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
    return steps;
  };
  if (options.observer != nullptr) {
    std::shared_ptr<Observer> observer = options.observer;
    config.on_node_event = [observer](const NodeEvent& e) { observer->OnNode(e); };
  }
  if (std::any_of(options.nodes.begin(), options.nodes.end(),
                  [](const Endpoint& ep) { return ep.tls; })) {
    // One context (trust roots, client certificate) for every TLS
    // connection; each node's locator decides the name its connections check.
    REDLOCK_ASSIGN_OR_RETURN(config.tls, internal::TlsContext::Create(options.tls));
    config.tls_server_name = options.tls.server_name;
  }
  REDLOCK_ASSIGN_OR_RETURN(std::unique_ptr<internal::Engine> engine,
                           internal::Engine::Start(std::move(config)));
  if (options.wait_for_connections) {
    engine->WaitForFirstConnections(options.connect_timeout + absl::Milliseconds(100));
    std::vector<std::pair<int, int>> same = engine->DuplicateNodes();
    if (!same.empty()) {
      return internal::SameServerError(options.nodes, same[0].first, same[0].second, "same run_id");
    }
    std::vector<std::string> unverified = engine->UnverifiedNodes();
    for (size_t i = 0; i < unverified.size(); ++i) {
      if (unverified[i].empty()) continue;
      return absl::FailedPreconditionError(
          absl::StrCat("nodes[", i, "] ", options.nodes[i].ToString(), ": ", unverified[i]));
    }
  }
  REDLOCK_RETURN_IF_ERROR(internal::CheckDurabilitySupport(*engine, *engine, options.durability));
  internal::Blocking* blocking = engine.get();
  return std::unique_ptr<Client>(
      new internal::ClientImpl(std::move(options), std::move(engine), internal::SteadyClock::Get(),
                               std::move(modes), blocking, std::move(commands)));
}

// ---- Sets and the lock family: a Client that does not take them ----------------

namespace {

// What a Client that does not implement a group of calls answers.
absl::Status NotImplemented(absl::string_view what, absl::string_view forwarded) {
  return absl::UnimplementedError(absl::StrCat(
      "this Client does not ", what, " (a Client that wraps another forwards ", forwarded, ")"));
}

absl::Status NoSets() {
  return NotImplemented("lock sets of resources",
                        "AcquireSet, ExtendSet, ReleaseSet and AutoRenewSet");
}

absl::Status NoFamily() {
  return NotImplemented("take the lock family's locks",
                        "AcquireFamily, AcquireFamilyAsync and InspectFamily");
}

}  // namespace

absl::StatusOr<std::vector<Lease>> Client::AcquireSet(SetRequest request) {
  (void)request;
  return NoSets();
}

void Client::AcquireSetAsync(SetRequest request, LeasesCallback done) {
  (void)request;
  done(NoSets());
}

absl::StatusOr<std::vector<Lease>> Client::ExtendSet(std::vector<Lease> leases, absl::Duration ttl,
                                                     int quorum) {
  (void)leases, (void)ttl, (void)quorum;
  return NoSets();
}

absl::Status Client::ReleaseSet(std::vector<Lease> leases, int quorum) {
  (void)leases, (void)quorum;
  return NoSets();
}

absl::StatusOr<Lease> LeaseCalls::LeaseOf(Client::FamilyRequest request) {
  absl::StatusOr<Client::FamilyGrant> g = client_->AcquireFamily(std::move(request));
  if (!g.ok()) return g.status();
  return std::move(g->lease);
}

void LeaseCalls::LeaseOfAsync(Client::FamilyRequest request, Client::LeaseCallback done) {
  client_->AcquireFamilyAsync(
      std::move(request), [done = std::move(done)](absl::StatusOr<Client::FamilyGrant> g) mutable {
        if (!g.ok()) {
          done(g.status());
        } else {
          done(std::move(g->lease));
        }
      });
}

void Client::AcquireFamilyAsync(FamilyRequest request, FamilyCallback done) {
  (void)request;
  done(NoFamily());
}

absl::StatusOr<Client::FamilyGrant> Client::AcquireFamily(FamilyRequest request) {
  (void)request;
  return NoFamily();
}

absl::StatusOr<std::vector<FamilyNodeView>> Client::InspectFamily(FamilyRequest request) {
  (void)request;
  return NoFamily();
}

absl::StatusOr<std::unique_ptr<Renewal>> Client::AutoRenewSet(
    std::vector<Lease> leases, int quorum, RenewOptions options,
    absl::AnyInvocable<void(absl::Status)> on_lost) {
  (void)leases, (void)quorum, (void)options, (void)on_lost;
  return NoSets();
}

}  // namespace redlock
