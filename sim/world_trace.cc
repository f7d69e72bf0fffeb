// The trace of a run (redlock-sim --trace): every command a node executed,
// with its reply, in sim/trace.h's JSON Lines format (the node's config
// lines first, then one line per command; a WAIT or WAITAOF that blocked is
// written when it is answered, with "blocked":true), for the conformance
// test that replays them against a real redis-server.

#include "sim/trace.h"
#include "sim/world_internal.h"

namespace redlock::sim {

void World::TraceNodes() {
  if (trace_ == nullptr) return;
  for (const Member& m : members_) {
    trace_->Line(TraceNodeLine(m.node->config().name, m.node->config()));
  }
}

void World::Trace(const Conn& c, const Argv& argv, const Reply& reply, bool blocked) {
  if (trace_ == nullptr) return;
  TraceEntry e;
  e.node = members_[static_cast<size_t>(c.member)].node->config().name;
  e.conn = static_cast<int64_t>(c.id);
  e.now_ms = NodeMs(c.member);
  e.argv = argv;
  e.reply = reply;
  e.blocked = blocked;
  trace_->Line(TraceLine(e));
}

}  // namespace redlock::sim
