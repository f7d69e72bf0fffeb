#include "redlock/internal/url.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace redlock::internal {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ValidHostChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

constexpr absl::string_view kServerNameParam = "tls_server_name=";

}  // namespace

absl::Status BadEndpoint(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed endpoint \"", text, "\": ", why));
}

absl::StatusOr<std::string> PercentDecode(absl::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return absl::InvalidArgumentError("truncated percent escape");
    int hi = HexValue(in[i + 1]);
    int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("bad percent escape");
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

absl::StatusOr<UrlParts> SplitUrl(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.empty()) return BadEndpoint(text, "empty");
  UrlParts parts;
  parts.text = std::string(text);
  size_t scheme_end = s.find("://");
  if (scheme_end == absl::string_view::npos) {
    parts.hosts = std::string(s);
    return parts;
  }
  parts.scheme = absl::AsciiStrToLower(s.substr(0, scheme_end));
  absl::string_view rest = s.substr(scheme_end + 3);
  if (absl::StrContains(rest, '#')) return BadEndpoint(text, "fragments are not supported");
  size_t question = rest.find('?');
  if (question != absl::string_view::npos) {
    absl::string_view query = rest.substr(question + 1);
    rest = rest.substr(0, question);
    if (!absl::StartsWith(query, kServerNameParam) || absl::StrContains(query, '&')) {
      return BadEndpoint(text, absl::StrCat("query strings are not supported, except ?",
                                            kServerNameParam, "NAME"));
    }
    absl::StatusOr<std::string> name = PercentDecode(query.substr(kServerNameParam.size()));
    if (!name.ok()) return BadEndpoint(text, name.status().message());
    if (name->empty()) return BadEndpoint(text, "empty tls_server_name");
    parts.tls_server_name = *std::move(name);
  }
  size_t at = rest.rfind('@');
  if (at != absl::string_view::npos) {
    absl::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (colon == absl::string_view::npos) {
      return BadEndpoint(text, "credentials must be user:password or :password");
    }
    absl::StatusOr<std::string> user = PercentDecode(userinfo.substr(0, colon));
    absl::StatusOr<std::string> pass = PercentDecode(userinfo.substr(colon + 1));
    if (!user.ok()) return BadEndpoint(text, user.status().message());
    if (!pass.ok()) return BadEndpoint(text, pass.status().message());
    if (pass->empty()) return BadEndpoint(text, "empty password");
    parts.username = *std::move(user);
    parts.password = *std::move(pass);
  }
  size_t slash = rest.find('/');
  parts.hosts = std::string(rest.substr(0, slash));
  if (slash != absl::string_view::npos) parts.path = std::string(rest.substr(slash + 1));
  return parts;
}

absl::Status ParseHostPort(absl::string_view text, absl::string_view hp, int default_port,
                           std::string* host_out, int* port_out) {
  absl::string_view host;
  absl::string_view port;
  bool has_port = false;
  if (absl::StartsWith(hp, "[")) {
    size_t close = hp.find(']');
    if (close == absl::string_view::npos)
      return BadEndpoint(text, "missing ']' after IPv6 address");
    host = hp.substr(1, close - 1);
    absl::string_view rest = hp.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return BadEndpoint(text, "expected ':' after ']'");
      port = rest.substr(1);
      has_port = true;
    }
    for (char c : host) {
      if (!(absl::ascii_isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) {
        return BadEndpoint(text, "invalid IPv6 address");
      }
    }
  } else {
    size_t colon = hp.rfind(':');
    if (colon != absl::string_view::npos) {
      host = hp.substr(0, colon);
      port = hp.substr(colon + 1);
      has_port = true;
      if (absl::StrContains(host, ':')) {
        return BadEndpoint(text, "IPv6 addresses must be written in brackets: [::1]:6379");
      }
    } else {
      host = hp;
    }
    for (char c : host) {
      if (!ValidHostChar(c)) {
        return BadEndpoint(text,
                           absl::StrCat("invalid character '", std::string(1, c), "' in host"));
      }
    }
  }
  if (host.empty()) return BadEndpoint(text, "empty host");
  *host_out = std::string(host);
  if (!has_port) {
    if (default_port <= 0) return BadEndpoint(text, "expected host:port");
    *port_out = default_port;
    return absl::OkStatus();
  }
  int p = 0;
  if (port.empty() || !absl::SimpleAtoi(port, &p) ||
      port.find_first_not_of("0123456789") != absl::string_view::npos) {
    return BadEndpoint(text, absl::StrCat("port \"", port, "\" is not a number"));
  }
  if (p < 1 || p > 65535) {
    return BadEndpoint(text, absl::StrCat("port ", p, " is out of range 1..65535"));
  }
  *port_out = p;
  return absl::OkStatus();
}

absl::Status ParseDb(absl::string_view text, absl::string_view path, int* db) {
  if (path.empty()) return absl::OkStatus();
  int v = 0;
  if (path.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(path, &v) || v < 0) {
    return BadEndpoint(text, absl::StrCat("database \"", path, "\" is not a non-negative number"));
  }
  *db = v;
  return absl::OkStatus();
}

std::string JoinHostPort(absl::string_view host, int port) {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::Status ParseAddresses(absl::string_view text, absl::string_view hosts, int default_port,
                            std::vector<SentinelAddress>* out) {
  for (absl::string_view one : absl::StrSplit(hosts, '+')) {
    SentinelAddress a;
    absl::Status st = ParseHostPort(text, one, default_port, &a.host, &a.port);
    if (!st.ok()) return st;
    out->push_back(std::move(a));
  }
  return absl::OkStatus();
}

std::string JoinAddresses(const std::vector<SentinelAddress>& addresses) {
  std::string out;
  for (size_t i = 0; i < addresses.size(); ++i) {
    if (i > 0) out.push_back('+');
    absl::StrAppend(&out, JoinHostPort(addresses[i].host, addresses[i].port));
  }
  return out;
}

std::string CheckAddresses(const std::vector<SentinelAddress>& addresses, absl::string_view what) {
  for (const SentinelAddress& a : addresses) {
    if (a.host.empty()) return absl::StrCat(what, " has an empty host");
    if (a.port < 1 || a.port > 65535) return absl::StrCat(what, "'s port is out of range 1..65535");
  }
  return "";
}

}  // namespace redlock::internal
