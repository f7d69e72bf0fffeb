#include "redlock/internal/scheme.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/tls_stream.h"

namespace redlock::internal {

// Each defined in its scheme_<name>.cc.
const EndpointScheme& ClusterScheme();
const EndpointScheme& SentinelScheme();
const EndpointScheme& StaticScheme();

namespace {

// Asked in this order by SchemeOf: the static address, which owns every
// endpoint no other scheme claims, comes last.
const std::vector<const EndpointScheme*>& Schemes() {
  static const auto* const all = new std::vector<const EndpointScheme*>{
      &SentinelScheme(),
      &ClusterScheme(),
      &StaticScheme(),
  };
  return *all;
}

}  // namespace

const EndpointScheme& SchemeOf(const Endpoint& e) {
  for (const EndpointScheme* s : Schemes()) {
    if (s->Owns(e)) return *s;
  }
  return *Schemes().back();
}

const EndpointScheme* SchemeForUrl(absl::string_view url_scheme) {
  for (const EndpointScheme* s : Schemes()) {
    for (const std::string& u : s->UrlSchemes()) {
      if (u == url_scheme) return s;
    }
  }
  return nullptr;
}

std::string KnownUrlSchemes() {
  std::string out;
  for (auto it = Schemes().rbegin(); it != Schemes().rend(); ++it) {
    for (const std::string& u : (*it)->UrlSchemes()) {
      if (u.empty()) continue;
      absl::StrAppend(&out, out.empty() ? "" : ", ", u, "://");
    }
  }
  return out;
}

std::vector<bool> KeyRoutedNodes(const Options& options, int nodes) {
  std::vector<bool> out(static_cast<size_t>(std::max(nodes, 0)), false);
  for (size_t i = 0; i < out.size() && i < options.nodes.size(); ++i) {
    out[i] = SchemeOf(options.nodes[i]).RoutesByKey();
  }
  return out;
}

std::string KeysProblem(const Options& options, const std::vector<std::string>& keys) {
  for (const Endpoint& e : options.nodes) {
    std::string problem = SchemeOf(e).KeysProblem(e, keys);
    if (!problem.empty()) return problem;
  }
  return "";
}

StreamFactory TlsFor(const LocatorEnv& env, const std::string& name, const std::string& host) {
  const std::string& check =
      !name.empty() ? name : (!env.tls_server_name.empty() ? env.tls_server_name : host);
  return TlsStreamFactory(env.tls, check);
}

}  // namespace redlock::internal
