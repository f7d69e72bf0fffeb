// Each script's script-free form (scriptless.h runs them): which keys the
// transaction watches and reads in phase 1, the writes that what was read
// calls for, and the reply the script would have given, from EXEC's
// answers. Pure functions over RESP payloads and replies: no I/O, no state.

#ifndef REDLOCK_INTERNAL_SCRIPTLESS_FORMS_H_
#define REDLOCK_INTERNAL_SCRIPTLESS_FORMS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/scripts.h"

namespace redlock::internal {

// Which script a transaction stands for (kNone: one without a script-free
// form, refused on a node that forbids scripting).
enum class ScriptlessKind {
  kNone,
  kAcquire,
  kRelease,
  kExtend,
  kFenceAcquire,
  kFenceCommit,
  kInspect
};
ScriptlessKind ScriptlessKindOf(const Script* s);
// Fencing's two scripts take lock keys and as many counter keys.
bool Fenced(ScriptlessKind k);
// Acquisitions watch their lock keys only and read the counters at EXEC.
bool Acquires(ScriptlessKind k);

// The reply types of the two phases (every command in them).
inline constexpr uint8_t kScriptlessExpect =
    kExpectStatus | kExpectInteger | kExpectString | kExpectNil | kExpectArray;

// Appends `cmd a...` as a RESP array.
void AppendArgs(std::string* out, absl::string_view cmd, const std::vector<absl::string_view>& a);

// One script call as the transaction sees it: the script's KEYS and ARGV.
struct ScriptlessCall {
  ScriptlessKind kind = ScriptlessKind::kNone;
  std::vector<std::string> keys;
  std::vector<std::string> args;
  size_t locks = 0;  // lock keys (the rest are counters)
  // ReleaseOneScript: ARGV[2] is the whole channel, not a prefix of it.
  bool whole_channel = false;

  // Keys phase 1 watches (a prefix of `keys`).
  size_t watched() const { return Acquires(kind) ? locks : keys.size(); }
};

// Phase 1: WATCH and the reads the script would make (replies: 1 + watched).
std::string Phase1Payload(const ScriptlessCall& call);

// The decision on phase 1's reads (`read`: its replies, WATCH's first): the
// writes phase 2 makes (RESP commands, appended to `writes`), or the reply
// (or error) when the script would write nothing.
std::optional<absl::StatusOr<Reply>> PlanWrites(const ScriptlessCall& call,
                                                const std::vector<Reply>& read,
                                                std::vector<std::string>* writes);

// The script's reply from EXEC's answers (`out`: one per write).
absl::StatusOr<Reply> ScriptReplyOf(const ScriptlessCall& call, const std::vector<Reply>& out);

// InspectScript's read (three replies), and its reply from them.
std::string InspectPayload(const ScriptlessCall& call);
absl::StatusOr<Reply> InspectReplyOf(absl::StatusOr<Reply> r);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SCRIPTLESS_FORMS_H_
