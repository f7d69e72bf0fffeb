#include "tools/cli_flags.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"

// Every flag of the tool. The global ones' help is what `redlock --help`
// prints; a subcommand's own flags are described by its CommandSpec
// (tools/redlock_cli.cc), whose wording fits that subcommand.
using redlock::cli::DurationText;
ABSL_FLAG(std::string, nodes, "",
          "the Redis masters, comma-separated: host:port or redis://[[user]:pass@]host:port[/db] "
          "(default: $REDLOCK_NODES)");
ABSL_FLAG(bool, all_nodes, false, "every node must grant (quorum = N) instead of a majority");
ABSL_FLAG(bool, fair, false, "acquire, run, release: the fair lock (first come, first served)");
ABSL_FLAG(bool, fencing, false, "fencing tokens: a lease carries a strictly increasing number");
ABSL_FLAG(DurationText, node_timeout, DurationText{},
          "how long one node may take to answer one command (default 50ms)");
ABSL_FLAG(int, durability, 0,
          "nodes with replicas: a node's grant counts only once K replicas have it (WAIT K; "
          "default 0, off)");
ABSL_FLAG(DurationText, durability_timeout, DurationText{},
          "how long a node waits for its replicas with --durability (default 20ms, below "
          "--node-timeout)");
ABSL_FLAG(std::string, key_prefix, "",
          "prepended to the resource name to form the Redis key (default: none, like other "
          "Redlock clients)");
ABSL_FLAG(std::string, tls_ca, "",
          "for rediss:// nodes: the CA certificates (PEM file, or a c_rehash directory) the "
          "nodes' certificates must chain to (default: $REDLOCK_TLS_CA, else the system's)");
ABSL_FLAG(std::string, tls_cert, "",
          "for rediss:// nodes: client certificate for mutual TLS (default: $REDLOCK_TLS_CERT)");
ABSL_FLAG(std::string, tls_key, "", "its private key (default: $REDLOCK_TLS_KEY)");
ABSL_FLAG(std::string, tls_server_name, "",
          "the name the nodes' certificates are checked against, and SNI (default: "
          "$REDLOCK_TLS_SERVER_NAME, else each node's host)");
ABSL_FLAG(bool, tls_insecure, false,
          "UNSAFE: do not check the nodes' certificates (anyone on the path can impersonate a "
          "node); for experiments only (default: $REDLOCK_TLS_INSECURE)");
ABSL_FLAG(bool, version, false, "print the version");
// The subcommands' own flags.
ABSL_FLAG(std::string, resource, "", "the lock name (the Redis key, after --key-prefix)");
ABSL_FLAG(DurationText, ttl, DurationText{}, "the lease's ttl");
ABSL_FLAG(DurationText, wait, DurationText{}, "how long to wait for the lock (or leadership)");
ABSL_FLAG(DurationText, grace, DurationText{},
          "run, elect: how long CMD may run on after the lease is lost");
ABSL_FLAG(std::string, at_risk_signal, "",
          "run, elect: the signal sent to CMD when the lease is at risk");
ABSL_FLAG(DurationText, max_hold, DurationText{}, "run, elect: renew no longer than this in all");
ABSL_FLAG(std::string, id, "", "elect: this candidate's identity");
ABSL_FLAG(std::string, token, "", "release, extend: the token printed by acquire");
ABSL_FLAG(bool, json, false, "status: print one JSON object");
ABSL_FLAG(bool, metrics, false, "status: then a probe acquire+release, and the metrics");

namespace redlock::cli {
namespace {

std::string Underscored(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::string Dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
      return kExitUsage;
    case absl::StatusCode::kAborted:
      return kExitHeld;
    case absl::StatusCode::kUnavailable:
      return kExitUnavailable;
    case absl::StatusCode::kFailedPrecondition:
      return kExitLeaseLost;
    case absl::StatusCode::kDeadlineExceeded:
      return kExitTimedOut;
    default:
      return kExitInternal;
  }
}

bool AbslParseFlag(absl::string_view text, DurationText* out, std::string* error) {
  absl::StatusOr<absl::Duration> d = ParseDurationFlag("", text, /*allow_zero=*/true);
  if (!d.ok()) {
    // "--: bad duration ..." without the flag, which the parser names.
    *error = std::string(absl::StripPrefix(d.status().message(), "--: "));
    return false;
  }
  out->text = std::string(absl::StripAsciiWhitespace(text));
  return true;
}

std::string AbslUnparseFlag(const DurationText& d) { return d.text; }

absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view text,
                                                 bool allow_zero) {
  const std::string hint = "(a number and a unit, e.g. 500ms, 30s, 2m)";
  absl::Duration d;
  text = absl::StripAsciiWhitespace(text);
  // absl::ParseDuration accepts a bare "0" and "inf"; a lock tool should not.
  bool has_unit = !text.empty() && absl::ascii_isalpha(static_cast<unsigned char>(text.back()));
  if (text.empty() || !has_unit || absl::StrContains(text, "inf") ||
      !absl::ParseDuration(text, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": bad duration '", text, "' ", hint));
  }
  if (d < absl::ZeroDuration() || (d == absl::ZeroDuration() && !allow_zero)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": must be ",
                                                   allow_zero ? "zero or more" : "more than zero",
                                                   ", not '", text, "'"));
  }
  return d;
}

std::string ParsedArgs::Get(const std::string& name, std::string fallback) const {
  auto it = values.find(name);
  return it == values.end() ? std::move(fallback) : it->second;
}

bool ParsedArgs::Switch(const std::string& name) const { return Get(name, "false") == "true"; }

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<FlagSpec>& specs,
                                     const std::vector<std::string>& args, bool command_tail) {
  flags::Options options;
  options.names.push_back("version");
  for (const FlagSpec& spec : specs) {
    const std::string name = Underscored(spec.name);
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr || flag->IsOfType<bool>() == spec.takes_value) {
      return absl::InternalError(absl::StrCat("--", spec.name, ": no such ",
                                              spec.takes_value ? "flag" : "switch",
                                              " is defined (tools/cli_flags.cc)"));
    }
    options.names.push_back(name);
  }
  options.stop_at_first_positional = command_tail;
  options.double_dash = command_tail;
  absl::StatusOr<flags::Parsed> parsed = flags::Parse(args, options);
  if (!parsed.ok()) {
    if (parsed.status().message() == "unexpected '--'") {
      return absl::InvalidArgumentError("unexpected '--' (only 'run' and 'elect' take a command)");
    }
    return parsed.status();
  }
  ParsedArgs out;
  out.help = parsed->help;
  out.positional = parsed->positional;
  out.command = parsed->tail;
  for (const auto& [name, value] : parsed->given) {
    std::string text = value;
    if (absl::FindCommandLineFlag(name)->IsOfType<bool>()) {
      bool on = false;
      std::string error;
      // Parse already took it: true/false, 1/0, yes/no, t/f, y/n.
      if (absl::ParseFlag(value, &on, &error)) text = on ? "true" : "false";
    }
    if (name == "version") {
      out.version = text == "true";
    } else {
      out.values[Dashed(name)] = text;
    }
  }
  return out;
}

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec>* const flags = [] {
    // {name, value name}; the help is the flag's own (ABSL_FLAG above).
    const std::vector<std::pair<std::string, std::string>> names = {
        {"nodes", "LIST"},        {"all-nodes", ""},           {"fencing", ""},
        {"node-timeout", "DUR"},  {"durability", "K"},         {"durability-timeout", "DUR"},
        {"key-prefix", "PREFIX"}, {"tls-ca", "PATH"},          {"tls-cert", "FILE"},
        {"tls-key", "FILE"},      {"tls-server-name", "NAME"}, {"tls-insecure", ""},
    };
    auto* out = new std::vector<FlagSpec>;
    for (const auto& [name, value_name] : names) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(Underscored(name));
      out->push_back({name, !value_name.empty(), value_name, flag != nullptr ? flag->Help() : ""});
    }
    return out;
  }();
  return *flags;
}

std::string FormatFlagHelp(const std::vector<FlagSpec>& specs) {
  constexpr size_t kIndent = 24;  // where the help text starts
  constexpr size_t kWidth = 79;
  std::string out;
  for (const FlagSpec& s : specs) {
    std::string line = absl::StrCat("  --", s.name);
    if (s.takes_value) absl::StrAppend(&line, " ", s.value_name);
    if (line.size() + 2 > kIndent) {
      absl::StrAppend(&out, line, "\n");
      line.clear();
    }
    line.resize(kIndent, ' ');
    bool first = true;
    for (absl::string_view word : absl::StrSplit(s.help, ' ', absl::SkipEmpty())) {
      if (!first && line.size() + 1 + word.size() > kWidth) {
        absl::StrAppend(&out, line, "\n");
        line = std::string(kIndent, ' ');
        first = true;
      }
      absl::StrAppend(&line, first ? "" : " ", word);
      first = false;
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

absl::StatusOr<Options> OptionsFromFlags(const ParsedArgs& args, const char* env_nodes,
                                         const EnvLookup& env) {
  Options options;
  std::string source = "--nodes";
  std::string text;
  if (args.Has("nodes")) {
    text = args.Get("nodes");
  } else if (env_nodes != nullptr && *env_nodes != '\0') {
    source = "REDLOCK_NODES";
    text = env_nodes;
  } else {
    return absl::InvalidArgumentError("no nodes: pass --nodes host:port,... or set REDLOCK_NODES");
  }
  absl::StatusOr<std::vector<Endpoint>> nodes = ParseEndpointList(text);
  if (!nodes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", nodes.status().message()));
  }
  options.nodes = *std::move(nodes);
  if (args.Switch("all-nodes")) options.quorum = static_cast<int>(options.nodes.size());
  options.fencing = args.Switch("fencing");
  options.key_prefix = args.Get("key-prefix");
  if (args.Has("node-timeout")) {
    absl::StatusOr<absl::Duration> d = ParseDurationFlag("node-timeout", args.Get("node-timeout"));
    if (!d.ok()) return d.status();
    options.node_timeout = *d;
  }
  // Each --tls-* flag, else its REDLOCK_TLS_* variable.
  auto tls_setting = [&](const char* flag, const char* variable) -> std::string {
    if (args.Has(flag)) return args.Get(flag);
    const char* v = env ? env(variable) : nullptr;
    return v != nullptr ? v : "";
  };
  const std::string ca = tls_setting("tls-ca", "REDLOCK_TLS_CA");
  struct stat st;
  if (!ca.empty() && stat(ca.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    options.tls.ca_dir = ca;
  } else {
    options.tls.ca_file = ca;  // a missing file is reported by Client::Create
  }
  options.tls.cert_file = tls_setting("tls-cert", "REDLOCK_TLS_CERT");
  options.tls.key_file = tls_setting("tls-key", "REDLOCK_TLS_KEY");
  options.tls.server_name = tls_setting("tls-server-name", "REDLOCK_TLS_SERVER_NAME");
  if (args.Has("tls-insecure")) {
    options.tls.verify_peer = !args.Switch("tls-insecure");
  } else {
    const char* v = env ? env("REDLOCK_TLS_INSECURE") : nullptr;
    const std::string insecure = absl::AsciiStrToLower(v != nullptr ? v : "");
    if (insecure == "1" || insecure == "true" || insecure == "yes") {
      options.tls.verify_peer = false;
    } else if (!insecure.empty() && insecure != "0" && insecure != "false" && insecure != "no") {
      return absl::InvalidArgumentError(absl::StrCat("REDLOCK_TLS_INSECURE is \"", insecure,
                                                     "\": expected 1, true, yes, 0, false or no"));
    }
  }
  if (args.Has("durability")) {
    int k = 0;
    if (!absl::SimpleAtoi(args.Get("durability"), &k) || k < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--durability: \"", args.Get("durability"),
                                                     "\" is not a number of replicas"));
    }
    options.durability.replicas = k;
  }
  if (args.Has("durability-timeout")) {
    absl::StatusOr<absl::Duration> d =
        ParseDurationFlag("durability-timeout", args.Get("durability-timeout"));
    if (!d.ok()) return d.status();
    options.durability.timeout = *d;
  }
  if (absl::Status st = ValidateOptions(options); !st.ok()) return st;
  return options;
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

void PrintError(absl::string_view command, absl::string_view message) {
  std::string line = absl::StrReplaceAll(message, {{"\r\n", " "}, {"\n", " "}, {"\r", " "}});
  std::string prefix = command.empty() ? "redlock" : absl::StrCat("redlock ", command);
  std::fprintf(stderr, "%s: %s\n", prefix.c_str(), line.c_str());
  std::fflush(stderr);
}

}  // namespace redlock::cli
