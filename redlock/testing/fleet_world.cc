#include "redlock/testing/internal/fleet_world.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/sha1.h"
#include "redlock/testing/internal/fleet_transport.h"

namespace redlock::testing {

FleetWorld::FleetWorld(std::vector<std::string> names)
    : base_unix_ms_(absl::ToUnixMillis(absl::Now())), base_(std::chrono::steady_clock::now()) {
  nodes_.resize(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    NodeState& n = nodes_[i];
    n.name = std::move(names[i]);
    sim::Node::Config config;
    config.name = n.name;
    config.run_id = internal::Sha1Hex(absl::StrCat("fake-fleet:", n.name, ":0"));
    n.node = std::make_unique<sim::Node>(std::move(config));
  }
}

FleetWorld::~FleetWorld() = default;

int64_t FleetWorld::NowMsLocked(const NodeState& n) const {
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - base_);
  return base_unix_ms_ + elapsed.count() + n.clock_offset_ms;
}

void FleetWorld::CloseConnectionsLocked(int node, const std::string& why) {
  ++nodes_[static_cast<size_t>(node)].generation;
  for (FleetTransport* t : transports_) t->ConnectionsClosed(node, why);
}

void FleetWorld::RestartLocked(NodeState& n, bool keep_data) {
  ++n.restarts;
  n.node->Restart(keep_data,
                  internal::Sha1Hex(absl::StrCat("fake-fleet:", n.name, ":", n.restarts)));
}

void FleetWorld::Stop(int node) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& n = nodes_[static_cast<size_t>(node)];
  if (n.stopped) return;
  n.stopped = true;
  CloseConnectionsLocked(node, "connection closed (the node stopped)");
}

void FleetWorld::Start(int node) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& n = nodes_[static_cast<size_t>(node)];
  if (!n.stopped) return;
  RestartLocked(n, /*keep_data=*/true);
  n.stopped = false;
}

void FleetWorld::Slow(int node, absl::Duration latency) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_[static_cast<size_t>(node)].latency = latency;
}

void FleetWorld::Partition(int node) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_[static_cast<size_t>(node)].partitioned = true;
}

void FleetWorld::Heal(int node) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& n = nodes_[static_cast<size_t>(node)];
  n.partitioned = false;
  n.latency = absl::ZeroDuration();
}

void FleetWorld::RestartWithoutData(int node) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& n = nodes_[static_cast<size_t>(node)];
  RestartLocked(n, /*keep_data=*/false);
  if (!n.stopped) CloseConnectionsLocked(node, "connection closed (the node restarted)");
}

void FleetWorld::JumpClock(int node, absl::Duration by) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& n = nodes_[static_cast<size_t>(node)];
  n.clock_offset_ms += absl::ToInt64Milliseconds(by);
  // Redis's active expiry would delete the keys now past their time within
  // a moment; deleting them at once keeps Keys() honest too.
  n.node->ActiveExpire(NowMsLocked(n));
}

std::vector<std::string> FleetWorld::Keys(int node) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& n = nodes_[static_cast<size_t>(node)];
  return n.node->Keys(NowMsLocked(n));
}

std::optional<std::string> FleetWorld::Get(int node, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& n = nodes_[static_cast<size_t>(node)];
  return n.node->Get(key, NowMsLocked(n));
}

int64_t FleetWorld::CommandsExecuted(int node) {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_[static_cast<size_t>(node)].executed;
}

void FleetWorld::Register(FleetTransport* transport) {
  std::lock_guard<std::mutex> lock(mu_);
  transports_.push_back(transport);
}

void FleetWorld::Unregister(FleetTransport* transport) {
  std::lock_guard<std::mutex> lock(mu_);
  transports_.erase(std::remove(transports_.begin(), transports_.end(), transport),
                    transports_.end());
}

FleetWorld::Route FleetWorld::RouteLocked(int node) const {
  const NodeState& n = nodes_[static_cast<size_t>(node)];
  return Route{n.stopped, n.partitioned, n.latency, n.generation};
}

FleetWorld::Outcome FleetWorld::Execute(int node, uint64_t generation, bool handshake,
                                        sim::Session& session,
                                        const std::vector<sim::Argv>& commands,
                                        std::vector<internal::Reply>* replies) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& n = nodes_[static_cast<size_t>(node)];
  if (n.stopped || n.generation != generation) return Outcome::kGone;
  if (n.partitioned) return Outcome::kLost;
  const int64_t now = NowMsLocked(n);
  if (handshake) {
    // What every real connection does first (ScriptLoadSteps): EVALSHA then
    // finds the scripts, as on a server.
    for (const internal::Script* script : internal::AllScripts()) {
      n.node->Execute(session, {"SCRIPT", "LOAD", script->body}, now);
    }
  }
  for (const sim::Argv& argv : commands) {
    sim::Result r = n.node->Execute(session, argv, now);
    ++n.executed;
    if (r.block.has_value()) {
      // WAIT and WAITAOF: the nodes have no replicas (FakeFleet refuses
      // Options::durability), so the answer is what there is, at once.
      const int acked = n.node->AckedReplicas(r.block->offset);
      r.reply = r.block->aof ? internal::Reply::Array(
                                   {internal::Reply::Integer(0), internal::Reply::Integer(acked)})
                             : internal::Reply::Integer(acked);
    }
    for (const sim::Publication& p : r.published) {
      for (FleetTransport* t : transports_) t->Published(node, p.channel, p.payload);
    }
    replies->push_back(std::move(r.reply));
  }
  return Outcome::kRan;
}

namespace {

// Reads "<prefix><integer>\r\n" at `*pos`.
bool ReadLine(absl::string_view in, size_t* pos, char prefix, int64_t* value) {
  if (*pos >= in.size() || in[*pos] != prefix) return false;
  size_t end = in.find("\r\n", *pos);
  if (end == absl::string_view::npos) return false;
  if (!absl::SimpleAtoi(in.substr(*pos + 1, end - *pos - 1), value) || *value < 0) return false;
  *pos = end + 2;
  return true;
}

}  // namespace

bool SplitCommands(const std::string& payload, std::vector<sim::Argv>* out) {
  absl::string_view in(payload);
  size_t pos = 0;
  while (pos < in.size()) {
    int64_t count = 0;
    if (!ReadLine(in, &pos, '*', &count) || count == 0) return false;
    sim::Argv argv;
    for (int64_t i = 0; i < count; ++i) {
      int64_t len = 0;
      if (!ReadLine(in, &pos, '$', &len)) return false;
      if (in.size() - pos < static_cast<size_t>(len) + 2) return false;
      if (in.substr(pos + static_cast<size_t>(len), 2) != "\r\n") return false;
      argv.emplace_back(in.substr(pos, static_cast<size_t>(len)));
      pos += static_cast<size_t>(len) + 2;
    }
    out->push_back(std::move(argv));
  }
  return !out->empty();
}

}  // namespace redlock::testing
