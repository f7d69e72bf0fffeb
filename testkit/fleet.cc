#include "tests/testing/fleet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace redlock::testkit {
namespace {

std::string FindOnPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = getenv("PATH");
  if (path == nullptr) path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string LogTail(const std::string& path, size_t max_lines = 8) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > max_lines) lines.erase(lines.begin());
  }
  return absl::StrJoin(lines, "\n  ");
}

RedisValue Convert(const redisReply* r) {
  RedisValue v;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      v.type = RedisValue::Type::kString;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = RedisValue::Type::kStatus;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      v.type = RedisValue::Type::kError;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = RedisValue::Type::kInteger;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = RedisValue::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(Convert(r->element[i]));
      break;
    default:
      break;
  }
  return v;
}

bool IsLoopback(const std::string& host) {
  in_addr addr{};
  return inet_pton(AF_INET, host.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
}

}  // namespace

absl::Status CheckRedisServerAvailable() {
  if (!FindOnPath("redis-server").empty()) return absl::OkStatus();
  const char* ci = getenv("CI");
  if (ci != nullptr && std::string(ci) == "true") {
    return absl::NotFoundError("redis-server is not installed, and CI=true makes that a failure");
  }
  return absl::FailedPreconditionError("redis-server is not installed (run scripts/setup.sh)");
}

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
  absl::Status available = CheckRedisServerAvailable();
  if (!available.ok()) return available;
  if (options.nodes < 1) return absl::InvalidArgumentError("a fleet needs at least one node");
  std::unique_ptr<Fleet> fleet(new Fleet(std::move(options)));
  char tmpl[] = "/tmp/redlock-fleet-XXXXXX";
  if (mkdtemp(tmpl) == nullptr)
    return absl::InternalError(absl::StrCat("mkdtemp: ", strerror(errno)));
  fleet->root_ = tmpl;
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
    n.dir = absl::StrCat(fleet->root_, "/node", i);
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
  if (!root_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
}

std::string Fleet::address(int i) const { return absl::StrCat(host(i), ":", port(i)); }

Endpoint Fleet::endpoint(int i) const {
  Endpoint ep;
  ep.host = host(i);
  ep.port = port(i);
  ep.password = options_.password;
  return ep;
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
  return nodes_[static_cast<size_t>(i)].pid;
}

void Fleet::SetNodeEnv(int i, std::vector<std::pair<std::string, std::string>> env) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.node_env.size() <= static_cast<size_t>(i))
    options_.node_env.resize(static_cast<size_t>(i) + 1);
  options_.node_env[static_cast<size_t>(i)] = std::move(env);
}

absl::Status Fleet::Launch(int i) {
  Node& n = nodes_[static_cast<size_t>(i)];
  std::vector<std::string> args = options_.command_prefix;
  std::string server = FindOnPath(options_.redis_server);
  if (server.empty())
    return absl::NotFoundError(absl::StrCat(options_.redis_server, " not found on PATH"));
  args.push_back(server);
  for (const char* a : {"--port"}) args.push_back(a);
  args.push_back(std::to_string(n.port));
  args.insert(args.end(), {"--bind", n.host, "--dir", n.dir, "--save", "", "--daemonize", "no",
                           "--protected-mode", "no", "--logfile", n.dir + "/redis.log",
                           "--appendonly", options_.aof ? "yes" : "no"});
  if (options_.aof) args.insert(args.end(), {"--appendfsync", "always"});
  if (options_.enable_debug) args.insert(args.end(), {"--enable-debug-command", "local"});
  if (!options_.password.empty()) args.insert(args.end(), {"--requirepass", options_.password});
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());

  std::string exe = FindOnPath(args[0]);
  if (exe.empty()) return absl::NotFoundError(absl::StrCat(args[0], " not found on PATH"));

  // Everything the child needs is built before fork: after fork in a
  // multi-threaded process only async-signal-safe calls are allowed.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  auto add_env = [&](const std::pair<std::string, std::string>& kv) {
    std::string prefix = kv.first + "=";
    for (auto& s : env_strings) {
      if (absl::StartsWith(s, prefix)) {
        s = prefix + kv.second;
        return;
      }
    }
    env_strings.push_back(prefix + kv.second);
  };
  for (const auto& kv : options_.env) add_env(kv);
  if (static_cast<size_t>(i) < options_.node_env.size()) {
    for (const auto& kv : options_.node_env[static_cast<size_t>(i)]) add_env(kv);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string out_path = n.dir + "/stdout.log";
  pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, 0);
    execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  n.pid = pid;
  n.stopped = false;
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
    int status = 0;
    pid_t r = waitpid(n.pid, &status, WNOHANG);
    if (r == n.pid) {
      n.pid = -1;
      return absl::InternalError(absl::StrCat(
          "redis-server for node ", i, " on ", n.host, ":", n.port, " exited at start (status ",
          status, "):\n  ", LogTail(n.dir + "/redis.log"), "\n  ", LogTail(n.dir + "/stdout.log")));
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
  Node& n = nodes_[static_cast<size_t>(i)];
  if (n.pid <= 0) return;
  kill(n.pid, SIGKILL);
  int status = 0;
  waitpid(n.pid, &status, 0);
  n.pid = -1;
  n.stopped = false;
}

absl::Status Fleet::Stop(int i) {
  std::lock_guard<std::mutex> lock(mu_);
  Node& n = nodes_[static_cast<size_t>(i)];
  if (n.pid <= 0) return absl::FailedPreconditionError(absl::StrCat("node ", i, " is not running"));
  if (kill(n.pid, SIGSTOP) != 0) return absl::InternalError(strerror(errno));
  n.stopped = true;
  return absl::OkStatus();
}

absl::Status Fleet::Continue(int i) {
  std::lock_guard<std::mutex> lock(mu_);
  Node& n = nodes_[static_cast<size_t>(i)];
  if (n.pid <= 0) return absl::FailedPreconditionError(absl::StrCat("node ", i, " is not running"));
  if (kill(n.pid, SIGCONT) != 0) return absl::InternalError(strerror(errno));
  n.stopped = false;
  return absl::OkStatus();
}

absl::Status Fleet::Kill(int i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_[static_cast<size_t>(i)].pid <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("node ", i, " is not running"));
  }
  KillLocked(i);
  return absl::OkStatus();
}

absl::Status Fleet::StartNode(int i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_[static_cast<size_t>(i)].pid > 0) {
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

RedisValue RedisValueFromReply(const void* redis_reply) {
  return Convert(static_cast<const redisReply*>(redis_reply));
}

absl::StatusOr<RedisValue> RunCommand(const Endpoint& node, const std::vector<std::string>& args,
                                      absl::Duration timeout) {
  const std::string name = node.ToString();
  timeval tv = absl::ToTimeval(timeout);
  redisContext* c = redisConnectWithTimeout(node.host.c_str(), node.port, tv);
  if (c == nullptr) return absl::UnavailableError("cannot allocate a redis context");
  if (c->err) {
    std::string err = c->errstr;
    redisFree(c);
    return absl::UnavailableError(absl::StrCat(name, ": ", err));
  }
  redisSetTimeout(c, tv);
  auto run = [&](const std::vector<std::string>& cmd) -> absl::StatusOr<RedisValue> {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    void* raw = redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (raw == nullptr) return absl::UnavailableError(absl::StrCat(name, ": ", c->errstr));
    RedisValue v = Convert(static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    return v;
  };
  std::vector<std::vector<std::string>> hello;
  if (!node.password.empty()) {
    if (node.username.empty()) {
      hello.push_back({"AUTH", node.password});
    } else {
      hello.push_back({"AUTH", node.username, node.password});
    }
  }
  if (node.db != 0) hello.push_back({"SELECT", std::to_string(node.db)});
  for (const auto& cmd : hello) {
    absl::StatusOr<RedisValue> r = run(cmd);
    if (!r.ok() || r->type == RedisValue::Type::kError) {
      redisFree(c);
      if (!r.ok()) return r.status();
      return absl::UnavailableError(absl::StrCat(name, ": ", cmd[0], " failed: ", r->str));
    }
  }
  absl::StatusOr<RedisValue> out = run(args);
  redisFree(c);
  return out;
}

absl::StatusOr<RedisValue> Fleet::Command(int i, const std::vector<std::string>& args,
                                          absl::Duration timeout) const {
  return RunCommand(endpoint(i), args, timeout);
}

absl::Status Fleet::FlushAll() const {
  for (int i = 0; i < size(); ++i) {
    if (pid(i) <= 0) continue;
    absl::StatusOr<RedisValue> r = Command(i, {"FLUSHALL"});
    if (!r.ok()) return r.status();
  }
  return absl::OkStatus();
}

}  // namespace redlock::testkit
