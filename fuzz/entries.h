// The entry functions of the fuzz targets: each takes one input of any bytes
// and must neither crash, leak, hang nor break its own checks (which abort).
// The libFuzzer binaries (fuzz/fuzzer_main.cc) call them, and so do the
// regression tests of the ordinary build (fuzz/regressions_test.cc), which
// feed them every file of fuzz/<target>/corpus and fuzz/<target>/regressions.

#ifndef REDLOCK_FUZZ_ENTRIES_H_
#define REDLOCK_FUZZ_ENTRIES_H_

#include <cstddef>
#include <cstdint>

namespace redlock::fuzz {

// Bytes from a node: framed by the reply reader (with small and default
// limits, fed in pieces of varying size), every reply decoded as a vote of
// each request kind, then the same replies answering a client's requests in
// order (acquire, multi-resource acquire, extend, release, with fencing and
// the durability WAIT as the first byte chooses). reply_path.cc.
int ReplyPath(const uint8_t* data, size_t size);

// Text as ParseEndpoint and ParseEndpointList take it (URLs, host:port
// lists). endpoint.cc.
int EndpointText(const uint8_t* data, size_t size);

// A chaos history file: parsed line by line (ParseHistory), each event
// written back and read again, and the checker run on the events.
// history.cc.
int HistoryText(const uint8_t* data, size_t size);

// A chaos scenario file (chaos/scenarios/scenario_file.h): parsed; what
// parses is written back and parses again to the same text.
// scenario_file.cc.
int ScenarioText(const uint8_t* data, size_t size);

}  // namespace redlock::fuzz

// Aborts with `what` when `cond` is false: a property of a target that must
// hold for every input (the fuzzer then saves the input).
#define REDLOCK_FUZZ_CHECK(cond, what) ::redlock::fuzz::Check((cond), #cond, (what))

namespace redlock::fuzz {
void Check(bool ok, const char* cond, const char* what);
}  // namespace redlock::fuzz

#endif  // REDLOCK_FUZZ_ENTRIES_H_
