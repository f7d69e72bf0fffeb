// The byte stream under a node connection: a non-blocking TCP socket, or
// the same socket under TLS (tls_stream.h). The connection above it
// (connection.h) connects the socket itself (StartTcpConnect below), then sees
// only Establish, Read and Write; destroying the stream closes the socket.
// How bytes are framed into replies is the reply reader's job
// (reply_reader.h).

#ifndef REDLOCK_INTERNAL_STREAM_H_
#define REDLOCK_INTERNAL_STREAM_H_

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace redlock::internal {

class Stream {
 public:
  // What an I/O call achieved.
  enum class Io {
    kDone,       // some bytes moved (`*n` of them), or the handshake finished
    kWantRead,   // would block until the socket is readable
    kWantWrite,  // would block until the socket is writable
    kClosed,     // the peer closed the connection (reads)
    kError,      // failed; error() says why
  };

  virtual ~Stream() = default;

  // The socket, for polling.
  virtual int fd() const = 0;

  // Finishes establishing the stream once the TCP connection is up (TLS:
  // the handshake). kDone when ready; kWantRead/kWantWrite to be called again
  // when the socket is ready.
  virtual Io Establish() = 0;

  // Non-blocking read of up to `len` bytes; `*n` gets the count on kDone.
  virtual Io Read(char* buf, size_t len, size_t* n) = 0;
  // Non-blocking write of up to `len` bytes; `*n` gets the count on kDone.
  // May be called from any thread, but not concurrently with itself.
  virtual Io Write(const char* buf, size_t len, size_t* n) = 0;

  // Why the last call returned kError (or kClosed).
  virtual std::string error() const = 0;

  // "TLSv1.3" or "" for plain TCP (Client::Health).
  virtual std::string Describe() const { return ""; }
};

// Resolves `host`, creates a non-blocking socket and starts connecting to
// `port`. On success returns the socket (connecting; writable once
// connected), else an error message.
absl::Status StartTcpConnect(const std::string& host, int port, int* fd);

// Whether a socket that became writable is connected (0) or the errno of the
// failed connection.
int ConnectResult(int fd);

// A plain TCP stream over a connected (or connecting) socket. Owns the fd.
class TcpStream final : public Stream {
 public:
  explicit TcpStream(int fd) : fd_(fd) {}
  ~TcpStream() override;
  int fd() const override { return fd_; }
  Io Establish() override { return Io::kDone; }
  Io Read(char* buf, size_t len, size_t* n) override;
  Io Write(const char* buf, size_t len, size_t* n) override;
  std::string error() const override { return error_; }

 private:
  const int fd_;
  std::string error_;
};

// strerror for messages.
std::string ErrnoText(int err);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_STREAM_H_
