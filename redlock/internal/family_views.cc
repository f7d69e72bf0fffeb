// The lock family's views (family_ops.h: StartInspectFamily): the command
// that reads a primitive's state on every node, and each node's reply read
// into its FamilyNodeView.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/context.h"
#include "redlock/internal/fair_op.h"
#include "redlock/internal/fair_scripts.h"
#include "redlock/internal/family_fan_out.h"
#include "redlock/internal/family_ops.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/family_shapes.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/semaphore_op.h"

namespace redlock::internal {
namespace {

using Kind = Client::FamilyRequest::Kind;

// Whether `r` is an array of `size` elements; if not, `v` says so.
bool IsArrayOf(const Reply& r, size_t size, FamilyNodeView* v) {
  if (r.type == Reply::Type::kArray && r.elements.size() == size) return true;
  v->status = absl::InternalError(absl::StrCat("unexpected reply ", r.Describe()));
  return false;
}

// The {holder, pttl, ...} every script's view starts with, into `v`.
void ReadHolder(const Reply& r, FamilyNodeView* v) {
  v->holder = r.elements[0].str;
  const int64_t pttl = r.elements[1].integer;
  v->holder_ttl_left = pttl > 0 ? absl::Milliseconds(pttl) : absl::ZeroDuration();
}

// The counter a view ends with (left at 0 when it does not parse).
void ReadCounter(const Reply& counter, FamilyNodeView* v) {
  absl::StatusOr<uint64_t> c = ParseCounter(counter.str);
  if (c.ok()) v->fence_counter = *c;
}

// Reads a {value, pttl, counter} reply (the inspect script) into `v`.
void ReadLeaderView(const Reply& r, FamilyNodeView* v) {
  if (!IsArrayOf(r, 3, v)) return;
  ReadHolder(r, v);
  ReadCounter(r.elements[2], v);
}

// Reads a {writer, pttl, readers, waiting, counter} reply (RwInspectScript).
void ReadRwView(const Reply& r, FamilyNodeView* v) {
  if (!IsArrayOf(r, 5, v)) return;
  ReadHolder(r, v);
  v->readers = static_cast<int>(r.elements[2].integer);
  v->waiting_writers = static_cast<int>(r.elements[3].integer);
  ReadCounter(r.elements[4], v);
}

// Reads a {holder, pttl, live, {id, ticket, ms left, ...}} reply
// (FairInspectScript).
void ReadFairView(const Reply& r, FamilyNodeView* v) {
  if (!IsArrayOf(r, 4, v)) return;
  if (r.elements[3].type != Reply::Type::kArray || r.elements[3].elements.size() % 3 != 0) {
    v->status = absl::InternalError(absl::StrCat("unexpected reply ", r.Describe()));
    return;
  }
  ReadHolder(r, v);
  v->waiting = static_cast<int>(r.elements[2].integer);
  const std::vector<Reply>& e = r.elements[3].elements;
  for (size_t i = 0; i + 2 < e.size(); i += 3) {
    FamilyNodeView::Place p;
    p.waiter = e[i].str;
    int64_t ms = 0;
    if (!absl::SimpleAtoi(e[i + 1].str, &p.ticket) || !absl::SimpleAtoi(e[i + 2].str, &ms)) {
      v->status = absl::InternalError(absl::StrCat("unexpected reply ", r.Describe()));
      return;
    }
    p.ttl_left = absl::Milliseconds(ms);
    v->queue.push_back(std::move(p));
  }
}

// Reads an MGET of the permit keys.
void ReadPermitView(const Reply& r, int permits, FamilyNodeView* v) {
  if (!IsArrayOf(r, static_cast<size_t>(permits), v)) return;
  for (const Reply& e : r.elements) {
    v->permits.push_back(e.type == Reply::Type::kString ? e.str : std::string());
  }
}

}  // namespace

void StartInspectFamily(OpContext& ctx, const Client::FamilyRequest& request,
                        FamilyViewsCallback done) {
  absl::Status st = CheckFamilyRequest(request, ctx.options());
  if (!st.ok()) {
    done(st);
    return;
  }
  const std::string key = ctx.Key(request.resource);
  Command command;
  switch (request.kind) {
    case Kind::kReader:
    case Kind::kWriter:
      command = ScriptCommand(RwInspectScript(), RwKeys(key, {ctx.FenceKey(key)}), {});
      command.op = "rw-inspect";
      break;
    case Kind::kLeader:
      // The election's own counter (LeaderShape::own_counters).
      command = ScriptCommand(InspectScript(), {key, absl::StrCat(key, kFenceSuffix)}, {});
      command.op = "inspect";
      break;
    case Kind::kFair:
      command =
          ScriptCommand(FairInspectScript(), FairKeys(key), {std::to_string(kFairViewPlaces)});
      command.op = "fair-inspect";
      break;
    case Kind::kPermit: {
      AppendArrayHeader(&command.payload, 1 + static_cast<size_t>(request.permits));
      AppendBulk(&command.payload, "MGET");
      for (int i = 0; i < request.permits; ++i) {
        AppendBulk(&command.payload, ctx.Key(PermitResource(request.resource, i)));
      }
      command.expect = kExpectArray;
      command.op = "inspect";
      break;
    }
  }
  Transport* t = &ctx.transport();
  const Kind kind = request.kind;
  const int permits = request.permits;
  FanOut(ctx, command, [t, kind, permits, done = std::move(done)](Replies replies) mutable {
    std::vector<FamilyNodeView> out;
    for (size_t i = 0; i < replies.size(); ++i) {
      FamilyNodeView v;
      v.node = t->NodeName(static_cast<int>(i));
      const absl::StatusOr<Reply>& r = replies[i];
      if (!r.ok()) {
        v.status = r.status();
      } else if (r->is_error()) {
        v.status = absl::InternalError(r->str);
      } else if (kind == Kind::kLeader) {
        ReadLeaderView(*r, &v);
      } else if (kind == Kind::kPermit) {
        ReadPermitView(*r, permits, &v);
      } else if (kind == Kind::kFair) {
        ReadFairView(*r, &v);
      } else {
        ReadRwView(*r, &v);
      }
      out.push_back(std::move(v));
    }
    done(std::move(out));
  });
}

}  // namespace redlock::internal
