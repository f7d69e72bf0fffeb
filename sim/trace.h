// sim/trace.h: the commands a simulated run sent to its nodes and what they
// answered, as JSON Lines, for the conformance test
// (tests/sim/conformance_test.cc) to replay against a real redis-server.
//
// One JSON object per line, of three kinds:
//
//   {"node":"n0","config":{"version":"7.0.15","replicas":0,...}}
//       a node and its Node::Config (optional; a line before its commands)
//   {"node":"n0","conn":3,"now_ms":1000,"argv":["SET","k","v"],"reply":{"status":"OK"}}
//       one command on connection `conn` of node `node` ("node" may be left
//       out in a trace of one node) at node time `now_ms`, and its reply;
//       "blocked":true when the reply came later (WAIT, WAITAOF)
//   {"node":"n0","now_ms":5000,"event":"restart","keep_data":false}
//       something the world did to a node: "restart" (keep_data),
//       "failover" (replica), "flush_scripts", "replicate" (replica,
//       offset), "disconnect" (conn), or another name a reader may not know
//
// A reply is JSON: null (nil), a number (integer), a string (bulk), an array,
// {"status":"OK"}, {"error":"ERR ..."}. A byte string that is not plain
// ASCII, in argv or a reply, is {"hex":"00ff..."}.
//
//   std::ofstream out(path);
//   TraceWriter w(&out);
//   w.Node("n0", config);
//   w.Command("n0", 1, now_ms, argv, result.reply);
//   absl::StatusOr<Trace> t = ReadTrace(path);

#ifndef REDLOCK_SIM_TRACE_H_
#define REDLOCK_SIM_TRACE_H_

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/node.h"

namespace redlock::sim {

struct TraceEntry {
  std::string node;  // "" in a trace of one node
  int64_t now_ms = 0;
  // A command (event empty).
  int64_t conn = 0;
  Argv argv;
  Reply reply;
  bool blocked = false;
  // An event.
  std::string event;
  bool keep_data = false;  // restart
  int replica = 0;         // failover, replicate
  int64_t offset = 0;      // replicate
};

struct TraceNode {
  std::string name;
  Node::Config config;
};

struct Trace {
  std::vector<TraceNode> nodes;     // in the order of their lines
  std::vector<TraceEntry> entries;  // commands and events, in order
};

// Replies and byte strings as the format above writes them.
nlohmann::json ReplyToJson(const Reply& reply);
absl::StatusOr<Reply> ReplyFromJson(const nlohmann::json& j);
nlohmann::json BytesToJson(const std::string& bytes);
absl::StatusOr<std::string> BytesFromJson(const nlohmann::json& j);

// One line (without its newline).
std::string TraceLine(const TraceEntry& entry);
std::string TraceNodeLine(const std::string& name, const Node::Config& config);

// Writes lines to a stream the caller owns.
class TraceWriter {
 public:
  explicit TraceWriter(std::ostream* out) : out_(out) {}
  void Node(const std::string& name, const Node::Config& config);
  void Command(const std::string& node, int64_t conn, int64_t now_ms, const Argv& argv,
               const Reply& reply, bool blocked = false);
  void Event(const TraceEntry& event);

 private:
  std::ostream* out_;
};

// Parses a trace; an error names the line and what is wrong with it. Blank
// lines and lines starting with '#' are skipped.
absl::StatusOr<Trace> ParseTrace(std::istream& in);
absl::StatusOr<Trace> ReadTrace(const std::string& path);

}  // namespace redlock::sim

#endif  // REDLOCK_SIM_TRACE_H_
