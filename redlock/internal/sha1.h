// SHA-1, only to name Lua scripts for EVALSHA (not for security): OpenSSL's
// digest (libcrypto, linked for TLS), written as Redis writes it.

#ifndef REDLOCK_INTERNAL_SHA1_H_
#define REDLOCK_INTERNAL_SHA1_H_

#include <string>

#include "absl/strings/string_view.h"

namespace redlock::internal {

// Lowercase hex SHA-1 of `data`, as Redis reports it from SCRIPT LOAD.
std::string Sha1Hex(absl::string_view data);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_SHA1_H_
