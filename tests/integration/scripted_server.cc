#include "tests/integration/scripted_server.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/sha1.h"

namespace redlock::testkit {

std::string ScriptedServer::Bulk(const std::string& s) {
  return absl::StrCat("$", s.size(), "\r\n", s, "\r\n");
}

std::string ScriptedServer::Default(const std::vector<std::string>& command,
                                    const std::string& run_id) {
  if (command.empty()) return Error("ERR empty command");
  std::string name = absl::AsciiStrToUpper(command[0]);
  if (name == "AUTH" || name == "SELECT" || name == "CLIENT") return "+OK\r\n";
  if (name == "PING") return command.size() > 1 ? Bulk(command[1]) : "+PONG\r\n";
  if (name == "SCRIPT" && command.size() == 3) {
    return Bulk(internal::Sha1Hex(command[2]));
  }
  if (name == "INFO") {
    return Bulk(absl::StrCat("# Server\r\nredis_version:7.0.15\r\nrun_id:", run_id, "\r\n"));
  }
  return Error(absl::StrCat("ERR unknown command '", command[0], "'"));
}

absl::StatusOr<std::unique_ptr<ScriptedServer>> ScriptedServer::Start(Handler handler) {
  std::unique_ptr<ScriptedServer> s(new ScriptedServer());
  s->handler_ = std::move(handler);
  s->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) return absl::InternalError(strerror(errno));
  int one = 1;
  setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(s->listen_fd_, 16) != 0) {
    return absl::InternalError(absl::StrCat("bind/listen: ", strerror(errno)));
  }
  socklen_t len = sizeof(addr);
  getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = ntohs(addr.sin_port);
  ScriptedServer* raw = s.get();
  s->thread_ = std::thread([raw] { raw->Run(); });
  return s;
}

ScriptedServer::~ScriptedServer() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

void ScriptedServer::Run() {
  struct Conn {
    redisReader* reader;
  };
  std::map<int, Conn> conns;
  while (!stop_.load()) {
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& [fd, c] : conns) fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 20) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) conns[fd] = Conn{redisReaderCreate()};
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLERR | POLLHUP))) continue;
      int fd = fds[i].fd;
      Conn& c = conns[fd];
      char buf[16384];
      ssize_t r = read(fd, buf, sizeof(buf));
      bool closed = r <= 0;
      if (!closed) redisReaderFeed(c.reader, buf, static_cast<size_t>(r));
      std::string out;
      for (int guard = 0; !closed && guard < 10000; ++guard) {
        void* raw = nullptr;
        if (redisReaderGetReply(c.reader, &raw) != REDIS_OK) {
          closed = true;
          break;
        }
        if (raw == nullptr) break;
        auto* reply = static_cast<redisReply*>(raw);
        std::vector<std::string> command;
        if (reply->type == REDIS_REPLY_ARRAY) {
          for (size_t j = 0; j < reply->elements; ++j) {
            command.emplace_back(reply->element[j]->str, reply->element[j]->len);
          }
        }
        freeReplyObject(raw);
        out += handler_(command);
      }
      size_t off = 0;
      while (!closed && off < out.size()) {
        ssize_t w = send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (w <= 0) {
          closed = true;
          break;
        }
        off += static_cast<size_t>(w);
      }
      if (closed) {
        redisReaderFree(c.reader);
        close(fd);
        conns.erase(fd);
      }
    }
  }
  for (auto& [fd, c] : conns) {
    redisReaderFree(c.reader);
    close(fd);
  }
}

}  // namespace redlock::testkit
