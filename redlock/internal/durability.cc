#include "redlock/internal/durability.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

using V = Round::Vote;

std::string Ms(const Options::Durability& d) {
  return std::to_string(absl::ToInt64Milliseconds(d.timeout));
}

std::string Replicas(int64_t n) { return absl::StrCat(n, n == 1 ? " replica" : " replicas"); }

}  // namespace

Command DurabilityCommand(const Options::Durability& d) {
  Command c;
  const std::string k = std::to_string(d.replicas);
  if (d.fsync) {
    c.payload = EncodeCommand({"WAITAOF", "1", k, Ms(d)});
    c.expect = kExpectArray;
    c.op = "waitaof";
  } else {
    c.payload = EncodeCommand({"WAIT", k, Ms(d)});
    c.expect = kExpectInteger;
    c.op = "wait";
  }
  return c;
}

Vote DurabilityVote(const absl::StatusOr<Reply>& r, const Options::Durability& d) {
  const char* what = d.fsync ? "WAITAOF" : "WAIT";
  if (!r.ok()) {
    return Vote{absl::IsCancelled(r.status()) ? V::kCancelled : V::kUnavailable,
                absl::StrCat("granted, but no answer to ", what, ": ", r.status().message())};
  }
  if (r->is_error()) {
    if (d.fsync && absl::StrContains(absl::AsciiStrToLower(r->str), "unknown command")) {
      return Vote{V::kInternal,
                  absl::StrCat("this server does not know WAITAOF (Redis 7.2 or later is needed "
                               "for durability.fsync): ",
                               r->str)};
    }
    return Vote{VoteForErrorReply(r->str), absl::StrCat(what, ": ", r->str)};
  }
  const std::string within = absl::StrCat(" within ", Ms(d), "ms (", what, ")");
  if (!d.fsync) {
    if (r->type != Reply::Type::kInteger) {
      return Vote{V::kInternal, absl::StrCat("unexpected reply to WAIT ", r->Describe())};
    }
    if (r->integer >= d.replicas) return Vote{V::kYes, ""};
    return Vote{V::kUnavailable, absl::StrCat("granted, but only ", Replicas(r->integer), " of ",
                                              d.replicas, " confirmed the write", within)};
  }
  if (r->type != Reply::Type::kArray || r->elements.size() != 2 ||
      r->elements[0].type != Reply::Type::kInteger ||
      r->elements[1].type != Reply::Type::kInteger) {
    return Vote{V::kInternal, absl::StrCat("unexpected reply to WAITAOF ", r->Describe())};
  }
  const int64_t local = r->elements[0].integer;
  const int64_t replicas = r->elements[1].integer;
  if (local >= 1 && replicas >= d.replicas) return Vote{V::kYes, ""};
  return Vote{V::kUnavailable,
              absl::StrCat("granted, but ", local >= 1 ? "" : "not fsynced on the node and ",
                           "fsynced on only ", Replicas(replicas), " of ", d.replicas, within)};
}

absl::Status CheckDurabilitySupport(NodeIo& transport, Blocking& blocking,
                                    const Options::Durability& d) {
  if (!DurabilityOn(d) || !d.fsync) return absl::OkStatus();
  struct State : SyncWaiter {
    std::mutex mu;
    int pending = 0;
    std::vector<absl::StatusOr<Reply>> replies;
  };
  auto state = std::make_shared<State>();
  const int n = transport.size();
  state->pending = n;
  state->replies.assign(static_cast<size_t>(n), absl::UnavailableError("not asked"));
  SyncCallScope sync_call;  // polled by this thread (AwaitSync below)
  Command probe;
  probe.payload = EncodeCommand({"COMMAND", "INFO", "WAITAOF"});
  probe.expect = kExpectArray;
  probe.op = "probe";
  for (int i = 0; i < n; ++i) {
    transport.Send(i, probe, [state, i](absl::StatusOr<Reply> r) {
      bool last = false;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        state->replies[static_cast<size_t>(i)] = std::move(r);
        last = --state->pending == 0;
      }
      if (last) state->SetReady();
    });
  }
  blocking.AwaitSync(state);
  std::lock_guard<std::mutex> lock(state->mu);
  for (int i = 0; i < n; ++i) {
    const absl::StatusOr<Reply>& r = state->replies[static_cast<size_t>(i)];
    if (!r.ok()) continue;  // not reachable now: its votes will tell
    // COMMAND INFO answers one entry per name, nil for an unknown command.
    bool known = r->type == Reply::Type::kArray && r->elements.size() == 1 &&
                 r->elements[0].type == Reply::Type::kArray;
    if (!known) {
      return absl::FailedPreconditionError(absl::StrCat(
          "durability.fsync needs WAITAOF (Redis 7.2 or later): ", transport.NodeName(i),
          r->is_error() ? absl::StrCat(" answered ", r->str) : " does not know it"));
    }
  }
  return absl::OkStatus();
}

}  // namespace redlock::internal
