#include "common/flags.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace redlock::flags {
namespace {

using Registry = std::map<std::string, absl::CommandLineFlag*>;

bool EndsWithPath(absl::string_view path, absl::string_view suffix) {
  if (!absl::EndsWith(path, suffix)) return false;
  return path.size() == suffix.size() || path[path.size() - suffix.size() - 1] == '/';
}

// The flags `options` names, by name. A name that no ABSL_FLAG defines is a
// bug of the program: kInternal.
absl::StatusOr<Registry> Accepted(const Options& options) {
  Registry out;
  for (const std::string& name : options.names) {
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      return absl::InternalError(absl::StrCat("no flag '", name, "' is defined"));
    }
    out[name] = flag;
  }
  if (!options.files.empty()) {
    for (const auto& [name, flag] : absl::GetAllFlags()) {
      const std::string file = flag->Filename();
      for (const std::string& suffix : options.files) {
        if (EndsWithPath(file, suffix)) out[std::string(name)] = flag;
      }
    }
  }
  return out;
}

std::string Display(const Options& options, absl::string_view name) {
  std::string out = absl::StrCat("--", name);
  if (options.dashes) std::replace(out.begin() + 2, out.end(), '_', '-');
  return out;
}

bool IsRepeatable(const absl::CommandLineFlag& flag) {
  return flag.IsOfType<std::vector<std::string>>();
}

std::string ValueName(const Options& options, const std::string& name,
                      const absl::CommandLineFlag& flag) {
  auto it = options.value_names.find(name);
  if (it != options.value_names.end()) return it->second;
  if (flag.IsOfType<absl::Duration>()) return "DURATION";
  if (flag.IsOfType<int>() || flag.IsOfType<int64_t>() || flag.IsOfType<uint64_t>() ||
      flag.IsOfType<uint32_t>()) {
    return "N";
  }
  if (flag.IsOfType<double>()) return "X";
  if (IsRepeatable(flag)) return "A,B,...";
  return "VALUE";
}

// Appends "  --name VALUE   text" to `out`, the text wrapped at 79 columns
// from column 26.
void AppendHelpLine(std::string* out, const std::string& head, absl::string_view text) {
  constexpr size_t kIndent = 26;
  constexpr size_t kWidth = 79;
  std::string line = head;
  if (line.size() + 2 > kIndent) {
    absl::StrAppend(out, line, "\n");
    line.clear();
  }
  line.resize(kIndent, ' ');
  bool first = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!first && line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(out, line, "\n");
      line = std::string(kIndent, ' ');
      first = true;
    }
    absl::StrAppend(&line, first ? "" : " ", word);
    first = false;
  }
  absl::StrAppend(out, line, "\n");
}

}  // namespace

const std::string* Parsed::FirstArgument() const {
  if (!positional.empty()) return &positional.front();
  if (!tail.empty()) return &tail.front();
  return nullptr;
}

bool Parsed::Given(absl::string_view name) const {
  for (const auto& [flag, value] : given) {
    if (flag == name) return true;
  }
  return false;
}

absl::StatusOr<Parsed> Parse(const std::vector<std::string>& args, const Options& options) {
  absl::StatusOr<Registry> accepted = Accepted(options);
  if (!accepted.ok()) return accepted.status();
  Parsed out;
  // A repeatable flag's values so far, joined with commas.
  std::map<std::string, std::string> joined;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--") {
      if (!options.double_dash) return absl::InvalidArgumentError("unexpected '--'");
      out.double_dash = true;
      out.tail.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg == "-h" || arg == "--help") {
      out.help = true;
      continue;
    }
    if (auto alias = options.aliases.find(arg); alias != options.aliases.end()) {
      arg = absl::StrCat("--", alias->second);
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (options.stop_at_first_positional) {
        out.tail.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
        break;
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
    std::replace(name.begin(), name.end(), '-', '_');
    auto it = accepted->find(name);
    bool negated = false;
    if (it == accepted->end() && absl::StartsWith(name, "no")) {
      auto positive = accepted->find(name.substr(2));
      if (positive != accepted->end() && positive->second->IsOfType<bool>()) {
        it = positive;
        negated = true;
      }
    }
    if (it == accepted->end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", arg.substr(0, arg.find('=')), "'"));
    }
    const std::string& flag_name = it->first;
    absl::CommandLineFlag& flag = *it->second;
    const std::string shown = Display(options, flag_name);
    std::string text;
    if (flag.IsOfType<bool>()) {
      if (negated && value.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Display(options, name), " takes no value (it is ", shown, "=false)"));
      }
      text = negated ? "false" : value.value_or("true");
    } else if (value.has_value()) {
      text = *value;
    } else if (std::find(options.optional_value.begin(), options.optional_value.end(), flag_name) !=
               options.optional_value.end()) {
      if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "-")) text = args[++i];
    } else if (i + 1 < args.size()) {
      text = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat(shown, " needs a value"));
    }
    std::string parse_text = text;
    if (IsRepeatable(flag)) {
      std::string& so_far = joined[flag_name];
      if (!so_far.empty() && !text.empty()) absl::StrAppend(&so_far, ",");
      absl::StrAppend(&so_far, text);
      parse_text = so_far;
    }
    std::string error;
    if (!flag.ParseFrom(parse_text, &error)) {
      // Abseil says "Illegal value 'x' specified for flag 'n'", then the
      // type's own reason after "; " when it gives one.
      const size_t reason = error.find("; ");
      return absl::InvalidArgumentError(absl::StrCat(shown, ": ",
                                                     reason == std::string::npos
                                                         ? absl::StrCat("bad value '", text, "'")
                                                         : error.substr(reason + 2)));
    }
    out.given.emplace_back(flag_name, text);
  }
  return out;
}

std::string Help(const Options& options) {
  absl::StatusOr<Registry> accepted = Accepted(options);
  if (!accepted.ok()) return std::string(accepted.status().message());
  std::string out;
  for (const auto& [name, flag] : *accepted) {
    std::string head = absl::StrCat("  ", Display(options, name));
    if (!flag->IsOfType<bool>()) absl::StrAppend(&head, " ", ValueName(options, name, *flag));
    std::string text = flag->Help();
    const std::string fallback = flag->DefaultValue();
    if (!fallback.empty() && fallback != "false") {
      absl::StrAppend(&text, " (default: ", fallback, ")");
    }
    AppendHelpLine(&out, head, text);
  }
  return out;
}

Parsed ParseOrExit(int argc, char** argv, absl::string_view program, absl::string_view usage,
                   const Options& options) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<Parsed> parsed = Parse(args, options);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%.*s: %.*s (see --help)\n", static_cast<int>(program.size()),
                 program.data(), static_cast<int>(parsed.status().message().size()),
                 parsed.status().message().data());
    std::exit(2);
  }
  if (parsed->help) {
    std::fprintf(stdout, "%.*s\n\nFlags:\n%s", static_cast<int>(usage.size()), usage.data(),
                 Help(options).c_str());
    std::exit(0);
  }
  return *std::move(parsed);
}

}  // namespace redlock::flags
