#include "redlock/internal/stream.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace redlock::internal {

std::string ErrnoText(int err) {
  char buf[128];
  // GNU strerror_r returns the message pointer.
  return strerror_r(err, buf, sizeof(buf));
}

absl::Status StartTcpConnect(const std::string& host, int port, int* fd_out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve host \"", host, "\": ", gai_strerror(rc)));
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    freeaddrinfo(res);
    return absl::UnavailableError(absl::StrCat("socket: ", ErrnoText(err)));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  rc = connect(fd, res->ai_addr, res->ai_addrlen);
  int err = rc == 0 ? 0 : errno;
  freeaddrinfo(res);
  if (rc != 0 && err != EINPROGRESS) {
    close(fd);
    return absl::UnavailableError(ErrnoText(err));
  }
  *fd_out = fd;
  return absl::OkStatus();
}

int ConnectResult(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

TcpStream::~TcpStream() { close(fd_); }

Stream::Io TcpStream::Read(char* buf, size_t len, size_t* n) {
  for (;;) {
    ssize_t r = ::read(fd_, buf, len);
    if (r > 0) {
      *n = static_cast<size_t>(r);
      return Io::kDone;
    }
    if (r == 0) {
      error_ = "connection closed by the node";
      return Io::kClosed;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kWantRead;
    error_ = ErrnoText(errno);
    return Io::kError;
  }
}

Stream::Io TcpStream::Write(const char* buf, size_t len, size_t* n) {
  for (;;) {
    ssize_t w = ::send(fd_, buf, len, MSG_NOSIGNAL);
    if (w >= 0) {
      *n = static_cast<size_t>(w);
      return Io::kDone;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kWantWrite;
    error_ = absl::StrCat("write failed: ", ErrnoText(errno));
    return Io::kError;
  }
}

}  // namespace redlock::internal
