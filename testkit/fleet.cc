#include "testkit/fleet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace redlock::testkit {
namespace {

std::string LogTail(const std::string& path) { return absl::StrJoin(LastLines(path, 8), "\n  "); }

bool IsLoopback(const std::string& host) {
  in_addr addr{};
  return inet_pton(AF_INET, host.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
}

}  // namespace

bool UnderCi() {
  const char* ci = getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

absl::Status CheckRedisServerAvailable() { return SelectedServer().status(); }

absl::StatusOr<int> PickFreePort(const std::string& host) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("bind ", host, ":0: ", strerror(err)));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

absl::StatusOr<std::unique_ptr<Fleet>> Fleet::Start(FleetOptions options) {
  absl::StatusOr<ServerBuild> server =
      RequireServer(options.server.empty() ? SelectedServerName() : options.server);
  if (!server.ok()) return server.status();
  if (options.nodes < 1) return absl::InvalidArgumentError("a fleet needs at least one node");
  const bool without_lua = std::find(options.without_lua.begin(), options.without_lua.end(),
                                     true) != options.without_lua.end();
  if (without_lua && server->lua_module.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(server->name,
                     " has Lua built in and cannot start without it; valkey-9.1 (Lua as a "
                     "module, scripts/servers.sh) can"));
  }
  std::unique_ptr<Fleet> fleet(new Fleet(std::move(options)));
  fleet->server_ = *std::move(server);
  if (fleet->root_.path().empty()) {
    return absl::InternalError("cannot create a temp dir under /tmp (mkdtemp)");
  }
  if (fleet->options_.tls && fleet->options_.tls_certificates.has_value()) {
    fleet->certificates_ = *fleet->options_.tls_certificates;
  } else if (fleet->options_.tls) {
    const std::string dir = fleet->root_.path() + "/tls";
    mkdir(dir.c_str(), 0700);
    absl::StatusOr<TestCertificates> certs = MakeTestCertificates(dir);
    if (!certs.ok()) return certs.status();
    fleet->certificates_ = *std::move(certs);
  }
  fleet->nodes_.resize(static_cast<size_t>(fleet->options_.nodes));
  for (int i = 0; i < fleet->size(); ++i) {
    Node& n = fleet->nodes_[static_cast<size_t>(i)];
    n.host = i < static_cast<int>(fleet->options_.hosts.size())
                 ? fleet->options_.hosts[static_cast<size_t>(i)]
                 : "127.0.0.1";
    if (!IsLoopback(n.host)) {
      return absl::InvalidArgumentError(
          absl::StrCat("node address ", n.host, " is not in 127.0.0.0/8"));
    }
    n.dir = absl::StrCat(fleet->root_.path(), "/node", i);
    mkdir(n.dir.c_str(), 0700);
  }
  for (int i = 0; i < fleet->size(); ++i) {
    absl::Status st;
    // A port picked as free may be taken before the server binds it; try a few.
    for (int tries = 0; tries < 5; ++tries) {
      absl::StatusOr<int> port = PickFreePort(fleet->nodes_[static_cast<size_t>(i)].host);
      if (!port.ok() && fleet->options_.command_prefix.empty()) return port.status();
      // Inside a network namespace the address may not exist out here: pick
      // from a range instead.
      fleet->nodes_[static_cast<size_t>(i)].port =
          port.ok() ? *port : 20000 + (getpid() * 7 + i * 101 + tries) % 30000;
      std::lock_guard<std::mutex> lock(fleet->mu_);
      st = fleet->Launch(i);
      if (st.ok()) break;
    }
    if (!st.ok()) return st;
  }
  return fleet;
}

Fleet::~Fleet() {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < size(); ++i) KillLocked(i);
  // root_ (the nodes' directories) goes after this body.
}

std::string Fleet::address(int i) const { return absl::StrCat(host(i), ":", port(i)); }

Endpoint Fleet::endpoint(int i) const {
  Endpoint ep;
  ep.host = host(i);
  ep.port = port(i);
  ep.password = options_.password;
  ep.tls = options_.tls;
  if (DeniesScripting(i)) {
    ep.username = kScriptlessUser;
    ep.password = kScriptlessPassword;
  }
  return ep;
}

TlsOptions Fleet::ClientTls() const {
  TlsOptions tls;
  if (!options_.tls) return tls;
  tls.ca_file = certificates_.ca_cert;
  tls.cert_file = certificates_.client_cert;
  tls.key_file = certificates_.client_key;
  return tls;
}

std::vector<Endpoint> Fleet::endpoints() const {
  std::vector<Endpoint> out;
  for (int i = 0; i < size(); ++i) out.push_back(endpoint(i));
  return out;
}

std::string Fleet::NodeList() const {
  std::vector<std::string> parts;
  for (int i = 0; i < size(); ++i) parts.push_back(address(i));
  return absl::StrJoin(parts, ",");
}

pid_t Fleet::pid(int i) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Node& n = nodes_[static_cast<size_t>(i)];
  return n.process != nullptr ? n.process->pid() : -1;
}

void Fleet::SetNodeEnv(int i, std::vector<std::pair<std::string, std::string>> env) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.node_env.size() <= static_cast<size_t>(i))
    options_.node_env.resize(static_cast<size_t>(i) + 1);
  options_.node_env[static_cast<size_t>(i)] = std::move(env);
}

absl::Status Fleet::Launch(int i) {
  Node& n = nodes_[static_cast<size_t>(i)];
  const std::string server =
      options_.redis_server.empty() ? server_.server : FindExecutable(options_.redis_server);
  if (server.empty()) {
    return absl::NotFoundError(absl::StrCat(options_.redis_server, " not found on PATH"));
  }
  ProcessOptions p;
  p.argv = options_.command_prefix;
  p.argv.push_back(server);
  if (options_.tls) {
    const TestCertificates& c = certificates_;
    const bool expired = options_.tls_server_cert == TlsServerCert::kExpired;
    const bool other = options_.tls_server_cert == TlsServerCert::kOtherCa;
    p.argv.insert(
        p.argv.end(),
        {"--port", "0", "--tls-port", std::to_string(n.port), "--tls-cert-file",
         other     ? c.other_server_cert
         : expired ? c.expired_cert
                   : c.server_cert,
         "--tls-key-file", other ? c.other_server_key : c.server_key, "--tls-ca-cert-file",
         c.ca_cert, "--tls-auth-clients", options_.tls_auth_clients ? "yes" : "no"});
  } else {
    p.argv.insert(p.argv.end(), {"--port", std::to_string(n.port)});
  }
  p.argv.insert(p.argv.end(), {"--bind", n.host, "--dir", n.dir, "--save", "", "--daemonize", "no",
                               "--protected-mode", "no", "--logfile", n.dir + "/redis.log",
                               "--appendonly", options_.aof ? "yes" : "no"});
  if (options_.aof) p.argv.insert(p.argv.end(), {"--appendfsync", "always"});
  if (options_.enable_debug) p.argv.insert(p.argv.end(), {"--enable-debug-command", "local"});
  if (!options_.password.empty()) p.argv.insert(p.argv.end(), {"--requirepass", options_.password});
  // A server whose Lua engine is a module has none unless it is loaded.
  if (!server_.lua_module.empty() && options_.redis_server.empty() && !WithoutLua(i)) {
    p.argv.insert(p.argv.end(), {"--loadmodule", server_.lua_module});
  }
  if (DeniesScripting(i)) {
    p.argv.insert(p.argv.end(),
                  {"--user", kScriptlessUser, "on", absl::StrCat(">", kScriptlessPassword), "~*",
                   "&*", "+@all", "-@scripting"});
  }
  if (options_.cluster) {
    if (n.cluster_port == 0) {
      absl::StatusOr<int> bus = PickFreePort(n.host);
      if (!bus.ok()) return bus.status();
      n.cluster_port = *bus;
    }
    p.argv.insert(p.argv.end(),
                  {"--cluster-enabled", "yes", "--cluster-config-file", n.dir + "/nodes.conf",
                   "--cluster-port", std::to_string(n.cluster_port), "--cluster-node-timeout",
                   std::to_string(absl::ToInt64Milliseconds(options_.cluster_node_timeout)),
                   // A replica's first sync at once (a replica that never
                   // synced cannot be promoted).
                   "--repl-diskless-sync-delay", "0"});
  }
  p.argv.insert(p.argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  p.env = options_.env;
  if (static_cast<size_t>(i) < options_.node_env.size()) {
    const auto& node_env = options_.node_env[static_cast<size_t>(i)];
    p.env.insert(p.env.end(), node_env.begin(), node_env.end());
  }
  p.stdout_to = Stream::kLogFile;
  p.stderr_to = Stream::kLogFile;
  p.log_path = n.dir + "/stdout.log";
  // A harness that blocks SIGINT/SIGTERM to clean up by itself (redlock-chaos)
  // keeps its nodes out of a terminal's ctrl-C too: it stops them itself.
  p.keep_signal_mask = true;
  absl::StatusOr<std::unique_ptr<Process>> process = Process::Start(std::move(p));
  if (!process.ok()) return process.status();
  n.process = *std::move(process);
  absl::Status st = WaitReady(i);
  if (!st.ok()) KillLocked(i);
  return st;
}

absl::Status Fleet::WaitReady(int i) {
  Node& n = nodes_[static_cast<size_t>(i)];
  auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(options_.start_timeout);
  std::string last = "no answer";
  for (int tries = 0; tries < 100000 && std::chrono::steady_clock::now() < deadline; ++tries) {
    if (std::optional<int> status = n.process->Wait(absl::ZeroDuration()); status.has_value()) {
      n.process.reset();
      return absl::InternalError(
          absl::StrCat(server_.name, " for node ", i, " on ", n.host, ":", n.port,
                       " exited at start (", DescribeWaitStatus(*status), "):\n  ",
                       LogTail(n.dir + "/redis.log"), "\n  ", LogTail(n.dir + "/stdout.log")));
    }
    absl::StatusOr<RedisValue> pong = Command(i, {"PING"}, absl::Milliseconds(200));
    if (pong.ok() && pong->type != RedisValue::Type::kError) return absl::OkStatus();
    if (pong.ok() && absl::StartsWith(pong->str, "LOADING")) {
      last = pong->str;
    } else if (!pong.ok()) {
      last = std::string(pong.status().message());
    } else {
      last = pong->str;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(tries < 20 ? 2 : 10));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("node ", i, " (", n.host, ":", n.port, ") did not answer PING within ",
                   absl::FormatDuration(options_.start_timeout), ": ", last));
}

void Fleet::KillLocked(int i) {
  nodes_[static_cast<size_t>(i)].process.reset();  // SIGKILL and reap
}

absl::Status Fleet::SignalNode(int i, int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  Node& n = nodes_[static_cast<size_t>(i)];
  if (n.process == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("node ", i, " is not running"));
  }
  return n.process->Signal(sig);
}

absl::Status Fleet::Stop(int i) { return SignalNode(i, SIGSTOP); }
absl::Status Fleet::Continue(int i) { return SignalNode(i, SIGCONT); }

absl::Status Fleet::Kill(int i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_[static_cast<size_t>(i)].process == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("node ", i, " is not running"));
  }
  KillLocked(i);
  return absl::OkStatus();
}

absl::Status Fleet::StartNode(int i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_[static_cast<size_t>(i)].process != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("node ", i, " is already running"));
  }
  // The port was ours a moment ago; the kernel may need a few ms to free it.
  absl::Status st;
  for (int tries = 0; tries < 20; ++tries) {
    st = Launch(i);
    if (st.ok()) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return st;
}

absl::Status Fleet::Restart(int i) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    KillLocked(i);
  }
  return StartNode(i);
}

absl::StatusOr<RedisValue> Fleet::Command(int i, const std::vector<std::string>& args,
                                          absl::Duration timeout) const {
  TlsOptions tls = ClientTls();
  tls.verify_peer = false;
  Endpoint ep = endpoint(i);
  ep.username.clear();  // the default user, whatever deny_scripting says
  ep.password = options_.password;
  return RunCommand(ep, args, timeout, tls);
}

long long Fleet::CommandCalls(int i, const std::string& command) const {
  absl::StatusOr<RedisValue> v = Command(i, {"INFO", "commandstats"});
  if (!v.ok()) return -1;
  const std::string field = absl::StrCat("cmdstat_", command, ":calls=");
  size_t at = v->str.find(field);
  return at == std::string::npos ? 0 : std::atoll(v->str.c_str() + at + field.size());
}

absl::Status Fleet::FlushAll() const {
  for (int i = 0; i < size(); ++i) {
    if (pid(i) <= 0) continue;
    absl::StatusOr<RedisValue> r = Command(i, {"FLUSHALL"});
    if (!r.ok()) return r.status();
  }
  return absl::OkStatus();
}

int ExampleNodes(const char* program, std::string nodes, int local_nodes,
                 std::unique_ptr<Fleet>* fleet, Options* options) {
  if (nodes.empty() && std::getenv("REDLOCK_NODES") != nullptr)
    nodes = std::getenv("REDLOCK_NODES");
  absl::Status status;
  if (!nodes.empty()) {
    absl::StatusOr<std::vector<Endpoint>> parsed = ParseEndpointList(nodes);
    if (parsed.ok()) options->nodes = *std::move(parsed);
    status = parsed.status();
  } else {
    absl::StatusOr<std::unique_ptr<Fleet>> started = Fleet::Start({.nodes = local_nodes});
    if (started.ok()) {
      *fleet = *std::move(started);
      options->nodes = (*fleet)->endpoints();
    }
    status = started.status();
  }
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", program, status.ToString().c_str());
  if (absl::IsFailedPrecondition(status)) return 77;
  return absl::IsInvalidArgument(status) ? 2 : 1;
}

}  // namespace redlock::testkit
