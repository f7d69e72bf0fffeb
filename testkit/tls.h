// TLS for test equipment: throw-away certificates made with the `openssl`
// command, and a blocking TLS channel (OpenSSL over a socket, with
// deadlines) under the test kit's RedisConnection for rediss:// endpoints.
//
//   absl::StatusOr<TestCertificates> certs = MakeTestCertificates(dir.path());
//   // certs->ca_cert, certs->server_cert + server_key for the nodes, ...
//
// Nothing from the library: the kit checks the library from the outside.
//
// Thread-safety: MakeTestCertificates is; a TlsChannel is not.

#ifndef REDLOCK_TESTKIT_TLS_H_
#define REDLOCK_TESTKIT_TLS_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/options.h"

namespace redlock::testkit {

// PEM files in one directory. Keys are unencrypted EC P-256 keys; valid
// certificates are valid for 30 days from their making.
struct TestCertificates {
  std::string dir;
  // The CA of the nodes and the clients.
  std::string ca_cert, ca_key;
  // A node's certificate, signed by the CA, for DNS:localhost and
  // IP:127.0.0.1 (every address of a fleet is checked against it).
  std::string server_cert, server_key;
  // The same names and key, signed by the CA, expired yesterday.
  std::string expired_cert;
  // A client certificate signed by the CA (mutual TLS).
  std::string client_cert, client_key;
  // Another CA, and a node certificate (same names) and a client
  // certificate signed by it: trusted by nobody here.
  std::string other_ca_cert;
  std::string other_server_cert, other_server_key;
  std::string other_client_cert, other_client_key;
};

// Makes the certificates in `dir` (which must exist) with the openssl
// command. kFailedPrecondition when openssl is missing (kNotFound under
// CI=true), kInternal with its output when a step fails.
absl::StatusOr<TestCertificates> MakeTestCertificates(const std::string& dir);

// A blocking TLS client connection to `endpoint` (its host is checked
// against the certificate unless tls.server_name says otherwise, as the
// library does), verifying as `tls` says.
class TlsChannel {
 public:
  // Connects and runs the handshake within `timeout`. kUnavailable naming
  // the cause.
  static absl::StatusOr<std::unique_ptr<TlsChannel>> Connect(const Endpoint& endpoint,
                                                             const TlsOptions& tls,
                                                             absl::Duration timeout);
  ~TlsChannel();
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  // Sends all of `data` within `timeout`.
  absl::Status Write(absl::string_view data, absl::Duration timeout);
  // Receives at least one byte (at most `len`) within `timeout`.
  absl::StatusOr<size_t> Read(char* buf, size_t len, absl::Duration timeout);
  // The negotiated protocol, "TLSv1.3".
  std::string version() const;

 private:
  struct Impl;
  explicit TlsChannel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_TLS_H_
