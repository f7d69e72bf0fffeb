#include "redlock/internal/connection.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/jitter.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

// The check of a plain step: any reply but an error.
std::function<std::string(const Reply&)> ExpectOk(std::string step) {
  return [step = std::move(step)](const Reply& r) -> std::string {
    return r.is_error() ? HandshakeError(step, r) : "";
  };
}

}  // namespace

std::string HandshakeError(absl::string_view step, const Reply& r) {
  if (absl::StrContains(r.str, "NOAUTH")) {
    return absl::StrCat(
        "authentication required: the node has a password, give it in the endpoint "
        "(redis://:password@host:port) (",
        r.str, ")");
  }
  if (step == "AUTH") return absl::StrCat("authentication failed: ", r.str);
  return absl::StrCat(step, " failed: ", r.str);
}

std::vector<HandshakeStep> LoginSteps(const Endpoint& endpoint) {
  std::vector<HandshakeStep> steps;
  if (!endpoint.password.empty()) {
    HandshakeStep auth;
    if (endpoint.username.empty()) {
      AppendCommand(&auth.payload, {"AUTH", endpoint.password});
    } else {
      AppendCommand(&auth.payload, {"AUTH", endpoint.username, endpoint.password});
    }
    auth.check = ExpectOk("AUTH");
    steps.push_back(std::move(auth));
  }
  if (endpoint.db != 0) {
    HandshakeStep select;
    AppendCommand(&select.payload, {"SELECT", std::to_string(endpoint.db)});
    select.check = ExpectOk("SELECT");
    steps.push_back(std::move(select));
  }
  return steps;
}

Connection::Connection(Settings settings)
    : settings_(std::move(settings)), backoff_(settings_.backoff_min) {}

Connection::~Connection() { Close(); }

bool Connection::Start(std::vector<HandshakeStep> steps, std::string* why) {
  Close();
  ++generation_;
  steps_ = std::move(steps);
  steps_done_ = 0;
  got_bytes_ = false;
  connect_deadline_ = Clock::now() + absl::ToChronoNanoseconds(settings_.connect_timeout);
  int fd = -1;
  absl::Status st = StartTcpConnect(settings_.endpoint.host, settings_.endpoint.port, &fd);
  if (!st.ok()) {
    *why = std::string(st.message());
    Close();
    return false;
  }
  connecting_fd_ = fd;
  state_ = State::kConnecting;
  reader_ = std::make_unique<ReplyReader>(settings_.reply_limits);
  return true;
}

void Connection::Close() {
  if (state_ == State::kDisconnected && stream_ == nullptr && connecting_fd_ < 0) return;
  if (connecting_fd_ >= 0) close(connecting_fd_);
  connecting_fd_ = -1;
  // A writer on another thread may still hold the stream: it closes the
  // socket when the last reference goes.
  stream_.reset();
  reader_.reset();
  state_ = State::kDisconnected;
  ++generation_;
  next_connect_ = Clock::now() + absl::ToChronoNanoseconds(backoff_ * UniformReal(0.8, 1.2));
  backoff_ = std::min(backoff_ * 2, settings_.backoff_max);
}

Connection::Progress Connection::Establish() {
  Progress p;
  switch (stream_->Establish()) {
    case Stream::Io::kDone: {
      state_ = State::kHandshake;
      std::string hello;
      for (const HandshakeStep& s : steps_) hello += s.payload;
      if (steps_.empty()) {
        state_ = State::kReady;
        backoff_ = settings_.backoff_min;
        p.ready = true;
        return p;
      }
      Progress w = Write(&hello);
      if (!w.failure.empty()) return w;
      return hello.empty() ? p
                           : Progress{false, "could not send the handshake in one write", false};
    }
    case Stream::Io::kWantRead:
      return p;
    case Stream::Io::kWantWrite:
      p.want_write = true;
      return p;
    default:
      p.failure = stream_->error();
      return p;
  }
}

Connection::Progress Connection::HandleIo(uint32_t events, std::vector<Reply>* replies) {
  Progress p;
  if (state_ == State::kConnecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return p;
    int err = ConnectResult(connecting_fd_);
    if (err != 0) {
      p.failure = ErrnoText(err);
      return p;
    }
    int fd = connecting_fd_;
    connecting_fd_ = -1;
    std::string error;
    std::unique_ptr<Stream> stream =
        settings_.make_stream ? settings_.make_stream(fd, &error) : std::make_unique<TcpStream>(fd);
    if (stream == nullptr) {
      close(fd);
      p.failure = error;
      return p;
    }
    stream_ = std::move(stream);
    state_ = State::kEstablishing;
  }
  if (state_ == State::kEstablishing) {
    p = Establish();
    if (!p.failure.empty() || state_ == State::kEstablishing) return p;
    if (p.ready) return p;
  }
  if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && state_ != State::kHandshake) return p;
  Progress read = ReadAll(replies);
  read.want_write = read.want_write || p.want_write;
  return read;
}

Connection::Progress Connection::ReadAll(std::vector<Reply>* replies) {
  Progress p;
  char buf[65536];
  // Bounded: a node that sends without pause cannot hold the poller here.
  for (int i = 0; i < 16; ++i) {
    size_t n = 0;
    Stream::Io io = stream_->Read(buf, sizeof(buf), &n);
    if (io == Stream::Io::kWantRead) break;
    if (io == Stream::Io::kWantWrite) {
      p.want_write = true;
      break;
    }
    if (io != Stream::Io::kDone) {
      p.failure = stream_->error();
      if (!settings_.make_stream && !got_bytes_) {
        // A TLS port resets a plaintext client at its first bytes.
        absl::StrAppend(&p.failure,
                        " before the node answered anything (does it speak TLS only? use "
                        "rediss:// for it)");
      }
      break;
    }
    if (!settings_.make_stream && !got_bytes_ && (buf[0] == 0x15 || buf[0] == 0x16)) {
      // A TLS alert or handshake record where a Redis reply should start.
      p.failure = "the node answered in TLS: use rediss:// for it";
      break;
    }
    got_bytes_ = true;
    if (!reader_->Feed(buf, n)) {
      p.failure = absl::StrCat("protocol error: ", reader_->error());
      return p;
    }
    // Framed after every read, so the reader's limits hold before more of
    // a hostile reply is buffered.
    if (!TakeReplies(replies, &p)) return p;
    if (n < sizeof(buf)) break;
  }
  return p;
}

bool Connection::TakeReplies(std::vector<Reply>* replies, Progress* p) {
  for (;;) {
    Reply reply;
    int got = reader_->Next(&reply);
    if (got < 0) {
      p->failure = absl::StrCat("protocol error: ", reader_->error());
      return false;
    }
    if (got == 0) return true;
    if (state_ == State::kHandshake) {
      std::string problem = steps_[steps_done_].check(reply);
      if (!problem.empty()) {
        p->failure = problem;
        return false;
      }
      if (++steps_done_ == steps_.size()) {
        state_ = State::kReady;
        backoff_ = settings_.backoff_min;
        p->ready = true;
      }
      continue;
    }
    replies->push_back(std::move(reply));
  }
}

Connection::Progress Connection::WriteSome(Stream& stream, std::string* out) {
  Progress p;
  size_t off = 0;
  while (off < out->size()) {
    size_t n = 0;
    Stream::Io io = stream.Write(out->data() + off, out->size() - off, &n);
    if (io == Stream::Io::kDone) {
      off += n;
    } else if (io == Stream::Io::kWantWrite || io == Stream::Io::kWantRead) {
      p.want_write = true;
      break;
    } else {
      p.failure = stream.error();
      break;
    }
  }
  out->erase(0, off);
  return p;
}

}  // namespace redlock::internal
