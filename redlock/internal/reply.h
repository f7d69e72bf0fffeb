// A Redis reply as a plain value, so nothing above the engine sees hiredis.

#ifndef REDLOCK_INTERNAL_REPLY_H_
#define REDLOCK_INTERNAL_REPLY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace redlock::internal {

struct Reply {
  enum class Type { kNil, kStatus, kError, kInteger, kString, kArray };

  Type type = Type::kNil;
  std::string str;  // kStatus, kError, kString
  int64_t integer = 0;
  std::vector<Reply> elements;

  static Reply Nil() { return Reply{}; }
  static Reply Status(std::string s) { return Reply{Type::kStatus, std::move(s), 0, {}}; }
  static Reply Error(std::string s) { return Reply{Type::kError, std::move(s), 0, {}}; }
  static Reply Integer(int64_t i) { return Reply{Type::kInteger, {}, i, {}}; }
  static Reply String(std::string s) { return Reply{Type::kString, std::move(s), 0, {}}; }
  static Reply Array(std::vector<Reply> e) { return Reply{Type::kArray, {}, 0, std::move(e)}; }

  bool is_error() const { return type == Type::kError; }
  bool is_nil() const { return type == Type::kNil; }
  bool IsStatus(const char* s) const { return type == Type::kStatus && str == s; }

  // A short rendering for error messages: `OK`, `(nil)`, `(integer) 1`,
  // `"value"`, `ERR ...`, `[3 elements]`.
  std::string Describe() const;
};

// Sets of reply types, as bit masks: what a command declares it can get
// (error replies always can). Redis replies carry no request id, so a reply
// outside the set proves the connection's replies are out of step with its
// requests, or that the peer is not a Redis server.
inline constexpr uint8_t kExpectStatus = 1;
inline constexpr uint8_t kExpectNil = 2;
inline constexpr uint8_t kExpectInteger = 4;
inline constexpr uint8_t kExpectString = 8;
inline constexpr uint8_t kExpectArray = 16;

// True when `reply` is an error or of a type in `expect` (0: anything).
bool ReplyFits(uint8_t expect, const Reply& reply);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_REPLY_H_
