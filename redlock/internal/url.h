// The pieces of endpoint URLs that every scheme shares (scheme.h): the
// scheme, the credentials, the optional query, "host[:port]" lists and
// percent escapes. Each scheme parses its own host part and path with these.

#ifndef REDLOCK_INTERNAL_URL_H_
#define REDLOCK_INTERNAL_URL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "redlock/options.h"

namespace redlock::internal {

// An endpoint's text split at its fixed places:
//   [scheme://][[user]:password@]hosts[/path][?query]
struct UrlParts {
  std::string text;    // the whole text, for messages
  std::string scheme;  // lower case; "" for a bare "host:port"
  std::string username;
  std::string password;
  std::string hosts;  // up to the first '/'
  std::string path;   // after the first '/' ("" when none)
  // ?tls_server_name=NAME, the only query parameter: see
  // Endpoint::tls_server_name.
  std::string tls_server_name;
};

// Splits `text` (whitespace around it ignored). kInvalidArgument
// ("malformed endpoint ...") on bad credentials, escapes or query.
absl::StatusOr<UrlParts> SplitUrl(absl::string_view text);

// kInvalidArgument "malformed endpoint \"<text>\": <why>".
absl::Status BadEndpoint(absl::string_view text, absl::string_view why);

absl::StatusOr<std::string> PercentDecode(absl::string_view in);

// "host:port", "[v6]:port" or, when `default_port` > 0, also "host" and
// "[v6]" (that port then). The host is returned without brackets.
absl::Status ParseHostPort(absl::string_view text, absl::string_view hp, int default_port,
                           std::string* host, int* port);

// A database number from a URL path ("" is 0).
absl::Status ParseDb(absl::string_view text, absl::string_view path, int* db);

// "host:port", with an IPv6 host in brackets.
std::string JoinHostPort(absl::string_view host, int port);

// A node's list of servers to ask (its Sentinels, a cluster's seeds):
// "h1[:p1]+h2[:p2]..." parsed (`default_port` where none is given), joined
// back as "h1:p1+h2:p2...", and checked ("" when nothing is wrong; `what`
// names one of them in the message: "a Sentinel", "a seed").
absl::Status ParseAddresses(absl::string_view text, absl::string_view hosts, int default_port,
                            std::vector<SentinelAddress>* out);
std::string JoinAddresses(const std::vector<SentinelAddress>& addresses);
std::string CheckAddresses(const std::vector<SentinelAddress>& addresses, absl::string_view what);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_URL_H_
