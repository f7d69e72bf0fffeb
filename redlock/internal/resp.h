// RESP encoding of commands (what hiredis' redisFormatCommandArgv does, into a
// caller-owned buffer so several commands can share one allocation).

#ifndef REDLOCK_INTERNAL_RESP_H_
#define REDLOCK_INTERNAL_RESP_H_

#include <initializer_list>
#include <string>

#include "absl/strings/string_view.h"

namespace redlock::internal {

// Appends one command, as a RESP array of bulk strings, to `out`.
void AppendCommand(std::string* out, std::initializer_list<absl::string_view> args);

// Incremental form for commands with a variable number of arguments.
void AppendArrayHeader(std::string* out, size_t count);
void AppendBulk(std::string* out, absl::string_view arg);
// The header of a bulk string of `size` bytes ("$<size>\r\n"): its bytes
// and "\r\n" follow, written by the caller.
void AppendBulkHeader(std::string* out, size_t size);

inline std::string EncodeCommand(std::initializer_list<absl::string_view> args) {
  std::string out;
  AppendCommand(&out, args);
  return out;
}

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_RESP_H_
