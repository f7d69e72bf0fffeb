// Endpoint and URL parsing: ParseEndpoint, ParseEndpointList.

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fuzz/entries.h"
#include "redlock/options.h"

namespace redlock::fuzz {

int EndpointText(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Endpoint> one = ParseEndpoint(text);
  if (one.ok()) {
    REDLOCK_FUZZ_CHECK(one->port >= 1 && one->port <= 65535, "port in range");
    REDLOCK_FUZZ_CHECK(one->db >= 0, "db not negative");
    const std::string name = one->ToString();
    if (!one->uses_sentinel()) {
      REDLOCK_FUZZ_CHECK(!one->host.empty(), "a host");
      // The name of a node is its address, which parses back to itself.
      absl::StatusOr<Endpoint> again = ParseEndpoint(name);
      REDLOCK_FUZZ_CHECK(again.ok(), "ToString() parses");
      REDLOCK_FUZZ_CHECK(again->host == one->host && again->port == one->port,
                         "ToString() parses back to the same host and port");
    } else {
      REDLOCK_FUZZ_CHECK(!one->sentinel.sentinels.empty(), "a Sentinel-managed node has Sentinels");
      for (const SentinelAddress& s : one->sentinel.sentinels) {
        REDLOCK_FUZZ_CHECK(s.port >= 1 && s.port <= 65535, "Sentinel port in range");
      }
    }
  } else {
    REDLOCK_FUZZ_CHECK(absl::IsInvalidArgument(one.status()), "bad text is kInvalidArgument");
  }
  absl::StatusOr<std::vector<Endpoint>> list = ParseEndpointList(text);
  if (list.ok()) {
    REDLOCK_FUZZ_CHECK(!list->empty(), "a list that parses is not empty");
  } else {
    REDLOCK_FUZZ_CHECK(absl::IsInvalidArgument(list.status()), "bad list is kInvalidArgument");
  }
  return 0;
}

}  // namespace redlock::fuzz
