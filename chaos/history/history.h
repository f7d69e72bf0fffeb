// chaos/history/history.h: the JSON Lines history of a chaos run.
//
// Client processes and the harness (the nemesis) append one JSON object per
// line to a history file (or each to its own file, merged when read). The
// checker (chaos/check/checker.h) proves or refutes the safety properties from it.
//
//   namespace chaos = redlock::chaos;
//   auto writer = chaos::HistoryWriter::Open("/tmp/run/history.jsonl");
//   if (!writer.ok()) return writer.status();
//   absl::Status s = (*writer)->WriteInvoke(
//       {.process = "c1", .op = 7, .resource = "r", .ttl_ms = 1000});
//   // t was left 0: stamped now on the raw clock.
//   ...
//   absl::StatusOr<std::vector<redlock::chaos::Event>> history =
//       redlock::chaos::ReadHistory({"a.jsonl", "b.jsonl"});
//
// Format (one event per line, UTF-8 JSON object, '\n'-terminated):
//
//   every event   t (int64 ns of the host's CLOCK_MONOTONIC_RAW, comparable
//                 across the processes of one host), type (string)
//   client events process (string), op (int64, one per acquire call and
//                 unique in its process; a use or release carries the op of
//                 its grant), resource (string)
//     invoke      ttl_ms                          an acquire starts; for a
//                 fair lock (optional) mode "fair" and wait_ms (how long the
//                 call may wait: its place is left no earlier than t +
//                 wait_ms unless it fails otherwise). A fair call's t is when
//                 it begins taking its place (the enqueue's start).
//     queued      (a fair call) its place is on a quorum: the enqueue's end
//     grant       token, start, valid_until, ttl_ms, drift_ms, nodes (array of
//                 node indexes that granted), fencing_token (uint64, optional),
//                 and for the lock family (optional): mode ("exclusive", the
//                 default; "shared" a reader of a reader-writer lock; "slot"
//                 a semaphore's permit; "leader" an elected leader, whose
//                 fencing_token is its term; "fair" a fair lock's holder, an
//                 exclusive lease), permits (K, with "slot"), slot
//                 (the permit's index, when known)
//     fail        code (e.g. "ABORTED"), error, outcome (optional: the
//                 library's Outcome::Kind name, e.g. "place_lost",
//                 "wait_expired", "cancelled")
//     use         token, begin, end, read, wrote, accepted (bool),
//                 fencing_token (optional: the write was fenced), write (bool,
//                 default true; false: the use only read, as readers and
//                 permit holders do, and wrote nothing), write_at
//                 (optional: when the write was sent; default end)
//     release     token, end (ns, when the call returned), ok (bool);
//                 t is when the release call started
//     extend      token, valid_until (the new end of validity as the client
//                 believes it), ok (bool: false when the extension failed and
//                 the old validity stands); t is when the extension started
//   nemesis       fault ("clock_jump", "kill", "pause", ...), target ("n2",
//                 "c3": a start and its stop share fault and target), detail,
//                 phase ("start", "stop" or "instant"), nodes (array of the
//                 node indexes the fault acts on, optional), clients (array of
//                 the client names it acts on, optional), color (the fault
//                 kind's "#rrggbb" on the timeline, optional)
//   final         resource, counter, initial (default 0): the counter read by
//                 the harness after the run
//   run           what a scenario run was, written by the harness at its end:
//                 scenario, seed (uint64), config, expected, verdict ("OK",
//                 "FAIL"), why, start (when the scenario began), nodes (every
//                 node index), clients (every client name), violations (the
//                 counts of S1..S5). Optional, all its fields too; the checker
//                 ignores it.
//
//   {"t":900,"type":"invoke","process":"c1","op":7,"resource":"r","ttl_ms":1000,
//    "mode":"fair","wait_ms":5000}
//   {"t":950,"type":"queued","process":"c1","op":7,"resource":"r"}
//
//   {"t":1200,"type":"grant","process":"c1","op":7,"resource":"r",
//    "token":"9f..","start":1000,"valid_until":900000,"ttl_ms":1000,
//    "drift_ms":12,"nodes":[0,1,2],"fencing_token":41}
//
// All times (t, start, valid_until, begin, end) are raw-clock nanoseconds.
// Required: t and type; process, op, resource in client events; token in
// grant, use and release; valid_until in grant; begin, end, read in use;
// fault in nemesis; resource, counter in final. The rest is optional.
// Unknown fields are ignored and unknown event types are kept as
// EventType::kUnknown, so old readers accept newer histories. A known field
// of the wrong type makes the line malformed. Optional fields, when absent,
// take the defaults documented on Event.

#ifndef REDLOCK_CHAOS_HISTORY_HISTORY_H_
#define REDLOCK_CHAOS_HISTORY_HISTORY_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace redlock::chaos {

// Nanoseconds of CLOCK_MONOTONIC_RAW, read with a raw syscall (not the vDSO
// and not libc's clock_gettime) so that an LD_PRELOAD clock shim cannot skew
// it. Never jumps; comparable across processes of one host. Thread-safe.
int64_t RawMonotonicNanos();

// Maps a steady-clock time point of this process onto the raw clock:
// RawMonotonicNanos() + (tp - steady_clock::now()). Use it to log a lease's
// valid_until as the client believes it (a shim that shifts the monotonic
// clock of this process shifts both terms alike).
int64_t RawFromSteady(std::chrono::steady_clock::time_point tp);

enum class EventType {
  kInvoke,
  kGrant,
  kFail,
  kUse,
  kRelease,
  kExtend,
  kNemesis,
  kFinal,
  kRun,
  kQueued,   // a fair call's place is taken (on a quorum)
  kUnknown,  // a type this reader does not know; see Event::type_name
};

// "invoke", "grant", ...; "unknown" for kUnknown.
absl::string_view EventTypeName(EventType type);

enum class FaultPhase { kStart, kStop, kInstant };

// "start", "stop", "instant".
absl::string_view FaultPhaseName(FaultPhase phase);

// One line of the history. A flat struct: only the fields of `type` are
// meaningful, the others keep their defaults.
struct Event {
  EventType type = EventType::kUnknown;
  int64_t t = 0;
  // The "type" string as read; set for every event read from a file.
  std::string type_name;
  // "file:line" for events read by ReadHistory; empty for events built in
  // code. Not written.
  std::string source;

  // Client events (invoke, grant, fail, use, release); resource also final.
  std::string process;
  int64_t op = 0;
  std::string resource;

  // invoke, grant.
  int64_t ttl_ms = 0;
  // invoke: how long a fair call may wait (0: unknown or none).
  int64_t wait_ms = 0;
  // grant, use, release.
  std::string token;
  // grant: raw time the successful attempt began (default: t) and the raw
  // time until which the client believes it holds the lock; run: when the
  // scenario began (default: t).
  int64_t start = 0;
  int64_t valid_until = 0;
  int64_t drift_ms = 0;
  // grant: the nodes that granted; nemesis: the nodes the fault acts on;
  // run: every node.
  std::vector<int> nodes;
  // grant, use: absent when fencing is off (or the write was not fenced).
  std::optional<uint64_t> fencing_token;
  // grant: the lock family's mode ("" or "exclusive", "shared", "slot",
  // "leader", "fair"), the semaphore's K, the permit's index (-1: none or
  // unknown); invoke: "fair" for a fair lock's call, else "".
  std::string mode;
  int64_t permits = 0;
  int64_t slot = -1;

  // fail.
  std::string code;
  std::string error;
  std::string outcome;

  // use: [begin, end] of the critical section; release: end of the call
  // (default: t).
  int64_t begin = 0;
  int64_t end = 0;
  // use: the counter value read and written (default: read + 1) and whether
  // the store accepted the write (default: true).
  int64_t read = 0;
  int64_t wrote = 0;
  bool accepted = true;
  // use: false for a read-only use (default: true).
  bool write = true;
  // use: when the write was sent (default: end). The write executed in
  // [write_at, end]: a client stopped after its write and before recording
  // `end` made `end` late.
  int64_t write_at = 0;

  // release, extend (default: true).
  bool ok = true;

  // nemesis.
  std::string fault;
  std::string target;
  std::string detail;
  FaultPhase phase = FaultPhase::kInstant;
  // nemesis: the clients the fault acts on; run: every client.
  std::vector<std::string> clients;
  // nemesis: the fault kind's colour on the timeline (chaos/faults/), if
  // the writer knew it.
  std::string color;

  // run.
  std::string scenario;
  uint64_t seed = 0;
  std::string config;
  std::string expected;
  std::string verdict;
  std::string why;
  std::vector<int64_t> violations;

  // final.
  int64_t counter = 0;
  int64_t initial = 0;
};

// The typed records written by HistoryWriter. A record whose t is 0 is
// stamped with RawMonotonicNanos() when written. Every member has a default,
// so designated initializers may omit any of them.
struct InvokeRecord {
  static constexpr EventType kType = EventType::kInvoke;
  int64_t t = 0;
  std::string process{};
  int64_t op = 0;
  std::string resource{};
  int64_t ttl_ms = 0;
  std::string mode{};  // "fair", or ""
  int64_t wait_ms = 0;
};

struct QueuedRecord {
  static constexpr EventType kType = EventType::kQueued;
  int64_t t = 0;
  std::string process{};
  int64_t op = 0;
  std::string resource{};
};

struct GrantRecord {
  static constexpr EventType kType = EventType::kGrant;
  int64_t t = 0;
  std::string process{};
  int64_t op = 0;
  std::string resource{};
  std::string token{};
  int64_t start = 0;
  int64_t valid_until = 0;
  int64_t ttl_ms = 0;
  int64_t drift_ms = 0;
  std::vector<int> nodes{};
  std::optional<uint64_t> fencing_token{};
  std::string mode{};
  int64_t permits = 0;
  int64_t slot = -1;
};

struct FailRecord {
  static constexpr EventType kType = EventType::kFail;
  int64_t t = 0;
  std::string process{};
  int64_t op = 0;
  std::string resource{};
  std::string code{};
  std::string error{};
  std::string outcome{};
};

struct UseRecord {
  static constexpr EventType kType = EventType::kUse;
  int64_t t = 0;
  std::string process{};
  int64_t op = 0;
  std::string resource{};
  std::string token{};
  int64_t begin = 0;
  int64_t end = 0;
  int64_t read = 0;
  int64_t wrote = 0;
  bool accepted = true;
  std::optional<uint64_t> fencing_token{};
  bool write = true;
  int64_t write_at = 0;  // 0: not recorded
};

struct ReleaseRecord {
  static constexpr EventType kType = EventType::kRelease;
  int64_t t = 0;
  std::string process{};
  int64_t op = 0;
  std::string resource{};
  std::string token{};
  int64_t end = 0;
  bool ok = true;
};

struct ExtendRecord {
  static constexpr EventType kType = EventType::kExtend;
  int64_t t = 0;
  std::string process{};
  int64_t op = 0;
  std::string resource{};
  std::string token{};
  int64_t valid_until = 0;
  bool ok = true;
};

struct NemesisRecord {
  static constexpr EventType kType = EventType::kNemesis;
  int64_t t = 0;
  std::string fault{};
  std::string target{};
  std::string detail{};
  FaultPhase phase = FaultPhase::kInstant;
  std::vector<int> nodes{};
  std::vector<std::string> clients{};
  std::string color{};  // how the timeline draws it ("#rrggbb", optional)
};

struct FinalRecord {
  static constexpr EventType kType = EventType::kFinal;
  int64_t t = 0;
  std::string resource{};
  int64_t counter = 0;
  int64_t initial = 0;
};

struct RunRecord {
  static constexpr EventType kType = EventType::kRun;
  int64_t t = 0;
  std::string scenario{};
  uint64_t seed = 0;
  std::string config{};
  std::string expected{};
  std::string verdict{};
  std::string why{};
  int64_t start = 0;
  std::vector<int> nodes{};
  std::vector<std::string> clients{};
  std::vector<int64_t> violations{};
};

// Conversions to the generic event (t is copied as is, 0 included).
Event ToEvent(const InvokeRecord& r);
Event ToEvent(const QueuedRecord& r);
Event ToEvent(const GrantRecord& r);
Event ToEvent(const FailRecord& r);
Event ToEvent(const UseRecord& r);
Event ToEvent(const ReleaseRecord& r);
Event ToEvent(const ExtendRecord& r);
Event ToEvent(const NemesisRecord& r);
Event ToEvent(const FinalRecord& r);
Event ToEvent(const RunRecord& r);

// One JSON line for `event`, '\n' included. Writes the fields of its type
// only. A kUnknown event is written with its type_name and common fields.
// Invalid UTF-8 in strings is replaced, never an error.
std::string FormatEventLine(const Event& event);

// Parses one line (with or without the trailing newline). kInvalidArgument
// names the problem (bad JSON, missing "t", a field of the wrong type, an
// unknown phase). `source` is stored in Event::source.
[[nodiscard]] absl::StatusOr<Event> ParseEventLine(absl::string_view line,
                                                   absl::string_view source = "");

// Parses a whole history text named `name` (used in "name:line" messages;
// the text's first line is line `first_line`). Blank lines are skipped. If
// `malformed` is null, the first malformed line is returned as
// kInvalidArgument "name:line: reason"; otherwise every malformed line is
// appended to *malformed as "name:line: reason" and skipped. Events keep the
// order of the text.
[[nodiscard]] absl::StatusOr<std::vector<Event>> ParseHistory(
    absl::string_view text, absl::string_view name, std::vector<std::string>* malformed = nullptr,
    int64_t first_line = 1);

// Reads one or several history files and merges them by t (stable: events
// with equal t keep file order, then line order). Malformed lines are handled
// as in ParseHistory. A file that cannot be read is an error with the errno's
// code (kNotFound for a missing file).
[[nodiscard]] absl::StatusOr<std::vector<Event>> ReadHistory(
    absl::string_view path, std::vector<std::string>* malformed = nullptr);
[[nodiscard]] absl::StatusOr<std::vector<Event>> ReadHistory(
    const std::vector<std::string>& paths, std::vector<std::string>* malformed = nullptr);

// Reads history files that writers may still be appending to, each line
// parsed once however often they are read: Update() parses what was
// appended since the last call and keeps the events, so a run that checks
// its history while it grows, and again at its end, parses every line once.
//
//   HistoryTail tail({"c1.jsonl", "nemesis.jsonl"});
//   if (tail.Update().ok()) Check(tail.Events());     // while the run goes on
//   ...
//   absl::Status s = tail.Update(/*to_end=*/true);     // the writers are done
//
// Not thread-safe.
class HistoryTail {
 public:
  explicit HistoryTail(std::vector<std::string> paths);

  // Parses the lines completed since the last call (and with `to_end`, a
  // last line without its newline too: the writers are done, a torn line is
  // malformed). Malformed lines are skipped and kept in malformed(). A file
  // that cannot be read is an error with the errno's code (kNotFound for a
  // missing file); the files read before it keep their progress.
  [[nodiscard]] absl::Status Update(bool to_end = false);

  // Every event read so far, merged by t as ReadHistory merges them.
  std::vector<Event> Events() const;
  // "file:line: reason" of every malformed line read so far, in file order.
  const std::vector<std::string>& malformed() const { return malformed_; }

 private:
  struct File {
    std::string path;
    int64_t offset = 0;  // bytes consumed: whole lines
    int64_t lines = 0;   // lines consumed
    std::vector<Event> events;
  };
  std::vector<File> files_;
  std::vector<std::string> malformed_;
};

// Appends events to a history file.
//
// Thread-safe, and several processes may append to one file: the file is
// opened with O_APPEND and each event is one write(2) of one whole line, so
// lines never interleave. There is no user-space buffer: an event is in the
// kernel (and survives a SIGKILL of the writer) when the call returns.
class HistoryWriter {
 public:
  // Opens (creating, mode 0644) `path` for append.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HistoryWriter>> Open(const std::string& path);

  HistoryWriter(const HistoryWriter&) = delete;
  HistoryWriter& operator=(const HistoryWriter&) = delete;
  ~HistoryWriter();

  // Writes one event; t == 0 is stamped with RawMonotonicNanos(). Errors
  // carry the errno's code; a short write that cannot be completed is
  // kDataLoss (the line may be torn).
  [[nodiscard]] absl::Status Write(const Event& event);

  [[nodiscard]] absl::Status WriteInvoke(const InvokeRecord& r);
  [[nodiscard]] absl::Status WriteQueued(const QueuedRecord& r);
  [[nodiscard]] absl::Status WriteGrant(const GrantRecord& r);
  [[nodiscard]] absl::Status WriteFail(const FailRecord& r);
  [[nodiscard]] absl::Status WriteUse(const UseRecord& r);
  [[nodiscard]] absl::Status WriteRelease(const ReleaseRecord& r);
  [[nodiscard]] absl::Status WriteExtend(const ExtendRecord& r);
  [[nodiscard]] absl::Status WriteNemesis(const NemesisRecord& r);
  [[nodiscard]] absl::Status WriteFinal(const FinalRecord& r);
  [[nodiscard]] absl::Status WriteRun(const RunRecord& r);

  // fdatasync(2): only needed to survive a host crash, not a process kill.
  [[nodiscard]] absl::Status Sync();

  const std::string& path() const { return path_; }

 private:
  HistoryWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
};

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_HISTORY_HISTORY_H_
