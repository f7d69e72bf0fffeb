// Sentinel discovery: redis+sentinel:// (plain) and rediss+sentinel:// (the
// Sentinels and the master over TLS). The URL names the Sentinels and the
// master's name; the locator (sentinel_locator.cc) asks the Sentinels where
// the master is and follows its failovers.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/scheme.h"
#include "redlock/internal/sentinel_locator.h"

namespace redlock::internal {
namespace {

constexpr int kSentinelPort = 26379;  // Sentinel's default port, not Redis's

class Sentinel final : public EndpointScheme {
 public:
  std::vector<std::string> UrlSchemes() const override {
    return {"redis+sentinel", "rediss+sentinel"};
  }
  bool Owns(const Endpoint& e) const override { return e.uses_sentinel(); }

  // [[user]:password@]host[:port][+host[:port]...]/master[/db]
  absl::Status Parse(const UrlParts& url, Endpoint* e) const override {
    e->tls = url.scheme == "rediss+sentinel";
    absl::string_view path = url.path;
    const size_t db_slash = path.find('/');
    absl::string_view master = path.substr(0, db_slash);
    if (master.empty()) {
      return BadEndpoint(url.text, "expected the master's name after the Sentinels: .../mymaster");
    }
    absl::StatusOr<std::string> name = PercentDecode(master);
    if (!name.ok()) return BadEndpoint(url.text, name.status().message());
    e->sentinel.master = *std::move(name);
    absl::Status st = ParseAddresses(url.text, url.hosts, kSentinelPort, &e->sentinel.sentinels);
    if (!st.ok()) return st;
    e->host.clear();
    return ParseDb(
        url.text,
        db_slash == absl::string_view::npos ? absl::string_view() : path.substr(db_slash + 1),
        &e->db);
  }

  std::string Check(const Endpoint& e) const override {
    if (e.sentinel.sentinels.empty()) return "no Sentinels to ask";
    if (e.uses_cluster())
      return "a Sentinel-managed node is not a cluster: give either Sentinels or cluster seeds";
    if (e.sentinel.sentinels.size() > kMaxSentinels) {
      return absl::StrCat(e.sentinel.sentinels.size(), " Sentinels: at most ", kMaxSentinels,
                          " per node are supported");
    }
    const std::string wrong = CheckAddresses(e.sentinel.sentinels, "a Sentinel");
    if (!wrong.empty()) return wrong;
    if (!e.sentinel.username.empty() && e.sentinel.password.empty()) {
      return "a Sentinel username needs a password";
    }
    return "";
  }

  std::string Name(const Endpoint& e) const override {
    return absl::StrCat("sentinel:", e.sentinel.master, "@", JoinAddresses(e.sentinel.sentinels));
  }

  std::unique_ptr<Locator> MakeLocator(const Endpoint& e, LocatorEnv env) const override {
    return MakeSentinelLocator(e, std::move(env));
  }
};

}  // namespace

const EndpointScheme& SentinelScheme() {
  static const Sentinel* const scheme = new Sentinel();
  return *scheme;
}

}  // namespace redlock::internal
