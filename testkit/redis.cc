#include "testkit/redis.h"

#include <hiredis/hiredis.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "testkit/tls.h"

namespace redlock::testkit {
namespace {

RedisValue Convert(const redisReply* r) {
  RedisValue v;
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      v.type = r->type == REDIS_REPLY_STRING   ? RedisValue::Type::kString
               : r->type == REDIS_REPLY_STATUS ? RedisValue::Type::kStatus
                                               : RedisValue::Type::kError;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = RedisValue::Type::kInteger;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = RedisValue::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(Convert(r->element[i]));
      break;
    default:
      break;
  }
  return v;
}

}  // namespace

RedisValue RedisValueFromReply(const void* redis_reply) {
  return Convert(static_cast<const redisReply*>(redis_reply));
}

std::vector<std::vector<std::string>> HandshakeCommands(const Endpoint& node) {
  std::vector<std::vector<std::string>> out;
  if (!node.password.empty()) {
    if (node.username.empty()) {
      out.push_back({"AUTH", node.password});
    } else {
      out.push_back({"AUTH", node.username, node.password});
    }
  }
  if (node.db != 0) out.push_back({"SELECT", std::to_string(node.db)});
  return out;
}

RedisConnection::RedisConnection(Endpoint endpoint, TlsOptions tls)
    : endpoint_(std::move(endpoint)), tls_(std::move(tls)), name_(endpoint_.ToString()) {}

RedisConnection::~RedisConnection() { Close(); }

void RedisConnection::Close() {
  if (c_ != nullptr) redisFree(c_);
  c_ = nullptr;
  channel_.reset();
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = nullptr;
}

absl::Status RedisConnection::Connect(absl::Duration connect_timeout,
                                      absl::Duration command_timeout) {
  Close();
  if (endpoint_.tls) {
    absl::StatusOr<std::unique_ptr<TlsChannel>> channel =
        TlsChannel::Connect(endpoint_, tls_, connect_timeout);
    if (!channel.ok()) {
      return absl::UnavailableError(absl::StrCat(name_, ": ", channel.status().message()));
    }
    channel_ = *std::move(channel);
    reader_ = redisReaderCreate();
    command_timeout_ = command_timeout;
  } else {
    redisContext* c = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port,
                                              absl::ToTimeval(connect_timeout));
    if (c == nullptr) return absl::UnavailableError(absl::StrCat(name_, ": out of memory"));
    if (c->err != 0) {
      std::string err = c->errstr;
      redisFree(c);
      return absl::UnavailableError(absl::StrCat(name_, ": ", err));
    }
    redisSetTimeout(c, absl::ToTimeval(command_timeout));
    c_ = c;
  }
  for (const auto& cmd : HandshakeCommands(endpoint_)) {
    absl::StatusOr<RedisValue> r = Command(cmd);
    if (!r.ok()) return r.status();
    if (r->is_error()) {
      Close();
      return absl::UnavailableError(absl::StrCat(name_, ": ", cmd[0], " failed: ", r->str));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisValue> RedisConnection::TlsCommand(int argc, const char** argv,
                                                       const size_t* lens) {
  char* cmd = nullptr;
  int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
  if (len < 0) return absl::InternalError(absl::StrCat(name_, ": cannot format the command"));
  absl::Status sent =
      channel_->Write(absl::string_view(cmd, static_cast<size_t>(len)), command_timeout_);
  redisFreeCommand(cmd);
  if (!sent.ok()) {
    Close();
    return absl::UnavailableError(absl::StrCat(name_, ": ", sent.message()));
  }
  // Bounded: each round reads at least one byte or fails at the deadline.
  for (int rounds = 0; rounds < 1000000; ++rounds) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
      std::string err = reader_->errstr;
      Close();
      return absl::UnavailableError(absl::StrCat(name_, ": protocol error: ", err));
    }
    if (raw != nullptr) {
      RedisValue v = Convert(static_cast<redisReply*>(raw));
      freeReplyObject(raw);
      return v;
    }
    char buf[16384];
    absl::StatusOr<size_t> n = channel_->Read(buf, sizeof(buf), command_timeout_);
    if (!n.ok()) {
      Close();
      return absl::UnavailableError(absl::StrCat(name_, ": ", n.status().message()));
    }
    redisReaderFeed(reader_, buf, *n);
  }
  Close();
  return absl::UnavailableError(absl::StrCat(name_, ": reply too long"));
}

absl::StatusOr<RedisValue> RedisConnection::Command(int argc, const char** argv,
                                                    const size_t* lens) {
  if (channel_ != nullptr) return TlsCommand(argc, argv, lens);
  if (c_ == nullptr) return absl::UnavailableError(absl::StrCat(name_, ": not connected"));
  void* raw = redisCommandArgv(c_, argc, argv, lens);
  if (raw == nullptr) {
    std::string err = c_->errstr;
    if (c_->err == REDIS_ERR_IO && absl::StrContains(err, "temporarily unavailable")) {
      err = "no reply within the timeout";
    }
    Close();
    return absl::UnavailableError(absl::StrCat(name_, ": ", err));
  }
  RedisValue v = Convert(static_cast<redisReply*>(raw));
  freeReplyObject(raw);
  return v;
}

absl::StatusOr<RedisValue> RedisConnection::Command(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return Command(static_cast<int>(argv.size()), argv.data(), lens.data());
}

absl::StatusOr<RedisValue> RunCommand(const Endpoint& node, const std::vector<std::string>& args,
                                      absl::Duration timeout, const TlsOptions& tls) {
  RedisConnection conn(node, tls);
  absl::Status st = conn.Connect(timeout, timeout);
  if (!st.ok()) return st;
  return conn.Command(args);
}

}  // namespace redlock::testkit
