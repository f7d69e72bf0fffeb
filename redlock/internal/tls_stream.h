// TLS under a node connection (rediss://): a TlsContext per client (one
// SSL_CTX: trust roots, client certificate, verification), and a TlsStream
// per connection over the connected socket. The handshake is non-blocking
// (Stream::Establish), inside the connection's connect deadline; after it
// the connection reads and writes through SSL_read/SSL_write exactly as it
// does through the socket for plain TCP.
//
// Errors say what happened in the terms a user can act on: an untrusted or
// expired certificate, a name mismatch, a client certificate the node wants
// or refuses, TLS spoken to a plaintext port.

#ifndef REDLOCK_INTERNAL_TLS_STREAM_H_
#define REDLOCK_INTERNAL_TLS_STREAM_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "redlock/internal/connection.h"
#include "redlock/internal/stream.h"
#include "redlock/options.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
typedef struct ssl_session_st SSL_SESSION;

namespace redlock::internal {

struct SocketState;

// One SSL_CTX built from TlsOptions. Thread-safe (OpenSSL contexts are,
// once configured); shared by every TLS connection of a client.
class TlsContext {
 public:
  // Loads the trust roots (ca_file / ca_dir, else the system's), the client
  // certificate and key, and checks that they belong together.
  // kInvalidArgument naming the file for a missing, unreadable or malformed
  // one.
  static absl::StatusOr<std::shared_ptr<TlsContext>> Create(const TlsOptions& options);

  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* ctx() const { return ctx_; }
  const TlsOptions& options() const { return options_; }

 private:
  TlsContext(SSL_CTX* ctx, TlsOptions options) : ctx_(ctx), options_(std::move(options)) {}

  SSL_CTX* const ctx_;
  const TlsOptions options_;
};

// The last session a node gave us, offered when reconnecting to it so that
// the handshake can be abbreviated (session resumption). One per node:
// shared by the node's connections, never offered to another node.
class TlsSessionCache {
 public:
  TlsSessionCache() = default;
  ~TlsSessionCache();
  TlsSessionCache(const TlsSessionCache&) = delete;
  TlsSessionCache& operator=(const TlsSessionCache&) = delete;

  // Offers the cached session to `ssl`, if there is one.
  void Offer(SSL* ssl);
  // Keeps `session` (taking the caller's reference) in place of the last.
  void Keep(SSL_SESSION* session);

 private:
  std::mutex mu_;
  SSL_SESSION* session_ = nullptr;  // guarded by mu_
};

// A TLS client stream over a connected (or connecting) non-blocking socket.
// Owns the fd. Read runs on the polling thread while Write may run on a
// caller's thread: one SSL object must not be used by two threads at once,
// so every SSL call of a stream holds mu_ (short: the calls never block).
class TlsStream final : public Stream {
 public:
  // `server_name`: checked against the certificate (a DNS name, or an IP
  // address literal), and sent as SNI when it is a name.
  // `sessions`: where the node's sessions are kept (may be null: none).
  static std::unique_ptr<Stream> Create(std::shared_ptr<TlsContext> context,
                                        std::shared_ptr<TlsSessionCache> sessions, int fd,
                                        const std::string& server_name, std::string* error);
  ~TlsStream() override;

  int fd() const override { return fd_; }
  Io Establish() override;
  Io Read(char* buf, size_t len, size_t* n) override;
  Io Write(const char* buf, size_t len, size_t* n) override;
  std::string error() const override;
  // The negotiated protocol, "TLSv1.3" (Client::Health, redlock status).
  std::string Describe() const override;
  // Whether the handshake resumed an earlier session with the node.
  bool resumed() const;

 private:
  TlsStream(std::shared_ptr<TlsContext> context, std::shared_ptr<TlsSessionCache> sessions, int fd,
            SSL* ssl, std::string server_name);
  // Clears what the last call left (OpenSSL's error queue, the socket's
  // errno). REQUIRES: mu_ held.
  void BeginCall();
  SocketState* Socket() const;
  // Turns the result of an SSL call into an Io, recording why on failure.
  // `op` is "handshake", "read" or "write". REQUIRES: mu_ held.
  Io Result(int rc, const char* op);

  const std::shared_ptr<TlsContext> context_;
  const std::shared_ptr<TlsSessionCache> sessions_;  // outlives ssl_ (its callbacks use it)
  const int fd_;
  const std::string server_name_;
  mutable std::mutex mu_;
  SSL* const ssl_;            // guarded by mu_
  bool established_ = false;  // guarded by mu_
  bool failed_ = false;       // a fatal error happened; guarded by mu_
  std::string error_;         // guarded by mu_
};

// The reason text of an OpenSSL error code ("certificate verify failed").
std::string TlsReasonText(unsigned long err);
// The SSL ex_data slot that points at a connection's TlsSessionCache.
int TlsSessionCacheIndex();

// The stream factory of one TLS node: its connections verify `server_name`
// and resume the node's last session when they can.
StreamFactory TlsStreamFactory(std::shared_ptr<TlsContext> context, std::string server_name);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_TLS_STREAM_H_
