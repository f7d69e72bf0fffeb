#include "backends/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace redlock::backends {
namespace {

int PollMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60000));
}

}  // namespace

HttpClient::HttpClient(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {
  if (endpoints_.empty()) endpoints_.push_back("127.0.0.1:2379");
}

HttpClient::~HttpClient() { Close(); }

void HttpClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  buffer_.clear();
}

void HttpClient::Fail() {
  Close();
  index_ = (index_ + 1) % endpoints_.size();
}

absl::Status HttpClient::Connect(absl::Time deadline) {
  const std::string& ep = endpoints_[index_];
  std::pair<std::string, std::string> hp = absl::StrSplit(ep, absl::MaxSplits(':', 1));
  int port = 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (!absl::SimpleAtoi(hp.second, &port) ||
      inet_pton(AF_INET, hp.first.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad endpoint ", ep));
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS) {
    return absl::UnavailableError(absl::StrCat(ep, ": connect: ", strerror(errno)));
  }
  pollfd p{fd_, POLLOUT, 0};
  int r = poll(&p, 1, PollMs(deadline));
  if (r <= 0) return absl::DeadlineExceededError(absl::StrCat(ep, ": connect timed out"));
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return absl::UnavailableError(absl::StrCat(ep, ": connect: ", strerror(err)));
  return absl::OkStatus();
}

absl::StatusOr<HttpReply> HttpClient::Post(absl::string_view path, absl::string_view body,
                                           absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  if (fd_ < 0) {
    absl::Status s = Connect(deadline);
    if (!s.ok()) {
      Fail();
      return s;
    }
  }
  const std::string& ep = endpoints_[index_];
  std::string req = absl::StrCat(
      "POST ", path, " HTTP/1.1\r\nHost: ", ep,
      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  size_t sent = 0;
  for (int i = 0; i < 100000 && sent < req.size(); ++i) {
    ssize_t w = send(fd_, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (w > 0) {
      sent += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR) {
      std::string e = absl::StrCat(ep, ": send: ", strerror(errno));
      Fail();
      return absl::UnavailableError(e);
    }
    pollfd p{fd_, POLLOUT, 0};
    if (poll(&p, 1, PollMs(deadline)) <= 0) {
      std::string e = absl::StrCat(ep, ": no reply within ", absl::FormatDuration(timeout));
      Fail();
      return absl::DeadlineExceededError(e);
    }
  }
  // Read until one whole reply is in buffer_.
  HttpReply reply;
  size_t header_end = std::string::npos;
  int64_t content_length = -1;
  bool chunked = false;
  bool close_after = false;
  for (int i = 0; i < 1000000; ++i) {
    if (header_end == std::string::npos) {
      header_end = buffer_.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        std::vector<absl::string_view> lines =
            absl::StrSplit(absl::string_view(buffer_).substr(0, header_end), "\r\n");
        std::vector<absl::string_view> status = absl::StrSplit(lines[0], ' ');
        if (status.size() < 2 || !absl::SimpleAtoi(status[1], &reply.status)) {
          Fail();
          return absl::InternalError(absl::StrCat(ep, ": bad status line"));
        }
        for (size_t k = 1; k < lines.size(); ++k) {
          std::pair<absl::string_view, absl::string_view> kv =
              absl::StrSplit(lines[k], absl::MaxSplits(':', 1));
          std::string name = absl::AsciiStrToLower(kv.first);
          absl::string_view value = absl::StripAsciiWhitespace(kv.second);
          if (name == "content-length") (void)absl::SimpleAtoi(value, &content_length);
          if (name == "transfer-encoding" &&
              absl::StrContains(absl::AsciiStrToLower(value), "chunked"))
            chunked = true;
          if (name == "connection" && absl::StrContains(absl::AsciiStrToLower(value), "close"))
            close_after = true;
        }
      }
    }
    if (header_end != std::string::npos) {
      const size_t start = header_end + 4;
      if (!chunked && content_length >= 0 &&
          buffer_.size() >= start + static_cast<size_t>(content_length)) {
        reply.body = buffer_.substr(start, static_cast<size_t>(content_length));
        buffer_.erase(0, start + static_cast<size_t>(content_length));
        if (close_after) Close();
        return reply;
      }
      if (chunked) {
        // Decode as far as the bytes go; done at the zero-size chunk.
        std::string decoded;
        size_t pos = start;
        bool done = false;
        for (int c = 0; c < 100000; ++c) {
          size_t eol = buffer_.find("\r\n", pos);
          if (eol == std::string::npos) break;
          size_t size = 0;
          std::string hex(buffer_.substr(pos, eol - pos));
          hex = hex.substr(0, hex.find(';'));
          if (!absl::SimpleHexAtoi(hex, &size)) {
            Fail();
            return absl::InternalError(absl::StrCat(ep, ": bad chunk"));
          }
          if (size == 0) {
            size_t end = buffer_.find("\r\n", eol + 2);
            if (end == std::string::npos) break;
            buffer_.erase(0, end + 2);
            done = true;
            break;
          }
          if (buffer_.size() < eol + 2 + size + 2) break;
          decoded.append(buffer_, eol + 2, size);
          pos = eol + 2 + size + 2;
        }
        if (done) {
          reply.body = std::move(decoded);
          if (close_after) Close();
          return reply;
        }
      }
    }
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, PollMs(deadline));
    if (r <= 0) {
      std::string e = absl::StrCat(ep, ": no reply within ", absl::FormatDuration(timeout));
      Fail();
      return absl::DeadlineExceededError(e);
    }
    char chunk[16384];
    ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      std::string e = absl::StrCat(
          ep, n == 0 ? ": connection closed" : ": recv: ", n == 0 ? "" : strerror(errno));
      Fail();
      return absl::UnavailableError(e);
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
  Fail();
  return absl::InternalError(absl::StrCat(ep, ": reply too long"));
}

}  // namespace redlock::backends
