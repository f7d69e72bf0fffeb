// Frames the bytes of a connection into Redis replies, with hiredis' reader
// building our Reply values directly (no hiredis reply objects, no copy):
// the top-level reply is built in place in one reused slot, so the common
// replies (status, integer, short strings) cost no allocation.
//
// A node is not trusted with this process's memory: hiredis allocates an
// array as soon as its header announces the element count, and buffers a
// bulk string until all of it has arrived. So each reply is held to limits
// (Options::max_reply_bytes, Options::max_reply_elements): a reply that
// announces or reaches more is a protocol error, found before the memory is
// taken, and the connection is dropped like for any protocol violation.

#ifndef REDLOCK_INTERNAL_REPLY_READER_H_
#define REDLOCK_INTERNAL_REPLY_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "redlock/internal/reply.h"

struct redisReader;

namespace redlock::internal {

struct ReplyLimits {
  // The most bytes one reply may take on the wire (RESP encoding, nested
  // elements included).
  size_t max_bytes = size_t{1} << 20;
  // The most elements one reply may hold, counted over its nested arrays.
  size_t max_elements = 4096;
};

class ReplyReader {
 public:
  explicit ReplyReader(ReplyLimits limits = ReplyLimits());
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  // Adds bytes read from the connection. False on a protocol error (error()).
  // Call Next until it returns 0 before feeding more: the limits are checked
  // there, so at most one Feed beyond a limit is ever buffered.
  bool Feed(const char* data, size_t len);
  // The next complete reply, moved into `*out`: 1 when there is one, 0 when
  // more bytes are needed, -1 on a protocol error (error()), a reply over
  // the limits included. After an error the reader stays failed.
  int Next(Reply* out);
  std::string error() const;

  // State shared with hiredis' callbacks (reply_reader.cc).
  struct Build {
    Reply slot;           // the top-level reply being built
    size_t elements = 0;  // announced so far by the reply's arrays
    size_t max_elements = 0;
    std::string error;  // why a callback refused
  };

 private:
  // Applies the byte limit to the reply in progress; false (with error_)
  // when it is over.
  bool CheckInProgress();
  size_t Buffered() const;

  const ReplyLimits limits_;
  redisReader* reader_;
  Build build_;
  uint64_t fed_ = 0;          // bytes fed since the start
  uint64_t reply_start_ = 0;  // value of fed_ where the reply in progress began
  std::string error_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_REPLY_READER_H_
