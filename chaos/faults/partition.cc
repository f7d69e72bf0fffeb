#include "chaos/faults/partition.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chaos/base/cleanup.h"
#include "common/enum_names.h"
#include "testkit/fleet.h"

namespace redlock::chaos {
namespace {

bool IsLoopback(const std::string& host) {
  in_addr addr{};
  return inet_pton(AF_INET, host.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
}

bool ValidTableName(const std::string& t) {
  if (t.empty() || t.size() > 64) return false;
  for (char c : t) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

absl::Status ValidateContext(const RuleContext& ctx) {
  if (!ValidTableName(ctx.table)) {
    return absl::InvalidArgumentError(absl::StrCat("bad nft table name \"", ctx.table, "\""));
  }
  for (int uid : ctx.client_uids) {
    if (uid <= 0)
      return absl::InvalidArgumentError(absl::StrCat("client uid ", uid, " must be > 0"));
  }
  for (const NetEndpoint& n : ctx.nodes) {
    if (!IsLoopback(n.host)) {
      return absl::InvalidArgumentError(
          absl::StrCat("node address ", n.host, " is not in 127.0.0.0/8"));
    }
    if (n.port <= 0 || n.port > 65535) return absl::InvalidArgumentError("bad node port");
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view CutDirectionName(CutDirection d) {
  static constexpr EnumName<CutDirection> kNames[] = {
      {CutDirection::kBoth, "both"},
      {CutDirection::kToNode, "to-node"},
      {CutDirection::kFromNode, "from-node"},
  };
  return NameOf(kNames, d);
}

std::string PartitionSpec::Describe() const {
  std::vector<std::string> parts;
  for (const LinkCut& c : cuts) {
    const char* arrow = c.direction == CutDirection::kBoth     ? "-x-"
                        : c.direction == CutDirection::kToNode ? "->x-"
                                                               : "-x<-";
    parts.push_back(absl::StrCat("c", c.client + 1, arrow, "n", c.node));
  }
  return absl::StrCat(name, ": ", parts.empty() ? "no cut" : absl::StrJoin(parts, " "));
}

FaultSite PartitionSpec::Site() const {
  std::set<int> nodes, clients;
  for (const LinkCut& c : cuts) {
    nodes.insert(c.node);
    clients.insert(c.client);
  }
  FaultSite site;
  site.nodes.assign(nodes.begin(), nodes.end());
  for (int c : clients) site.clients.push_back(absl::StrCat("c", c + 1));
  return site;
}

PartitionSpec IsolateNode(int node, int nodes, int clients) {
  PartitionSpec s;
  s.name = absl::StrCat("isolate n", node);
  (void)nodes;
  for (int c = 0; c < clients; ++c) s.cuts.push_back({c, node, CutDirection::kBoth});
  return s;
}

PartitionSpec SplitBrain(const std::vector<int>& side_a_nodes,
                         const std::vector<int>& side_a_clients, int nodes, int clients) {
  std::set<int> an(side_a_nodes.begin(), side_a_nodes.end());
  std::set<int> ac(side_a_clients.begin(), side_a_clients.end());
  PartitionSpec s;
  std::vector<std::string> a, b;
  for (int n = 0; n < nodes; ++n) (an.count(n) ? a : b).push_back(absl::StrCat("n", n));
  for (int c = 0; c < clients; ++c) (ac.count(c) ? a : b).push_back(absl::StrCat("c", c + 1));
  s.name = absl::StrCat("split {", absl::StrJoin(a, ","), "} | {", absl::StrJoin(b, ","), "}");
  for (int c = 0; c < clients; ++c) {
    for (int n = 0; n < nodes; ++n) {
      if (ac.count(c) != an.count(n)) s.cuts.push_back({c, n, CutDirection::kBoth});
    }
  }
  return s;
}

PartitionSpec FromViews(const std::vector<std::vector<int>>& views, int nodes) {
  PartitionSpec s;
  std::vector<std::string> names;
  for (size_t c = 0; c < views.size(); ++c) {
    std::set<int> v(views[c].begin(), views[c].end());
    std::vector<std::string> ns;
    for (int n : v) ns.push_back(absl::StrCat("n", n));
    names.push_back(absl::StrCat("c", c + 1, " sees {", absl::StrJoin(ns, ","), "}"));
    for (int n = 0; n < nodes; ++n) {
      if (!v.count(n)) s.cuts.push_back({static_cast<int>(c), n, CutDirection::kBoth});
    }
  }
  s.name = absl::StrJoin(names, "; ");
  return s;
}

PartitionSpec CutClient(int client, const std::vector<int>& nodes, CutDirection direction) {
  PartitionSpec s;
  std::vector<std::string> ns;
  for (int n : nodes) {
    s.cuts.push_back({client, n, direction});
    ns.push_back(absl::StrCat("n", n));
  }
  s.name = absl::StrCat("cut c", client + 1, " from {", absl::StrJoin(ns, ","), "} (",
                        CutDirectionName(direction), ")");
  return s;
}

absl::StatusOr<std::string> BuildNftSetup(const RuleContext& ctx) {
  absl::Status st = ValidateContext(ctx);
  if (!st.ok()) return st;
  std::string out = absl::StrCat("table ip ", ctx.table, " {\n");
  absl::StrAppend(&out,
                  "  chain rl_mark {\n    type filter hook output priority -150; policy accept;\n");
  for (size_t k = 0; k < ctx.client_uids.size(); ++k) {
    absl::StrAppend(&out, "    meta skuid ", ctx.client_uids[k], " ct mark set ", k + 1, "\n");
  }
  absl::StrAppend(&out, "  }\n");
  absl::StrAppend(
      &out, "  chain rl_cut {\n    type filter hook output priority 0; policy accept;\n  }\n");
  absl::StrAppend(&out, "}\n");
  return out;
}

absl::StatusOr<std::string> BuildNftCut(const RuleContext& ctx, const PartitionSpec& spec) {
  absl::Status st = ValidateContext(ctx);
  if (!st.ok()) return st;
  std::string out = BuildNftHeal(ctx);
  for (const LinkCut& c : spec.cuts) {
    if (c.client < 0 || c.client >= static_cast<int>(ctx.client_uids.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("cut names client ", c.client, " of ", ctx.client_uids.size()));
    }
    if (c.node < 0 || c.node >= static_cast<int>(ctx.nodes.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("cut names node ", c.node, " of ", ctx.nodes.size()));
    }
    const NetEndpoint& n = ctx.nodes[static_cast<size_t>(c.node)];
    std::string prefix = absl::StrCat("add rule ip ", ctx.table, " rl_cut ");
    if (c.direction != CutDirection::kFromNode) {
      absl::StrAppend(&out, prefix, "meta skuid ", ctx.client_uids[static_cast<size_t>(c.client)],
                      " ip daddr ", n.host, " tcp dport ", n.port, " drop comment \"c",
                      c.client + 1, " to n", c.node, "\"\n");
    }
    if (c.direction != CutDirection::kToNode) {
      absl::StrAppend(&out, prefix, "ct mark ", c.client + 1, " ip saddr ", n.host, " tcp sport ",
                      n.port, " drop comment \"n", c.node, " to c", c.client + 1, "\"\n");
    }
  }
  return out;
}

std::string BuildNftHeal(const RuleContext& ctx) {
  return absl::StrCat("flush chain ip ", ctx.table, " rl_cut\n");
}

std::string BuildNftTeardown(const RuleContext& ctx) {
  return absl::StrCat("delete table ip ", ctx.table, "\n");
}

absl::Status PartitionSupport(const std::vector<std::pair<std::string, std::string>>& tools) {
  std::string missing;
  if (geteuid() != 0) {
    missing = "partitions need root (network namespace and nft rules)";
  } else {
    for (const auto& [tool, flag] : tools) {
      absl::StatusOr<testkit::ProcessResult> r = RunCommand({tool, flag}, absl::Seconds(5));
      if (!r.ok() || r->exit_code() != 0) {
        missing = absl::StrCat("partitions need `", tool,
                               "` (Debian packages iproute2 and nftables; scripts/setup.sh "
                               "installs them)");
        break;
      }
    }
  }
  if (missing.empty()) return absl::OkStatus();
  // Under CI a scenario that cannot run is a failure, never a silent skip.
  if (testkit::UnderCi())
    return absl::NotFoundError(absl::StrCat(missing, "; CI=true makes that a failure"));
  return absl::FailedPreconditionError(missing);
}

std::string UniqueName(absl::string_view prefix) {
  static std::atomic<int> counter{0};
  return absl::StrCat(prefix, "-", getpid(), "-", ++counter);
}

absl::StatusOr<std::unique_ptr<NetNamespace>> NetNamespace::Create(std::string name) {
  std::unique_ptr<NetNamespace> ns(new NetNamespace(std::move(name)));
  RegisterNamespace(ns->name_);
  absl::StatusOr<testkit::ProcessResult> r =
      RunCommand({"ip", "netns", "add", ns->name_}, absl::Seconds(10));
  if (!r.ok() || r->exit_code() != 0) {
    UnregisterNamespace(ns->name_);
    ns->name_.clear();  // nothing to delete
    return absl::UnavailableError(
        absl::StrCat("ip netns add: ", r.ok() ? r->out : r.status().ToString()));
  }
  r = RunCommand({"ip", "-n", ns->name_, "link", "set", "lo", "up"}, absl::Seconds(10));
  if (!r.ok() || r->exit_code() != 0) {
    return absl::UnavailableError(
        absl::StrCat("ip link set lo up: ", r.ok() ? r->out : r.status().ToString()));
  }
  return ns;
}

NetNamespace::~NetNamespace() {
  if (saved_fd_ >= 0) {
    absl::Status s = Leave();
    (void)s;
  }
  if (name_.empty()) return;
  absl::StatusOr<testkit::ProcessResult> r =
      RunCommand({"ip", "netns", "del", name_}, absl::Seconds(10));
  if (!r.ok() || r->exit_code() != 0) {
    fprintf(stderr, "redlock-chaos: could not delete network namespace %s: %s\n", name_.c_str(),
            r.ok() ? r->out.c_str() : r.status().ToString().c_str());
    return;  // stays registered: the signal path retries
  }
  UnregisterNamespace(name_);
}

absl::Status NetNamespace::Enter() {
  if (saved_fd_ >= 0) return absl::FailedPreconditionError("already entered");
  int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (saved < 0) return absl::UnavailableError(absl::StrCat("open own netns: ", strerror(errno)));
  std::string path = absl::StrCat("/run/netns/", name_);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    close(saved);
    return absl::UnavailableError(absl::StrCat("open ", path, ": ", strerror(err)));
  }
  if (setns(fd, CLONE_NEWNET) != 0) {
    int err = errno;
    close(fd);
    close(saved);
    return absl::UnavailableError(absl::StrCat("setns ", name_, ": ", strerror(err)));
  }
  close(fd);
  saved_fd_ = saved;
  return absl::OkStatus();
}

absl::Status NetNamespace::Leave() {
  if (saved_fd_ < 0) return absl::OkStatus();
  int r = setns(saved_fd_, CLONE_NEWNET);
  int err = errno;
  close(saved_fd_);
  saved_fd_ = -1;
  if (r != 0) return absl::UnavailableError(absl::StrCat("setns back: ", strerror(err)));
  return absl::OkStatus();
}

absl::Status NetNamespace::RunNft(const std::string& script) const {
  absl::StatusOr<testkit::ProcessResult> r = RunCommand(
      {"ip", "netns", "exec", name_, "nft", "-f", "/dev/stdin"}, absl::Seconds(10), script);
  if (!r.ok()) return r.status();
  if (r->exit_code() != 0) {
    return absl::InternalError(
        absl::StrCat("nft failed (exit ", r->exit_code(), "): ", r->out, "\nscript:\n", script));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Partitioner>> Partitioner::Create(const NetNamespace* ns,
                                                                 RuleContext ctx,
                                                                 HistoryWriter* history) {
  absl::StatusOr<std::string> setup = BuildNftSetup(ctx);
  if (!setup.ok()) return setup.status();
  absl::Status s = ns->RunNft(*setup);
  if (!s.ok()) return s;
  return std::unique_ptr<Partitioner>(new Partitioner(ns, std::move(ctx), history));
}

Partitioner::~Partitioner() {
  absl::Status s = Heal();
  if (!s.ok()) fprintf(stderr, "redlock-chaos: heal: %s\n", s.ToString().c_str());
  s = ns_->RunNft(BuildNftTeardown(ctx_));
  if (!s.ok()) fprintf(stderr, "redlock-chaos: nft teardown: %s\n", s.ToString().c_str());
}

// One partition at a time: every start and stop share the key "net".
constexpr absl::string_view kPartitionKey = "net";

void Partitioner::StopActive() {
  if (active_) log_.Stop("partition", kPartitionKey, "healed");
  active_ = false;
}

absl::Status Partitioner::Apply(const PartitionSpec& spec) {
  absl::StatusOr<std::string> script = BuildNftCut(ctx_, spec);
  if (!script.ok()) return script.status();
  absl::Status s = ns_->RunNft(*script);
  if (!s.ok()) return s;
  StopActive();
  active_ = true;
  // The shape names the sides ("split {n0,n1,c1} | {n2,c2}"); the links cut
  // follow from it.
  log_.Start("partition", spec.Site(), spec.name, kPartitionKey);
  return absl::OkStatus();
}

absl::Status Partitioner::Heal() {
  absl::Status s = ns_->RunNft(BuildNftHeal(ctx_));
  if (!s.ok()) return s;
  StopActive();
  return absl::OkStatus();
}

}  // namespace redlock::chaos
