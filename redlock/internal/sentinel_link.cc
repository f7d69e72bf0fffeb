#include "redlock/internal/sentinel_link.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/url.h"

namespace redlock::internal {

SentinelLink::SentinelLink(const Connection::Settings& settings, const SentinelAddress& at)
    : conn(settings), address(JoinHostPort(at.host, at.port)) {}

std::vector<HandshakeStep> SentinelLink::Steps(const SentinelSpec& spec) {
  Endpoint login;
  login.username = spec.username;
  login.password = spec.password;
  std::vector<HandshakeStep> steps = LoginSteps(login);
  HandshakeStep ask;
  AppendCommand(&ask.payload, {"SENTINEL", "get-master-addr-by-name", spec.master});
  ask.check = [this, master = spec.master](const Reply& r) -> std::string {
    if (r.is_error()) return HandshakeError("SENTINEL get-master-addr-by-name", r);
    if (r.is_nil()) return absl::StrCat("the Sentinel knows no master named \"", master, "\"");
    int p = 0;
    if (r.type != Reply::Type::kArray || r.elements.size() != 2 ||
        r.elements[0].type != Reply::Type::kString || r.elements[0].str.empty() ||
        !absl::SimpleAtoi(r.elements[1].str, &p) || p < 1 || p > 65535) {
      return absl::StrCat("SENTINEL get-master-addr-by-name returned ", r.Describe());
    }
    asked_host = r.elements[0].str;
    asked_port = p;
    return "";
  };
  steps.push_back(std::move(ask));
  // The epoch cross-checks the Sentinels' answers. A Sentinel user that may
  // not run SENTINEL MASTER is not refused: its epoch is unknown.
  HandshakeStep master;
  AppendCommand(&master.payload, {"SENTINEL", "MASTER", spec.master});
  master.check = [this](const Reply& r) -> std::string {
    asked_epoch = r.is_error() ? -1 : ConfigEpoch(r);
    return "";
  };
  steps.push_back(std::move(master));
  HandshakeStep subscribe;
  AppendCommand(&subscribe.payload, {"SUBSCRIBE", std::string(kSwitchMaster)});
  subscribe.check = [](const Reply& r) -> std::string {
    // A Sentinel user denied SUBSCRIBE still names the master: it is then
    // asked again at every outage, and announces no failover.
    if (r.is_error() || (r.type == Reply::Type::kArray && !r.elements.empty() &&
                         r.elements[0].str == "subscribe")) {
      return "";
    }
    return absl::StrCat("SUBSCRIBE ", kSwitchMaster, " returned ", r.Describe());
  };
  steps.push_back(std::move(subscribe));
  asked_host.clear();
  asked_port = 0;
  asked_epoch = -1;
  ping_out = false;
  return steps;
}

void SentinelLink::TakeAnswer() {
  host = asked_host;
  port = asked_port;
  epoch = asked_epoch;
  error.clear();
}

std::optional<SwitchMaster> ParseSwitchMaster(const Reply& m, absl::string_view name) {
  if (m.type != Reply::Type::kArray || m.elements.size() != 3 || m.elements[0].str != "message" ||
      m.elements[1].str != kSwitchMaster) {
    return std::nullopt;  // a keep-alive's answer
  }
  std::vector<std::string> f = absl::StrSplit(m.elements[2].str, ' ');
  int port = 0;
  if (f.size() != 5 || f[0] != name || !absl::SimpleAtoi(f[4], &port) || port < 1 || port > 65535) {
    return std::nullopt;  // another master of this Sentinel
  }
  return SwitchMaster{f[1], f[2], f[3], port};
}

}  // namespace redlock::internal
