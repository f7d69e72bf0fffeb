#include "redlock/internal/tls_stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace redlock::internal {

// What the socket BIO knows about its socket.
struct SocketState {
  int fd = -1;
  int last_errno = 0;  // of the last failed send/recv; cleared by BeginCall
  bool eof = false;
};

namespace {

// ---- A socket BIO that never raises SIGPIPE ------------------------------------------------
//
// OpenSSL's own socket BIO writes with write(2): a node that resets the
// connection would kill a process that does not ignore SIGPIPE. This one
// sends with MSG_NOSIGNAL, like TcpStream, and remembers why the socket
// failed for the messages.

int SocketWrite(BIO* bio, const char* buf, int len) {
  auto* s = static_cast<SocketState*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  for (;;) {
    ssize_t w = ::send(s->fd, buf, static_cast<size_t>(len), MSG_NOSIGNAL);
    if (w >= 0) return static_cast<int>(w);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      BIO_set_retry_write(bio);
    } else {
      s->last_errno = errno;
    }
    return -1;
  }
}

int SocketRead(BIO* bio, char* buf, int len) {
  auto* s = static_cast<SocketState*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  for (;;) {
    ssize_t r = ::recv(s->fd, buf, static_cast<size_t>(len), 0);
    if (r > 0) return static_cast<int>(r);
    if (r == 0) {
      s->eof = true;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      BIO_set_retry_read(bio);
    } else {
      s->last_errno = errno;
    }
    return -1;
  }
}

long SocketCtrl(BIO* bio, int cmd, long num, void* ptr) {
  auto* s = static_cast<SocketState*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_EOF:
      return s != nullptr && s->eof ? 1 : 0;
    default:
      return 0;
  }
}

int SocketCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

// Made once, never freed (a process-wide table of function pointers).
BIO_METHOD* SocketMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "redlock socket");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, SocketWrite);
    BIO_meth_set_read(m, SocketRead);
    BIO_meth_set_ctrl(m, SocketCtrl);
    BIO_meth_set_create(m, SocketCreate);
    return m;
  }();
  return method;
}

// ---- Messages --------------------------------------------------------------------------------

// Why the certificate chain was refused, in terms of what to change.
std::string VerifyFailure(long result, const std::string& server_name) {
  const std::string text = X509_verify_cert_error_string(result);
  switch (result) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
    case X509_V_ERR_EMAIL_MISMATCH:
      return absl::StrCat("the node's certificate is not valid for \"", server_name, "\" (", text,
                          "): connect by a name the certificate lists, or set the TLS server name");
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return absl::StrCat("the node's certificate has expired (", text,
                          "): the node needs a new certificate");
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return absl::StrCat("the node's certificate is not valid yet (", text,
                          "): check the clocks, or the certificate's dates");
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_UNTRUSTED:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return absl::StrCat("the node's certificate is not trusted (", text,
                          "): give the CA that signed it (TLS CA file or directory)");
    default:
      return absl::StrCat("the node's certificate was refused (", text, ")");
  }
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

// ---- TlsStream -------------------------------------------------------------------------------

std::unique_ptr<Stream> TlsStream::Create(std::shared_ptr<TlsContext> context,
                                          std::shared_ptr<TlsSessionCache> sessions, int fd,
                                          const std::string& server_name, std::string* error) {
  ERR_clear_error();
  SSL* ssl = SSL_new(context->ctx());
  BIO* bio = ssl != nullptr ? BIO_new(SocketMethod()) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl);
    ERR_clear_error();
    close(fd);
    *error = "TLS: cannot create the connection's SSL object";
    return nullptr;
  }
  auto* state = new SocketState();
  state->fd = fd;
  BIO_set_data(bio, state);
  SSL_set_bio(ssl, bio, bio);  // the SSL owns the BIO
  SSL_set_connect_state(ssl);
  const bool ip = IsIpLiteral(server_name);
  bool ok = true;
  if (context->options().verify_peer) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, server_name.c_str()) == 1
            : SSL_set1_host(ssl, server_name.c_str()) == 1;
  }
  // SNI carries names only (RFC 6066).
  if (ok && !ip) ok = SSL_set_tlsext_host_name(ssl, server_name.c_str()) == 1;
  if (!ok) {
    *error = absl::StrCat("TLS: cannot use \"", server_name, "\" as the server name");
    ERR_clear_error();
    SSL_free(ssl);
    delete state;
    close(fd);
    return nullptr;
  }
  if (sessions != nullptr) {
    SSL_set_ex_data(ssl, TlsSessionCacheIndex(), sessions.get());
    sessions->Offer(ssl);
  }
  return std::unique_ptr<Stream>(
      new TlsStream(std::move(context), std::move(sessions), fd, ssl, server_name));
}

TlsStream::TlsStream(std::shared_ptr<TlsContext> context, std::shared_ptr<TlsSessionCache> sessions,
                     int fd, SSL* ssl, std::string server_name)
    : context_(std::move(context)),
      sessions_(std::move(sessions)),
      fd_(fd),
      server_name_(std::move(server_name)),
      ssl_(ssl) {}

TlsStream::~TlsStream() {
  // A close_notify (one non-blocking write, never waited for) ends the
  // connection cleanly: OpenSSL keeps the session resumable only then. Not
  // after a fatal error, when OpenSSL forbids it.
  if (established_ && !failed_) {
    ERR_clear_error();
    SSL_shutdown(ssl_);
    ERR_clear_error();
  }
  SocketState* state = Socket();
  SSL_free(ssl_);
  delete state;
  close(fd_);
}

std::string TlsStream::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::string TlsStream::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return established_ ? SSL_get_version(ssl_) : "";
}

bool TlsStream::resumed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return established_ && SSL_session_reused(ssl_) == 1;
}

Stream::Io TlsStream::Establish() {
  std::lock_guard<std::mutex> lock(mu_);
  BeginCall();
  Io io = Result(SSL_do_handshake(ssl_), "handshake");
  if (io == Io::kDone) established_ = true;
  return io;
}

Stream::Io TlsStream::Read(char* buf, size_t len, size_t* n) {
  std::lock_guard<std::mutex> lock(mu_);
  BeginCall();
  size_t got = 0;
  // With read-ahead one recv(2) takes in every record the socket holds;
  // those already inside the SSL object would not make the socket readable
  // again, so they are all delivered now (or, when `buf` fills up, on the
  // caller's next call: Connection::ReadAll goes on while reads fill its
  // buffer). No further recv once nothing is buffered.
  while (got < len) {
    size_t chunk = 0;
    int rc = SSL_read_ex(ssl_, buf + got, len - got, &chunk);
    if (rc == 1) {
      got += chunk;
      if (SSL_has_pending(ssl_) != 1) break;
      continue;
    }
    Io io = Result(rc, "read");
    if (got == 0) return io;
    break;  // deliver what came; a failure shows again on the next call
  }
  *n = got;
  return Io::kDone;
}

Stream::Io TlsStream::Write(const char* buf, size_t len, size_t* n) {
  std::lock_guard<std::mutex> lock(mu_);
  BeginCall();
  size_t written = 0;
  int rc = SSL_write_ex(ssl_, buf, len, &written);
  if (rc == 1) {
    *n = written;
    return Io::kDone;
  }
  Io io = Result(rc, "write");
  if (io == Io::kError && Socket()->last_errno != 0) {
    // The node reset the connection: it may have said why first, in a TLS
    // alert waiting to be read (TLS 1.3 checks the client certificate after
    // the client's side of the handshake is done).
    BeginCall();
    char byte;
    size_t got = 0;
    int r = SSL_read_ex(ssl_, &byte, 1, &got);
    if (r != 1 && SSL_get_error(ssl_, r) == SSL_ERROR_SSL) {
      std::string write_error = std::move(error_);
      Result(r, "read");
      if (error_.find(" alert ") == std::string::npos) error_ = std::move(write_error);
    }
    ERR_clear_error();
  }
  return io;
}

void TlsStream::BeginCall() {
  ERR_clear_error();
  Socket()->last_errno = 0;
}

SocketState* TlsStream::Socket() const {
  return static_cast<SocketState*>(BIO_get_data(SSL_get_rbio(ssl_)));
}

Stream::Io TlsStream::Result(int rc, const char* op) {
  const int code = SSL_get_error(ssl_, rc);
  SocketState* state = Socket();
  const bool handshake = !established_;
  switch (code) {
    case SSL_ERROR_NONE:
      return Io::kDone;
    case SSL_ERROR_WANT_READ:
      return Io::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return Io::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      error_ = "connection closed by the node";
      return Io::kClosed;
    default:
      break;
  }
  unsigned long err = ERR_peek_last_error();
  const int reason = err != 0 ? ERR_GET_REASON(err) : 0;
  const std::string prefix = handshake ? "TLS handshake failed: " : "TLS: ";
  const bool have_cert = !context_->options().cert_file.empty();
  if (code == SSL_ERROR_SYSCALL || reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    if (state->last_errno != 0) {
      // As TcpStream words them once established.
      error_ = absl::StrCat(handshake                    ? prefix
                            : std::string(op) == "write" ? "write failed: "
                                                         : "",
                            ErrnoText(state->last_errno));
    } else if (handshake) {
      error_ = "the node closed the connection during the TLS handshake";
    } else {
      error_ = "connection closed by the node";
    }
    ERR_clear_error();
    failed_ = true;
    return handshake || state->last_errno != 0 ? Io::kError : Io::kClosed;
  }
  const long verify = SSL_get_verify_result(ssl_);
  if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED && verify != X509_V_OK) {
    error_ = prefix + VerifyFailure(verify, server_name_);
  } else if (handshake &&
             (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_UNKNOWN_PROTOCOL ||
              reason == SSL_R_PACKET_LENGTH_TOO_LONG || reason == SSL_R_RECORD_LENGTH_MISMATCH ||
              reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST)) {
    error_ = absl::StrCat(prefix, "the node did not answer in TLS (", TlsReasonText(err),
                          "): is the node's port plaintext? use redis:// for it");
  } else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
             (!have_cert && reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE)) {
    error_ = absl::StrCat(prefix, "the node requires a client certificate (", TlsReasonText(err),
                          "): give the TLS client certificate and key (mutual TLS)");
  } else if (have_cert && (reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
                           reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
                           reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED ||
                           reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
                           reason == SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED ||
                           reason == SSL_R_TLSV1_ALERT_ACCESS_DENIED ||
                           reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR)) {
    error_ =
        absl::StrCat(prefix, "the node refused our client certificate (", TlsReasonText(err), ")");
  } else {
    error_ = prefix + (err != 0 ? TlsReasonText(err) : std::string("unknown TLS error"));
  }
  ERR_clear_error();
  failed_ = true;
  return Io::kError;
}

StreamFactory TlsStreamFactory(std::shared_ptr<TlsContext> context, std::string server_name) {
  auto sessions = std::make_shared<TlsSessionCache>();
  return [context = std::move(context), sessions = std::move(sessions),
          server_name = std::move(server_name)](int fd,
                                                std::string* error) -> std::unique_ptr<Stream> {
    return TlsStream::Create(context, sessions, fd, server_name, error);
  };
}

}  // namespace redlock::internal
