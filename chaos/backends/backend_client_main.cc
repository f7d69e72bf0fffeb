// redlock-chaos-backend-client: one client process of a backend chaos run
// (chaos/backends/backend_client.h): the command line of redlock-chaos-client, the
// lock service from REDLOCK_BACKEND.

#include "chaos/backends/backend_client.h"

int main(int argc, char** argv) {
  return redlock::chaos::ClientMain(argc, argv, redlock::chaos::MakeServiceBackend);
}
