#include "testkit/files.h"

#include <stdlib.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace redlock::testkit {

TempDir::TempDir(absl::string_view prefix) {
  std::string tmpl = absl::StrCat("/tmp/", prefix, "-XXXXXX");
  if (mkdtemp(tmpl.data()) != nullptr) path_ = std::move(tmpl);
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> LastLines(const std::string& path, size_t max_lines) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  // Bounded by the file; at most max_lines are kept.
  while (std::getline(in, line)) {
    lines.push_back(std::move(line));
    if (lines.size() > max_lines) lines.pop_front();
  }
  return std::vector<std::string>(lines.begin(), lines.end());
}

}  // namespace redlock::testkit
