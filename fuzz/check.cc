#include <cstdio>
#include <cstdlib>

#include "fuzz/entries.h"

namespace redlock::fuzz {

void Check(bool ok, const char* cond, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s (%s)\n", what, cond);
  std::abort();
}

}  // namespace redlock::fuzz
