// Frames the bytes of a connection into Redis replies, with hiredis' reader
// building our Reply values directly (no hiredis reply objects, no copy):
// the top-level reply is built in place in one reused slot, so the common
// replies (status, integer, short strings) cost no allocation.

#ifndef REDLOCK_INTERNAL_REPLY_READER_H_
#define REDLOCK_INTERNAL_REPLY_READER_H_

#include <cstddef>
#include <string>

#include "redlock/internal/reply.h"

struct redisReader;

namespace redlock::internal {

class ReplyReader {
 public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  // Adds bytes read from the connection. False on a protocol error (error()).
  bool Feed(const char* data, size_t len);
  // The next complete reply, moved into `*out`: 1 when there is one, 0 when
  // more bytes are needed, -1 on a protocol error (error()).
  int Next(Reply* out);
  std::string error() const;

 private:
  redisReader* reader_;
  Reply slot_;  // the top-level reply being built
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_REPLY_READER_H_
