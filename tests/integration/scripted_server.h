// A fake Redis server for protocol tests: it accepts connections on a free
// loopback port, parses each request (a RESP array of bulk strings) and
// answers with whatever raw RESP the test's handler returns. Used to make a
// node that speaks the protocol but breaks its contract (replies of the wrong
// type, a duplicate run_id, ...), which a real redis-server never does.
//
//   auto server = ScriptedServer::Start([](const std::vector<std::string>& cmd) {
//     if (cmd[0] == "SET") return std::string(":1\r\n");  // wrong type for SET
//     return ScriptedServer::Default(cmd);               // handshake etc.
//   });
//   options.nodes.push_back({.host = "127.0.0.1", .port = (*server)->port()});

#ifndef REDLOCK_TESTS_INTEGRATION_SCRIPTED_SERVER_H_
#define REDLOCK_TESTS_INTEGRATION_SCRIPTED_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace redlock::testkit {

class ScriptedServer {
 public:
  // Returns the raw RESP bytes to send back ("" sends nothing).
  using Handler = std::function<std::string(const std::vector<std::string>& command)>;

  static absl::StatusOr<std::unique_ptr<ScriptedServer>> Start(Handler handler);
  ~ScriptedServer();
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  int port() const { return port_; }

  // What a healthy server answers to the connection handshake and to PING:
  // AUTH/SELECT/CLIENT -> +OK, PING -> +PONG (or the echo), SCRIPT LOAD -> the
  // SHA-1 of the body, INFO -> a server section with run_id `run_id`;
  // anything else -> an error reply.
  static std::string Default(
      const std::vector<std::string>& command,
      const std::string& run_id = "0123456789abcdef0123456789abcdef01234567");

  // RESP encoders for handlers.
  static std::string Bulk(const std::string& s);
  static std::string Error(const std::string& s) { return "-" + s + "\r\n"; }

 private:
  ScriptedServer() = default;
  void Run();

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTS_INTEGRATION_SCRIPTED_SERVER_H_
