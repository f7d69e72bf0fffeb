#include "redlock/internal/sha1.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"

namespace redlock::internal {

std::string Sha1Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // Only an allocation failure inside OpenSSL fails a digest of a buffer;
  // the name is then empty, which no server has loaded (EVALSHA answers
  // NOSCRIPT), rather than an exception or an abort.
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha1(), nullptr) != 1) return "";
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), static_cast<size_t>(size)));
}

}  // namespace redlock::internal
