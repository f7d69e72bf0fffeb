// Files for test equipment: a throw-away directory, a file's content, and
// the end of a log.
//
//   TempDir dir("redlock-harness-test");   // /tmp/redlock-harness-test-XXXXXX
//   if (dir.path().empty()) ...            // mkdtemp failed
//   ...                                    // removed with its content at scope exit
//
// Thread-safety: TempDir is not thread-safe; LastLines is.

#ifndef REDLOCK_TESTKIT_FILES_H_
#define REDLOCK_TESTKIT_FILES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace redlock::testkit {

// A fresh directory /tmp/<prefix>-XXXXXX (mkdtemp), removed with everything
// in it when the object dies. path() is "" when it could not be created.
class TempDir {
 public:
  explicit TempDir(absl::string_view prefix = "redlock");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The whole content of a file ("" when it cannot be read).
std::string ReadFile(const std::string& path);

// The last `max_lines` lines of a file (none when it cannot be read): the
// end of a child's log for an error message.
std::vector<std::string> LastLines(const std::string& path, size_t max_lines);

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_FILES_H_
