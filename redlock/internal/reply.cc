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

}  // namespace redlock::internal
