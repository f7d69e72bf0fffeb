#include "testkit/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "testkit/fleet.h"
#include "testkit/process.h"

namespace redlock::testkit {
namespace {

// ---- Certificates ---------------------------------------------------------------------

constexpr char kNames[] = "subjectAltName=DNS:localhost,IP:127.0.0.1";

absl::Status RunOpenssl(const std::string& openssl, std::vector<std::string> args) {
  ProcessOptions p;
  p.argv = {openssl};
  p.argv.insert(p.argv.end(), args.begin(), args.end());
  p.stdout_to = Stream::kPipe;
  p.stderr_to = Stream::kStdout;
  absl::StatusOr<ProcessResult> r = RunProcess(std::move(p), absl::Seconds(30));
  if (!r.ok()) return r.status();
  if (r->timed_out || r->exit_code() != 0) {
    return absl::InternalError(absl::StrCat("openssl ", absl::StrJoin(args, " "), " failed (exit ",
                                            r->exit_code(), "): ", r->out));
  }
  return absl::OkStatus();
}

// A fresh key and a certificate for it: self-signed when `ca` is empty,
// else signed by ca/ca_key.
absl::Status MakeCertificate(const std::string& openssl, const std::string& cert,
                             const std::string& key, const std::string& subject,
                             std::vector<std::string> extensions, const std::string& ca,
                             const std::string& ca_key) {
  std::vector<std::string> args = {
      "req",    "-x509",   "-newkey", "ec",   "-pkeyopt", "ec_paramgen_curve:prime256v1",
      "-nodes", "-keyout", key,       "-out", cert,       "-subj",
      subject,  "-days",   "30"};
  for (std::string& e : extensions) args.insert(args.end(), {"-addext", std::move(e)});
  if (!ca.empty()) args.insert(args.end(), {"-CA", ca, "-CAkey", ca_key});
  return RunOpenssl(openssl, std::move(args));
}

// ---- The TLS channel's messages ----------------------------------------------------------------

std::string OpensslError(SSL* ssl) {
  unsigned long err = ERR_peek_last_error();
  std::string why = err != 0 ? ERR_reason_error_string(err) != nullptr
                                   ? ERR_reason_error_string(err)
                                   : std::to_string(err)
                             : "unknown error";
  long verify = ssl != nullptr ? SSL_get_verify_result(ssl) : X509_V_OK;
  if (verify != X509_V_OK) absl::StrAppend(&why, " (", X509_verify_cert_error_string(verify), ")");
  ERR_clear_error();
  return why;
}

using Clock = std::chrono::steady_clock;

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Waits until `fd` is ready for `events`; false at the deadline.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (int i = 0; i < 100000; ++i) {
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, MillisLeft(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
  return false;
}

}  // namespace

absl::StatusOr<TestCertificates> MakeTestCertificates(const std::string& dir) {
  const std::string openssl = FindExecutable("openssl");
  if (openssl.empty()) {
    if (UnderCi()) {
      return absl::NotFoundError("openssl is not installed, and CI=true makes that a failure");
    }
    return absl::FailedPreconditionError("openssl is not installed (run scripts/setup.sh)");
  }
  TestCertificates c;
  c.dir = dir;
  auto path = [&](const char* name) { return absl::StrCat(dir, "/", name); };
  c.ca_cert = path("ca.crt");
  c.ca_key = path("ca.key");
  c.server_cert = path("server.crt");
  c.server_key = path("server.key");
  c.expired_cert = path("expired.crt");
  c.client_cert = path("client.crt");
  c.client_key = path("client.key");
  c.other_ca_cert = path("other-ca.crt");
  const std::string other_ca_key = path("other-ca.key");
  c.other_server_cert = path("other-server.crt");
  c.other_server_key = path("other-server.key");
  c.other_client_cert = path("other-client.crt");
  c.other_client_key = path("other-client.key");
  const std::vector<std::string> ca_ext = {"basicConstraints=critical,CA:TRUE",
                                           "keyUsage=critical,keyCertSign,cRLSign"};
  const std::vector<std::string> server_ext = {kNames, "basicConstraints=CA:FALSE",
                                               "extendedKeyUsage=serverAuth"};
  const std::vector<std::string> client_ext = {"basicConstraints=CA:FALSE",
                                               "extendedKeyUsage=clientAuth"};
  absl::Status st =
      MakeCertificate(openssl, c.ca_cert, c.ca_key, "/CN=redlock test CA", ca_ext, "", "");
  if (st.ok()) {
    st = MakeCertificate(openssl, c.server_cert, c.server_key, "/CN=localhost", server_ext,
                         c.ca_cert, c.ca_key);
  }
  if (st.ok()) {
    st = MakeCertificate(openssl, c.client_cert, c.client_key, "/CN=redlock test client",
                         client_ext, c.ca_cert, c.ca_key);
  }
  if (st.ok()) {
    st = MakeCertificate(openssl, c.other_ca_cert, other_ca_key, "/CN=another CA", ca_ext, "", "");
  }
  if (st.ok()) {
    st = MakeCertificate(openssl, c.other_server_cert, c.other_server_key, "/CN=localhost",
                         server_ext, c.other_ca_cert, other_ca_key);
  }
  if (st.ok()) {
    st = MakeCertificate(openssl, c.other_client_cert, c.other_client_key, "/CN=someone else",
                         client_ext, c.other_ca_cert, other_ca_key);
  }
  if (st.ok()) {
    // `req -x509` refuses a negative validity; `x509 -req` takes one: the
    // server's key and names, expired a day before it was made.
    const std::string csr = path("expired.csr");
    st = RunOpenssl(openssl, {"req", "-new", "-key", c.server_key, "-subj", "/CN=localhost",
                              "-addext", kNames, "-out", csr});
    if (st.ok()) {
      st = RunOpenssl(openssl, {"x509", "-req", "-in", csr, "-CA", c.ca_cert, "-CAkey", c.ca_key,
                                "-copy_extensions", "copy", "-days", "-1", "-out", c.expired_cert});
    }
  }
  if (!st.ok()) return st;
  return c;
}

// ---- TlsChannel ----------------------------------------------------------------------------
//
// The SSL object talks to a BIO pair; this code moves the bytes between the
// pair and the socket with send(MSG_NOSIGNAL)/recv, so a node that dies
// cannot kill the test with SIGPIPE, and every wait has a deadline.

struct TlsChannel::Impl {
  int fd = -1;
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  BIO* network = nullptr;  // our end of the pair (the SSL owns the other)

  ~Impl() {
    SSL_free(ssl);
    BIO_free(network);
    SSL_CTX_free(ctx);
    if (fd >= 0) close(fd);
  }

  // Sends what the SSL object has produced.
  absl::Status Flush(Clock::time_point deadline) {
    char buf[16384];
    for (int i = 0; i < 100000; ++i) {
      int n = BIO_read(network, buf, sizeof(buf));
      if (n <= 0) return absl::OkStatus();
      for (int off = 0; off < n;) {
        ssize_t w = send(fd, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
        if (w > 0) {
          off += static_cast<int>(w);
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
          if (!WaitFor(fd, POLLOUT, deadline)) return absl::UnavailableError("write timed out");
        } else {
          return absl::UnavailableError(absl::StrCat("write failed: ", strerror(errno)));
        }
      }
    }
    return absl::OkStatus();
  }

  // Feeds the SSL object what the socket has, waiting for it.
  absl::Status Fill(Clock::time_point deadline) {
    char buf[16384];
    size_t room = BIO_ctrl_get_write_guarantee(network);
    if (room == 0) return absl::OkStatus();
    for (int i = 0; i < 100000; ++i) {
      ssize_t r = recv(fd, buf, std::min(room, sizeof(buf)), 0);
      if (r > 0) {
        BIO_write(network, buf, static_cast<int>(r));
        return absl::OkStatus();
      }
      if (r == 0) return absl::UnavailableError("connection closed by the node");
      if (errno == EINTR) continue;
      if (errno != EAGAIN) {
        return absl::UnavailableError(absl::StrCat("read failed: ", strerror(errno)));
      }
      if (!WaitFor(fd, POLLIN, deadline))
        return absl::UnavailableError("no reply within the timeout");
    }
    return absl::UnavailableError("no reply within the timeout");
  }

  // Runs `op` (an SSL call returning > 0 on success) to completion.
  template <typename Op>
  absl::StatusOr<int> Drive(Op op, Clock::time_point deadline) {
    for (int i = 0; i < 100000; ++i) {
      ERR_clear_error();
      int rc = op();
      int err = SSL_get_error(ssl, rc);
      absl::Status flushed = Flush(deadline);
      if (rc > 0) {
        if (!flushed.ok()) return flushed;
        return rc;
      }
      if (err == SSL_ERROR_WANT_READ) {
        if (!flushed.ok()) return flushed;
        absl::Status filled = Fill(deadline);
        if (!filled.ok()) return filled;
      } else if (err == SSL_ERROR_WANT_WRITE) {
        if (!flushed.ok()) return flushed;
      } else if (err == SSL_ERROR_ZERO_RETURN) {
        return absl::UnavailableError("connection closed by the node");
      } else {
        return absl::UnavailableError(absl::StrCat("TLS: ", OpensslError(ssl)));
      }
    }
    return absl::UnavailableError("TLS: no progress");
  }
};

TlsChannel::TlsChannel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsChannel::~TlsChannel() = default;

absl::StatusOr<std::unique_ptr<TlsChannel>> TlsChannel::Connect(const Endpoint& endpoint,
                                                                const TlsOptions& tls,
                                                                absl::Duration timeout) {
  const Clock::time_point deadline = Clock::now() + absl::ToChronoNanoseconds(timeout);
  auto impl = std::make_unique<Impl>();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(endpoint.host.c_str(), std::to_string(endpoint.port).c_str(), &hints, &res) !=
          0 ||
      res == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", endpoint.host));
  }
  impl->fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = impl->fd < 0 ? -1 : connect(impl->fd, res->ai_addr, res->ai_addrlen);
  int err = rc == 0 ? 0 : errno;
  freeaddrinfo(res);
  if (impl->fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", strerror(err)));
  if (rc != 0 && err != EINPROGRESS) return absl::UnavailableError(strerror(err));
  if (rc != 0) {
    if (!WaitFor(impl->fd, POLLOUT, deadline)) return absl::UnavailableError("connect timed out");
    socklen_t len = sizeof(err);
    getsockopt(impl->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return absl::UnavailableError(strerror(err));
  }
  int one = 1;
  setsockopt(impl->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  ERR_clear_error();
  impl->ctx = SSL_CTX_new(TLS_client_method());
  if (impl->ctx == nullptr) return absl::InternalError("SSL_CTX_new failed");
  SSL_CTX_set_verify(impl->ctx, tls.verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  if (!tls.ca_file.empty() || !tls.ca_dir.empty()) {
    if (SSL_CTX_load_verify_locations(impl->ctx,
                                      tls.ca_file.empty() ? nullptr : tls.ca_file.c_str(),
                                      tls.ca_dir.empty() ? nullptr : tls.ca_dir.c_str()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("CA: ", OpensslError(nullptr)));
    }
  }
  if (!tls.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(impl->ctx, tls.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(impl->ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("client certificate: ", OpensslError(nullptr)));
  }
  impl->ssl = SSL_new(impl->ctx);
  BIO* internal = nullptr;
  if (impl->ssl == nullptr || BIO_new_bio_pair(&internal, 0, &impl->network, 0) != 1) {
    return absl::InternalError("SSL_new failed");
  }
  SSL_set_bio(impl->ssl, internal, internal);
  const std::string name = tls.server_name.empty() ? endpoint.host : tls.server_name;
  unsigned char addr[sizeof(in6_addr)];
  const bool ip =
      inet_pton(AF_INET, name.c_str(), addr) == 1 || inet_pton(AF_INET6, name.c_str(), addr) == 1;
  if (tls.verify_peer) {
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(impl->ssl), name.c_str());
    } else {
      SSL_set1_host(impl->ssl, name.c_str());
    }
  }
  if (!ip) SSL_set_tlsext_host_name(impl->ssl, name.c_str());
  SSL* ssl = impl->ssl;
  absl::StatusOr<int> done = impl->Drive([ssl] { return SSL_connect(ssl); }, deadline);
  if (!done.ok()) return done.status();
  return std::unique_ptr<TlsChannel>(new TlsChannel(std::move(impl)));
}

absl::Status TlsChannel::Write(absl::string_view data, absl::Duration timeout) {
  const Clock::time_point deadline = Clock::now() + absl::ToChronoNanoseconds(timeout);
  SSL* ssl = impl_->ssl;
  for (size_t off = 0; off < data.size();) {
    const size_t len = std::min<size_t>(data.size() - off, 1 << 20);
    const char* p = data.data() + off;
    absl::StatusOr<int> n =
        impl_->Drive([ssl, p, len] { return SSL_write(ssl, p, static_cast<int>(len)); }, deadline);
    if (!n.ok()) return n.status();
    off += static_cast<size_t>(*n);
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> TlsChannel::Read(char* buf, size_t len, absl::Duration timeout) {
  const Clock::time_point deadline = Clock::now() + absl::ToChronoNanoseconds(timeout);
  SSL* ssl = impl_->ssl;
  const int cap = static_cast<int>(std::min<size_t>(len, 1 << 20));
  absl::StatusOr<int> n =
      impl_->Drive([ssl, buf, cap] { return SSL_read(ssl, buf, cap); }, deadline);
  if (!n.ok()) return n.status();
  return static_cast<size_t>(*n);
}

std::string TlsChannel::version() const { return SSL_get_version(impl_->ssl); }

}  // namespace redlock::testkit
