#include "sim/trace.h"

#include <fstream>
#include <istream>
#include <ostream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace redlock::sim {
namespace {

using json = nlohmann::json;

bool PlainAscii(const std::string& s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Field `key` of object `j` when it has type `check`; else null.
const json* Field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

absl::StatusOr<int64_t> IntField(const json& j, const char* key, int64_t fallback) {
  const json* f = Field(j, key);
  if (f == nullptr) return fallback;
  if (!f->is_number_integer())
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not an integer"));
  return f->get<int64_t>();
}

absl::StatusOr<bool> BoolField(const json& j, const char* key, bool fallback) {
  const json* f = Field(j, key);
  if (f == nullptr) return fallback;
  if (!f->is_boolean())
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not a boolean"));
  return f->get<bool>();
}

absl::StatusOr<std::string> StringField(const json& j, const char* key) {
  const json* f = Field(j, key);
  if (f == nullptr) return std::string();
  if (!f->is_string())
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not a string"));
  return f->get<std::string>();
}

json ConfigToJson(const Node::Config& c) {
  json slots = json::array();
  for (const auto& [first, last] : c.slots) slots.push_back(json::array({first, last}));
  return json{{"run_id", c.run_id},
              {"version", c.version},
              {"server_name", c.server_name},
              {"scripting", c.scripting},
              {"scripting_noperm", c.scripting_noperm},
              {"delifeq", c.delifeq},
              {"set_ifeq", c.set_ifeq},
              {"delex", c.delex},
              {"appendonly", c.appendonly},
              {"replicas", c.replicas},
              {"slots", slots},
              {"address", c.address},
              {"cluster_id", c.cluster_id}};
}

absl::StatusOr<Node::Config> ConfigFromJson(const json& j, const std::string& name) {
  if (!j.is_object()) return absl::InvalidArgumentError("\"config\" is not an object");
  Node::Config c;
  c.name = name;
  for (auto [field, key] : {std::pair<std::string*, const char*>{&c.run_id, "run_id"},
                            {&c.version, "version"},
                            {&c.server_name, "server_name"},
                            {&c.address, "address"},
                            {&c.cluster_id, "cluster_id"}}) {
    const json* f = Field(j, key);
    if (f == nullptr) continue;
    if (!f->is_string())
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not a string"));
    *field = f->get<std::string>();
  }
  for (auto [field, key] : {std::pair<bool*, const char*>{&c.scripting, "scripting"},
                            {&c.scripting_noperm, "scripting_noperm"},
                            {&c.delifeq, "delifeq"},
                            {&c.set_ifeq, "set_ifeq"},
                            {&c.delex, "delex"},
                            {&c.appendonly, "appendonly"}}) {
    absl::StatusOr<bool> v = BoolField(j, key, *field);
    if (!v.ok()) return v.status();
    *field = *v;
  }
  absl::StatusOr<int64_t> replicas = IntField(j, "replicas", 0);
  if (!replicas.ok()) return replicas.status();
  c.replicas = static_cast<int>(*replicas);
  if (const json* slots = Field(j, "slots")) {
    if (!slots->is_array()) return absl::InvalidArgumentError("\"slots\" is not an array");
    for (const json& r : *slots) {
      if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() ||
          !r[1].is_number_integer()) {
        return absl::InvalidArgumentError("a slot range is not [first, last]");
      }
      c.slots.emplace_back(r[0].get<int>(), r[1].get<int>());
    }
  }
  return c;
}

template <typename J>
std::string Dump(const J& j) {
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

absl::StatusOr<TraceEntry> EntryFromJson(const json& j) {
  TraceEntry e;
  absl::StatusOr<std::string> node = StringField(j, "node");
  if (!node.ok()) return node.status();
  e.node = *node;
  absl::StatusOr<int64_t> now = IntField(j, "now_ms", 0);
  if (!now.ok()) return now.status();
  e.now_ms = *now;
  if (Field(j, "event") != nullptr) {
    absl::StatusOr<std::string> event = StringField(j, "event");
    if (!event.ok()) return event.status();
    e.event = *event;
    if (e.event.empty()) return absl::InvalidArgumentError("an empty \"event\"");
    absl::StatusOr<bool> keep = BoolField(j, "keep_data", false);
    absl::StatusOr<int64_t> replica = IntField(j, "replica", 0);
    absl::StatusOr<int64_t> offset = IntField(j, "offset", 0);
    absl::StatusOr<int64_t> conn = IntField(j, "conn", 0);
    for (const absl::Status& st :
         {keep.status(), replica.status(), offset.status(), conn.status()}) {
      if (!st.ok()) return st;
    }
    e.keep_data = *keep;
    e.replica = static_cast<int>(*replica);
    e.offset = *offset;
    e.conn = *conn;
    return e;
  }
  absl::StatusOr<int64_t> conn = IntField(j, "conn", 0);
  if (!conn.ok()) return conn.status();
  e.conn = *conn;
  const json* argv = Field(j, "argv");
  if (argv == nullptr || !argv->is_array() || argv->empty()) {
    return absl::InvalidArgumentError("no \"argv\" (a non-empty array) and no \"event\"");
  }
  for (const json& a : *argv) {
    absl::StatusOr<std::string> s = BytesFromJson(a);
    if (!s.ok()) return s.status();
    e.argv.push_back(*std::move(s));
  }
  const json* reply = Field(j, "reply");
  if (reply == nullptr) return absl::InvalidArgumentError("a command without \"reply\"");
  absl::StatusOr<Reply> r = ReplyFromJson(*reply);
  if (!r.ok()) return r.status();
  e.reply = *std::move(r);
  absl::StatusOr<bool> blocked = BoolField(j, "blocked", false);
  if (!blocked.ok()) return blocked.status();
  e.blocked = *blocked;
  return e;
}

}  // namespace

json BytesToJson(const std::string& bytes) {
  if (PlainAscii(bytes)) return bytes;
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  return json{{"hex", hex}};
}

absl::StatusOr<std::string> BytesFromJson(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  const json* hex = j.is_object() && j.size() == 1 ? Field(j, "hex") : nullptr;
  if (hex == nullptr || !hex->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("not a byte string: ", Dump(j)));
  }
  const std::string h = hex->get<std::string>();
  if (h.size() % 2 != 0) return absl::InvalidArgumentError("an odd number of hex digits");
  std::string out;
  for (size_t i = 0; i < h.size(); i += 2) {
    const int hi = HexDigit(h[i]);
    const int lo = HexDigit(h[i + 1]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("a bad hex digit");
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

json ReplyToJson(const Reply& r) {
  switch (r.type) {
    case Reply::Type::kNil:
      return nullptr;
    case Reply::Type::kInteger:
      return r.integer;
    case Reply::Type::kString:
      return BytesToJson(r.str);
    case Reply::Type::kStatus:
      return json{{"status", BytesToJson(r.str)}};
    case Reply::Type::kError:
      return json{{"error", BytesToJson(r.str)}};
    case Reply::Type::kArray: {
      json a = json::array();
      for (const Reply& e : r.elements) a.push_back(ReplyToJson(e));
      return a;
    }
  }
  return nullptr;
}

absl::StatusOr<Reply> ReplyFromJson(const json& j) {
  if (j.is_null()) return Reply::Nil();
  if (j.is_number_integer()) return Reply::Integer(j.get<int64_t>());
  if (j.is_string()) return Reply::String(j.get<std::string>());
  if (j.is_array()) {
    std::vector<Reply> elements;
    for (const json& e : j) {
      absl::StatusOr<Reply> r = ReplyFromJson(e);
      if (!r.ok()) return r.status();
      elements.push_back(*std::move(r));
    }
    return Reply::Array(std::move(elements));
  }
  if (j.is_object() && j.size() == 1) {
    if (const json* s = Field(j, "status")) {
      absl::StatusOr<std::string> b = BytesFromJson(*s);
      if (!b.ok()) return b.status();
      return Reply::Status(*std::move(b));
    }
    if (const json* s = Field(j, "error")) {
      absl::StatusOr<std::string> b = BytesFromJson(*s);
      if (!b.ok()) return b.status();
      return Reply::Error(*std::move(b));
    }
    if (Field(j, "hex") != nullptr) {
      absl::StatusOr<std::string> b = BytesFromJson(j);
      if (!b.ok()) return b.status();
      return Reply::String(*std::move(b));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("not a reply: ", Dump(j)));
}

// The top level keeps the order of the format's description (node, conn,
// now_ms, argv, reply): a trace reads as it was written.
std::string TraceLine(const TraceEntry& e) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!e.node.empty()) j["node"] = e.node;
  if (!e.event.empty()) {
    j["now_ms"] = e.now_ms;
    j["event"] = e.event;
    if (e.event == "restart") j["keep_data"] = e.keep_data;
    if (e.event == "failover" || e.event == "replicate") j["replica"] = e.replica;
    if (e.event == "replicate") j["offset"] = e.offset;
    if (e.event == "disconnect") j["conn"] = e.conn;
    return Dump(j);
  }
  j["conn"] = e.conn;
  j["now_ms"] = e.now_ms;
  json argv = json::array();
  for (const std::string& a : e.argv) argv.push_back(BytesToJson(a));
  j["argv"] = nlohmann::ordered_json(argv);
  j["reply"] = nlohmann::ordered_json(ReplyToJson(e.reply));
  if (e.blocked) j["blocked"] = true;
  return Dump(j);
}

std::string TraceNodeLine(const std::string& name, const Node::Config& config) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["node"] = name;
  j["config"] = nlohmann::ordered_json(ConfigToJson(config));
  return Dump(j);
}

void TraceWriter::Node(const std::string& name, const Node::Config& config) {
  *out_ << TraceNodeLine(name, config) << '\n';
}

void TraceWriter::Command(const std::string& node, int64_t conn, int64_t now_ms, const Argv& argv,
                          const Reply& reply, bool blocked) {
  TraceEntry e;
  e.node = node;
  e.conn = conn;
  e.now_ms = now_ms;
  e.argv = argv;
  e.reply = reply;
  e.blocked = blocked;
  *out_ << TraceLine(e) << '\n';
}

void TraceWriter::Event(const TraceEntry& event) { *out_ << TraceLine(event) << '\n'; }

absl::StatusOr<Trace> ParseTrace(std::istream& in) {
  Trace trace;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto fail = [&](const absl::Status& st) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, ": ", st.message()));
    };
    if (j.is_discarded() || !j.is_object()) {
      return fail(absl::InvalidArgumentError("not a JSON object"));
    }
    if (const json* config = Field(j, "config")) {
      absl::StatusOr<std::string> name = StringField(j, "node");
      if (!name.ok()) return fail(name.status());
      absl::StatusOr<Node::Config> c = ConfigFromJson(*config, *name);
      if (!c.ok()) return fail(c.status());
      trace.nodes.push_back(TraceNode{*name, *std::move(c)});
      continue;
    }
    absl::StatusOr<TraceEntry> e = EntryFromJson(j);
    if (!e.ok()) return fail(e.status());
    trace.entries.push_back(*std::move(e));
  }
  return trace;
}

absl::StatusOr<Trace> ReadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open the trace ", path));
  absl::StatusOr<Trace> t = ParseTrace(in);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", t.status().message()));
  return t;
}

}  // namespace redlock::sim
