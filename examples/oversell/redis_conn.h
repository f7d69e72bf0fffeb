// A blocking hiredis connection, enough for the example's data server and
// its clock-jump controller. Any Redis client would do.

#ifndef REDLOCK_EXAMPLES_OVERSELL_REDIS_CONN_H_
#define REDLOCK_EXAMPLES_OVERSELL_REDIS_CONN_H_

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace oversell {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisConn {
 public:
  // `address` is host:port.
  static absl::StatusOr<std::unique_ptr<RedisConn>> Connect(
      const std::string& address, absl::Duration timeout = absl::Seconds(5));
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  // One command; an error reply is returned as a reply (type
  // REDIS_REPLY_ERROR), an I/O error as kUnavailable.
  absl::StatusOr<Reply> Command(const std::vector<std::string>& args);

  // Shortcuts: the integer reply, or the integer in a string reply (nil: 0).
  absl::StatusOr<long long> Integer(const std::vector<std::string>& args);

 private:
  explicit RedisConn(redisContext* c) : ctx_(c) {}
  redisContext* ctx_;
};

}  // namespace oversell

#endif  // REDLOCK_EXAMPLES_OVERSELL_REDIS_CONN_H_
