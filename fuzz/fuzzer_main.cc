// libFuzzer's entry point for one target: REDLOCK_FUZZ_ENTRY names the
// entry function (fuzz/entries.h), set by redlock_add_fuzz_target.

#include <cstddef>
#include <cstdint>

#include "fuzz/entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return redlock::fuzz::REDLOCK_FUZZ_ENTRY(data, size);
}
