#include "redlock/internal/resp.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace redlock::internal {
namespace {

void AppendLength(std::string* out, char marker, size_t n) {
  char buf[24];
  char* end = buf + sizeof(buf);
  char* p = end;
  do {
    *--p = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n != 0);
  out->push_back(marker);
  out->append(p, end);
  out->append("\r\n", 2);
}

}  // namespace

void AppendArrayHeader(std::string* out, size_t count) { AppendLength(out, '*', count); }

void AppendBulk(std::string* out, absl::string_view arg) {
  AppendLength(out, '$', arg.size());
  out->append(arg.data(), arg.size());
  out->append("\r\n", 2);
}

void AppendBulkHeader(std::string* out, size_t size) { AppendLength(out, '$', size); }

void AppendCommand(std::string* out, std::initializer_list<absl::string_view> args) {
  size_t need = 16;
  for (absl::string_view a : args) need += a.size() + 16;
  out->reserve(out->size() + need);
  AppendArrayHeader(out, args.size());
  for (absl::string_view a : args) AppendBulk(out, a);
}

}  // namespace redlock::internal
