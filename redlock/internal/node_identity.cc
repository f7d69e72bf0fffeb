#include "redlock/internal/node_identity.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "redlock/internal/scheme.h"

namespace redlock::internal {
namespace {

// The numeric addresses `host` resolves to (empty when it does not).
std::set<std::string> Resolve(const std::string& host) {
  std::set<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {0};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof(text));
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text,
                sizeof(text));
    } else {
      continue;
    }
    out.insert(text);
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

absl::Status SameServerError(const std::vector<Endpoint>& nodes, int first, int second,
                             const char* evidence) {
  return absl::InvalidArgumentError(
      absl::StrCat("nodes[", first, "] ", nodes[first].ToString(), " and nodes[", second, "] ",
                   nodes[second].ToString(), " are the same server (", evidence,
                   "): a server listed twice would vote twice; list each server once"));
}

absl::Status CheckDistinctAddresses(const std::vector<Endpoint>& nodes) {
  std::vector<std::set<std::string>> addresses;
  std::vector<int> ports;
  addresses.reserve(nodes.size());
  // A node whose address is learnt (Sentinel discovery) is known only once
  // its locator names it: the engine's run_id check covers it.
  for (const Endpoint& e : nodes) {
    std::string host;
    int port = 0;
    const bool fixed = SchemeOf(e).FixedAddress(e, &host, &port);
    addresses.push_back(fixed ? Resolve(host) : std::set<std::string>());
    ports.push_back(port);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      if (ports[i] != ports[j]) continue;
      for (const std::string& a : addresses[j]) {
        if (addresses[i].count(a) == 0) continue;
        std::string evidence = absl::StrCat("both reach ", a, " port ", ports[i]);
        return SameServerError(nodes, static_cast<int>(i), static_cast<int>(j), evidence.c_str());
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace redlock::internal
