#include "backends/servers.h"

#include <arpa/inet.h>
#include <glob.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "backends/http.h"
#include "testkit/files.h"

namespace redlock::backends {
namespace {

constexpr char kZooKeeperJar[] = "/usr/share/java/zookeeper.jar";
constexpr char kZooKeeperConf[] = "/etc/zookeeper/conf";

// The newest /usr/lib/postgresql/<v>/bin that has postgres and initdb.
std::string PgBinDir() {
  glob_t g{};
  std::string best;
  if (glob("/usr/lib/postgresql/*/bin/postgres", 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      std::string dir = std::filesystem::path(g.gl_pathv[i]).parent_path().string();
      if (access((dir + "/initdb").c_str(), X_OK) == 0 && dir > best) best = dir;
    }
  }
  globfree(&g);
  return best;
}

// A uid that PostgreSQL accepts (it refuses root).
int PgUid() {
  if (geteuid() != 0) return -1;
  if (passwd* pw = getpwnam("postgres"); pw != nullptr) return static_cast<int>(pw->pw_uid);
  return 65534;
}

// Sends a ZooKeeper four-letter word and returns the whole answer.
absl::StatusOr<std::string> FourLetters(const std::string& host, int port, const char* word,
                                        absl::Duration timeout) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(strerror(errno));
  timeval tv{static_cast<time_t>(absl::ToInt64Seconds(timeout)),
             static_cast<suseconds_t>(absl::ToInt64Microseconds(timeout) % 1000000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    return absl::UnavailableError(strerror(err));
  }
  (void)!send(fd, word, strlen(word), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (int i = 0; i < 1000; ++i) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

struct EtcdStatus {
  uint64_t member_id = 0;
  uint64_t leader = 0;
};

absl::StatusOr<EtcdStatus> EtcdStatusOf(const std::string& endpoint, absl::Duration timeout) {
  HttpClient http({endpoint});
  absl::StatusOr<HttpReply> r = http.Post("/v3/maintenance/status", "{}", timeout);
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::UnavailableError(absl::StrCat("HTTP ", r->status));
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  EtcdStatus s;
  auto u64 = [](const nlohmann::json& v) -> uint64_t {
    uint64_t out = 0;
    if (v.is_string()) (void)absl::SimpleAtoi(v.get<std::string>(), &out);
    return out;
  };
  if (!j.is_object()) return absl::InternalError("bad status reply");
  if (j.contains("header") && j["header"].contains("member_id")) {
    s.member_id = u64(j["header"]["member_id"]);
  }
  if (j.contains("leader")) s.leader = u64(j["leader"]);
  return s;
}

// The pids whose parent is `parent` (PostgreSQL's backends are children of
// the postmaster: stopping "the database" means stopping them all).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    // pid (comm) state ppid ...; comm may contain spaces: parse after ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
    pid_t ppid = 0;
    if (f.size() > 1 && absl::SimpleAtoi(f[1], &ppid) && ppid == parent) out.push_back(pid);
  }
  return out;
}

}  // namespace

absl::Status ServerAvailable(ServerKind kind) {
  auto missing = [&](const std::string& what) {
    return absl::FailedPreconditionError(absl::StrCat(what, " not found: ", InstallLine(kind)));
  };
  switch (kind) {
    case ServerKind::kRedis:
      if (testkit::FindExecutable("redis-server").empty()) return missing("redis-server");
      return absl::OkStatus();
    case ServerKind::kEtcd:
      if (testkit::FindExecutable("etcd").empty()) return missing("etcd");
      return absl::OkStatus();
    case ServerKind::kZooKeeper:
      if (testkit::FindExecutable("java").empty() || access(kZooKeeperJar, R_OK) != 0) {
        return missing(absl::StrCat("java or ", kZooKeeperJar));
      }
      return absl::OkStatus();
    case ServerKind::kPostgres:
      if (PgBinDir().empty()) return missing("/usr/lib/postgresql/*/bin/postgres");
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ServerCluster>> ServerCluster::Start(ClusterOptions options) {
  if (absl::Status s = ServerAvailable(options.kind); !s.ok()) return s;
  if (options.kind == ServerKind::kPostgres) options.members = 1;
  if (options.members < 1) return absl::InvalidArgumentError("a cluster needs a member");
  for (const std::string& h : options.hosts) {
    if (!absl::StartsWith(h, "127.")) {
      return absl::InvalidArgumentError(absl::StrCat("not a loopback address: ", h));
    }
  }
  std::unique_ptr<ServerCluster> c(new ServerCluster(std::move(options)));
  const ClusterOptions& o = c->options_;
  if (o.kind == ServerKind::kRedis) {
    testkit::FleetOptions fo;
    fo.nodes = o.members;
    fo.hosts = o.hosts;
    fo.node_env = o.member_env;
    fo.command_prefix = o.command_prefix;
    fo.aof = o.redis_aof;
    fo.enable_debug = false;
    absl::StatusOr<std::unique_ptr<testkit::Fleet>> fleet = testkit::Fleet::Start(fo);
    if (!fleet.ok()) return fleet.status();
    c->fleet_ = *std::move(fleet);
    return c;
  }
  std::string tmpl = absl::StrCat("/tmp/redlock-", ServerName(o.kind), "-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", strerror(errno)));
  }
  c->root_ = tmpl;
  chmod(c->root_.c_str(), 0755);  // members may run as other uids
  if (absl::Status s = c->Prepare(); !s.ok()) {
    c->KeepLogs();
    return s;
  }
  for (int i = 0; i < c->size(); ++i) {
    if (absl::Status s = c->Launch(i); !s.ok()) {
      c->KeepLogs();
      return s;
    }
  }
  if (absl::Status s = c->WaitHealthy(o.start_timeout); !s.ok()) {
    c->KeepLogs();
    std::string tail;
    for (int i = 0; i < c->size(); ++i) {
      for (const std::string& l : testkit::LastLines(c->log_path(i), 5)) {
        absl::StrAppend(&tail, "\n  m", i, ": ", l);
      }
    }
    return absl::UnavailableError(absl::StrCat(ServerName(o.kind), " did not start: ", s.message(),
                                               " (logs in ", c->root_, ")", tail));
  }
  return c;
}

ServerCluster::~ServerCluster() {
  for (int i = 0; i < static_cast<int>(members_.size()); ++i) (void)Kill(i);  // by pid, reaped
  fleet_.reset();
  if (root_.empty()) return;
  if (keep_) {
    fprintf(stderr, "redlock backends: %s logs and data kept in %s\n",
            std::string(ServerName(options_.kind)).c_str(), root_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

int ServerCluster::size() const {
  return fleet_ != nullptr ? fleet_->size() : static_cast<int>(members_.size());
}

std::string ServerCluster::endpoint(int i) const {
  if (fleet_ != nullptr) return fleet_->address(i);
  const Member& m = members_[static_cast<size_t>(i)];
  return absl::StrCat(m.host, ":", m.port);
}

std::vector<std::string> ServerCluster::endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) out.push_back(endpoint(i));
  return out;
}

pid_t ServerCluster::pid(int i) const {
  if (fleet_ != nullptr) return fleet_->pid(i);
  const Member& m = members_[static_cast<size_t>(i)];
  return m.process != nullptr ? m.process->pid() : -1;
}

int ServerCluster::uid(int i) const {
  return fleet_ != nullptr ? -1 : members_[static_cast<size_t>(i)].uid;
}

std::string ServerCluster::log_path(int i) const {
  if (fleet_ != nullptr) return absl::StrCat(fleet_->dir(i), "/redis.log");
  return absl::StrCat(members_[static_cast<size_t>(i)].dir, "/server.log");
}

std::string ServerCluster::Version() const {
  std::vector<std::string> argv;
  switch (options_.kind) {
    case ServerKind::kRedis:
      argv = {"redis-server", "--version"};
      break;
    case ServerKind::kEtcd:
      argv = {"etcd", "--version"};
      break;
    case ServerKind::kZooKeeper:
      argv = {"dpkg-query", "-W", "-f=zookeeper ${Version}", "zookeeper"};
      break;
    case ServerKind::kPostgres:
      argv = {pg_bin_ + "/postgres", "--version"};
      break;
  }
  absl::StatusOr<testkit::ProcessResult> r =
      testkit::RunProcess({.argv = argv, .stdout_to = testkit::Stream::kPipe}, absl::Seconds(5));
  if (!r.ok()) return "?";
  std::vector<std::string> lines = absl::StrSplit(r->out, '\n');
  return lines.empty() ? "?" : lines[0];
}

absl::Status ServerCluster::Prepare() {
  const ClusterOptions& o = options_;
  members_.resize(static_cast<size_t>(o.members));
  for (int i = 0; i < o.members; ++i) {
    Member& m = members_[static_cast<size_t>(i)];
    m.host =
        static_cast<size_t>(i) < o.hosts.size() ? o.hosts[static_cast<size_t>(i)] : "127.0.0.1";
    if (static_cast<size_t>(i) < o.member_env.size()) m.env = o.member_env[static_cast<size_t>(i)];
    m.uid =
        static_cast<size_t>(i) < o.member_uid.size() ? o.member_uid[static_cast<size_t>(i)] : -1;
    if (o.kind == ServerKind::kPostgres && m.uid < 0) m.uid = PgUid();
    for (int* port : {&m.port, &m.peer_port, &m.election_port}) {
      absl::StatusOr<int> p = testkit::PickFreePort(m.host);
      if (!p.ok()) return p.status();
      *port = *p;
    }
    m.dir = absl::StrCat(root_, "/m", i);
    std::error_code ec;
    std::filesystem::create_directories(m.dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("mkdir ", m.dir, ": ", ec.message()));
    if (m.uid >= 0 &&
        chown(m.dir.c_str(), static_cast<uid_t>(m.uid), static_cast<gid_t>(m.uid)) != 0) {
      return absl::InternalError(absl::StrCat("chown ", m.dir, ": ", strerror(errno)));
    }
    chmod(m.dir.c_str(), 0700);
  }
  if (o.kind == ServerKind::kZooKeeper) {
    std::string servers;
    for (int i = 0; i < o.members; ++i) {
      const Member& m = members_[static_cast<size_t>(i)];
      absl::StrAppend(&servers, "server.", i + 1, "=", m.host, ":", m.peer_port, ":",
                      m.election_port, "\n");
    }
    const int64_t tick = absl::ToInt64Milliseconds(o.zk_tick);
    for (int i = 0; i < o.members; ++i) {
      const Member& m = members_[static_cast<size_t>(i)];
      std::ofstream(m.dir + "/myid") << i + 1 << "\n";
      std::ofstream(m.dir + "/zoo.cfg")
          << "tickTime=" << tick << "\ninitLimit=20\nsyncLimit=5\ndataDir=" << m.dir
          << "\nclientPort=" << m.port << "\nclientPortAddress=" << m.host
          << "\nadmin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,mntr\n"
          << "minSessionTimeout=" << 2 * tick << "\nmaxSessionTimeout=" << 120 * tick
          << "\nquorumListenOnAllIPs=false\n"
          << servers;
      if (m.uid >= 0) {
        for (const char* f : {"/myid", "/zoo.cfg"}) {
          (void)!chown((m.dir + f).c_str(), static_cast<uid_t>(m.uid), static_cast<gid_t>(m.uid));
        }
      }
    }
  }
  if (o.kind == ServerKind::kPostgres) {
    pg_bin_ = PgBinDir();
    Member& m = members_[0];
    testkit::ProcessOptions init;
    init.argv = o.command_prefix;
    for (const std::string& a :
         {pg_bin_ + "/initdb", std::string("-D"), m.dir + "/data", std::string("-U"), o.pg_user,
          std::string("--auth=trust"), std::string("-E"), std::string("UTF8"),
          std::string("--no-sync"), std::string("--no-instructions")}) {
      init.argv.push_back(a);
    }
    init.uid = m.uid;
    init.stdout_to = testkit::Stream::kLogFile;
    init.stderr_to = testkit::Stream::kStdout;
    init.log_path = m.dir + "/initdb.log";
    absl::StatusOr<testkit::ProcessResult> r = testkit::RunProcess(init, absl::Seconds(120));
    if (!r.ok()) return r.status();
    if (r->exit_code() != 0) {
      return absl::InternalError(absl::StrCat("initdb failed (",
                                              testkit::DescribeWaitStatus(r->wait_status),
                                              "), see ", m.dir, "/initdb.log"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ServerCluster::Command(int i) const {
  const Member& m = members_[static_cast<size_t>(i)];
  std::vector<std::string> argv = options_.command_prefix;
  switch (options_.kind) {
    case ServerKind::kEtcd: {
      std::vector<std::string> peers;
      for (size_t k = 0; k < members_.size(); ++k) {
        peers.push_back(
            absl::StrCat("m", k, "=http://", members_[k].host, ":", members_[k].peer_port));
      }
      const std::string client = absl::StrCat("http://", m.host, ":", m.port);
      const std::string peer = absl::StrCat("http://", m.host, ":", m.peer_port);
      for (std::string a : {std::string("etcd"), absl::StrCat("--name=m", i),
                            absl::StrCat("--data-dir=", m.dir, "/data"),
                            absl::StrCat("--listen-client-urls=", client),
                            absl::StrCat("--advertise-client-urls=", client),
                            absl::StrCat("--listen-peer-urls=", peer),
                            absl::StrCat("--initial-advertise-peer-urls=", peer),
                            absl::StrCat("--initial-cluster=", absl::StrJoin(peers, ",")),
                            std::string("--initial-cluster-state=new"),
                            absl::StrCat("--initial-cluster-token=redlock-", getpid()),
                            std::string("--enable-v2=false")}) {
        argv.push_back(std::move(a));
      }
      break;
    }
    case ServerKind::kZooKeeper:
      for (std::string a :
           {std::string("java"), std::string("-Xms32m"), std::string("-Xmx256m"),
            std::string("-XX:+UseSerialGC"), std::string("-XX:TieredStopAtLevel=1"),
            absl::StrCat("-Dzookeeper.log.dir=", m.dir), std::string("-cp"),
            absl::StrCat(kZooKeeperConf, ":", kZooKeeperJar),
            std::string("org.apache.zookeeper.server.quorum.QuorumPeerMain"), m.dir + "/zoo.cfg"}) {
        argv.push_back(std::move(a));
      }
      break;
    case ServerKind::kPostgres:
      for (std::string a :
           {pg_bin_ + "/postgres", std::string("-D"), m.dir + "/data", std::string("-h"), m.host,
            std::string("-p"), absl::StrCat(m.port), std::string("-k"), m.dir, std::string("-c"),
            std::string("max_connections=300"), std::string("-c"),
            std::string("shared_buffers=64MB"), std::string("-c"),
            std::string("logging_collector=off")}) {
        argv.push_back(std::move(a));
      }
      break;
    case ServerKind::kRedis:
      break;
  }
  return argv;
}

absl::Status ServerCluster::Launch(int i) {
  Member& m = members_[static_cast<size_t>(i)];
  testkit::ProcessOptions p;
  p.argv = Command(i);
  p.env = m.env;
  p.uid = m.uid;
  p.stdout_to = testkit::Stream::kLogFile;
  p.stderr_to = testkit::Stream::kStdout;
  p.log_path = log_path(i);
  absl::StatusOr<std::unique_ptr<testkit::Process>> proc = testkit::Process::Start(std::move(p));
  if (!proc.ok()) return proc.status();
  m.process = *std::move(proc);
  m.stopped = false;
  return absl::OkStatus();
}

absl::Status ServerCluster::MemberReady(int i) {
  const Member& m = members_[static_cast<size_t>(i)];
  switch (options_.kind) {
    case ServerKind::kEtcd: {
      absl::StatusOr<EtcdStatus> s = EtcdStatusOf(endpoint(i), absl::Milliseconds(500));
      if (!s.ok()) return s.status();
      if (s->leader == 0) return absl::UnavailableError(absl::StrCat("m", i, ": no leader"));
      return absl::OkStatus();
    }
    case ServerKind::kZooKeeper: {
      absl::StatusOr<std::string> out =
          FourLetters(m.host, m.port, "srvr", absl::Milliseconds(500));
      if (!out.ok()) return out.status();
      if (!absl::StrContains(*out, "Mode: leader") && !absl::StrContains(*out, "Mode: follower") &&
          !absl::StrContains(*out, "Mode: standalone")) {
        return absl::UnavailableError(absl::StrCat("m", i, ": not serving"));
      }
      return absl::OkStatus();
    }
    case ServerKind::kPostgres: {
      absl::StatusOr<testkit::ProcessResult> r = testkit::RunProcess(
          {.argv = {pg_bin_ + "/pg_isready", "-h", m.host, "-p", absl::StrCat(m.port), "-t", "1"}},
          absl::Seconds(5));
      if (!r.ok()) return r.status();
      if (r->exit_code() != 0) return absl::UnavailableError("not accepting connections");
      return absl::OkStatus();
    }
    case ServerKind::kRedis:
      break;
  }
  return absl::OkStatus();
}

absl::Status ServerCluster::WaitHealthy(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last;
  for (int round = 0; round < 100000; ++round) {
    bool all = true;
    for (int i = 0; i < size(); ++i) {
      if (fleet_ != nullptr) {
        if (fleet_->pid(i) <= 0) continue;
        absl::StatusOr<testkit::RedisValue> v =
            fleet_->Command(i, {"PING"}, absl::Milliseconds(500));
        if (!v.ok()) {
          last = v.status();
          all = false;
        }
        continue;
      }
      const Member& m = members_[static_cast<size_t>(i)];
      if (m.process == nullptr || m.stopped) continue;
      if (!m.process->Running()) {
        return absl::UnavailableError(
            absl::StrCat("m", i, " exited (",
                         testkit::DescribeWaitStatus(*m.process->Wait(absl::ZeroDuration())),
                         "); see ", log_path(i)));
      }
      if (absl::Status s = MemberReady(i); !s.ok()) {
        last = s;
        all = false;
      }
    }
    if (all) return absl::OkStatus();
    if (absl::Now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("not healthy within ", absl::FormatDuration(timeout), ": ", last.ToString()));
}

absl::StatusOr<int> ServerCluster::Leader() {
  switch (options_.kind) {
    case ServerKind::kRedis:
      return absl::FailedPreconditionError("Redis nodes have no leader");
    case ServerKind::kPostgres:
      return 0;
    case ServerKind::kEtcd: {
      std::vector<uint64_t> ids(members_.size(), 0);
      uint64_t leader = 0;
      for (int i = 0; i < size(); ++i) {
        const Member& m = members_[static_cast<size_t>(i)];
        if (m.process == nullptr || m.stopped) continue;
        absl::StatusOr<EtcdStatus> s = EtcdStatusOf(endpoint(i), absl::Milliseconds(500));
        if (!s.ok()) continue;
        ids[static_cast<size_t>(i)] = s->member_id;
        if (s->leader != 0) leader = s->leader;
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        if (leader != 0 && ids[i] == leader) return static_cast<int>(i);
      }
      return absl::UnavailableError("no etcd member answers as the leader");
    }
    case ServerKind::kZooKeeper:
      for (int i = 0; i < size(); ++i) {
        const Member& m = members_[static_cast<size_t>(i)];
        if (m.process == nullptr || m.stopped) continue;
        absl::StatusOr<std::string> out =
            FourLetters(m.host, m.port, "srvr", absl::Milliseconds(500));
        if (out.ok() && absl::StrContains(*out, "Mode: leader")) return i;
      }
      return absl::UnavailableError("no ZooKeeper server answers as the leader");
  }
  return absl::InternalError("unknown kind");
}

absl::Status ServerCluster::Stop(int i) {
  if (fleet_ != nullptr) return fleet_->Stop(i);
  Member& m = members_[static_cast<size_t>(i)];
  if (m.process == nullptr)
    return absl::FailedPreconditionError(absl::StrCat("m", i, " is not running"));
  // The postmaster's children are listed first (a /proc scan takes a while),
  // then everything stops at once.
  const std::vector<pid_t> children =
      options_.kind == ServerKind::kPostgres ? ChildrenOf(m.process->pid()) : std::vector<pid_t>();
  absl::Status s = m.process->Signal(SIGSTOP);
  for (pid_t child : children) kill(child, SIGSTOP);
  if (s.ok()) m.stopped = true;
  return s;
}

absl::Status ServerCluster::Continue(int i) {
  if (fleet_ != nullptr) return fleet_->Continue(i);
  Member& m = members_[static_cast<size_t>(i)];
  if (m.process == nullptr)
    return absl::FailedPreconditionError(absl::StrCat("m", i, " is not running"));
  if (options_.kind == ServerKind::kPostgres) {
    for (pid_t child : ChildrenOf(m.process->pid())) kill(child, SIGCONT);
  }
  absl::Status s = m.process->Signal(SIGCONT);
  if (s.ok()) m.stopped = false;
  return s;
}

absl::Status ServerCluster::Kill(int i) {
  if (fleet_ != nullptr) return fleet_->Kill(i);
  Member& m = members_[static_cast<size_t>(i)];
  if (m.process != nullptr && options_.kind == ServerKind::kPostgres) {
    // kill -9 of the whole server: the postmaster's children too.
    for (pid_t child : ChildrenOf(m.process->pid())) kill(child, SIGKILL);
  }
  if (m.process != nullptr) m.process->Kill();
  m.process.reset();
  m.stopped = false;
  return absl::OkStatus();
}

absl::Status ServerCluster::StartMember(int i) {
  if (fleet_ != nullptr) return fleet_->StartNode(i);
  if (members_[static_cast<size_t>(i)].process != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("m", i, " is running"));
  }
  return Launch(i);
}

void ServerCluster::SetMemberEnv(int i, std::vector<std::pair<std::string, std::string>> env) {
  if (fleet_ != nullptr) {
    fleet_->SetNodeEnv(i, std::move(env));
    return;
  }
  members_[static_cast<size_t>(i)].env = std::move(env);
}

}  // namespace redlock::backends
