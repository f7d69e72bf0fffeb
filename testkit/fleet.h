// A fleet of throw-away server processes on loopback, for tests, the bench
// and the chaos harness (the one fixture that starts real servers). The
// server is Debian's redis-server unless FleetOptions::server or
// $REDLOCK_SERVER names another (testkit/servers.h: valkey-8.0, valkey-9.1,
// redis-8.0).
//
//   absl::StatusOr<std::unique_ptr<Fleet>> fleet = Fleet::Start({.nodes = 5});
//   redlock::Options options;
//   options.nodes = (*fleet)->endpoints();
//   ...
//   (*fleet)->Stop(2);      // SIGSTOP: the node hangs, its sockets stay open
//   (*fleet)->Continue(2);  // SIGCONT
//   (*fleet)->Kill(3);      // SIGKILL, reaped; Start(3) brings it back on the same port
//
// Each node runs in its own directory under a fresh temp dir, on a free port
// of its loopback address, with no persistence unless `aof` is set. Nodes are
// started with PR_SET_PDEATHSIG=SIGKILL, so a crashed test binary leaves no
// orphan server behind; the destructor kills and reaps them and removes the
// temp dir. Start the fleet from a thread that outlives it (the death signal
// follows the thread that forked).
//
// Thread-safety: methods may be called from several threads; each node
// operation is serialised by an internal mutex.

#ifndef REDLOCK_TESTKIT_FLEET_H_
#define REDLOCK_TESTKIT_FLEET_H_

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/options.h"
#include "testkit/files.h"
#include "testkit/process.h"
#include "testkit/redis.h"
#include "testkit/servers.h"
#include "testkit/tls.h"

namespace redlock::testkit {

// Which certificate the nodes of a TLS fleet present.
enum class TlsServerCert {
  kValid,    // signed by the fleet's CA, for localhost and 127.0.0.1
  kExpired,  // the same, expired
  kOtherCa,  // signed by a CA nobody trusts
};

struct FleetOptions {
  int nodes = 5;
  // appendonly yes + appendfsync always (state survives kill -9).
  bool aof = false;
  // requirepass for every node.
  std::string password;
  // Extra redis-server arguments for every node ("--maxmemory", "1mb", ...).
  std::vector<std::string> extra_args;
  // Extra environment for every node (e.g. LD_PRELOAD of the clock shim).
  std::vector<std::pair<std::string, std::string>> env;
  // Per-node extra environment, indexed by node (may be shorter than nodes).
  std::vector<std::vector<std::pair<std::string, std::string>>> node_env;
  // Bind address per node; default 127.0.0.1 for every node. Only loopback
  // addresses (127.0.0.0/8) are accepted.
  std::vector<std::string> hosts;
  // Prepended to the command line, e.g. {"ip", "netns", "exec", "ns1"}.
  std::vector<std::string> command_prefix;
  // Which server (testkit/servers.h): "" for $REDLOCK_SERVER, else the
  // default (Debian's redis-7.0).
  std::string server;
  // The server binary, when not the named server's (a path, or a name
  // looked up on the PATH); "" for the named server's.
  std::string redis_server;
  // Per node (may be shorter than nodes): the node starts without its Lua
  // engine, so EVAL and SCRIPT LOAD answer "ERR Could not find scripting
  // engine 'lua'". Only a server whose Lua is a module can (valkey-9.1);
  // Start fails with kInvalidArgument for any other.
  std::vector<bool> without_lua;
  // How long a node may take to answer PING after start.
  absl::Duration start_timeout = absl::Seconds(10);
  // Enable DEBUG (for DEBUG SLEEP and friends) on every node.
  bool enable_debug = true;

  // TLS: every node listens on a TLS port only (--port 0 --tls-port P) and
  // endpoints() are rediss:// ones. The certificates (certificates()) are
  // made at start, with a throw-away CA, in the fleet's temp dir.
  bool tls = false;
  // With tls: nodes require a client certificate from the fleet's CA
  // (tls-auth-clients yes); else they take clients without one.
  bool tls_auth_clients = false;
  // With tls: the certificate the nodes present.
  TlsServerCert tls_server_cert = TlsServerCert::kValid;
  // With tls: use these certificates (another fleet's: replicas that must
  // trust their masters) instead of making new ones.
  std::optional<TestCertificates> tls_certificates;

  // Per node (may be shorter than nodes): the node has an ACL user denied
  // scripting (kScriptlessUser: `ACL SETUSER locker on >pw ~* &* +@all
  // -@scripting`), and endpoint(i) logs in as it, so a client meets a node
  // that refuses EVAL, EVALSHA and SCRIPT. The default user is unchanged
  // (Command() uses it).
  std::vector<bool> deny_scripting;

  // Every node runs in cluster mode (--cluster-enabled yes), its cluster bus
  // on a port of its own (--cluster-port), with this cluster-node-timeout
  // (how long a silent master has before its replica takes over). The
  // nodes start empty and apart: testkit/cluster.h makes them a cluster.
  bool cluster = false;
  absl::Duration cluster_node_timeout = absl::Seconds(1);
};

// The ACL user and password of FleetOptions::deny_scripting.
inline constexpr char kScriptlessUser[] = "locker";
inline constexpr char kScriptlessPassword[] = "pw";

class Fleet {
 public:
  static absl::StatusOr<std::unique_ptr<Fleet>> Start(FleetOptions options);
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  int size() const { return static_cast<int>(nodes_.size()); }
  const std::string& host(int i) const { return nodes_[i].host; }
  int port(int i) const { return nodes_[i].port; }
  // FleetOptions::cluster: node i's cluster bus port.
  int cluster_port(int i) const { return nodes_[i].cluster_port; }
  std::string address(int i) const;
  Endpoint endpoint(int i) const;
  std::vector<Endpoint> endpoints() const;
  // "host:port,host:port,..." as taken by --nodes and REDLOCK_NODES.
  std::string NodeList() const;
  // The pid of node i, or -1 when it is not running.
  pid_t pid(int i) const;
  const std::string& dir(int i) const { return nodes_[i].dir; }
  const std::string& root() const { return root_.path(); }
  const FleetOptions& options() const { return options_; }
  // With FleetOptions::tls: the certificates (null otherwise).
  const TestCertificates* certificates() const { return options_.tls ? &certificates_ : nullptr; }
  // What a client of this fleet needs in Options::tls: the fleet's CA, and
  // the client certificate (used by nodes that require one). Empty without
  // FleetOptions::tls.
  TlsOptions ClientTls() const;

  absl::Status Stop(int i);       // SIGSTOP
  absl::Status Continue(int i);   // SIGCONT
  absl::Status Kill(int i);       // SIGKILL and reap
  absl::Status StartNode(int i);  // start a killed node again on its port and dir
  absl::Status Restart(int i);    // Kill + StartNode

  // Replaces node i's per-node extra environment (used at its next start).
  void SetNodeEnv(int i, std::vector<std::pair<std::string, std::string>> env);

  // FleetOptions::without_lua for node i.
  bool WithoutLua(int i) const {
    return static_cast<size_t>(i) < options_.without_lua.size() &&
           options_.without_lua[static_cast<size_t>(i)];
  }
  // The server the nodes run (its name, binary, Sentinel, Lua module).
  const ServerBuild& server() const { return server_; }

  // FleetOptions::deny_scripting for node i.
  bool DeniesScripting(int i) const {
    return static_cast<size_t>(i) < options_.deny_scripting.size() &&
           options_.deny_scripting[static_cast<size_t>(i)];
  }

  // Runs one command on node i over a fresh blocking connection (AUTH with
  // the fleet's password first; testkit/redis.h RunCommand). Timeout applies
  // to connect and reply. On a TLS fleet it does not check the node's
  // certificate (tests give nodes broken ones on purpose).
  absl::StatusOr<RedisValue> Command(int i, const std::vector<std::string>& args,
                                     absl::Duration timeout = absl::Seconds(5)) const;
  // How many times node i has run `command` (lower case, as INFO
  // commandstats names it: "set", "evalsha"); -1 if it cannot be read.
  long long CommandCalls(int i, const std::string& command) const;
  // FLUSHALL on every running node.
  absl::Status FlushAll() const;

 private:
  struct Node {
    std::string host;
    int port = 0;
    int cluster_port = 0;  // FleetOptions::cluster: its bus
    std::string dir;
    std::unique_ptr<Process> process;  // null when not running
  };

  explicit Fleet(FleetOptions options) : options_(std::move(options)) {}
  absl::Status Launch(int i);
  absl::Status WaitReady(int i);
  absl::Status SignalNode(int i, int sig);
  void KillLocked(int i);

  FleetOptions options_;
  ServerBuild server_;
  TempDir root_{"redlock-fleet"};
  TestCertificates certificates_;
  std::vector<Node> nodes_;
  mutable std::mutex mu_;
};

// True under CI (CI=true): a test or scenario that cannot run for a missing
// tool must then fail, never skip.
bool UnderCi();

// Whether tests that need a server can run: OK when the selected server
// ($REDLOCK_SERVER, default redis-7.0; testkit/servers.h) is installed.
// Otherwise kFailedPrecondition, and the caller should skip; but under
// CI=true the absence is a failure (kNotFound), never a skip; and an unknown
// name is always a failure (kInvalidArgument). The message names the
// command that installs it.
absl::Status CheckRedisServerAvailable();

// Picks a free TCP port on `host` (bind to port 0, read it back, close).
absl::StatusOr<int> PickFreePort(const std::string& host);

// The nodes an example program runs against, into options->nodes:
// `nodes` (host:port,...), else $REDLOCK_NODES, else a fleet of
// `local_nodes` servers started here and kept in *fleet (stopped with it).
// Returns 0, or the exit code after printing "<program>: <error>" on stderr:
// 77 (skip) when redis-server is missing, 2 for a bad list, 1 otherwise.
int ExampleNodes(const char* program, std::string nodes, int local_nodes,
                 std::unique_ptr<Fleet>* fleet, Options* options);

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_FLEET_H_
