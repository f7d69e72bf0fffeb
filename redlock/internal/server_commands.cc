#include "redlock/internal/server_commands.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {

std::string NodeCommands::Describe() const {
  if (!known) return "unknown";
  std::vector<std::string> have;
  if (delifeq) have.push_back("DELIFEQ");
  if (delex) have.push_back("DELEX IFEQ");
  if (set_ifeq) have.push_back("SET IFEQ");
  return have.empty() ? "none" : absl::StrJoin(have, ", ");
}

namespace {

constexpr uint8_t kKnown = 1, kDelifeq = 2, kDelex = 4, kSetIfeq = 8;

}  // namespace

ServerCommands::ServerCommands(int nodes) : nodes_(static_cast<size_t>(nodes)) {}

NodeCommands ServerCommands::Get(int node) const {
  const uint8_t bits = nodes_[static_cast<size_t>(node)].load(std::memory_order_acquire);
  NodeCommands c;
  c.known = (bits & kKnown) != 0;
  c.delifeq = (bits & kDelifeq) != 0;
  c.delex = (bits & kDelex) != 0;
  c.set_ifeq = (bits & kSetIfeq) != 0;
  return c;
}

void ServerCommands::Set(int node, NodeCommands commands) {
  const uint8_t bits = (commands.known ? kKnown : 0) | (commands.delifeq ? kDelifeq : 0) |
                       (commands.delex ? kDelex : 0) | (commands.set_ifeq ? kSetIfeq : 0);
  nodes_[static_cast<size_t>(node)].store(bits, std::memory_order_release);
}

bool ParseCommandInfo(const Reply& reply, NodeCommands* out) {
  if (reply.type != Reply::Type::kArray || reply.elements.size() != 2) return false;
  // An entry that describes a command is an array starting with its name.
  auto has = [](const Reply& e) {
    return e.type == Reply::Type::kArray && !e.elements.empty() &&
           e.elements[0].type != Reply::Type::kNil;
  };
  out->delifeq = has(reply.elements[0]);
  out->delex = has(reply.elements[1]);
  return true;
}

bool SetDocsHaveIfeq(const Reply& reply) {
  if (reply.type != Reply::Type::kArray) return false;
  const std::vector<Reply>& e = reply.elements;
  for (size_t i = 0; i < e.size(); ++i) {
    // ..., "token", "IFEQ", ... in an argument's description.
    if (i + 1 < e.size() && e[i].type == Reply::Type::kString &&
        absl::AsciiStrToLower(e[i].str) == "token" && e[i + 1].type == Reply::Type::kString &&
        absl::AsciiStrToUpper(e[i + 1].str) == "IFEQ") {
      return true;
    }
    if (SetDocsHaveIfeq(e[i])) return true;
  }
  return false;
}

std::vector<HandshakeStep> ServerCommandSteps(std::shared_ptr<ServerCommands> commands, int node) {
  // What the first step learned, for the second to store with its own: one
  // connection's handshake runs its steps in order on one thread.
  auto seen = std::make_shared<NodeCommands>();
  std::vector<HandshakeStep> steps(2);
  AppendCommand(&steps[0].payload, {"COMMAND", "INFO", "DELIFEQ", "DELEX"});
  steps[0].check = [seen](const Reply& r) -> std::string {
    *seen = NodeCommands{};
    // An error (COMMAND refused or unknown) leaves both false.
    if (!r.is_error()) ParseCommandInfo(r, seen.get());
    return "";
  };
  AppendCommand(&steps[1].payload, {"COMMAND", "DOCS", "SET"});
  steps[1].check = [seen, commands, node](const Reply& r) -> std::string {
    NodeCommands c = *seen;
    c.known = true;
    c.set_ifeq = !r.is_error() && SetDocsHaveIfeq(r);
    commands->Set(node, c);
    return "";
  };
  return steps;
}

}  // namespace redlock::internal
