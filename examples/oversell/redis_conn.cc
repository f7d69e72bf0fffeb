#include "examples/oversell/redis_conn.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace oversell {

absl::StatusOr<std::unique_ptr<RedisConn>> RedisConn::Connect(const std::string& address,
                                                              absl::Duration timeout) {
  std::vector<std::string> parts = absl::StrSplit(address, ':');
  int port = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", address, " (want host:port)"));
  }
  timeval tv = absl::ToTimeval(timeout);
  redisContext* c = redisConnectWithTimeout(parts[0].c_str(), port, tv);
  if (c == nullptr || c->err) {
    std::string err = c != nullptr ? c->errstr : "out of memory";
    if (c != nullptr) redisFree(c);
    return absl::UnavailableError(absl::StrCat(address, ": ", err));
  }
  redisSetTimeout(c, tv);
  return std::unique_ptr<RedisConn>(new RedisConn(c));
}

RedisConn::~RedisConn() { redisFree(ctx_); }

absl::StatusOr<Reply> RedisConn::Command(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lens.data()));
  if (r == nullptr) return absl::UnavailableError(absl::StrCat("redis: ", ctx_->errstr));
  return Reply(r);
}

absl::StatusOr<long long> RedisConn::Integer(const std::vector<std::string>& args) {
  absl::StatusOr<Reply> r = Command(args);
  if (!r.ok()) return r.status();
  const redisReply& reply = **r;
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      return reply.integer;
    case REDIS_REPLY_NIL:
      return 0;
    case REDIS_REPLY_STRING: {
      long long v = 0;
      if (absl::SimpleAtoi(absl::string_view(reply.str, reply.len), &v)) return v;
      break;
    }
    case REDIS_REPLY_ERROR:
      return absl::InternalError(absl::StrCat(args[0], ": ", reply.str));
    default:
      break;
  }
  return absl::InternalError(absl::StrCat(args[0], ": not an integer reply"));
}

}  // namespace oversell
