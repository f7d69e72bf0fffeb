// The static address: "host:port", redis://, rediss:// (TLS). The master is
// where the endpoint says, always; its locator has nothing to ask.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/scheme.h"

namespace redlock::internal {
namespace {

class StaticLocator final : public Locator {
 public:
  StaticLocator(const Endpoint& e, const LocatorEnv& env)
      : scheme_(e.tls ? "rediss" : "redis"),
        target_{e.host, e.port, e.tls ? TlsFor(env, e.tls_server_name, e.host) : nullptr} {}

  std::string Scheme() const override { return scheme_; }
  MasterTarget Initial() const override { return target_; }
  bool Known() const override { return true; }

 private:
  const std::string scheme_;
  const MasterTarget target_;
};

class Static final : public EndpointScheme {
 public:
  std::vector<std::string> UrlSchemes() const override { return {"", "redis", "rediss"}; }
  bool Owns(const Endpoint&) const override { return true; }

  absl::Status Parse(const UrlParts& url, Endpoint* e) const override {
    e->tls = url.scheme == "rediss";
    // A bare "host:port" needs its port; a URL without one means 6379.
    absl::Status st =
        ParseHostPort(url.text, url.hosts, url.scheme.empty() ? 0 : 6379, &e->host, &e->port);
    if (!st.ok()) return st;
    return ParseDb(url.text, url.path, &e->db);
  }

  std::string Check(const Endpoint& e) const override {
    if (!e.sentinel.sentinels.empty() || !e.sentinel.password.empty() ||
        !e.sentinel.username.empty()) {
      return "Sentinels are given without sentinel.master";
    }
    if (e.host.empty()) return "empty host";
    if (e.port < 1 || e.port > 65535) return "port out of range 1..65535";
    return "";
  }

  std::string Name(const Endpoint& e) const override { return JoinHostPort(e.host, e.port); }
  // Host names are case-insensitive.
  std::string Key(const Endpoint& e) const override { return absl::AsciiStrToLower(Name(e)); }

  bool FixedAddress(const Endpoint& e, std::string* host, int* port) const override {
    *host = e.host;
    *port = e.port;
    return true;
  }

  std::unique_ptr<Locator> MakeLocator(const Endpoint& e, LocatorEnv env) const override {
    return std::make_unique<StaticLocator>(e, env);
  }
};

}  // namespace

const EndpointScheme& StaticScheme() {
  static const Static* const scheme = new Static();
  return *scheme;
}

}  // namespace redlock::internal
