// Fails when the library can send a command or a script the simulated node
// (sim/node.h) does not implement.
//
// Commands: every upper-case string literal in the library's sources
// (redlock/, redlock/internal/, multilock/, read at test time from
// REDLOCK_SOURCE_DIR) is a command name, an option or subcommand, or a word
// of a reply. A literal that names a command must be one the node knows
// (COMMAND INFO); the others are listed below with a command that uses them,
// which the node must accept. A new literal in the library that is neither
// fails here, and so does a row of the list whose word the library no longer
// has: the list cannot go stale.
//
// Scripts: every script of internal::AllScripts() and the fenced store's
// (redlock/fencing.h) loads under its SHA-1, and every command its body
// calls is one a script may call on the node.

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "redlock/fencing.h"
#include "redlock/internal/scripts.h"
#include "sim/node.h"

#ifndef REDLOCK_SOURCE_DIR
#error "REDLOCK_SOURCE_DIR must name the source tree"
#endif

namespace redlock::sim {
namespace {

namespace fs = std::filesystem;

// A literal that is not itself a command name.
struct Word {
  const char* word;
  // "option" / "subcommand": `use` must be accepted by the node. "reply": a
  // word the library reads in replies. "elsewhere": sent to another kind of
  // server.
  const char* kind;
  Argv use;
  const char* why;
  bool on_cluster = false;  // `use` needs a cluster member
};

const std::vector<Word>& Words() {
  static const std::vector<Word> words = {
      {"NX", "option", {"SET", "k", "v", "NX"}, "SET NX"},
      {"PX", "option", {"SET", "k", "v", "PX", "100"}, "SET PX"},
      {"LOAD", "subcommand", {"SCRIPT", "LOAD", "return 1"}, "SCRIPT LOAD"},
      {"SLOTS", "subcommand", {"CLUSTER", "SLOTS"}, "CLUSTER SLOTS", true},
      {"DOCS", "subcommand", {"COMMAND", "DOCS", "SET"}, "COMMAND DOCS"},
      {"IFEQ", "option", {"SET", "k", "v", "IFEQ", "v"}, "SET IFEQ and DELEX IFEQ"},
      {"OK", "reply", {}, "the status of SET and the handshake"},
      {"PONG", "reply", {}, "PING's status"},
      {"NOAUTH", "reply", {}, "an error code the handshake reads"},
      {"WRONGPASS", "reply", {}, "an error code (algorithm.cc)"},
      {"NOPERM", "reply", {}, "an error code (algorithm.cc)"},
      {"NOSCRIPT", "reply", {}, "an error code (node_calls.cc)"},
      {"LOADING", "reply", {}, "an error code (algorithm.cc)"},
      {"READONLY", "reply", {}, "an error code (algorithm.cc)"},
      {"OOM", "reply", {}, "an error code (algorithm.cc)"},
      {"MASTERDOWN", "reply", {}, "an error code (algorithm.cc)"},
      {"BUSY", "reply", {}, "an error code (algorithm.cc)"},
      {"CLUSTERDOWN", "reply", {}, "an error code (algorithm.cc)"},
      {"TRYAGAIN", "reply", {}, "an error code (algorithm.cc)"},
      {"MISCONF", "reply", {}, "an error code (algorithm.cc)"},
      {"NAME", "elsewhere", {}, "a URL parameter's name in a message (url.cc)"},
      {"SENTINEL",
       "elsewhere",
       {},
       "sent to Sentinels (sentinel_link.cc), not to a Redis server: the simulator models a "
       "Sentinel-managed node by its effect (sim/README.md)"},
      {"MASTER", "elsewhere", {}, "SENTINEL MASTER, as above"},
  };
  return words;
}

struct Found {
  std::string word;
  std::string where;  // file:line of its first use
};

std::vector<Found> LibraryLiterals() {
  std::map<std::string, std::string> first;
  for (const char* dir : {"redlock", "redlock/internal", "multilock"}) {
    const fs::path root = fs::path(REDLOCK_SOURCE_DIR) / dir;
    std::vector<fs::path> files;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
      const std::string ext = e.path().extension().string();
      if (ext == ".cc" || ext == ".h") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      std::ifstream in(f);
      std::string line;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        // "WORD": a quote, capitals and underscores (a capital first), a quote.
        for (size_t q = line.find('"'); q != std::string::npos; q = line.find('"', q + 1)) {
          size_t end = q + 1;
          while (end < line.size() &&
                 (absl::ascii_isupper(static_cast<unsigned char>(line[end])) || line[end] == '_')) {
            ++end;
          }
          if (end < line.size() && line[end] == '"' && end - q >= 3 &&
              absl::ascii_isupper(static_cast<unsigned char>(line[q + 1]))) {
            first.emplace(line.substr(q + 1, end - q - 1),
                          absl::StrCat(dir, "/", f.filename().string(), ":", n));
          }
        }
      }
    }
  }
  std::vector<Found> out;
  for (auto& [word, where] : first) out.push_back({word, where});
  return out;
}

// A node with every optional command on, as the newest server the library
// talks to.
Node::Config Everything() {
  return Node::Config{.name = "n",
                      .version = "7.2.4",
                      .delifeq = true,
                      .set_ifeq = true,
                      .delex = true,
                      .appendonly = true,
                      .replicas = 1,
                      .slots = {}};
}

bool Implements(Node& node, const std::string& command) {
  Session s;
  const Reply r = node.Execute(s, {"COMMAND", "INFO", command}, 0).reply;
  return r.type == Reply::Type::kArray && r.elements.size() == 1 &&
         r.elements[0].type == Reply::Type::kArray;
}

TEST(CoverageTest, TheSourceScanFindsTheLibrarysCommands) {
  std::set<std::string> words;
  for (const Found& f : LibraryLiterals()) words.insert(f.word);
  // Not a vacuous pass: the scan reads the real sources.
  for (const char* w : {"SET", "EVALSHA", "SCRIPT", "WATCH", "MULTI", "WAIT", "PING"}) {
    EXPECT_EQ(words.count(w), 1u) << w << " not found under " << REDLOCK_SOURCE_DIR;
  }
}

TEST(CoverageTest, EveryCommandTheLibraryNamesIsImplemented) {
  Node node(Everything());
  Node cluster(Node::Config{.name = "c", .slots = {{0, 16383}}, .address = "127.0.0.1:7000"});
  std::map<std::string, const Word*> listed;
  for (const Word& w : Words()) listed[w.word] = &w;
  std::set<std::string> seen;
  for (const Found& f : LibraryLiterals()) {
    seen.insert(f.word);
    auto it = listed.find(f.word);
    if (it == listed.end()) {
      EXPECT_TRUE(Implements(node, f.word))
          << "the library names " << f.word << " (" << f.where
          << "), which the simulated node does not implement: implement it in sim/node*.cc, "
             "or, if it is no command, list it in Words() with what it is";
      continue;
    }
    const Word& w = *it->second;
    if (w.use.empty()) continue;
    Node& target = w.on_cluster ? cluster : node;
    Session s;
    const Reply r = target.Execute(s, w.use, 0).reply;
    EXPECT_FALSE(r.is_error() && (absl::StartsWith(r.str, "ERR unknown") ||
                                  absl::StartsWith(r.str, "ERR syntax error")))
        << f.word << " (" << f.where << "): the node refuses " << w.why << ": " << r.Describe();
  }
  for (const Word& w : Words()) {
    EXPECT_EQ(seen.count(w.word), 1u)
        << w.word << " is listed in Words() but the library no longer has it: remove the row";
  }
}

// A second net, whatever the case of the name: the first argument of every
// command the library builds with its RESP helpers (resp.h and the
// script-free path's AppendArgs) is a command the node knows, or one sent
// elsewhere.
TEST(CoverageTest, EveryCommandBuilderNamesAnImplementedCommand) {
  Node node(Everything());
  const std::regex builder(
      "(?:EncodeCommand|AppendCommand)\\s*\\(\\s*(?:&?[\\w.\\->]+\\s*,\\s*)?\\{\\s*\"([^\"]+)\"|"
      "(?:AppendArgs|AppendBulk)\\s*\\(\\s*&?[\\w.\\->]+\\s*,\\s*\"([^\"]+)\"");
  int sites = 0;
  for (const char* dir : {"redlock", "redlock/internal", "multilock"}) {
    std::error_code ec;
    for (const fs::directory_entry& e :
         fs::directory_iterator(fs::path(REDLOCK_SOURCE_DIR) / dir, ec)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cc" && ext != ".h") continue;
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string body = text.str();
      // Each call's first 200 bytes (a call may span lines).
      for (const char* fn : {"EncodeCommand", "AppendCommand", "AppendArgs", "AppendBulk"}) {
        for (size_t at = body.find(fn); at != std::string::npos; at = body.find(fn, at + 1)) {
          const std::string call = body.substr(at, 200);
          std::smatch m;
          if (!std::regex_search(call, m, builder) || m.position(0) != 0) continue;
          const std::string name = m[1].matched ? m[1].str() : m[2].str();
          ++sites;
          const std::string upper = absl::AsciiStrToUpper(name);
          if (upper == "SENTINEL") continue;  // sent to Sentinels (Words())
          EXPECT_TRUE(Implements(node, upper))
              << e.path().filename() << " builds a command named " << name
              << ", which the simulated node does not implement";
        }
      }
    }
  }
  EXPECT_GE(sites, 20);  // the builders were found
}

TEST(CoverageTest, EveryScriptIsKnownBySha) {
  Node node(Everything());
  Session s;
  std::vector<std::pair<std::string, std::string>> scripts;  // name, body
  for (const internal::Script* script : internal::AllScripts()) {
    scripts.emplace_back(script->name, script->body);
    const Reply loaded = node.Execute(s, {"SCRIPT", "LOAD", script->body}, 0).reply;
    EXPECT_EQ(loaded.type, Reply::Type::kString) << script->name << ": " << loaded.Describe();
    EXPECT_EQ(loaded.str, script->sha) << script->name;
    const Reply exists = node.Execute(s, {"SCRIPT", "EXISTS", script->sha}, 0).reply;
    ASSERT_EQ(exists.elements.size(), 1u);
    EXPECT_EQ(exists.elements[0].integer, 1) << script->name;
  }
  scripts.emplace_back("fenced-read", std::string(FencedReadScript()));
  scripts.emplace_back("fenced-write", std::string(FencedWriteScript()));
  EXPECT_EQ(node.CachedScripts().size(), internal::AllScripts().size());
  const std::regex call("redis\\.p?call\\(\\s*['\"]([A-Za-z_|]+)['\"]");
  std::set<std::string> names;
  for (const auto& [name, body] : scripts) {
    for (std::sregex_iterator it(body.begin(), body.end(), call), end; it != end; ++it) {
      names.insert((*it)[1].str());
    }
  }
  EXPECT_GE(names.size(), 10u);  // the scripts' commands were found
  for (const std::string& name : names) {
    const std::string body = absl::StrCat("return redis.pcall('", name, "')");
    const Reply r = node.Execute(s, {"EVAL", body, "0"}, 0).reply;
    EXPECT_FALSE(r.is_error() && (absl::StrContains(r.str, "Unknown Redis command") ||
                                  absl::StrContains(r.str, "not allowed from script")))
        << "a script of the library calls " << name << ", which a script on the simulated node "
        << "cannot: " << r.Describe();
  }
}

}  // namespace
}  // namespace redlock::sim
