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
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
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

EventType TypeFromName(absl::string_view name) {
  if (name == "invoke") return EventType::kInvoke;
  if (name == "grant") return EventType::kGrant;
  if (name == "fail") return EventType::kFail;
  if (name == "use") return EventType::kUse;
  if (name == "release") return EventType::kRelease;
  if (name == "extend") return EventType::kExtend;
  if (name == "nemesis") return EventType::kNemesis;
  if (name == "final") return EventType::kFinal;
  if (name == "run") return EventType::kRun;
  if (name == "queued") return EventType::kQueued;
  return EventType::kUnknown;
}

absl::Status ParseClientCommon(const FieldReader& f, Event* e) {
  REDLOCK_CHAOS_TRY(f.String("process", true, &e->process));
  REDLOCK_CHAOS_TRY(f.Int("op", true, &e->op));
  REDLOCK_CHAOS_TRY(f.String("resource", true, &e->resource));
  return absl::OkStatus();
}

absl::Status ParseFields(const FieldReader& f, Event* e) {
  switch (e->type) {
    case EventType::kInvoke:
      REDLOCK_CHAOS_TRY(ParseClientCommon(f, e));
      REDLOCK_CHAOS_TRY(f.Int("ttl_ms", false, &e->ttl_ms));
      REDLOCK_CHAOS_TRY(f.String("mode", false, &e->mode));
      if (!e->mode.empty() && e->mode != "fair") {
        return absl::InvalidArgumentError(absl::StrCat(
            "an invoke's field \"mode\" must be \"fair\" or absent, not \"", e->mode, "\""));
      }
      REDLOCK_CHAOS_TRY(f.Int("wait_ms", false, &e->wait_ms));
      return absl::OkStatus();
    case EventType::kQueued:
      return ParseClientCommon(f, e);
    case EventType::kGrant:
      REDLOCK_CHAOS_TRY(ParseClientCommon(f, e));
      REDLOCK_CHAOS_TRY(f.String("token", true, &e->token));
      e->start = e->t;
      REDLOCK_CHAOS_TRY(f.Int("start", false, &e->start));
      REDLOCK_CHAOS_TRY(f.Int("valid_until", true, &e->valid_until));
      REDLOCK_CHAOS_TRY(f.Int("ttl_ms", false, &e->ttl_ms));
      REDLOCK_CHAOS_TRY(f.Int("drift_ms", false, &e->drift_ms));
      REDLOCK_CHAOS_TRY(f.IntArray("nodes", &e->nodes));
      REDLOCK_CHAOS_TRY(f.Uint("fencing_token", &e->fencing_token));
      REDLOCK_CHAOS_TRY(f.String("mode", false, &e->mode));
      if (!e->mode.empty() && e->mode != "exclusive" && e->mode != "shared" && e->mode != "slot" &&
          e->mode != "leader" && e->mode != "fair") {
        return absl::InvalidArgumentError(
            absl::StrCat("field \"mode\" must be \"exclusive\", \"shared\", \"slot\", "
                         "\"leader\" or \"fair\", not \"",
                         e->mode, "\""));
      }
      REDLOCK_CHAOS_TRY(f.Int("permits", false, &e->permits));
      REDLOCK_CHAOS_TRY(f.Int("slot", false, &e->slot));
      return absl::OkStatus();
    case EventType::kFail:
      REDLOCK_CHAOS_TRY(ParseClientCommon(f, e));
      REDLOCK_CHAOS_TRY(f.String("code", false, &e->code));
      REDLOCK_CHAOS_TRY(f.String("error", false, &e->error));
      REDLOCK_CHAOS_TRY(f.String("outcome", false, &e->outcome));
      return absl::OkStatus();
    case EventType::kUse: {
      REDLOCK_CHAOS_TRY(ParseClientCommon(f, e));
      REDLOCK_CHAOS_TRY(f.String("token", true, &e->token));
      REDLOCK_CHAOS_TRY(f.Int("begin", true, &e->begin));
      REDLOCK_CHAOS_TRY(f.Int("end", true, &e->end));
      REDLOCK_CHAOS_TRY(f.Int("read", true, &e->read));
      e->wrote = e->read == std::numeric_limits<int64_t>::max() ? e->read : e->read + 1;
      REDLOCK_CHAOS_TRY(f.Int("wrote", false, &e->wrote));
      REDLOCK_CHAOS_TRY(f.Bool("accepted", &e->accepted));
      REDLOCK_CHAOS_TRY(f.Uint("fencing_token", &e->fencing_token));
      REDLOCK_CHAOS_TRY(f.Bool("write", &e->write));
      e->write_at = e->end;
      REDLOCK_CHAOS_TRY(f.Int("write_at", false, &e->write_at));
      return absl::OkStatus();
    }
    case EventType::kRelease:
      REDLOCK_CHAOS_TRY(ParseClientCommon(f, e));
      REDLOCK_CHAOS_TRY(f.String("token", true, &e->token));
      e->end = e->t;
      REDLOCK_CHAOS_TRY(f.Int("end", false, &e->end));
      REDLOCK_CHAOS_TRY(f.Bool("ok", &e->ok));
      return absl::OkStatus();
    case EventType::kExtend:
      REDLOCK_CHAOS_TRY(ParseClientCommon(f, e));
      REDLOCK_CHAOS_TRY(f.String("token", true, &e->token));
      REDLOCK_CHAOS_TRY(f.Int("valid_until", true, &e->valid_until));
      REDLOCK_CHAOS_TRY(f.Bool("ok", &e->ok));
      return absl::OkStatus();
    case EventType::kNemesis: {
      REDLOCK_CHAOS_TRY(f.String("fault", true, &e->fault));
      REDLOCK_CHAOS_TRY(f.String("target", false, &e->target));
      REDLOCK_CHAOS_TRY(f.String("detail", false, &e->detail));
      REDLOCK_CHAOS_TRY(f.IntArray("nodes", &e->nodes));
      REDLOCK_CHAOS_TRY(f.StringArray("clients", &e->clients));
      REDLOCK_CHAOS_TRY(f.String("color", false, &e->color));
      std::string phase = "instant";
      REDLOCK_CHAOS_TRY(f.String("phase", false, &phase));
      if (phase == "start") {
        e->phase = FaultPhase::kStart;
      } else if (phase == "stop") {
        e->phase = FaultPhase::kStop;
      } else if (phase == "instant") {
        e->phase = FaultPhase::kInstant;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("field \"phase\" must be \"start\", \"stop\" or "
                         "\"instant\", not \"",
                         phase, "\""));
      }
      return absl::OkStatus();
    }
    case EventType::kFinal:
      REDLOCK_CHAOS_TRY(f.String("resource", true, &e->resource));
      REDLOCK_CHAOS_TRY(f.Int("counter", true, &e->counter));
      REDLOCK_CHAOS_TRY(f.Int("initial", false, &e->initial));
      return absl::OkStatus();
    case EventType::kRun: {
      REDLOCK_CHAOS_TRY(f.String("scenario", false, &e->scenario));
      std::optional<uint64_t> seed;
      REDLOCK_CHAOS_TRY(f.Uint("seed", &seed));
      e->seed = seed.value_or(0);
      REDLOCK_CHAOS_TRY(f.String("config", false, &e->config));
      REDLOCK_CHAOS_TRY(f.String("expected", false, &e->expected));
      REDLOCK_CHAOS_TRY(f.String("verdict", false, &e->verdict));
      REDLOCK_CHAOS_TRY(f.String("why", false, &e->why));
      e->start = e->t;
      REDLOCK_CHAOS_TRY(f.Int("start", false, &e->start));
      REDLOCK_CHAOS_TRY(f.IntArray("nodes", &e->nodes));
      REDLOCK_CHAOS_TRY(f.StringArray("clients", &e->clients));
      REDLOCK_CHAOS_TRY(f.IntArray("violations", &e->violations));
      return absl::OkStatus();
    }
    case EventType::kUnknown:
      // Forward compatible: keep what every event has, ignore the rest.
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

void PutClientCommon(const Event& e, OrderedJson* j) {
  (*j)["process"] = e.process;
  (*j)["op"] = e.op;
  (*j)["resource"] = e.resource;
}

void PutFencing(const Event& e, OrderedJson* j) {
  if (e.fencing_token.has_value()) (*j)["fencing_token"] = *e.fencing_token;
}

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open history", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "cannot stat history", path);
  }
  std::string data;
  data.reserve(static_cast<size_t>(std::max<off_t>(st.st_size, 0)));
  constexpr size_t kChunk = 1 << 20;
  // Bounded: the size at open plus some growth by writers still appending.
  const int64_t max_reads = static_cast<int64_t>(st.st_size) / static_cast<int64_t>(kChunk) + 4096;
  std::string chunk(kChunk, '\0');
  for (int64_t i = 0; i < max_reads; ++i) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "cannot read history", path);
    }
    data.append(chunk.data(), static_cast<size_t>(n));
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

absl::string_view EventTypeName(EventType type) {
  switch (type) {
    case EventType::kInvoke:
      return "invoke";
    case EventType::kGrant:
      return "grant";
    case EventType::kFail:
      return "fail";
    case EventType::kUse:
      return "use";
    case EventType::kRelease:
      return "release";
    case EventType::kExtend:
      return "extend";
    case EventType::kNemesis:
      return "nemesis";
    case EventType::kFinal:
      return "final";
    case EventType::kRun:
      return "run";
    case EventType::kQueued:
      return "queued";
    case EventType::kUnknown:
      return "unknown";
  }
  return "unknown";
}

absl::string_view FaultPhaseName(FaultPhase phase) {
  switch (phase) {
    case FaultPhase::kStart:
      return "start";
    case FaultPhase::kStop:
      return "stop";
    case FaultPhase::kInstant:
      return "instant";
  }
  return "instant";
}

Event ToEvent(const InvokeRecord& r) {
  Event e;
  e.type = EventType::kInvoke;
  e.type_name = "invoke";
  e.t = r.t;
  e.process = r.process;
  e.op = r.op;
  e.resource = r.resource;
  e.ttl_ms = r.ttl_ms;
  e.mode = r.mode;
  e.wait_ms = r.wait_ms;
  return e;
}

Event ToEvent(const QueuedRecord& r) {
  Event e;
  e.type = EventType::kQueued;
  e.type_name = "queued";
  e.t = r.t;
  e.process = r.process;
  e.op = r.op;
  e.resource = r.resource;
  return e;
}

Event ToEvent(const GrantRecord& r) {
  Event e;
  e.type = EventType::kGrant;
  e.type_name = "grant";
  e.t = r.t;
  e.process = r.process;
  e.op = r.op;
  e.resource = r.resource;
  e.token = r.token;
  e.start = r.start;
  e.valid_until = r.valid_until;
  e.ttl_ms = r.ttl_ms;
  e.drift_ms = r.drift_ms;
  e.nodes = r.nodes;
  e.fencing_token = r.fencing_token;
  e.mode = r.mode;
  e.permits = r.permits;
  e.slot = r.slot;
  return e;
}

Event ToEvent(const FailRecord& r) {
  Event e;
  e.type = EventType::kFail;
  e.type_name = "fail";
  e.t = r.t;
  e.process = r.process;
  e.op = r.op;
  e.resource = r.resource;
  e.code = r.code;
  e.error = r.error;
  e.outcome = r.outcome;
  return e;
}

Event ToEvent(const UseRecord& r) {
  Event e;
  e.type = EventType::kUse;
  e.type_name = "use";
  e.t = r.t;
  e.process = r.process;
  e.op = r.op;
  e.resource = r.resource;
  e.token = r.token;
  e.begin = r.begin;
  e.end = r.end;
  e.read = r.read;
  e.wrote = r.wrote;
  e.accepted = r.accepted;
  e.fencing_token = r.fencing_token;
  e.write = r.write;
  e.write_at = r.write_at != 0 ? r.write_at : r.end;
  return e;
}

Event ToEvent(const ReleaseRecord& r) {
  Event e;
  e.type = EventType::kRelease;
  e.type_name = "release";
  e.t = r.t;
  e.process = r.process;
  e.op = r.op;
  e.resource = r.resource;
  e.token = r.token;
  e.end = r.end;
  e.ok = r.ok;
  return e;
}

Event ToEvent(const ExtendRecord& r) {
  Event e;
  e.type = EventType::kExtend;
  e.type_name = "extend";
  e.t = r.t;
  e.process = r.process;
  e.op = r.op;
  e.resource = r.resource;
  e.token = r.token;
  e.valid_until = r.valid_until;
  e.ok = r.ok;
  return e;
}

Event ToEvent(const NemesisRecord& r) {
  Event e;
  e.type = EventType::kNemesis;
  e.type_name = "nemesis";
  e.t = r.t;
  e.fault = r.fault;
  e.target = r.target;
  e.detail = r.detail;
  e.phase = r.phase;
  e.nodes = r.nodes;
  e.clients = r.clients;
  e.color = r.color;
  return e;
}

Event ToEvent(const FinalRecord& r) {
  Event e;
  e.type = EventType::kFinal;
  e.type_name = "final";
  e.t = r.t;
  e.resource = r.resource;
  e.counter = r.counter;
  e.initial = r.initial;
  return e;
}

Event ToEvent(const RunRecord& r) {
  Event e;
  e.type = EventType::kRun;
  e.type_name = "run";
  e.t = r.t;
  e.scenario = r.scenario;
  e.seed = r.seed;
  e.config = r.config;
  e.expected = r.expected;
  e.verdict = r.verdict;
  e.why = r.why;
  e.start = r.start;
  e.nodes = r.nodes;
  e.clients = r.clients;
  e.violations = r.violations;
  return e;
}

std::string FormatEventLine(const Event& e) {
  OrderedJson j = OrderedJson::object();
  j["t"] = e.t;
  if (e.type == EventType::kUnknown) {
    j["type"] = e.type_name.empty() ? std::string("unknown") : e.type_name;
  } else {
    j["type"] = std::string(EventTypeName(e.type));
  }
  switch (e.type) {
    case EventType::kInvoke:
      PutClientCommon(e, &j);
      j["ttl_ms"] = e.ttl_ms;
      if (!e.mode.empty()) j["mode"] = e.mode;
      if (e.wait_ms != 0) j["wait_ms"] = e.wait_ms;
      break;
    case EventType::kQueued:
      PutClientCommon(e, &j);
      break;
    case EventType::kGrant:
      PutClientCommon(e, &j);
      j["token"] = e.token;
      j["start"] = e.start;
      j["valid_until"] = e.valid_until;
      j["ttl_ms"] = e.ttl_ms;
      j["drift_ms"] = e.drift_ms;
      j["nodes"] = e.nodes;
      PutFencing(e, &j);
      // The lock family's (absent for a plain lock: old readers and old
      // histories keep their meaning).
      if (!e.mode.empty()) j["mode"] = e.mode;
      if (e.permits != 0) j["permits"] = e.permits;
      if (e.slot >= 0) j["slot"] = e.slot;
      break;
    case EventType::kFail:
      PutClientCommon(e, &j);
      j["code"] = e.code;
      j["error"] = e.error;
      if (!e.outcome.empty()) j["outcome"] = e.outcome;
      break;
    case EventType::kUse:
      PutClientCommon(e, &j);
      j["token"] = e.token;
      j["begin"] = e.begin;
      j["end"] = e.end;
      j["read"] = e.read;
      j["wrote"] = e.wrote;
      j["accepted"] = e.accepted;
      if (e.write_at != 0 && e.write_at != e.end) j["write_at"] = e.write_at;
      PutFencing(e, &j);
      if (!e.write) j["write"] = false;
      break;
    case EventType::kRelease:
      PutClientCommon(e, &j);
      j["token"] = e.token;
      j["end"] = e.end;
      j["ok"] = e.ok;
      break;
    case EventType::kExtend:
      PutClientCommon(e, &j);
      j["token"] = e.token;
      j["valid_until"] = e.valid_until;
      j["ok"] = e.ok;
      break;
    case EventType::kNemesis:
      j["fault"] = e.fault;
      j["target"] = e.target;
      j["detail"] = e.detail;
      j["phase"] = std::string(FaultPhaseName(e.phase));
      if (!e.nodes.empty()) j["nodes"] = e.nodes;
      if (!e.clients.empty()) j["clients"] = e.clients;
      if (!e.color.empty()) j["color"] = e.color;
      break;
    case EventType::kFinal:
      j["resource"] = e.resource;
      j["counter"] = e.counter;
      j["initial"] = e.initial;
      break;
    case EventType::kRun:
      j["scenario"] = e.scenario;
      j["seed"] = e.seed;
      j["config"] = e.config;
      j["expected"] = e.expected;
      j["verdict"] = e.verdict;
      j["why"] = e.why;
      j["start"] = e.start;
      j["nodes"] = e.nodes;
      j["clients"] = e.clients;
      j["violations"] = e.violations;
      break;
    case EventType::kUnknown:
      break;
  }
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
                                                std::vector<std::string>* malformed) {
  std::vector<Event> events;
  int64_t line_no = 0;
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
  std::vector<Event> all;
  for (const std::string& path : paths) {
    absl::StatusOr<std::string> text = ReadWholeFile(path);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::vector<Event>> events = ParseHistory(*text, path, malformed);
    if (!events.ok()) return events.status();
    if (all.empty()) {
      all = *std::move(events);
    } else {
      all.insert(all.end(), std::make_move_iterator(events->begin()),
                 std::make_move_iterator(events->end()));
    }
  }
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
absl::Status HistoryWriter::WriteQueued(const QueuedRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteGrant(const GrantRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteFail(const FailRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteUse(const UseRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteRelease(const ReleaseRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteExtend(const ExtendRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteNemesis(const NemesisRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteFinal(const FinalRecord& r) { return Write(ToEvent(r)); }
absl::Status HistoryWriter::WriteRun(const RunRecord& r) { return Write(ToEvent(r)); }

absl::Status HistoryWriter::Sync() {
  if (::fdatasync(fd_) != 0) {
    return ErrnoStatus(errno, "cannot sync history", path_);
  }
  return absl::OkStatus();
}

#undef REDLOCK_CHAOS_TRY

}  // namespace redlock::chaos
