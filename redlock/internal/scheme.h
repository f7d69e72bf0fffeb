// Endpoint schemes: each way of saying where a node is (a static address,
// Sentinel discovery) is one EndpointScheme, which parses its URL forms,
// checks an Endpoint of its kind, names it in messages and makes the
// Locator (locator.h) the engine asks where the node's master is.
//
// Adding a scheme: one scheme_<name>.cc defining its EndpointScheme (and
// its Locator), one line in the list in scheme.cc, the fields its endpoints
// need in redlock/options.h, and its tests (docs/design.md 6.8).

#ifndef REDLOCK_INTERNAL_SCHEME_H_
#define REDLOCK_INTERNAL_SCHEME_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/locator.h"
#include "redlock/internal/url.h"
#include "redlock/options.h"

namespace redlock::internal {

class TlsContext;  // tls_stream.h

// What a locator is made with.
struct LocatorEnv {
  // The node's connection settings (timeouts, backoff, reply limits; the
  // endpoint's login). Its host, port and stream are the locator's to set.
  Connection::Settings settings;
  // Trust roots and client certificate of every TLS connection (null when
  // no node uses TLS), and Options::tls.server_name.
  std::shared_ptr<TlsContext> tls;
  std::string tls_server_name;
  // The engine's side, for this node. Outlives the locator.
  Locator::Host* host = nullptr;
};

class EndpointScheme {
 public:
  virtual ~EndpointScheme() = default;

  // The URL schemes it parses, lower case ("redis", "rediss"); "" stands for
  // a bare "host:port".
  virtual std::vector<std::string> UrlSchemes() const = 0;
  // Whether `e` is of this scheme (asked in the order of the list; the last
  // one takes every endpoint).
  virtual bool Owns(const Endpoint& e) const = 0;
  // Fills *e from `url`, whose scheme is one of UrlSchemes(); credentials
  // and tls_server_name are already set. kInvalidArgument ("malformed
  // endpoint ...") otherwise.
  virtual absl::Status Parse(const UrlParts& url, Endpoint* e) const = 0;
  // What ValidateOptions finds wrong with `e` beyond the common fields
  // (credentials, db, TLS name); "" when nothing.
  virtual std::string Check(const Endpoint& e) const = 0;
  // Endpoint::ToString: the node's name in messages, without a password.
  virtual std::string Name(const Endpoint& e) const = 0;
  // Two endpoints with the same key are one node listed twice.
  virtual std::string Key(const Endpoint& e) const { return Name(e); }
  // The address the node is always at, when it has one (resolved by
  // Client::Create to refuse two entries that reach one server).
  virtual bool FixedAddress(const Endpoint& e, std::string* host, int* port) const {
    (void)e, (void)host, (void)port;
    return false;
  }
  virtual std::unique_ptr<Locator> MakeLocator(const Endpoint& e, LocatorEnv env) const = 0;
  // Whether the node's commands go to the master of their keys' hash slot
  // (a Redis Cluster): its redirections are then followed (node_calls.h),
  // and it must run the client's scripts.
  virtual bool RoutesByKey() const { return false; }
  // Why one call that touches `keys` (all of them: lock keys, counters, the
  // reader-writer lock's sets) cannot go to the node `e` of this scheme;
  // "" when it can.
  virtual std::string KeysProblem(const Endpoint& e, const std::vector<std::string>& keys) const {
    (void)e, (void)keys;
    return "";
  }
};

// Per node of `options` (the first `nodes`): whether it routes by key
// (EndpointScheme::RoutesByKey).
std::vector<bool> KeyRoutedNodes(const Options& options, int nodes);
// Why one call that touches `keys` cannot go to some node of `options`
// (EndpointScheme::KeysProblem of the first node that says so); "" when it
// can go to every node.
std::string KeysProblem(const Options& options, const std::vector<std::string>& keys);

// The scheme of an endpoint.
const EndpointScheme& SchemeOf(const Endpoint& e);
// The scheme that parses URLs starting "<url_scheme>://" (lower case), or
// null.
const EndpointScheme* SchemeForUrl(absl::string_view url_scheme);
// "redis://, rediss://, ..." for messages.
std::string KnownUrlSchemes();

// The TLS stream factory of a master or Sentinel reached at `host`: checks
// `name` if set, else Options::tls.server_name if set, else `host`.
StreamFactory TlsFor(const LocatorEnv& env, const std::string& name, const std::string& host);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SCHEME_H_
