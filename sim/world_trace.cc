// The trace of a run (redlock-sim --trace): every command a node executed,
// with its reply, as one JSON object per line, for the conformance test
// that replays them against a real redis-server (the simulated node's
// helper owns sim/trace.{h,cc}, its reader and writer; until it is merged,
// the world writes the same lines here):
//
//   {"conn":N,"now_ms":..,"node":"n0","argv":["SET","r0","<token>","NX","PX","1000"],
//    "reply":{"status":"OK"}}
//
// A reply is null (nil), {"status":"..."}, {"error":"..."}, an integer, a
// string, or an array of replies. A WAIT that blocked is written when it is
// answered.

#include "nlohmann/json.hpp"
#include "sim/world_internal.h"

namespace redlock::sim {
namespace {

nlohmann::json ReplyJson(const Reply& r) {
  switch (r.type) {
    case Reply::Type::kNil:
      return nullptr;
    case Reply::Type::kStatus:
      return nlohmann::json{{"status", r.str}};
    case Reply::Type::kError:
      return nlohmann::json{{"error", r.str}};
    case Reply::Type::kInteger:
      return r.integer;
    case Reply::Type::kString:
      return r.str;
    case Reply::Type::kArray: {
      nlohmann::json a = nlohmann::json::array();
      for (const Reply& e : r.elements) a.push_back(ReplyJson(e));
      return a;
    }
  }
  return nullptr;
}

}  // namespace

void World::Trace(const Conn& c, const Argv& argv, const Reply& reply) {
  if (trace_ == nullptr) return;
  nlohmann::json line;
  line["conn"] = c.id;
  line["now_ms"] = NodeMs(c.member);
  line["node"] = members_[static_cast<size_t>(c.member)].node->config().name;
  line["argv"] = argv;
  line["reply"] = ReplyJson(reply);
  trace_->Line(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace redlock::sim
