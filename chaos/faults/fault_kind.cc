#include "chaos/faults/fault_kind.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/enum_names.h"

namespace redlock::chaos {
namespace {

// Shortest plain decimal that reads back to `v` ("1.5", "3", "0.55"; never
// an exponent, which a duration would not parse).
std::string Num(double v) {
  for (int decimals = 0; decimals < 12; ++decimals) {
    std::string s = absl::StrFormat("%.*f", decimals, v);
    double back = 0;
    if (absl::SimpleAtod(s, &back) && back == v) return s;
  }
  return absl::StrFormat("%.12f", v);
}

absl::Status Bad(absl::string_view what, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " \"", text, "\": ", why));
}

uint64_t Draw(std::mt19937_64& rng, uint64_t lo, uint64_t hi) {
  if (hi <= lo) return lo;
  return lo + rng() % (hi - lo + 1);
}

double DrawReal(std::mt19937_64& rng, double lo, double hi) {
  if (hi <= lo) return lo;
  return lo + (hi - lo) * (static_cast<double>(rng() >> 11) * 0x1.0p-53);
}

}  // namespace

// ---- Properties ------------------------------------------------------------------

std::string HarnessPropertyName(int p) {
  if (p == kL1) return "L1";
  if (p == kS6) return "S6";
  if (p == kS7) return "S7";
  if (p == kS9) return "S9";
  if (p == kS8) return "S8";
  return absl::StrCat("S", p + 1);
}

int ParseHarnessProperty(absl::string_view name) {
  for (int p = 0; p < kNumHarnessProperties; ++p) {
    if (absl::EqualsIgnoreCase(name, HarnessPropertyName(p))) return p;
  }
  return -1;
}

std::string DescribeProperties(PropertySet set) {
  std::vector<std::string> names;
  for (int p = 0; p < kNumHarnessProperties; ++p) {
    if (set & Prop(p)) names.push_back(HarnessPropertyName(p));
  }
  return absl::StrJoin(names, ",");
}

// ---- Spans -----------------------------------------------------------------------

absl::Duration SpanScale::drift() const {
  redlock::Options drift;
  drift.clock_drift_factor = drift_factor;
  drift.clock_drift_floor = absl::Milliseconds(drift_floor_ms);
  return redlock::DriftAllowance(absl::Milliseconds(ttl_ms), drift);
}

absl::StatusOr<Span> Span::Parse(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t.empty()) return Bad("duration", text, "empty");
  Span out;
  // Split into signed terms at every + or - that is not the first character
  // and does not follow an exponent's 'e'.
  size_t begin = 0;
  for (size_t i = 1; i <= t.size(); ++i) {
    if (i < t.size() && !((t[i] == '+' || t[i] == '-') && t[i - 1] != 'e')) continue;
    absl::string_view term = absl::StripAsciiWhitespace(t.substr(begin, i - begin));
    begin = i;
    double sign = 1;
    if (absl::ConsumePrefix(&term, "+")) {
    } else if (absl::ConsumePrefix(&term, "-")) {
      sign = -1;
    }
    term = absl::StripAsciiWhitespace(term);
    auto factor = [&](absl::string_view suffix, double* into) -> std::optional<absl::Status> {
      if (!absl::EndsWith(term, suffix)) return std::nullopt;
      absl::string_view num = term.substr(0, term.size() - suffix.size());
      double v = 1;  // "ttl" alone: one ttl
      if (!num.empty() && (!absl::SimpleAtod(num, &v) || !std::isfinite(v))) {
        return Bad("duration", text, absl::StrCat("expected a number before \"", suffix, "\""));
      }
      *into += sign * v;
      return absl::OkStatus();
    };
    if (auto s = factor("ttl", &out.ttl)) {
      if (!s->ok()) return *s;
      continue;
    }
    if (auto s = factor("drift", &out.drift)) {
      if (!s->ok()) return *s;
      continue;
    }
    absl::Duration d;
    if (term == "0") continue;
    if (term.empty() || !absl::ParseDuration(term, &d) || d == absl::InfiniteDuration()) {
      return Bad("duration", text,
                 "expected e.g. 250ms, 1.5s, 1.2ttl (of the ttl), 4drift (of the drift "
                 "allowance) or a sum such as 1ttl+500ms");
    }
    out.ms += sign * absl::ToDoubleMilliseconds(d);
  }
  return out;
}

std::string Span::ToString() const {
  std::vector<std::string> terms;
  if (ttl != 0) terms.push_back(absl::StrCat(Num(ttl), "ttl"));
  if (drift != 0) terms.push_back(absl::StrCat(Num(drift), "drift"));
  if (ms != 0) {
    double a = std::fabs(ms);
    if (a >= 1000 && std::fmod(a, 100) == 0) {
      terms.push_back(absl::StrCat(Num(ms / 1000), "s"));
    } else if (a < 1) {
      terms.push_back(absl::StrCat(Num(ms * 1000), "us"));
    } else {
      terms.push_back(absl::StrCat(Num(ms), "ms"));
    }
  }
  if (terms.empty()) return "0";
  std::string out = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    absl::StrAppend(&out, terms[i][0] == '-' ? "" : "+", terms[i]);
  }
  return out;
}

absl::Duration Span::Resolve(const SpanScale& scale) const {
  return absl::Microseconds(std::llround(ms * 1000)) +
         absl::Milliseconds(static_cast<double>(scale.ttl_ms)) * ttl + scale.drift() * drift;
}

// ---- Parameters ------------------------------------------------------------------

std::string ParamText::ToString() const {
  if (!pick.empty()) return absl::StrCat("[", absl::StrJoin(pick, ", "), "]");
  if (!lo.empty() || !hi.empty()) return absl::StrCat(lo, "..", hi);
  return value;
}

ParamText ParamText::Parse(absl::string_view text) {
  ParamText p;
  absl::string_view t = absl::StripAsciiWhitespace(text);
  if (absl::ConsumePrefix(&t, "[") && absl::ConsumeSuffix(&t, "]")) {
    for (absl::string_view item : absl::StrSplit(t, ',', absl::SkipWhitespace())) {
      p.pick.emplace_back(absl::StripAsciiWhitespace(item));
    }
    return p;
  }
  size_t dots = t.find("..");
  if (dots != absl::string_view::npos) {
    p.lo = std::string(absl::StripAsciiWhitespace(t.substr(0, dots)));
    p.hi = std::string(absl::StripAsciiWhitespace(t.substr(dots + 2)));
    return p;
  }
  p.value = std::string(t);
  return p;
}

absl::StatusOr<ParamValue> ParseParamValue(const ParamSpec& spec, absl::string_view text,
                                           const SpanScale& scale) {
  ParamValue v;
  v.type = spec.type;
  v.text = std::string(text);
  const std::string what = absl::StrCat("parameter \"", spec.name, "\"");
  switch (spec.type) {
    case ParamType::kSpan: {
      absl::StatusOr<Span> s = Span::Parse(text);
      if (!s.ok()) return Bad(what, text, s.status().message());
      v.span = s->Resolve(scale);
      break;
    }
    case ParamType::kInt:
      if (!absl::SimpleAtoi(text, &v.integer)) return Bad(what, text, "expected an integer");
      v.number = static_cast<double>(v.integer);
      break;
    case ParamType::kNumber:
      if (!absl::SimpleAtod(text, &v.number) || !std::isfinite(v.number)) {
        return Bad(what, text, "expected a number");
      }
      break;
    case ParamType::kChoice: {
      if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
        return Bad(what, text, absl::StrCat("expected one of ", absl::StrJoin(spec.choices, ", ")));
      }
      v.choice = std::string(text);
      break;
    }
    case ParamType::kBool:
      if (!absl::SimpleAtob(text, &v.flag)) return Bad(what, text, "expected true or false");
      break;
  }
  // Bounds (spans compared as resolved with this scale).
  auto below = [&](const std::string& bound, bool lower) -> absl::Status {
    if (bound.empty()) return absl::OkStatus();
    absl::StatusOr<ParamValue> b =
        ParseParamValue({.name = spec.name, .type = spec.type}, bound, scale);
    if (!b.ok()) return absl::OkStatus();
    bool out = false;
    if (spec.type == ParamType::kSpan) out = lower ? v.span < b->span : v.span > b->span;
    if (spec.type == ParamType::kInt || spec.type == ParamType::kNumber) {
      out = lower ? v.number < b->number : v.number > b->number;
    }
    if (out)
      return Bad(what, text, absl::StrCat("must be ", lower ? "at least " : "at most ", bound));
    return absl::OkStatus();
  };
  absl::Status s = below(spec.min, true);
  if (s.ok()) s = below(spec.max, false);
  if (!s.ok()) return s;
  return v;
}

const ParamValue& FaultInstance::param(const std::string& name) const {
  static const ParamValue kNone;
  auto it = params.find(name);
  return it == params.end() ? kNone : it->second;
}

std::string FaultInstance::SiteName() const {
  std::vector<std::string> parts;
  for (int n : nodes) parts.push_back(absl::StrCat("n", n));
  for (int c : clients) parts.push_back(absl::StrCat("c", c + 1));
  return absl::StrJoin(parts, ",");
}

// ---- Targets ---------------------------------------------------------------------

namespace {

// The modes written as one word ("any" and "random K" are kRandom).
constexpr EnumName<TargetSel::Mode> kTargetWords[] = {
    {TargetSel::Mode::kAll, "all"},
    {TargetSel::Mode::kMajority, "majority"},
    {TargetSel::Mode::kMinority, "minority"},
    {TargetSel::Mode::kMarker, "marker"},
};

}  // namespace

absl::StatusOr<TargetSel> TargetSel::Parse(absl::string_view text, bool clients) {
  const char* what = clients ? "clients" : "nodes";
  absl::string_view t = absl::StripAsciiWhitespace(text);
  TargetSel s;
  // all for both; majority and minority for nodes only, marker for clients.
  if (std::optional<Mode> m = ValueOf(kTargetWords, t);
      m.has_value() && (*m == Mode::kAll || (*m == Mode::kMarker) == clients)) {
    return TargetSel{*m, {}, 1, 1};
  }
  if (t == "any") return Random(1, 1);
  if (absl::ConsumePrefix(&t, "random")) {
    ParamText range = ParamText::Parse(t);
    int lo = 0, hi = 0;
    const std::string& a = range.value.empty() ? range.lo : range.value;
    const std::string& b = range.value.empty() ? range.hi : range.value;
    if (!absl::SimpleAtoi(a, &lo) || !absl::SimpleAtoi(b, &hi) || lo < 1 || hi < lo) {
      return Bad(what, text, "expected \"random K\" or \"random K..M\" with 1 <= K <= M");
    }
    return Random(lo, hi);
  }
  // A list: "[0, 2]", "0,2", "n2", "c1, c3".
  absl::ConsumePrefix(&t, "[");
  absl::ConsumeSuffix(&t, "]");
  s.mode = Mode::kList;
  for (absl::string_view item : absl::StrSplit(t, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    int index = 0;
    bool named = absl::ConsumePrefix(&item, clients ? "c" : "n");
    if (!absl::SimpleAtoi(item, &index) || index < (clients && named ? 1 : 0)) {
      return Bad(what, text,
                 clients ? "expected client names (c1, c2, ...), all, any, random K or marker"
                         : "expected node indexes (0, 2 or n0, n2), all, majority, minority, "
                           "any or random K");
    }
    // Clients are named from c1; bare numbers are indexes from 0 for nodes
    // and names from 1 for clients (c1 == 1).
    s.list.push_back(clients ? index - 1 : index);
  }
  if (s.list.empty()) return Bad(what, text, "empty list");
  return s;
}

std::string TargetSel::ToString(bool clients) const {
  if (mode == Mode::kRandom) {
    return lo == hi ? (lo == 1 ? "any" : absl::StrCat("random ", lo))
                    : absl::StrCat("random ", lo, "..", hi);
  }
  if (mode != Mode::kList) return std::string(NameOf(kTargetWords, mode, ""));  // kNone: ""
  std::vector<std::string> names;
  for (int i : list) names.push_back(clients ? absl::StrCat("c", i + 1) : absl::StrCat("n", i));
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

absl::StatusOr<std::vector<int>> TargetSel::Resolve(int count, int marker_client,
                                                    std::mt19937_64& rng) const {
  std::vector<int> all(static_cast<size_t>(count));
  std::iota(all.begin(), all.end(), 0);
  auto pick = [&](int k) {
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<size_t>(std::clamp(k, 0, count)));
    std::sort(all.begin(), all.end());
    return all;
  };
  switch (mode) {
    case Mode::kNone:
      return std::vector<int>{};
    case Mode::kAll:
      return all;
    case Mode::kMajority:
      return pick(count / 2 + 1);
    case Mode::kMinority:
      return pick(std::max(1, (count - 1) / 2));
    case Mode::kRandom:
      return pick(
          static_cast<int>(Draw(rng, static_cast<uint64_t>(lo), static_cast<uint64_t>(hi))));
    case Mode::kMarker:
      if (marker_client < 0) {
        return absl::FailedPreconditionError(
            "clients: marker needs a fault triggered by a client's marker (on: ...)");
      }
      return std::vector<int>{marker_client};
    case Mode::kList:
      break;
  }
  for (int i : list) {
    if (i < 0 || i >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat("target ", i, " out of range (", count, " in this run)"));
    }
  }
  return list;
}

// ---- Topologies ------------------------------------------------------------------

namespace {

constexpr EnumName<Topology> kTopologies[] = {
    {Topology::kDirect, "direct"},
    {Topology::kSharedProxies, "shared-proxies"},
    {Topology::kPerClientProxies, "per-client-proxies"},
    {Topology::kNamespace, "namespace"},
    {Topology::kSentinelDiscovery, "sentinel-discovery"},
};

}  // namespace

absl::string_view TopologyName(Topology t) { return NameOf(kTopologies, t); }

absl::StatusOr<Topology> ParseTopology(absl::string_view name) {
  if (std::optional<Topology> t = ValueOf(kTopologies, name)) return *t;
  return Bad("topology", name, absl::StrCat("expected ", NameList(kTopologies, ", ", " or ")));
}

// ---- Registry --------------------------------------------------------------------

const std::vector<const FaultKind*>& AllFaultKinds() {
  static const std::vector<const FaultKind*>* kinds = [] {
    static FaultKindList owned;
    RegisterNodeFaults(owned);
    RegisterClockFaults(owned);
    RegisterNetworkFaults(owned);
    RegisterReplicationFaults(owned);
    RegisterClientFaults(owned);
    RegisterServerFaults(owned);
    auto* v = new std::vector<const FaultKind*>();
    for (const auto& k : owned) v->push_back(k.get());
    return v;
  }();
  return *kinds;
}

const FaultKind* FindFaultKind(absl::string_view name) {
  for (const FaultKind* k : AllFaultKinds()) {
    if (k->name() == name) return k;
  }
  return nullptr;
}

std::string FaultKindColor(absl::string_view name) {
  const FaultKind* k = FindFaultKind(name);
  return k == nullptr ? "" : k->info().color;
}

// ---- Templates -------------------------------------------------------------------

namespace {

const ParamSpec* FindParam(const KindInfo& info, absl::string_view name) {
  for (const ParamSpec& p : info.params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> ParamNames(const KindInfo& info) {
  std::vector<std::string> names;
  for (const ParamSpec& p : info.params) names.push_back(p.name);
  return names;
}

}  // namespace

absl::Status ValidateTemplate(const FaultTemplate& t) {
  const FaultKind* kind = FindFaultKind(t.kind);
  if (kind == nullptr) {
    std::vector<std::string> names;
    for (const FaultKind* k : AllFaultKinds()) names.push_back(k->name());
    return Bad("fault kind", t.kind,
               absl::StrCat("unknown; known kinds: ", absl::StrJoin(names, ", ")));
  }
  const KindInfo& info = kind->info();
  if (!info.takes_nodes && !t.nodes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", t.kind, "\" acts on no nodes: remove \"nodes\""));
  }
  if (!info.takes_clients && !t.clients.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", t.kind, "\" acts on no clients: remove \"clients\""));
  }
  const SpanScale scale;
  for (const auto& [name, text] : t.params) {
    const ParamSpec* spec = FindParam(info, name);
    if (spec == nullptr) {
      std::vector<std::string> names = ParamNames(info);
      return Bad("parameter", name,
                 absl::StrCat("unknown for \"", t.kind, "\"; it takes ",
                              names.empty() ? "none" : absl::StrJoin(names, ", ")));
    }
    std::vector<std::string> values = text.pick;
    if (!text.value.empty()) values.push_back(text.value);
    if (!text.lo.empty() || !text.hi.empty()) {
      if (spec->type != ParamType::kSpan && spec->type != ParamType::kInt &&
          spec->type != ParamType::kNumber) {
        return Bad(absl::StrCat("parameter \"", name, "\""), text.ToString(),
                   "a range needs a duration or a number");
      }
      values.push_back(text.lo);
      values.push_back(text.hi);
    }
    if (values.empty()) return Bad(absl::StrCat("parameter \"", name, "\""), "", "empty");
    for (const std::string& v : values) {
      absl::StatusOr<ParamValue> pv = ParseParamValue(*spec, v, scale);
      if (!pv.ok()) return pv.status();
    }
  }
  for (const ParamSpec& p : info.params) {
    if (p.default_value.empty() && !t.params.count(p.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", t.kind, "\" needs parameter \"", p.name, "\" (", p.help, ")"));
    }
  }
  const bool has_duration = t.duration_lo.has_value() || t.until_end;
  if (info.lasting && !has_duration) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", t.kind, "\" lasts: give \"for\" (a duration, a range lo..hi, or \"run\")"));
  }
  if (!info.lasting && has_duration) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", t.kind, "\" is an instant fault: remove \"for\""));
  }
  if (t.duration_lo && t.duration_hi &&
      t.duration_lo->Resolve(scale) > t.duration_hi->Resolve(scale)) {
    return absl::InvalidArgumentError("\"for\": the range's low end is above its high end");
  }
  if (t.duration_lo && t.duration_lo->Resolve(scale) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("\"for\": a duration cannot be negative");
  }
  return absl::OkStatus();
}

absl::Status CheckSupported(const FaultTemplate& t, const RunShape& shape) {
  const FaultKind* kind = FindFaultKind(t.kind);
  if (kind == nullptr) return ValidateTemplate(t);
  std::string why = kind->Unsupported(shape);
  if (!why.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("\"", t.kind, "\" cannot act in this run: ", why));
  }
  return absl::OkStatus();
}

absl::StatusOr<FaultInstance> ResolveTemplate(const FaultTemplate& t, int nodes, int clients,
                                              const SpanScale& scale, int marker_client,
                                              std::mt19937_64& rng) {
  absl::Status v = ValidateTemplate(t);
  if (!v.ok()) return v;
  const FaultKind* kind = FindFaultKind(t.kind);
  const KindInfo& info = kind->info();
  FaultInstance f;
  f.kind = kind;
  f.marker_client = marker_client;
  auto targets = [&](const TargetSel& given, const std::string& def, bool is_clients, int count,
                     std::vector<int>* out) -> absl::Status {
    TargetSel sel = given;
    if (sel.empty()) {
      absl::StatusOr<TargetSel> d = TargetSel::Parse(def.empty() ? "any" : def, is_clients);
      if (!d.ok()) return d.status();
      sel = *d;
    }
    absl::StatusOr<std::vector<int>> r = sel.Resolve(count, marker_client, rng);
    if (!r.ok()) return r.status();
    *out = *std::move(r);
    return absl::OkStatus();
  };
  if (info.takes_nodes) {
    absl::Status s = targets(t.nodes, info.nodes_default, false, nodes, &f.nodes);
    if (!s.ok()) return s;
  }
  if (info.takes_clients) {
    absl::Status s = targets(t.clients, info.clients_default, true, clients, &f.clients);
    if (!s.ok()) return s;
  }
  for (const ParamSpec& spec : info.params) {
    auto it = t.params.find(spec.name);
    ParamText text = it == t.params.end() ? ParamText::Parse(spec.default_value) : it->second;
    std::string chosen = text.value;
    if (!text.pick.empty()) {
      chosen = text.pick[Draw(rng, 0, text.pick.size() - 1)];
    } else if (!text.lo.empty()) {
      absl::StatusOr<ParamValue> lo = ParseParamValue(spec, text.lo, scale);
      absl::StatusOr<ParamValue> hi = ParseParamValue(spec, text.hi, scale);
      if (!lo.ok()) return lo.status();
      if (!hi.ok()) return hi.status();
      if (spec.type == ParamType::kSpan) {
        // Drawn in milliseconds of the resolved range.
        double ms = DrawReal(rng, absl::ToDoubleMilliseconds(lo->span),
                             absl::ToDoubleMilliseconds(hi->span));
        chosen = Span::Ms(std::round(ms)).ToString();
      } else if (spec.type == ParamType::kInt) {
        chosen = absl::StrCat(static_cast<int64_t>(
            lo->integer +
            static_cast<int64_t>(Draw(
                rng, 0, static_cast<uint64_t>(std::max<int64_t>(0, hi->integer - lo->integer))))));
      } else {
        chosen = Num(DrawReal(rng, lo->number, hi->number));
      }
    }
    absl::StatusOr<ParamValue> pv = ParseParamValue(spec, chosen, scale);
    if (!pv.ok()) return pv.status();
    f.params[spec.name] = *std::move(pv);
  }
  if (t.until_end) {
    f.duration = absl::InfiniteDuration();
  } else if (t.duration_lo) {
    absl::Duration lo = t.duration_lo->Resolve(scale);
    absl::Duration hi = t.duration_hi ? t.duration_hi->Resolve(scale) : lo;
    f.duration = absl::Milliseconds(
        std::round(DrawReal(rng, absl::ToDoubleMilliseconds(lo), absl::ToDoubleMilliseconds(hi))));
  }
  return f;
}

FaultTemplate ConcreteTemplate(const FaultInstance& f) {
  FaultTemplate t;
  t.kind = f.kind->name();
  if (f.kind->info().takes_nodes) t.nodes = TargetSel::List(f.nodes);
  if (f.kind->info().takes_clients) t.clients = TargetSel::List(f.clients);
  for (const auto& [name, v] : f.params) t.params[name] = ParamText::Parse(v.text);
  if (f.kind->info().lasting) {
    if (f.duration == absl::InfiniteDuration()) {
      t.until_end = true;
    } else {
      t.duration_lo = Span::Ms(absl::ToDoubleMilliseconds(f.duration));
    }
  }
  return t;
}

std::string DescribeTemplate(const FaultTemplate& t) {
  std::string out = t.kind;
  if (!t.nodes.empty()) absl::StrAppend(&out, " nodes ", t.nodes.ToString(false));
  if (!t.clients.empty()) absl::StrAppend(&out, " clients ", t.clients.ToString(true));
  for (const auto& [name, v] : t.params) absl::StrAppend(&out, " ", name, "=", v.ToString());
  if (t.until_end) {
    absl::StrAppend(&out, " for the run");
  } else if (t.duration_lo) {
    absl::StrAppend(&out, " for ", t.duration_lo->ToString(),
                    t.duration_hi && !(*t.duration_hi == *t.duration_lo)
                        ? absl::StrCat("..", t.duration_hi->ToString())
                        : "");
  }
  return out;
}

}  // namespace redlock::chaos
