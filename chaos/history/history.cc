#include "chaos/history/history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/enum_names.h"
#include "nlohmann/json.hpp"

namespace redlock::chaos {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// ---- Field access without exceptions ----------------------------------------
//
// nlohmann::json throws on a type mismatch; every accessor checks the type
// first, so a hostile line is an error status, never an exception.

class FieldReader {
 public:
  explicit FieldReader(const Json& object) : object_(object) {}

  // Null counts as absent.
  const Json* Find(const char* key) const {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  absl::Status Int(const char* key, bool required, int64_t* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return required ? Missing(key) : absl::OkStatus();
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::InvalidArgumentError(absl::StrCat("field \"", key, "\" out of int64 range"));
      }
      *out = static_cast<int64_t>(u);
      return absl::OkStatus();
    }
    if (v->is_number_integer()) {
      *out = v->get<int64_t>();
      return absl::OkStatus();
    }
    return WrongType(key, "an integer");
  }

  absl::Status Uint(const char* key, std::optional<uint64_t>* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (v->is_number_unsigned()) {
      *out = v->get<uint64_t>();
      return absl::OkStatus();
    }
    return WrongType(key, "a non-negative integer");
  }

  absl::Status String(const char* key, bool required, std::string* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return required ? Missing(key) : absl::OkStatus();
    if (!v->is_string()) return WrongType(key, "a string");
    *out = v->get_ref<const std::string&>();
    return absl::OkStatus();
  }

  absl::Status Bool(const char* key, bool* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_boolean()) return WrongType(key, "a boolean");
    *out = v->get<bool>();
    return absl::OkStatus();
  }

  // An array whose every element `convert(element, &value)` accepts.
  template <typename T, typename Convert>
  absl::Status Array(const char* key, const char* what, std::vector<T>* out,
                     const Convert& convert) const {
    const Json* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_array()) return WrongType(key, what);
    out->clear();
    out->reserve(v->size());
    for (const Json& e : *v) {
      T x{};
      absl::Status s = convert(e, &x);
      if (!s.ok()) return s;
      out->push_back(std::move(x));
    }
    return absl::OkStatus();
  }

  // Integers in T's range.
  template <typename T>
  absl::Status IntArray(const char* key, std::vector<T>* out) const {
    return Array(key, "an array of integers", out, [key](const Json& e, T* x) {
      if (!e.is_number_integer()) return WrongType(key, "an array of integers");
      const bool in_range =
          e.is_number_unsigned()
              ? e.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
              : e.get<int64_t>() >= std::numeric_limits<T>::min() &&
                    e.get<int64_t>() <= std::numeric_limits<T>::max();
      if (!in_range) {
        return absl::InvalidArgumentError(
            absl::StrCat("field \"", key, "\" has an element out of range"));
      }
      *x = static_cast<T>(e.get<int64_t>());
      return absl::OkStatus();
    });
  }

  absl::Status StringArray(const char* key, std::vector<std::string>* out) const {
    return Array(key, "an array of strings", out, [key](const Json& e, std::string* x) {
      if (!e.is_string()) return WrongType(key, "an array of strings");
      *x = e.get<std::string>();
      return absl::OkStatus();
    });
  }

 private:
  static absl::Status Missing(const char* key) {
    return absl::InvalidArgumentError(absl::StrCat("missing field \"", key, "\""));
  }
  static absl::Status WrongType(const char* key, const char* want) {
    return absl::InvalidArgumentError(absl::StrCat("field \"", key, "\" must be ", want));
  }

  const Json& object_;
};

// Runs each step until the first error (Abseil 20220623 has no status macros).
#define REDLOCK_CHAOS_TRY(expr)                        \
  do {                                                 \
    absl::Status redlock_chaos_s = (expr);             \
    if (!redlock_chaos_s.ok()) return redlock_chaos_s; \
  } while (0)

constexpr EnumName<EventType> kEventTypes[] = {
    {EventType::kInvoke, "invoke"},   {EventType::kQueued, "queued"},
    {EventType::kGrant, "grant"},     {EventType::kFail, "fail"},
    {EventType::kUse, "use"},         {EventType::kRelease, "release"},
    {EventType::kExtend, "extend"},   {EventType::kNemesis, "nemesis"},
    {EventType::kFinal, "final"},     {EventType::kRun, "run"},
    {EventType::kUnknown, "unknown"},
};

constexpr EnumName<FaultPhase> kFaultPhases[] = {
    {FaultPhase::kStart, "start"},
    {FaultPhase::kStop, "stop"},
    {FaultPhase::kInstant, "instant"},
};

EventType TypeFromName(absl::string_view name) {
  return ValueOf(kEventTypes, name).value_or(EventType::kUnknown);
}

// ---- The mapping, written once ----------------------------------------------
//
// One table per record type lists its fields in the order a line has them:
// the JSON name, the member in the record and in the Event, whether a line
// must have it, when it is written, and what it is when a line lacks it.
// ToEvent, FormatEventLine and ParseEventLine all walk these tables; "t" and
// "type", which every event has, are outside them.

enum class Need { kOptional, kRequired };
// kUnlessDefault: left out of a line when it holds what it would be read
// back as when absent (an Event's default, or the derived default).
enum class Write { kAlways, kUnlessDefault };
// The value of an absent field: an Event's default, or another field's.
enum class Derived { kNone, kT, kEnd, kReadPlusOne };

template <typename R, typename T>
struct Field {
  const char* name;
  T R::*record;
  T Event::*event;
  Need need;
  Write write;
  Derived derived;
  absl::Status (*check)(const T&);  // may be null
};

template <typename R, typename T>
constexpr Field<R, T> F(const char* name, T R::*record, T Event::*event,
                        Need need = Need::kOptional, Write write = Write::kAlways,
                        Derived derived = Derived::kNone,
                        absl::Status (*check)(const T&) = nullptr) {
  return {name, record, event, need, write, derived, check};
}

absl::Status CheckMode(const std::string& mode) {
  if (mode.empty() || mode == "exclusive" || mode == "shared" || mode == "slot" ||
      mode == "leader" || mode == "fair") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("field \"mode\" must be \"exclusive\", \"shared\", \"slot\", \"leader\" or "
                   "\"fair\", not \"",
                   mode, "\""));
}

// An invoke's mode: "fair" (a fair lock's call), or absent.
absl::Status CheckInvokeMode(const std::string& mode) {
  if (mode.empty() || mode == "fair") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("an invoke's field \"mode\" must be \"fair\" or absent, not \"", mode, "\""));
}

constexpr Need kRequired = Need::kRequired;
constexpr Need kOptional = Need::kOptional;
constexpr Write kAlways = Write::kAlways;
constexpr Write kUnlessDefault = Write::kUnlessDefault;

// process, op, resource: every client event's.
template <typename R>
auto ClientFields() {
  return std::make_tuple(F("process", &R::process, &Event::process, kRequired),
                         F("op", &R::op, &Event::op, kRequired),
                         F("resource", &R::resource, &Event::resource, kRequired));
}

// One table per record type, found by overload: FieldsOf(static_cast<const R*>(nullptr)).

auto FieldsOf(const InvokeRecord*) {
  using R = InvokeRecord;
  return std::tuple_cat(
      ClientFields<R>(),
      std::make_tuple(F("ttl_ms", &R::ttl_ms, &Event::ttl_ms),
                      // A fair call's (absent otherwise).
                      F("mode", &R::mode, &Event::mode, kOptional, kUnlessDefault, Derived::kNone,
                        &CheckInvokeMode),
                      F("wait_ms", &R::wait_ms, &Event::wait_ms, kOptional, kUnlessDefault)));
}

auto FieldsOf(const QueuedRecord*) { return ClientFields<QueuedRecord>(); }

auto FieldsOf(const GrantRecord*) {
  using R = GrantRecord;
  return std::tuple_cat(
      ClientFields<R>(),
      std::make_tuple(
          F("token", &R::token, &Event::token, kRequired),
          F("start", &R::start, &Event::start, kOptional, kAlways, Derived::kT),
          F("valid_until", &R::valid_until, &Event::valid_until, kRequired),
          F("ttl_ms", &R::ttl_ms, &Event::ttl_ms), F("drift_ms", &R::drift_ms, &Event::drift_ms),
          F("nodes", &R::nodes, &Event::nodes),
          F("fencing_token", &R::fencing_token, &Event::fencing_token, kOptional, kUnlessDefault),
          // The lock family's (absent for a plain lock: old readers and old
          // histories keep their meaning).
          F("mode", &R::mode, &Event::mode, kOptional, kUnlessDefault, Derived::kNone, &CheckMode),
          F("permits", &R::permits, &Event::permits, kOptional, kUnlessDefault),
          F("slot", &R::slot, &Event::slot, kOptional, kUnlessDefault)));
}

auto FieldsOf(const FailRecord*) {
  using R = FailRecord;
  return std::tuple_cat(
      ClientFields<R>(),
      std::make_tuple(F("code", &R::code, &Event::code), F("error", &R::error, &Event::error),
                      F("outcome", &R::outcome, &Event::outcome, kOptional, kUnlessDefault)));
}

auto FieldsOf(const UseRecord*) {
  using R = UseRecord;
  return std::tuple_cat(
      ClientFields<R>(),
      std::make_tuple(
          F("token", &R::token, &Event::token, kRequired),
          F("begin", &R::begin, &Event::begin, kRequired),
          F("end", &R::end, &Event::end, kRequired), F("read", &R::read, &Event::read, kRequired),
          F("wrote", &R::wrote, &Event::wrote, kOptional, kAlways, Derived::kReadPlusOne),
          F("accepted", &R::accepted, &Event::accepted),
          F("write_at", &R::write_at, &Event::write_at, kOptional, kUnlessDefault, Derived::kEnd),
          F("fencing_token", &R::fencing_token, &Event::fencing_token, kOptional, kUnlessDefault),
          F("write", &R::write, &Event::write, kOptional, kUnlessDefault)));
}

auto FieldsOf(const ReleaseRecord*) {
  using R = ReleaseRecord;
  return std::tuple_cat(
      ClientFields<R>(),
      std::make_tuple(F("token", &R::token, &Event::token, kRequired),
                      F("end", &R::end, &Event::end, kOptional, kAlways, Derived::kT),
                      F("ok", &R::ok, &Event::ok)));
}

auto FieldsOf(const ExtendRecord*) {
  using R = ExtendRecord;
  return std::tuple_cat(
      ClientFields<R>(),
      std::make_tuple(F("token", &R::token, &Event::token, kRequired),
                      F("valid_until", &R::valid_until, &Event::valid_until, kRequired),
                      F("ok", &R::ok, &Event::ok)));
}

auto FieldsOf(const NemesisRecord*) {
  using R = NemesisRecord;
  return std::make_tuple(
      F("fault", &R::fault, &Event::fault, kRequired), F("target", &R::target, &Event::target),
      F("detail", &R::detail, &Event::detail), F("phase", &R::phase, &Event::phase),
      F("nodes", &R::nodes, &Event::nodes, kOptional, kUnlessDefault),
      F("clients", &R::clients, &Event::clients, kOptional, kUnlessDefault),
      F("color", &R::color, &Event::color, kOptional, kUnlessDefault));
}

auto FieldsOf(const FinalRecord*) {
  using R = FinalRecord;
  return std::make_tuple(F("resource", &R::resource, &Event::resource, kRequired),
                         F("counter", &R::counter, &Event::counter, kRequired),
                         F("initial", &R::initial, &Event::initial));
}

auto FieldsOf(const RunRecord*) {
  using R = RunRecord;
  return std::make_tuple(
      F("scenario", &R::scenario, &Event::scenario), F("seed", &R::seed, &Event::seed),
      F("config", &R::config, &Event::config), F("expected", &R::expected, &Event::expected),
      F("verdict", &R::verdict, &Event::verdict), F("why", &R::why, &Event::why),
      F("start", &R::start, &Event::start, kOptional, kAlways, Derived::kT),
      F("nodes", &R::nodes, &Event::nodes), F("clients", &R::clients, &Event::clients),
      F("violations", &R::violations, &Event::violations));
}

// Calls fn(fields) with the table of the record type of `type`; false for
// kUnknown.
template <typename... Records, typename Fn>
bool WithFieldsOf(EventType type, Fn& fn) {
  // The first record type whose kType is `type`, if any.
  return ((type == Records::kType && (fn(FieldsOf(static_cast<const Records*>(nullptr))), true)) ||
          ...);
}
template <typename Fn>
bool WithFields(EventType type, Fn&& fn) {
  return WithFieldsOf<InvokeRecord, QueuedRecord, GrantRecord, FailRecord, UseRecord, ReleaseRecord,
                      ExtendRecord, NemesisRecord, FinalRecord, RunRecord>(type, fn);
}

template <typename Tuple, typename Fn>
void ForEachField(const Tuple& fields, Fn&& fn) {
  std::apply([&](const auto&... f) { (fn(f), ...); }, fields);
}

// The value an absent field is read as.
template <typename T>
std::optional<T> DerivedValue(Derived derived, const Event& e) {
  if constexpr (std::is_same_v<T, int64_t>) {
    switch (derived) {
      case Derived::kT:
        return e.t;
      case Derived::kEnd:
        return e.end;
      case Derived::kReadPlusOne:
        return e.read == std::numeric_limits<int64_t>::max() ? e.read : e.read + 1;
      case Derived::kNone:
        break;
    }
  }
  return std::nullopt;
}

// True when `f` need not be written: it holds what an absent field reads as.
template <typename R, typename T>
bool LeftOut(const Field<R, T>& f, const Event& e) {
  if (f.write != Write::kUnlessDefault) return false;
  static const Event kDefaults;
  const T& v = e.*f.event;
  if (v == kDefaults.*f.event) return true;
  const std::optional<T> derived = DerivedValue<T>(f.derived, e);
  return derived.has_value() && v == *derived;
}

// Reading one field of a known type (FieldReader checks the JSON types).
absl::Status ReadValue(const FieldReader& r, const char* key, int64_t* out) {
  return r.Int(key, false, out);
}
absl::Status ReadValue(const FieldReader& r, const char* key, std::string* out) {
  return r.String(key, false, out);
}
absl::Status ReadValue(const FieldReader& r, const char* key, bool* out) {
  return r.Bool(key, out);
}
absl::Status ReadValue(const FieldReader& r, const char* key, std::optional<uint64_t>* out) {
  return r.Uint(key, out);
}
absl::Status ReadValue(const FieldReader& r, const char* key, uint64_t* out) {
  std::optional<uint64_t> v;
  REDLOCK_CHAOS_TRY(r.Uint(key, &v));
  *out = v.value_or(0);
  return absl::OkStatus();
}
absl::Status ReadValue(const FieldReader& r, const char* key, std::vector<int>* out) {
  return r.IntArray(key, out);
}
absl::Status ReadValue(const FieldReader& r, const char* key, std::vector<int64_t>* out) {
  return r.IntArray(key, out);
}
absl::Status ReadValue(const FieldReader& r, const char* key, std::vector<std::string>* out) {
  return r.StringArray(key, out);
}
absl::Status ReadValue(const FieldReader& r, const char* key, FaultPhase* out) {
  std::string phase = std::string(FaultPhaseName(*out));
  REDLOCK_CHAOS_TRY(r.String(key, false, &phase));
  if (std::optional<FaultPhase> p = ValueOf(kFaultPhases, phase)) {
    *out = *p;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("field \"", key, "\" must be \"",
                                                 NameList(kFaultPhases, "\", \"", "\" or \""),
                                                 "\", not \"", phase, "\""));
}

template <typename T>
void WriteValue(const char* key, const T& v, OrderedJson* j) {
  (*j)[key] = v;
}
void WriteValue(const char* key, const std::optional<uint64_t>& v, OrderedJson* j) {
  if (v.has_value()) (*j)[key] = *v;
}
void WriteValue(const char* key, FaultPhase v, OrderedJson* j) {
  (*j)[key] = std::string(FaultPhaseName(v));
}

template <typename R>
Event FromRecord(const R& r) {
  Event e;
  e.type = R::kType;
  e.type_name = std::string(EventTypeName(e.type));
  e.t = r.t;
  const auto fields = FieldsOf(&r);
  ForEachField(fields, [&](const auto& f) { e.*f.event = r.*f.record; });
  // A record leaves an optional derived field at its default when it has no
  // value of its own (UseRecord::write_at 0: not recorded).
  ForEachField(fields, [&](const auto& f) {
    using T = std::decay_t<decltype(e.*f.event)>;
    if (f.write != Write::kUnlessDefault) return;
    static const Event kDefaults;
    const std::optional<T> derived = DerivedValue<T>(f.derived, e);
    if (derived.has_value() && e.*f.event == kDefaults.*f.event) e.*f.event = *derived;
  });
  return e;
}

absl::Status ParseFields(const FieldReader& r, Event* e) {
  absl::Status status;
  WithFields(e->type, [&](const auto& fields) {
    ForEachField(fields, [&](const auto& f) {
      if (!status.ok()) return;
      using T = std::decay_t<decltype(e->*f.event)>;
      if (r.Find(f.name) == nullptr) {
        if (f.need == Need::kRequired) {
          status = absl::InvalidArgumentError(absl::StrCat("missing field \"", f.name, "\""));
        } else if (std::optional<T> d = DerivedValue<T>(f.derived, *e); d.has_value()) {
          e->*f.event = *d;
        }
        return;
      }
      status = ReadValue(r, f.name, &(e->*f.event));
      if (status.ok() && f.check != nullptr) status = f.check(e->*f.event);
    });
  });
  // kUnknown: forward compatible, keep what every event has, ignore the rest.
  return status;
}

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
}

// The bytes of `path` from `offset` to its end as it is now.
absl::StatusOr<std::string> ReadFrom(const std::string& path, int64_t offset) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open history", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "cannot stat history", path);
  }
  std::string data;
  data.reserve(static_cast<size_t>(std::max<off_t>(st.st_size - offset, 0)));
  constexpr size_t kChunk = 1 << 20;
  // Bounded: the size at open plus some growth by writers still appending.
  const int64_t max_reads = static_cast<int64_t>(st.st_size) / static_cast<int64_t>(kChunk) + 4096;
  std::string chunk(kChunk, '\0');
  off_t at = static_cast<off_t>(offset);
  for (int64_t i = 0; i < max_reads; ++i) {
    const ssize_t n = ::pread(fd, chunk.data(), chunk.size(), at);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "cannot read history", path);
    }
    data.append(chunk.data(), static_cast<size_t>(n));
    at += n;
  }
  ::close(fd);
  return data;
}

}  // namespace

int64_t RawMonotonicNanos() {
  struct timespec ts {};
  // A raw syscall: the vDSO and libc's clock_gettime are what an LD_PRELOAD
  // shim would intercept.
  ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + static_cast<int64_t>(ts.tv_nsec);
}

int64_t RawFromSteady(std::chrono::steady_clock::time_point tp) {
  const auto now = std::chrono::steady_clock::now();
  const int64_t raw = RawMonotonicNanos();
  return raw + std::chrono::duration_cast<std::chrono::nanoseconds>(tp - now).count();
}

absl::string_view EventTypeName(EventType type) { return NameOf(kEventTypes, type, "unknown"); }

absl::string_view FaultPhaseName(FaultPhase phase) {
  return NameOf(kFaultPhases, phase, "instant");
}

Event ToEvent(const InvokeRecord& r) { return FromRecord(r); }
Event ToEvent(const QueuedRecord& r) { return FromRecord(r); }
Event ToEvent(const GrantRecord& r) { return FromRecord(r); }
Event ToEvent(const FailRecord& r) { return FromRecord(r); }
Event ToEvent(const UseRecord& r) { return FromRecord(r); }
Event ToEvent(const ReleaseRecord& r) { return FromRecord(r); }
Event ToEvent(const ExtendRecord& r) { return FromRecord(r); }
Event ToEvent(const NemesisRecord& r) { return FromRecord(r); }
Event ToEvent(const FinalRecord& r) { return FromRecord(r); }
Event ToEvent(const RunRecord& r) { return FromRecord(r); }

std::string FormatEventLine(const Event& e) {
  OrderedJson j = OrderedJson::object();
  j["t"] = e.t;
  if (e.type == EventType::kUnknown) {
    j["type"] = e.type_name.empty() ? std::string("unknown") : e.type_name;
  } else {
    j["type"] = std::string(EventTypeName(e.type));
  }
  WithFields(e.type, [&](const auto& fields) {
    ForEachField(fields, [&](const auto& f) {
      if (!LeftOut(f, e)) WriteValue(f.name, e.*f.event, &j);
    });
  });
  std::string line = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  line.push_back('\n');
  return line;
}

absl::StatusOr<Event> ParseEventLine(absl::string_view line, absl::string_view source) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
    line.remove_suffix(1);
  }
  Json j = Json::parse(line.begin(), line.end(), /*cb=*/nullptr,
                       /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("not valid JSON (torn or truncated line?)");
  }
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  FieldReader f(j);
  Event e;
  e.source = std::string(source);
  REDLOCK_CHAOS_TRY(f.String("type", true, &e.type_name));
  REDLOCK_CHAOS_TRY(f.Int("t", true, &e.t));
  e.type = TypeFromName(e.type_name);
  absl::Status s = ParseFields(f, &e);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(e.type_name, ": ", s.message()));
  }
  return e;
}

absl::StatusOr<std::vector<Event>> ParseHistory(absl::string_view text, absl::string_view name,
                                                std::vector<std::string>* malformed,
                                                int64_t first_line) {
  std::vector<Event> events;
  int64_t line_no = first_line - 1;
  // Bounded by the text: every iteration consumes at least one byte.
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    absl::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == absl::string_view::npos ? text.size() : nl + 1);
    if (line.find_first_not_of(" \t\r") == absl::string_view::npos) continue;
    const std::string where = absl::StrCat(name, ":", line_no);
    absl::StatusOr<Event> e = ParseEventLine(line, where);
    if (e.ok()) {
      events.push_back(*std::move(e));
      continue;
    }
    std::string message = absl::StrCat(where, ": ", e.status().message());
    if (malformed == nullptr) return absl::InvalidArgumentError(message);
    malformed->push_back(std::move(message));
  }
  return events;
}

absl::StatusOr<std::vector<Event>> ReadHistory(absl::string_view path,
                                               std::vector<std::string>* malformed) {
  return ReadHistory(std::vector<std::string>{std::string(path)}, malformed);
}

absl::StatusOr<std::vector<Event>> ReadHistory(const std::vector<std::string>& paths,
                                               std::vector<std::string>* malformed) {
  HistoryTail tail(paths);
  absl::Status s = tail.Update(/*to_end=*/true);
  if (!s.ok()) return s;
  if (malformed == nullptr && !tail.malformed().empty()) {
    return absl::InvalidArgumentError(tail.malformed().front());
  }
  if (malformed != nullptr) {
    malformed->insert(malformed->end(), tail.malformed().begin(), tail.malformed().end());
  }
  return tail.Events();
}

// ---- HistoryTail ---------------------------------------------------------------

HistoryTail::HistoryTail(std::vector<std::string> paths) {
  files_.reserve(paths.size());
  for (std::string& path : paths) {
    File f;
    f.path = std::move(path);
    files_.push_back(std::move(f));
  }
}

absl::Status HistoryTail::Update(bool to_end) {
  for (File& f : files_) {
    absl::StatusOr<std::string> text = ReadFrom(f.path, f.offset);
    if (!text.ok()) return text.status();
    // Whole lines only, unless the writers are done.
    size_t take = text->size();
    if (!to_end) {
      const size_t last_nl = text->rfind('\n');
      take = last_nl == std::string::npos ? 0 : last_nl + 1;
    }
    const absl::string_view consumed = absl::string_view(*text).substr(0, take);
    absl::StatusOr<std::vector<Event>> events =
        ParseHistory(consumed, f.path, &malformed_, f.lines + 1);
    if (!events.ok()) return events.status();  // cannot happen: lenient
    f.events.insert(f.events.end(), std::make_move_iterator(events->begin()),
                    std::make_move_iterator(events->end()));
    f.offset += static_cast<int64_t>(take);
    f.lines += static_cast<int64_t>(std::count(consumed.begin(), consumed.end(), '\n'));
    if (!consumed.empty() && consumed.back() != '\n') ++f.lines;  // a torn last line
  }
  return absl::OkStatus();
}

std::vector<Event> HistoryTail::Events() const {
  std::vector<Event> all;
  size_t n = 0;
  for (const File& f : files_) n += f.events.size();
  all.reserve(n);
  for (const File& f : files_) all.insert(all.end(), f.events.begin(), f.events.end());
  std::stable_sort(all.begin(), all.end(),
                   [](const Event& a, const Event& b) { return a.t < b.t; });
  return all;
}

// ---- HistoryWriter
// ------------------------------------------------------------

absl::StatusOr<std::unique_ptr<HistoryWriter>> HistoryWriter::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot open history", path);
  return std::unique_ptr<HistoryWriter>(new HistoryWriter(path, fd));
}

HistoryWriter::~HistoryWriter() { ::close(fd_); }

absl::Status HistoryWriter::Write(const Event& event) {
  std::string line;
  if (event.t == 0) {
    Event stamped = event;
    stamped.t = RawMonotonicNanos();
    line = FormatEventLine(stamped);
  } else {
    line = FormatEventLine(event);
  }
  // One write(2) with O_APPEND keeps the line whole against other writers.
  // A short write (disk full, signal) is finished with further writes, which
  // may interleave: reported as kDataLoss.
  size_t done = 0;
  bool torn = false;
  constexpr int kMaxAttempts = 64;
  for (int attempt = 0; attempt < kMaxAttempts && done < line.size(); ++attempt) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot append to history", path_);
    }
    if (done > 0 || static_cast<size_t>(n) < line.size()) torn = true;
    done += static_cast<size_t>(n);
  }
  if (done < line.size()) {
    return absl::DataLossError(absl::StrCat("cannot append a whole line to history ", path_));
  }
  if (torn) {
    return absl::DataLossError(
        absl::StrCat("short write to history ", path_, ": the line may be interleaved"));
  }
  return absl::OkStatus();
}

absl::Status HistoryWriter::WriteInvoke(const InvokeRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteGrant(const GrantRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteFail(const FailRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteUse(const UseRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteRelease(const ReleaseRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteExtend(const ExtendRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteNemesis(const NemesisRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteFinal(const FinalRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteQueued(const QueuedRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteRun(const RunRecord& r) { return Write(ToEvent(r)); }

absl::Status HistoryWriter::Sync() {
  if (::fdatasync(fd_) != 0) {
    return ErrnoStatus(errno, "cannot sync history", path_);
  }
  return absl::OkStatus();
}

#undef REDLOCK_CHAOS_TRY

}  // namespace redlock::chaos
