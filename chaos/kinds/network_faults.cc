// The network family: faults of the TCP path between clients and nodes.
//
//   shared proxies (topology shared-proxies): one fault proxy per node, every
//     client behind it; latency, black holes, held bytes, resets, slow replies
//   per-client proxies (per-client-proxies): one proxy per client-node link;
//     a link taken down cuts one client from one node
//   nft rules in a private namespace (namespace): partitions of any shape
//
// The fault proxy (testkit/fault_proxy.h) does the byte work; the run
// records each fault on the nodes (and clients) it acts on.

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "chaos/kinds/kind_base.h"
#include "chaos/run/run.h"

namespace redlock::chaos {
namespace {

using faults::Add;
using faults::ChoiceParam;
using faults::SpanParam;

const ParamSpec kDirection = faults::ChoiceParam(
    "direction", "both", "[to-server, to-client, both]", {"to-server", "to-client", "both"},
    "which bytes: requests (to-server), replies (to-client)");

std::vector<Direction> Directions(const std::string& choice) {
  if (choice == "to-server") return {Direction::kToServer};
  if (choice == "to-client") return {Direction::kToClient};
  return {Direction::kToServer, Direction::kToClient};
}

// `fixed`, else the directions of the "direction" parameter.
std::vector<Direction> Directions(const FaultInstance& f, std::optional<Direction> fixed) {
  return fixed ? std::vector<Direction>{*fixed} : Directions(f.choice("direction"));
}

KindInfo NetworkKind(KindInfo info, int acts = faults::kOnNodes) {
  return faults::InFamily("network", acts, std::move(info));
}

// A proxy fault: `spec(f)` in the directions of the "direction" parameter
// (or `fixed` when the kind has none), on every target node, cleared when
// healed.
faults::KindSpec ProxyKind(KindInfo info, std::function<FaultSpec(Run&, const FaultInstance&)> spec,
                           std::optional<Direction> fixed = std::nullopt) {
  if (info.nodes_default.empty()) info.nodes_default = "random 1..2";
  info = NetworkKind(std::move(info));
  info.lasting = true;
  if (!fixed) info.params.insert(info.params.begin(), kDirection);
  const std::string name = info.name;
  return {.info = std::move(info),
          .unsupported = faults::NeedsProxies,
          .inject =
              [spec, fixed, name](Run& run, FaultInstance& f) {
                std::vector<Direction> dirs = Directions(f, fixed);
                for (int n : f.nodes) {
                  for (Direction d : dirs) {
                    absl::Status s = run.ProxyFault(n, d, spec(run, f), name);
                    if (!s.ok()) return s;
                  }
                }
                return absl::OkStatus();
              },
          .heal =
              [fixed](Run& run, FaultInstance& f) {
                std::vector<Direction> dirs = Directions(f, fixed);
                for (int n : f.nodes) {
                  for (Direction d : dirs) run.ProxyClear(n, d);
                }
                return absl::OkStatus();
              }};
}

// A proxy fault that takes no parameter: `spec` as it is.
faults::KindSpec ProxyKind(KindInfo info, FaultSpec spec,
                           std::optional<Direction> fixed = std::nullopt) {
  return ProxyKind(
      std::move(info), [spec](Run&, const FaultInstance&) { return spec; }, fixed);
}

// Every client except those of `side_a`.
std::vector<int> Others(const std::vector<int>& side_a, int count) {
  std::vector<int> out;
  for (int k = 0; k < count; ++k) {
    if (std::find(side_a.begin(), side_a.end(), k) == side_a.end()) out.push_back(k);
  }
  return out;
}

absl::StatusOr<PartitionSpec> PartitionShape(Run& run, const FaultInstance& f) {
  const std::string& shape = f.choice("shape");
  const int nodes = run.num_nodes(), clients = run.num_clients();
  if (shape == "isolate") {
    PartitionSpec out;
    for (int n : f.nodes) {
      PartitionSpec one = IsolateNode(n, nodes, clients);
      out.cuts.insert(out.cuts.end(), one.cuts.begin(), one.cuts.end());
      out.name = out.name.empty() ? one.name : absl::StrCat(out.name, "; ", one.name);
    }
    return out;
  }
  if (shape == "split") {
    // The target nodes and clients on one side, the rest on the other.
    return SplitBrain(f.nodes, f.clients, nodes, clients);
  }
  if (shape == "views") {
    // Every client sees a majority of its own (any two majorities share a
    // node).
    std::vector<std::vector<int>> views;
    for (int k = 0; k < clients; ++k) {
      std::vector<int> all(static_cast<size_t>(nodes));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), run.rng());
      all.resize(static_cast<size_t>(nodes / 2 + 1));
      std::sort(all.begin(), all.end());
      views.push_back(all);
    }
    return FromViews(views, nodes);
  }
  // one-way: the target clients cut from the target nodes in one direction.
  const CutDirection d =
      f.choice("direction") == "to-server" ? CutDirection::kToNode : CutDirection::kFromNode;
  PartitionSpec out;
  out.name = "one-way";
  for (int k : f.clients) {
    PartitionSpec one = CutClient(k, f.nodes, d);
    out.cuts.insert(out.cuts.end(), one.cuts.begin(), one.cuts.end());
    out.name = absl::StrCat(out.name, "; ", one.name);
  }
  (void)Others;
  return out;
}

}  // namespace

void RegisterNetworkFaults(FaultKindList& out) {
  Add(out, ProxyKind({.name = "latency",
                      .summary = "every chunk delayed by `latency` + up to `jitter`, order kept",
                      .params = {SpanParam("latency", "30ms", "5ms..0.3ttl", "0", "fixed delay"),
                                 SpanParam("jitter", "0", "0..40ms", "0", "random extra, uniform")},
                      .explore_weight = 3,
                      .explore_duration = "300ms..2s",
                      .color = "#1f77b4"},
                     [](Run&, const FaultInstance& f) {
                       return FaultSpec::Latency(f.span("latency"), f.span("jitter"));
                     }));
  Add(out, ProxyKind(
               {.name = "slow_replies",
                .summary = "replies delayed around the clients' node timeout (`fraction` of "
                           "it, +-10 %): some votes arrive just in time, some just late",
                .params = {faults::NumberParam("fraction", "1", "0.6..1.4", "0", "10",
                                               "of the node timeout")},
                .explore_weight = 2,
                .explore_duration = "300ms..2s",
                .color = "#6baed6"},
               [](Run& run, const FaultInstance& f) {
                 // The node timeout is the first client's (RunShape).
                 absl::Duration t = run.shape().node_timeout * f.number("fraction");
                 return FaultSpec::Latency(t * 0.9, t * 0.2);
               },
               Direction::kToClient));
  Add(out, ProxyKind({.name = "blackhole",
                      .summary = "requests read and dropped: the node never sees them",
                      .explore_weight = 2,
                      .explore_duration = "200ms..1s",
                      .color = "#555555"},
                     FaultSpec::BlackHole(), Direction::kToServer));
  Add(out, ProxyKind({.name = "ack_loss",
                      .summary = "replies dropped: the node executes, the client never hears",
                      .explore_weight = 3,
                      .explore_duration = "200ms..1s",
                      .color = "#555555"},
                     FaultSpec::BlackHole(), Direction::kToClient));
  Add(out, ProxyKind({.name = "hold",
                      .summary = "bytes held and delivered late, in order, when healed (SETs that "
                                 "run after their attempt gave up)",
                      .explore_weight = 2,
                      .explore_duration = "200ms..1.5s",
                      .color = "#393b79"},
                     FaultSpec::Hold()));
  Add(out, ProxyKind({.name = "refuse",
                      .summary = "every open connection reset, and every new one reset at once, "
                                 "until healed",
                      .explore_weight = 1,
                      .explore_duration = "200ms..1s",
                      .color = "#e7ba52"},
                     FaultSpec::Reset(), Direction::kToServer));
  Add(out, ProxyKind({.name = "reset_after_reply",
                      .summary = "each connection reset (RST) right after a reply was forwarded: "
                                 "the node executed, the next request finds the connection gone",
                      .explore_weight = 2,
                      .explore_duration = "200ms..1s",
                      .color = "#d6a01f"},
                     FaultSpec::ResetAfterDelivery(), Direction::kToClient));
  Add(out,
      ProxyKind({.name = "slice",
                 .summary = "bytes delivered in slices of `bytes` with `interval` between them",
                 .params = {faults::IntParam("bytes", "1", "1..8", "1", ""),
                            SpanParam("interval", "1ms", "0..2ms", "0", "pause between slices")},
                 .explore_weight = 1,
                 .explore_duration = "200ms..1s",
                 .color = "#1f77b4"},
                [](Run&, const FaultInstance& f) {
                  return FaultSpec::Slice(static_cast<size_t>(f.integer("bytes")),
                                          f.span("interval"));
                }));

  Add(out, {.info = NetworkKind(
                {.name = "reset",
                 .summary = "RST on every open connection through the node's proxy, once",
                 .nodes_default = "random 1..2",
                 .explore_weight = 2,
                 .color = "#e7ba52"}),
            .unsupported = faults::NeedsProxies,
            .inject = [](Run& run, FaultInstance& f) {
              for (int n : f.nodes) {
                FaultProxy* p = run.proxy(n);
                if (p == nullptr) return absl::FailedPreconditionError("no proxy");
                p->ResetAll();
              }
              run.nemesis().Instant("reset", {.nodes = f.nodes}, "RST on every open connection");
              return absl::OkStatus();
            }});

  Add(out, {.info = NetworkKind(
                {.name = "link_down",
                 .summary = "the links between the target clients and nodes closed and refused "
                            "(per-client proxies), back up when healed",
                 .lasting = true,
                 .nodes_default = "random 1..2",
                 .explore_weight = 2,
                 .explore_duration = "300ms..2s",
                 .color = "#bcbd22"},
                faults::kOnNodes | faults::kOnClients),
            .unsupported = faults::NeedsLinks,
            .inject =
                [](Run& run, FaultInstance& f) {
                  for (int k : f.clients) {
                    for (int n : f.nodes) run.link(k, n)->Down();
                  }
                  f.keys.push_back(absl::StrCat("links ", f.SiteName()));
                  run.nemesis().Start("link_down",
                                      {.nodes = f.nodes,
                                       .clients =
                                           [&] {
                                             std::vector<std::string> c;
                                             for (int k : f.clients)
                                               c.push_back(Run::ClientName(k));
                                             return c;
                                           }()},
                                      "links closed", f.keys.back());
                  return absl::OkStatus();
                },
            .heal =
                [](Run& run, FaultInstance& f) {
                  const auto& views = run.setup().views;
                  for (int k : f.clients) {
                    for (int n : f.nodes) {
                      // A link outside the client's view stays down.
                      if (static_cast<size_t>(k) < views.size() &&
                          std::find(views[k].begin(), views[k].end(), n) == views[k].end()) {
                        continue;
                      }
                      absl::Status s = run.link(k, n)->Up();
                      if (!s.ok()) return s;
                    }
                  }
                  run.nemesis().Stop("link_down", f.keys.back(), "links up");
                  return absl::OkStatus();
                }});

  Add(out,
      {.info = NetworkKind(
           {.name = "partition",
            .summary = "nft rules in the run's namespace: `isolate` the target nodes, `split` "
                       "(target nodes and clients on one side), per-client majority `views`, "
                       "or `one-way` cuts of the target clients from the target nodes",
            .lasting = true,
            .params = {ChoiceParam("shape", "isolate", "[isolate, split, views, one-way]",
                                   {"isolate", "split", "views", "one-way"}, ""),
                       ChoiceParam("direction", "to-client", "[to-server, to-client]",
                                   {"to-server", "to-client"},
                                   "one-way: requests (to-server) or replies (to-client) lost")},
            .explore_weight = 3,
            .explore_duration = "500ms..2s",
            .color = "#bcbd22"},
           faults::kOnNodes | faults::kOnClients),
       .unsupported = [](const RunShape& s) -> std::string {
         return s.topology == Topology::kNamespace ? "" : "needs topology namespace (root)";
       },
       .inject =
           [](Run& run, FaultInstance& f) {
             absl::StatusOr<PartitionSpec> spec = PartitionShape(run, f);
             if (!spec.ok()) return spec.status();
             return run.partitioner()->Apply(*spec);
           },
       .heal = [](Run& run, FaultInstance&) { return run.partitioner()->Heal(); }});
}

}  // namespace redlock::chaos
