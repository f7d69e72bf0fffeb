// Replicated nodes for tests, the bench and the chaos harness: asynchronous
// replicas of a fleet's masters, and a Sentinel watching them (Debian's
// redis-sentinel, or the selected server's: testkit/servers.h).
// This is the deployment Redlock's independence assumption is about: each
// "node" a master with replicas, failed over by Sentinel.
//
//   auto masters = Fleet::Start({.nodes = 1});
//   auto replicas = Replicas::Start({.upstreams = {(*masters)->address(0)}});
//   auto sentinel = Sentinel::Start({.masters = {{"n0", (*masters)->address(0)}}});
//   REDLOCK_RETURN_IF_ERROR((*sentinel)->WaitReplicas("n0", 1, absl::Seconds(10)));
//   (*masters)->Kill(0);
//   absl::StatusOr<std::string> now =
//       (*sentinel)->AwaitFailover("n0", (*masters)->address(0), absl::Seconds(10));
//   // *now == (*replicas)->address(0, 0): the replica was promoted
//
// Replicas are a Fleet of their own (same directories, ports, PDEATHSIG
// and cleanup); each is pointed at its upstream with REPLICAOF at run time,
// so a test can point it elsewhere (a proxy on the replication link, the
// new master after a failover). A Sentinel is a testkit::Process running
// `redis-sentinel` with a config file in a temp dir (Sentinel rewrites it).
//
// Thread-safety: as Fleet (Replicas); a Sentinel may be used from any
// thread (each call opens its own connection).

#ifndef REDLOCK_TESTKIT_REPLICATION_H_
#define REDLOCK_TESTKIT_REPLICATION_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/options.h"
#include "testkit/files.h"
#include "testkit/fleet.h"
#include "testkit/process.h"
#include "testkit/tls.h"

namespace redlock::testkit {

// "host:port" -> Endpoint (kInvalidArgument otherwise).
absl::StatusOr<Endpoint> EndpointOf(const std::string& address);

struct ReplicaOptions {
  // One entry per group: where its replicas replicate from ("host:port", the
  // master or a proxy in front of it). Replica j of group g is fleet node
  // g * per_group + j.
  std::vector<std::string> upstreams;
  int per_group = 1;
  // appendonly yes + appendfsync always on the replicas.
  bool aof = false;
  std::vector<std::string> extra_args;
  // Per-replica extra environment, by fleet index (e.g. a clock shim).
  std::vector<std::vector<std::pair<std::string, std::string>>> node_env;
  // How long Start waits for every replica's first full sync.
  absl::Duration sync_timeout = absl::Seconds(15);
  // The upstreams speak TLS only, with these certificates (their fleet's,
  // Fleet::certificates()): the replicas then listen on TLS only and
  // replicate over TLS (tls-replication yes).
  std::optional<TestCertificates> tls;
};

class Replicas {
 public:
  // Starts the replicas, points each at its upstream (after setting the
  // upstream's repl-diskless-sync-delay to 0: a test does not wait 5 s for
  // more replicas) and waits until every one has synced.
  static absl::StatusOr<std::unique_ptr<Replicas>> Start(ReplicaOptions options);

  Fleet& fleet() { return *fleet_; }
  int groups() const { return static_cast<int>(options_.upstreams.size()); }
  int per_group() const { return options_.per_group; }
  int index(int group, int j) const { return group * options_.per_group + j; }
  std::string address(int group, int j) const { return fleet_->address(index(group, j)); }
  Endpoint endpoint(int group, int j) const { return fleet_->endpoint(index(group, j)); }

  // REPLICAOF upstream ("host:port") on replica j of `group`.
  absl::Status Follow(int group, int j, const std::string& upstream);
  // Waits until the replica reports master_link_status:up.
  absl::Status WaitSynced(int group, int j, absl::Duration timeout);
  // REPLICAOF NO ONE: the replica becomes a master with the data it has.
  absl::Status Promote(int group, int j);

 private:
  explicit Replicas(ReplicaOptions options) : options_(std::move(options)) {}
  ReplicaOptions options_;
  std::unique_ptr<Fleet> fleet_;
};

// Whether Sentinel tests can run: OK when the selected server
// ($REDLOCK_SERVER, testkit/servers.h) has its Sentinel installed;
// kFailedPrecondition (skip) otherwise, kNotFound under CI=true (fail).
absl::Status CheckRedisSentinelAvailable();

struct SentinelOptions {
  struct Master {
    std::string name;     // the name clients ask Sentinel about ("n0")
    std::string address;  // "host:port" where Sentinel reaches the master
    int quorum = 1;
  };
  std::vector<Master> masters;
  // How long a master must be silent to be down (SDOWN; with quorum 1 also
  // ODOWN, and the failover starts). Sentinel pings every instance this
  // often too: much shorter than a second, a loaded machine makes a slow
  // reply look like a dead server, and a freshly promoted replica can be
  // failed over again at once.
  absl::Duration down_after = absl::Seconds(1);
  // Sentinel's failover-timeout. Large by default: it also delays Sentinel's
  // "fix" of replicas that replicate from another address than the one it
  // monitors (a proxy on the replication link), and a second failover of the
  // same master (2 x this), neither of which a test wants.
  absl::Duration failover_timeout = absl::Seconds(60);
  std::string host = "127.0.0.1";  // loopback only
  // Which server's Sentinel (testkit/servers.h): "" for $REDLOCK_SERVER,
  // else the default (Debian's redis-sentinel).
  std::string server;
  // The Sentinel binary, when not the named server's ("" for its).
  std::string binary;
  // Where the config file and the log go; "" for a temp dir removed with
  // the Sentinel (a chaos run keeps its own).
  std::string dir;
  absl::Duration start_timeout = absl::Seconds(10);
  // When >= 0: run as this uid (root only; its directory is handed to it,
  // since Sentinel rewrites its config file).
  int uid = -1;
  // Lines appended to the config file, after the masters' ("sentinel
  // announce-port 1", "sentinel auth-user n0 someone").
  std::vector<std::string> extra_config;
  // TLS: the Sentinel also listens on a TLS port (tls_port(), for clients;
  // the kit's own queries keep the plain port) and reaches the masters and
  // replicas over TLS (tls-replication yes), with these certificates.
  std::optional<TestCertificates> tls;
};

class Sentinel {
 public:
  static absl::StatusOr<std::unique_ptr<Sentinel>> Start(SentinelOptions options);
  ~Sentinel();  // SIGKILL and reap (Process)

  std::string address() const;
  Endpoint endpoint() const;
  pid_t pid() const { return process_ == nullptr ? -1 : process_->pid(); }
  const std::string& log_path() const { return log_; }

  // SENTINEL get-master-addr-by-name: "host:port".
  absl::StatusOr<std::string> MasterAddress(const std::string& name) const;
  // Waits until Sentinel knows `count` replicas of `name` whose link to the
  // master is up (they are then eligible for promotion).
  absl::Status WaitReplicas(const std::string& name, int count, absl::Duration timeout) const;
  // Polls SENTINEL MASTER (every 10 ms) until the master's address is no
  // longer `from` and the failover is over (Sentinel has switched to the
  // promoted replica, when it announces +switch-master to the clients that
  // follow it); returns the new address. kDeadlineExceeded after `timeout`
  // with the end of the log.
  absl::StatusOr<std::string> AwaitFailover(const std::string& name, const std::string& from,
                                            absl::Duration timeout) const;
  // Waits until this Sentinel knows `count` other Sentinels watching `name`
  // (they must agree before any of them fails the master over).
  absl::Status WaitPeers(const std::string& name, int count, absl::Duration timeout) const;
  // SENTINEL SET name down-after-milliseconds: from now on `name` is down
  // (SDOWN) after this long without a valid reply.
  absl::Status SetDownAfter(const std::string& name, absl::Duration down_after) const;
  // SENTINEL MASTER's field `field` for `name` ("ip", "config-epoch",
  // "down-after-milliseconds", ...).
  absl::StatusOr<std::string> MasterField(const std::string& name, const std::string& field) const;
  int port() const { return port_; }
  // With SentinelOptions::tls: its TLS port (0 otherwise), and that address
  // as a TLS endpoint.
  int tls_port() const { return tls_port_; }
  Endpoint tls_endpoint() const;

 private:
  Sentinel() = default;
  std::optional<TempDir> dir_;  // when SentinelOptions::dir is empty
  int port_ = 0;
  int tls_port_ = 0;
  std::string host_;
  std::string log_;
  std::unique_ptr<Process> process_;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_REPLICATION_H_
