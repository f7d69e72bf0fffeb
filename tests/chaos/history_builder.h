// tests/chaos/history_builder.h: builds chaos histories in code, the way
// the workload writes them, for the checker and timeline tests (no server).
//
//   synthetic::Builder b;
//   const std::string t1 = b.Grant("c1", 1, 0, 10, 1000);
//   b.Release("c1", 1, t1, 500);
//   CheckResult r = Check(b.events);

#ifndef REDLOCK_TESTS_CHAOS_HISTORY_BUILDER_H_
#define REDLOCK_TESTS_CHAOS_HISTORY_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chaos/history/history.h"

namespace redlock::chaos::synthetic {

// Times in the tests are milliseconds after an arbitrary raw-clock origin.
inline constexpr int64_t kOrigin = int64_t{1'000'000'000'000};
inline int64_t Ms(int64_t ms) { return kOrigin + ms * 1'000'000; }

// Builds histories the way the workload writes them.
class Builder {
 public:
  // An acquire by `process` (op `op`) whose attempt starts at `start`,
  // granted at `granted`, valid until `valid_until` (all ms). Returns the
  // token.
  std::string Grant(const std::string& process, int64_t op, int64_t start, int64_t granted,
                    int64_t valid_until, std::optional<uint64_t> fencing = std::nullopt,
                    const std::string& resource = "r") {
    events.push_back(ToEvent(InvokeRecord{
        .t = Ms(start), .process = process, .op = op, .resource = resource, .ttl_ms = 1000}));
    return PushGrant(GrantRecord{.t = Ms(granted),
                                 .process = process,
                                 .op = op,
                                 .resource = resource,
                                 .start = Ms(start),
                                 .valid_until = Ms(valid_until),
                                 .nodes = {0, 1, 2},
                                 .fencing_token = fencing});
  }

  // A grant of the lock family: `mode` "exclusive", "shared", "slot" or
  // "leader", with K `permits` and the permit's `slot` for "slot".
  std::string FamilyGrant(const std::string& process, int64_t op, int64_t start, int64_t granted,
                          int64_t valid_until, const std::string& mode,
                          std::optional<uint64_t> fencing = std::nullopt, int64_t permits = 0,
                          int64_t slot = -1, const std::string& resource = "r") {
    const std::string token = Grant(process, op, start, granted, valid_until, fencing, resource);
    events.back().mode = mode;
    events.back().permits = permits;
    events.back().slot = slot;
    return token;
  }

  // A fair lock's call by `process` (op `op`): invoked at `start` with a
  // wait of `wait_ms` (0: not recorded), its place on a quorum at `queued`
  // (none: it never took one), and granted at `granted` (none: not granted;
  // add FairEnd). Returns the token ("" when not granted).
  std::string FairCall(const std::string& process, int64_t op, int64_t start,
                       std::optional<int64_t> queued, std::optional<int64_t> granted,
                       int64_t wait_ms = 0) {
    events.push_back(ToEvent(InvokeRecord{.t = Ms(start),
                                          .process = process,
                                          .op = op,
                                          .resource = "r",
                                          .ttl_ms = 1000,
                                          .mode = "fair",
                                          .wait_ms = wait_ms}));
    if (queued.has_value()) {
      events.push_back(
          ToEvent(QueuedRecord{.t = Ms(*queued), .process = process, .op = op, .resource = "r"}));
    }
    if (!granted.has_value()) return "";
    return PushGrant(GrantRecord{.t = Ms(*granted),
                                 .process = process,
                                 .op = op,
                                 .resource = "r",
                                 .start = Ms(*granted) - 1'000'000,
                                 .valid_until = Ms(*granted + 900),
                                 .mode = "fair"});
  }
  // The end of a fair call that was not granted: `outcome` as the library
  // names it ("wait_expired", "place_lost", "cancelled").
  void FairEnd(const std::string& process, int64_t op, int64_t t, const std::string& outcome,
               const std::string& code = "ABORTED") {
    events.push_back(ToEvent(FailRecord{.t = Ms(t),
                                        .process = process,
                                        .op = op,
                                        .resource = "r",
                                        .code = code,
                                        .error = outcome,
                                        .outcome = outcome}));
  }

  // A use that only read (a reader's, a permit holder's).
  void ReadUse(const std::string& process, int64_t op, const std::string& token, int64_t begin,
               int64_t end, int64_t read, const std::string& resource = "r") {
    Use(process, op, token, begin, end, read, true, std::nullopt, resource);
    events.back().wrote = read;
    events.back().write = false;
  }

  void Fail(const std::string& process, int64_t op, int64_t start, int64_t t,
            const std::string& code = "ABORTED") {
    events.push_back(
        ToEvent(InvokeRecord{.t = Ms(start), .process = process, .op = op, .resource = "r"}));
    events.push_back(ToEvent(FailRecord{.t = Ms(t),
                                        .process = process,
                                        .op = op,
                                        .resource = "r",
                                        .code = code,
                                        .error = "held by someone else"}));
  }

  void Use(const std::string& process, int64_t op, const std::string& token, int64_t begin,
           int64_t end, int64_t read, bool accepted = true,
           std::optional<uint64_t> fencing = std::nullopt, const std::string& resource = "r") {
    events.push_back(ToEvent(UseRecord{.t = Ms(end),
                                       .process = process,
                                       .op = op,
                                       .resource = resource,
                                       .token = token,
                                       .begin = Ms(begin),
                                       .end = Ms(end),
                                       .read = read,
                                       .wrote = read + 1,
                                       .accepted = accepted,
                                       .fencing_token = fencing}));
  }

  void Release(const std::string& process, int64_t op, const std::string& token, int64_t t,
               const std::string& resource = "r") {
    events.push_back(ToEvent(ReleaseRecord{.t = Ms(t),
                                           .process = process,
                                           .op = op,
                                           .resource = resource,
                                           .token = token,
                                           .end = Ms(t) + 100'000,
                                           .ok = true}));
  }

  void Nemesis(int64_t t, const std::string& fault, const std::string& target, FaultPhase phase,
               const std::string& detail = "", std::vector<int> nodes = {},
               std::vector<std::string> clients = {}) {
    events.push_back(ToEvent(NemesisRecord{.t = Ms(t),
                                           .fault = fault,
                                           .target = target,
                                           .detail = detail,
                                           .phase = phase,
                                           .nodes = std::move(nodes),
                                           .clients = std::move(clients)}));
  }

  void Final(int64_t t, int64_t counter, int64_t initial = 0, const std::string& resource = "r") {
    events.push_back(ToEvent(
        FinalRecord{.t = Ms(t), .resource = resource, .counter = counter, .initial = initial}));
  }

  std::vector<Event> events;

 private:
  // Adds `grant` with the token "tok-<process>-<op>", a ttl of 1000 ms and a
  // drift of 12 ms; returns the token.
  std::string PushGrant(GrantRecord grant) {
    grant.token = absl::StrCat("tok-", grant.process, "-", grant.op);
    grant.ttl_ms = 1000;
    grant.drift_ms = 12;
    events.push_back(ToEvent(grant));
    return grant.token;
  }
};

}  // namespace redlock::chaos::synthetic

#endif  // REDLOCK_TESTS_CHAOS_HISTORY_BUILDER_H_
