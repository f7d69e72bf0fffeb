#include "redlock/internal/reply.h"

#include "absl/strings/str_cat.h"

namespace redlock::internal {

std::string Reply::Describe() const {
  switch (type) {
    case Type::kNil:
      return "(nil)";
    case Type::kStatus:
      return str;
    case Type::kError:
      return str;
    case Type::kInteger:
      return absl::StrCat("(integer) ", integer);
    case Type::kString:
      return str.size() <= 64 ? absl::StrCat("\"", str, "\"")
                              : absl::StrCat("\"", str.substr(0, 64), "...\"");
    case Type::kArray:
      return absl::StrCat("[", elements.size(), " elements]");
  }
  return "?";
}

bool ReplyFits(uint8_t expect, const Reply& reply) {
  if (expect == 0) return true;
  switch (reply.type) {
    case Reply::Type::kError:
      return true;
    case Reply::Type::kStatus:
      return (expect & kExpectStatus) != 0;
    case Reply::Type::kNil:
      return (expect & kExpectNil) != 0;
    case Reply::Type::kInteger:
      return (expect & kExpectInteger) != 0;
    case Reply::Type::kString:
      return (expect & kExpectString) != 0;
    case Reply::Type::kArray:
      return (expect & kExpectArray) != 0;
  }
  return false;
}

}  // namespace redlock::internal
