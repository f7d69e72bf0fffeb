// backends/servers.h: throw-away lock servers on loopback, started by the
// harness itself like the Redis fleet (testkit/fleet.h): an etcd cluster, a
// ZooKeeper ensemble, a PostgreSQL server, or a Redis fleet (wrapped), each
// member in its own directory of a temp dir, on free ports, stopped by pid.
//
//   absl::StatusOr<std::unique_ptr<ServerCluster>> c =
//       ServerCluster::Start({.kind = ServerKind::kEtcd, .members = 3});
//   ServiceOptions o{.kind = Kind::kEtcd, .endpoints = (*c)->endpoints()};
//   absl::StatusOr<int> leader = (*c)->Leader();
//   (*c)->Stop(*leader);       // SIGSTOP
//   (*c)->Continue(*leader);   // SIGCONT
//   (*c)->Kill(1); (*c)->StartMember(1);   // same ports, same data
//
// No systemd, no Docker: the servers are children of the calling thread
// (PR_SET_PDEATHSIG), killed and reaped by the destructor. Their logs stay
// in the temp dir, which is kept (and its path printed on stderr) when
// KeepLogs() was called, e.g. after a failure.
//
// Binaries (Debian 12): etcd (etcd-server), java + /usr/share/java/zookeeper.jar
// (zookeeper), /usr/lib/postgresql/<v>/bin/{initdb,postgres,pg_isready}
// (postgresql), redis-server. PostgreSQL refuses to run as root: as root the
// harness runs it as the `postgres` user (or nobody).
//
// Thread-safety: not thread-safe; one owner.

#ifndef REDLOCK_BACKENDS_SERVERS_H_
#define REDLOCK_BACKENDS_SERVERS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/lock_service.h"
#include "testkit/fleet.h"
#include "testkit/process.h"

namespace redlock::backends {

// OK when the servers of `kind` can be started here; kFailedPrecondition
// with the install line otherwise.
absl::Status ServerAvailable(ServerKind kind);

struct ClusterOptions {
  ServerKind kind = ServerKind::kEtcd;
  // etcd and ZooKeeper members, Redis nodes; PostgreSQL always 1.
  int members = 3;
  // Bind address per member (loopback only); default 127.0.0.1.
  std::vector<std::string> hosts;
  // Extra environment per member (e.g. LD_PRELOAD of the clock shim).
  std::vector<std::vector<std::pair<std::string, std::string>>> member_env;
  // Each member runs as this uid (network-namespace partitions tell members
  // apart by uid); -1: as the caller (PostgreSQL: never root).
  std::vector<int> member_uid;
  // Prepended to every command line (e.g. {"ip", "netns", "exec", "ns"}).
  std::vector<std::string> command_prefix;
  absl::Duration start_timeout = absl::Seconds(90);
  // ZooKeeper's tick (session timeouts may range over 2..120 ticks).
  absl::Duration zk_tick = absl::Milliseconds(500);
  std::string pg_user = "redlock";
  // Redis: appendonly yes + appendfsync always.
  bool redis_aof = false;
};

class ServerCluster {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ServerCluster>> Start(ClusterOptions options);
  ~ServerCluster();
  ServerCluster(const ServerCluster&) = delete;
  ServerCluster& operator=(const ServerCluster&) = delete;

  ServerKind kind() const { return options_.kind; }
  int size() const;
  // Client endpoints, "host:port", in member order.
  std::vector<std::string> endpoints() const;
  std::string endpoint(int i) const;
  pid_t pid(int i) const;
  // The uid member i runs as (-1: the caller's).
  int uid(int i) const;
  std::string log_path(int i) const;
  const std::string& root() const { return root_; }
  // "etcd 3.4.23", "zookeeper 3.8.0", "postgres (PostgreSQL) 15.x", "redis-server 7.0.15".
  std::string Version() const;
  // The Redis fleet (kRedis only), else null.
  testkit::Fleet* fleet() const { return fleet_.get(); }

  absl::Status Stop(int i);         // SIGSTOP
  absl::Status Continue(int i);     // SIGCONT
  absl::Status Kill(int i);         // SIGKILL and reap
  absl::Status StartMember(int i);  // a killed member again: same ports, same data
  void SetMemberEnv(int i, std::vector<std::pair<std::string, std::string>> env);

  // The member that leads (etcd: the Raft leader; ZooKeeper: "Mode: leader";
  // PostgreSQL: 0). kUnavailable when none answers as leader.
  absl::StatusOr<int> Leader();
  // Waits until every running, not stopped member answers (and a leader
  // exists), up to `timeout`.
  absl::Status WaitHealthy(absl::Duration timeout);

  // Keep the temp dir (logs, data) when this object goes; prints its path.
  void KeepLogs() { keep_ = true; }

 private:
  struct Member {
    std::string host;
    int port = 0;       // client port
    int peer_port = 0;  // etcd peer / ZooKeeper quorum
    int election_port = 0;
    std::string dir;
    std::unique_ptr<testkit::Process> process;
    std::vector<std::pair<std::string, std::string>> env;
    int uid = -1;
    bool stopped = false;
  };

  explicit ServerCluster(ClusterOptions options) : options_(std::move(options)) {}
  absl::Status Prepare();
  absl::Status Launch(int i);
  std::vector<std::string> Command(int i) const;
  absl::Status MemberReady(int i);

  ClusterOptions options_;
  std::string root_;
  bool keep_ = false;
  std::vector<Member> members_;
  std::unique_ptr<testkit::Fleet> fleet_;  // kRedis
  std::string pg_bin_;
};

}  // namespace redlock::backends

#endif  // REDLOCK_BACKENDS_SERVERS_H_
