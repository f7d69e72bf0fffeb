// Every input kept for one fuzz target (its seed corpus and the inputs of
// crashes found and fixed, fuzz/<target>/corpus and fuzz/<target>/regressions)
// through the target's entry function, in the ordinary build: a fixed crash
// stays fixed without clang or libFuzzer. REDLOCK_FUZZ_ENTRY and
// REDLOCK_FUZZ_DIR are set by redlock_add_fuzz_target.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/entries.h"
#include "gtest/gtest.h"

namespace redlock::fuzz {
namespace {

std::vector<std::filesystem::path> Inputs(const char* sub) {
  std::vector<std::filesystem::path> out;
  const std::filesystem::path dir = std::filesystem::path(REDLOCK_FUZZ_DIR) / sub;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') {
      out.push_back(entry.path());
    }
  }
  return out;
}

void RunAll(const char* sub, size_t* count) {
  for (const std::filesystem::path& path : Inputs(sub)) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(path.string());
    // Crashes and failed checks abort the binary; the trace names the file.
    std::fprintf(stderr, "input %s\n", path.c_str());
    EXPECT_EQ(REDLOCK_FUZZ_ENTRY(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
    ++*count;
  }
}

TEST(FuzzRegressions, SeedCorpus) {
  size_t count = 0;
  RunAll("corpus", &count);
  EXPECT_GT(count, 0u) << "no seed inputs in " << REDLOCK_FUZZ_DIR << "/corpus";
}

TEST(FuzzRegressions, FixedCrashes) {
  size_t count = 0;
  RunAll("regressions", &count);
}

}  // namespace
}  // namespace redlock::fuzz
