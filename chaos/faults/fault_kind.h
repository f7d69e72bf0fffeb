// chaos/faults/fault_kind.h: every kind of fault the chaos harness injects,
// each one unit.
//
// A fault kind (a clock jump, a kill and restart, a proxy black hole, a
// Sentinel cut off from its peers, ...) is a FaultKind: its name (what the
// history, the scenario files and the timeline call it), a one-line summary,
// whether it lasts (injected, then healed after a duration) or is an instant,
// what it acts on (nodes, clients), its parameters with their types, defaults
// and the ranges the explorer draws from, which run shapes (topologies)
// support it, which properties it may break in a given configuration (what
// the documentation allows, so that a violation of any other property is a
// finding), how to inject it, how to heal it, and its colour on the timeline.
//
// The kinds live in one file per family (chaos/kinds/node_faults.cc,
// clock_faults.cc, network_faults.cc, replication_faults.cc,
// client_faults.cc, server_faults.cc), above the run they act through
// (chaos/run/run.h), and register themselves in their family's
// Register*Faults function (AllFaultKinds, fault_kind.cc, calls each family
// once: declared here, so this file and the run need not see them). Adding a kind touches its
// family file and its test, nothing else: the scenario files, the explorer, the checker's fault
// lists and the timeline all work from the registry.
//
//   const FaultKind* k = FindFaultKind("clock_jump");
//   FaultTemplate t;                        // as written in a scenario file
//   t.kind = "clock_jump";
//   t.nodes = TargetSel::List({2});
//   t.params["by"] = "3ttl";
//   REDLOCK_RETURN_IF_ERROR(ValidateTemplate(t, shape));
//   FaultInstance f = ...;                  // Resolve(t, run, ...) at injection
//
// Durations in scenario files may be absolute ("250ms", "1.5s") or relative
// to the run's lease: "1.2ttl" (of the first client's ttl) or "4drift" (of
// the drift allowance ttl * drift_factor + drift_floor), so a scenario keeps its
// meaning when its ttl changes.
//
// Thread-safety: the registry and the kinds are immutable after start-up;
// Inject and Heal run on the scenario thread only.

#ifndef REDLOCK_CHAOS_FAULTS_FAULT_KIND_H_
#define REDLOCK_CHAOS_FAULTS_FAULT_KIND_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/options.h"

namespace redlock::chaos {

class Run;

// ---- Properties ------------------------------------------------------------------

// The harness's properties: S1..S4 of the checker (chaos/check/checker.h), S5
// leftover keys and L1 recovery (chaos/run/expectation.h), then the lock
// family's, from the checker too: S6 at most K holders (semaphore), S7
// leader terms (election), and S9 (a stale fenced write seen by a newer
// holder; S8 is the fair lock's first come, first served, on its own branch:
// once both are in, S8 takes index 8 and S9 index 9). Indexes are fixed (histories and reports
// carry them in this order); new properties go after the existing ones.
inline constexpr int kS1 = 0, kS2 = 1, kS3 = 2, kS4 = 3, kS5 = 4, kL1 = 5, kS6 = 6, kS7 = 7,
                     kS9 = 8;
inline constexpr int kNumHarnessProperties = 9;
std::string HarnessPropertyName(int p);  // "S1".."S5", "L1", "S6", "S7", "S9"
// "S1" -> kS1 ...; -1 when unknown.
int ParseHarnessProperty(absl::string_view name);

// A set of properties, bit p for property p.
using PropertySet = uint32_t;
inline constexpr PropertySet Prop(int p) { return PropertySet{1} << p; }
inline constexpr PropertySet kAllProperties = (PropertySet{1} << kNumHarnessProperties) - 1;
// "S1,S3" ("" for none).
std::string DescribeProperties(PropertySet set);

// ---- Spans: durations a person writes ----------------------------------------

// What relative spans are relative to.
struct SpanScale {
  int64_t ttl_ms = 1000;
  double drift_factor = 0.01;
  int64_t drift_floor_ms = absl::ToInt64Milliseconds(redlock::Options().clock_drift_floor);
  // ttl * drift_factor + drift_floor, by the library's rule
  // (redlock::DriftAllowance).
  absl::Duration drift() const;
};

struct Span {
  // ms + ttl * (the ttl) + drift * (the drift allowance).
  double ms = 0;
  double ttl = 0;
  double drift = 0;

  static Span Ms(double v) { return {v, 0, 0}; }
  static Span Ttl(double f) { return {0, f, 0}; }
  static Span Drift(double f) { return {0, 0, f}; }
  // A sum of terms: "250ms", "1.5s", "2m", "0", "-3s", "1.2ttl", "4drift",
  // "-1.5ttl", "1ttl+500ms", "2ttl-100ms".
  static absl::StatusOr<Span> Parse(absl::string_view text);
  // The shortest text Parse() reads back to the same span.
  std::string ToString() const;
  absl::Duration Resolve(const SpanScale& scale) const;
  bool operator==(const Span& o) const { return ms == o.ms && ttl == o.ttl && drift == o.drift; }
};

// ---- Parameters ------------------------------------------------------------------

enum class ParamType {
  kSpan,    // a Span
  kInt,     // an integer
  kNumber,  // a floating-point number
  kChoice,  // one of ParamSpec::choices
  kBool,    // true / false
};

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kSpan;
  std::string default_value;  // as text; "" = required
  // The range the explorer draws from ("lo..hi" for spans and numbers, or a
  // subset of the choices); "" = the default only.
  std::string explore;
  std::vector<std::string> choices;  // kChoice
  // Bounds checked when a file is read (text, empty = unbounded; spans are
  // compared after resolving with the default scale).
  std::string min, max;
  std::string help;
};

// A parameter value as written: one value ("60ms"), a range to draw from
// uniformly at injection ("10ms..60ms"), or a list to pick from ("[a, b]",
// given here as its items).
struct ParamText {
  std::string value;                               // single value, or empty
  std::string lo, hi;                              // a range
  std::vector<std::string> pick;                   // a list
  std::string ToString() const;                    // "60ms", "10ms..60ms", "[a, b]"
  static ParamText Parse(absl::string_view text);  // from the forms above
};

// A resolved value.
struct ParamValue {
  ParamType type = ParamType::kSpan;
  absl::Duration span;
  int64_t integer = 0;
  double number = 0;
  std::string choice;
  bool flag = false;
  std::string text;  // as it was resolved, for labels ("3ttl" -> "3ttl (3s)")
};

// ---- Targets ---------------------------------------------------------------------

// Which nodes (or clients) a fault acts on, as written.
//   [0, 2]        exactly these (clients: [c1, c3])
//   all           every one
//   majority      a random majority, N/2+1
//   minority      a random minority, (N-1)/2 (at least 1)
//   random 2      2 distinct at random; "random 1..2": 1 or 2
//   marker        (clients) the client whose marker triggered the fault
//   any           one at random ("random 1")
struct TargetSel {
  enum class Mode { kNone, kList, kAll, kMajority, kMinority, kRandom, kMarker };
  Mode mode = Mode::kNone;
  std::vector<int> list;  // indexes (clients: c1 = 0)
  int lo = 1, hi = 1;     // kRandom

  static TargetSel None() { return {}; }
  static TargetSel List(std::vector<int> l) { return {Mode::kList, std::move(l), 1, 1}; }
  static TargetSel Random(int lo, int hi) { return {Mode::kRandom, {}, lo, hi}; }
  bool empty() const { return mode == Mode::kNone; }
  // `clients`: names are c1.. and "marker" is allowed.
  static absl::StatusOr<TargetSel> Parse(absl::string_view text, bool clients);
  std::string ToString(bool clients) const;
  // Resolves against `count` nodes or clients. kInvalidArgument for an index
  // out of range, kFailedPrecondition for kMarker without a marker client.
  absl::StatusOr<std::vector<int>> Resolve(int count, int marker_client,
                                           std::mt19937_64& rng) const;
};

// ---- A fault in a schedule -------------------------------------------------------

// A fault as written in a scenario file (or generated by the explorer):
// targets and parameters may still be random.
struct FaultTemplate {
  std::string kind;
  TargetSel nodes;
  TargetSel clients;
  std::map<std::string, ParamText> params;
  // Lasting kinds: how long until healed ("2s", "1.1ttl..1.6ttl"); absent
  // for instants; `until_end`: healed only when the run ends.
  std::optional<Span> duration_lo, duration_hi;
  bool until_end = false;
  int line = 0;  // where it was read (0: not from a file)
};

// A fault being injected: everything resolved.
struct FaultInstance {
  const class FaultKind* kind = nullptr;
  std::vector<int> nodes;
  std::vector<int> clients;
  std::map<std::string, ParamValue> params;
  absl::Duration duration = absl::ZeroDuration();  // lasting kinds; Infinite: until the end
  int marker_client = -1;                          // of the marker that triggered it
  std::string marker_resource;                     // its resource
  // Client faults: a target client was inside its critical section when the
  // fault began (set by Inject).
  bool in_use = false;
  // Filled by Inject: the label recorded in the history, and what Heal needs.
  std::string label;
  std::vector<std::string> keys;  // nemesis keys of what was started
  absl::Duration saved;           // e.g. the offset before a jump

  const ParamValue& param(const std::string& name) const;
  absl::Duration span(const std::string& name) const { return param(name).span; }
  int64_t integer(const std::string& name) const { return param(name).integer; }
  double number(const std::string& name) const { return param(name).number; }
  const std::string& choice(const std::string& name) const { return param(name).choice; }
  bool flag(const std::string& name) const { return param(name).flag; }
  // "n2", "n0,n1,c2" (the site's name).
  std::string SiteName() const;
};

// ---- The shape of a run ------------------------------------------------------------

enum class Topology {
  kDirect,            // clients connect to the nodes
  kSharedProxies,     // one fault proxy per node, shared by every client
  kPerClientProxies,  // one proxy per client-node link (per-client faults)
  kNamespace,         // private network namespace, nft partitions (root)
  // Replicated nodes only: clients name each node by the Sentinels and its
  // master name (redis+sentinel://) and follow a failover themselves.
  kSentinelDiscovery,
};
absl::string_view TopologyName(Topology t);  // "direct", "shared-proxies", ...
absl::StatusOr<Topology> ParseTopology(absl::string_view name);

// What a fault kind needs to know about a run to say whether it can act in
// it and what it may break.
struct RunShape {
  int nodes = 5;
  int clients = 3;
  Topology topology = Topology::kDirect;
  bool netns = false;  // inside a private network namespace
  // Clients reach different subsets of the nodes (per-client views): a
  // minority of nodes down can then leave a client without a majority.
  bool partial_views = false;
  bool aof = false;
  bool node_clock_shim = false;
  bool client_clock_shim = false;
  bool tls = false;
  int replicas = 0;
  int sentinels = 0;
  bool fencing = false;          // every client fences
  bool durability = false;       // every client has the durability vote
  bool external_client = false;  // a client the protocol drives (chaos/clients)
  bool extends = false;          // clients extend their leases
  bool permits = false;          // some client holds a semaphore's permits (S6)
  bool leaders = false;          // some client campaigns for leadership (S7)
  SpanScale scale;               // of the first client
  absl::Duration node_timeout = absl::Milliseconds(50);  // of the first client
  absl::Duration guard = absl::Milliseconds(100);        // of the first client
};

// ---- The kind --------------------------------------------------------------------

struct KindInfo {
  std::string name;
  std::string family;  // "node", "clock", "network", "replication", "client", "server"
  std::string summary;
  bool lasting = false;
  // What it acts on: nodes, clients or both (a kind with neither acts on
  // the run as a whole). `*_default` is used when a file leaves it out and
  // by the explorer.
  bool takes_nodes = false;
  bool takes_clients = false;
  std::string nodes_default;    // e.g. "random 1", "minority"
  std::string clients_default;  // e.g. "any"
  std::vector<ParamSpec> params;
  // The explorer: how often it draws this kind (0: never) and the range of
  // its duration ("200ms..1.5s").
  int explore_weight = 0;
  std::string explore_duration;
  std::string color;  // on the timeline
  // Healed no earlier than its duration, even when the run's end heals
  // everything: healing it early is another fault (a node killed without
  // persistence and restarted before a lease is over can grant that lease's
  // lock again, which a delayed restart promises it cannot).
  bool heal_on_time = false;
};

class FaultKind {
 public:
  virtual ~FaultKind() = default;
  virtual const KindInfo& info() const = 0;
  const std::string& name() const { return info().name; }

  // "" when the kind can act in runs of this shape; otherwise why not
  // ("needs the node clock shim").
  virtual std::string Unsupported(const RunShape& shape) const = 0;
  // The properties this fault may break in such a run, as the documentation
  // says (README, section Safety): a violation of any other property while
  // only such faults acted is a finding. `f` is resolved (a clock jump within
  // the drift allowance breaks nothing; beyond it, S1 and, without fencing,
  // S3).
  virtual PropertySet MayViolate(const RunShape& shape, const FaultInstance& f) const = 0;
  // True when the configuration must keep granting while this fault lasts
  // (a minority of nodes down, one stale Sentinel of three): the recovery
  // check (L1) runs with such faults still in place.
  virtual bool Tolerated(const RunShape& shape, const FaultInstance& f) const { return false; }

  // Injects (and records in the run's nemesis log). Lasting kinds are healed
  // by Heal after f.duration; the runner heals whatever is left at the end.
  virtual absl::Status Inject(Run& run, FaultInstance& f) const = 0;
  virtual absl::Status Heal(Run& run, FaultInstance& f) const { return absl::OkStatus(); }
};

// ---- The registry ----------------------------------------------------------------

// Every kind, in registration order (family by family).
const std::vector<const FaultKind*>& AllFaultKinds();
const FaultKind* FindFaultKind(absl::string_view name);
// The timeline colour of a nemesis fault name ("" when no kind has it).
std::string FaultKindColor(absl::string_view name);

// The family registration functions (chaos/kinds/*_faults.cc).
using FaultKindList = std::vector<std::unique_ptr<const FaultKind>>;
void RegisterNodeFaults(FaultKindList& out);
void RegisterClockFaults(FaultKindList& out);
void RegisterNetworkFaults(FaultKindList& out);
void RegisterReplicationFaults(FaultKindList& out);
void RegisterClientFaults(FaultKindList& out);
void RegisterServerFaults(FaultKindList& out);

// ---- Checking and resolving templates ---------------------------------------

// Parses one parameter value of `spec` (a single value, not a range).
absl::StatusOr<ParamValue> ParseParamValue(const ParamSpec& spec, absl::string_view text,
                                           const SpanScale& scale);

// Checks a template against its kind: known kind, known parameters with
// values of the right type within bounds, targets the kind takes, a duration
// exactly when the kind lasts. Messages name the field ("param \"by\": ...").
absl::Status ValidateTemplate(const FaultTemplate& t);
// ... and whether the kind can act in a run of `shape` (Unsupported).
absl::Status CheckSupported(const FaultTemplate& t, const RunShape& shape);

// Draws the random parts of `t`: targets, parameters (defaults filled in),
// the duration. `nodes`/`clients`: how many the run has.
absl::StatusOr<FaultInstance> ResolveTemplate(const FaultTemplate& t, int nodes, int clients,
                                              const SpanScale& scale, int marker_client,
                                              std::mt19937_64& rng);

// The template of a resolved instance (every value concrete): what the
// explorer records and writes into a scenario file.
FaultTemplate ConcreteTemplate(const FaultInstance& f);

// One line: "clock_jump n2 by=3ttl", "node_pause n1,n3 for 1.2s".
std::string DescribeTemplate(const FaultTemplate& t);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_FAULTS_FAULT_KIND_H_
