#include "tools/cli_flags.h"

#include <sys/stat.h>

#include <cstdio>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace redlock::cli {

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
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (!command_tail) {
        return absl::InvalidArgumentError(
            "unexpected '--' (only 'run' and 'elect' take a command)");
      }
      out.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      return out;
    }
    if (arg == "-h" || arg == "--help") {
      out.help = true;
      continue;
    }
    if (arg == "--version") {
      out.version = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-' || (arg == "-")) {
      if (command_tail) {
        out.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
        return out;
      }
      out.positional.push_back(arg);
      continue;
    }
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "'"));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '--", name, "'"));
    }
    if (spec->takes_value) {
      if (!value.has_value()) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--", name, " needs a value (", spec->value_name, ")"));
        }
        value = args[++i];
      }
      out.values[name] = *value;
    } else {
      if (value.has_value() && *value != "true" && *value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " is a switch: it takes no value (or =true / =false)"));
      }
      out.values[name] = value.value_or("true");
    }
  }
  return out;
}

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec>* const flags = new std::vector<FlagSpec>{
      {"nodes", true, "LIST",
       "the Redis masters, comma-separated: host:port or redis://[[user]:pass@]host:port[/db] "
       "(default: $REDLOCK_NODES)"},
      {"all-nodes", false, "", "every node must grant (quorum = N) instead of a majority"},
      {"fencing", false, "", "fencing tokens: a lease carries a strictly increasing number"},
      {"node-timeout", true, "DUR",
       "how long one node may take to answer one command (default 50ms)"},
      {"durability", true, "K",
       "nodes with replicas: a node's grant counts only once K replicas have it (WAIT K; "
       "default 0, off)"},
      {"durability-timeout", true, "DUR",
       "how long a node waits for its replicas with --durability (default 20ms, below "
       "--node-timeout)"},
      {"key-prefix", true, "PREFIX",
       "prepended to the resource name to form the Redis key (default: none, like other "
       "Redlock clients)"},
      {"tls-ca", true, "PATH",
       "for rediss:// nodes: the CA certificates (PEM file, or a c_rehash directory) the nodes' "
       "certificates must chain to (default: $REDLOCK_TLS_CA, else the system's)"},
      {"tls-cert", true, "FILE",
       "for rediss:// nodes: client certificate for mutual TLS (default: $REDLOCK_TLS_CERT)"},
      {"tls-key", true, "FILE", "its private key (default: $REDLOCK_TLS_KEY)"},
      {"tls-server-name", true, "NAME",
       "the name the nodes' certificates are checked against, and SNI (default: "
       "$REDLOCK_TLS_SERVER_NAME, else each node's host)"},
      {"tls-insecure", false, "",
       "UNSAFE: do not check the nodes' certificates (anyone on the path can impersonate a "
       "node); for experiments only (default: $REDLOCK_TLS_INSECURE)"},
  };
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
