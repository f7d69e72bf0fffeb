#include "chaos/scenarios/scenario_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace redlock::chaos {
namespace {

// ---- Reading -------------------------------------------------------------------

// The error of one field: "<source>:<line>: <path>: <message>".
class Reader {
 public:
  explicit Reader(absl::string_view source) : source_(source) {}

  absl::Status Error(const YAML::Node& at, absl::string_view field, absl::string_view message) {
    const YAML::Mark m = at.Mark();
    std::string where = m.line >= 0 ? absl::StrCat(source_, ":", m.line + 1) : source_;
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", field.empty() ? "" : absl::StrCat(field, ": "), message));
  }

  // Every key of `map` must be in `known`; `field` names the map.
  absl::Status Keys(const YAML::Node& map, absl::string_view field,
                    const std::vector<std::string>& known) {
    if (!map.IsMap()) return Error(map, field, "expected a mapping (key: value lines)");
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return Error(kv.first, Join(field, key),
                     absl::StrCat("unknown field; expected one of ", absl::StrJoin(known, ", ")));
      }
    }
    return absl::OkStatus();
  }

  static std::string Join(absl::string_view a, absl::string_view b) {
    return a.empty() ? std::string(b) : absl::StrCat(a, ".", b);
  }

  absl::Status Str(const YAML::Node& n, absl::string_view field, std::string* out) {
    if (!n.IsScalar()) return Error(n, field, "expected a single value");
    *out = n.Scalar();
    return absl::OkStatus();
  }
  absl::Status Bool(const YAML::Node& n, absl::string_view field, bool* out) {
    if (!n.IsScalar() || !absl::SimpleAtob(n.Scalar(), out)) {
      return Error(n, field, absl::StrCat("expected true or false, not \"", Text(n), "\""));
    }
    return absl::OkStatus();
  }
  template <typename Int>
  absl::Status Integer(const YAML::Node& n, absl::string_view field, Int* out, int64_t lo,
                       int64_t hi) {
    int64_t v = 0;
    if (!n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), &v)) {
      return Error(n, field, absl::StrCat("expected an integer, not \"", Text(n), "\""));
    }
    if (v < lo || v > hi) return Error(n, field, absl::StrCat("must be in [", lo, ", ", hi, "]"));
    *out = static_cast<Int>(v);
    return absl::OkStatus();
  }
  absl::Status Real(const YAML::Node& n, absl::string_view field, double* out, double lo,
                    double hi) {
    if (!n.IsScalar() || !absl::SimpleAtod(n.Scalar(), out)) {
      return Error(n, field, absl::StrCat("expected a number, not \"", Text(n), "\""));
    }
    if (*out < lo || *out > hi)
      return Error(n, field, absl::StrCat("must be in [", lo, ", ", hi, "]"));
    return absl::OkStatus();
  }
  absl::Status Time(const YAML::Node& n, absl::string_view field, Span* out) {
    if (!n.IsScalar()) return Error(n, field, "expected a duration (250ms, 1.5s, 1.2ttl)");
    absl::StatusOr<Span> s = Span::Parse(n.Scalar());
    if (!s.ok()) return Error(n, field, s.status().message());
    *out = *s;
    return absl::OkStatus();
  }
  // An absolute duration in ms (client settings).
  absl::Status Millis(const YAML::Node& n, absl::string_view field, int64_t* out) {
    Span s;
    absl::Status st = Time(n, field, &s);
    if (!st.ok()) return st;
    if (s.ttl != 0 || s.drift != 0) return Error(n, field, "expected an absolute duration here");
    if (s.ms < 0) return Error(n, field, "must not be negative");
    *out = static_cast<int64_t>(s.ms);
    return absl::OkStatus();
  }
  absl::Status Properties(const YAML::Node& n, absl::string_view field, PropertySet* out) {
    std::vector<YAML::Node> items;
    if (n.IsScalar()) {
      if (n.Scalar() == "all") {
        *out = kAllProperties;
        return absl::OkStatus();
      }
      items.push_back(n);
    } else if (n.IsSequence()) {
      for (const auto& i : n) items.push_back(i);
    } else {
      return Error(n, field, "expected a list of properties ([S1, S3]) or all");
    }
    *out = 0;
    for (const YAML::Node& i : items) {
      int p = i.IsScalar() ? ParseHarnessProperty(i.Scalar()) : -1;
      if (p < 0) {
        return Error(i, field,
                     absl::StrCat("unknown property \"", Text(i),
                                  "\" (S1, S2, S3, S4, S5, L1, S6, S7, S9)"));
      }
      *out |= Prop(p);
    }
    return absl::OkStatus();
  }

  static std::string Text(const YAML::Node& n) {
    if (n.IsScalar()) return n.Scalar();
    std::stringstream s;
    s << n;
    return s.str();
  }

  // "[a, b]" or a scalar, as the text a template keeps.
  static std::string Flat(const YAML::Node& n) {
    if (n.IsSequence()) {
      std::vector<std::string> items;
      for (const auto& i : n) items.push_back(Text(i));
      return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
    }
    return Text(n);
  }

 private:
  std::string source_;
};

absl::Status ReadExpect(Reader& r, const YAML::Node& n, Expectation* e) {
  absl::Status s = r.Keys(n, "expect", {"clean", "found", "found_any", "min_grants"});
  if (!s.ok()) return s;
  *e = Expectation();
  e->clean = 0;
  if (n["clean"]) s = r.Properties(n["clean"], "expect.clean", &e->clean);
  if (s.ok() && n["found"]) s = r.Properties(n["found"], "expect.found", &e->violated_all);
  if (s.ok() && n["found_any"]) {
    s = r.Properties(n["found_any"], "expect.found_any", &e->violated_any);
  }
  if (s.ok() && n["min_grants"]) {
    s = r.Integer(n["min_grants"], "expect.min_grants", &e->min_grants, 0, 1000000);
  }
  if (!s.ok()) return s;
  if ((e->clean & (e->violated_all | e->violated_any)) != 0) {
    return r.Error(n, "expect", "a property cannot be both clean and found");
  }
  return absl::OkStatus();
}

absl::Status ReadSetup(Reader& r, const YAML::Node& n, ScenarioSetup* setup) {
  absl::Status s =
      r.Keys(n, "setup",
             {"topology", "nodes", "aof", "node_clock_shim", "client_clock_shim", "netns", "views",
              "tls", "replicas", "sentinels", "stalled", "duration", "quiet"});
  if (!s.ok()) return s;
  if (n["topology"]) {
    std::string t;
    s = r.Str(n["topology"], "setup.topology", &t);
    if (!s.ok()) return s;
    absl::StatusOr<Topology> top = ParseTopology(t);
    if (!top.ok()) return r.Error(n["topology"], "setup.topology", top.status().message());
    setup->topology = *top;
  }
  if (n["nodes"]) s = r.Integer(n["nodes"], "setup.nodes", &setup->nodes, 1, 15);
  if (s.ok() && n["aof"]) s = r.Bool(n["aof"], "setup.aof", &setup->aof);
  if (s.ok() && n["node_clock_shim"]) {
    s = r.Bool(n["node_clock_shim"], "setup.node_clock_shim", &setup->node_clock_shim);
  }
  if (s.ok() && n["client_clock_shim"]) {
    s = r.Bool(n["client_clock_shim"], "setup.client_clock_shim", &setup->client_clock_shim);
  }
  if (s.ok() && n["netns"]) s = r.Bool(n["netns"], "setup.netns", &setup->netns);
  if (s.ok() && n["tls"]) s = r.Bool(n["tls"], "setup.tls", &setup->tls);
  if (s.ok() && n["replicas"])
    s = r.Integer(n["replicas"], "setup.replicas", &setup->replicas, 0, 3);
  if (s.ok() && n["sentinels"]) {
    s = r.Integer(n["sentinels"], "setup.sentinels", &setup->sentinels, 0, 5);
  }
  if (s.ok() && n["stalled"]) {
    s = r.Integer(n["stalled"], "setup.stalled", &setup->stalled, 0, setup->nodes);
  }
  if (!s.ok()) return s;
  for (const char* key : {"duration", "quiet"}) {
    if (!n[key]) continue;
    Span span;
    s = r.Time(n[key], absl::StrCat("setup.", key), &span);
    if (!s.ok()) return s;
    if (span.ttl != 0 || span.drift != 0 || span.ms < 0) {
      return r.Error(n[key], absl::StrCat("setup.", key),
                     "expected an absolute, positive duration");
    }
    (std::string(key) == "duration" ? setup->budget : setup->quiet) = absl::Milliseconds(span.ms);
  }
  if (n["views"]) {
    const YAML::Node& v = n["views"];
    if (!v.IsSequence()) return r.Error(v, "setup.views", "expected a list of node lists");
    setup->views.clear();
    for (const auto& view : v) {
      absl::StatusOr<TargetSel> sel = TargetSel::Parse(Reader::Flat(view), false);
      if (!sel.ok() || sel->mode != TargetSel::Mode::kList) {
        return r.Error(view, "setup.views", "each view is a list of node indexes ([0, 1, 2])");
      }
      for (int i : sel->list) {
        if (i >= setup->nodes) {
          return r.Error(view, "setup.views",
                         absl::StrCat("node ", i, " does not exist (", setup->nodes, " nodes)"));
        }
      }
      setup->views.push_back(sel->list);
    }
  }
  return absl::OkStatus();
}

const std::vector<std::string> kClientFields = {
    "count",       "client",         "resources",    "ttl",
    "use",         "uses_per_lease", "guard",        "think",
    "pre_release", "retry",          "node_timeout", "drift_factor",
    "drift_floor", "fencing",        "durability",   "durability_timeout",
    "release",     "inspect_nodes",  "extend",       "primitive",
    "shared",      "permits",        "wait",         "fencing_shared_counter"};

absl::Status ReadClients(Reader& r, const YAML::Node& n, std::vector<ClientConfig>* out) {
  if (!n.IsSequence()) return r.Error(n, "clients", "expected a list of clients");
  out->clear();
  int index = 0;
  for (const auto& c : n) {
    ++index;
    const std::string field = absl::StrCat("clients[", index, "]");
    absl::Status s = r.Keys(c, field, kClientFields);
    if (!s.ok()) return s;
    ClientConfig cfg;
    int count = 1;
    auto f = [&](const char* key) { return absl::StrCat(field, ".", key); };
    if (c["count"]) s = r.Integer(c["count"], f("count"), &count, 1, 64);
    if (s.ok() && c["client"]) {
      std::string name;
      s = r.Str(c["client"], f("client"), &name);
      if (s.ok()) {
        // A broken variant of this library, or the client under test
        // (library, node-redlock, redis-py, an adapter command).
        absl::StatusOr<ClientVariant> v = ParseVariant(name);
        if (v.ok()) {
          cfg.variant = *v;
        } else if (name.empty()) {
          return r.Error(c["client"], f("client"), "empty");
        } else {
          cfg.client = name;
        }
      }
    }
    if (s.ok() && c["resources"]) {
      const YAML::Node& rs = c["resources"];
      cfg.resources.clear();
      if (rs.IsScalar()) {
        cfg.resources.push_back(rs.Scalar());
      } else if (rs.IsSequence()) {
        for (const auto& x : rs) cfg.resources.push_back(Reader::Text(x));
      }
      if (cfg.resources.empty()) return r.Error(rs, f("resources"), "expected resource names");
    }
    struct MsField {
      const char* key;
      int64_t* into;
    };
    for (const MsField& m :
         {MsField{"ttl", &cfg.ttl_ms}, MsField{"use", &cfg.use_ms}, MsField{"guard", &cfg.guard_ms},
          MsField{"think", &cfg.think_ms}, MsField{"pre_release", &cfg.pre_release_ms},
          MsField{"retry", &cfg.retry_ms}, MsField{"node_timeout", &cfg.node_timeout_ms},
          MsField{"durability_timeout", &cfg.durability_timeout_ms}, MsField{"wait", &cfg.wait_ms},
          MsField{"drift_floor", &cfg.drift_floor_ms}}) {
      if (s.ok() && c[m.key]) s = r.Millis(c[m.key], f(m.key), m.into);
    }
    if (s.ok() && cfg.ttl_ms < 10) return r.Error(c["ttl"], f("ttl"), "must be at least 10ms");
    if (s.ok() && c["uses_per_lease"]) {
      s = r.Integer(c["uses_per_lease"], f("uses_per_lease"), &cfg.uses_per_lease, 1, 1000);
    }
    if (s.ok() && c["drift_factor"]) {
      s = r.Real(c["drift_factor"], f("drift_factor"), &cfg.drift_factor, 0, 0.5);
    }
    if (s.ok() && c["fencing"]) s = r.Bool(c["fencing"], f("fencing"), &cfg.fencing);
    if (s.ok() && c["fencing_shared_counter"]) {
      s = r.Bool(c["fencing_shared_counter"], f("fencing_shared_counter"),
                 &cfg.fencing_shared_counter);
    }
    if (s.ok() && c["durability"]) {
      s = r.Integer(c["durability"], f("durability"), &cfg.durability_replicas, 0, 3);
    }
    if (s.ok() && c["release"]) s = r.Bool(c["release"], f("release"), &cfg.release);
    if (s.ok() && c["inspect_nodes"]) {
      s = r.Bool(c["inspect_nodes"], f("inspect_nodes"), &cfg.inspect_nodes);
    }
    if (s.ok() && c["extend"]) s = r.Bool(c["extend"], f("extend"), &cfg.extend);
    if (s.ok() && c["primitive"]) {
      std::string name;
      s = r.Str(c["primitive"], f("primitive"), &name);
      if (s.ok()) {
        absl::StatusOr<Primitive> p = ParsePrimitive(name);
        if (!p.ok()) return r.Error(c["primitive"], f("primitive"), p.status().message());
        cfg.primitive = *p;
      }
    }
    if (s.ok() && c["shared"]) s = r.Bool(c["shared"], f("shared"), &cfg.shared);
    if (s.ok() && c["permits"]) s = r.Integer(c["permits"], f("permits"), &cfg.permits, 1, 1024);
    if (!s.ok()) return s;
    if (cfg.shared && cfg.primitive != Primitive::kRwLock) {
      return r.Error(c["shared"], f("shared"), "a reader is of primitive: rwlock");
    }
    if (c["permits"] && cfg.primitive != Primitive::kSemaphore) {
      return r.Error(c["permits"], f("permits"), "permits are of primitive: semaphore");
    }
    if (cfg.variant == ClientVariant::kMajorityCount && cfg.primitive != Primitive::kSemaphore) {
      return r.Error(c["client"], f("client"),
                     "majority-count is a semaphore (primitive: semaphore)");
    }
    if (cfg.wait_ms > 0 && (cfg.client != "library" || cfg.variant != ClientVariant::kLibrary)) {
      return r.Error(c["wait"], f("wait"), "only the library's client waits");
    }
    if (cfg.primitive != Primitive::kMutex && cfg.client != "library") {
      return r.Error(c["primitive"], f("primitive"), "external clients are mutexes only");
    }
    for (int k = 0; k < count; ++k) out->push_back(cfg);
  }
  if (out->empty()) return r.Error(n, "clients", "at least one client");
  return absl::OkStatus();
}

const std::vector<std::string> kTriggerFields = {
    "at",     "repeat", "on",  "client", "lock_free", "since_start", "within", "otherwise", "delay",
    "settle", "times",  "gap", "until",  "until_any", "pick",        "faults", "after"};

// `n`: the fault's keys; `at`: the node errors point at (the entry, for an
// inline fault).
absl::Status ReadFault(Reader& r, const YAML::Node& n, const YAML::Node& at,
                       absl::string_view field, FaultTemplate* t) {
  if (!n.IsMap()) return r.Error(at, field, "expected a fault (fault: KIND, ...)");
  if (!n["fault"]) return r.Error(at, field, "missing \"fault\" (the kind)");
  absl::Status s = r.Str(n["fault"], absl::StrCat(field, ".fault"), &t->kind);
  if (!s.ok()) return s;
  t->line = at.Mark().line + 1;
  const FaultKind* kind = FindFaultKind(t->kind);
  if (kind == nullptr) {
    FaultTemplate probe;
    probe.kind = t->kind;
    return r.Error(n["fault"], absl::StrCat(field, ".fault"), ValidateTemplate(probe).message());
  }
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    const std::string f = absl::StrCat(field, ".", key);
    if (key == "fault") continue;
    if (key == "nodes" || key == "clients") {
      absl::StatusOr<TargetSel> sel = TargetSel::Parse(Reader::Flat(kv.second), key == "clients");
      if (!sel.ok()) return r.Error(kv.second, f, sel.status().message());
      (key == "nodes" ? t->nodes : t->clients) = *sel;
      continue;
    }
    if (key == "for") {
      std::string text;
      s = r.Str(kv.second, f, &text);
      if (!s.ok()) return s;
      if (text == "run") {
        t->until_end = true;
        continue;
      }
      ParamText range = ParamText::Parse(text);
      for (const auto& [part, into] :
           {std::pair{range.value.empty() ? range.lo : range.value, &t->duration_lo},
            std::pair{range.value.empty() ? range.hi : range.value, &t->duration_hi}}) {
        absl::StatusOr<Span> span = Span::Parse(part);
        if (!span.ok()) return r.Error(kv.second, f, span.status().message());
        *into = *span;
      }
      continue;
    }
    // Anything else is a parameter of the kind.
    bool known = false;
    std::vector<std::string> names;
    for (const ParamSpec& p : kind->info().params) {
      known = known || p.name == key;
      names.push_back(p.name);
    }
    if (!known) {
      return r.Error(
          kv.first, f,
          absl::StrCat("unknown field: \"", t->kind, "\" takes fault, nodes, clients, for",
                       names.empty() ? "" : absl::StrCat(" and ", absl::StrJoin(names, ", ")),
                       "; an entry's own fields are ", absl::StrJoin(kTriggerFields, ", ")));
    }
    t->params[key] = ParamText::Parse(Reader::Flat(kv.second));
  }
  s = ValidateTemplate(*t);
  if (!s.ok()) return r.Error(at, field, s.message());
  return absl::OkStatus();
}

absl::Status ReadEntry(Reader& r, const YAML::Node& n, int index, ScheduleEntry* e) {
  const std::string field = absl::StrCat("schedule[", index, "]");
  if (!n.IsMap()) return r.Error(n, field, "expected a schedule entry");
  e->line = n.Mark().line + 1;
  Trigger& t = e->trigger;
  int triggers = (n["at"] ? 1 : 0) + (n["repeat"] ? 1 : 0) + (n["on"] ? 1 : 0);
  if (triggers != 1) {
    return r.Error(n, field, "exactly one of \"at\", \"repeat\" or \"on\" says when");
  }
  auto f = [&](const char* key) { return absl::StrCat(field, ".", key); };
  absl::Status s;
  // The entry's own keys; the rest belongs to its (single) fault.
  YAML::Node fault_map(YAML::NodeType::Map);
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    if (std::find(kTriggerFields.begin(), kTriggerFields.end(), key) == kTriggerFields.end()) {
      fault_map[kv.first] = kv.second;
    }
  }
  if (n["at"]) {
    t.type = Trigger::Type::kAt;
    s = r.Time(n["at"], f("at"), &t.at);
  } else if (n["repeat"]) {
    t.type = Trigger::Type::kRepeat;
    const YAML::Node& rep = n["repeat"];
    if (rep.IsMap()) {
      s = r.Keys(rep, f("repeat"), {"from"});
      if (s.ok() && rep["from"]) s = r.Time(rep["from"], f("repeat.from"), &t.at);
    } else if (!rep.IsScalar() || !(rep.Scalar() == "true" || rep.Scalar() == "yes")) {
      return r.Error(rep, f("repeat"), "expected true or {from: DURATION}");
    }
  } else {
    t.type = Trigger::Type::kOnMarker;
    s = r.Str(n["on"], f("on"), &t.marker);
  }
  if (!s.ok()) return s;
  if (n["client"]) {
    std::string c;
    s = r.Str(n["client"], f("client"), &c);
    if (!s.ok()) return s;
    absl::StatusOr<TargetSel> sel = TargetSel::Parse(c, true);
    if (!sel.ok() || sel->mode != TargetSel::Mode::kList || sel->list.size() != 1) {
      return r.Error(n["client"], f("client"), "expected one client name (c1, c2, ...)");
    }
    t.client = sel->list[0];
  }
  if (n["lock_free"]) s = r.Bool(n["lock_free"], f("lock_free"), &t.lock_free);
  if (s.ok() && n["since_start"]) s = r.Bool(n["since_start"], f("since_start"), &t.since_start);
  if (s.ok() && n["within"]) {
    t.within.emplace();
    s = r.Time(n["within"], f("within"), &*t.within);
  }
  if (s.ok() && n["delay"]) s = r.Time(n["delay"], f("delay"), &t.delay);
  if (s.ok() && n["settle"]) s = r.Time(n["settle"], f("settle"), &t.settle);
  if (s.ok() && n["times"]) s = r.Integer(n["times"], f("times"), &t.times, 0, 100000);
  if (s.ok() && n["gap"]) {
    std::string text;
    s = r.Str(n["gap"], f("gap"), &text);
    if (s.ok()) {
      ParamText g = ParamText::Parse(text);
      absl::StatusOr<Span> lo = Span::Parse(g.value.empty() ? g.lo : g.value);
      absl::StatusOr<Span> hi = Span::Parse(g.value.empty() ? g.hi : g.value);
      if (!lo.ok() || !hi.ok()) return r.Error(n["gap"], f("gap"), "expected a duration or lo..hi");
      t.gap_lo = *lo;
      t.gap_hi = *hi;
    }
  }
  if (s.ok() && n["after"]) {
    s = r.Integer(n["after"], f("after"), &t.after, 1, std::max(1, index - 1));
    if (s.ok() && index == 1)
      return r.Error(n["after"], f("after"), "the first entry follows none");
    t.after -= 1;  // written 1-based, like schedule[N] in the errors
  }
  if (s.ok() && n["until"]) s = r.Properties(n["until"], f("until"), &t.until);
  if (s.ok() && n["until_any"]) {
    if (n["until"]) return r.Error(n["until_any"], f("until_any"), "give until or until_any");
    s = r.Properties(n["until_any"], f("until_any"), &t.until);
    t.until_any = true;
  }
  if (s.ok() && n["otherwise"]) {
    const YAML::Node& o = n["otherwise"];
    s = r.Keys(o, f("otherwise"), {"heal", "within", "always"});
    if (s.ok() && o["heal"]) {
      const YAML::Node& h = o["heal"];
      if (h.IsScalar()) {
        t.otherwise_heal.push_back(h.Scalar());
      } else {
        for (const auto& k : h) t.otherwise_heal.push_back(Reader::Text(k));
      }
      for (const std::string& k : t.otherwise_heal) {
        if (FindFaultKind(k) == nullptr) {
          return r.Error(h, f("otherwise.heal"), absl::StrCat("unknown fault kind \"", k, "\""));
        }
      }
    }
    if (s.ok() && o["within"]) {
      t.retry_within.emplace();
      s = r.Time(o["within"], f("otherwise.within"), &*t.retry_within);
    }
    if (s.ok() && o["always"]) s = r.Bool(o["always"], f("otherwise.always"), &t.always);
  }
  if (s.ok() && n["pick"]) {
    std::string p;
    s = r.Str(n["pick"], f("pick"), &p);
    if (p == "all")
      e->pick = ScheduleEntry::Pick::kAll;
    else if (p == "one")
      e->pick = ScheduleEntry::Pick::kOne;
    else if (p == "cycle")
      e->pick = ScheduleEntry::Pick::kCycle;
    else
      return r.Error(n["pick"], f("pick"), "expected all, one or cycle");
  }
  if (!s.ok()) return s;
  if (t.type != Trigger::Type::kOnMarker) {
    for (const char* key : {"client", "lock_free", "since_start", "within", "otherwise", "delay"}) {
      if (n[key]) return r.Error(n[key], f(key), "only an \"on\" entry waits for markers");
    }
  }
  if (t.type == Trigger::Type::kAt && (n["times"] || n["gap"] || n["settle"])) {
    return r.Error(n, field, "an \"at\" entry happens once (no times, gap or settle)");
  }
  if (n["faults"]) {
    if (fault_map.size() > 0) {
      return r.Error(n, field, "give either one fault inline (fault: ...) or a \"faults\" list");
    }
    const YAML::Node& list = n["faults"];
    if (!list.IsSequence() || list.size() == 0) {
      return r.Error(list, f("faults"), "expected a list of faults");
    }
    int k = 0;
    for (const auto& item : list) {
      FaultTemplate ft;
      s = ReadFault(r, item, item, absl::StrCat(field, ".faults[", ++k, "]"), &ft);
      if (!s.ok()) return s;
      e->faults.push_back(std::move(ft));
    }
  } else {
    if (!fault_map["fault"]) {
      // Point at the first unknown key, if any: a typo in a trigger field.
      for (const auto& kv : fault_map) {
        return r.Error(
            kv.first, absl::StrCat(field, ".", kv.first.Scalar()),
            absl::StrCat("unknown field; an entry has ", absl::StrJoin(kTriggerFields, ", "),
                         " and its fault (fault: KIND, nodes, clients, for, "
                         "parameters)"));
      }
      return r.Error(n, field, "no fault (fault: KIND)");
    }
    FaultTemplate ft;
    s = ReadFault(r, fault_map, n, field, &ft);
    if (!s.ok()) return s;
    e->faults.push_back(std::move(ft));
  }
  return absl::OkStatus();
}

absl::StatusOr<Scenario> ParseNode(Reader& r, const YAML::Node& doc) {
  Scenario sc;
  absl::Status s = r.Keys(
      doc, "", {"name", "config", "summary", "quick", "expect", "setup", "clients", "schedule"});
  if (!s.ok()) return s;
  for (const char* required : {"name", "expect", "clients"}) {
    if (!doc[required]) return r.Error(doc, required, "missing (required)");
  }
  s = r.Str(doc["name"], "name", &sc.name);
  if (!s.ok()) return s;
  if (sc.name.empty() || sc.name.find_first_of(" /\t") != std::string::npos) {
    return r.Error(doc["name"], "name", "a name without spaces or slashes");
  }
  if (doc["config"]) s = r.Str(doc["config"], "config", &sc.config);
  if (s.ok() && doc["summary"]) s = r.Str(doc["summary"], "summary", &sc.summary);
  if (s.ok() && doc["quick"]) s = r.Bool(doc["quick"], "quick", &sc.quick);
  if (s.ok()) s = ReadExpect(r, doc["expect"], &sc.expect);
  if (s.ok() && doc["setup"]) s = ReadSetup(r, doc["setup"], &sc.setup);
  if (s.ok()) s = ReadClients(r, doc["clients"], &sc.setup.clients);
  if (!s.ok()) return s;
  while (!sc.summary.empty() && sc.summary.back() == '\n') sc.summary.pop_back();
  if (doc["schedule"]) {
    const YAML::Node& list = doc["schedule"];
    if (!list.IsSequence()) return r.Error(list, "schedule", "expected a list of entries");
    int i = 0;
    for (const auto& item : list) {
      ScheduleEntry e;
      s = ReadEntry(r, item, ++i, &e);
      if (!s.ok()) return s;
      sc.schedule.entries.push_back(std::move(e));
    }
  }
  s = ValidateScenario(sc);
  if (!s.ok()) return r.Error(doc, "", s.message());
  return sc;
}

}  // namespace

absl::StatusOr<Scenario> ParseScenario(absl::string_view text, absl::string_view source) {
  Reader r(source);
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", e.mark.line + 1, ":",
                                                   e.mark.column + 1, ": not valid YAML: ", e.msg));
  }
  if (!doc.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a scenario (name:, expect:, clients:, ...)"));
  }
  try {
    return ParseNode(r, doc);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", e.mark.line + 1, ": ", e.msg));
  }
}

absl::StatusOr<Scenario> ReadScenarioFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  absl::StatusOr<Scenario> s = ParseScenario(buf.str(), path);
  if (s.ok()) s->file = path;
  return s;
}

absl::StatusOr<std::vector<Scenario>> ReadScenarioDir(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".yaml") paths.push_back(entry.path().string());
  }
  if (ec) return absl::NotFoundError(absl::StrCat(dir, ": ", ec.message()));
  std::sort(paths.begin(), paths.end());
  std::vector<Scenario> out;
  std::set<std::string> names;
  for (const std::string& p : paths) {
    absl::StatusOr<Scenario> s = ReadScenarioFile(p);
    if (!s.ok()) return s.status();
    if (!names.insert(s->name).second) {
      return absl::InvalidArgumentError(absl::StrCat(p, ": name \"", s->name, "\" used twice"));
    }
    out.push_back(*std::move(s));
  }
  return out;
}

std::string DefaultScenarioDir() {
  if (const char* env = std::getenv("REDLOCK_CHAOS_SCENARIOS"); env != nullptr && *env) return env;
#ifdef REDLOCK_CHAOS_SCENARIO_DIR
  if (std::filesystem::is_directory(REDLOCK_CHAOS_SCENARIO_DIR)) return REDLOCK_CHAOS_SCENARIO_DIR;
#endif
  return "/usr/local/share/redlock/chaos/scenarios";
}

}  // namespace redlock::chaos
