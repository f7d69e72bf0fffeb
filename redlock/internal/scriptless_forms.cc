#include "redlock/internal/scriptless_forms.h"

#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

using Kind = ScriptlessKind;

// Counters as the scripts compare them: decimal strings by (length, bytes).
bool CounterLess(absl::string_view a, absl::string_view b) {
  return a.size() < b.size() || (a.size() == b.size() && a < b);
}

// SETs of the lock keys, then the counters' reads (at EXEC, after them).
void AcquireWrites(const ScriptlessCall& call, std::vector<std::string>* writes) {
  std::string w;
  for (size_t i = 0; i < call.locks; ++i) {
    w.clear();
    AppendArgs(&w, "SET", {call.keys[i], call.args[0], "PX", call.args[1]});
    writes->push_back(w);
  }
  for (size_t i = call.locks; i < call.keys.size(); ++i) {
    w.clear();
    AppendArgs(&w, "GETRANGE", {call.keys[i], "0", "20"});
    writes->push_back(w);
  }
}

// DEL of every lock key that holds the token, each with its PUBLISH when
// announcing.
void ReleaseWrites(const ScriptlessCall& call, const std::vector<Reply>& read,
                   std::vector<std::string>* writes) {
  std::string w;
  for (size_t i = 0; i < call.locks; ++i) {
    if (read[1 + i].str != call.args[0]) continue;
    w.clear();
    AppendArgs(&w, "DEL", {call.keys[i]});
    writes->push_back(w);
    if (call.args[1].empty()) continue;
    w.clear();
    AppendArgs(&w, "PUBLISH",
               {call.whole_channel ? call.args[1] : absl::StrCat(call.args[1], call.keys[i]), ""});
    writes->push_back(w);
  }
}

// Per counter key (one key may serve several resources), the highest token
// wanted, if above what it holds. Written even when not raised, as the
// script does (scripts.h): the write is what the WAIT behind this EXEC
// waits for. The counter is watched, so the value written back is the value
// read, and EXEC certifies that the keys still held the token.
void CommitWrites(const ScriptlessCall& call, const std::vector<Reply>& read,
                  std::vector<std::string>* writes) {
  const size_t n = call.locks;
  std::map<std::string, std::pair<std::string, std::string>> raise;  // key: cur, want
  for (size_t i = 0; i < n && i + 1 < call.args.size(); ++i) {
    const std::string& key = call.keys[n + i];
    std::string cur = read[1 + n + i].str.empty() ? "0" : read[1 + n + i].str;
    auto [it, fresh] = raise.emplace(key, std::make_pair(cur, cur));
    if (CounterLess(it->second.second, call.args[i + 1])) it->second.second = call.args[i + 1];
  }
  std::string w;
  for (const auto& [key, cw] : raise) {
    w.clear();
    AppendArgs(&w, "SET", {key, cw.second});
    writes->push_back(w);
  }
}

}  // namespace

ScriptlessKind ScriptlessKindOf(const Script* s) {
  if (s == &AcquireSetScript()) return Kind::kAcquire;
  if (s == &ReleaseScript() || s == &ReleaseOneScript()) return Kind::kRelease;
  if (s == &ExtendScript()) return Kind::kExtend;
  if (s == &FenceAcquireScript()) return Kind::kFenceAcquire;
  if (s == &FenceCommitScript()) return Kind::kFenceCommit;
  if (s == &InspectScript()) return Kind::kInspect;
  return Kind::kNone;
}

bool Fenced(ScriptlessKind k) { return k == Kind::kFenceAcquire || k == Kind::kFenceCommit; }
bool Acquires(ScriptlessKind k) { return k == Kind::kAcquire || k == Kind::kFenceAcquire; }

void AppendArgs(std::string* out, absl::string_view cmd, const std::vector<absl::string_view>& a) {
  AppendArrayHeader(out, 1 + a.size());
  AppendBulk(out, cmd);
  for (absl::string_view s : a) AppendBulk(out, s);
}

std::string Phase1Payload(const ScriptlessCall& call) {
  std::string p;
  // An acquisition watches its lock keys only and reads the counters inside
  // its MULTI (phase 2), at EXEC: watching a counter that other resources'
  // holders raise (Options::FencingCounters::kShared) would make unrelated
  // acquisitions abort each other.
  const size_t watched = call.watched();
  AppendArrayHeader(&p, 1 + watched);
  AppendBulk(&p, "WATCH");
  for (size_t i = 0; i < watched; ++i) AppendBulk(&p, call.keys[i]);
  const std::string token_range = std::to_string(call.args[0].size());  // a byte past a token
  for (size_t i = 0; i < call.locks; ++i) {
    if (Acquires(call.kind)) {
      AppendArgs(&p, "EXISTS", {call.keys[i]});
    } else {
      // Bounded: a foreign value is never read whole.
      AppendArgs(&p, "GETRANGE", {call.keys[i], "0", token_range});
    }
  }
  // Counters: 21 bytes tell garbage from any 64-bit number, as the scripts do.
  for (size_t i = call.locks; i < watched; ++i) {
    AppendArgs(&p, "GETRANGE", {call.keys[i], "0", "20"});
  }
  return p;
}

std::optional<absl::StatusOr<Reply>> PlanWrites(const ScriptlessCall& call,
                                                const std::vector<Reply>& read,
                                                std::vector<std::string>* writes) {
  const size_t n = call.locks;
  switch (call.kind) {
    case Kind::kAcquire:
    case Kind::kFenceAcquire:
      for (size_t i = 0; i < n; ++i) {
        if (read[1 + i].integer == 0) continue;
        Reply held = Reply::Integer(-static_cast<int64_t>(i + 1));
        return call.kind == Kind::kAcquire ? held : Reply::Array({held});
      }
      AcquireWrites(call, writes);
      return std::nullopt;
    case Kind::kRelease:
      ReleaseWrites(call, read, writes);
      if (writes->empty()) return Reply::Integer(0);
      return std::nullopt;
    case Kind::kExtend:
    case Kind::kFenceCommit:
      for (size_t i = 0; i < n; ++i) {
        if (read[1 + i].str != call.args[0]) return Reply::Integer(0);
      }
      if (call.kind == Kind::kFenceCommit) {
        CommitWrites(call, read, writes);
        return std::nullopt;
      }
      for (size_t i = 0; i < n; ++i) {
        std::string w;
        AppendArgs(&w, "PEXPIRE", {call.keys[i], call.args[1]});
        writes->push_back(std::move(w));
      }
      return std::nullopt;
    default:
      return absl::InternalError("unreachable");
  }
}

absl::StatusOr<Reply> ScriptReplyOf(const ScriptlessCall& call, const std::vector<Reply>& out) {
  switch (call.kind) {
    case Kind::kAcquire:
    case Kind::kFenceCommit:
      return Reply::Integer(1);
    case Kind::kFenceAcquire: {
      // The SETs' answers, then the counters as EXEC read them.
      std::vector<Reply> a{Reply::Integer(1)};
      for (size_t i = call.locks; i < out.size(); ++i) {
        a.push_back(Reply::String(out[i].str.empty() ? "0" : out[i].str));
      }
      return Reply::Array(std::move(a));
    }
    case Kind::kRelease: {
      // DEL, then its PUBLISH when announcing: the DELs' answers.
      const size_t stride = call.args[1].empty() ? 1 : 2;
      int64_t deleted = 0;
      for (size_t i = 0; i < out.size(); i += stride) deleted += out[i].integer == 1 ? 1 : 0;
      return Reply::Integer(deleted);
    }
    case Kind::kExtend: {
      bool all = true;
      for (const Reply& x : out) all = all && x.type == Reply::Type::kInteger && x.integer == 1;
      return Reply::Integer(all ? 1 : 0);
    }
    default:
      return absl::InternalError("unreachable");
  }
}

std::string InspectPayload(const ScriptlessCall& call) {
  std::string p;
  AppendArgs(&p, "GET", {call.keys[0]});
  AppendArgs(&p, "PTTL", {call.keys[0]});
  AppendArgs(&p, "GETRANGE", {call.keys[1], "0", "20"});
  return p;
}

absl::StatusOr<Reply> InspectReplyOf(absl::StatusOr<Reply> r) {
  if (!r.ok() || r->type != Reply::Type::kArray || r->elements.size() != 3) return r;
  for (const Reply& e : r->elements) {
    if (e.is_error()) return e;
  }
  std::string counter = r->elements[2].str.empty() ? "0" : r->elements[2].str;
  return Reply::Array(
      {Reply::String(r->elements[0].str), r->elements[1], Reply::String(std::move(counter))});
}

}  // namespace redlock::internal
