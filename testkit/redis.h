// A blocking Redis client for test equipment (tests, bench, chaos, examples):
// one reply type, one connection type, and a one-shot command.
//
//   RedisConnection conn(endpoint);               // AUTH/SELECT as the endpoint says
//   REDLOCK_RETURN_IF_ERROR(conn.Connect(absl::Seconds(1), absl::Seconds(5)));
//   absl::StatusOr<RedisValue> v = conn.Command({"GET", "k"});
//
//   absl::StatusOr<RedisValue> pong = RunCommand(endpoint, {"PING"});  // fresh connection
//
// Plain hiredis underneath, nothing from the library, so it can check the
// library from the outside; for a TLS endpoint (rediss://) the kit's own
// TlsChannel (tls.h) carries the bytes and hiredis' reader parses the
// replies. This header does not include hiredis.
//
// Thread-safety: a RedisConnection is not thread-safe; RunCommand is.

#ifndef REDLOCK_TESTKIT_REDIS_H_
#define REDLOCK_TESTKIT_REDIS_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redlock/options.h"

struct redisContext;
struct redisReader;

namespace redlock::testkit {

// A reply, rendered simply: nil, status/string/error text, integer, array.
struct RedisValue {
  enum class Type { kNil, kStatus, kString, kInteger, kError, kArray };
  Type type = Type::kNil;
  std::string str;
  long long integer = 0;
  std::vector<RedisValue> elements;

  bool is_error() const { return type == Type::kError; }
  bool is_nil() const { return type == Type::kNil; }
};

// Converts a hiredis redisReply (given as const void*, so this header does
// not pull in hiredis).
RedisValue RedisValueFromReply(const void* redis_reply);

// What a fresh connection to `node` sends first: AUTH and SELECT as the
// endpoint says (none for a default endpoint).
std::vector<std::vector<std::string>> HandshakeCommands(const Endpoint& node);

class TlsChannel;

// One blocking connection to one node, reusable across commands.
class RedisConnection {
 public:
  // `tls`: trust roots, client certificate and verification for an endpoint
  // with `tls` set (ignored for a plain one).
  explicit RedisConnection(Endpoint endpoint, TlsOptions tls = {});
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // "host:port", the prefix of every error message.
  const std::string& name() const { return name_; }
  bool connected() const { return c_ != nullptr || channel_ != nullptr; }

  // (Re)connects within `connect_timeout`, then AUTH and SELECT as the
  // endpoint says; every later command may take `command_timeout`.
  // kUnavailable on failure (also an AUTH or SELECT refused).
  absl::Status Connect(absl::Duration connect_timeout, absl::Duration command_timeout);

  // One command and its reply; an error reply is a RedisValue of kError. On
  // an I/O error or a timeout (a hiredis context is unusable afterwards) the
  // connection is closed and kUnavailable returned: Connect() again.
  absl::StatusOr<RedisValue> Command(const std::vector<std::string>& args);
  // The same with the arguments already split (no copy; for hot loops).
  absl::StatusOr<RedisValue> Command(int argc, const char** argv, const size_t* lens);

  void Close();

 private:
  absl::StatusOr<RedisValue> TlsCommand(int argc, const char** argv, const size_t* lens);

  const Endpoint endpoint_;
  const TlsOptions tls_;
  const std::string name_;
  redisContext* c_ = nullptr;  // plain
  // TLS: the channel and the reply parser.
  std::unique_ptr<TlsChannel> channel_;
  redisReader* reader_ = nullptr;
  absl::Duration command_timeout_;
};

// Runs one command on `node` over a fresh connection (AUTH and SELECT as the
// endpoint says; TLS as `tls` says for a rediss:// node). `timeout` applies
// to connect and reply.
absl::StatusOr<RedisValue> RunCommand(const Endpoint& node, const std::vector<std::string>& args,
                                      absl::Duration timeout = absl::Seconds(5),
                                      const TlsOptions& tls = {});

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_REDIS_H_
