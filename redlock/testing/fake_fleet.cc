// FakeFleet (redlock/testing.h): the library's ClientImpl over a
// FleetTransport per client, and the faults, forwarded to the world.

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/client_impl.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/status_macros.h"
#include "redlock/testing.h"
#include "redlock/testing/internal/fleet_transport.h"
#include "redlock/testing/internal/fleet_world.h"

namespace redlock::testing {
namespace {

// Checks `options` as Client::Create would, after naming the nodes: `names`
// (empty: the fleet's own names are given to a new fleet).
absl::Status PrepareOptions(int nodes, const std::vector<std::string>& names, Options* options) {
  if (options->nodes.empty()) {
    for (int i = 0; i < nodes; ++i) {
      Endpoint ep;
      ep.host = absl::StrCat("fake-node-", i);
      ep.port = 6379;
      options->nodes.push_back(std::move(ep));
    }
  } else if (static_cast<int>(options->nodes.size()) != nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the fake fleet has ", nodes, " nodes but options.nodes names ",
                     options->nodes.size(), " (leave it empty, or name each node once)"));
  }
  if (options->durability.replicas > 0) {
    return absl::InvalidArgumentError(
        "the fake fleet's nodes have no replicas: options.durability.replicas must be 0");
  }
  REDLOCK_RETURN_IF_ERROR(ValidateOptions(*options));
  if (!names.empty()) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (options->nodes[i].ToString() != names[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "options.nodes[", i, "] is ", options->nodes[i].ToString(), " but the fleet's node ", i,
            " is ", names[i], " (leave options.nodes empty for the fleet's names)"));
      }
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<Client> MakeClient(std::shared_ptr<FleetWorld> world, Options options) {
  auto transport = std::make_unique<FleetTransport>(std::move(world), options.node_timeout);
  internal::Blocking* blocking = transport.get();
  return std::make_unique<internal::ClientImpl>(std::move(options), std::move(transport),
                                                internal::SteadyClock::Get(), nullptr, blocking);
}

std::vector<std::string> Names(const FleetWorld& world) {
  std::vector<std::string> names;
  for (int i = 0; i < world.size(); ++i) names.push_back(world.name(i));
  return names;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeFleet>> FakeFleet::Create(int nodes, Options options) {
  if (nodes < 1 || nodes > kMaxNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a fake fleet has 1 to ", kMaxNodes, " nodes, not ", nodes));
  }
  REDLOCK_RETURN_IF_ERROR(PrepareOptions(nodes, {}, &options));
  std::vector<std::string> names;
  for (const Endpoint& ep : options.nodes) names.push_back(ep.ToString());
  auto world = std::make_shared<FleetWorld>(std::move(names));
  std::unique_ptr<Client> client = MakeClient(world, options);
  return std::unique_ptr<FakeFleet>(
      new FakeFleet(std::move(world), std::move(options), std::move(client)));
}

FakeFleet::FakeFleet(std::shared_ptr<FleetWorld> world, Options options,
                     std::unique_ptr<Client> client)
    : world_(std::move(world)), options_(std::move(options)), client_(std::move(client)) {}

FakeFleet::~FakeFleet() = default;

int FakeFleet::size() const { return world_->size(); }

std::string FakeFleet::NodeName(int node) const {
  if (node < 0 || node >= size()) return "";
  return world_->name(node);
}

Client& FakeFleet::client() { return *client_; }

absl::StatusOr<std::unique_ptr<Client>> FakeFleet::NewClient(Options options) {
  REDLOCK_RETURN_IF_ERROR(PrepareOptions(size(), Names(*world_), &options));
  return MakeClient(world_, std::move(options));
}

absl::StatusOr<std::unique_ptr<Client>> FakeFleet::NewClient() { return NewClient(options_); }

absl::Status FakeFleet::CheckNode(int node) const {
  if (node >= 0 && node < size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("no node ", node, " in the fake fleet (it has ",
                                                 size(), ": 0 to ", size() - 1, ")"));
}

absl::Status FakeFleet::Stop(int node) {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  world_->Stop(node);
  return absl::OkStatus();
}

absl::Status FakeFleet::Start(int node) {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  world_->Start(node);
  return absl::OkStatus();
}

absl::Status FakeFleet::Slow(int node, absl::Duration latency) {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  if (latency < absl::ZeroDuration() || latency == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Slow(", node, ", ", absl::FormatDuration(latency),
        "): the latency must be zero or more and finite (Partition loses every request)"));
  }
  world_->Slow(node, latency);
  return absl::OkStatus();
}

absl::Status FakeFleet::Partition(int node) {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  world_->Partition(node);
  return absl::OkStatus();
}

absl::Status FakeFleet::Heal(int node) {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  world_->Heal(node);
  return absl::OkStatus();
}

absl::Status FakeFleet::RestartWithoutData(int node) {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  world_->RestartWithoutData(node);
  return absl::OkStatus();
}

absl::Status FakeFleet::JumpClock(int node, absl::Duration by) {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  if (by == absl::InfiniteDuration() || by == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JumpClock(", node, ", ", absl::FormatDuration(by), "): the jump must be finite"));
  }
  world_->JumpClock(node, by);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FakeFleet::Keys(int node) const {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  return world_->Keys(node);
}

absl::StatusOr<std::string> FakeFleet::Get(int node, absl::string_view key) const {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  std::optional<std::string> value = world_->Get(node, std::string(key));
  if (!value.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("no key \"", key, "\" on ", world_->name(node), " (missing or expired)"));
  }
  return *std::move(value);
}

absl::StatusOr<int64_t> FakeFleet::CommandsExecuted(int node) const {
  REDLOCK_RETURN_IF_ERROR(CheckNode(node));
  return world_->CommandsExecuted(node);
}

}  // namespace redlock::testing
