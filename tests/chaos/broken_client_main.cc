// redlock-chaos-broken-client: a chaos client process running one of the
// deliberately broken Redlock variants of tests/chaos/broken_client.h
// (--variant=no-elapsed, plain-del, wall-clock or no-partial-release; the
// other flags as redlock-chaos-client's, chaos/client_main.cc). Test code:
// built only with the tests, next to redlock-chaos, which runs it for the
// clients of the broken-* scenarios.

#include "chaos/clients/workload.h"
#include "tests/chaos/broken_client.h"

int main(int argc, char** argv) {
  return redlock::chaos::ClientMain(argc, argv, redlock::chaos::MakeBrokenBackend);
}
